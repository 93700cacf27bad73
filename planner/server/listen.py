"""Whether `capplan serve` can listen on its address, checked with a plain socket before gRPC
binds: gRPC core reports any failure as "Failed to bind to address" plus its own log lines on
stderr; this says which flag is wrong, in one line (`--port: 50051 is in use on [::]`).

The check binds as gRPC would (SO_REUSEADDR, no SO_REUSEPORT: the server sets grpc.so_reuseport
to 0) and lets go at once; gRPC then binds for real. A wildcard host ([::], 0.0.0.0, empty) is
usable when either the dual-stack IPv6 or the IPv4 wildcard binds, as for gRPC; a name is usable
when one of its addresses binds. Anything else the check cannot judge is left to gRPC, whose
failure is still one line (`bind_error`).
"""

from __future__ import annotations

import errno
import socket

from planner.errors import InvalidInput

__all__ = ["bind_error", "check_listen"]

_WILDCARDS = ("", "::", "0.0.0.0", "*")


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    try:
        return host, int(port)
    except ValueError:
        raise InvalidInput("--port", f"{port!r} is not a port number") from None


def _candidates(host: str, port: int) -> list[tuple[int, tuple[object, ...]]]:
    bare = host.strip("[]")
    if bare in _WILDCARDS:
        return [(socket.AF_INET6, ("::", port, 0, 0)), (socket.AF_INET, ("0.0.0.0", port))]
    try:
        infos = socket.getaddrinfo(bare, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise InvalidInput("--host", f"cannot resolve {host}: {exc.strerror}") from None
    return [(family, sockaddr) for family, _, _, _, sockaddr in infos]


def _try_bind(family: int, sockaddr: tuple[object, ...]) -> OSError | None:
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and sockaddr[0] == "::":
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)  # gRPC's dual-stack wildcard
            s.bind(sockaddr)
    except OSError as exc:
        return exc
    return None


def check_listen(address: str) -> None:
    """InvalidInput naming --port or --host when no address `address` ("host:port") stands for
    can be bound now; nothing when one can (or the check cannot tell)."""
    host, port = _split(address)
    failures = []
    for family, sockaddr in _candidates(host, port):
        exc = _try_bind(family, sockaddr)
        if exc is None:
            return
        failures.append(exc)
    codes = {exc.errno for exc in failures}
    if errno.EADDRINUSE in codes:
        raise InvalidInput("--port", f"{port} is in use on {host or 'all addresses'}")
    if errno.EACCES in codes:
        raise InvalidInput("--port", f"{port}: permission denied (ports below 1024 need privileges)")
    if errno.EADDRNOTAVAIL in codes:
        raise InvalidInput("--host", f"cannot listen on {host}: no such address on this machine")
    # Anything else (no IPv6 at all, ...): gRPC decides, and bind_error words its failure.


def bind_error(address: str) -> InvalidInput:
    """gRPC's bind failure as one line (its own text names an environment variable to debug)."""
    return InvalidInput("--host", f"cannot listen on {address}: gRPC could not bind it")
