"""Logs and metrics of the service: structlog JSON lines (one per RPC) when stderr is not a
terminal, and Prometheus metrics on their own HTTP port. `route_native_stderr` turns what gRPC's
C core (and anything else) writes to file descriptor 2 into log lines too, so a JSON-lines
consumer of `capplan serve` reads nothing else."""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import re
import select
import sys
import threading
import time
from typing import Any, TextIO

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from planner.errors import clip

__all__ = [
    "GRPC_VERBOSITY_DEFAULT",
    "Metrics",
    "NativeStderr",
    "configure_logging",
    "default_grpc_verbosity",
    "logger",
    "route_native_stderr",
]

# Latencies from a cached catalog listing (~1 ms) to a long plan or simulation (~1 min).
_LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


def logger() -> Any:
    return structlog.get_logger("capplan.server")


def configure_logging(
    json_lines: bool | None = None, stream: TextIO | None = None, level: str = "info"
) -> bool:
    """JSON lines (default when `stream` is not a TTY) or a readable console format. Returns
    whether the lines are JSON."""
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
    return json_lines


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


# -- what the process writes to file descriptor 2 --

# gRPC's C core is quiet below ERROR unless the operator asks (GRPC_VERBOSITY=INFO/DEBUG); unset,
# a GRPC_TRACE would print every traced event.
GRPC_VERBOSITY_DEFAULT = "ERROR"
# gRPC logs through absl: "E1205 01:22:16.507703    1555 add_port.cc:83] text" (before absl is set
# up the date reads 0000 and the time is seconds since the epoch).
_GRPC_LINE = re.compile(r"([DIWEF])\d{4} +[0-9:.]+ +\d+ +([^\s:\]]+:\d+)\] ?")
_CLI_ERROR = "capplan: error: "  # planner/cli.py's one line for bad input
_GRPC_LEVELS = {"D": "debug", "I": "info", "W": "warning", "E": "error", "F": "critical"}
NATIVE_LINE_CHARS = 1_000  # a line's text in its log line, as the RPC lines' text fields
NATIVE_KEEP_BYTES = 4 * NATIVE_LINE_CHARS  # kept of a line (1,000 chars of UTF-8); the rest is counted
_READ_BYTES = 65_536  # one read of the pipe
_POLL_S = 0.05  # how often the reader looks whether it is asked to stop
_DRAIN_S = 2.0  # at close, the longest the reader keeps logging what writers still send


def default_grpc_verbosity() -> str:
    """GRPC_VERBOSITY=ERROR unless the environment sets it; returns the value in effect. gRPC
    reads it once, when `grpc` is first imported: call this before that."""
    return os.environ.setdefault("GRPC_VERBOSITY", GRPC_VERBOSITY_DEFAULT)


class LineSplitter:
    """Bytes in, complete lines out, in bounded memory: each line keeps its first `keep_bytes`
    bytes and counts the rest, so a writer that never ends its line cannot exhaust memory."""

    def __init__(self, keep_bytes: int = NATIVE_KEEP_BYTES) -> None:
        self.keep_bytes = keep_bytes
        self._head = bytearray()
        self._dropped = 0

    def feed(self, data: bytes) -> list[tuple[bytes, int]]:
        """The lines `data` completes: (their first bytes, their length in bytes), newline excluded."""
        done: list[tuple[bytes, int]] = []
        start = 0
        while True:
            end = data.find(b"\n", start)
            piece = data[start : len(data) if end < 0 else end]
            room = self.keep_bytes - len(self._head)
            self._head += piece[:room]
            self._dropped += max(0, len(piece) - room)
            if end < 0:
                return done
            done.append(self._take())
            start = end + 1

    def end(self) -> list[tuple[bytes, int]]:
        """The unfinished last line, if any (the writers are gone)."""
        return [self._take()] if self._head or self._dropped else []

    def _take(self) -> tuple[bytes, int]:
        line = (bytes(self._head), len(self._head) + self._dropped)
        self._head.clear()
        self._dropped = 0
        return line


