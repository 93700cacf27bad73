"""The latency model while prompts queue (planner.latency.engine): full steps are the FIFO stream
of waiting prompts, and the queue's wait stretches for the decodes a backlog accumulates."""

from __future__ import annotations

import math

import numpy as np
import pytest

from planner.costmodel.profile import THEORETICAL
from planner.costmodel.steptime import chunks_time_s, step_time_s
from planner.deployment import Deployment
from planner.latency import LatencyModel, WorkloadStats
from planner.latency.invariants import ModelInvariantError
from planner.latency.prefill_queue import (
    FULL_STEP_OFFSETS,
    prefill_drag,
    prefill_wait,
    shape_of,
    stretched_wait,
)
from planner.latency.queueing import Wait, gg1_wait, wait_decay_s
from planner.latency.slices import SLICE_PROBS
from planner.latency.steady import stream_step_s
from planner.workload import Workload

PROMPTS = [[300, 0.3], [1500, 0.5], [6000, 0.2]]


def _engine(
    gpu: str = "h200-sxm",
    budget: int = 2048,
    hit: float = 0.25,
    rate: float = 1.0,
    profile=None,
    lengths: str = "spread",
):
    dep = Deployment(
        model="Qwen/Qwen3-8B", gpu=gpu, max_num_batched_tokens=budget, max_num_seqs=min(budget, 1024)
    )
    wl = Workload.from_mapping(
        {
            "arrivals": {"requests_per_s": rate},
            "input_tokens": {"pairs": PROMPTS} if lengths == "spread" else 1155,
            "output_tokens": 200,
            "prefix_cache_hit_fraction": hit,
        }
    )
    r = dep.resolve() if profile is None else dep.resolve(profile)
    return LatencyModel(r, WorkloadStats.of(wl)).engines["colocated"]


def _literal_stream(engine, share: float, prompts: int = 40_000) -> list[list[tuple[float, float]]]:
    """Prompts drawn from the workload (seeded), queued back to back and cut into steps of
    `share` tokens: each step's chunks as (tokens, offset), offsets counted from the prompt's
    start (its cached tokens first)."""
    rng = np.random.default_rng(7)
    idx = rng.choice(engine.replica.prefill_tokens.size, size=prompts, p=engine.replica.prompt_probs)
    steps: list[list[tuple[float, float]]] = []
    step: list[tuple[float, float]] = []
    room = share
    for i in idx:
        left, offset = float(engine.replica.prefill_tokens[i]), float(engine.replica.cached_tokens[i])
        while left > 0:
            take = min(left, room)
            step.append((take, offset))
            left -= take
            offset += take
            room -= take
            if room <= 1e-9:
                steps.append(step)
                step, room = [], share
    return steps[100:]  # past the start (the first prompt begins at a step boundary)


def test_full_step_sums_are_the_literal_streams() -> None:
    """Per step of the stream: attention s a_ctx, prefix (sum of offsets) a_ctx + s E[p0]/E[Pe],
    KV read that + s (`steady.stream_step_s`'s docstring: over a uniform phase a prompt's chunk
    offsets sum to Pe^2 / (2 s) + p0 (1 + Pe / s)). Sampling error of 40,000 prompts: ~1%."""
    e = _engine()
    share = 1761.5  # a fractional share, as B - n_arr is
    steps = _literal_stream(e, share)
    pairs = np.mean([sum(c * (p + c / 2) for c, p in st) for st in steps])
    prefix = np.mean([sum(p for _, p in st) for st in steps])
    kv = np.mean([sum(p + c for c, p in st) for st in steps])
    assert pairs == pytest.approx(share * e.replica.prefill_attention_context, rel=0.015)
    assert prefix == pytest.approx(
        e.replica.prefill_attention_context + share * e.replica.cached_per_computed, rel=0.015
    )
    assert kv == pytest.approx(
        e.replica.prefill_attention_context + share * e.replica.cached_per_computed + share, rel=0.015
    )


