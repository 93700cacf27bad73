"""Several replicas behind a router, and disaggregated prefill/decode pools."""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pytest

from planner.errors import InvalidInput
from planner.simulate import (
    SchedulerConfig,
    SimRequest,
    StepTrace,
    simulate,
    simulate_disaggregated,
    transfer_s_per_token,
)

MS = 1e-3


class Toy:
    """1 ms + 0.01 ms per scheduled token."""

    def step_time_s(
        self, prefill_chunks: Sequence[tuple[int, int]], decode_count: int, decode_context_tokens_sum: int
    ) -> float:
        return 1 * MS + 0.01 * MS * (sum(c for c, _ in prefill_chunks) + decode_count)

    def decode_run_time_s(self, decode_count: int, decode_context_tokens_sum: int, steps: int) -> float:
        return steps * (1 * MS + 0.01 * MS * decode_count)


CFG = SchedulerConfig(kv_cache_blocks=2000, max_num_seqs=64, max_num_batched_tokens=2048)


def replica_of(trace: list[StepTrace], n: int) -> list[int]:
    where = [-1] * n
    for rec in trace:
        for rid, _ in rec.scheduled:
            if where[rid] == -1:
                where[rid] = rec.replica
    return where


def test_round_robin_and_least_outstanding_tokens() -> None:
    # R0 is long; R1 and R2 are short and arrive while R0 runs.
    reqs = [SimRequest(0.0, 1000, 100), SimRequest(0.001, 10, 10), SimRequest(0.002, 10, 10)]
    rr: list[StepTrace] = []
    simulate(reqs, Toy(), CFG, replicas=2, router="round_robin", step_trace=rr)
    assert replica_of(rr, 3) == [0, 1, 0]
    lot: list[StepTrace] = []
    res = simulate(reqs, Toy(), CFG, replicas=2, router="least_outstanding_tokens", step_trace=lot)
    # at 2 ms replica 0 still owes ~99 output tokens, replica 1 fewer than 10
    assert replica_of(lot, 3) == [0, 1, 1]
    assert [r.requests for r in res.replicas] == [1, 2]
    # R2 shares replica 1 with R1 instead of queueing behind R0's decodes: both see fast steps
    assert res.ttft_s[2] < 2 * MS


def test_replicas_split_load_and_stay_deterministic() -> None:
    rng = np.random.default_rng(2)
    n = 2000
    reqs = (np.cumsum(rng.exponential(0.004, n)), rng.integers(1, 800, n), rng.integers(1, 200, n))
    one = simulate(reqs, Toy(), CFG)
    for router in ("round_robin", "least_outstanding_tokens"):
        a = simulate(reqs, Toy(), CFG, replicas=3, router=router)
        b = simulate(reqs, Toy(), CFG, replicas=3, router=router)
        assert json.dumps(a.to_dict(include_requests=True)) == json.dumps(b.to_dict(include_requests=True))
        assert sum(r.requests for r in a.replicas) == n
        assert a.ttft.p99_s < one.ttft.p99_s
    rr = simulate(reqs, Toy(), CFG, replicas=3, router="round_robin")
    assert [r.requests for r in rr.replicas] == [667, 667, 666]


def test_disaggregated_ttft_includes_kv_transfer() -> None:
    cfg = SchedulerConfig(kv_cache_blocks=100, max_num_seqs=8, max_num_batched_tokens=512)
    reqs = [SimRequest(0.0, 100, 5)]
    per_token = transfer_s_per_token(kv_bytes_per_token=1e5, link_bytes_per_s=1e9)  # 0.1 ms/token
    res = simulate_disaggregated(reqs, Toy(), Toy(), cfg, cfg, kv_transfer=per_token)
    prefill = (1 + 0.01 * 100) * MS  # the prompt alone in the prefill replica's step
    transfer = 100 * 1e-4
    assert res.ttft_s[0] == pytest.approx(prefill + transfer, abs=1e-12)
    # then 4 decode steps of one sequence on the decode replica
    assert res.e2el_s[0] == pytest.approx(prefill + transfer + 4 * 1.01 * MS, abs=1e-12)
    assert res.tpot_s[0] == pytest.approx(1.01 * MS, abs=1e-12)
    colocated = simulate(reqs, Toy(), cfg)
    assert res.ttft_s[0] - colocated.ttft_s[0] == pytest.approx(transfer, abs=1e-12)
    # a callable of the prompt length works the same
    res2 = simulate_disaggregated(reqs, Toy(), Toy(), cfg, cfg, kv_transfer=lambda p: p * 1e-4)
    assert res2.ttft_s[0] == pytest.approx(res.ttft_s[0], abs=1e-15)
    assert res.mode == "disaggregated"
    assert [r.role for r in res.replicas] == ["prefill", "decode"]


