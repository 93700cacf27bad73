"""Logs and metrics of the service: structlog JSON lines (one per RPC) when stderr is not a
terminal, and Prometheus metrics on their own HTTP port."""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

__all__ = ["Metrics", "configure_logging", "logger"]

# Latencies from a cached catalog listing (~1 ms) to a long plan or simulation (~1 min).
_LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


def logger() -> Any:
    return structlog.get_logger("capplan.server")


def configure_logging(
    json_lines: bool | None = None, stream: TextIO | None = None, level: str = "info"
) -> None:
    """JSON lines (default when `stream` is not a TTY) or a readable console format."""
    out = stream if stream is not None else sys.stderr
    if json_lines is None:
        json_lines = not out.isatty()
    renderer: Any = (
        structlog.processors.JSONRenderer() if json_lines else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelNamesMapping()[level.upper()]),
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=False,
    )


class Metrics:
    """The server's Prometheus metrics, in a registry of its own (several servers per process in
    tests must not collide)."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.rpcs = Counter(
            "capplan_rpcs", "RPCs answered, by method and status code", ["method", "code"], registry=r
        )
        self.latency = Histogram(
            "capplan_rpc_duration_seconds",
            "Wall time per RPC, from arrival to answer",
            ["method"],
            buckets=_LATENCY_BUCKETS_S,
            registry=r,
        )
        self.compute = Histogram(
            "capplan_compute_seconds",
            "Worker time per request: the models and the solver",
            ["method"],
            buckets=_LATENCY_BUCKETS_S,
            registry=r,
        )
        self.queue_wait = Histogram(
            "capplan_queue_wait_seconds",
            "Time from admission to a worker starting the job, plus the transfer back",
            ["method"],
            buckets=_LATENCY_BUCKETS_S,
            registry=r,
        )
        self.running = Gauge("capplan_jobs_running", "Jobs a worker is computing", registry=r)
        self.queue_depth = Gauge("capplan_queue_depth", "Jobs admitted and waiting for a worker", registry=r)
        self.in_flight = Gauge("capplan_rpcs_in_flight", "RPCs being answered", registry=r)
        self.sweep_scenarios = Counter(
            "capplan_sweep_scenarios", "Sweep scenarios answered, by status code", ["code"], registry=r
        )
        self.cache = Counter(
            "capplan_cache_lookups",
            "Answers looked up in the response cache, by method and result",
            ["method", "result"],
            registry=r,
        )
        self._http: Any = None

    def set_depth(self, running: int, queued: int) -> None:
        self.running.set(running)
        self.queue_depth.set(queued)

    def serve_http(self, port: int, host: str = "0.0.0.0") -> int:
        """Expose /metrics on `port` (0: no endpoint); returns the port."""
        if not port:
            return 0
        self._http, _ = start_http_server(port, host, registry=self.registry)
        return int(self._http.server_port)

    def stop_http(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None
