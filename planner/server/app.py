"""The gRPC server: PlannerService with health checking and reflection, the job pool, metrics,
TLS, and a graceful drain.

`create_server(...)` builds and starts a server and returns it with its port (tests use port 0);
`serve(...)` is `capplan serve`: it logs, waits, and on SIGTERM or SIGINT drains: health goes to
NOT_SERVING, new calls are refused, calls in flight get `grace_s` to finish.
"""

from __future__ import annotations

import signal
import threading
import time
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from planner.errors import InvalidInput
from planner.server.cache import ResponseCache
from planner.server.interceptors import ServiceInterceptor
from planner.server.observability import Metrics, configure_logging, logger, route_native_stderr
from planner.server.policy import Limits
from planner.server.pool import JobPool, default_workers
from planner.server.servicer import PlannerServicer
from planner.v1 import planner_service_pb2 as pb
from planner.v1 import planner_service_pb2_grpc as pb_grpc

__all__ = ["SERVICE_NAME", "PlannerServer", "TlsFiles", "create_server", "serve"]

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["PlannerService"].full_name
DEFAULT_PORT = 50051
DEFAULT_GRACE_S = 30.0
DEFAULT_QUEUE_PER_WORKER = 32  # requests admitted per worker beyond the one it computes
MAX_SEND_MESSAGE_BYTES = 64 * 2**20  # a simulation's per-minute series can be large
SPARE_THREADS = 16
DEFAULT_CACHE_BYTES = 64 * 2**20  # health checks, reflection and catalog calls while every job slot is taken


@dataclass(frozen=True)
class TlsFiles:
    """PEM files: the server's certificate chain and key; with `client_ca_file`, clients must
    present a certificate signed by it (mTLS)."""

    cert_file: str
    key_file: str
    client_ca_file: str | None = None

    def credentials(self) -> grpc.ServerCredentials:
        def read(path: str, field: str) -> bytes:
            try:
                return Path(path).read_bytes()
            except OSError as exc:
                raise InvalidInput(field, f"cannot read {path}: {exc.strerror or exc}") from None

        key = read(self.key_file, "--tls-key")
        cert = read(self.cert_file, "--tls-cert")
        ca = None if self.client_ca_file is None else read(self.client_ca_file, "--tls-client-ca")
        return grpc.ssl_server_credentials(
            [(key, cert)], root_certificates=ca, require_client_auth=ca is not None
        )


class PlannerServer:
    """A started server. `stop()` drains it; `wait()` blocks until it has stopped."""

    def __init__(
        self,
        server: grpc.Server,
        pool: JobPool,
        health_servicer: health.HealthServicer,
        metrics: Metrics,
        port: int,
        metrics_port: int,
    ) -> None:
        self.grpc_server = server
        self.pool = pool
        self.health = health_servicer
        self.metrics = metrics
        self.port = port
        self.metrics_port = metrics_port
        self._stopped = threading.Event()
        self._stop_lock = threading.Lock()
        self._stopping = False

    def stop(self, grace_s: float | None = DEFAULT_GRACE_S, health_delay_s: float = 0.0) -> None:
        """Drain: health NOT_SERVING (then `health_delay_s` for load balancers to notice), refuse
        new calls, give calls in flight `grace_s` (None: forever) before cancelling them, then
        stop the workers and the metrics endpoint. Idempotent."""
        with self._stop_lock:
            if self._stopping:
                self._stopped.wait()
                return
            self._stopping = True
        log = logger()
        self.health.enter_graceful_shutdown()
        log.info("draining", grace_s=grace_s, in_flight=self.pool.admitted)
        if health_delay_s > 0:
            time.sleep(health_delay_s)
        self.grpc_server.stop(grace_s).wait()
        self.pool.close(wait=False)
        self.metrics.stop_http()
        log.info("stopped")
        self._stopped.set()

    def wait(self, timeout_s: float | None = None) -> bool:
        return self._stopped.wait(timeout_s)


