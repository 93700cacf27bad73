"""`simulate_closed_loop`: colocated replicas driven by C clients, as `vllm bench serve
--max-concurrency C` drives a server.

Requests come due at their `arrival_s` (all at 0 for `--request-rate inf`; a rate cap's times
otherwise) and go out in order, each when it is due and a client is free: at most C are in flight,
and a client is free again the moment its answer is complete as it sees it (the engine's finish
plus the front end's `request_overhead_s`, zero think time). This is vllm bench serve's semaphore:
its latencies start when a request is sent, so the wait for a client is not in them, and neither
is it here (a request's arrival in the result is when it was sent).

Event order. Sends and steps are taken in time order: a send goes out once every busy replica
has run the steps that start before it (so the router sees each replica as of then, as in
replica_pool.run_pool), and a replica runs at most until its first completion, when a client
frees up, and never past another busy replica's next step start plus the front end (the earliest
time a send that replica frees could come), so no step runs ahead of a send that could reach it.
With one replica this keeps the simulator's fast-forward whole (a run of decode steps ends at its
first completion anyway); with several it advances them step by step in lockstep.

Bounds: those of replica_pool (requests, engine events, simulated span) and the clients,
1 .. planner.workload.MAX_CLIENT_CONCURRENCY. Every request is counted from the first, as the
open-loop simulation counts them (and as vllm bench serve does): the start, C requests at once,
is part of the run.
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections.abc import Iterable, Iterator

import numpy as np

from planner.costmodel.timer import StepTimer
from planner.errors import InvalidInput
from planner.scheduler_config import SchedulerConfig
from planner.simulate.metrics import MAX_SIM_SPAN_S, MinuteAccumulator, MinuteTotals, SimResult, span_error
from planner.simulate.replica_pool import MAX_SIM_REQUESTS, build_result, check_fits, replica_stats, times_of
from planner.simulate.requests import RequestArrays, within_context
from planner.simulate.router import Router, make_router
from planner.simulate.scheduler import EventBudget, RequestTable, SimulatedEngine
from planner.slo import Slo
from planner.workload import MAX_CLIENT_CONCURRENCY

__all__ = ["simulate_closed_loop"]


Due = tuple[float, int, int, bool]


def _requests(chunks: Iterable[RequestArrays], config: SchedulerConfig) -> Iterator[Due]:
    """(due time, prompt, output, output was cut) of each request in order, outputs cut at
    max_model_len as vLLM stops them and each checked to fit a replica's KV cache alone."""
    start = 0
    for raw in chunks:
        chunk, _ = within_context(raw, config.max_model_len, start)
        n = len(chunk)
        check_fits(np.arange(start, start + n), chunk.prompt_tokens + chunk.output_tokens - 1, config)
        start += n
        cut = (chunk.output_tokens < raw.output_tokens).tolist()
        yield from zip(
            chunk.arrival_s.tolist(),
            chunk.prompt_tokens.tolist(),
            chunk.output_tokens.tolist(),
            cut,
            strict=True,
        )