def test_full_step_time_is_the_streams_mean_step() -> None:
    """With the H200's calibrated prefix re-read, the stream's steps (timed one by one by the
    simulator's formula) average to the model's full step within 1%; one chunk of s tokens at
    a_ctx - s/2 (the model before) reads half a budget less prefix: 2.3% short here."""
    e = _engine(hit=0.0)
    assert e.replica.step_coefficients.prefix_reread_s_per_token > 0
    n, ctx = 40.0, 40.0 * e.replica.decode_context_tokens
    share = e.replica.budget_tokens - n
    steps = _literal_stream(e, share, prompts=20_000)
    literal = float(np.mean([chunks_time_s(e.replica.step_coefficients, st, n, ctx) for st in steps]))
    model = float(stream_step_s(e.replica, share, n, ctx))
    assert model == pytest.approx(literal, rel=0.01)
    one_chunk = chunks_time_s(
        e.replica.step_coefficients, [(share, e.replica.prefill_attention_context - share / 2)], n, ctx
    )
    assert one_chunk < literal * 0.985


def _stretch(e, load: float) -> tuple[float, float]:
    """The drain stretch (wait mean over GI/G/1's) and rho at `load` x the max stable rate."""
    lam = load * e.boundary().lam_max
    s, _ = e.solve(lam)
    q = e.replica.mean_prefill_tokens * s.t_full / max(s.share_full, 1.0)
    shape = e.service_shape
    base = gg1_wait(s.rho, q, e.replica.arrival_cv2, shape.cv2)
    return e.steps(s).wait.mean_if_waiting_s / base.mean_if_waiting_s, s.rho


def test_backlog_stretch_vanishes_at_light_load_and_grows_with_load() -> None:
    """Theoretical H100, budget 512 (steps near the memory roofline: every decode adds a KV
    read, so q is most sensitive to the decodes): the stretch is ~1 at 10% load, rises with
    load, and stays below its cap (1 - rho) / (1 - rho_sat) x q_sat / q (the decodes at the
    stability boundary throughout)."""
    e = _engine(gpu="h100-sxm", budget=512, hit=0.0, profile=THEORETICAL)
    lam_max = e.boundary().lam_max
    end = e.state_n(e.boundary().n_max)
    q_sat = e.replica.mean_prefill_tokens * end.t_full / end.share_full
    prev = 0.0
    for load in (0.1, 0.3, 0.5, 0.7, 0.8, 0.85, 0.9, 0.95):
        f, rho = _stretch(e, load)
        s, _ = e.solve(load * lam_max)
        q = e.replica.mean_prefill_tokens * s.t_full / s.share_full
        rho_sat = rho * q_sat / q
        assert prev <= f <= (1 - rho) / (1 - rho_sat) * q_sat / q + 1e-9
        prev = f
        if load == 0.1:
            assert f < 1.01
    assert prev > 1.3


def test_no_stretch_without_decodes_to_accumulate() -> None:
    """A prefill pool has no decodes: its wait is GI/G/1's as is."""
    dep = Deployment(
        model="Qwen/Qwen3-8B",
        gpu="h100-sxm",
        disaggregated={"prefill_replicas": 1, "decode_replicas": 1},
    )
    wl = Workload.from_mapping(
        {"arrivals": {"requests_per_s": 20.0}, "input_tokens": 2000, "output_tokens": 100}
    )
    m = LatencyModel(dep.resolve(THEORETICAL), WorkloadStats.of(wl))
    e = m.engines["prefill"]
    s = e.state_lam(20.0)
    q = e.replica.mean_prefill_tokens * s.t_full / s.share_full
    shape = e.service_shape
    w = gg1_wait(s.rho, q, e.replica.arrival_cv2, shape.cv2)
    got = e.steps(s).wait
    assert got == w and math.isfinite(got.mean_if_waiting_s)


