"""The step mix (docs/latency/steps.md, "Steps and company", "The step mix"): what TTFT and ITL share at a
state (a colocated engine with decodes): the step under way an arriving prompt meets, the company
it is admitted with, the queue beyond the next step, and the steps a decoder sees with their
rates.

A prompt's full chunks are steps of their own; its last chunk shares a step with its company, the
prompts that arrived during the step under way (counted once per step: each prompt its tokens'
share of it); while prompt tokens queue beyond the next step (probability `backlog`), every step
is a full budget, E[Pe] / s_f of them per prompt. The company arrives over the length-biased step
under way L, which the mix sets: a first mix with every chunk alone (`first_mix`), then
COMPANY_PASSES passes of the merged mix (`company_passes`: the chain converges in two, a long
step brings more company, which makes the next step longer); for alike prompts their count per
step as the steps' chain sets it (`chain_company`); then the mix itself, every (chunk, company)
step timed exactly (`decoder_steps.decoder_steps`). Pure functions of a `Replica`, a `State` and keyword inputs the
engine gathers (the prefill queue's wait and shape, the backlog's full-step spread).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from planner.latency.arrivals import company_count, steps_by_count
from planner.latency.company import (
    COUNT_ATOMS,
    NO_SUMS,
    Sums,
    add_sums,
    count_given_any,
    length_biased,
    room_for_more,
    under_way,
)
from planner.latency.decoder_steps import decoder_steps
from planner.latency.queueing import Phases, Wait, wait_beyond
from planner.latency.replica import FloatArray, Replica, room_beside
from planner.latency.results import State, Steps
from planner.latency.slices import SLICE_PROB_LIST, lognormal_slice_list

# Passes of the mix with company after the first without (the chain L -> company -> L converges
# in two: docs/latency/steps.md, "Steps and company").
COMPANY_PASSES = 2
# The steps' prompt-count chain's states at most (`chain_steps`; a bound on its size).
CHAIN_STATES = 64
# Chain counts below this share of the likeliest one are dropped (a tolerance).
CHAIN_NEGLIGIBLE = 1e-12
# The chain's last state (its count and more) holding more than this: too few states, the
# passes' count stays (a tolerance).
CHAIN_FOLDED = 1e-4
# The chain's reach: the count's mean plus this many sds (and CHAIN_REACH_EXTRA counts) at the
# longest step, plus the negative binomial's geometric tail down to CHAIN_TAIL (tolerances).
CHAIN_REACH_SDS = 8.0
CHAIN_REACH_EXTRA = 4.0
CHAIN_TAIL = 1e-6
# Arrival spreads within this of Poisson (dispersion 1) take no geometric tail (a tolerance).
POISSON_DISPERSION_TOL = 1e-9

NO_STEPS = np.empty(0)

Company = tuple[list[float], list[float]]  # (values, probabilities)


class FirstMix(NamedTuple):
    """The mix with every chunk alone: what the passes start from."""

    occupied: float  # P(a step is under way when a prompt arrives)
    chunk_steps_s: FloatArray  # (I, cols) each chunk's step as a decoder sees it
    chunk_rates: FloatArray  # (I, cols) and its rate per step
    last_rates: FloatArray  # (I,) last chunks per step, by prompt
    alone: Sums  # power sums of the last chunks' steps
    full_chunks: Sums  # and of the full chunks'
    step_lb: float  # the length-biased step under way and its second moment
    step_lb_sq: float


class Passes(NamedTuple):
    """The mix after the passes with company."""

    backlog: float  # P(more prompt tokens wait than the next step takes)
    beyond: Phases  # the wait beyond the next step, given one
    company_mean: float  # m: prompts admitted with an arriving one
    company_any: float  # pi: P(any)
    burst_factor: float  # zf = m / (lam L)
    company: Company  # its tokens given any
    counts: Company | None  # its count given any, as atoms (alike prompts)
    tokens_moments: tuple[float, float]  # E[X], E[X^2] given any
    backlog_rate: float  # the backlog's full steps per step
    sums: Sums
    step_lb: float
    step_lb_sq: float


class Chain(NamedTuple):
    """The company as the steps' chain sets it (`chain_company`)."""

    company_any: float
    counts: Company | None
    step_ratio: float  # the chain's steps per second over the mix's (1: the chain is out)
    steps: tuple[FloatArray, FloatArray] | None  # its step lengths and stationary vector


