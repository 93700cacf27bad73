"""Connection policy of the server (gRPC core channel arguments) and the plaintext rule.

Keepalive finds dead clients; the ping policy refuses clients that ping too often; an idle
connection is closed after a while; every connection is closed after a maximum age (with a grace
for calls in flight), so clients reconnect and spread over replicas added since; a connection
may carry a bounded number of concurrent streams. docs/service.md lists the defaults.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

from planner.errors import InvalidInput

__all__ = ["ConnectionPolicy", "host_of", "is_loopback", "require_safe_transport"]


@dataclass(frozen=True)
class ConnectionPolicy:
    """Seconds (0 where allowed: no limit) and counts; see grpc_options for the arguments."""

    keepalive_s: float = 60.0  # ping a connection silent this long
    keepalive_timeout_s: float = 20.0  # ... and close it if the ping is not answered within this
    min_client_ping_interval_s: float = 10.0  # a client pinging more often gets a strike
    max_ping_strikes: int = 2  # ... and after this many, GOAWAY
    max_connection_idle_s: float = 300.0  # no call for this long: closed (0: never)
    max_connection_age_s: float = 1800.0  # any connection closed after this (0: never); +-10% jitter
    max_connection_age_grace_s: float = 600.0  # ... giving the calls in flight this long to finish
    max_streams_per_connection: int = 100  # concurrent calls one HTTP/2 connection may carry

    def __post_init__(self) -> None:
        for name in ("keepalive_s", "keepalive_timeout_s", "min_client_ping_interval_s"):
            if not 0.001 <= getattr(self, name) <= 86400:
                raise InvalidInput(name, f"must be in [0.001, 86400] s, got {getattr(self, name)}")
        for name, flag in (
            ("max_connection_idle_s", "--max-connection-idle-s"),
            ("max_connection_age_s", "--max-connection-age-s"),
            ("max_connection_age_grace_s", "--max-connection-age-grace-s"),
        ):
            if not 0 <= getattr(self, name) <= 30 * 86400:
                raise InvalidInput(flag, f"must be in [0, 2592000] s, got {getattr(self, name)}")
        if not 0 <= self.max_ping_strikes <= 1000:
            raise InvalidInput("max_ping_strikes", f"must be in [0, 1000], got {self.max_ping_strikes}")
        if not 1 <= self.max_streams_per_connection <= 10_000:
            raise InvalidInput(
                "--max-streams-per-connection",
                f"must be in [1, 10000], got {self.max_streams_per_connection}",
            )

    def grpc_options(self) -> list[tuple[str, Any]]:
        def ms(s: float) -> int:
            return max(1, round(s * 1000))

        options: list[tuple[str, Any]] = [
            ("grpc.keepalive_time_ms", ms(self.keepalive_s)),
            ("grpc.keepalive_timeout_ms", ms(self.keepalive_timeout_s)),
            ("grpc.keepalive_permit_without_calls", 1),
            # The server's tolerance of client pings (GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_...).
            ("grpc.http2.min_ping_interval_without_data_ms", ms(self.min_client_ping_interval_s)),
            ("grpc.http2.max_ping_strikes", self.max_ping_strikes),
            ("grpc.max_concurrent_streams", self.max_streams_per_connection),
        ]
        if self.max_connection_idle_s:
            options.append(("grpc.max_connection_idle_ms", ms(self.max_connection_idle_s)))
        if self.max_connection_age_s:
            options += [
                ("grpc.max_connection_age_ms", ms(self.max_connection_age_s)),
                ("grpc.max_connection_age_grace_ms", ms(self.max_connection_age_grace_s)),
            ]
        return options


def host_of(address: str) -> str:
    """The host of "host:port" without IPv6 brackets ('[::1]:50051' -> '::1')."""
    host, sep, _ = address.rpartition(":")
    return (host if sep else address).strip("[]")


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def require_safe_transport(address: str, tls: bool, plaintext: bool) -> None:
    """Plaintext only where nothing else can listen in: a loopback host or a unix socket, unless
    the caller says `plaintext` (a mesh or another layer encrypts, or the network is trusted)."""
    if tls or plaintext or address.startswith("unix:") or is_loopback(host_of(address)):
        return
    raise InvalidInput(
        "--plaintext",
        f"serving without TLS on {host_of(address) or address}, which is not a loopback address: give "
        "--tls-cert and --tls-key, or --plaintext to serve unencrypted on purpose",
    )
