"""The decode count wanders (docs/latency/decode-count.md): its variance against
the simulator's, the decode-only steps a decoder sees spread by it (ITL p50 where it falls on
them, a decode pool's ITL p99), and KV overflow read from it, each pinned to simulated runs; and
`WorkloadStats.decode_overlap` by hand."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy import integrate
from tool_helpers import load_tool

from planner.costmodel.profile import THEORETICAL
from planner.deployment import Deployment
from planner.latency import LatencyModel, WorkloadStats, decode_count
from planner.simulate import StepTrace, simulate
from planner.simulate.run import engine_config, run, scale_workload, workload_requests
from planner.workload import Workload

acc = load_tool("accuracy.py", "accuracy_tool")


def _workload(outputs: list[list[float]], rate: float = 1.0) -> Workload:
    return Workload.from_mapping(
        {
            "arrivals": {"requests_per_s": rate},
            "input_tokens": {"pairs": [[1000, 1.0]]},
            "output_tokens": {"pairs": outputs},
        }
    )


def test_decode_overlap_by_hand() -> None:
    """E[min(d1, d2)] / E[d] over the decode steps d = output - 1: alike answers overlap whole (1);
    d in {10, 30} with equal chances: the integral of P(d > t)^2 is 10 x 1 + 20 x 1/4 = 15 over
    E[d] = 20, 0.75; a geometric-like spread approaches an exponential's 1/2."""
    assert WorkloadStats.of(_workload([[101, 1.0]])).decode_overlap == 1.0
    assert WorkloadStats.of(_workload([[11, 0.5], [31, 0.5]])).decode_overlap == pytest.approx(0.75)
    geo = [[j + 1, 0.02 * 0.98**j] for j in range(1, 2000)]
    total = sum(p for _, p in geo)
    eta = WorkloadStats.of(_workload([[t, p / total] for t, p in geo])).decode_overlap
    assert 0.45 < eta < 0.55


def _step_decodes(reqs: Any, steps: list[StepTrace]) -> tuple[np.ndarray, np.ndarray]:
    """Decodes (requests past their prompt) and duration of each simulated step."""
    prompt = np.asarray(reqs.prompt_tokens)
    done = np.zeros(prompt.size)
    decodes = np.empty(len(steps))
    durations = np.empty(len(steps))
    for i, rec in enumerate(steps):
        d = 0
        for rid, tok in rec.scheduled:
            if done[rid] >= prompt[rid]:
                d += 1
            done[rid] += tok * rec.steps
        decodes[i] = d
        durations[i] = rec.duration_s
    return decodes, durations


def test_window_loop_amplifies_the_count_variance_by_one_over_one_minus_gain() -> None:
    """The step `decode_count.decode_count_variance` rests on: the arrivals of the last lifetime T (a
    noise of spectrum T^2 sinc^2(wT/2) per unit rate) through a loop that feeds back g times the
    count's moving average over T (|K| = g sinc(wT/2), phase e^{-iwT/2}) has variance n / (1 - g),
    exactly: (1/pi) integral of sinc^2(x) / |1 - g sinc(x) e^{-ix}|^2 dx = 1 / (1 - g). An
    instantaneous gain b instead (the prompts' coupling) scales the amplitude: 1 / (1 - b)^2."""

    def factor(g: float) -> float:
        def f(x: float) -> float:
            k = np.sinc(x / math.pi)
            return float(k * k / abs(1.0 - g * k * np.exp(-1j * x)) ** 2)

        return integrate.quad(f, -2000.0, 2000.0, limit=20_000)[0] / math.pi

    for g in (0.0, 0.3, 0.6, 0.85):
        assert factor(g) == pytest.approx(1.0 / (1.0 - g), rel=2e-3), g


# Sd of the decode count over time against the simulator's (20,000 requests, seed 0, the middle
# 80% of the run). The model's form until session 17, n (1 + ...) / ((1 - busy)(1 - e_dec)) with
# no prefill drag, read 35.2 / 12.9 / 11.8 / 4.7 where the simulator reads 33.6 / 16.0 / 8.5 /
# 5.3 (+5%, -19%, +39%, -11%): the prompts' coupling is instantaneous (its gain squared: H200,
# 60%, a third short before), a prompt's engine time moves with the count, and a high count
# slows prefill, which holds prompts back from becoming decodes while the queue holds them
# (H100, budget 512, 90%: the variance 1.9x high before). Now 30.4 / 16.3 / 8.9 / 5.3. Over 48
# cells (budgets 512-8192, 30-90% load, both lengths and GPUs) the sd is within 10% in 41 (was
# 19; docs/accuracy.md's steady-state table, docs/latency/decode-count.md).
# Bound 10% on the sd.
COUNT_SPREAD = [
    ("h100-sxm", "theoretical", 2048, "spread", 0.85),
    ("h200-sxm", "calibrated", 2048, "constant", 0.6),
    ("h100-sxm", "theoretical", 512, "constant", 0.9),
    ("h200-sxm", "calibrated", 8192, "spread", 0.3),
]