def no_mix(wait: Wait) -> Steps:
    """The steps of an engine without a mix (no decodes beside prompts, or none yet)."""
    return Steps(
        wait=wait, backlog=0.0, residual=0.0, step_lb=0.0, step_lb_sq=0.0, m=0.0, pi=0.0, zf=1.0,
        values=NO_STEPS, rates=NO_STEPS, busy=0.0, sums=NO_SUMS, beyond=(),
        backlog_rate=0.0, full_step_s=0.0, mixed_share=0.0, rates_sum=0.0,
    )  # fmt: skip


def step_mix(
    replica: Replica,
    s: State,
    *,
    wait: Wait,
    service_kappa: float,
    full_step_cv2: float,
    full_step_shape: FloatArray,
    with_chain: bool = True,
) -> Steps:
    """What TTFT and ITL share at a colocated state with decodes: `wait` the prefill queue's
    (GI/G/1), `service_kappa` its service's E[X] E[X^3] / E[X^2]^2, `full_step_cv2` the
    backlog's full steps' Var T / E[T]^2 and `full_step_shape` their lognormal over the mean in
    the probability slices. `with_chain` False: the steps' chain out (`chain_of_company`), as
    where its states run out; the passes' count stays."""
    assert replica.has_decode and replica.has_prefill and s.n > 0.0, "a mix needs decodes and prompts"
    assert math.isfinite(s.lam) and s.lam > 0.0 and s.t_step > 0.0, f"a state with a rate: {s.lam}"
    first = first_mix(replica, s)
    tau = company_token_s(replica, s)
    passes = company_passes(
        replica, s, first, wait=wait, service_kappa=service_kappa, full_step_cv2=full_step_cv2, token_s=tau
    )
    chain = chain_of_company(replica, s, first, passes, token_s=tau, with_chain=with_chain)
    company = passes.company
    if chain.counts is not passes.counts:  # the chain's count (the passes' one gave `company`)
        company = company_tokens(replica, *passes.tokens_moments, chain.counts)
    values, rates = decoder_steps(
        replica, s, chunk_steps_s=first.chunk_steps_s, chunk_rates=first.chunk_rates,
        last_rates=first.last_rates, backlog=passes.backlog, beyond=passes.beyond,
        step_lb=passes.step_lb, backlog_rate=passes.backlog_rate, burst_factor=passes.burst_factor,
        company_any=chain.company_any, company=company, full_step_cv2=full_step_cv2,
        full_step_shape=full_step_shape, step_ratio=chain.step_ratio,
    )  # fmt: skip
    rates_sum = float(np.add.reduce(rates))
    mixed_share = min(1.0, rates_sum)
    # every rate is a product of these (and of lam t_step p_i >= 0): each in range, none NaN
    assert 0.0 <= passes.backlog <= 1.0 and 0.0 <= chain.company_any <= 1.0, "probabilities in [0, 1]"
    assert chain.step_ratio >= 0.0 and mixed_share >= 0.0, "the mix's step rates are >= 0"
    # positional, in the fields' order (wait, backlog, residual, step_lb, step_lb_sq, m, pi, zf,
    # values, rates, busy, sums, beyond, backlog_rate, full_step_s, mixed_share, rates_sum, chain): a
    # NamedTuple built by keyword costs a microsecond more, and this runs ~9 times a candidate
    return Steps(
        wait, passes.backlog, passes.step_lb / 2.0, passes.step_lb, passes.step_lb_sq,
        passes.company_mean, chain.company_any, passes.burst_factor, values, rates, first.occupied,
        passes.sums, passes.beyond, passes.backlog_rate, s.t_full + (s.t_dec - s.t_arr), mixed_share,
        rates_sum, chain.steps,
    )  # fmt: skip


