"""TTFT's KV-full branch (`planner.latency.kv_full`: `kv_full_wait`, `with_kv_full`): near the KV cache's limit
vLLM admits a prompt only once blocks free for it, so an arrival that finds the cache full waits
the rest of that episode on top of everything else. Pinned here: the inputs by hand, the
mixture's construction, the bound the capacity search relies on, and the capacity it moves,
against the simulator."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from ttft_helpers import ttft_mixture_with, ttft_p50_p99_with

from planner.deployment import Deployment
from planner.latency import LatencyModel, Slo, WorkloadStats
from planner.latency.engine import Engine
from planner.latency.invariants import ModelInvariantError
from planner.latency.kv_full import (
    KV_FULL_MIN,
    NO_KV_FULL,
    KvFull,
    kv_full_wait,
    kv_overflow_probability,
    with_kv_full,
)
from planner.latency.quantiles import response_quantiles_phases
from planner.latency.results import State
from planner.simulate.run import run, scale_workload, workload_requests
from planner.workload import Workload

# Alike requests (the accuracy grid's constant lengths) on a MoE model whose KV fills first.
ALIKE: dict[str, Any] = {
    "arrivals": {"requests_per_s": 1.0},
    "input_tokens": {"pairs": [[1155, 1.0]]},
    "output_tokens": {"pairs": [[211, 1.0]]},
}
KV_BOUND = {
    "model": "Qwen/Qwen3-30B-A3B",
    "gpu": "h100-sxm",
    "max_num_batched_tokens": 2048,
    "max_num_seqs": 256,
}


def _model(rate: float = 1.0) -> LatencyModel:
    w = Workload.from_mapping({**ALIKE, "arrivals": {"requests_per_s": rate}})
    return LatencyModel(Deployment(**KV_BOUND).resolve(), WorkloadStats.of(w))


def _ttft_quantiles(e: Engine, s: State) -> list[float | None]:
    """TTFT p50 and p99 at a state, as `Engine.point` reports them."""
    p = e.point(s)
    return [p.ttft_p50_s, p.ttft_p99_s]


def test_kv_token_seconds_by_hand() -> None:
    """A request of P prompt tokens and d decode steps holds d P + d (d + 1)/2 token-steps of
    KV (its prompt for d steps, its answer growing a token a step): for P = 100 and outputs
    of 11 or 31 tokens (d = 10 or 30) with probabilities 0.75 / 0.25, 1,055 or 3,465."""
    w = Workload.from_mapping(
        {
            "arrivals": {"requests_per_s": 1.0},
            "input_tokens": {"pairs": [[100, 1.0]]},
            "output_tokens": {"pairs": [[11, 0.75], [31, 0.25]]},
        }
    )
    a = np.array([10 * 100 + 10 * 11 / 2, 30 * 100 + 30 * 31 / 2])
    assert a.tolist() == [1055.0, 3465.0]
    p = np.array([0.75, 0.25])
    kv1, kv2 = WorkloadStats.of(w).kv_token_s
    assert kv1 == pytest.approx(float(p @ a), rel=1e-12)
    assert kv2 == pytest.approx(float(p @ a**2), rel=1e-12)


def test_the_episode_and_its_chance_by_hand() -> None:
    """f is the KV risk the metrics report (`preemption_risk`); R the residual of a busy period
    of the cache as an M/G/1 server whose service is a request's KV token-seconds over the
    cache: alike requests, S = t_step A / cache exactly, R = E[S^2] / (2 E[S] (1 - rho)^2) =
    S / (2 (1 - rho)^2), rho the cache's mean use."""
    m = _model()
    e = m.engines["colocated"]
    s = e.state_at(0.93 * e.boundary().n_max)
    point = e.point(s)
    f, rest = point.preemption_risk, point.kv_full_wait_s
    assert f > KV_FULL_MIN
    rho = point.kv_cache_usage
    a = 210 * 1155 + 210 * 211 / 2  # d = 210 decode steps
    service = s.t_step * a / e.replica.kv_cache_tokens
    assert rest == pytest.approx(service / (2.0 * (1.0 - rho) ** 2), rel=1e-12)
    got = kv_full_wait(
        overflow_probability=f,
        kv_tokens_mean=point.kv_cache_tokens_used,
        kv_capacity_tokens=e.replica.kv_cache_tokens,
        mean_step_s=s.t_step,
        kv_token_s=(a, a * a),
    )
    assert got == KvFull(probability=f, rest_s=pytest.approx(rest, rel=1e-12))
    light = e.point(e.state_at(0.2 * e.boundary().n_max))
    assert light.kv_full_wait_s == 0.0  # below KV_FULL_MIN: no branch
    assert kv_full_wait(
        overflow_probability=0.5 * KV_FULL_MIN, kv_tokens_mean=1.0, kv_capacity_tokens=2.0,
        mean_step_s=0.01, kv_token_s=(1.0, 1.0),
    ) == NO_KV_FULL  # fmt: skip


