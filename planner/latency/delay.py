"""D, what a prompt not queued beyond the next step waits before its own steps
(docs/latency/ttft.md): the rest of the step under way and the company that arrived during it.

* `delay_classes`: the step under way's classes (decode-only, mixed) and each one's company;
* `company_atoms`: alike prompts' company as whole prompts;
* `delay_chain`: D over the steps' chain where whole prompts share steps;
* `delay_values`: D's points and probabilities, the classes' and the chain's blended by
  `chain_delay_weight`; `delay_top_s` its largest value without the lists.

Pure functions of the replica, the state and its steps; the state's stages call them once each
(`at_state.StateResults.delay_classes`, `.delay`)."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from planner.latency.arrivals import CountMoments, beside, company_count
from planner.latency.company import count_given_any, couple_by_rank, others_in_step, room_for_more
from planner.latency.replica import Replica, room_after_tokens
from planner.latency.results import DelayClass, DelayClasses, State, Steps
from planner.latency.slices import (
    SLICE_PROB_LIST,
    SLICE_PROBS,
    UNIFORM_SLICE_LIST,
    UNIFORM_SLICE_MEANS,
    lognormal_slice_list,
    lognormal_top_slice,
)
from planner.latency.steps import CHAIN_STATES
from planner.latency.ttft import company_slices, company_top_s

FloatArray = npt.NDArray[np.float64]

# c_a^2 from which D's chain part fades out, and where it is gone (`chain_delay_weight`; a
# modelling choice validated at the trace's c_a^2 1.19, docs/latency/ttft.md).
CHAIN_DELAY_CA2 = (1.5, 3.0)
# `delay_chain`'s company counts end this many sds (and counts) past the mean (a tolerance).
COUNT_REACH_SDS = 12.0
# Steps under way seen less often than this are left out of `delay_chain`'s D (a tolerance).
DELAY_CHAIN_NEGLIGIBLE = 1e-7

_ZERO = np.zeros(1)
_ONE = np.ones(1)


class Delay(NamedTuple):
    """D's points in ascending order and their probabilities."""

    values: FloatArray
    probs: FloatArray


class DelayChain(NamedTuple):
    """D over the steps' chain (`delay_chain`), given the prompt is not pushed to a later step."""

    values: FloatArray
    probs: FloatArray
    pushed: float  # P(pushed past its step): the queued branch's share (`ttft.queued_share`)


NO_DELAY = Delay(_ZERO, _ONE)


def chain_delay_weight(*, join_weight: float, arrival_cv2: float) -> float:
    """How far D is `delay_chain`'s: how far whole prompts share steps (`State.join_weight`),
    fading out as arrivals get burstier, from c_a^2 = CHAIN_DELAY_CA2[0] to [1]. The chain
    weighs the step under way by its length (a time average); bursts do not see time
    averages (docs/latency/bursty.md: at CV^2 4 47% of arrivals find a mixed
    step that fills 24% of the time), so as bursts merge prompts into fewer, longer
    steps its D would fall with burstiness (48-token prompts, MoE, H100: TTFT p99 -0.13% from
    c_a^2 1 to 3.3). Validated at the trace's c_a^2 1.19 (docs/accuracy.md); the classes'
    two lognormals (their company a gamma renewal count) take the bursts."""
    lo, hi = CHAIN_DELAY_CA2
    return join_weight * min(max((hi - arrival_cv2) / (hi - lo), 0.0), 1.0)


