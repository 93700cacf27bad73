"""`capplan serve`: the gRPC service planner.v1.PlannerService (docs/service.md), with health
checking, reflection, Prometheus metrics and a graceful drain on SIGTERM."""

from __future__ import annotations

import argparse
from typing import Any

from planner.errors import InvalidInput, echo


def register(sub: Any) -> None:
    p = sub.add_parser("serve", help="run the gRPC service (plan, evaluate, simulate, ... over the network)")
    p.add_argument("--host", default="[::]", help="address to listen on (default: all, IPv4 and IPv6)")
    p.add_argument("--port", default="50051", help="gRPC port (default 50051; 0: any free port, logged)")
    p.add_argument("--metrics-port", default="0", help="Prometheus /metrics port (default 0: none)")
    p.add_argument("--workers", help="solver processes (default: one per core)")
    p.add_argument(
        "--queue", help="requests queued beyond the workers before RESOURCE_EXHAUSTED (default 32 per worker)"
    )
    p.add_argument(
        "--grace-s", default="30", help="on SIGTERM, seconds calls in flight get to finish (default 30)"
    )
    p.add_argument(
        "--drain-delay-s",
        default="0",
        help="on SIGTERM, seconds health reports NOT_SERVING while calls are still taken, so load "
        "balancers stop sending first (default 0)",
    )
    p.add_argument("--tls-cert", help="PEM certificate chain: serve TLS (with --tls-key)")
    p.add_argument("--tls-key", help="PEM private key of --tls-cert")
    p.add_argument("--tls-client-ca", help="PEM CA: require client certificates it signed (mTLS)")
    p.add_argument(
        "--cache-mib", default="64", help="memory for answers to repeated requests, MiB (default 64; 0: none)"
    )
    p.add_argument("--max-message-mib", default="16", help="largest request accepted, MiB (default 16)")
    p.add_argument("--log-format", choices=("auto", "json", "console"), default="auto",
                   help="auto: JSON lines unless stderr is a terminal")  # fmt: skip
    p.set_defaults(handler=_serve)


def _int(flag: str, text: str | None, lo: int, hi: int) -> int | None:
    if text is None:
        return None
    try:
        v = int(text)
    except ValueError:
        raise InvalidInput(flag, f"must be an integer in [{lo}, {hi}], got {echo(text)}") from None
    if not lo <= v <= hi:
        raise InvalidInput(flag, f"must be an integer in [{lo}, {hi}], got {v}")
    return v


def _seconds(flag: str, text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise InvalidInput(flag, f"must be a number of seconds >= 0, got {echo(text)}") from None
    if not v >= 0 or v == float("inf"):
        raise InvalidInput(flag, f"must be a number of seconds >= 0, got {text}")
    return v


def _serve(args: argparse.Namespace) -> int:
    from planner.server.observability import default_grpc_verbosity

    default_grpc_verbosity()  # before grpc is imported: it reads GRPC_VERBOSITY once
    from planner.server.app import TlsFiles, serve
    from planner.server.policy import Limits

    if (args.tls_cert is None) != (args.tls_key is None):
        raise InvalidInput(
            "--tls-cert" if args.tls_cert is None else "--tls-key", "give --tls-cert and --tls-key together"
        )
    if args.tls_client_ca is not None and args.tls_cert is None:
        raise InvalidInput(
            "--tls-client-ca", "needs --tls-cert and --tls-key (mTLS is TLS with client certificates)"
        )
    tls = None if args.tls_cert is None else TlsFiles(args.tls_cert, args.tls_key, args.tls_client_ca)
    mib = _int("--max-message-mib", args.max_message_mib, 1, 1024)
    assert mib is not None
    return serve(
        args.host,
        _int("--port", args.port, 0, 65535) or 0,
        grace_s=_seconds("--grace-s", args.grace_s),
        health_delay_s=_seconds("--drain-delay-s", args.drain_delay_s),
        log_json={"auto": None, "json": True, "console": False}[args.log_format],
        workers=_int("--workers", args.workers, 1, 256),
        queue_size=_int("--queue", args.queue, 0, 100_000),
        tls=tls,
        metrics_port=_int("--metrics-port", args.metrics_port, 0, 65535) or 0,
        limits=Limits(max_message_bytes=mib * 2**20),
        cache_bytes=(_int("--cache-mib", args.cache_mib, 0, 65536) or 0) * 2**20,
    )
