"""The company a prompt is admitted with, counted in whole prompts when prompts are alike
(planner.latency.engine: `count_given_any`, `steps.company_tokens`): hand-derived counts against
scipy's distributions, the steps it builds, and the fade into the lognormal as lengths spread."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from chain_helpers import chain_of
from scipy import stats

import planner.latency.engine as engine_mod
import planner.latency.steps as steps_mod
from planner.costmodel.profile import THEORETICAL
from planner.costmodel.steptime import batch_time_s
from planner.deployment import Deployment
from planner.latency import LatencyModel, WorkloadStats, delay, ttft
from planner.latency.company import COUNT_ATOMS, count_given_any, couple_by_rank, room_for_more, under_way
from planner.latency.replica import ATOM_CV, room_after_tokens
from planner.latency.results import Steps
from planner.latency.slices import SLICE_PROB_LIST, SLICE_PROBS, lognormal_slice_list
from planner.latency.steps import chain_company
from planner.workload import Workload


def _given_any(pmf: np.ndarray) -> np.ndarray:
    """P(K = k | K >= 1) for k = 1 .. COUNT_ATOMS - 1 from a pmf over k = 0 .. COUNT_ATOMS - 1."""
    return pmf[1:] / (1.0 - pmf[0])


def test_one_step_length_poisson_is_the_zero_truncated_poisson() -> None:
    """Every step under way lasts 30 ms; arrivals at 25/s (Poisson, zf = 1): K ~ Poisson(mu),
    mu = 25 x 0.03 = 0.75. Given K >= 1: the zero-truncated Poisson, and the last atom carries
    the rest at the mean that keeps E[K | K >= 1] = mu / (1 - e^-mu)."""
    counts, probs = count_given_any(25.0, 1.0, np.array([0.03]), np.array([1.0]))
    mu = 0.75
    k = np.arange(COUNT_ATOMS)
    expected = _given_any(stats.poisson.pmf(k, mu))
    assert counts[: COUNT_ATOMS - 1] == [float(i) for i in range(1, COUNT_ATOMS)]
    assert probs[: COUNT_ATOMS - 1] == pytest.approx(expected, rel=1e-12)
    assert sum(probs) == pytest.approx(1.0, rel=1e-12)
    mean = sum(c * p for c, p in zip(counts, probs, strict=True))
    assert mean == pytest.approx(mu / -math.expm1(-mu), rel=1e-12)
    assert counts[-1] > COUNT_ATOMS - 1  # the rest lies beyond the exact atoms


def test_bursty_arrivals_give_the_negative_binomial() -> None:
    """Burst factor zf = 3: K given L has mean mu = 2 and variance 3 mu, the negative binomial of
    r = mu / (zf - 1) = 1 success and success chance 1 / zf (scipy's nbinom(r, 1 / zf))."""
    counts, probs = count_given_any(40.0, 3.0, np.array([0.05]), np.array([2.0]))
    k = np.arange(COUNT_ATOMS)
    expected = _given_any(stats.nbinom.pmf(k, 1.0, 1.0 / 3.0))
    assert probs[: COUNT_ATOMS - 1] == pytest.approx(expected, rel=1e-12)
    mean = sum(c * p for c, p in zip(counts, probs, strict=True))
    assert mean == pytest.approx(2.0 / (1.0 - 1.0 / 3.0), rel=1e-12)  # mu / P(K >= 1), P(0) = 1/3


def test_mixed_step_lengths_mix_the_counts_by_length() -> None:
    """Two kinds of steps under way: 10 ms (weight 0.7) and 60 ms (weight 0.3), 20 arrivals/s:
    K is Poisson(0.2) or Poisson(1.2) with those weights, then conditioned on K >= 1. A fit by
    two moments would give one negative binomial: the mixture has more ones and a longer tail."""
    counts, probs = count_given_any(20.0, 1.0, np.array([0.01, 0.06]), np.array([0.7, 0.3]))
    k = np.arange(COUNT_ATOMS)
    pmf = 0.7 * stats.poisson.pmf(k, 0.2) + 0.3 * stats.poisson.pmf(k, 1.2)
    assert probs[: COUNT_ATOMS - 1] == pytest.approx(_given_any(pmf), rel=1e-12)
    mean = sum(c * p for c, p in zip(counts, probs, strict=True))
    assert mean == pytest.approx((0.7 * 0.2 + 0.3 * 1.2) / (1.0 - pmf[0]), rel=1e-12)


def test_step_under_way_is_length_biased() -> None:
    """Mixed steps of 30 and 50 ms with shares 0.3 and 0.2 of all steps, decode-only steps of
    10 ms the other 0.5: the step under way is each with weight share x length."""
    lengths, weights = under_way(0.01, np.array([0.03, 0.05]), np.array([0.3, 0.2]))
    assert lengths.tolist() == [0.01, 0.03, 0.05]
    assert weights == pytest.approx([0.5 * 0.01, 0.3 * 0.03, 0.2 * 0.05], rel=1e-12)
    # shares past 1 in all are capped (every step carries something): none left for the atom
    lengths, weights = under_way(0.01, np.array([0.03]), np.array([2.0]))
    assert weights == pytest.approx([0.0, 0.03], rel=1e-12)


def _model(prompts: object, budget: int = 8192) -> LatencyModel:
    w = Workload.from_mapping(
        {"arrivals": {"requests_per_s": 20.0}, "input_tokens": prompts, "output_tokens": 101}
    )
    d = Deployment(model="Qwen/Qwen3-8B", gpu="h100-sxm", max_num_batched_tokens=budget)
    return LatencyModel(d.resolve(THEORETICAL), WorkloadStats.of(w))


def _engine(prompts: object, budget: int = 8192) -> engine_mod.Engine:
    return _model(prompts, budget).engines["colocated"]


def _backlog_values(eng: engine_mod.Engine, st: Steps) -> int:
    """The backlog's full steps at the mix's end: none, one, or their spread in slices."""
    if st.backlog <= 0:
        return 0
    return SLICE_PROBS.size if eng.full_step_cv2 > 0 else 1


def _steps_without_chain(eng: engine_mod.Engine, state: Any) -> Steps:
    """The state's step mix with the steps' chain out (`steps.step_mix(with_chain=False)`, as
    where its states run out), from the inputs `Engine.steps` gathers: the queue's wait (the
    chain does not move it), the service's kappa, the full steps' spread and its lognormal."""
    cv2 = eng.full_step_cv2
    return steps_mod.step_mix(
        eng.replica, state, wait=eng.steps(state).wait, service_kappa=eng.service_shape.kappa,
        full_step_cv2=cv2, full_step_shape=np.array(lognormal_slice_list(math.sqrt(math.log1p(cv2)))),
        with_chain=False,
    )  # fmt: skip


def _recorded(monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> list[Any]:
    """Records what `owner.name` returns, call by call (the engine's last pass makes the last)."""
    seen: list[Any] = []
    original = getattr(owner, name)

    def record(*args: object) -> Any:
        seen.append(original(*args))
        return seen[-1]

    monkeypatch.setattr(owner, name, record)
    return seen


def _captured_counts(monkeypatch: pytest.MonkeyPatch) -> list[tuple[list[float], list[float]]]:
    """What `count_given_any` returns: (counts, probabilities) per call."""
    return _recorded(monkeypatch, steps_mod, "count_given_any")


def _fragments(k: np.ndarray, prompt: float, s_f: float, comp: slice) -> tuple[slice, np.ndarray]:
    """Where the mix lists the rests of the groups (a prompt and its k whole prompts of company)
    that the budget splits, one per company slice right after the company steps, and their
    tokens: G - floor(G / s_f) s_f where G > s_f, else none (0)."""
    group = prompt * (1.0 + k)
    rest = np.where(group > s_f, group - np.floor(group / s_f) * s_f, 0.0)
    return slice(comp.stop, comp.stop + rest.size), rest


def test_alike_prompts_share_steps_in_whole_prompts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Constant 1000-token prompts (one chunk each), Poisson at 20/s, budget 8192. A prompt's step
    with company carries 1 + k whole prompts: 1000 (1 + k) tokens (capped by the budget), each
    prompt attending to itself, (1 + k) 1000^2 / 2 pairs (x min(x, E[Pe^2] / E[Pe]) / 2 for the
    company's x tokens), beside the n_arr decodes. Each prompt counts its tokens' share of its
    group's steps: the company steps' rates times their tokens, with the rest of a group the
    budget splits (a step of its own, `_fragments`), are the tokens of the prompts with company,
    lam t_step (1 - q) pi 1000: every token once. The passes count the company over the step
    under way; the final mix takes alike prompts' count from the steps' chain
    (`steps.chain_company`), so its atoms are the last `steps.company_tokens` call's."""
    seen = _captured_counts(monkeypatch)
    company = _recorded(monkeypatch, steps_mod, "company_tokens")  # (values, probabilities)
    eng = _engine(1000)
    assert eng.replica.atom_weight == 1.0
    state, _ = eng.solve(20.0)
    assert state.n_arr == pytest.approx(state.n, rel=1e-14)  # Poisson: no burst weighting
    seen.clear()
    st = eng.steps(state)
    assert len(seen) == steps_mod.COMPANY_PASSES
    values, probs = company[-1]
    k = np.array(values) / 1000.0
    assert k.tolist() == [float(i) for i in range(1, k.size + 1)] and k.size > COUNT_ATOMS
    comp = slice(1, 1 + k.size)  # after the prompt alone (one chunk: no full chunks)
    c = np.minimum(1000.0 * (1.0 + k), state.share_full)
    expected = batch_time_s(
        eng.replica.step_coefficients,
        state.n_arr,
        state.n_arr * eng.replica.decode_context_tokens,
        c,
        1000.0**2 / 2 + (c - 1000.0) * 1000.0 / 2,
        c,
        0.0,
    ) + (state.t_dec - state.t_arr)
    assert st.values[comp] == pytest.approx(expected, rel=1e-12)
    _, scale = chain_of(state, state.lam, 1.0, 1000.0)  # the solve's rate: 20 to 1e-9
    lam_t = state.lam * state.t_step * scale  # prompts per step, the chain's (`steps.chain_company`)
    assert c[-1] == state.share_full  # the budget caps the largest company's step
    frag, rest = _fragments(k, 1000.0, state.share_full, comp)
    assert np.array_equal(rest > 0.0, 1000.0 * (1.0 + k) > state.share_full)  # a company of 8 or more
    ahead = slice(frag.stop, frag.stop + rest.size)  # the rests ahead of one newcomer
    tokens = float(st.rates[comp] @ c + (st.rates[frag] + st.rates[ahead]) @ rest)
    assert tokens == pytest.approx(lam_t * (1.0 - st.backlog) * st.pi * 1000.0, rel=1e-9)
    prompts = lam_t * (1.0 - st.backlog) * st.pi
    assert float(st.rates[comp].sum()) < prompts  # fewer steps than prompts
    assert sum(probs) == pytest.approx(1.0, rel=1e-12)


def test_capped_company_steps_carry_every_prompt_token_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Constant 1155-token prompts at budget 2048 near capacity: a step holds one whole prompt and
    part of a second, and a company of one or more spills into later steps. Counting a company
    step once per prompt in it, 1 / (1 + k), lost the spill: the mix carried fewer prompt tokens
    than arrive (its steps averaged more tokens than the budget holds) and its decode-weighted mean
    step fell 8% below t_step. Now each prompt counts its tokens' share of its group's steps,
    1155 / G for a group of G = 1155 (1 + k) tokens: floor(G / s_f) full steps and the rest R,
    a step alone when nothing arrived during the last full one (e^{-lam zf T_full}), else its
    share R / s_f of a full step. The steps carry the group's tokens exactly, the rest alone is
    the tail of a 1155-token prompt (R tokens at offset 1155 - R; whole prompts beyond 1155),
    and the mix's mean step is t_step within 1% (the model's own closed form, from which the mix
    is not built)."""
    seen = _captured_counts(monkeypatch)
    model = _model(1155, budget=2048)
    eng = model.engines["colocated"]
    lam = 0.85 * model.max_stable_requests_per_s()
    state, _ = eng.solve(lam)
    st = eng.steps(state)
    k = np.array(seen[-1][0])
    comp = slice(1, 1 + k.size)
    c = np.minimum(1155.0 * (1.0 + k), state.share_full)
    assert (c < 1155.0 * (1.0 + k)).sum() >= COUNT_ATOMS - 1  # the budget caps all but one company
    lam_t = lam * state.t_step
    with_company = lam_t * (1.0 - st.backlog) * st.pi
    frag, rest = _fragments(k, 1155.0, state.share_full, comp)
    assert np.all(rest > 0.0)  # every group splits: 2 x 1155 > s_f
    ahead = slice(frag.stop, frag.stop + rest.size)
    carried = float(st.rates[comp] @ c + st.rates[frag] @ rest + st.rates[ahead] @ rest)
    assert carried == pytest.approx(with_company * 1155.0, rel=1e-9)
    # the rests alone, when no prompt arrived during the full step: a prompt's tail at its offset
    # (R <= 1155), or R tokens of whole prompts' attention, R 1155 / 2 pairs (R > 1155)
    offset = np.maximum(1155.0 - rest, 0.0)
    pairs = rest * (1155.0 - np.minimum(rest, 1155.0) / 2)
    expected = batch_time_s(
        eng.replica.step_coefficients,
        state.n_arr,
        state.n_arr * eng.replica.decode_context_tokens,
        rest,
        pairs,
        offset + rest,
        offset,
    ) + (state.t_dec - state.t_arr)
    assert (rest > 1155.0).any() and (rest < 1155.0).any()
    assert st.values[frag] == pytest.approx(expected, rel=1e-12)
    alone = math.exp(-lam * st.zf * state.t_full)  # no arrival during the group's last full step
    group = 1155.0 * (1.0 + k)
    p = np.array(seen[-1][1])
    assert st.rates[frag] == pytest.approx(with_company * 1155.0 * p * alone / group, rel=1e-12)
    one = lam * st.zf * state.t_full * alone
    kept = with_company * p * 1155.0 / state.share_full * (1.0 - (alone + one) * rest / group)
    assert st.rates[comp] == pytest.approx(kept, rel=1e-12)
    # A rest shared with exactly one newcomer (Poisson over the full step, lam zf T_full e^{-...})
    # rides ahead of the newcomer's whole prompt (FIFO): min(R + 1155, s_f) tokens, the rest's
    # pairs and prefix plus the prompt's own 1155^2 / 2 pairs at offset 0. That step was the
    # newcomer's own: the prompts alone give up as many steps.
    tokens = np.minimum(rest + 1155.0, state.share_full)
    expected_ahead = batch_time_s(
        eng.replica.step_coefficients,
        state.n_arr,
        state.n_arr * eng.replica.decode_context_tokens,
        tokens,
        pairs + 1155.0**2 / 2,
        offset + tokens,
        offset,
    ) + (state.t_dec - state.t_arr)
    assert st.values[ahead] == pytest.approx(expected_ahead, rel=1e-12)
    moved = with_company * 1155.0 * p * one / group
    assert st.rates[ahead] == pytest.approx(moved, rel=1e-12)
    lone = lam_t * (1.0 - st.backlog) * (1.0 - st.pi)
    assert st.rates[0] == pytest.approx(lone - float(moved.sum()), rel=1e-12)
    # every mixed step carries at most the budget's prompt tokens: at least E[Pe] / s_f per prompt
    assert float(st.rates.sum()) / lam_t > 1155.0 / state.share_full
    mean = (1.0 - float(st.rates.sum())) * state.t_dec + float(st.rates @ st.values)
    assert mean == pytest.approx(state.t_step, rel=0.01)


def test_count_atoms_fade_into_the_lognormal_as_lengths_spread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Weight of the whole-prompt atoms: 1 - CV / ATOM_CV. Prompts 800 or 1200 tokens (CV 0.2):
    0.6, the company's values are the atoms' (the steps' chain's, `steps.chain_company`) and
    the lognormal's 8 per prompt; CV 0.5 and more: the lognormal alone (8), and no count is
    taken."""
    seen = _captured_counts(monkeypatch)
    company = _recorded(monkeypatch, steps_mod, "company_tokens")  # (values, probabilities)

    def split(s_f: float) -> int:
        """Rest steps, two per company slice (alone, and ahead of a newcomer), where the budget
        splits a group of the mean prompt (1000 tokens here) and its largest company."""
        values = company[-1][0]
        return 2 * len(values) if 1000.0 + max(values) > s_f else 0

    half = _engine({"pairs": [[800, 0.5], [1200, 0.5]]})
    assert half.replica.atom_weight == pytest.approx(1.0 - 0.2 / ATOM_CV, rel=1e-12)
    state, _ = half.solve(20.0)
    st = half.steps(state)
    assert seen  # the passes took the count
    n_atoms = len(company[-1][0]) - 8
    assert company[-1][0][:n_atoms] == [1000.0 * (i + 1) for i in range(n_atoms)] and n_atoms > COUNT_ATOMS
    rows = 2  # two prompt lengths, one chunk each
    rests = split(state.share_full)
    assert rests > 0  # the atoms' rest at its conditional mean is a company of 7 or more
    assert st.values.size == rows + rows * (n_atoms + 8) + rests + _backlog_values(half, st)
    seen.clear()
    spread = _engine({"pairs": [[500, 0.5], [1500, 0.5]]})  # CV 0.5
    assert spread.replica.atom_weight == 0.0
    state, _ = spread.solve(20.0)
    st = spread.steps(state)
    assert not seen
    rests = split(state.share_full)
    assert st.values.size == rows + rows * 8 + rests + _backlog_values(spread, st)


def test_the_steps_chain_gives_way_where_its_states_run_out() -> None:
    """`steps.chain_company` with a count per step beyond its CHAIN_STATES (prompts arriving
    at 10,000/s into 20 ms steps: some 200 per step) keeps the passes' count and t_step's steps:
    its folded last state would stand for every larger count. At 20/s it takes over: its own
    company (P(any) in (0, 1), counts 1, 2, 3, ...) and a mean step shorter than a t_step that
    counts every prompt's step as its own."""
    eng = _engine(1000)
    counts = ([1.0, 2.0], [0.75, 0.25])

    def company(rate: float, room_tokens: float) -> Any:
        return chain_company(
            eng.replica, rate=rate, decode_step_s=0.01, last_step_s=0.02, token_s=1e-6,
            room_tokens=room_tokens, company_any=0.5, counts=counts, step_s=0.03,
        )  # fmt: skip

    assert company(1e4, 7000.0) == (0.5, counts, 1.0, None)
    pi, (ks, ps), scale, chain = company(20.0, 7000.0)
    assert 0.0 < pi < 1.0 and ks[:3] == [1.0, 2.0, 3.0] and sum(ps) == pytest.approx(1.0, rel=1e-9)
    assert 0.0 < scale < 1.0
    assert chain is not None and float(chain[1].sum()) == pytest.approx(1.0, rel=1e-12)  # its pi (D's steps)
    # no room for a second whole prompt: the passes' count alone
    assert company(20.0, 900.0) == (0.5, counts, 1.0, None)


def test_couple_by_rank_pairs_the_two_distributions_quantile_by_quantile() -> None:
    """The comonotone coupling of two discrete distributions: pieces where both CDFs are flat,
    by hand ({1, 2} at 1/2 each against {10, 20, 30} at 0.2, 0.5, 0.3: the CDFs break at 0.2,
    0.5 and 0.7), each marginal kept; alike slices pair one to one."""
    (va, vb), p = couple_by_rank([1.0, 2.0], [0.5, 0.5], [10.0, 20.0, 30.0], [0.2, 0.5, 0.3])
    assert (va, vb) == ([1.0, 1.0, 2.0, 2.0], [10.0, 20.0, 20.0, 30.0])
    assert p == pytest.approx([0.2, 0.3, 0.2, 0.3], abs=1e-15)
    slices = SLICE_PROB_LIST
    (va, vb), p = couple_by_rank(list(range(8)), slices, list(range(10, 18)), slices)
    assert va == list(range(8)) and vb == list(range(10, 18)) and p == pytest.approx(slices, abs=1e-15)
    # any two: each side's marginal, and one piece per break of either CDF at most
    a, pa = [0.5, 1.5, 4.0], [0.125, 0.625, 0.25]
    b, pb = [1.0, 2.0, 3.0, 5.0, 8.0], [0.4, 0.3, 0.1, 0.1, 0.1]
    (va, vb), p = couple_by_rank(a, pa, b, pb)
    assert len(p) <= len(a) + len(b) - 1 and sum(p) == pytest.approx(1.0, abs=1e-15)
    for vals, side, probs in ((va, a, pa), (vb, b, pb)):
        got = [sum(q for v, q in zip(vals, p, strict=True) if v == x) for x in side]
        assert got == pytest.approx(probs, abs=1e-15)
        assert vals == sorted(vals)  # by rank: both rise together


def test_alike_prompts_company_before_their_step_comes_in_whole_prompts() -> None:
    """Constant 1000-token prompts, Poisson at 20/s, budget 8192 (room for seven more beside
    one): D's company given any is whole prompts (`delay.company_atoms`). In the decode-only
    class the step under way lasts t_dec, so K ~ Poisson(mu = 20 t_dec) and given K >= 1 the
    zero-truncated Poisson; each prompt costs the class's mean cost over E[K | K >= 1] = mu /
    (1 - e^-mu). Paired by rank with U t_dec's slices, D keeps both marginals: its mean is the
    classes' E[U L] + pi E[min(cost, cap)]. (Where the steps' chain is in, D reads it instead,
    `delay.delay_chain`, test_latency_shared.py: here it is taken out, as where its states run
    out.)"""
    eng = _engine(1000)
    state, _ = eng.solve(20.0)
    assert eng.steps(state).chain is not None  # the chain is in: this test takes it out
    st = _steps_without_chain(eng, state)
    assert st.chain is None
    dc = delay.delay_classes(eng.replica, state, st, token_cost_s=ttft.token_cost_s(eng.zero()))
    idle, classes = dc
    dec = classes[0]
    assert dec.sigma is None and dec.x_atoms is not None
    costs, probs = dec.x_atoms
    mu = state.lam * state.t_dec  # the solve's rate: 20 to 1e-9
    k = np.arange(1, COUNT_ATOMS)
    assert probs[: COUNT_ATOMS - 1] == pytest.approx(
        _given_any(stats.poisson.pmf(np.arange(COUNT_ATOMS), mu)), rel=1e-9
    )
    per = dec.x_scale * -math.expm1(-mu) / mu
    assert costs[: COUNT_ATOMS - 1] == pytest.approx(k * per, rel=1e-9)
    assert math.fsum(c * p for c, p in zip(costs, probs, strict=True)) == pytest.approx(
        dec.x_scale, rel=1e-12
    )
    assert all(cl.x_atoms is not None for cl in classes)
    cap = ttft.company_cap_s(
        eng.zero()
    )  # one full budget's prefill: only the last atom (8 and more) reaches it
    w_chain = delay.chain_delay_weight(join_weight=state.join_weight, arrival_cv2=eng.replica.arrival_cv2)
    assert w_chain == 0.0 or delay.delay_chain(eng.replica, state, st, idle_share=idle) is None
    d, p = delay.delay_values(eng.replica, classes=dc, chain=None, chain_weight=w_chain, company_cap_s=cap)
    capped = [math.fsum(q * min(c, cap) for c, q in zip(*cl.x_atoms, strict=True)) for cl in classes]
    expected = sum(cl.share * (cl.scale + cl.pi * x) for cl, x in zip(classes, capped, strict=True))
    assert float(d @ p) == pytest.approx(expected, rel=1e-9)
    assert float(p.sum()) == pytest.approx(1.0, rel=1e-12) and p[0] == idle
    assert delay.delay_top_s(eng.replica, classes=dc, company_cap_s=cap) == pytest.approx(
        float(d.max()), rel=1e-12
    )


def test_company_in_whole_prompts_only_where_the_room_holds_them() -> None:
    """Budget 2048 beside 1155-token prompts leaves less than a prompt's room: D's company stays
    the lognormal (a company before the prompt overflows its step, one after it fits in part);
    spread lengths (CV over ATOM_CV) too."""
    for eng in (_engine(1155, budget=2048), _engine({"percentiles": {"p10": 200, "p50": 1000, "p90": 4000}})):
        state, _ = eng.solve(20.0)
        st = eng.steps(state)
        assert all(
            cl.x_atoms is None
            for cl in delay.delay_classes(eng.replica, state, st, token_cost_s=ttft.token_cost_s(eng.zero()))[
                1
            ]
        )


def test_company_atoms_fade_in_with_the_room() -> None:
    """Constant 3000-token prompts at budget 8192: the room beside one prompt holds 1.7 more
    (room / 3000 - 1 = 0.7 of the way from one prompt's room to two: `room_for_more`), so D's
    company given any is 0.7 whole prompts and 0.3 the lognormal of its two moments, merged in
    order of cost; both parts keep the class's mean cost. (Where the steps' chain is in, its D
    takes the whole prompts' part, `delay.delay_chain`: here it is out.)"""
    eng = _engine(3000)
    state, _ = eng.solve(5.0)
    st = _steps_without_chain(eng, state)
    room = room_after_tokens(eng.replica, state)
    whole = room_for_more(room, 3000.0)
    assert 0.5 < whole < 0.9 and eng.replica.atom_weight == 1.0
    for cl in delay.delay_classes(eng.replica, state, st, token_cost_s=ttft.token_cost_s(eng.zero()))[1]:
        assert cl.x_atoms is not None
        costs, probs = cl.x_atoms
        assert costs == sorted(costs) and sum(probs) == pytest.approx(1.0, rel=1e-12)
        logn = lognormal_slice_list(cl.x_sigma, cl.x_scale)
        assert all(x in costs for x in logn)  # the lognormal's slices, at weight 1 - whole
        tail = [p for x, p in zip(costs, probs, strict=True) if x in logn]
        assert tail == pytest.approx([(1.0 - whole) * p for p in SLICE_PROB_LIST], rel=1e-12)
        assert math.fsum(c * p for c, p in zip(costs, probs, strict=True)) == pytest.approx(
            cl.x_scale, rel=1e-9
        )
