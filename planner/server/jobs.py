"""The work of one RPC, run in a pool worker process: the request mapping in, planner.api
called, the serialized response out. Everything crossing the process boundary is plain data
(dicts, bytes); errors come back as a tagged dict, not as pickled exceptions.

Deadlines: `deadline` is the caller's, as a wall-clock time. A job that waited in the queue
past it is not started; a running job stops at the next planner.stopping.check() after it; a
Plan's solver time limit is cut to fit what is left (after the request is validated, so the
same request is valid or not whatever the deadline), and a Plan that found no feasible plan
within a limit the deadline cut is DEADLINE_EXCEEDED.

Limits (`WorkerLimits`, set by `init_worker` in each worker process): the memory a worker may
allocate beyond what it holds at start (RLIMIT_DATA: numpy, SciPy and HiGHS allocate through
malloc/mmap, which it bounds; an allocation past it raises MemoryError) and the CPU time of one
job (RLIMIT_CPU's soft limit moved to `used + budget` per job; SIGXCPU asks the job to stop).
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import resource
import signal
import threading
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from pydantic import BaseModel, ValidationError

from planner import stopping
from planner.errors import CapplanError, InvalidInput
from planner.server.service_errors import (
    BadRequest,
    Cancelled,
    DeadlineExceeded,
    JobLimitExceeded,
    ShuttingDown,
)

__all__ = ["STOP_SIGNAL", "WorkerLimits", "init_worker", "raise_error", "run_job", "worker_main"]

# A Plan's MILP gets at most this share of the time left when the job starts (candidates are
# computed before it), and never less than MIN_SOLVER_S.
DEADLINE_SOLVER_SHARE = 0.75
MIN_SOLVER_S = 0.05
DEFAULT_SOLVER_TIME_LIMIT_S = 10.0

# The pool asks a worker's running job to stop with this signal (planner.stopping.request_stop).
STOP_SIGNAL = signal.SIGUSR1
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


@dataclass(frozen=True)
class WorkerLimits:
    """Per-job limits of a worker: `memory_bytes` it may allocate beyond its size at start
    (None: no limit), `cpu_s` of CPU time per job (None: no limit)."""

    memory_bytes: int | None = None
    cpu_s: float | None = None


_limits = WorkerLimits()


def _die_with_parent() -> None:
    """Linux: SIGKILL this worker when its parent (the pool's forkserver) exits, so a server
    killed outright leaves no worker computing on as an orphan. The forkserver itself exits
    when the server's end of its pipe closes."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        return
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(1)


def _data_bytes() -> int | None:
    """This process's data segment (VmData: what RLIMIT_DATA counts), or None without /proc."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):  # pragma: no cover - not Linux
        return None
    return None  # pragma: no cover


def init_worker(limits: WorkerLimits | None = None) -> None:
    """Pool worker start: Ctrl-C reaches the whole process group, but only the server decides
    when workers stop (after draining); STOP_SIGNAL and SIGXCPU stop the running job; the
    memory limit is set; the worker dies with its parent."""
    global _limits
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(STOP_SIGNAL, lambda _s, _f: stopping.request_stop("cancelled"))
    signal.signal(signal.SIGXCPU, lambda _s, _f: stopping.request_stop("cpu"))
    _die_with_parent()
    _limits = limits or WorkerLimits()
    if _limits.memory_bytes is not None:
        base = _data_bytes()
        if base is not None:
            _, hard = resource.getrlimit(resource.RLIMIT_DATA)
            soft = base + _limits.memory_bytes
            if hard != resource.RLIM_INFINITY:
                soft = min(soft, hard)
            resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))


def _cpu_used_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _set_cpu_limit(budget_s: float | None) -> None:
    """RLIMIT_CPU's soft limit at this process's CPU time so far plus `budget_s` (None: none)."""
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = hard if budget_s is None else math.ceil(_cpu_used_s() + budget_s)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def _exit_with_server(lifeline: Connection) -> None:
    """Exit at once when the server's end of `lifeline` closes (the server exited or was
    killed), even in the middle of a job. PR_SET_PDEATHSIG alone does not do it: a worker's
    parent is the forkserver, which lives as long as any worker holds the pipe it watches."""

    def watch() -> None:
        with contextlib.suppress(EOFError, OSError):
            lifeline.recv()
        os._exit(1)

    threading.Thread(target=watch, name="capplan-lifeline", daemon=True).start()


def worker_main(conn: Connection, limits: WorkerLimits, lifeline: Connection | None = None) -> None:
    """A pool worker: says ("ready", pid), then answers each (rpc, data, options, deadline) it
    receives with run_job's dict, under the job's CPU limit, until None or the pipe closes.
    After a job that hit the memory limit it exits (the pool starts a fresh worker). It exits
    at once when the server's end of `lifeline` closes."""
    init_worker(limits)
    if lifeline is not None:
        _exit_with_server(lifeline)
    conn.send(("ready", os.getpid()))
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        if job is None:
            return
        _set_cpu_limit(_limits.cpu_s)
        try:
            result = run_job(*job)
        finally:
            _set_cpu_limit(None)
        conn.send(result)
        if result.get("error", {}).get("limit") == "memory":
            return


