"""The gRPC server: PlannerService with health checking (and reflection when asked), the job pool,
metrics, TLS or bearer-token authentication, fair admission of long calls (planner.server.admission),
a connection policy (planner.server.transport), and a graceful drain.

`create_server(...)` builds and starts a server and returns it with its port (tests use port 0);
`serve(...)` is `capplan serve`: it logs, waits, and on SIGTERM or SIGINT drains: health goes to
NOT_SERVING, new calls are refused, calls in flight get `grace_s` to finish.
"""

from __future__ import annotations

import signal
import threading
import time
from concurrent import futures
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection as reflection_service

from planner.errors import InvalidInput
from planner.server.admission import Admission, AdmissionLimits, Fairness, FairnessInterceptor, peer_address
from planner.server.auth import AuthInterceptor, BearerTokens
from planner.server.cache import ResponseCache
from planner.server.interceptors import ServiceInterceptor
from planner.server.job_pool import JobPool, default_workers
from planner.server.jobs import WorkerLimits
from planner.server.listen import bind_error, check_listen
from planner.server.observability import Metrics, configure_logging, logger, route_native_stderr
from planner.server.policy import Limits
from planner.server.servicer import PlannerServicer
from planner.server.tls import TlsFiles
from planner.server.transport import ConnectionPolicy, host_of, require_safe_transport
from planner.v1 import planner_service_pb2 as pb
from planner.v1 import planner_service_pb2_grpc as pb_grpc