def native_line_event(head: bytes, total_bytes: int) -> tuple[str, str, dict[str, Any]] | None:
    """(level, event, fields) of the log line for one line written to fd 2, None for a blank one.
    gRPC's lines are event `grpc_core` at their own severity with their `source` file:line; any
    other (Python warnings and tracebacks, a worker's output) is `stderr` at warning, the CLI's
    own error line (`capplan: error: ...`, a bad --port) at error. `text` is cut to NATIVE_LINE_CHARS with the line's length."""
    text = head.decode("utf-8", "replace").rstrip("\r")
    if not text.strip():
        return None
    fields: dict[str, Any] = {}
    match = _GRPC_LINE.match(text)
    if match:
        level, event = _GRPC_LEVELS[match[1]], "grpc_core"
        fields["source"] = match[2]
        text = text[match.end() :]
    else:
        level, event = ("error" if text.startswith(_CLI_ERROR) else "warning"), "stderr"
    if total_bytes > len(head):
        note = f"… ({total_bytes:,} bytes)"
        text = text[: NATIVE_LINE_CHARS - len(note)] + note
    fields["text"] = clip(text, NATIVE_LINE_CHARS)
    return level, event, fields


class NativeStderr:
    """File descriptor 2 replaced by a pipe that a daemon thread reads line by line and logs;
    structlog writes to a duplicate of the real stderr (its lines never enter the pipe, so no
    loop). Python's own sys.stderr writes to fd 2 and is captured too, as are the processes
    started meanwhile (the pool's forkserver and workers inherit fd 2). `close()`, also run at
    exit, puts everything back."""

    def __init__(self) -> None:
        _flush_std_streams()
        self._real_fd = os.dup(2)
        self._real = os.fdopen(self._real_fd, "w", buffering=1, encoding="utf-8", errors="backslashreplace")
        try:
            self._read_fd, write_fd = os.pipe()  # not inherited; fd 2 (its copy) is
        except OSError:
            self._real.close()
            raise
        os.dup2(write_fd, 2)
        os.close(write_fd)
        self._factory = structlog.get_config()["logger_factory"]
        structlog.configure(logger_factory=structlog.PrintLoggerFactory(self._real))
        self._lock = threading.Lock()
        self._closed = False
        self._stop_at: float | None = None  # monotonic time the reader gives up draining
        self._thread = threading.Thread(target=self._read, name="capplan-stderr", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    def _read(self) -> None:
        """Log each line until end of file (every writer gone), or, once close() asked, until the
        pipe is empty or _DRAIN_S passed. Never raises and never writes to fd 2: a reader that
        stopped would leave every writer to stderr blocked on a full pipe."""
        log = logger()
        lines = LineSplitter()
        poller = select.poll()
        poller.register(self._read_fd, select.POLLIN)
        while True:
            ready = poller.poll(_POLL_S * 1000)
            stop_at = self._stop_at
            if stop_at is not None and (not ready or time.monotonic() > stop_at):
                data = b""
            else:
                if not ready:
                    continue
                try:
                    data = os.read(self._read_fd, _READ_BYTES)
                except OSError:
                    data = b""
            for head, total_bytes in lines.feed(data) if data else lines.end():
                _log_line(log, head, total_bytes)
            if not data:
                return

    def close(self) -> None:
        """Restore fd 2, then let the reader log what the pipe still holds, then restore
        structlog's stream and close the pipe and the duplicate. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        atexit.unregister(self.close)
        _flush_std_streams()
        os.dup2(self._real_fd, 2)  # closes this process's write end: the reader sees EOF
        self._stop_at = time.monotonic() + _DRAIN_S  # unless a child process still holds it
        self._thread.join(_DRAIN_S + 5 * _POLL_S + 1)
        structlog.configure(logger_factory=self._factory)
        if not self._thread.is_alive():  # it always ends within the drain bound; never close under it
            os.close(self._read_fd)
            self._real.close()
        if self in _ACTIVE:
            _ACTIVE.remove(self)


_ACTIVE: list[NativeStderr] = []  # at most one: a second would read the first's pipe as "real"


def route_native_stderr() -> NativeStderr:
    """Route fd 2 into the log (see NativeStderr) until `close()` or exit; for JSON logs, so a
    log consumer reads only JSON lines. Call after configure_logging and before the server
    starts. A second call returns the routing in place."""
    if not _ACTIVE:
        _ACTIVE.append(NativeStderr())
    return _ACTIVE[0]


def _log_line(log: Any, head: bytes, total_bytes: int) -> None:
    entry = native_line_event(head, total_bytes)
    if entry is None:
        return
    level, event, fields = entry
    try:
        getattr(log, level)(event, **fields)
    except Exception:  # the real stderr is gone (closed, a broken pipe): the line is lost, the reader goes on
        return


def _flush_std_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            with contextlib.suppress(OSError, ValueError):  # a closed stream has nothing to flush
                stream.flush()