def delay_values(
    replica: Replica,
    *,
    classes: DelayClasses,
    chain: DelayChain | None,
    chain_weight: float,
    company_cap_s: float,
) -> Delay:
    """What a prompt waits before its own steps when nothing queues beyond the next step,
    D = U L + c X(L): the rest of the step under way (length-biased L, U uniform) and the
    prompts that arrived during it, X(L) tokens, each costing c (`ttft.token_cost_s`). Idle
    (1 - P(busy)): 0. Per class of the step under way, decode-only (L = t_dec, length-biased
    share b) or mixed (L over the mixed steps): U L a lognormal in probability slices with
    U L's relative spread, E[(U L)^2] / E[U L]^2 = (4/3) E[L^2] / E[L]^2; the company
    (`delay_classes`: the arrivals before and after it, a gamma renewal process's count,
    `arrivals.company_count`) none with probability 1 - pi_L and otherwise X given any, a
    lognormal of its two moments (the count's and the sizes' spread, which makes the tail),
    in vLLM's FIFO order: X = B + theta A (`arrivals.beside`: the prompts after it fill only
    the room beside its last chunk), plus a step's decodes t_arr where those before it
    overflow that room; its slices paired with U L's (a long step under way brings more
    company). The classes are those of a prompt not queued beyond the next step, so not
    arrived during a backlog: the backlog's full steps leave the mixed class (their time
    share, the arrivals' backlog read as a time average by rho / sigma) and its moments, and
    the shares are renormalized (docs/latency/ttft.md). The engine computes `classes` (`delay_classes`) and, where `chain_weight` > 0, the chain
    (`delay_chain`) first; a busy engine only (an idle one waits 0: `NO_DELAY`)."""
    w_chain = chain_weight
    if chain is not None and w_chain >= 1.0:
        return Delay(chain.values, chain.probs)
    # Not queued beyond the next step, the company fits in that step (more is what the
    # queued branch counts): its cost is at most one full budget's prefill tokens, c B =
    # T_full - T_0 of an idle engine (fixed per engine like c, so a slice still never falls
    # as load or burstiness raise it), its lognormal conditioned below that (`ttft.company_slices`).
    cap = company_cap_s
    values = [0.0]
    probs = [classes.idle_share]
    for cl in classes.classes:
        half = (
            [v * cl.scale for v in UNIFORM_SLICE_LIST]
            if cl.sigma is None
            else lognormal_slice_list(cl.sigma, cl.scale)
        )
        values += half
        w_none, w_some = cl.share * (1.0 - cl.pi), cl.share * cl.pi
        probs += [p * w_none for p in SLICE_PROB_LIST]
        if cl.x_atoms is not None:  # alike prompts: whole ones, coupled by rank
            pair_v, pair_p = couple_by_rank(half, SLICE_PROB_LIST, *cl.x_atoms)
            values += [h + min(x, cap) for h, x in zip(*pair_v, strict=True)]
            probs += [p * w_some for p in pair_p]
            continue
        if cl.pi > 0.0:
            xs = company_slices(
                log_sd=cl.x_sigma, mean_cost_s=cl.x_scale, cap_s=cap, atom_weight=replica.atom_weight
            )
            values += [h + x for h, x in zip(half, xs, strict=True)]
        else:
            values += half
        probs += [p * w_some for p in SLICE_PROB_LIST]
    # In ascending order: TTFT's mixture adds them to each prompt's own time, so its rows
    # come sorted and the quantiles' sort of ~1,000 points merges runs (about a third cheaper).
    v = np.array(values)
    pv = np.array(probs)
    if chain is not None and w_chain > 0.0:  # in part (`chain_delay_weight`): the two blended
        v = np.concatenate((chain.values, v))
        pv = np.concatenate((chain.probs * w_chain, pv * (1.0 - w_chain)))
    order = v.argsort(kind="stable")
    return Delay(v[order], pv[order])


