"""planner.v1.PlannerService: converts each request to the mapping planner.api takes, checks it
against the service's policy (no files, size limits), runs it in the job pool and returns the
response the worker built. No domain logic here; errors are raised as exceptions and mapped to
statuses by the interceptor."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, CancelledError, Future, wait
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

import grpc

from planner.errors import CapplanError, InvalidInput
from planner.server import convert, jobs, policy
from planner.server.cache import ResponseCache
from planner.server.interceptors import annotate
from planner.server.job_pool import DEADLINE_SLACK_S, PRIORITY, JobPool
from planner.server.observability import Metrics
from planner.server.service_errors import BadRequest, Cancelled, DeadlineExceeded, LimitExceeded, status_of
from planner.v1 import planner_service_pb2 as pb
from planner.v1 import planner_service_pb2_grpc as pb_grpc

__all__ = ["PlannerServicer"]

# Slack for the answer's trip back after the worker's deadline check.
_RESULT_SLACK_S = 0.05


# gRPC reports "no deadline" as a remaining time of centuries.
_NO_DEADLINE_S = 365 * 86400.0


def _deadline(context: grpc.ServicerContext) -> float | None:
    remaining = context.time_remaining()
    return None if remaining is None or remaining > _NO_DEADLINE_S else time.time() + remaining


class PlannerServicer(pb_grpc.PlannerServiceServicer):
    def __init__(self, pool: JobPool, limits: policy.Limits, metrics: Metrics, cache: ResponseCache) -> None:
        self.pool = pool
        self.limits = limits
        self.metrics = metrics
        self.cache = cache

    # -- unary RPCs --

    def _result(
        self,
        rpc: str,
        future: Future[dict[str, Any]],
        deadline: float | None,
        submitted: float,
        key: tuple[str, bytes] | None = None,
    ) -> bytes:
        timeout = None if deadline is None else max(0.0, deadline - time.time()) + _RESULT_SLACK_S
        try:
            result = future.result(timeout=timeout)
        except FutureTimeout:
            future.cancel()  # dropped if queued, stopped if running (pool.JobFuture)
            raise DeadlineExceeded("no answer within the call's deadline") from None
        except CancelledError:  # dropped from the queue: gRPC cancels the call at its deadline too
            if deadline is not None and time.time() >= deadline - DEADLINE_SLACK_S:
                raise DeadlineExceeded("the deadline passed while the request was queued") from None
            raise Cancelled("the call was cancelled while queued") from None
        self._account(rpc, result, submitted)
        if "error" in result:
            jobs.raise_error(result["error"])
        response: bytes = result["response"]
        if key is not None and result.get("cacheable"):
            self.cache.put(key, response)
        return response

    def _cached(self, rpc: str, key: tuple[str, bytes]) -> bytes | None:
        response = self.cache.get(key)
        self.metrics.cache.labels(rpc, "miss" if response is None else "hit").inc()
        if response is not None:
            annotate(cache="hit")
        return response

    def _account(self, rpc: str, result: dict[str, Any], submitted: float) -> None:
        total = time.perf_counter() - submitted
        compute = result.get("compute_s")
        if compute is not None:
            self.metrics.compute.labels(rpc).observe(compute)
            self.metrics.queue_wait.labels(rpc).observe(max(0.0, total - compute))
            annotate(compute_ms=round(compute * 1e3, 3), queue_ms=round(max(0.0, total - compute) * 1e3, 3))
        if result.get("summary"):
            annotate(**result["summary"])

    def _unary(self, rpc_name: str, request: Any, context: grpc.ServicerContext) -> Any:
        rpc = convert.RPCS[rpc_name]
        data, options = convert.request_to_mapping(request)
        policy.check(rpc_name, data, self.limits)
        key = (rpc_name, request.SerializeToString(deterministic=True))
        cached = self._cached(rpc_name, key)
        if cached is not None:
            return rpc.response.FromString(cached)
        deadline = _deadline(context)
        submitted = time.perf_counter()
        future = self.pool.submit(rpc_name, data, options, deadline)
        # A cancelled call (or one past its deadline): its job is dropped if queued, stopped if running.
        context.add_callback(future.cancel)
        return rpc.response.FromString(self._result(rpc_name, future, deadline, submitted, key))

    def Plan(self, request: pb.PlanRequest, context: grpc.ServicerContext) -> pb.PlanResponse:
        return self._unary("Plan", request, context)

    def Evaluate(self, request: pb.EvaluateRequest, context: grpc.ServicerContext) -> pb.EvaluateResponse:
        return self._unary("Evaluate", request, context)

    def Simulate(self, request: pb.SimulateRequest, context: grpc.ServicerContext) -> pb.SimulateResponse:
        return self._unary("Simulate", request, context)

    def Analyze(self, request: pb.AnalyzeRequest, context: grpc.ServicerContext) -> pb.AnalyzeResponse:
        return self._unary("Analyze", request, context)

    def Calibrate(self, request: pb.CalibrateRequest, context: grpc.ServicerContext) -> pb.CalibrateResponse:
        return self._unary("Calibrate", request, context)

    def ListCatalog(
        self, request: pb.ListCatalogRequest, context: grpc.ServicerContext
    ) -> pb.ListCatalogResponse:
        """Answered on the serving thread: reading the catalog takes a millisecond."""
        data, options = convert.request_to_mapping(request)
        policy.check("ListCatalog", data, self.limits)
        result = jobs.run_job("ListCatalog", data, options, _deadline(context))
        if "error" in result:
            jobs.raise_error(result["error"])
        return pb.ListCatalogResponse.FromString(result["response"])

    # -- Sweep --

    def Sweep(self, request: pb.SweepRequest, context: grpc.ServicerContext) -> Iterator[pb.SweepResponse]:
        """Each scenario is a Plan job; at most one per worker of this sweep is in the pool at a
        time, so a sweep streams at the pool's pace without starving unary calls. A scenario's
        error is its own SweepResponse; the call fails only for an empty or oversized sweep or
        the deadline."""
        scenarios = _scenarios(request)
        n = len(scenarios)
        if n == 0:
            raise InvalidInput("scenarios", "give at least one scenario")
        if n > self.limits.max_sweep_scenarios:
            raise LimitExceeded("scenarios", n, self.limits.max_sweep_scenarios, "scenarios")
        annotate(scenarios=n)
        deadline = _deadline(context)
        pending: dict[Future[dict[str, Any]], tuple[int, str, float, tuple[str, bytes]]] = {}
        next_index = 0
        try:
            while next_index < n or pending:
                while next_index < n and len(pending) < self.pool.workers:
                    i = next_index
                    next_index += 1
                    scenario = scenarios[i]
                    try:
                        data, options = convert.request_to_mapping(scenario.plan)
                        policy.check("Plan", data, self.limits)
                        key = ("Plan", scenario.plan.SerializeToString(deterministic=True))
                        cached = self.cache.get(key)
                        if cached is not None:
                            self.metrics.cache.labels("Sweep", "hit").inc()
                            self.metrics.sweep_scenarios.labels("OK").inc()
                            report = pb.PlanResponse.FromString(cached).report
                            yield pb.SweepResponse(index=i, name=scenario.name, report=report)
                            continue
                        wait_s = None if deadline is None else max(0.0, deadline - time.time())
                        future = self.pool.submit(
                            "Plan", data, options, deadline, wait_s=wait_s, priority=PRIORITY["Sweep"]
                        )
                    except CapplanError as exc:
                        yield self._scenario_error(i, scenario.name, exc)
                        continue
                    pending[future] = (i, scenario.name, time.perf_counter(), key)
                if not pending:
                    continue
                timeout = None if deadline is None else max(0.0, deadline - time.time()) + _RESULT_SLACK_S
                done, _ = wait(pending, timeout=timeout, return_when=FIRST_COMPLETED)
                if not done:
                    raise DeadlineExceeded(
                        f"the deadline passed with {n - next_index + len(pending)} scenarios unanswered"
                    )
                for future in sorted(done, key=lambda f: pending[f][0]):
                    i, name, submitted, key = pending.pop(future)
                    yield self._scenario_answer(i, name, future, submitted, key)
        finally:
            for future in pending:
                future.cancel()

    def _scenario_answer(
        self, i: int, name: str, future: Future[dict[str, Any]], submitted: float, key: tuple[str, bytes]
    ) -> pb.SweepResponse:
        try:
            result = future.result()
        except Exception as exc:  # the worker died: this scenario is INTERNAL, the sweep goes on
            return self._scenario_error(i, name, exc)
        self._account("Sweep", {k: v for k, v in result.items() if k != "summary"}, submitted)
        if "error" in result:
            try:
                jobs.raise_error(result["error"])
            except Exception as exc:
                return self._scenario_error(i, name, exc)
        self.metrics.sweep_scenarios.labels("OK").inc()
        if result.get("cacheable"):
            self.cache.put(key, result["response"])
        report = pb.PlanResponse.FromString(result["response"]).report
        return pb.SweepResponse(index=i, name=name, report=report)

    def _scenario_error(self, i: int, name: str, exc: BaseException) -> pb.SweepResponse:
        prefix = f"scenarios[{i}].plan"
        if isinstance(exc, InvalidInput):
            violations = exc.violations if isinstance(exc, BadRequest) else [(exc.field, exc.reason)]
            exc = BadRequest([(f"{prefix}.{f}", r) for f, r in violations])
        elif isinstance(exc, LimitExceeded):
            exc = LimitExceeded(f"{prefix}.{exc.field}", exc.got, exc.limit, exc.what)
        status = status_of(exc)
        code = next(c for c in grpc.StatusCode if c.value[0] == status.code)
        self.metrics.sweep_scenarios.labels(code.name).inc()
        if code is grpc.StatusCode.INTERNAL:
            from planner.errors import clip
            from planner.server.interceptors import MAX_LOG_FIELD_CHARS, MAX_LOG_TRACEBACK_CHARS
            from planner.server.observability import logger

            logger().error(
                "sweep_scenario_failed",
                index=i,
                error=clip(f"{type(exc).__name__}: {exc}", MAX_LOG_FIELD_CHARS),
                traceback=clip(getattr(exc, "details", ""), MAX_LOG_TRACEBACK_CHARS),
            )
        return pb.SweepResponse(index=i, name=name, error=status)


def _scenarios(request: pb.SweepRequest) -> list[pb.SweepScenario]:
    """The sweep's scenarios as sent, or its `plan` x `scenario_set` expanded by the same rule as
    `capplan plan --scenarios` (planner/forecast/scenarios.py): each the plan with its history
    workload's forecast quantile and growth replaced."""
    from planner.forecast.scenarios import expand
    from planner.schema.history_workload import ForecastSpec

    if not request.HasField("scenario_set"):
        if request.HasField("plan"):
            raise InvalidInput("plan", "a plan is expanded by scenario_set; give scenario_set or scenarios")
        return list(request.scenarios)
    if request.scenarios:
        raise InvalidInput("scenario_set", "give scenarios or plan + scenario_set, not both")
    forecast = request.plan.workload.forecast
    if not request.plan.workload.HasField("history"):
        raise InvalidInput("plan.workload.history", "scenarios vary a forecast: give the history workload")
    sets = expand(
        list(request.scenario_set.quantiles),
        list(request.scenario_set.growth),
        base_quantile=forecast.quantile if forecast.HasField("quantile") else ForecastSpec().quantile,
        base_growth=forecast.growth if forecast.HasField("growth") else None,
        field="scenario_set",
    )
    out = []
    for s in sets:
        plan = pb.PlanRequest()
        plan.CopyFrom(request.plan)
        plan.workload.forecast.quantile = s.quantile
        if s.growth is None:
            plan.workload.forecast.ClearField("growth")
        else:
            plan.workload.forecast.growth = s.growth
        out.append(pb.SweepScenario(name=s.name, plan=plan))
    return out
