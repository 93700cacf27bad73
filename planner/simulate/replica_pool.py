"""Driving pools of engines through requests within bounded time and memory: the request feed
(arrays or a lazy `RequestStream`, in arrival order), the event loop over a pool's replicas, and
the result.

Bounds (InvalidInput above them; a server inherits them):

| what                                                   | limit                                  |
|--------------------------------------------------------|----------------------------------------|
| requests in one simulation                             | 10,000,000 (`MAX_SIM_REQUESTS`)        |
| engine events, all replicas (a step, or a run of       | 50,000,000 (`MAX_SIM_EVENTS`)          |
| identical decode steps fast-forwarded as one)          |                                        |
| simulated time, first arrival to last event            | 1e7 s, ~116 days (`MAX_SIM_SPAN_S`)    |
| tokens of one request (prompt or output)               | 10,000,000 (`MAX_REQUEST_TOKENS`)      |

Memory: per request simulated, 8 bytes each for its first-token and finish times (plus its
arrival and output length for a stream, and the result's per-request arrays); per request in
flight, a few dict entries; per event, at most one ITL record (16 or 40 bytes); per replica, a
window of per-minute sums (minutes every replica is past are folded into the pool's totals).
Time: O(events x log replicas + requests), plus routing (O(log replicas) a request).
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from planner.errors import InvalidInput
from planner.scheduler_config import SchedulerConfig
from planner.simulate.metrics import (
    MAX_SIM_SPAN_S,
    FloatArray,
    Goodput,
    IntArray,
    LatencyStats,
    MinuteSeries,
    MinuteTotals,
    ReplicaStats,
    SimResult,
    goodput,
    itl_stats,
)
from planner.simulate.requests import (
    MAX_REQUEST_TOKENS,
    RequestArrays,
    RequestsLike,
    RequestStream,
    as_request_arrays,
    within_context,
)
from planner.simulate.router import Router
from planner.simulate.scheduler import MAX_SIM_EVENTS, SimulatedEngine
from planner.slo import Slo
from planner.workload import MAX_SAMPLED_REQUESTS

__all__ = [
    "MAX_REQUEST_TOKENS",
    "MAX_SIM_EVENTS",
    "MAX_SIM_REQUESTS",
    "MAX_SIM_SPAN_S",
    "Feed",
    "build_result",
    "check_fits",
    "ordered_chunks",
    "replica_stats",
    "run_pool",
]

MAX_SIM_REQUESTS = MAX_SAMPLED_REQUESTS  # what a workload sample may hold: one definition
CHUNK = 65_536  # requests handed to the event loop at a time
# Per-minute sums held over all replicas before the finished minutes are folded into the pool's
# totals (at least every FOLD_MIN_MINUTES minutes apart).
FOLD_ENTRIES = 1_000_000
FOLD_MIN_MINUTES = 64

# A chunk of requests in arrival order: request ids, arrival times, prompt and output tokens.
Chunk = tuple[list[int], list[float], list[int], list[int]]
# How many KV tokens each request of a chunk needs to fit on a replica, from (prompt, output).
KvNeed = Callable[[IntArray, IntArray], IntArray]


class Feed:
    """The requests of one simulation in arrival order (ties in input order), a chunk at a time.

    Arrays are validated whole up front (count, span, fit); a `RequestStream` chunk by chunk as
    it is consumed, its arrival times and output lengths kept in typed arrays for the result.
    `kv_need` gives the KV tokens a request must find free on a replica of `config`. Outputs are
    cut at the config's max_model_len as vLLM stops them (`within_context`)."""

    def __init__(
        self, requests: RequestsLike | RequestStream, config: SchedulerConfig, kv_need: KvNeed
    ) -> None:
        self.config = config
        self.kv_need = kv_need
        self.count = 0
        self._arrays: RequestArrays | None = None
        self._stream: Iterator[RequestArrays] | None = None
        self._arrival = array("d")
        self._output = array("q")
        self._first: RequestArrays | None = None
        if isinstance(requests, RequestStream):
            self._stream = iter(requests)
            self._first = next(self._stream, None)
            self.origin_s = float(self._first.arrival_s[0]) if self._first is not None else 0.0
            self.known = 0
            return
        reqs = as_request_arrays(requests)
        n = len(reqs)
        if n > MAX_SIM_REQUESTS:
            raise InvalidInput("requests", f"{n:,} requests; a simulation takes at most {MAX_SIM_REQUESTS:,}")
        if n:
            span = float(reqs.arrival_s.max() - reqs.arrival_s.min())
            if not span <= MAX_SIM_SPAN_S:
                raise _span(span)
        reqs, _ = within_context(reqs, config.max_model_len)
        check_fits(np.arange(n), kv_need(reqs.prompt_tokens, reqs.output_tokens), config)
        self._arrays = reqs
        self.origin_s = float(reqs.arrival_s.min()) if n else 0.0
        self.known = n

    def chunks(self, on_grow: Callable[[int], None]) -> Iterator[Chunk]:
        """Chunks in arrival order; `on_grow(n)` is called before a chunk whose request ids go
        up to n - 1 (a stream's ids are its running count)."""
        if self._arrays is not None:
            reqs = self._arrays
            on_grow(len(reqs))
            self.count = len(reqs)
            order = np.argsort(reqs.arrival_s, kind="stable")
            yield from ordered_chunks(order, reqs.arrival_s, reqs.prompt_tokens, reqs.output_tokens)
            return
        assert self._stream is not None
        first, self._first = self._first, None
        parts = self._stream if first is None else _prepend(first, self._stream)
        for chunk in parts:
            n = len(chunk)
            start = self.count
            if start + n > MAX_SIM_REQUESTS:
                raise InvalidInput(
                    "requests", f"more than the {MAX_SIM_REQUESTS:,} requests a simulation takes"
                )
            span = float(chunk.arrival_s[-1]) - self.origin_s
            if not span <= MAX_SIM_SPAN_S:
                raise _span(span)
            rids = np.arange(start, start + n)
            chunk, _ = within_context(chunk, self.config.max_model_len, start)
            check_fits(rids, self.kv_need(chunk.prompt_tokens, chunk.output_tokens), self.config)
            self._arrival.extend(chunk.arrival_s.tolist())
            self._output.extend(chunk.output_tokens.tolist())
            self.count = start + n
            on_grow(self.count)
            yield (
                rids.tolist(),
                chunk.arrival_s.tolist(),
                chunk.prompt_tokens.tolist(),
                chunk.output_tokens.tolist(),
            )

    def columns(self) -> tuple[FloatArray, IntArray]:
        """Arrival times and output lengths of every request fed, by request id."""
        if self._arrays is not None:
            return self._arrays.arrival_s, self._arrays.output_tokens
        arrival = np.frombuffer(self._arrival, dtype=np.float64) if self.count else np.empty(0)
        output = np.frombuffer(self._output, dtype=np.int64) if self.count else np.empty(0, dtype=np.int64)
        return arrival, output


