"""The engine against a literal, per-request, per-token transcription of the V1 scheduler loop,
on random workloads that exercise preemption, head-of-line blocking, thresholds, prefix hits,
max_num_seqs and budgets small enough to starve decodes. Also fast-forward == step-by-step."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pytest

from planner.simulate import SchedulerConfig, simulate


class CtxTimer:
    """1 ms + 0.01 ms per token + 2 ns per decode context token: step times grow with context,
    so fast-forwarded runs hold distinct ITL values."""

    def step_time_s(
        self, prefill_chunks: Sequence[tuple[int, int]], decode_count: int, decode_context_tokens_sum: int
    ) -> float:
        tokens = sum(c for c, _ in prefill_chunks) + decode_count
        return 1e-3 + 1e-5 * tokens + 2e-9 * decode_context_tokens_sum

    def decode_run_time_s(self, decode_count: int, decode_context_tokens_sum: int, steps: int) -> float:
        n, k = decode_count, steps
        return k * (1e-3 + 1e-5 * n + 2e-9 * decode_context_tokens_sum) + 2e-9 * n * k * (k - 1) / 2


@dataclass
class RefResult:
    first: np.ndarray
    finish: np.ndarray
    itl: list[float]
    preemptions: int
    peak: int
    max_waiting: int


def reference(
    arrival: np.ndarray, prompt: np.ndarray, output: np.ndarray, cfg: SchedulerConfig, timer: CtxTimer
) -> RefResult:
    n = len(arrival)
    bs, total, thr = cfg.block_size, cfg.kv_cache_blocks, cfg.long_prefill_token_threshold

    def cdiv(x: int) -> int:
        return -(-x // bs)

    order = list(np.argsort(arrival, kind="stable"))
    comp, out = [0] * n, [0] * n
    last = [0.0] * n
    first, finish = np.full(n, math.nan), np.full(n, math.nan)
    itl: list[float] = []
    waiting: deque[int] = deque()
    running: list[int] = []
    used = preemptions = peak = max_waiting = 0
    t = -math.inf
    nxt = 0
    while nxt < n or running or waiting:
        if not running and not waiting:
            t = max(t, float(arrival[order[nxt]]))
        while nxt < n and arrival[order[nxt]] <= t:
            waiting.append(int(order[nxt]))
            nxt += 1
        max_waiting = max(max_waiting, len(waiting))
        budget = cfg.max_num_batched_tokens
        sched: list[tuple[int, int]] = []
        preempted = False
        i = 0
        while i < len(running) and budget > 0:
            r = running[i]
            s = int(prompt[r]) + out[r] - comp[r]
            if thr:
                s = min(s, thr)
            s = min(s, budget)
            nb = cdiv(comp[r] + s) - cdiv(comp[r])
            gave_up = False
            while nb > total - used:
                v = running.pop()
                used -= cdiv(comp[v])
                comp[v] = 0
                waiting.appendleft(v)
                preemptions += 1
                preempted = True
                max_waiting = max(max_waiting, len(waiting))
                if v == r:
                    gave_up = True
                    break
            if gave_up:
                break
            used += nb
            sched.append((r, s))
            budget -= s
            i += 1
        if not preempted:
            while waiting and budget > 0 and len(running) < cfg.max_num_seqs:
                r = waiting[0]
                ntok = int(prompt[r]) + out[r]
                c = comp[r]
                if c == 0:
                    c = min(int(cfg.prefix_cache_hit_fraction * int(prompt[r])), ntok - 1)
                s = ntok - c
                if thr:
                    s = min(s, thr)
                s = min(s, budget)
                if cdiv(c + s) > total - used:
                    break
                waiting.popleft()
                used += cdiv(c + s)
                comp[r] = c
                running.append(r)
                sched.append((r, s))
                budget -= s
        peak = max(peak, used)
        chunks, dc, ctx = [], 0, 0
        for r, s in sched:
            ntok = int(prompt[r]) + out[r]
            if s == 1 and out[r] > 0 and comp[r] == ntok - 1:
                dc += 1
                ctx += ntok
            else:
                chunks.append((s, comp[r]))
        dt = timer.step_time_s(chunks, dc, ctx) if sched else 0.0
        t_end = t + dt
        for r, s in sched:
            comp[r] += s
            if comp[r] == int(prompt[r]) + out[r]:
                out[r] += 1
                if out[r] == 1:
                    first[r] = t_end
                else:
                    itl.append(t_end - last[r])
                last[r] = t_end
                if out[r] == int(output[r]):
                    finish[r] = t_end
                    used -= cdiv(comp[r])
                    running.remove(r)
        t = t_end
    return RefResult(first, finish, itl, preemptions, peak, max_waiting)


CONFIGS = {
    "roomy": SchedulerConfig(kv_cache_blocks=5000, max_num_seqs=64, max_num_batched_tokens=2048),
    "kv_pressure": SchedulerConfig(kv_cache_blocks=150, max_num_seqs=64, max_num_batched_tokens=512),
    "threshold_small_budget": SchedulerConfig(
        kv_cache_blocks=400, max_num_seqs=32, max_num_batched_tokens=64, long_prefill_token_threshold=24
    ),
    "seq_cap_prefix_hits": SchedulerConfig(
        kv_cache_blocks=300, max_num_seqs=4, max_num_batched_tokens=300, prefix_cache_hit_fraction=0.4
    ),
    "block_4": SchedulerConfig(
        kv_cache_blocks=500,
        max_num_seqs=16,
        max_num_batched_tokens=128,
        block_size=4,
        long_prefill_token_threshold=50,
    ),
}


def workload(seed: int, n: int = 300) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(0.004, n) * (rng.random(n) < 0.8)  # bursts of simultaneous arrivals
    arrival = np.round(np.cumsum(gaps), 6)
    prompt = rng.integers(1, 700, n)
    output = rng.integers(1, 120, n)
    return arrival, prompt, output


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("seed", [1, 2])
def test_engine_matches_literal_reference(name: str, seed: int) -> None:
    cfg = CONFIGS[name]
    arrival, prompt, output = workload(seed)
    ref = reference(arrival, prompt, output, cfg, CtxTimer())
    assert np.all(np.isfinite(ref.finish))
    for ff in (True, False):
        res = simulate((arrival, prompt, output), CtxTimer(), cfg, fast_forward=ff)
        np.testing.assert_allclose(res.first_token_s, ref.first, rtol=0, atol=1e-9)
        np.testing.assert_allclose(res.finish_s, ref.finish, rtol=0, atol=1e-9)
        assert res.preemptions == ref.preemptions
        assert res.peak_kv_blocks == ref.peak
        assert res.max_queue_length == ref.max_waiting
        itl = np.asarray(ref.itl)
        assert res.itl.count == itl.size
        want = np.percentile(itl, [50, 90, 99])
        got = [res.itl.p50_s, res.itl.p90_s, res.itl.p99_s]
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)
        assert res.itl.mean_s == pytest.approx(float(itl.mean()), abs=1e-9)
        assert res.itl.max_s == pytest.approx(float(itl.max()), abs=1e-9)
    if name == "kv_pressure":
        assert ref.preemptions > 0


def _flatten(d: object, prefix: str = "") -> dict[str, object]:
    if isinstance(d, dict):
        out: dict[str, object] = {}
        for k, v in d.items():
            out.update(_flatten(v, f"{prefix}.{k}"))
        return out
    if isinstance(d, list):
        out = {}
        for i, v in enumerate(d):
            out.update(_flatten(v, f"{prefix}[{i}]"))
        return out
    return {prefix: d}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_fast_forward_equals_step_by_step(name: str) -> None:
    from planner.simulate import Slo

    cfg = CONFIGS[name]
    rng = np.random.default_rng(11)
    n = 800
    arrival = np.cumsum(rng.exponential(0.02, n))  # lighter load: long decode-only stretches
    prompt, output = rng.integers(1, 500, n), rng.integers(1, 300, n)
    slo = Slo(ttft_p99_s=0.05, tpot_p99_s=0.0015, e2el_p99_s=1.0)
    a = simulate((arrival, prompt, output), CtxTimer(), cfg, slo=slo, replicas=2, fast_forward=True)
    b = simulate((arrival, prompt, output), CtxTimer(), cfg, slo=slo, replicas=2, fast_forward=False)
    fa, fb = _flatten(a.to_dict(include_requests=True)), _flatten(b.to_dict(include_requests=True))
    assert fa.keys() == fb.keys()
    for k in fa:
        va, vb = fa[k], fb[k]
        if k.endswith(".steps"):
            continue  # a fast-forwarded run counts as its steps too, but compare below
        if isinstance(va, float) and isinstance(vb, float):
            assert va == pytest.approx(vb, rel=1e-9, abs=1e-9), k
        else:
            assert va == vb, k
    assert [r.steps for r in a.replicas] == [r.steps for r in b.replicas]