@pytest.mark.parametrize("load", [0.3, 0.85])
def test_light_waits_carry_the_exact_tail_stretched_like_the_mean(load: float) -> None:
    """Constant prompts (kappa = 1: the wait is less spread than an exponential): the colocated
    engine's wait carries GI/G/1's exact decay scale (`wait_decay_s`, through the engine's table),
    stretched by the same factor as its mean; a service with kappa > 3/2 carries none."""
    e = _engine(gpu="h100-sxm", budget=512, hit=0.0, profile=THEORETICAL, lengths="constant")
    s, _ = e.solve(load * e.boundary().lam_max)
    q = e.replica.mean_prefill_tokens * s.t_full / s.share_full
    shape = e.service_shape
    assert shape.kappa == pytest.approx(1.0) and shape.decay is not None
    base = gg1_wait(s.rho, q, e.replica.arrival_cv2, shape.cv2)
    got = e.steps(s).wait
    stretch = got.mean_if_waiting_s / base.mean_if_waiting_s
    exact = wait_decay_s(s.rho, e.replica.arrival_cv2, q, shape.xi, e.replica.prompt_probs)
    assert got.tail_s == pytest.approx(exact * stretch, rel=1e-3)
    assert stretch >= 1.0
    wide = shape_of(  # kappa > 3/2: more spread than exponential
        cv2=shape.cv2,
        kappa=1.6,
        service_over_mean=shape.xi,
        arrival_cv2=e.replica.arrival_cv2,
        prompt_probs=e.replica.prompt_probs,
        colocated=True,
    )
    assert (
        wide.decay is None
        and prefill_wait(
            utilization=s.rho, mean_service_s=q, arrival_cv2=e.replica.arrival_cv2, shape=wide, colocated=True
        ).tail_s
        == 0.0
    )


def test_full_steps_spread_over_chunk_offsets_by_hand() -> None:
    """One prompt size longer than the budget (6,000 tokens, budget 1,024, theoretical H100): a
    backlog's full step is one chunk of s_f tokens at an offset spread uniformly over the prompt,
    taken at FULL_STEP_OFFSETS midpoints (j + 1/2)/J (Pe - s_f). Each is `step_time_s` of that
    chunk beside the boundary state's decodes, and the spread is their Var / mean^2 (equal
    weights; a step carries one prompt here). In the step mix the backlog's full steps are then
    a lognormal of that spread in the probability slices, around the same mean. Prompts of one
    size within the budget: no spread."""
    within = _engine(gpu="h100-sxm", budget=2048, hit=0.0, profile=THEORETICAL, lengths="constant")
    assert within.full_step_cv2 == 0.0  # 1,155-token prompts, budget 2,048
    dep = Deployment(model="Qwen/Qwen3-8B", gpu="h100-sxm", max_num_batched_tokens=1024, max_num_seqs=256)
    wl = Workload.from_mapping(
        {"arrivals": {"requests_per_s": 1.0}, "input_tokens": 6000, "output_tokens": 200}
    )
    e = LatencyModel(dep.resolve(THEORETICAL), WorkloadStats.of(wl)).engines["colocated"]
    end = e.state_n(e.boundary().n_max)
    s_f = end.share_full
    times = [
        step_time_s(
            e.replica.step_coefficients,
            s_f,
            (j + 0.5) / FULL_STEP_OFFSETS * (6000 - s_f),
            end.n_arr,
            end.n_arr * e.replica.decode_context_tokens,
        )
        for j in range(FULL_STEP_OFFSETS)
    ]
    mean = sum(times) / len(times)
    want = sum((t / mean - 1.0) ** 2 for t in times) / len(times)
    assert want > 1e-4  # the deepest chunk's attention costs visibly more than the first's
    assert e.full_step_cv2 == pytest.approx(want, rel=1e-9)
    s, _ = e.solve(0.9 * e.boundary().lam_max)
    st = e.steps(s)
    assert st.backlog > 0.0
    k = SLICE_PROBS.size
    vals, rates = st.values[-k:], st.rates[-k:]
    assert np.all(np.diff(vals) > 0.0)
    assert float(vals @ rates) / float(rates.sum()) == pytest.approx(st.full_step_s, rel=1e-9)


