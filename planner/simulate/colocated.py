"""`simulate`: colocated serving, every replica prefills and decodes (the event loop over
replicas and the bounds on a simulation's work are in replica_pool.py)."""

from __future__ import annotations

from planner.costmodel.timer import StepTimer
from planner.errors import InvalidInput
from planner.scheduler_config import SchedulerConfig
from planner.simulate.metrics import MinuteAccumulator, MinuteTotals, SimResult
from planner.simulate.replica_pool import Feed, build_result, replica_stats, run_pool, times_of
from planner.simulate.requests import RequestsLike, RequestStream
from planner.simulate.router import Router, make_router
from planner.simulate.scheduler import EventBudget, RequestTable, SimulatedEngine, StepTrace
from planner.slo import Slo


def simulate(
    requests: RequestsLike | RequestStream,
    timer: StepTimer,
    config: SchedulerConfig,
    *,
    replicas: int = 1,
    router: str | Router = "round_robin",
    slo: Slo | None = None,
    fast_forward: bool = True,
    step_trace: list[StepTrace] | None = None,
    request_overhead_s: float = 0.0,
) -> SimResult:
    """Simulate `replicas` identical vLLM V1 engines behind a router, every request prefilled
    and decoded on the replica it is routed to. Deterministic: same input, same result.
    `request_overhead_s`: the front end's constant added to every TTFT and end-to-end latency.
    `fast_forward=False` runs every decode step one by one (same results; for checking).
    `step_trace`: a list to append every step's StepTrace to (debugging, tests)."""
    if replicas < 1:
        raise InvalidInput("replicas", f"must be >= 1, got {replicas}")
    feed = Feed(requests, config, lambda p, o: p + o - 1)
    table = RequestTable(feed.known)
    origin = feed.origin_s
    budget = EventBudget()
    engines = [
        SimulatedEngine(config, timer, table, MinuteAccumulator(origin), fast_forward, i, step_trace, budget)
        for i in range(replicas)
    ]
    totals = MinuteTotals(origin)

    def register(rid: int, prompt: int, output: int, t: float) -> None:
        table.add(rid, prompt, output)

    # arrivals per minute are counted where they happen: at the router
    run_pool(engines, make_router(router), feed.chunks(table.grow), register, totals)
    first, finish = times_of(table.first_token), times_of(table.finish)
    end = float(finish.max()) - origin if feed.count else 0.0
    stats = replica_stats("colocated", engines, end)
    arrival, output = feed.columns()
    return build_result(
        "colocated", arrival, output, first, finish, engines, stats, totals, slo, request_overhead_s
    )