def first_mix(replica: Replica, s: State) -> FirstMix:
    """Power sums sum r v^k (k = 0..3) of the full chunks' and the last chunks' steps, in one
    pass: rates r = lam t_step p_i w_ij by column, then the columns split; the step under way
    length-biased from them (a step is under way with chance 1 - e^{-n} (1 - rho))."""
    busy = 1.0 - math.exp(-s.n) * (1.0 - min(max(s.rho, 0.0), 1.0))
    v0 = s.chunk_time + (s.t_dec - s.t_arr)
    w_last = s.lam * s.t_step * replica.prompt_probs  # last chunks per step, by prompt
    cols = v0.shape[1]
    pows = np.empty((4, *v0.shape))
    rates = pows[0]
    np.multiply(w_last[:, None], s.chunk_weight, out=rates)
    np.multiply(rates, v0, out=pows[1])
    np.multiply(pows[1], v0, out=pows[2])
    np.multiply(pows[2], v0, out=pows[3])
    by_col = np.add.reduce(pows, axis=1)  # (4, cols)
    alone_a = by_col[:, -1].tolist()
    alone: Sums = (alone_a[0], alone_a[1], alone_a[2], alone_a[3])
    if cols > 1:
        f = (by_col[:, 0] if cols == 2 else np.add.reduce(by_col[:, :-1], axis=1)).tolist()
        full_cols: Sums = (f[0], f[1], f[2], f[3])
    else:
        full_cols = NO_SUMS
    r1, r2 = length_biased(s.t_dec, add_sums(full_cols, 1.0, alone, 1.0))
    return FirstMix(busy, v0, rates, w_last, alone, full_cols, busy * r1, busy * r2)


def company_token_s(replica: Replica, s: State) -> float:
    """tau: what a company token adds to its step, the marginal prefill token of a full-budget
    step at this state; whole prompts that join a step pay their compute (`steady.join_cost_s`)
    where they share steps."""
    tau = max(s.t_full - s.t_arr, 0.0) / max(s.share_full, 1.0)
    if s.join_weight > 0.0:
        tau += s.join_weight * (s.join_cost / replica.mean_prefill_tokens - tau)
    return tau