@pytest.mark.parametrize("load", [0.85, 0.9, 0.95])
def test_wait_environment_spreads_the_wait_around_its_mean(load: float) -> None:
    """The queue under a wandering decode count (`prefill_queue.wait_environment`): two Gauss-Hermite
    parts (1/2 each) of mean one, the count's excess slowing prefill (the upper part longer), in
    the ratio (1 - rho e^{-beta sd}) / (1 - rho e^{beta sd}) of heavy traffic, below the wait at
    the stability boundary's rate over the lower part's; the wait's mean (sigma m) is the
    stretched GI/G/1's, as without it, and its p99 longer. At light load the parts close onto
    one (a short busy period, few decodes beside it)."""
    e = _engine(gpu="h100-sxm", budget=512, hit=0.0, profile=THEORETICAL, lengths="constant")
    s, _ = e.solve(load * e.boundary().lam_max)
    got = e.steps(s).wait
    assert [p for p, _ in got.env] == [0.5, 0.5]
    (_, hi), (_, lo) = got.env
    assert 0.5 * (hi + lo) == pytest.approx(1.0, rel=1e-12)
    assert lo < 1.0 < hi
    end = e.state_n(e.boundary().n_max)
    q, q_sat = (e.replica.mean_prefill_tokens * x.t_full / x.share_full for x in (s, end))
    beta = math.log(q_sat / q) / (end.n - s.n)
    # hi / lo = (1 - rho / u) / (1 - rho u), u = e^{beta sd}: r rho u^2 - (r - 1) u - rho = 0,
    # and sd lies between 0 and the count's whole spread
    r = hi / lo
    a_, b_, c_ = r * s.rho, -(r - 1.0), -s.rho
    u = (-b_ + math.sqrt(b_ * b_ - 4.0 * a_ * c_)) / (2.0 * a_)
    assert 0.0 < math.log(u) / beta <= math.sqrt(e.decode_variance(s)) * (1.0 + 1e-9)
    assert hi / lo <= (1.0 - s.rho * math.exp(-beta * s.n)) / (1.0 - s.rho * q_sat / q)
    assert got.quantile(0.99) > Wait(got.prob, got.mean_if_waiting_s).quantile(0.99)
    light, _ = e.solve(0.1 * e.boundary().lam_max)
    assert all(abs(f - 1.0) < 1e-3 for _, f in e.steps(light).wait.env)


def test_prefill_queue_invariants() -> None:
    """The component's boundaries: the drag is None where the boundary is not above the state
    (no decodes left, or a service that does not grow); the stretch divides by the service and
    reads the utilization as a probability, `ModelInvariantError` naming them otherwise. Through
    the public surface every colocated point of a loaded engine passes (`evaluate` at 95%)."""
    assert (
        prefill_drag(decodes=10.0, mean_service_s=0.1, saturated_decodes=10.0, saturated_service_s=0.2)
        is None
    )
    assert (
        prefill_drag(decodes=5.0, mean_service_s=0.1, saturated_decodes=10.0, saturated_service_s=0.1) is None
    )
    drag = prefill_drag(decodes=5.0, mean_service_s=0.1, saturated_decodes=10.0, saturated_service_s=0.2)
    assert drag is not None and drag.per_decode == pytest.approx(math.log(2.0) / 5.0, rel=1e-15)
    wait = Wait(0.5, 0.2)
    common = {"wait": wait, "arrival_cv2": 1.0, "drag": drag, "lifetime_s": 2.0, "decodes": 5.0,
              "count_variance": 5.0, "count_loop": 1.0}  # fmt: skip
    with pytest.raises(ModelInvariantError, match="utilization"):
        stretched_wait(utilization=1.5, mean_service_s=0.1, **common)
    with pytest.raises(ModelInvariantError, match="mean_service_s"):
        stretched_wait(utilization=0.5, mean_service_s=0.0, **common)
    got = stretched_wait(utilization=0.5, mean_service_s=0.1, **common)
    assert got.prob == wait.prob and got.mean_if_waiting_s >= wait.mean_if_waiting_s
    e = _engine(gpu="h100-sxm", budget=512, hit=0.0, profile=THEORETICAL)
    s, _ = e.solve(0.95 * e.boundary().lam_max)
    point = e.point(s)
    assert 0.0 <= point.queue_wait_mean_s <= point.queue_wait_p99_s < math.inf
