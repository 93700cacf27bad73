"""The simulator's bounds (issue 8): lazy request streams give the same results as arrays, memory
follows the requests in flight (per request simulated: a few typed-array slots), folding the
per-minute series and the routing tree change nothing, and the caps on requests, engine events
and simulated time refuse runaway inputs quickly, naming the field."""

from __future__ import annotations

import json
import math
import time
import tracemalloc
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import planner.simulate.engine_state as engine_state
import planner.simulate.replica_pool as replica_pool
import planner.simulate.router as router
from planner.errors import InvalidInput
from planner.simulate import SchedulerConfig, Slo, simulate, simulate_disaggregated
from planner.simulate.metrics import MAX_SIM_SPAN_S, ItlRecorder, itl_stats
from planner.simulate.requests import RequestArrays, RequestStream
from planner.simulate.run import (
    tile,
    tile_stream,
    trace_requests,
    trace_stream,
    workload_requests,
    workload_stream,
)
from planner.traces import builtin_trace
from planner.workload import Workload

CFG = SchedulerConfig(kv_cache_blocks=4000, max_num_seqs=128, max_num_batched_tokens=2048)
CHAT = {
    "arrivals": {"requests_per_s": 40.0, "burstiness": 0.5},
    "input_tokens": {"percentiles": {"p10": 50, "p50": 400, "p99": 3000}},
    "output_tokens": {"pairs": [[20, 0.5], [200, 0.4], [900, 0.1]]},
}


class Roofline:
    """max(memory, compute) + overhead: context-dependent, like the real cost model; counts calls."""

    def __init__(self, overhead_s: float = 2e-3) -> None:
        self.overhead_s = overhead_s
        self.calls = 0

    def step_time_s(self, chunks: Sequence[tuple[int, int]], n: int, ctx: int) -> float:
        self.calls += 1
        tokens = n + sum(c for c, _ in chunks)
        kv = ctx + sum(p + c for c, p in chunks)
        return self.overhead_s + max(2e-8 * kv, 1.5e-5 * tokens)

    def decode_run_time_s(self, n: int, ctx: int, steps: int) -> float:
        """Closed form of the sum of `steps` step times: compute-bound (flat) until the memory
        time a + b j overtakes it, then linear."""
        if steps <= 0:
            return 0.0
        a, b, c = 2e-8 * ctx, 2e-8 * n, 1.5e-5 * n
        flat = 0 if a >= c else min(steps, math.ceil((c - a) / b))
        rising = steps - flat
        return steps * self.overhead_s + flat * c + rising * a + b * (flat + steps - 1) * rising / 2.0


def _dump(res: Any) -> str:
    return json.dumps(res.to_dict(include_requests=True), sort_keys=True)


def _workload() -> Workload:
    return Workload.from_mapping(CHAT)


def test_a_lazy_stream_gives_the_result_of_arrays() -> None:
    wl = _workload()
    arrays = workload_requests(wl, 3, count=3000)
    stream = RequestStream(
        RequestArrays(c.arrival_s, c.prompt_tokens, c.output_tokens)
        for c in wl.request_chunks(3, count=3000, chunk_size=257)
    )
    a = simulate(arrays, Roofline(), CFG, replicas=2, slo=Slo(ttft_p99_s=0.5))
    b = simulate(stream, Roofline(), CFG, replicas=2, slo=Slo(ttft_p99_s=0.5))
    assert _dump(a) == _dump(b)
    assert stream.count == 3000 and stream.first_arrival_s == arrays.arrival_s[0]
    assert stream.output_tokens_sum == int(arrays.output_tokens.sum())
    # The run helpers' streams hold the same requests as their arrays.
    for lazy, eager in (
        (workload_stream(wl, 5, horizon_s=30.0), workload_requests(wl, 5, horizon_s=30.0)),
        (trace_stream(builtin_trace("azure-code-2023"), count=25_000), trace_requests(builtin_trace("azure-code-2023"), count=25_000)),
        (tile_stream(arrays, horizon_s=200.0), tile(arrays, horizon_s=200.0)),
    ):  # fmt: skip
        got = lazy.collect()
        for col in ("arrival_s", "prompt_tokens", "output_tokens"):
            assert np.array_equal(getattr(got, col), getattr(eager, col))


def test_disaggregated_takes_a_stream() -> None:
    wl = _workload()
    arrays = workload_requests(wl, 1, count=800)
    kw: dict[str, Any] = {"prefill_replicas": 2, "decode_replicas": 2, "kv_transfer": 1e-6}
    a = simulate_disaggregated(arrays, Roofline(), Roofline(), CFG, CFG, **kw)
    b = simulate_disaggregated(workload_stream(wl, 1, count=800), Roofline(), Roofline(), CFG, CFG, **kw)
    assert _dump(a) == _dump(b)