def company_passes(
    replica: Replica,
    s: State,
    first: FirstMix,
    *,
    wait: Wait,
    service_kappa: float,
    full_step_cv2: float,
    token_s: float,
) -> Passes:
    """COMPANY_PASSES passes of the mix with company. In the passes a company step costs its
    prompt's last chunk step plus tau per company token: its moments then follow from the
    chunks' and the company's own (binomially), no 2-D arrays. Company tokens X: the count
    around an arrival (a gamma renewal process's, at the mean L; zf = m / mu its burst factor)
    of prompts; given any, a lognormal of those two moments in probability slices (or, alike
    prompts, atoms of whole prompts). A step with x of them carries 1 + x / E[Pe] prompts:
    counted once."""
    lam, mean_pe, t = s.lam, replica.mean_prefill_tokens, s.t_dec
    inv_pe, prefill_cv2 = 1.0 / mean_pe, replica.stats.prefill_cv2
    gap_shape, occupied = replica.gap_shape, first.occupied
    lam_t = lam * s.t_step
    full_step = s.t_full + (s.t_dec - s.t_arr)
    g2 = 1.0 + full_step_cv2  # E[T^2] / E[T]^2 of the backlog's full steps (E[T^3]: g2^3)
    s_f = max(s.share_full, 1.0)
    fc0, fc1, fc2, fc3 = first.full_chunks
    al0, al1, al2, al3 = first.alone
    lb, lb_sq = first.step_lb, first.step_lb_sq
    atoms = replica.atom_weight > 0.0
    if atoms:  # the mix as steps, for the company's count (`count_given_any`)
        mix_v, mix_r = first.chunk_steps_s.ravel(), first.chunk_rates.ravel()
        room = np.maximum(s_f - s.chunk_tokens[:, -1:], 0.0)  # the budget caps a company step
    m = pi = backlog = rb = x1 = x2 = 0.0
    zf = 1.0
    beyond: Phases = ()
    company: Company = ([], [])
    counts: Company | None = None
    sums: Sums = NO_SUMS
    for _ in range(COMPANY_PASSES):
        mu = lam * lb
        cnt = company_count(gap_shape, lam, lb, lb_sq)
        m, pi = cnt.m1, cnt.p_any
        backlog, beyond = wait_beyond(wait, service_kappa, lb / 2.0 + s.t_full)
        quiet = 1.0 - backlog
        w_alone = quiet * (1.0 - pi)
        s0 = fc0 * quiet + al0 * w_alone
        s1 = fc1 * quiet + al1 * w_alone
        s2 = fc2 * quiet + al2 * w_alone
        s3 = fc3 * quiet + al3 * w_alone
        if pi > 0:
            zf = m / mu
            x1 = mean_pe * m / pi
            x2 = mean_pe**2 * (cnt.m2 + prefill_cv2 * m) / pi
            counts = None
            if atoms:
                # the count's spread at a given L (the steps' own spread is the mixture's)
                at_l = cnt.m2 - m * m - lam * lam * max(lb_sq - lb * lb, 0.0)
                counts = count_given_any(lam * zf, max(at_l / m, 1.0), *under_way(t, mix_v, mix_r))
            company = company_tokens(replica, x1, x2, counts)
            b0, b1, b2, b3 = _per_step_sums(company, token_s, inv_pe)
            f = quiet * pi
            a0, a1, a2, a3 = f * al0, f * al1, f * al2, f * al3
            s0 += a0 * b0
            s1 += a1 * b0 + a0 * b1
            s2 += a2 * b0 + 2.0 * a1 * b1 + a0 * b2
            s3 += a3 * b0 + 3.0 * a2 * b1 + 3.0 * a1 * b2 + a0 * b3
        rb = lam_t * backlog * mean_pe / s_f  # the backlog's full steps per step
        if backlog > 0:
            s0 += rb
            s1 += rb * full_step
            s2 += rb * full_step**2 * g2
            s3 += rb * full_step**3 * g2**3
        sums = (s0, s1, s2, s3)
        r1, r2 = length_biased(t, sums)
        lb, lb_sq = occupied * r1, occupied * r2
        if atoms:
            mix_v, mix_r = _mix_as_steps(s, first, room, quiet, pi, company, token_s, inv_pe, backlog, rb)
    return Passes(backlog, beyond, m, pi, zf, company, counts, (x1, x2), rb, sums, lb, lb_sq)


def _per_step_sums(company: Company, token_s: float, inv_pe: float) -> Sums:
    """sum_j p_j / (1 + x_j / E[Pe]) (tau x_j)^k, k = 0..3: the company's steps counted once."""
    b0 = b1 = b2 = b3 = 0.0
    for xj, pj in zip(company[0], company[1], strict=True):
        bj = pj / (1.0 + xj * inv_pe)
        y = token_s * xj
        b0 += bj
        by = bj * y
        b1 += by
        by *= y
        b2 += by
        b3 += by * y
    return b0, b1, b2, b3


def _mix_as_steps(
    s: State,
    first: FirstMix,
    room: FloatArray,
    quiet: float,
    pi: float,
    company: Company,
    token_s: float,
    inv_pe: float,
    backlog: float,
    rb: float,
) -> tuple[FloatArray, FloatArray]:
    """The pass's mix as (step lengths, rates), for the company's count (`count_given_any`):
    full chunks, last chunks alone, with company (the budget's `room` capping it), the backlog."""
    v0, rates, vl = first.chunk_steps_s, first.chunk_rates, first.chunk_steps_s[:, -1]
    last_r = rates[:, -1]
    parts_v = [v0[:, :-1].ravel(), vl]
    parts_r = [rates[:, :-1].ravel() * quiet, last_r * (quiet * (1.0 - pi))]
    if pi > 0:
        xa = np.array(company[0])
        parts_v.append((vl[:, None] + token_s * np.minimum(xa[None, :], room)).ravel())
        ba = np.array(company[1]) / (1.0 + xa * inv_pe)
        parts_r.append(((quiet * pi) * last_r[:, None] * ba[None, :]).ravel())
    if backlog > 0:
        parts_v.append(np.array([s.t_full + (s.t_dec - s.t_arr)]))
        parts_r.append(np.array([rb]))
    return np.concatenate(parts_v), np.concatenate(parts_r)