def delay_chain(replica: Replica, state: State, steps: Steps, *, idle_share: float) -> DelayChain | None:
    """D where whole prompts share steps (`State.join_weight` > 0), over the steps' chain
    itself (`steps.chain_company`: lengths L_j, stationary pi_j) rather than the classes' two
    lognormals paired by rank: the step under way is the chain's state j, length-biased
    (pi_j L_j), U uniform in its slices, and the K others that arrived during it (the gamma
    renewal count around an arrival at L_j, `others_in_step`) each add a joiner's time Jc
    up to the room's R whole prompts (the last in part: the step a full budget). FIFO puts
    this prompt at a uniform place among the K + 1: past the room's floor(R) + 1 places
    (chance max(K - floor(R), 0) / (K + 1)) it is pushed to a later step, the queued branch
    (`DelayChain.pushed`, `ttft.queued_share`); D is given it is not. Given L_j, K and U are
    independent (Poisson), so D's points are their products, not their ranks' pairing,
    whose perfect correlation had spread D both ways: constant 1,155-token prompts, H100,
    budget 8192, 90% load, D's median 25 ms against the simulator's 33 (TTFT minus the
    prompt's own step), its 99th percentile 196 against 210. Busy share 1 - idle. None
    where the chain is out."""
    s, st, idle = state, steps, idle_share
    if not (s.join_weight > 0.0 and st.chain is not None):
        return None
    lengths, dist = st.chain
    seen = dist * lengths
    total = float(np.add.reduce(seen))
    if not total > 0.0:
        return None
    seen *= (1.0 - idle) / total
    keep = seen > DELAY_CHAIN_NEGLIGIBLE
    ls, ws = lengths[keep], seen[keep]
    ws *= (1.0 - idle) / float(np.add.reduce(ws))
    room = room_after_tokens(replica, s) / replica.mean_prefill_tokens  # whole prompts' room beside this one
    lens = ls.tolist()
    # one count per distinct length (the chain's states past the room share the full step's)
    counts = {el: company_count(replica.gap_shape, s.lam, el, el * el) for el in lens}
    top = counts[lens[-1]]  # the longest step's count reaches furthest
    reach = top.m1 + COUNT_REACH_SDS * math.sqrt(max(top.m2 - top.m1 * top.m1, 0.0)) + COUNT_REACH_SDS
    k_max = max(1, min(math.ceil(reach), CHAIN_STATES * 4))
    ks = np.arange(k_max + 1, dtype=np.float64)
    pushed = np.maximum(ks - math.floor(room), 0.0) / (ks + 1.0)
    rows = {el: others_in_step(cm, k_max, replica.gap_shape == 1.0) for el, cm in counts.items()}
    pk = np.array([rows[el] for el in lens])  # (J, K)
    chain_push = float(ws @ (pk @ pushed))
    # not pushed: the company is min(K, R); counts past ceil(R) cost the same, lumped there
    stay = pk * (1.0 - pushed)
    fit = min(math.ceil(room), k_max)
    if fit < k_max:
        stay[:, fit] += stay[:, fit + 1 :].sum(axis=1)
        stay = stay[:, : fit + 1]
    stay *= 1.0 / max(1.0 - chain_push / max(1.0 - idle, 1e-300), 1e-300)  # given not pushed
    vals = (
        ls[:, None, None] * UNIFORM_SLICE_MEANS[None, :, None]
        + (s.join_cost * np.minimum(ks[: fit + 1], room))[None, None, :]
    )
    prob = ws[:, None, None] * np.asarray(SLICE_PROB_LIST)[None, :, None] * stay[:, None, :]
    v = np.concatenate((_ZERO, vals.ravel()))
    p = np.concatenate(([idle], prob.ravel()))
    order = v.argsort(kind="stable")
    return DelayChain(v[order], p[order], chain_push)


def delay_top_s(replica: Replica, *, classes: DelayClasses, company_cap_s: float) -> float:
    """`delay_values`' largest value without its lists where the chain takes no part (the
    engine reads the chain's points itself): every slice list rises, so it is a class's top
    slice plus its company's top slice (capped), the same arithmetic. A busy engine only."""
    cap = company_cap_s
    top = 0.0
    for cl in classes.classes:
        h = (
            UNIFORM_SLICE_LIST[-1] * cl.scale
            if cl.sigma is None
            else lognormal_top_slice(cl.sigma, cl.scale)
        )
        if cl.x_atoms is not None:
            h += min(cl.x_atoms[0][-1], cap)
        elif cl.pi > 0.0:
            h += company_top_s(log_sd=cl.x_sigma, mean_cost_s=cl.x_scale, cap_s=cap, atom_weight=replica.atom_weight)
        top = max(top, h)
    return top