__all__ = ["SERVICE_NAME", "PlannerServer", "TlsFiles", "create_server", "serve"]

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["PlannerService"].full_name
DEFAULT_PORT = 50051
DEFAULT_GRACE_S = 30.0
DEFAULT_QUEUE_PER_WORKER = 32  # requests admitted per worker beyond the one it computes
MAX_SEND_MESSAGE_BYTES = 64 * 2**20  # a simulation's per-minute series can be large
SPARE_THREADS = 16  # serving threads long calls never hold: health, catalog calls, refusals
# gRPC's own limit on calls in progress (every kind alike): only against floods, far above ours.
RPC_BACKSTOP_PER_THREAD = 8
MIN_RPC_BACKSTOP = 1024
# After the grace, how long gRPC gets to finish cancelling calls (whose jobs have been stopped).
_STOP_WAIT_S = 1.0
_YEAR_S = 365 * 86400.0
_SIGNAL_POLL_S = 0.1  # how often serve() looks for a signal its handler recorded
DEFAULT_CACHE_BYTES = 64 * 2**20
# Per-job limits of a worker: memory beyond its size at start (a 200,000-request simulation
# peaks near 170 MiB of RSS) and CPU time (a Plan's MILP may run up to its 3600 s limit).
DEFAULT_JOB_MEMORY_MIB = 4096
DEFAULT_JOB_CPU_S = 3900.0
# A worker beyond --workers that takes only Evaluate and Analyze: they then never wait behind the
# long jobs holding every other worker (an Evaluate takes ~20 ms; the process ~150 MiB).
DEFAULT_INTERACTIVE_WORKERS = 1


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
        new calls, give calls in flight `grace_s` (None: forever) to finish, then cancel them and
        stop their jobs (a worker that does not stop within pool.KILL_AFTER_S is killed), stop
        the workers and the metrics endpoint. Ends within `health_delay_s + grace_s` and about
        two seconds. Idempotent."""
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
        # gRPC refuses new calls now and cancels the open ones _STOP_WAIT_S after the grace; by
        # then the pool has stopped their jobs, so they end UNAVAILABLE (shutting down).
        # (gRPC's own None means "abort now": forever is spelled as a year.)
        done = self.grpc_server.stop((_YEAR_S if grace_s is None else grace_s) + _STOP_WAIT_S)
        done.wait(grace_s)  # every call answered, or the grace over
        self.pool.close(wait=False)  # jobs still running stop now
        done.wait(_STOP_WAIT_S)
        self.metrics.stop_http()
        log.info("stopped")
        self._stopped.set()

    def abort(self) -> None:
        """Cut a drain short (a second SIGTERM or SIGINT): kill the workers and cancel every
        call now; the stop() in progress then finishes within a second or so."""
        logger().warning("stopping_now", in_flight=self.pool.admitted)
        self.pool.kill()
        self.grpc_server.stop(0)

    def wait(self, timeout_s: float | None = None) -> bool:
        return self._stopped.wait(timeout_s)


def _warm_server_process() -> None:
    """What this process itself runs (conversions, catalog listings), imported before the first
    call; the solvers are imported only by the workers (planner.server.preload)."""
    import planner.api  # noqa: F401
    from planner.server import convert

    convert.schema_mismatches()


def create_server(
    address: str = f"127.0.0.1:{DEFAULT_PORT}",
    *,
    workers: int | None = None,
    queue_size: int | None = None,
    tls: TlsFiles | None = None,
    plaintext: bool = False,
    metrics_port: int = 0,
    metrics_host: str | None = None,
    limits: Limits | None = None,
    cache_bytes: int = DEFAULT_CACHE_BYTES,
    warm: bool = True,
    reflection: bool = False,
    auth: BearerTokens | None = None,
    fairness: Fairness | None = None,
    connections: ConnectionPolicy | None = None,
    # Per-job limits in the workers (docs/service.md, "Cancellation, limits and drain").
    job_memory_mib: int | None = DEFAULT_JOB_MEMORY_MIB,
    job_cpu_s: float | None = DEFAULT_JOB_CPU_S,
    interactive_workers: int = DEFAULT_INTERACTIVE_WORKERS,
) -> tuple[PlannerServer, int]:
    """Build and start a server on `address` ("host:port"; port 0 picks a free one). `workers`:
    solver processes (default: one per core); `queue_size`: requests admitted beyond them before
    RESOURCE_EXHAUSTED (default 32 per worker); `plaintext`: serve without TLS on a host that is
    not loopback; `metrics_port` 0: no metrics endpoint, `metrics_host` default the serving host;
    `cache_bytes`: memory for answers to repeated requests (0: none); `reflection`: register
    server reflection; `auth`: bearer tokens every call but health must carry; `fairness`:
    admission limits of long calls (default: from workers + queue, Fairness.resolve);
    `connections`: keepalive and connection limits; `job_memory_mib`, `job_cpu_s`: each job's
    memory (beyond a worker's size at start) and CPU time (None: no limit);
    `interactive_workers`: processes beyond `workers` for Evaluate and Analyze only (JobPool).
    Returns the server and its port."""
    require_safe_transport(address, tls is not None, plaintext)
    limits = limits or Limits()
    connections = connections or ConnectionPolicy()
    # TLS material and the address checked before any process starts: one line naming the flag.
    credentials = None if tls is None else tls.credentials()
    check_listen(address)
    n_workers = workers or default_workers()
    queue = DEFAULT_QUEUE_PER_WORKER * n_workers if queue_size is None else queue_size
    metrics = Metrics()
    job_limits = WorkerLimits(None if job_memory_mib is None else job_memory_mib * 2**20, job_cpu_s)
    pool = JobPool(
        n_workers, queue, on_depth=metrics.set_depth, limits=job_limits, interactive_workers=interactive_workers
    )
    try:
        workers_up = pool.warm() if warm else None  # the forkserver imports while this process does
        _warm_server_process()
        admitted = (fairness or Fairness()).resolve(pool.capacity)
        server = _grpc_server(limits, metrics, admitted, auth, connections)
        servicer = PlannerServicer(pool, limits, metrics, ResponseCache(cache_bytes))
        pb_grpc.add_PlannerServiceServicer_to_server(servicer, server)
        health_servicer = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
        if reflection:
            names = (SERVICE_NAME, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name)
            reflection_service.enable_server_reflection((*names, reflection_service.SERVICE_NAME), server)
        try:
            port = (
                server.add_secure_port(address, credentials)
                if credentials
                else server.add_insecure_port(address)
            )
        except RuntimeError:
            raise bind_error(address) from None
        if workers_up is not None:
            workers_up()
        mhost = host_of(address) if metrics_host is None else metrics_host.strip("[]")
        try:
            mport = metrics.serve_http(metrics_port, mhost)
        except OSError as exc:
            raise InvalidInput("--metrics-port", f"cannot listen on {mhost}:{metrics_port}: {exc}") from None
        server.start()
        for name in ("", SERVICE_NAME):
            health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    except BaseException:
        pool.close(wait=False)
        raise
    return PlannerServer(server, pool, health_servicer, metrics, port, mport), port


def _grpc_server(
    limits: Limits,
    metrics: Metrics,
    admitted: AdmissionLimits,
    auth: BearerTokens | None,
    connections: ConnectionPolicy,
) -> grpc.Server:
    """The gRPC server: `admitted.max_calls` long handlers leave SPARE_THREADS serving threads to
    health, catalog calls and refusals (planner.server.admission); gRPC's own concurrency limit
    is only a backstop against floods of thousands of calls."""
    threads = admitted.max_calls + SPARE_THREADS
    admission = Admission(admitted)

    def identify(context: grpc.ServicerContext) -> str:
        if auth is not None:
            name = auth.identity(context.invocation_metadata())
            if name is not None:
                return f"token:{name}"
        identities = context.peer_identities()
        if identities:
            return "tls:" + identities[0].decode("utf-8", "replace")
        return peer_address(context.peer())

    interceptors: list[grpc.ServerInterceptor] = [] if auth is None else [AuthInterceptor(auth, metrics)]
    interceptors += [ServiceInterceptor(metrics), FairnessInterceptor(admission, identify)]
    return grpc.server(
        futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="capplan-rpc"),
        interceptors=interceptors,
        maximum_concurrent_rpcs=max(MIN_RPC_BACKSTOP, RPC_BACKSTOP_PER_THREAD * threads),
        options=[
            ("grpc.max_receive_message_length", limits.max_message_bytes),
            ("grpc.max_send_message_length", MAX_SEND_MESSAGE_BYTES),
            ("grpc.so_reuseport", 0),
            *connections.grpc_options(),
        ],
    )


def serve(
    host: str = "[::]",
    port: int = DEFAULT_PORT,
    *,
    grace_s: float = DEFAULT_GRACE_S,
    health_delay_s: float = 0.0,
    log_json: bool | None = None,
    **options: Any,
) -> int:
    """Run until SIGTERM or SIGINT, then drain (see PlannerServer.stop); a second SIGTERM or
    SIGINT during the drain stops at once (PlannerServer.abort). Logs one JSON line per RPC
    when stderr is not a terminal."""
    if configure_logging(log_json):
        route_native_stderr()  # gRPC core's and any other fd 2 line: a JSON log line too, until exit
    log = logger()
    signals: list[str] = []

    def on_signal(signum: int, _frame: Any) -> None:
        # Only a list append (atomic, takes no lock): the handler runs between two bytecodes of
        # the main thread, which may hold the log stream's lock mid-line or an Event's lock, and
        # would wait on it forever. The main thread polls the list and logs.
        signals.append(signal.Signals(signum).name)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        server, bound = create_server(f"{host}:{port}", **options)
        log.info(
            "serving",
            address=f"{host}:{bound}",
            port=bound,
            workers=server.pool.workers,
            interactive_workers=server.pool.interactive_workers,
            queue=server.pool.capacity - server.pool.workers,
            tls=options.get("tls") is not None,
            mtls=getattr(options.get("tls"), "client_ca_file", None) is not None,
            metrics_port=server.metrics_port or None,
        )
        while not signals:
            time.sleep(_SIGNAL_POLL_S)
        log.info("signal", signal=signals[0])
        # The drain runs on its own thread so that this one keeps answering signals.
        drain = threading.Thread(
            target=server.stop, args=(grace_s, health_delay_s), name="capplan-drain", daemon=True
        )
        drain.start()
        while drain.is_alive() and len(signals) < 2:
            drain.join(_SIGNAL_POLL_S)
        if len(signals) >= 2:  # a second signal: stop now
            log.info("signal", signal=signals[1])
            server.abort()
        drain.join(_STOP_WAIT_S + 5.0)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return 0