def simulate_closed_loop(
    requests: Iterable[RequestArrays],
    timer: StepTimer,
    config: SchedulerConfig,
    *,
    concurrency: int,
    horizon_s: float | None = None,
    replicas: int = 1,
    router: str | Router = "round_robin",
    slo: Slo | None = None,
    fast_forward: bool = True,
    request_overhead_s: float = 0.0,
) -> tuple[SimResult, RequestArrays, int]:
    """Simulate `replicas` colocated engines serving `requests` (chunks in due order) from
    `concurrency` clients; with `horizon_s`, only the requests sent before it. Returns the result
    the requests sent (arrival: when sent; outputs cut at max_model_len) and how many outputs
    were cut. Deterministic."""
    if not 1 <= concurrency <= MAX_CLIENT_CONCURRENCY:
        raise InvalidInput(
            "concurrency", f"must be 1 .. {MAX_CLIENT_CONCURRENCY:,} clients, got {concurrency}"
        )
    if replicas < 1:
        raise InvalidInput("replicas", f"must be >= 1, got {replicas}")
    if not 0.0 <= request_overhead_s <= 10.0:
        raise InvalidInput("request_overhead_s", f"must be 0 .. 10 s, got {request_overhead_s:g}")
    table = RequestTable(0)
    budget = EventBudget()
    engines = [
        SimulatedEngine(config, timer, table, MinuteAccumulator(0.0), fast_forward, i, None, budget)
        for i in range(replicas)
    ]
    due = _requests(requests, config)
    sent_at, prompts, outputs, cuts = _run(
        engines, make_router(router), due, concurrency, horizon_s, request_overhead_s, table
    )
    totals = MinuteTotals(0.0)
    for e in engines:
        e.series.fold(totals, None, True)
    arrival = times_of(sent_at)
    output = np.array(outputs, dtype=np.int64)
    first, finish = times_of(table.first_token), times_of(table.finish)
    end = float(finish.max()) if len(finish) else 0.0
    stats = replica_stats("colocated", engines, end)
    result = build_result(
        "colocated", arrival, output, first, finish, engines, stats, totals, slo, request_overhead_s
    )
    return result, RequestArrays(arrival, np.array(prompts, dtype=np.int64), output), cuts


def _run(
    engines: list[SimulatedEngine],
    router: Router,
    due: Iterator[Due],
    concurrency: int,
    horizon_s: float | None,
    overhead_s: float,
    table: RequestTable,
) -> tuple[array[float], array[int], array[int], int]:
    """The event loop (module docstring); returns each request's send time, prompt and output,
    and how many of the outputs sent were cut at max_model_len."""
    sent_at: array[float] = array("d")
    prompts: array[int] = array("q")
    outputs: array[int] = array("q")
    cuts = 0
    free = [0.0] * concurrency  # when each client is free (a heap)
    busy: list[tuple[float, int]] = []  # (next step start, replica) of replicas with work
    queued = [False] * len(engines)
    changed = getattr(router, "changed", None)
    series0 = engines[0].series
    stop = math.inf if horizon_s is None else horizon_s
    head = next(due, None)
    while True:
        send_t = max(head[0], free[0]) if head is not None and free else math.inf
        if send_t >= stop:
            send_t = math.inf
        if busy and busy[0][0] < send_t:
            _, i = heapq.heappop(busy)
            others = busy[0][0] + overhead_s if busy else math.inf
            e = engines[i]
            done = e.completed
            e.run_until(max(min(send_t, others), math.nextafter(e.t, math.inf)), first_finish=True)
            for _ in range(e.completed - done):
                heapq.heappush(free, e.t + overhead_s)
            if e.has_work():
                heapq.heappush(busy, (e.t, i))
            else:
                queued[i] = False
            if changed is not None:
                changed(i)
            continue
        if head is None or send_t == math.inf:
            break
        heapq.heappop(free)
        _, prompt, output, was_cut = head
        cuts += was_cut
        rid = len(sent_at)
        if rid >= MAX_SIM_REQUESTS:
            raise InvalidInput("requests", f"more than the {MAX_SIM_REQUESTS:,} requests a simulation takes")
        if not send_t < MAX_SIM_SPAN_S:
            raise span_error(send_t)
        sent_at.append(send_t)
        prompts.append(prompt)
        outputs.append(output)
        table.grow(rid + 1)
        table.add(rid, prompt, output)
        series0.arrivals[series0.bin(send_t)] += 1
        i = router.pick(engines, rid, send_t)
        e = engines[i]
        e.enqueue(rid, send_t)
        if changed is not None:
            changed(i)
        if not queued[i]:
            queued[i] = True
            heapq.heappush(busy, (e.t, i))
        head = next(due, None)
    return sent_at, prompts, outputs, cuts