def delay_classes(replica: Replica, state: State, steps: Steps, *, token_cost_s: float) -> DelayClasses:
    """`delay_values`' idle share and its classes of the step under way (busy engines): U L's
    slices (log-sd, None for the decode-only class's uniform; mean), the class's share, the
    chance pi of company, and the company's lognormal given any (log-sd, mean cost)."""
    s, st = state, steps
    c = token_cost_s
    t = s.t_dec
    total, s1, s2, s3 = st.sums
    scale = 1.0 / max(1.0, total)
    w0 = max(0.0, 1.0 - total)
    mean_step = w0 * t + scale * s1
    b_dec = w0 * t / mean_step if mean_step > 0 else 1.0  # length-biased share of decode-only steps
    busy = st.busy
    idle = 1.0 - busy
    raw: list[tuple[float | None, float, float, float, float]] = []  # sigma, E[U L], E[L], E[L^2], share
    if s1 <= 0 or b_dec >= 1.0:
        raw.append((None, 0.5 * t, t, t * t, busy))
    else:
        l1, l2 = s2 / s1, s3 / s1
        sigma_m = math.sqrt(math.log(max(4.0 * l2 / (3.0 * l1 * l1), 1.0)))
        raw.append((None, 0.5 * t, t, t * t, busy * b_dec))
        raw.append((sigma_m, 0.5 * l1, l1, l2, busy * (1.0 - b_dec)))
    out = []
    pe, pe2 = replica.mean_prefill_tokens, replica.mean_prefill_tokens * replica.mean_prefill_tokens
    cv2 = replica.stats.prefill_cv2
    room = room_after_tokens(replica, s)
    whole = replica.atom_weight * room_for_more(room, pe)  # `company_atoms`' weight
    for sigma, mean_ul, el, el2, w in raw:
        cnt = company_count(replica.gap_shape, s.lam, el, el2)
        pi = cnt.p_any
        x_sigma = x_scale = 0.0
        atoms = None
        if pi > 0.0:
            th, over = beside(cnt, room, pe, cv2)
            x1 = pe * cnt.one * (1.0 + th) / pi
            x2 = pe2 * ((1.0 + th * th) * (cnt.one_sq + cv2 * cnt.one) + 2.0 * th * cnt.cross) / pi
            if x1 > 0.0:
                # a step's decodes again where the prompts before it push its end a step later
                x_sigma, x_scale = (
                    math.sqrt(math.log(max(x2 / (x1 * x1), 1.0))),
                    c * x1 + s.t_arr * over / pi,
                )
                if whole > 0.0:
                    atoms = company_atoms(
                        rate_per_s=s.lam, count=cnt, spread=sigma is not None, step_s=el,
                        step_sq_s2=el2, log_sd=x_sigma, mean_cost_s=x_scale, whole=whole,
                    )  # fmt: skip
        out.append(DelayClass(sigma, mean_ul, w, pi, x_sigma, x_scale, atoms))
    return DelayClasses(idle, out)


def company_atoms(
    *,
    rate_per_s: float,
    count: CountMoments,
    spread: bool,
    step_s: float,
    step_sq_s2: float,
    log_sd: float,
    mean_cost_s: float,
    whole: float,
) -> tuple[list[float], list[float]]:
    """A class's company cost given any, for prompts of alike lengths whose company fits
    beside them (weight `whole`: the atoms' weight `atom_weight` times the room's fade-in,
    room / E[Pe] - 1, as the steps' chain has it): whole prompts, the count K given any
    (`count_given_any` over the class's step under way, L's lognormal slices for the
    mixed class, at the count's own mean and spread at a given L), each costing the class's
    mean cost per prompt, x_scale / E[K | any]; the rest (1 - whole) the lognormal of the
    cost's two moments. Sorted by cost. The lognormal smears the atoms: constant 1,155-token
    prompts, H100, budget 8192, 60% load, the mixed class's top 1% averaged 5.7 prompts'
    cost where the count's 99th percentile is 4 (TTFT p99 +10.6% against the simulator, now
    +2.7%; docs/latency/ttft.md)."""
    lam, cnt, el, el2, x_sigma, x_scale = rate_per_s, count, step_s, step_sq_s2, log_sd, mean_cost_s
    m1 = cnt.m1
    # the count's spread at a given L: its variance less the steps' own (as `steps.step_mix` has it)
    at_l = cnt.m2 - m1 * m1 - lam * lam * max(el2 - el * el, 0.0)
    rate = m1 / el  # lam times the count's burst factor at the mean step
    if spread:
        lengths = np.array(lognormal_slice_list(math.sqrt(math.log(max(el2 / (el * el), 1.0))), el))
        weights = SLICE_PROBS
    else:
        lengths, weights = np.array([el]), _ONE
    counts, probs = count_given_any(rate, max(at_l / m1, 1.0), lengths, weights)
    per = x_scale / math.fsum(k * p for k, p in zip(counts, probs, strict=True))
    values = [k * per for k in counts]
    if whole >= 1.0:
        return values, probs
    logn = lognormal_slice_list(x_sigma, x_scale)
    pairs = sorted(
        zip(
            values + logn,
            [whole * p for p in probs] + [(1.0 - whole) * p for p in SLICE_PROB_LIST],
            strict=True,
        )
    )
    return [v for v, _ in pairs], [p for _, p in pairs]