def _violations(rpc: str, data: Mapping[str, Any], first: InvalidInput) -> list[tuple[str, str]]:
    """The first error as the CLI says it, then every other field pydantic finds wrong."""
    from planner.schema import inputs
    from planner.schema.plan_request import PlanRequest
    from planner.validation import loc_to_path

    out = [(first.field, first.reason)]
    model: type[BaseModel] | None = {  # type: ignore[assignment]
        "Plan": PlanRequest,
        "Evaluate": inputs.EvaluateRequest,
        "Simulate": inputs.SimulateRequest,
        "Analyze": inputs.AnalyzeRequest,
        "Calibrate": inputs.CalibrateRequest,
        "ListCatalog": inputs.CatalogRequest,
    }.get(rpc)
    if model is None or "more error" not in first.reason:
        return out
    try:
        model.model_validate(data)
    except ValidationError as err:
        for e in err.errors(include_url=False):
            path = loc_to_path("", e["loc"])
            if path == first.field:
                continue
            msg = str(e["msg"])
            for noise in ("Value error, ", "Assertion failed, "):  # as planner.validation drops them
                msg = msg.removeprefix(noise)
            out.append((path, msg))
    return out


def _plan_deadline(data: Mapping[str, Any], remaining_s: float | None) -> tuple[Any, bool]:
    """The Plan request, validated first (so validity never depends on the deadline), with its
    solver time limit cut to the deadline; whether it was cut. Without a deadline the mapping
    goes to planner.api as is."""
    if remaining_s is None:
        return data, False
    from planner.schema.plan_request import parse_plan_request

    req = parse_plan_request(data)
    cap = round(max(MIN_SOLVER_S, remaining_s * DEADLINE_SOLVER_SHARE), 3)
    if req.solver.time_limit_s <= cap:
        return req, False
    return req.model_copy(update={"solver": req.solver.model_copy(update={"time_limit_s": cap})}), True


def _summary(rpc: str, report: Any) -> dict[str, Any]:
    """A few fields of the answer for the RPC's log line."""
    if rpc == "Plan":
        return {
            "plan_status": report.status,
            "gpu_count_peak": report.gpu_count_peak,
            "usd_per_hour_peak": report.usd_per_hour_peak,
            "deployments": [
                f"{d.replicas_peak}x{d.gpu}/tp{d.tensor_parallel_size}/{d.role}" for d in report.deployments
            ],
        }
    if rpc == "Evaluate":
        return {
            "stable": report.stable,
            "slo_feasible": report.slo_feasible,
            "ttft_p99_ms": report.ttft_p99_ms,
        }
    if rpc == "Simulate":
        return {"requests": report.requests, "ttft_p99_ms": report.ttft_p99_ms}
    if rpc == "Calibrate":
        return {"mape_percent": report.mape_percent}
    return {}