@pytest.mark.parametrize(("gpu", "profile", "budget", "lengths", "load"), COUNT_SPREAD)
def test_decode_count_spread_within_bounds_of_the_simulator(
    gpu: str, profile: str, budget: int, lengths: str, load: float
) -> None:
    trace = acc.builtin_trace(acc.TRACE)
    case = acc.Case("Qwen/Qwen3-8B", gpu, profile, budget)
    r = case.resolve()
    base = acc.stationary_workload(trace, lengths)  # type: ignore[arg-type]
    wl = scale_workload(base, load * acc.capacity(r, base))
    eng = LatencyModel(r, WorkloadStats.of(wl)).engines["colocated"]
    state, _ = eng.solve(wl.arrivals.mean_requests_per_s)
    model_sd = math.sqrt(eng.decode_variance(state))
    reqs = workload_requests(wl, 0, count=20_000)
    steps: list[StepTrace] = []
    simulate(reqs, r.replica, engine_config(r), step_trace=steps)
    decodes, durations = _step_decodes(reqs, steps)
    mid = slice(len(steps) // 10, len(steps) * 9 // 10)
    mean = np.average(decodes[mid], weights=durations[mid])
    sim_sd = math.sqrt(np.average((decodes[mid] - mean) ** 2, weights=durations[mid]))
    assert abs(model_sd / sim_sd - 1.0) <= 0.10, (model_sd, sim_sd)
    assert sim_sd > math.sqrt(mean)  # wider than Poisson: the feedback is what this measures


# ITL p50 at 60% load falls on the decode-only steps; read as the one step at the mean count it
# was 6.9% (spread lengths, H100) and 6.7% (constant lengths, H200) below the simulator's on these
# 20,000 requests (seed 0); with the count's spread -0.4% and -0.9%. Bound 3%.
@pytest.mark.parametrize(
    ("gpu", "profile", "lengths"),
    [("h100-sxm", "theoretical", "spread"), ("h200-sxm", "calibrated", "constant")],
)
def test_itl_p50_on_decode_only_steps_within_bounds_of_the_simulator(
    gpu: str, profile: str, lengths: str
) -> None:
    trace = acc.builtin_trace(acc.TRACE)
    case = acc.Case("Qwen/Qwen3-8B", gpu, profile, 512)
    cell = acc.synthetic_cell(case, 0.6, trace, count=20_000, lengths=lengths, seeds=(0,))
    assert abs(cell.error("itl_p50")) <= 0.03, f"{cell.error('itl_p50'):+.1%}"


def test_decode_pool_itl_p99_within_bounds_of_the_simulator() -> None:
    """A decode pool (Qwen3-8B, H100 theoretical, 1 + 1 replicas, 1000-token prompts, 101-token
    answers, 50 req/s Poisson): ITL p99 7.07 ms in the simulator (20,000 requests, seeds 0-2
    within 0.1%); the model read the step at the mean count, 6.42 ms (-9.2%), and now 7.35 ms
    (+3.9%). Bound 6%."""
    dep = Deployment(
        model="Qwen/Qwen3-8B",
        gpu="h100-sxm",
        disaggregated={"prefill_replicas": 1, "decode_replicas": 1},
    )
    r = dep.resolve(THEORETICAL)
    wl = Workload.from_mapping(
        {
            "arrivals": {"requests_per_s": 50.0},
            "input_tokens": {"pairs": [[1000, 1.0]]},
            "output_tokens": {"pairs": [[101, 1.0]]},
        }
    )
    p = LatencyModel(r, WorkloadStats.of(wl)).evaluate(50.0, per_bucket=False)
    sim = run(r, workload_requests(wl, 0, count=20_000))
    assert p.itl_p99_s is not None
    assert abs(p.itl_p99_s / sim.itl.p99_s - 1.0) <= 0.06, (p.itl_p99_s, sim.itl.p99_s)
    assert p.itl_p99_s > 1.1 * p.itl_p50_s  # the spread, not one step


def test_preemption_risk_between_the_simulated_full_cache_shares() -> None:
    """`preemption_risk`, P(KV demand > cache) from the KV use's mean and spread, against the
    share of time the simulated cache is near full (its blocks summed over the running requests,
    H100 theoretical, budget 2048, spread lengths, 90% load, 20,000 requests): between the share
    at >= 98% and at >= 90% of the blocks. With the count's variance as Poisson (z n) the risk
    read 6e-4; then 5.1%, and the simulator spends 2.5% of the time at >= 98% and 13.6% at >= 90%
    (5.5% at >= 95%). With E[Delta]' in the count's loop (and the prefill drag relaxed over the
    queue's own time) the count's variance read 21% low here and the risk 2.0%; without them
    (docs/latency/decode-count.md) it reads 4.4%."""
    trace = acc.builtin_trace(acc.TRACE)
    case = acc.Case("Qwen/Qwen3-8B", "h100-sxm", "theoretical", 2048)
    r = case.resolve()
    base = acc.stationary_workload(trace)
    wl = scale_workload(base, 0.9 * acc.capacity(r, base))
    p = LatencyModel(r, WorkloadStats.of(wl)).evaluate(wl.arrivals.mean_requests_per_s, per_bucket=False)
    cfg = engine_config(r)
    reqs = workload_requests(wl, 0, count=20_000)
    steps: list[StepTrace] = []
    simulate(reqs, r.replica, cfg, step_trace=steps)
    held: dict[int, int] = {}
    share = np.empty(len(steps))
    durations = np.empty(len(steps))
    for i, rec in enumerate(steps):
        for rid in rec.preempted:
            held.pop(rid, None)
        for rid, tok in rec.scheduled:
            held[rid] = held.get(rid, 0) + tok * rec.steps
        blocks = sum(-(-held[rid] // cfg.block_size) for rid, _ in rec.scheduled)
        share[i] = blocks / cfg.kv_cache_blocks
        durations[i] = rec.duration_s
    mid = slice(len(steps) // 10, len(steps) * 9 // 10)
    above = {t: float(np.average(share[mid] >= t, weights=durations[mid])) for t in (0.9, 0.98)}
    assert p.preemption_risk is not None
    assert above[0.98] <= p.preemption_risk <= above[0.9], (p.preemption_risk, above)


def _itl_reference(eng: Any, st: Any) -> tuple[float, float]:
    """ITL p50/p99 the literal way: every mixed step and every decode-only slice in one
    `tail_quantiles` (the engine skips the slices where the mixed steps alone reach a level above
    them, and drops the mixed steps that start above the slices when the level is below)."""
    from scipy.stats import norm

    from planner.costmodel.steptime import step_time_s
    from planner.latency.itl import LEVELS
    from planner.latency.quantiles import SPREAD, tail_quantiles
    from planner.latency.slices import SLICE_PROBS

    steps = eng.steps(st)
    total = float(steps.rates.sum())
    mean, sigma = decode_count.decode_company(st.n, eng.decode_variance(st))
    edges = [0.0, 0.25, 0.5, 0.75, 0.9, 0.95, 0.98, 0.99, 1.0]
    z = norm.ppf(edges)
    others = [
        mean * (norm.cdf(z[j + 1] - sigma) - norm.cdf(z[j] - sigma)) / (edges[j + 1] - edges[j])
        for j in range(8)
    ]
    counts = [min(c + 1.0, eng.replica.decode_cap) for c in others]
    seen = np.array(
        [
            step_time_s(eng.replica.step_coefficients, 0.0, 0.0, c, c * eng.replica.decode_context_tokens)
            for c in counts
        ]
    )
    shares = SLICE_PROBS / seen
    shares *= max(1.0 - total, 0.0) / shares.sum()
    # the slices' spread: SPREAD, no wider than their own range (max - min) / (max + min)
    narrow = min(SPREAD, max((seen[-1] - seen[0]) / (seen[-1] + seen[0]), 1e-6))
    q = tail_quantiles(
        float(seen[0]),
        np.concatenate((steps.values, seen)),
        np.concatenate((steps.rates, shares)),
        LEVELS,
        np.concatenate((np.full(steps.values.size, SPREAD), np.full(seen.size, narrow))),
        total=total + max(1.0 - total, 0.0),
    )
    return float(q[0]), float(q[1])


@pytest.mark.parametrize(
    ("model", "gpu", "budget", "prompts", "outputs", "burstiness"),
    [
        ("Qwen/Qwen3-8B", "h100-sxm", 512, [[1155, 1.0]], [[211, 1.0]], 1.0),
        ("Qwen/Qwen3-8B", "h100-sxm", 2048, [[300, 0.5], [3000, 0.5]], [[50, 0.5], [400, 0.5]], 1.0),
        ("Qwen/Qwen3-8B", "h200-sxm", 8192, [[1155, 1.0]], [[211, 1.0]], 0.25),
        ("Qwen/Qwen3-30B-A3B", "h100-sxm", 8192, [[512, 1.0]], [[32, 1.0]], 0.5),
    ],
)
def test_itl_shortcuts_match_the_literal_mixture(
    model: str,
    gpu: str,
    budget: int,
    prompts: list[list[float]],
    outputs: list[list[float]],
    burstiness: float,
) -> None:
    dep = Deployment(model=model, gpu=gpu, max_num_batched_tokens=budget, max_num_seqs=min(budget, 256))
    wl = Workload.from_mapping(
        {
            "arrivals": {"requests_per_s": 1.0, "burstiness": burstiness},
            "input_tokens": {"pairs": prompts},
            "output_tokens": {"pairs": outputs},
        }
    )
    eng = LatencyModel(dep.resolve(), WorkloadStats.of(wl)).engines["colocated"]
    top = eng.boundary().lam_max
    for frac in (0.01, 0.1, 0.3, 0.5, 0.7, 0.85, 0.95, 0.99):
        st, _ = eng.solve(frac * top)
        p = eng.point(st)
        got = (p.itl_p50_s, p.itl_p99_s)
        ref = _itl_reference(eng, st)
        assert got == pytest.approx(ref, rel=1e-9, abs=0.0), frac


def test_top_slice_alone_is_the_slice_lists_last() -> None:
    """The ITL p99 shortcut times only the top slice: the same number the full list gives."""
    from planner.latency.slices import lognormal_slice_list, lognormal_top_slice

    for sigma in (0.0, 0.05, 0.4, 1.5, 3.0):
        for scale in (1.0, 12.5, 600.0):
            assert lognormal_top_slice(sigma, scale) == lognormal_slice_list(sigma, scale)[-1]


@pytest.mark.parametrize(
    ("model", "gpu", "prompts", "outputs"),
    [
        ("Qwen/Qwen3-8B", "h200-sxm", [[1, 1.0]], [[2, 1.0]]),
        ("Qwen/Qwen3-8B", "h100-sxm", [[300, 0.5], [3000, 0.5]], [[50, 0.5], [400, 0.5]]),
        ("Qwen/Qwen3-30B-A3B", "h100-sxm", [[512, 1.0]], [[32, 1.0]]),
    ],
)
def test_itl_p99_meets_the_idle_floor_as_load_vanishes(
    model: str, gpu: str, prompts: list[list[float]], outputs: list[list[float]]
) -> None:
    """At vanishing load a decoder is alone: its steps are one decode step, the idle floor. The
    decode-only slices close onto that step and so does their spread (`decode_slice_spread`);
    with the 5% spread kept, ITL p99 read 4.9% above the floor at every positive rate."""
    wl = Workload.from_mapping(
        {
            "arrivals": {"requests_per_s": 1.0},
            "input_tokens": {"pairs": prompts},
            "output_tokens": {"pairs": outputs},
        }
    )
    eng = LatencyModel(Deployment(model=model, gpu=gpu).resolve(), WorkloadStats.of(wl)).engines["colocated"]
    floor = eng.zero_point().itl_p99_s
    assert floor is not None
    low = eng.itl_p99_s(eng.state_at(1e-9))
    assert low == pytest.approx(floor, rel=1e-5)
    assert eng.itl_p99_s(eng.state_at(1e-3)) >= low  # and rises from there


def test_decode_slice_spread_closes_with_the_slices() -> None:
    from planner.latency.quantiles import SPREAD
    from planner.latency.slices import MIN_SLICE_SPREAD, decode_slice_spread

    assert decode_slice_spread([5.0] * 8) == MIN_SLICE_SPREAD  # one step: (almost) an atom
    assert decode_slice_spread([5.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.2]) == pytest.approx(0.2 / 10.2)
    assert decode_slice_spread([5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0]) == SPREAD  # wide: the usual 5%


def test_the_decode_count_component_by_hand() -> None:
    """planner.latency.decode_count on inputs worked by hand: a decode-only engine (no prompt
    cost slope, no drag) with n = 40 decodes, steps of 20 ms growing 0.1 ms per decode: e =
    40 x 0.1 / 20 = 0.2, loop = 0.8, keep = 1; Poisson arrivals (c_a^2 = 1): Var n = 40 / 0.8 =
    50. The company a decoder meets: v/n = 1.25, mean 40 + 0.25 = 40.25, variance 50 + 1.5625 -
    1.25 = 50.3125, log-sd sqrt(ln(1 + 50.3125 / 40.25^2)). A still count (busy 1, no decodes)
    has no spread; a feedback that would cancel the count is held at DECODE_GAIN_FLOOR."""
    from planner.latency.decode_count import (
        DECODE_GAIN_FLOOR,
        count_feedback,
        count_wanders,
        decode_company,
        decode_count_variance,
    )

    fb = count_feedback(
        decodes=40.0, busy=0.0, decode_step_s=0.020, decode_slope_s=0.0001, drag_per_decode=0.0
    )
    assert fb.keep == 1.0 and fb.loop == pytest.approx(0.8, rel=1e-12)
    var = decode_count_variance(decodes=40.0, arrival_cv2=1.0, decode_overlap=0.7, feedback=fb)
    assert var == pytest.approx(50.0, rel=1e-12)
    company = decode_company(40.0, var)
    assert company is not None
    assert company.mean == pytest.approx(40.25, rel=1e-12)
    assert company.log_sd == pytest.approx(math.sqrt(math.log1p(50.3125 / 40.25**2)), rel=1e-12)
    assert decode_company(40.0, 0.0) is None
    assert not count_wanders(0.0, 0.02, 0.1) and not count_wanders(40.0, 0.02, 1.0)
    assert count_wanders(40.0, 0.02, 0.0)
    saturated = count_feedback(
        decodes=40.0, busy=0.5, decode_step_s=0.020, decode_slope_s=0.001, drag_per_decode=0.0
    )
    assert saturated.loop == DECODE_GAIN_FLOOR  # e = min(40 x 0.001 / 0.02, 1) = 1: the loop would vanish
    # a prefill drag beta = 0.01 per decode: e = 40 x 0.0001 / 0.02 = 0.2, e_q = 40 x 0.01 = 0.4,
    # loop = 1 - 0.2 + 0.4 / (1 - 0.5) = 1.6
    dragged = count_feedback(
        decodes=40.0, busy=0.5, decode_step_s=0.020, decode_slope_s=0.0001, drag_per_decode=0.01
    )
    assert (dragged.keep, dragged.loop) == (0.5, pytest.approx(1.6, rel=1e-12))


def test_itl_component_invariants() -> None:
    """`itl.itl_level`'s boundaries: a step time >= 0 and mixed-step shares >= 0, not NaN (inf
    past the stable range; `ModelInvariantError` naming them), a level of LEVELS; with no mixed steps and no
    wandering count every level is the decode-only step itself (hand: both quantiles t_dec)."""
    from planner.latency.invariants import ModelInvariantError
    from planner.latency.itl import itl_level

    def step(count: float) -> float:
        return 0.01 + 0.0001 * count

    common = {
        "mixed_values": np.array([0.05]),
        "decode_others": None,
        "max_decodes": 64.0,
        "decode_step_of": step,
    }
    with pytest.raises(ModelInvariantError, match="decode_step_s"):
        itl_level(level_index=1, decode_step_s=-1.0, mixed_rates=np.array([0.1]), **common)
    with pytest.raises(ModelInvariantError, match="mixed steps' share"):
        itl_level(level_index=1, decode_step_s=0.01, mixed_rates=np.array([np.nan]), **common)
    with pytest.raises(IndexError):
        itl_level(level_index=2, decode_step_s=0.01, mixed_rates=np.array([0.1]), **common)
    for i in (0, 1):
        got = itl_level(level_index=i, decode_step_s=0.012, mixed_rates=np.array([0.0]), **common)
        assert got.itl_s == 0.012 and got.mixed is None and got.all_steps is None
    # the decode-only slices' steps each divide their share: every one finite and > 0
    from planner.latency.decode_count import DecodeCompany

    wander = {**common, "decode_others": DecodeCompany(8.0, 0.5)}
    for bad in (0.0, math.inf, math.nan):

        def broken(count: float, bad: float = bad) -> float:
            return bad if count > 8.0 else step(count)  # one slice's step out of range

        with pytest.raises(ModelInvariantError, match="decode-only step"):
            itl_level(
                level_index=0,
                decode_step_s=0.01,
                mixed_rates=np.array([0.0]),
                **{**wander, "decode_step_of": broken},
            )