def _prepend(first: RequestArrays, rest: Iterator[RequestArrays]) -> Iterator[RequestArrays]:
    yield first
    yield from rest


def _span(span: float) -> InvalidInput:
    return InvalidInput(
        "requests",
        f"arrivals span {span:.4g} s, more than the {MAX_SIM_SPAN_S:g} s (~116 days) a simulation may cover",
    )


def check_fits(rids: IntArray, kv_tokens: IntArray, config: SchedulerConfig) -> None:
    """Every request must fit the KV pool alone, or it would preempt itself forever (vLLM refuses
    such a max_model_len at startup)."""
    if not kv_tokens.size:
        return
    worst = int(np.argmax(kv_tokens))
    if int(kv_tokens[worst]) > config.kv_cache_tokens:
        raise InvalidInput(
            "requests",
            f"request {int(rids[worst])} needs KV for {int(kv_tokens[worst])} tokens but a replica holds "
            f"{config.kv_cache_tokens} ({config.kv_cache_blocks} blocks of {config.block_size})",
        )


def ordered_chunks(order: IntArray, times: FloatArray, prompt: IntArray, output: IntArray) -> Iterator[Chunk]:
    """Chunks of the requests `order` lists (ids into the arrays), times non-decreasing."""
    for i in range(0, order.size, CHUNK):
        idx = order[i : i + CHUNK]
        yield idx.tolist(), times[idx].tolist(), prompt[idx].tolist(), output[idx].tolist()


