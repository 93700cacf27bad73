"""The event loop over replicas, and `simulate` (colocated serving: every replica prefills and
decodes)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from planner.costmodel.timer import StepTimer
from planner.errors import InvalidInput
from planner.simulate.config import SLO, EngineConfig
from planner.simulate.metrics import (
    FloatArray,
    Goodput,
    LatencyStats,
    MinuteAccumulator,
    MinuteSeries,
    ReplicaStats,
    SimResult,
    goodput,
    itl_stats,
)
from planner.simulate.requests import RequestArrays, RequestsLike, as_request_arrays
from planner.simulate.router import Router, make_router
from planner.simulate.scheduler import Engine, RequestTable, StepTrace


def arrival_order(times: FloatArray) -> list[int]:
    """Request indices by (time, index): ties keep input order."""
    return [int(i) for i in np.argsort(times, kind="stable")]


def check_fits(prompt: list[int], kv_tokens: list[int], config: EngineConfig, field: str) -> None:
    """Every request must fit the KV pool alone, or it would preempt itself forever (vLLM refuses
    such a max_model_len at startup)."""
    if not kv_tokens:
        return
    worst = int(np.argmax(np.asarray(kv_tokens, dtype=np.int64)))
    if kv_tokens[worst] > config.kv_cache_tokens:
        raise InvalidInput(
            field,
            f"request {worst} needs KV for {kv_tokens[worst]} tokens but a replica holds "
            f"{config.kv_cache_tokens} ({config.kv_cache_blocks} blocks of {config.block_size})",
        )


def run_pool(
    engines: Sequence[Engine],
    router: Router,
    order: Sequence[int],
    times: Sequence[float],
) -> None:
    """Feed arrivals (rid `order[i]` at `times[i]`, non-decreasing) to the pool and run it dry.
    Before each arrival every replica runs the steps that start before it, so routing sees each
    replica as of its last step and no step ever misses a request that arrived before it."""
    if len(engines) == 1:
        e = engines[0]
        for rid, a in zip(order, times, strict=True):
            if e.t < a:
                e.run_until(a)
            e.enqueue(rid, a)
        e.run_until(math.inf)
        return
    for rid, a in zip(order, times, strict=True):
        for e in engines:
            if e.t < a:
                e.run_until(a)
        engines[router.pick(engines, rid, a)].enqueue(rid, a)
    for e in engines:
        e.run_until(math.inf)


def replica_stats(role: str, engines: Sequence[Engine], duration_s: float) -> list[ReplicaStats]:
    return [
        ReplicaStats(
            role=role,
            index=i,
            requests=e.assigned,
            steps=e.steps,
            busy_fraction=e.busy_s / duration_s if duration_s > 0 else math.nan,
            preemptions=e.preemptions,
            peak_kv_blocks=e.peak_used,
            peak_kv_fraction=e.peak_used / e.config.kv_cache_blocks,
            max_queue_length=e.max_waiting,
        )
        for i, e in enumerate(engines)
    ]


def build_result(
    mode: str,
    reqs: RequestArrays,
    first_token: FloatArray,
    finish: FloatArray,
    engines: Sequence[Engine],
    stats: list[ReplicaStats],
    accumulators: Sequence[MinuteAccumulator],
    origin_s: float,
    slo: SLO | None,
) -> SimResult:
    n = len(reqs)
    arrival = reqs.arrival_s
    out_tokens = reqs.output_tokens
    done = np.isfinite(finish)
    ttft = first_token - arrival
    e2el = finish - arrival
    multi = out_tokens > 1
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(multi, (e2el - ttft) / np.maximum(out_tokens - 1, 1), 0.0)
    end_s = float(finish[done].max()) if done.any() else origin_s
    duration = end_s - origin_s
    gp: Goodput | None = None
    if slo is not None:
        gp = goodput(ttft[done], tpot[done], e2el[done], slo, duration)
    completed = int(done.sum())
    total_out = int(out_tokens[done].sum())
    return SimResult(
        mode=mode,
        budget_reading="v1",
        requests=n,
        completed=completed,
        duration_s=duration,
        request_throughput_rps=completed / duration if duration > 0 else math.nan,
        output_tokens_per_s=total_out / duration if duration > 0 else math.nan,
        ttft=LatencyStats.of(ttft[done]),
        itl=itl_stats([e.itl for e in engines]),
        tpot=LatencyStats.of(tpot[done & multi]),
        e2el=LatencyStats.of(e2el[done]),
        goodput=gp,
        preemptions=sum(s.preemptions for s in stats),
        peak_kv_blocks=max((s.peak_kv_blocks for s in stats), default=0),
        peak_kv_fraction=max((s.peak_kv_fraction for s in stats), default=0.0),
        max_queue_length=max((s.max_queue_length for s in stats), default=0),
        replicas=stats,
        series=MinuteSeries.merge(accumulators, origin_s, end_s),
        ttft_s=ttft,
        e2el_s=e2el,
        tpot_s=tpot,
        first_token_s=first_token,
        finish_s=finish,
    )


def simulate(
    requests: RequestsLike,
    timer: StepTimer,
    config: EngineConfig,
    *,
    replicas: int = 1,
    router: str | Router = "round_robin",
    slo: SLO | None = None,
    fast_forward: bool = True,
    step_trace: list[StepTrace] | None = None,
) -> SimResult:
    """Simulate `replicas` identical vLLM V1 engines behind a router, every request prefilled
    and decoded on the replica it is routed to. Deterministic: same input, same result.
    `fast_forward=False` runs every decode step one by one (same results; for checking).
    `step_trace`: a list to append every step's StepTrace to (debugging, tests)."""
    if replicas < 1:
        raise InvalidInput("replicas", f"must be >= 1, got {replicas}")
    reqs = as_request_arrays(requests)
    prompt = [int(x) for x in reqs.prompt_tokens]
    target = [int(x) for x in reqs.output_tokens]
    check_fits(prompt, [p + o - 1 for p, o in zip(prompt, target, strict=True)], config, "requests")
    table = RequestTable(prompt, target)
    order = arrival_order(reqs.arrival_s)
    times = [float(reqs.arrival_s[i]) for i in order]
    origin = times[0] if times else 0.0
    accs = [MinuteAccumulator(origin) for _ in range(replicas)]
    engines = [
        Engine(config, timer, table, accs[i], fast_forward, index=i, trace=step_trace)
        for i in range(replicas)
    ]
    pick = make_router(router)
    # arrivals per minute are counted where they happen: at the router
    arrivals = accs[0]
    for a in times:
        arrivals.arrivals[arrivals.bin(a)] += 1
    run_pool(engines, pick, order, times)
    first = np.asarray(table.first_token, dtype=np.float64)
    finish = np.asarray(table.finish, dtype=np.float64)
    end = float(finish.max()) - origin if len(reqs) else 0.0
    stats = replica_stats("colocated", engines, end)
    return build_result("colocated", reqs, first, finish, engines, stats, accs, origin, slo)