def test_disaggregation_isolates_decodes_from_prefill_chunks() -> None:
    cfg = SchedulerConfig(kv_cache_blocks=2000, max_num_seqs=8, max_num_batched_tokens=2048)
    reqs = [SimRequest(0.0, 10, 50), SimRequest(0.010, 2000, 2)]
    trace: list[StepTrace] = []
    co = simulate(reqs, Toy(), cfg)
    dis = simulate_disaggregated(reqs, Toy(), Toy(), cfg, cfg, kv_transfer=0.0, step_trace=trace)
    # colocated: the 2000-token prompt shares a step with the first request's decode
    assert co.itl.max_s == pytest.approx((1 + 0.01 * 2001) * MS, abs=1e-12)
    # disaggregated: the decode replica never runs a prefill chunk, its steps stay short; the
    # longest gap is the second request's first one: its KV lands mid-step (0.4 ms to the step
    # boundary) and then one step with both decodes (1.02 ms)
    decode_steps = [r for r in trace if r.replica == 1]
    assert max(r.duration_s / r.steps for r in decode_steps) == pytest.approx(1.02 * MS, abs=1e-12)
    assert dis.itl.max_s == pytest.approx(1.42 * MS, abs=1e-12)
    prefill_steps = [r for r in trace if r.replica == 0]
    assert all(s > 1 for r in prefill_steps for _, s in r.scheduled)  # prompts only
    assert dis.completed == 2


def test_disaggregated_prefill_pool_batches_prompts_and_one_token_answers_finish_there() -> None:
    cfg = SchedulerConfig(kv_cache_blocks=100, max_num_seqs=8, max_num_batched_tokens=512)
    reqs = [SimRequest(0.0, 100, 1), SimRequest(0.0, 50, 3)]
    trace: list[StepTrace] = []
    res = simulate_disaggregated(reqs, Toy(), Toy(), cfg, cfg, kv_transfer=1e-5, step_trace=trace)
    assert trace[0].replica == 0 and trace[0].scheduled == ((0, 100), (1, 50))
    first = (1 + 1.5) * MS
    assert res.ttft_s == pytest.approx([first + 100e-5, first + 50e-5], abs=1e-12)
    assert res.e2el_s[0] == pytest.approx(res.ttft_s[0], abs=1e-15)
    assert sum(res.series.completions) == 2
    assert res.replicas[0].requests == 2 and res.replicas[1].requests == 1


def test_disaggregated_invalid_inputs() -> None:
    cfg = SchedulerConfig(kv_cache_blocks=100, max_num_seqs=8, max_num_batched_tokens=512)
    with pytest.raises(InvalidInput) as e:
        simulate_disaggregated([SimRequest(0, 10, 2)], Toy(), Toy(), cfg, cfg, kv_transfer=-1.0)
    assert e.value.field == "kv_transfer"
    with pytest.raises(InvalidInput) as e:
        simulate_disaggregated([SimRequest(0, 10, 2)], Toy(), Toy(), cfg, cfg, decode_replicas=0)
    assert e.value.field == "decode_replicas"
    with pytest.raises(InvalidInput) as e:
        transfer_s_per_token(1e5, 0.0)
    assert e.value.field == "link_bytes_per_s"
