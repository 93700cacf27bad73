"""Hand-traced scenarios of one vLLM V1 engine: every step's schedule and time written out.

Toy step time: 1 ms + 0.01 ms per scheduled token (context-free, so a timeline is easy to add up).
Each scenario runs with fast-forward on and off; a fast-forwarded record of k identical steps is
expanded to k steps before comparing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from planner.errors import InvalidInput
from planner.simulate import SchedulerConfig, SimRequest, SimResult, Slo, StepTrace, simulate

MS = 1e-3


class ToyTimer:
    def __init__(self) -> None:
        self.calls: list[tuple[tuple[tuple[int, int], ...], int, int]] = []

    def step_time_s(
        self, prefill_chunks: Sequence[tuple[int, int]], decode_count: int, decode_context_tokens_sum: int
    ) -> float:
        self.calls.append((tuple(prefill_chunks), decode_count, decode_context_tokens_sum))
        return 1 * MS + 0.01 * MS * (sum(c for c, _ in prefill_chunks) + decode_count)

    def decode_run_time_s(self, decode_count: int, decode_context_tokens_sum: int, steps: int) -> float:
        return steps * (1 * MS + 0.01 * MS * decode_count)


def step_ms(scheduled: Sequence[tuple[int, int]]) -> float:
    return 1.0 + 0.01 * sum(s for _, s in scheduled)


Timeline = list[tuple[int, list[tuple[int, int]], list[int]]]  # (repeat, scheduled, preempted)


def expand(timeline: Timeline) -> list[tuple[list[tuple[int, int]], list[int]]]:
    return [(sched, pre) for n, sched, pre in timeline for _ in range(n)]


def per_step(trace: list[StepTrace]) -> list[tuple[list[tuple[int, int]], list[int]]]:
    out = []
    for rec in trace:
        assert rec.steps >= 1
        for i in range(rec.steps):
            out.append((list(rec.scheduled), list(rec.preempted) if i == 0 else []))
    return out


def step_ends(timeline: Timeline, start: float = 0.0) -> list[float]:
    t, ends = start, []
    for sched, _ in expand(timeline):
        t += step_ms(sched) * MS
        ends.append(t)
    return ends


def run(
    reqs: list[SimRequest], cfg: SchedulerConfig, fast_forward: bool, **kw: Any
) -> tuple[SimResult, list[StepTrace]]:
    trace: list[StepTrace] = []
    res = simulate(reqs, ToyTimer(), cfg, fast_forward=fast_forward, step_trace=trace, **kw)
    return res, trace


FF = pytest.mark.parametrize("ff", [True, False], ids=["fast_forward", "step_by_step"])


@FF
def test_budget_decodes_first_prefill_gets_the_rest(ff: bool) -> None:
    # A decodes; B (20 tokens) arrives during A's 2nd step. Budget 10: A's decode takes 1, B 9.
    cfg = SchedulerConfig(kv_cache_blocks=1000, max_num_seqs=4, max_num_batched_tokens=10)
    reqs = [SimRequest(0.0, 4, 5), SimRequest(0.0015, 20, 2)]
    A, B = 0, 1
    timeline: Timeline = [
        (1, [(A, 4)], []),  # 0 -> 1.04 ms: A's prompt, first token
        (1, [(A, 1)], []),  # -> 2.05 (B arrived at 1.5 ms, mid-step)
        (2, [(A, 1), (B, 9)], []),  # -> 3.15, 4.25
        (1, [(A, 1), (B, 2)], []),  # -> 5.28: A's 5th token (done), B's first token
        (1, [(B, 1)], []),  # -> 6.29: B done
    ]
    res, trace = run(reqs, cfg, ff)
    assert per_step(trace) == expand(timeline)
    ends = step_ends(timeline)
    assert ends == pytest.approx([1.04e-3, 2.05e-3, 3.15e-3, 4.25e-3, 5.28e-3, 6.29e-3], abs=1e-12)
    assert res.ttft_s == pytest.approx([1.04e-3, 5.28e-3 - 1.5e-3], abs=1e-12)
    assert res.e2el_s == pytest.approx([5.28e-3, 6.29e-3 - 1.5e-3], abs=1e-12)
    assert res.tpot_s[0] == pytest.approx((5.28e-3 - 1.04e-3) / 4, abs=1e-12)
    # ITL samples: A 1.01, 1.10, 1.10, 1.03; B 1.01 (ms)
    assert res.itl.count == 5
    assert res.itl.max_s == pytest.approx(1.10e-3, abs=1e-12)
    assert res.itl.p50_s == pytest.approx(1.03e-3, abs=1e-12)
    assert res.itl.mean_s == pytest.approx((1.01 + 1.10 + 1.10 + 1.03 + 1.01) / 5 * MS, abs=1e-12)
    assert res.preemptions == 0


@FF
def test_chunk_sizes_over_steps_next_to_decodes(ff: bool) -> None:
    cfg = SchedulerConfig(kv_cache_blocks=1000, max_num_seqs=8, max_num_batched_tokens=8)
    reqs = [SimRequest(0.0, 2, 10), SimRequest(0.0, 2, 10), SimRequest(0.0015, 20, 1)]
    A1, A2, B = 0, 1, 2
    timeline: Timeline = [
        (1, [(A1, 2), (A2, 2)], []),
        (1, [(A1, 1), (A2, 1)], []),
        (3, [(A1, 1), (A2, 1), (B, 6)], []),
        (1, [(A1, 1), (A2, 1), (B, 2)], []),  # B's last chunk: first token
        (4, [(A1, 1), (A2, 1)], []),  # A1, A2 reach 10 tokens
    ]
    res, trace = run(reqs, cfg, ff)
    assert per_step(trace) == expand(timeline)
    ends = step_ends(timeline)
    assert res.ttft_s[B] == pytest.approx(ends[5] - 1.5e-3, abs=1e-12)
    assert res.finish_s[A1] == pytest.approx(ends[-1], abs=1e-12)


@FF
def test_max_num_seqs_caps_admission(ff: bool) -> None:
    cfg = SchedulerConfig(kv_cache_blocks=1000, max_num_seqs=2, max_num_batched_tokens=100)
    reqs = [SimRequest(0.0, 2, 3)] * 3
    A, B, C = 0, 1, 2
    timeline: Timeline = [
        (1, [(A, 2), (B, 2)], []),  # C waits: 2 running
        (2, [(A, 1), (B, 1)], []),  # A, B done
        (1, [(C, 2)], []),
        (2, [(C, 1)], []),
    ]
    res, trace = run(reqs, cfg, ff)
    assert per_step(trace) == expand(timeline)
    assert res.ttft_s[C] == pytest.approx((1.04 + 1.02 + 1.02 + 1.02) * MS, abs=1e-12)
    assert res.max_queue_length == 3  # all three arrived before the first step


@FF
def test_long_prefill_token_threshold_caps_chunks(ff: bool) -> None:
    cfg = SchedulerConfig(
        kv_cache_blocks=1000, max_num_seqs=8, max_num_batched_tokens=10, long_prefill_token_threshold=4
    )
    reqs = [SimRequest(0.0, 10, 1), SimRequest(0.0, 3, 1)]
    A, B = 0, 1
    timeline: Timeline = [
        (1, [(A, 4), (B, 3)], []),  # A capped at 4 even though the budget has 10
        (1, [(A, 4)], []),
        (1, [(A, 2)], []),
    ]
    res, trace = run(reqs, cfg, ff)
    assert per_step(trace) == expand(timeline)
    assert res.ttft_s == pytest.approx([(1.07 + 1.04 + 1.02) * MS, 1.07 * MS], abs=1e-12)


@FF
def test_preempt_newest_front_of_queue_recompute_and_head_of_line(ff: bool) -> None:
    # 7 blocks of 16 tokens. A, B, C: 16-token prompts, 30 output tokens. D arrives later.
    cfg = SchedulerConfig(kv_cache_blocks=7, max_num_seqs=8, max_num_batched_tokens=100)
    reqs = [SimRequest(0.0, 16, 30)] * 3 + [SimRequest(0.0195, 16, 1)]
    A, B, C, D = 0, 1, 2, 3
    timeline: Timeline = [
        (1, [(A, 16), (B, 16), (C, 16)], []),  # 1 block each (3 used)
        # step 2: the 17th token opens a 2nd block each (6 used, 1 free)
        (16, [(A, 1), (B, 1), (C, 1)], []),
        # step 18: computed 32 -> A takes the free block, B finds none: the newest running
        # request (C) is preempted, not B; C goes to the front of the waiting queue.
        (1, [(A, 1), (B, 1)], [C]),
        # C must recompute prompt + its 17 outputs = 33 tokens: 3 blocks, 1 free -> blocked.
        # D (arrives at 19.5 ms, needs 1 block) waits behind C: head-of-line blocking.
        (12, [(A, 1), (B, 1)], []),  # A, B finish at step 30 (30 tokens)
        (1, [(C, 33), (D, 16)], []),  # C first (front of queue), then D
        (12, [(C, 1)], []),  # C's tokens 19..30
    ]
    res, trace = run(reqs, cfg, ff)
    assert per_step(trace) == expand(timeline)
    ends = step_ends(timeline)
    assert res.preemptions == 1
    # Usage after each step's scheduling (as vllm:kv_cache_usage_perc): the 7th block was
    # only held inside step 18's scheduling, before C's 2 blocks were freed.
    assert res.peak_kv_blocks == 6 and res.peak_kv_fraction == pytest.approx(6 / 7)
    assert res.finish_s[[A, B]] == pytest.approx([ends[29]] * 2, abs=1e-12)
    assert res.ttft_s[D] == pytest.approx(ends[30] - 0.0195, abs=1e-12)
    assert res.finish_s[C] == pytest.approx(ends[-1], abs=1e-12)
    # C's first token is unaffected; its 18th comes after the recompute: one long gap.
    assert res.ttft_s[C] == pytest.approx(ends[0], abs=1e-12)
    assert res.itl.max_s == pytest.approx(ends[30] - ends[16], abs=1e-12)
    assert res.max_queue_length == 3  # A, B, C before the first step (later: C and D)


@FF
def test_request_preempts_itself_when_newest(ff: bool) -> None:
    cfg = SchedulerConfig(kv_cache_blocks=3, max_num_seqs=8, max_num_batched_tokens=100)
    reqs = [SimRequest(0.0, 16, 17)] * 2
    A, B = 0, 1
    timeline: Timeline = [
        (1, [(A, 16), (B, 16)], []),
        # A takes the last free block; B (the newest) has none left to take: preempts itself.
        (1, [(A, 1)], [B]),
        (15, [(A, 1)], []),  # B needs 2 blocks for 17 tokens, 1 free: waits; A done at step 17
        (1, [(B, 17)], []),  # recompute prompt + first output, emits token 2
        (15, [(B, 1)], []),
    ]
    res, trace = run(reqs, cfg, ff)
    assert per_step(trace) == expand(timeline)
    ends = step_ends(timeline)
    assert res.preemptions == 1
    assert res.ttft_s[B] == pytest.approx(ends[0], abs=1e-12)
    assert res.itl.max_s == pytest.approx(ends[17] - ends[0], abs=1e-12)
    assert res.finish_s[B] == pytest.approx(ends[-1], abs=1e-12)


@FF
def test_prefix_cache_hit_skips_tokens_but_holds_blocks(ff: bool) -> None:
    timer = ToyTimer()
    cfg = SchedulerConfig(
        kv_cache_blocks=1000, max_num_seqs=8, max_num_batched_tokens=100, prefix_cache_hit_fraction=0.5
    )
    trace: list[StepTrace] = []
    res = simulate([SimRequest(0.0, 40, 2)], timer, cfg, fast_forward=ff, step_trace=trace)
    # floor(0.5 * 40) = 20 tokens cached: the prompt's step computes 20 at offset 20
    assert trace[0].scheduled == ((0, 20),)
    assert timer.calls[0] == (((20, 20),), 0, 0)
    assert res.peak_kv_blocks == 3  # 41 tokens by the end: cached ones hold blocks too
    cfg = SchedulerConfig(
        kv_cache_blocks=1000, max_num_seqs=8, max_num_batched_tokens=100, prefix_cache_hit_fraction=1.0
    )
    full = simulate([SimRequest(0.0, 40, 2)], ToyTimer(), cfg, fast_forward=ff, step_trace=trace)
    assert trace[-2].scheduled == ((0, 1),)  # a full hit still computes the last prompt token
    assert full.ttft_s[0] == pytest.approx(1.01 * MS)


def test_decode_context_passed_to_timer() -> None:
    timer = ToyTimer()
    cfg = SchedulerConfig(kv_cache_blocks=1000, max_num_seqs=8, max_num_batched_tokens=100)
    simulate([SimRequest(0.0, 10, 3), SimRequest(0.0, 5, 2)], timer, cfg, fast_forward=False)
    assert timer.calls == [
        (((10, 0), (5, 0)), 0, 0),
        ((), 2, 11 + 6),  # decodes at context prompt + 1 (the token being fed in)
        ((), 1, 12),
    ]


def test_results_are_deterministic_and_json_ready() -> None:
    import json

    rng = np.random.default_rng(7)
    n = 400
    reqs = (np.cumsum(rng.exponential(0.01, n)), rng.integers(1, 600, n), rng.integers(1, 80, n))
    cfg = SchedulerConfig(kv_cache_blocks=120, max_num_seqs=16, max_num_batched_tokens=256)
    a = simulate(reqs, ToyTimer(), cfg, slo=Slo(ttft_p99_s=0.05, tpot_p99_s=0.002))
    b = simulate(reqs, ToyTimer(), cfg, slo=Slo(ttft_p99_s=0.05, tpot_p99_s=0.002))
    ja = json.dumps(a.to_dict(include_requests=True), sort_keys=True)
    assert ja == json.dumps(b.to_dict(include_requests=True), sort_keys=True)
    assert a.preemptions > 0 and a.completed == n


def test_invalid_inputs_name_the_field() -> None:
    with pytest.raises(InvalidInput) as e:
        SchedulerConfig(kv_cache_blocks=10, max_num_seqs=64, max_num_batched_tokens=32)
    assert e.value.field == "max_num_batched_tokens"
    with pytest.raises(InvalidInput) as e:
        SchedulerConfig(kv_cache_blocks=10, prefix_cache_hit_fraction=1.5)
    assert e.value.field == "prefix_cache_hit_fraction"
    with pytest.raises(InvalidInput) as e:
        SchedulerConfig(kv_cache_blocks=10, long_prefill_token_threshold=-1)
    assert e.value.field == "long_prefill_token_threshold"
    cfg = SchedulerConfig(kv_cache_blocks=2)
    with pytest.raises(InvalidInput) as e:  # 40 + 10 - 1 tokens > 32: would preempt itself forever
        simulate([SimRequest(0.0, 40, 10)], ToyTimer(), cfg)
    assert e.value.field == "requests"
    with pytest.raises(InvalidInput) as e:
        simulate([SimRequest(0.0, 4, 0)], ToyTimer(), cfg)
    assert e.value.field == "requests.output_tokens"
    with pytest.raises(InvalidInput) as e:
        simulate([SimRequest(0.0, 4, 1)], ToyTimer(), cfg, router="random")
    assert e.value.field == "router"


def test_empty_input() -> None:
    res = simulate([], ToyTimer(), SchedulerConfig(kv_cache_blocks=10))
    assert res.requests == 0 and res.completed == 0 and res.itl.count == 0


def test_accepted_input_shapes_agree() -> None:
    from dataclasses import dataclass

    from planner.simulate import RequestArrays

    @dataclass(frozen=True)
    class Columns:  # e.g. a sampled workload or a loaded trace
        arrival_s: np.ndarray
        prompt_tokens: np.ndarray
        output_tokens: np.ndarray

    arrival, prompt, output = np.array([0.0, 0.001, 0.001]), np.array([5, 40, 7]), np.array([3, 1, 9])
    cfg = SchedulerConfig(kv_cache_blocks=100, max_num_seqs=8, max_num_batched_tokens=16)
    shapes: list[Any] = [
        (arrival, prompt, output),
        RequestArrays(arrival, prompt, output),
        Columns(arrival, prompt, output),
        [SimRequest(float(a), int(p), int(o)) for a, p, o in zip(arrival, prompt, output, strict=True)],
    ]
    results = [simulate(x, ToyTimer(), cfg).to_dict(include_requests=True) for x in shapes]
    assert all(r == results[0] for r in results)
    with pytest.raises(InvalidInput) as e:
        simulate((arrival, prompt[:2], output), ToyTimer(), cfg)
    assert e.value.field == "requests"
    with pytest.raises(InvalidInput) as e:
        simulate((arrival, prompt + 0.5, output), ToyTimer(), cfg)
    assert e.value.field == "requests.prompt_tokens"
