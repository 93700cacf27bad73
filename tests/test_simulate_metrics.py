"""Metrics: weighted percentiles, the aggregate ITL store, goodput, per-minute series."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from planner.errors import InvalidInput
from planner.simulate import SchedulerConfig, SimRequest, Slo, simulate, weighted_percentiles
from planner.simulate.metrics import ItlRecorder, itl_stats


@pytest.mark.parametrize("seed", range(5))
def test_weighted_percentiles_equal_numpy_on_repeated_samples(seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = np.round(rng.gamma(2.0, 0.01, 200), 4)  # ties included
    weights = rng.integers(0, 6, 200)
    ps = [0, 1, 25, 50, 90, 99, 99.9, 100]
    want = np.percentile(np.repeat(values, weights), ps)
    assert weighted_percentiles(values, weights, ps) == list(want)


class RooflineLike:
    """max(memory, compute) per step: context-dependent below the knee, flat above it."""

    def step_time_s(
        self, prefill_chunks: Sequence[tuple[int, int]], decode_count: int, decode_context_tokens_sum: int
    ) -> float:
        mem = 2e-3 + 3e-8 * decode_context_tokens_sum
        cmp = 4e-5 * decode_count
        return max(mem, cmp)

    def decode_run_time_s(self, decode_count: int, decode_context_tokens_sum: int, steps: int) -> float:
        return sum(
            self.step_time_s((), decode_count, decode_context_tokens_sum + j * decode_count)
            for j in range(steps)
        )


def test_itl_stretches_give_exact_percentiles() -> None:
    rng = np.random.default_rng(3)
    timer = RooflineLike()
    rec = ItlRecorder(timer)
    expanded: list[float] = []
    for _ in range(3000):
        if rng.random() < 0.3:
            v, w = float(rng.uniform(1e-3, 5e-3)), int(rng.integers(1, 50))
            rec.point(v, w)
            expanded += [v] * w
            continue
        n, ctx, k = int(rng.integers(1, 200)), int(rng.integers(0, 200_000)), int(rng.integers(2, 40))
        steps = [timer.step_time_s((), n, ctx + j * n) for j in range(k)]
        rec.stretch(n, ctx, k, steps[0], timer.decode_run_time_s(n, ctx, k))
        for s in steps:
            expanded += [s] * n
    x = np.asarray(expanded)
    got = itl_stats([rec])
    assert got.count == x.size
    assert [got.p50_s, got.p90_s, got.p99_s] == list(np.percentile(x, [50, 90, 99]))
    assert got.max_s == float(x.max())
    assert got.mean_s == pytest.approx(float(x.mean()), rel=1e-12)


class Toy:
    def step_time_s(
        self, prefill_chunks: Sequence[tuple[int, int]], decode_count: int, decode_context_tokens_sum: int
    ) -> float:
        return 1e-3 + 1e-5 * (sum(c for c, _ in prefill_chunks) + decode_count)

    def decode_run_time_s(self, decode_count: int, decode_context_tokens_sum: int, steps: int) -> float:
        return steps * (1e-3 + 1e-5 * decode_count)


def test_goodput_counts_requests_meeting_every_slo() -> None:
    cfg = SchedulerConfig(kv_cache_blocks=1000, max_num_seqs=8, max_num_batched_tokens=100)
    # step 1 (0 -> 1.05 ms): A 4 + B 1 tokens: A and B get their first token (B is done, TPOT 0
    # as in vllm bench). step 2 (-> 2.56 ms): A's decode + C's 50-token prompt (C arrived at
    # 0.5 ms: TTFT 2.06 ms). step 3 (-> 3.58 ms): A's last token, C's; A's TPOT 1.265 ms.
    reqs = [SimRequest(0.0, 4, 3), SimRequest(0.0, 1, 1), SimRequest(0.0005, 50, 2)]
    res = simulate(reqs, Toy(), cfg, slo=Slo(ttft_p99_s=1.1e-3))
    assert res.goodput is not None
    assert res.ttft_s == pytest.approx([1.05e-3, 1.05e-3, 2.06e-3])
    assert res.tpot_s == pytest.approx([(3.58e-3 - 1.05e-3) / 2, 0.0, 1.02e-3])
    assert res.goodput.good_requests == 2
    assert res.goodput.goodput_rps == pytest.approx(2 / res.duration_s)
    strict = simulate(reqs, Toy(), cfg, slo=Slo(ttft_p99_s=1.1e-3, tpot_p99_s=1.0e-3))
    assert strict.goodput is not None and strict.goodput.good_requests == 1  # only the 1-token B
    assert simulate(reqs, Toy(), cfg).goodput is None


def test_the_front_end_adds_a_constant_to_ttft_and_e2e_and_moves_no_step() -> None:
    """The same three requests as above with vLLM's front end costing 40 ms per request: every
    TTFT and end-to-end latency 40 ms longer, TPOT and the engine's own times unchanged, and the
    goodput judged on the client's TTFT (1.05 ms + 40 ms misses a 41 ms target by nothing: meets)."""
    cfg = SchedulerConfig(kv_cache_blocks=1000, max_num_seqs=8, max_num_batched_tokens=100)
    reqs = [SimRequest(0.0, 4, 3), SimRequest(0.0, 1, 1), SimRequest(0.0005, 50, 2)]
    base = simulate(reqs, Toy(), cfg)
    res = simulate(reqs, Toy(), cfg, slo=Slo(ttft_p99_s=41.06e-3), request_overhead_s=0.040)
    assert res.ttft_s == pytest.approx([41.05e-3, 41.05e-3, 42.06e-3])
    assert res.e2el_s == pytest.approx(base.e2el_s + 0.040)
    assert np.array_equal(res.tpot_s, base.tpot_s)
    assert np.array_equal(res.first_token_s, base.first_token_s)
    assert res.goodput is not None and res.goodput.good_requests == 2
    with pytest.raises(InvalidInput, match="request_overhead_s"):
        simulate(reqs, Toy(), cfg, request_overhead_s=-1.0)


def test_minute_series_add_up() -> None:
    rng = np.random.default_rng(5)
    n = 3000
    arrival = np.cumsum(rng.exponential(0.05, n))  # ~150 s
    prompt, output = rng.integers(1, 400, n), rng.integers(1, 200, n)
    cfg = SchedulerConfig(kv_cache_blocks=2000, max_num_seqs=64, max_num_batched_tokens=1024)
    res = simulate((arrival, prompt, output), Toy(), cfg, replicas=2, router="least_outstanding_tokens")
    s = res.series
    assert len(s.minute_start_s) == int(res.duration_s // 60) + 1
    assert sum(s.arrivals) == n and sum(s.completions) == n
    covered = np.clip(res.duration_s - (np.asarray(s.minute_start_s) - arrival[0]), 0, 60)
    out = float(np.dot(s.output_tokens_per_s, covered))
    assert out == pytest.approx(float(output.sum()), rel=1e-9)
    pre = float(np.dot(s.prefill_tokens_per_s, covered))
    assert pre == pytest.approx(float(prompt.sum()), rel=1e-9)  # no preemption, no prefix hits
    assert all(0 <= m <= 2 * 64 for m in s.mean_running)  # two replicas of at most 64
    assert res.to_dict()["series"]["arrivals"] == s.arrivals