def _warm_server_process() -> None:
    """What this process itself runs (conversions, catalog listings), imported before the first
    call; the solvers are imported only by the workers (planner.server.preload)."""
    import planner.api  # noqa: F401
    from planner.server import convert

    convert.schema_mismatches()


def create_server(
    address: str = f"[::]:{DEFAULT_PORT}",
    *,
    workers: int | None = None,
    queue_size: int | None = None,
    tls: TlsFiles | None = None,
    metrics_port: int = 0,
    metrics_host: str = "0.0.0.0",
    limits: Limits | None = None,
    cache_bytes: int = DEFAULT_CACHE_BYTES,
    warm: bool = True,
) -> tuple[PlannerServer, int]:
    """Build and start a server on `address` ("host:port"; port 0 picks a free one). `workers`:
    solver processes (default: one per core); `queue_size`: requests admitted beyond them before
    RESOURCE_EXHAUSTED (default 32 per worker); `metrics_port` 0: no metrics endpoint;
    `cache_bytes`: memory for answers to repeated requests (0: none). Returns the server and the
    port it listens on."""
    limits = limits or Limits()
    n_workers = workers or default_workers()
    queue = DEFAULT_QUEUE_PER_WORKER * n_workers if queue_size is None else queue_size
    metrics = Metrics()
    pool = JobPool(n_workers, queue, on_depth=metrics.set_depth)
    try:
        workers_up = pool.warm() if warm else None  # the forkserver imports while this process does
        _warm_server_process()

        threads = pool.capacity + SPARE_THREADS
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="capplan-rpc"),
            interceptors=[ServiceInterceptor(metrics)],
            maximum_concurrent_rpcs=threads,
            options=[
                ("grpc.max_receive_message_length", limits.max_message_bytes),
                ("grpc.max_send_message_length", MAX_SEND_MESSAGE_BYTES),
                ("grpc.so_reuseport", 0),
            ],
        )
        servicer = PlannerServicer(pool, limits, metrics, ResponseCache(cache_bytes))
        pb_grpc.add_PlannerServiceServicer_to_server(servicer, server)
        health_servicer = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
        reflection.enable_server_reflection(
            (
                SERVICE_NAME,
                health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
                reflection.SERVICE_NAME,
            ),
            server,
        )
        try:
            port = (
                server.add_secure_port(address, tls.credentials())
                if tls
                else server.add_insecure_port(address)
            )
        except RuntimeError as exc:
            raise InvalidInput("address", f"cannot listen on {address}: {exc}") from None
        if workers_up is not None:
            workers_up()
        try:
            mport = metrics.serve_http(metrics_port, metrics_host)
        except OSError as exc:
            raise InvalidInput(
                "--metrics-port", f"cannot listen on {metrics_host}:{metrics_port}: {exc}"
            ) from None
        server.start()
        for name in ("", SERVICE_NAME):
            health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    except BaseException:
        pool.close(wait=False)
        raise
    return PlannerServer(server, pool, health_servicer, metrics, port, mport), port


def serve(
    host: str = "[::]",
    port: int = DEFAULT_PORT,
    *,
    grace_s: float = DEFAULT_GRACE_S,
    health_delay_s: float = 0.0,
    log_json: bool | None = None,
    **options: Any,
) -> int:
    """Run until SIGTERM or SIGINT, then drain (see PlannerServer.stop). Logs one JSON line per
    RPC when stderr is not a terminal."""
    if configure_logging(log_json):
        route_native_stderr()  # gRPC core's and any other fd 2 line: a JSON log line too, until exit
    log = logger()
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        log.info("signal", signal=signal.Signals(signum).name)
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        server, bound = create_server(f"{host}:{port}", **options)
        log.info(
            "serving",
            address=f"{host}:{bound}",
            port=bound,
            workers=server.pool.workers,
            queue=server.pool.capacity - server.pool.workers,
            tls=options.get("tls") is not None,
            mtls=getattr(options.get("tls"), "client_ca_file", None) is not None,
            metrics_port=server.metrics_port or None,
        )
        while not stop.wait(3600):
            pass
        server.stop(grace_s, health_delay_s)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return 0
