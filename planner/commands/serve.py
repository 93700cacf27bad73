"""`capplan serve`: the gRPC service planner.v1.PlannerService (docs/service.md), with health
checking, reflection, Prometheus metrics and a graceful drain on SIGTERM."""

from __future__ import annotations

import argparse
from typing import Any

from planner.errors import InvalidInput, echo


def register(sub: Any) -> None:
    p = sub.add_parser("serve", help="run the gRPC service (plan, evaluate, simulate, ... over the network)")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only; [::]: all, IPv4 and IPv6)",
    )
    p.add_argument("--port", default="50051", help="gRPC port (default 50051; 0: any free port, logged)")
    p.add_argument("--metrics-port", default="0", help="Prometheus /metrics port (default 0: none)")
    p.add_argument("--workers", help="solver processes (default: one per core)")
    p.add_argument(
        "--interactive-workers",
        default="1",
        help="processes beyond --workers that answer only Evaluate and Analyze, so they never wait "
        "behind plans and simulations (default 1; 0: none)",
    )
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
    # Per-job limits in the workers (docs/service.md, "Cancellation, limits and drain").
    p.add_argument(
        "--job-memory-mib",
        default="4096",
        help="memory one job may allocate in its worker, MiB; over it the call fails RESOURCE_EXHAUSTED "
        "(default 4096; 0: no limit)",
    )
    p.add_argument(
        "--job-cpu-s",
        default="3900",
        help="CPU seconds one job may use; over it the call fails RESOURCE_EXHAUSTED "
        "(default 3900: a Plan's longest solver limit and its candidates; 0: no limit)",
    )
    p.add_argument("--log-format", choices=("auto", "json", "console"), default="auto",
                   help="auto: JSON lines unless stderr is a terminal")  # fmt: skip
    _add_security_flags(p)
    p.set_defaults(handler=_serve)


def _add_security_flags(p: Any) -> None:
    """Deployment security, fairness and connection policy (docs/service.md)."""
    p.add_argument(
        "--plaintext",
        action="store_true",
        help="serve without TLS on a host that is not loopback (a mesh or trusted network encrypts)",
    )
    p.add_argument("--metrics-host", help="address of /metrics (default: --host)")
    p.add_argument("--reflection", action="store_true", help="register gRPC server reflection (default off)")
    p.add_argument(
        "--auth-token-file",
        help="bearer tokens, one a line (`[NAME] TOKEN`): every call but health must send one",
    )
    p.add_argument(
        "--max-calls", help="long calls (all but health, ListCatalog) at once (default 2 x (workers + queue))"
    )
    p.add_argument(
        "--max-calls-per-peer", help="long calls one peer may hold (default workers + queue + its streams)"
    )
    p.add_argument("--max-streams-per-peer", help="Sweeps one peer may hold (default 8)")
    p.add_argument("--max-streams-per-connection", default="100", help="concurrent calls per connection")
    p.add_argument(
        "--max-connection-idle-s", default="300", help="close connections idle this long (0: never)"
    )
    p.add_argument("--max-connection-age-s", default="1800", help="close connections this old (0: never)")
    p.add_argument(
        "--max-connection-age-grace-s",
        default="600",
        help="calls in flight on a closing old connection get this",
    )


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
    security = _security_options(args)
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
        job_memory_mib=_int("--job-memory-mib", args.job_memory_mib, 0, 1_048_576) or None,
        job_cpu_s=_seconds("--job-cpu-s", args.job_cpu_s) or None,
        interactive_workers=_int("--interactive-workers", args.interactive_workers, 0, 64) or 0,
        **security,
    )


def _security_options(args: argparse.Namespace) -> dict[str, Any]:
    """create_server's keywords for the flags of _add_security_flags."""
    from planner.server.admission import Fairness
    from planner.server.auth import BearerTokens
    from planner.server.transport import ConnectionPolicy

    fairness = Fairness(
        _int("--max-calls", args.max_calls, 1, 100_000),
        _int("--max-calls-per-peer", args.max_calls_per_peer, 1, 100_000),
        _int("--max-streams-per-peer", args.max_streams_per_peer, 1, 100_000),
    )
    connections = ConnectionPolicy(
        max_streams_per_connection=_int(
            "--max-streams-per-connection", args.max_streams_per_connection, 1, 10_000
        )
        or 1,
        max_connection_idle_s=_seconds("--max-connection-idle-s", args.max_connection_idle_s),
        max_connection_age_s=_seconds("--max-connection-age-s", args.max_connection_age_s),
        max_connection_age_grace_s=_seconds("--max-connection-age-grace-s", args.max_connection_age_grace_s),
    )
    return {
        "plaintext": args.plaintext,
        "metrics_host": args.metrics_host,
        "reflection": args.reflection,
        "auth": None if args.auth_token_file is None else BearerTokens.from_file(args.auth_token_file),
        "fairness": fairness,
        "connections": connections,
    }