def company_tokens(replica: Replica, x1: float, x2: float, counts: Company | None) -> Company:
    """The company's tokens given any, as (values, probabilities): a lognormal of their two
    moments x1, x2 in the probability slices, and, for prompts of alike lengths, their count
    as atoms of whole prompts (`count_given_any`), weighted 1 - CV / ATOM_CV: steps then
    carry 1, 2, 3 prompts, not the fractions a lognormal smooths over (docs/latency.md)."""
    assert x1 > 0.0, f"the company's mean tokens given any, {x1}, > 0"
    alpha = replica.atom_weight
    sigma = math.sqrt(math.log(max(x2 / (x1 * x1), 1.0)))
    if counts is None or alpha <= 0.0:
        return lognormal_slice_list(sigma, x1), SLICE_PROB_LIST
    pe = replica.mean_prefill_tokens
    values = [k * pe for k in counts[0]]
    if alpha >= 1.0:  # alike prompts: the atoms alone (no lognormal to compute)
        return values, counts[1]
    logn = lognormal_slice_list(sigma, x1)
    return values + logn, [alpha * p for p in counts[1]] + [(1.0 - alpha) * p for p in SLICE_PROB_LIST]


# ---- alike prompts: the steps' chain -----------------------------------------------------------


def chain_of_company(
    replica: Replica, s: State, first: FirstMix, passes: Passes, *, token_s: float, with_chain: bool = True
) -> Chain:
    """Alike prompts: their count per step as the steps' chain sets it (`chain_company`);
    without company in the passes D still reads the chain where whole prompts share steps.
    `with_chain` False: the chain out, the passes' count (what `chain_steps` gives where counts
    past CHAIN_STATES matter)."""
    pi, counts = passes.company_any, passes.counts
    out = Chain(pi, counts, 1.0, None)
    if not with_chain or not (replica.atom_weight > 0.0 and ((pi > 0.0 and counts is not None) or s.join_weight > 0.0)):
        return out
    w_last, vl = first.last_rates, first.chunk_steps_s[:, -1]
    wl_sum = float(np.add.reduce(w_last))
    v_bar = float(w_last @ vl) / wl_sum if wl_sum > 0.0 else float(vl[0])
    room = room_beside(
        budget_share_tokens=s.share_full,
        mean_chunks=s.mean_chunks,
        own_share_tokens=s.share_own,
        mean_prefill_tokens=replica.mean_prefill_tokens,
    )
    if pi > 0.0 and counts is not None:
        return chain_company(
            replica, rate=s.lam, decode_step_s=s.t_dec, last_step_s=v_bar, token_s=token_s,
            room_tokens=room, company_any=pi, counts=counts, step_s=s.t_step,
        )  # fmt: skip
    steps = chain_steps(replica, s.lam, s.t_dec, v_bar, token_s, room)
    return out if steps is None else Chain(pi, counts, 1.0, (steps[1], steps[2]))