def run_pool(
    engines: Sequence[SimulatedEngine],
    router: Router,
    chunks: Iterator[Chunk],
    register: Callable[[int, int, int, float], None],
    totals: MinuteTotals,
    *,
    count_arrivals: bool = True,
    completions: bool = True,
) -> None:
    """Feed arrivals (non-decreasing times) to the pool and run it dry, folding every replica's
    per-minute sums into `totals`. `register(rid, prompt, output, t)` enters a request into the
    pool's table. Before each arrival every replica runs the steps that start before it (in
    replica order), so routing sees each replica as of its last step and no step misses a
    request that arrived before it. Replicas with nothing to do are not visited: the ones with
    work wait in a heap by the start of their next step."""
    count = len(engines)
    series0 = engines[0].series
    fold_every_s = max(FOLD_MIN_MINUTES, FOLD_ENTRIES // count) * 60.0
    next_fold = series0.origin_s + fold_every_s
    if count == 1:
        e = engines[0]
        for rids, times, prompts, outputs in chunks:
            for rid, a, p, o in zip(rids, times, prompts, outputs, strict=True):
                register(rid, p, o, a)
                if count_arrivals:
                    series0.arrivals[series0.bin(a)] += 1
                if e.t < a:
                    e.run_until(a)
                e.enqueue(rid, a)
        e.run_until(math.inf)
        e.series.fold(totals, None, completions)
        return
    changed = getattr(router, "changed", None)
    busy: list[tuple[float, int]] = []  # (next step start, replica) of replicas with work
    queued = [False] * count
    for rids, times, prompts, outputs in chunks:
        for rid, a, p, o in zip(rids, times, prompts, outputs, strict=True):
            register(rid, p, o, a)
            if count_arrivals:
                series0.arrivals[series0.bin(a)] += 1
            if busy and busy[0][0] < a:
                due = []
                while busy and busy[0][0] < a:
                    due.append(heapq.heappop(busy)[1])
                due.sort()
                for i in due:
                    e = engines[i]
                    e.run_until(a)
                    if e.has_work():
                        heapq.heappush(busy, (e.t, i))
                    else:
                        queued[i] = False
                    if changed is not None:
                        changed(i)
            i = router.pick(engines, rid, a)
            e = engines[i]
            e.enqueue(rid, a)
            if changed is not None:
                changed(i)
            if not queued[i]:
                queued[i] = True
                heapq.heappush(busy, (e.t, i))
            if a >= next_fold:
                # Every replica's next step starts at or after a: earlier minutes are final.
                upto = series0.minute(a)
                for eng in engines:
                    eng.series.fold(totals, upto, completions)
                next_fold = a + fold_every_s
    for e in engines:
        e.run_until(math.inf)
        e.series.fold(totals, None, completions)


def replica_stats(role: str, engines: Sequence[SimulatedEngine], duration_s: float) -> list[ReplicaStats]:
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
    arrival: FloatArray,
    out_tokens: IntArray,
    first_token: FloatArray,
    finish: FloatArray,
    engines: Sequence[SimulatedEngine],
    stats: list[ReplicaStats],
    totals: MinuteTotals,
    slo: Slo | None,
    request_overhead_s: float = 0.0,
) -> SimResult:
    """Latencies as the client sees them: the engine's first-token and finish times (kept as they
    are in the result) plus the front end's constant `request_overhead_s`, which delays every
    request alike and so moves no step."""
    if not 0.0 <= request_overhead_s <= 10.0:
        raise InvalidInput("request_overhead_s", f"must be 0 .. 10 s, got {request_overhead_s:g}")
    n = int(arrival.shape[0])
    origin_s = totals.origin_s
    done = np.isfinite(finish)
    ttft = first_token - arrival
    e2el = finish - arrival
    multi = out_tokens > 1
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(multi, (e2el - ttft) / np.maximum(out_tokens - 1, 1), 0.0)
    if request_overhead_s > 0:
        ttft = ttft + request_overhead_s
        e2el = e2el + request_overhead_s
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
        series=MinuteSeries.of(totals, end_s),
        ttft_s=ttft,
        e2el_s=e2el,
        tpot_s=tpot,
        first_token_s=first_token,
        finish_s=finish,
    )


def times_of(values: array[float]) -> FloatArray:
    """A typed array of times as a numpy array of its own."""
    return np.frombuffer(values, dtype=np.float64).copy() if len(values) else np.empty(0)