def _stopped(exc: stopping.Stopped) -> dict[str, Any]:
    if exc.reason == "cpu":
        return {
            "error": {
                "kind": "limit",
                "limit": "cpu",
                "message": f"the job used its CPU-time limit of {_limits.cpu_s:g} s (--job-cpu-s)",
            }
        }
    return {"error": {"kind": "stopped", "reason": exc.reason, "message": str(exc)}}


def _out_of_memory() -> dict[str, Any]:
    mib = None if _limits.memory_bytes is None else _limits.memory_bytes / 2**20
    limit = "" if mib is None else f" of {mib:g} MiB (--job-memory-mib)"
    return {
        "error": {
            "kind": "limit",
            "limit": "memory",
            "message": f"the job ran out of its memory limit{limit}",
        }
    }


def run_job(
    rpc_name: str, data: dict[str, Any], options: dict[str, Any], deadline: float | None
) -> dict[str, Any]:
    """Answer one request: {"response": bytes, "summary": {...}, "compute_s": s, "pid": pid} or
    {"error": {...}} (see raise_error). Runs within a planner.stopping scope of `deadline`."""
    from planner import api
    from planner.server import convert

    start = time.time()
    remaining = None if deadline is None else deadline - start
    if remaining is not None and remaining <= 0:
        return {"error": {"kind": "deadline", "message": "the deadline passed while the request was queued"}}
    rpc = convert.RPCS[rpc_name]
    try:
        with stopping.scope(deadline):
            cut = False
            request: Any = data
            kwargs: dict[str, Any] = dict(options)
            if rpc_name == "Plan":
                request, cut = _plan_deadline(data, remaining)
                kwargs["workers"] = 1  # this process is the pool's worker: no nested pool
            report = getattr(api, rpc.api)(request, **kwargs)
        if rpc_name == "Plan" and cut and report.status == "NO_SOLUTION":
            limit = request.solver.time_limit_s
            return {
                "error": {
                    "kind": "deadline",
                    "message": f"no feasible plan within {limit:g} s, the solver time the deadline left",
                }
            }
        response = convert.response_from_report(rpc, report).SerializeToString()
        return {
            "response": response,
            "summary": _summary(rpc_name, report),
            "compute_s": time.time() - start,
            "pid": os.getpid(),
            "cacheable": not cut,  # a plan the deadline cut depends on more than its request
        }
    except stopping.Stopped as exc:
        return _stopped(exc)
    except MemoryError:
        return _out_of_memory()
    except InvalidInput as exc:
        return {"error": {"kind": "invalid", "violations": _violations(rpc_name, data, exc)}}
    except CapplanError as exc:
        return {"error": {"kind": "capplan", "type": type(exc).__name__, "message": str(exc)}}
    except Exception as exc:  # reported as INTERNAL; the traceback goes to the server's log
        return {
            "error": {
                "kind": "internal",
                "message": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc(),
            }
        }


class WorkerError(Exception):
    """An unexpected failure inside a worker; `details` holds its traceback for the log."""

    def __init__(self, message: str, details: str) -> None:
        super().__init__(message)
        self.details = details


def raise_error(error: Mapping[str, Any]) -> None:
    """Re-raise a job's error in the serving thread as the exception the interceptor maps."""
    from planner.errors import Infeasible, TooLarge

    kind = error.get("kind")
    if kind == "invalid":
        raise BadRequest([(str(f), str(r)) for f, r in error["violations"]])
    if kind == "deadline" or (kind == "stopped" and error.get("reason") == "deadline"):
        raise DeadlineExceeded(error["message"])
    if kind == "stopped":
        if error.get("reason") == "shutdown":
            raise ShuttingDown("the server is shutting down")
        raise Cancelled(str(error.get("message", "the call was cancelled")))
    if kind == "limit":
        raise JobLimitExceeded(str(error.get("limit")), error["message"])
    if kind == "capplan":
        known: dict[Any, type[CapplanError]] = {"Infeasible": Infeasible, "TooLarge": TooLarge}
        raise known.get(error.get("type"), CapplanError)(error["message"])
    raise WorkerError(str(error.get("message")), str(error.get("traceback", "")))