def chain_company(
    replica: Replica,
    *,
    rate: float,
    decode_step_s: float,
    last_step_s: float,
    token_s: float,
    room_tokens: float,
    company_any: float,
    counts: Company,
    step_s: float,
) -> Chain:
    """The company of alike prompts from the chain of steps (`arrivals.steps_by_count`): a
    step with j prompts lasts the mean last chunk's step v_bar (`last_step_s`) plus tau per
    further prompt's token (the budget's room capping them), a decode-only step t, and the next
    step admits what arrived during it (dispersion c_a^2). A prompt's company is its step's
    count less itself, seen per prompt: P(K = k) ~ (k + 1) pi_{k+1}. The passes' count over the
    step under way stops short of the chain's tail: constant 1,155-token prompts, H200, budget
    8192, 85%: steps with 1, 2, 3, 4 prompts 26.1%, 11.5%, 4.8%, 2.3% of what decoders see in
    the simulator, the chain 25.8%, 11.0%, 4.8%, 2.2% over its steps, the passes' count
    (Poisson-like) 29.3%, 11.7%, 4.5%, 1.8%. Where the room holds under two whole prompts
    the step's count is not the next step's (a split group's rest rides ahead: `mix_steps`),
    so the chain's weight fades in from one prompt's room to two (room / E[Pe] - 1), the
    passes' count (pi, `counts` given any) taking the rest.

    The chain also says how many steps there are: its mean step E_pi[L] (prompts per step
    lam E_pi[L]), where the mix counts lam t_step prompts per step. t_step (`step_s`, the
    closed form's) runs long where prompts share steps (docs/latency/limits.md, "What still misses",
    item 4: H200, budget 8192, 85%: 41.1 ms; the chain 38.2, the simulator's decoders 38.3),
    and the mix's prompt-bearing steps, scaled by E_pi[L] / t_step, are then the chain's pi_j:
    the share of steps with prompts 0.480 against the simulator's 0.488 (0.536 unscaled), which
    puts ITL p50 on the right side of the jump between decode-only and mixed steps (+61.6% ->
    +4.2%). Returns P(any), the counts given any, that scale (1 where the chain is out, blended
    by its weight) and the chain's step lengths and stationary vector (None where it is out:
    the delay chain)."""
    pi = company_any
    out = Chain(pi, counts, 1.0, None)
    beta = room_for_more(room_tokens, replica.mean_prefill_tokens)
    steps = (
        chain_steps(replica, rate, decode_step_s, last_step_s, token_s, room_tokens) if beta > 0.0 else None
    )
    if steps is None:
        return out
    j, lengths, dist = steps
    per_prompt = j[1:] * dist[1:]  # company k = j - 1 = 0, 1, ...
    total = float(np.add.reduce(per_prompt))
    if not (total > 0.0 and step_s > 0.0 and math.isfinite(step_s)):
        return out
    per_prompt /= total
    pi_new = beta * (1.0 - float(per_prompt[0])) + (1.0 - beta) * pi
    if not pi_new > 0.0:
        return out
    ratio = beta * float(dist @ lengths) / step_s + (1.0 - beta)
    tail = per_prompt[1:]
    top = int(np.flatnonzero(tail > CHAIN_NEGLIGIBLE * float(tail.max()))[-1]) + 1 if tail.size else 0
    ks = j[1 : top + 1].tolist()
    ps = (tail[:top] * (beta / pi_new)).tolist()
    if beta < 1.0:  # the passes' count takes the rest
        old_w = (1.0 - beta) * pi / pi_new
        ks += counts[0]
        ps += [old_w * p for p in counts[1]]
    return Chain(pi_new, (ks, ps), ratio, (lengths, dist))


def chain_steps(
    replica: Replica,
    rate: float,
    decode_step_s: float,
    last_step_s: float,
    token_s: float,
    room_tokens: float,
) -> tuple[FloatArray, FloatArray, FloatArray] | None:
    """The steps' chain of alike prompts (`arrivals.steps_by_count`): the prompts a step
    admits j, its length (t without prompts, v_bar plus tau per further prompt's token up to
    the room) and the stationary pi_j; None where counts past CHAIN_STATES matter. Its states:
    past the counts whose step still grows (the room's prompts; then L is flat and the last
    state's lumped counts change nothing after them), and the count's reach: its mean and
    spread at the longest step, and the negative binomial's geometric tail ((1 - 1/z)^k)."""
    pe = replica.mean_prefill_tokens
    z = replica.count_dispersion
    mu_top = rate * (last_step_s + token_s * room_tokens)
    grows = math.ceil(room_tokens / pe) + 2
    reach = mu_top + CHAIN_REACH_SDS * math.sqrt(z * mu_top) + CHAIN_REACH_EXTRA
    if z > 1.0 + POISSON_DISPERSION_TOL:
        reach += math.log(CHAIN_TAIL) / math.log1p(-1.0 / z)
    size = min(CHAIN_STATES, max(COUNT_ATOMS + 2, grows, math.ceil(reach)))
    j = np.arange(size, dtype=np.float64)
    lengths = np.minimum((j - 1.0) * pe, room_tokens)
    lengths *= token_s
    lengths += last_step_s
    lengths[0] = decode_step_s
    dist = steps_by_count(rate, lengths, z)
    if dist[-1] > CHAIN_FOLDED:  # counts past CHAIN_STATES matter: the passes' count stays
        return None
    return j, lengths, dist