def test_folding_minutes_and_the_routing_tree_change_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Per-minute sums folded every minute, and least-outstanding-tokens by tree instead of a
    scan, give byte-identical results (40 replicas, ~8 simulated minutes)."""
    wl = Workload.from_mapping({**CHAT, "arrivals": {"requests_per_s": 30.0}})
    reqs = workload_requests(wl, 2, count=15_000)
    base = _dump(simulate(reqs, Roofline(), CFG, replicas=40, router="least_outstanding_tokens"))
    monkeypatch.setattr(replica_pool, "FOLD_ENTRIES", 1)
    monkeypatch.setattr(replica_pool, "FOLD_MIN_MINUTES", 1)
    monkeypatch.setattr(router.LeastOutstandingTokens, "SCAN", 1)
    folded = _dump(simulate(reqs, Roofline(), CFG, replicas=40, router="least_outstanding_tokens"))
    assert folded == base
    assert len(json.loads(base)["series"]["arrivals"]) >= 8


def test_memory_per_request_is_a_few_typed_slots() -> None:
    """Peak traced memory grows by well under 300 bytes a simulated request (per-request times
    in typed arrays, state only while in flight, ITL records in typed arrays): ~75 here, where
    the per-request Python lists of the previous simulator took ~555 (measured on this workload
    at commit a720b9e)."""
    wl = Workload.from_mapping(
        {"arrivals": {"requests_per_s": 20.0}, "input_tokens": {"constant": 300}, "output_tokens": {"pairs": [[4, 0.5], [12, 0.5]]}}
    )  # fmt: skip

    def peak(n: int) -> int:
        stream = workload_stream(wl, 0, count=n)
        tracemalloc.start()
        simulate(stream, Roofline(), CFG)
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return top

    small, large = peak(2_000), peak(8_000)
    per_request = (large - small) / 6_000
    assert per_request < 300, f"{per_request:.0f} bytes per simulated request"


def test_request_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replica_pool, "MAX_SIM_REQUESTS", 100)
    reqs = workload_requests(_workload(), 0, count=101)
    with pytest.raises(InvalidInput, match="at most 100") as exc:
        simulate(reqs, Roofline(), CFG)
    assert exc.value.field == "requests"
    with pytest.raises(InvalidInput, match="100 requests") as exc:
        simulate(workload_stream(_workload(), 0, count=101), Roofline(), CFG)


def test_event_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_state, "MAX_SIM_EVENTS", 500)
    reqs = workload_requests(_workload(), 0, count=400)
    with pytest.raises(InvalidInput, match="more than 500 engine steps") as exc:
        simulate(reqs, Roofline(), CFG, replicas=3)
    assert exc.value.field == "requests"


@pytest.mark.parametrize(
    "arrivals",
    [
        [0.0, 2 * MAX_SIM_SPAN_S],  # a tiny rate: requests days apart
        [0.0, 1e30],  # a huge timestamp
        [-1e30, 0.0],
    ],
)
def test_arrivals_past_the_span_are_refused_at_once(arrivals: list[float]) -> None:
    reqs = (arrivals, [10] * len(arrivals), [5] * len(arrivals))
    t0 = time.perf_counter()
    with pytest.raises(InvalidInput, match="more than the 1e\\+07 s") as exc:
        simulate(reqs, Roofline(), CFG)
    assert exc.value.field == "requests" and time.perf_counter() - t0 < 1.0
    with pytest.raises(InvalidInput, match="1e\\+07 s"):
        simulate(RequestStream([reqs]), Roofline(), CFG)


def test_tiny_rates_end_quickly() -> None:
    wl = Workload.from_mapping({**CHAT, "arrivals": {"requests_per_s": 1e-7}})
    t0 = time.perf_counter()
    with pytest.raises(InvalidInput, match="1e\\+07 s"):
        simulate(workload_stream(wl, 0, count=10_000), Roofline(), CFG)
    assert time.perf_counter() - t0 < 2.0


@pytest.mark.parametrize("overhead_s", [1e5, 1e30, math.inf])
def test_huge_step_times_end_quickly(overhead_s: float) -> None:
    """A cost model gone wrong (steps of days, or infinite) stops at the span cap."""
    t0 = time.perf_counter()
    with pytest.raises(InvalidInput, match="past the 1e\\+07 s"):
        simulate(([0.0, 1.0, 2.0], [100, 100, 100], [400, 400, 400]), Roofline(overhead_s), CFG)
    assert time.perf_counter() - t0 < 2.0


def test_huge_kv_transfer_ends_quickly() -> None:
    t0 = time.perf_counter()
    with pytest.raises(InvalidInput, match="past the 1e\\+07 s"):
        simulate_disaggregated(
            ([0.0, 1.0], [100, 100], [50, 50]), Roofline(), Roofline(), CFG, CFG, kv_transfer=1e30
        )
    assert time.perf_counter() - t0 < 2.0


def test_long_lonely_decodes_get_exact_percentiles_from_few_step_times() -> None:
    """Requests decoding alone for 150,000 steps each (a tiny rate, huge answers): every ITL
    percentile is exact, from a few thousand step-time evaluations instead of one per step."""
    cfg = SchedulerConfig(kv_cache_blocks=40_000, max_num_seqs=8, max_num_batched_tokens=2048)
    reqs = ([0.0, 5000.0, 10_000.0], [1000, 3000, 2000], [150_000, 120_000, 90_000])
    timer = Roofline()
    res = simulate(reqs, timer, cfg)
    step_by_step = simulate(reqs, Roofline(), cfg, fast_forward=False)  # every gap recorded
    assert res.itl.count == step_by_step.itl.count == sum(o - 1 for o in reqs[2])
    for p in ("p50_s", "p90_s", "p99_s", "max_s"):
        assert getattr(res.itl, p) == getattr(step_by_step.itl, p)
    assert timer.calls < 20_000, timer.calls


def test_itl_selection_is_exact_with_ties_flats_and_points() -> None:
    """Brute force vs the bounded selection on random records (flat compute-bound stretches,
    stretches sharing their values, weighted points)."""

    class Knee:
        def step_time_s(self, chunks: Any, n: int, ctx: int) -> float:
            return max(2e-3 + 3e-8 * ctx, 4e-5 * n)

        def decode_run_time_s(self, n: int, ctx: int, steps: int) -> float:
            return math.fsum(self.step_time_s((), n, ctx + j * n) for j in range(steps))

    timer = Knee()
    for seed in range(4):
        rng = np.random.default_rng(seed)
        rec = ItlRecorder(timer)
        values: list[float] = []
        weights: list[int] = []
        for _ in range(250):
            if rng.random() < 0.2:
                v, w = float(rng.uniform(1e-3, 6e-3)), int(rng.integers(0, 40))
                rec.point(v, w)
                values.append(v)
                weights.append(w)
                continue
            n, ctx, k = int(rng.integers(1, 300)), int(rng.integers(0, 200_000)), int(rng.integers(2, 600))
            if rng.random() < 0.3:
                n, ctx = 7, 1000
            steps = [timer.step_time_s((), n, ctx + j * n) for j in range(k)]
            rec.stretch(n, ctx, k, steps[0], timer.decode_run_time_s(n, ctx, k))
            values += steps
            weights += [n] * k
        x = np.repeat(np.asarray(values), np.asarray(weights))
        got = itl_stats([rec])
        assert got.count == x.size
        assert [got.p50_s, got.p90_s, got.p99_s] == list(np.percentile(x, [50, 90, 99]))
        assert got.max_s == float(x.max())


@pytest.mark.parametrize("step_s", [0.0, -1.0, math.nan])
def test_a_timer_giving_no_time_or_nan_is_refused(step_s: float) -> None:
    class Broken(Roofline):
        def step_time_s(self, chunks: Sequence[tuple[int, int]], n: int, ctx: int) -> float:
            return step_s

        def decode_run_time_s(self, n: int, ctx: int, steps: int) -> float:
            return step_s * steps

    with pytest.raises(InvalidInput) as exc:
        simulate(([0.0, 1.0], [10, 10], [50, 50]), Broken(), CFG)
    assert exc.value.field == "timer"


def test_outputs_stop_at_max_model_len_as_vllm_stops_them() -> None:
    """vLLM ends a request at max_model_len (finish reason "length") and refuses a prompt that
    leaves no room for an output token. The simulator cuts outputs at the config's
    max_model_len, in arrays and streams, colocated and disaggregated: the result of requests
    cut by hand."""
    import dataclasses

    wl = _workload()
    arrays = workload_requests(wl, 7, count=600)
    limit = int(arrays.prompt_tokens.max()) + 300
    cut_cfg = dataclasses.replace(CFG, max_model_len=limit)
    by_hand = RequestArrays(
        arrays.arrival_s, arrays.prompt_tokens, np.minimum(arrays.output_tokens, limit - arrays.prompt_tokens)
    )
    assert (by_hand.output_tokens < arrays.output_tokens).sum() > 5
    want = _dump(simulate(by_hand, Roofline(), CFG, replicas=2))
    assert _dump(simulate(arrays, Roofline(), cut_cfg, replicas=2)) == want
    stream = RequestStream(
        RequestArrays(c.arrival_s, c.prompt_tokens, c.output_tokens)
        for c in wl.request_chunks(7, count=600, chunk_size=97)
    )
    assert _dump(simulate(stream, Roofline(), cut_cfg, replicas=2)) == want
    kw: dict[str, Any] = {"prefill_replicas": 1, "decode_replicas": 2, "kv_transfer": 1e-6}
    assert _dump(simulate_disaggregated(arrays, Roofline(), Roofline(), cut_cfg, cut_cfg, **kw)) == _dump(
        simulate_disaggregated(by_hand, Roofline(), Roofline(), CFG, CFG, **kw)
    )
    # a prompt of max_model_len tokens leaves no room for an output token: refused, by request
    long = RequestArrays(np.array([0.0, 1.0]), np.array([10, limit]), np.array([5, 5]))
    with pytest.raises(InvalidInput, match=f"request 1 has a {limit:,}-token prompt") as exc:
        simulate(long, Roofline(), cut_cfg)
    assert exc.value.field == "requests"