def test_kv_full_invariants() -> None:
    """The component's boundaries: a probability in [0, 1], a cache and a service that divide
    (> 0); out of range is the model's defect, `ModelInvariantError`, naming the quantity. The
    public surface never reaches them: every point of the accuracy grid's engines passes."""
    with pytest.raises(ModelInvariantError, match="overflow_probability"):
        kv_full_wait(overflow_probability=1.5, kv_tokens_mean=1.0, kv_capacity_tokens=2.0,
                     mean_step_s=0.01, kv_token_s=(1.0, 1.0))  # fmt: skip
    with pytest.raises(ModelInvariantError, match="kv_token_s mean"):
        kv_full_wait(overflow_probability=0.5, kv_tokens_mean=1.0, kv_capacity_tokens=2.0,
                     mean_step_s=0.01, kv_token_s=(0.0, 0.0))  # fmt: skip
    with pytest.raises(ModelInvariantError, match="kv_capacity_tokens"):
        kv_overflow_probability(kv_tokens_mean=1.0, kv_tokens_var=1.0, kv_capacity_tokens=0.0)
    with pytest.raises(ModelInvariantError, match=r"kv_full\.probability"):
        with_kv_full(values=np.zeros(1), probs=np.ones(1), phases=(), waiting=None, unqueued=1,
                     kv_full=KvFull(probability=math.nan, rest_s=1.0))  # fmt: skip
    pred = _model(16.5).evaluate()  # the KV-bound engine near its limit: in range throughout
    assert 0.0 < pred.preemption_risk <= 1.0


def test_the_branch_doubles_the_mixture() -> None:
    """Unqueued points (the first `size`) wait the episode's phase; a queued point keeps the
    larger of its two waits' shapes and adds the other's mean; probabilities split 1 - f : f."""
    values = np.array([0.1, 0.2, 0.5, 0.7])
    probs = np.array([0.4, 0.3, 0.2, 0.1])
    phases = ((0.25, 0.2), (0.75, 0.6))  # the queue's mean given a wait: 0.5
    waiting = np.array([0.0, 0.0, 1.0, 1.0])
    for rest, shifted, kv_col, queue_cols in (
        (0.8, [0.1, 0.2, 1.0, 1.2], [0, 0, 0, 0, 1, 1, 1, 1], [[0, 0], [0, 0], [1, 1], [1, 1]] * 2),
        (0.3, [0.1, 0.2, 0.8, 1.0], [0, 0, 0, 0, 1, 1, 0, 0], [[0, 0], [0, 0], [1, 1], [1, 1]] * 2),
    ):
        v, p, ph, w = with_kv_full(
            values=values, probs=probs, phases=phases, waiting=waiting, unqueued=2,
            kv_full=KvFull(probability=0.1, rest_s=rest),
        )  # fmt: skip
        assert v.tolist() == pytest.approx([*values.tolist(), *shifted], rel=1e-15)
        assert p.tolist() == pytest.approx([*(0.9 * probs).tolist(), *(0.1 * probs).tolist()], rel=1e-15)
        assert ph == (*phases, (1.0, rest))
        assert w[:, 2].tolist() == kv_col
        want = np.array(queue_cols, dtype=float)
        if rest >= 0.5:
            want[4:] = 0.0  # the episode's shape kept: the queued branch waits it alone
        assert w[:, :2].tolist() == want.tolist()
    # without a queue: one phase, the episode's
    v, p, ph, w = with_kv_full(
        values=values,
        probs=probs,
        phases=(),
        waiting=None,
        unqueued=4,
        kv_full=KvFull(probability=0.2, rest_s=0.8),
    )
    assert ph == ((1.0, 0.8),) and w[:, 0].tolist() == [0, 0, 0, 0, 1, 1, 1, 1]


