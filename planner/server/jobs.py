"""The work of one RPC, run in a pool worker process: the request mapping in, planner.api
called, the serialized response out. Everything crossing the process boundary is plain data
(dicts, bytes); errors come back as a tagged dict, not as pickled exceptions.

Deadlines: `deadline` is the caller's, as a wall-clock time. A job that waited in the queue
past it is not started; a Plan's solver time limit is cut to fit what is left, and a Plan that
found no feasible plan within a limit the deadline cut is DEADLINE_EXCEEDED.
"""

from __future__ import annotations

import os
import signal
import time
import traceback
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from planner.errors import CapplanError, InvalidInput
from planner.server.errors import BadRequest, DeadlineExceeded

__all__ = ["init_worker", "raise_error", "run_job"]

# A Plan's MILP gets at most this share of the time left when the job starts (candidates are
# computed before it), and never less than MIN_SOLVER_S.
DEADLINE_SOLVER_SHARE = 0.75
MIN_SOLVER_S = 0.05
DEFAULT_SOLVER_TIME_LIMIT_S = 10.0


def init_worker() -> None:
    """Pool worker start: Ctrl-C reaches the whole process group, but only the server decides
    when workers stop (after draining)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _violations(rpc: str, data: Mapping[str, Any], first: InvalidInput) -> list[tuple[str, str]]:
    """The first error as the CLI says it, then every other field pydantic finds wrong."""
    from planner import inputs
    from planner.plan.request import PlanRequest
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


def _plan_deadline(data: dict[str, Any], remaining_s: float | None) -> tuple[dict[str, Any], bool]:
    """The request with its solver time limit cut to the deadline; whether it was cut."""
    if remaining_s is None:
        return data, False
    given = data.get("solver")
    solver: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
    asked = solver.get("time_limit_s", DEFAULT_SOLVER_TIME_LIMIT_S)
    if not isinstance(asked, int | float) or isinstance(asked, bool):
        return data, False  # validation will name it
    cap = max(MIN_SOLVER_S, remaining_s * DEADLINE_SOLVER_SHARE)
    if asked <= cap:
        return data, False
    return {**data, "solver": {**solver, "time_limit_s": round(cap, 3)}}, True


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


def run_job(
    rpc_name: str, data: dict[str, Any], options: dict[str, Any], deadline: float | None
) -> dict[str, Any]:
    """Answer one request: {"response": bytes, "summary": {...}, "compute_s": s, "pid": pid} or
    {"error": {...}} (see raise_error)."""
    from planner import api
    from planner.server import convert

    start = time.time()
    remaining = None if deadline is None else deadline - start
    if remaining is not None and remaining <= 0:
        return {"error": {"kind": "deadline", "message": "the deadline passed while the request was queued"}}
    rpc = convert.RPCS[rpc_name]
    try:
        cut = False
        kwargs: dict[str, Any] = dict(options)
        if rpc_name == "Plan":
            data, cut = _plan_deadline(data, remaining)
            kwargs["workers"] = 1  # this process is the pool's worker: no nested pool
        report = getattr(api, rpc.api)(data, **kwargs)
        if rpc_name == "Plan" and cut and report.status == "NO_SOLUTION":
            limit = data["solver"]["time_limit_s"]
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
    from planner.errors import Infeasible

    kind = error.get("kind")
    if kind == "invalid":
        raise BadRequest([(str(f), str(r)) for f, r in error["violations"]])
    if kind == "deadline":
        raise DeadlineExceeded(error["message"])
    if kind == "capplan":
        if error.get("type") == "Infeasible":
            raise Infeasible(error["message"])
        raise CapplanError(error["message"])
    raise WorkerError(str(error.get("message")), str(error.get("traceback", "")))