def test_the_helper_is_the_engines_composition() -> None:
    """tests/ttft_helpers.py rebuilds `Engine.ttft_mixture` from the components: with the
    engine's own branches it reads TTFT bit for bit as `Engine.point` does, near the KV limit
    (the branch in) and at light load."""
    e = _model().engines["colocated"]
    for share in (0.93, 0.2):
        s = e.state_at(share * e.boundary().n_max)
        fresh = e.state_at(share * e.boundary().n_max)
        assert ttft_p50_p99_with(e, s) == _ttft_quantiles(e, fresh)


def test_the_branch_raises_the_tail_and_the_bound_holds() -> None:
    """Where f > KV_FULL_MIN TTFT p99 rises with the branch and p50 moves only as far as the
    branch's mass allows: the mixture is (1 - f) G + f (G plus a positive wait), so its CDF is
    at most G's and at least (1 - f) times G's, and its p50 lies between G's p50 and G's
    quantile at 0.5 / (1 - f). The capacity search's bound on p99 stays a bound (the cheap
    branch of it is not taken there); below it TTFT is bit for bit what it was."""
    m = _model()
    e = m.engines["colocated"]
    near = e.state_at(0.93 * e.boundary().n_max)
    light = e.state_at(0.2 * e.boundary().n_max)
    with_branch = _ttft_quantiles(e, near)
    light_ttft = _ttft_quantiles(e, light)
    bound = e.ttft_p99_at_most_s(near)
    assert e.results_at(near).computed("ttft_mixture")
    waiting = e.ttft_mixture(near).waiting
    assert waiting is not None and waiting.ndim == 2
    assert with_branch[1] <= bound < math.inf
    # The same states without the branch (its mixture given NO_KV_FULL): what the threshold
    # KV_FULL_MIN leaves where f is below it.
    assert e.kv_full(near).probability > KV_FULL_MIN and e.kv_full(light) == NO_KV_FULL
    without = ttft_p50_p99_with(e, near, kv_full=NO_KV_FULL)
    assert with_branch[1] > 2.0 * without[1]
    f = e.point(near).preemption_risk
    mix = ttft_mixture_with(e, near, kv_full=NO_KV_FULL)
    level = np.array([0.5 / (1.0 - f)])
    reach = float(response_quantiles_phases(mix.values, mix.probs, mix.phases, level, mix.waiting)[0])
    assert without[0] <= with_branch[0] <= reach * (1.0 + 1e-12)
    assert with_branch[0] < 1.2 * without[0]
    assert ttft_p50_p99_with(e, light, kv_full=NO_KV_FULL) == light_ttft


def test_ttft_capacity_stops_short_of_the_kv_limit_as_the_simulator_does() -> None:
    """A 300 ms TTFT target on a replica whose KV cache binds: the model used to answer the KV
    stability limit itself (18.12 req/s here, TTFT binding nowhere below it). The simulator,
    4,000 alike requests at that rate, reads TTFT p99 over 20x the target (admissions wait for
    blocks, hundreds of preemptions; 7.3 s on seed 0, 2026-12-01), and ~0.2-0.36 s at 15.2 req/s
    (20,000 requests, seeds 0 and 1). With the KV-full branch the capacity is TTFT's, over 10%
    below the limit (15.2 req/s on 2026-12-01), and the simulator meets the target there."""
    m = _model()
    limit = m.max_stable_requests_per_s()
    cap = m.capacity(Slo(ttft_p99_s=0.3))
    assert cap.binding_limit == "ttft"
    assert cap.max_requests_per_s_within_slo < 0.9 * limit
    r = Deployment(**KV_BOUND).resolve()
    base = Workload.from_mapping(ALIKE)
    at_limit = run(r, workload_requests(scale_workload(base, limit), 0, count=4000))
    assert at_limit.ttft.p99_s > 20 * 0.3
    at_cap = run(r, workload_requests(scale_workload(base, cap.max_requests_per_s_within_slo), 0, count=4000))
    assert at_cap.ttft.p99_s < 0.3


def test_the_note_says_what_an_arrival_in_a_full_cache_waits() -> None:
    """Over 1% KV risk, `evaluate`'s note names the episode's mean wait, the branch's R."""
    m = _model(16.5)
    pred = m.evaluate()
    e = m.engines["colocated"]
    solved = e.solve(16.5)
    assert solved is not None
    point = e.point(solved[0])
    f, rest = point.preemption_risk, point.kv_full_wait_s
    assert f == pred.preemption_risk > 0.01
    (note,) = [n for n in pred.notes if n.startswith("preemption risk")]
    assert f"waits ~{rest * 1e3:,.0f} ms for blocks" in note
    light = _model(5.0).evaluate()
    assert not [n for n in light.notes if n.startswith("preemption risk")]
