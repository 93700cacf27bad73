"""TTFT (docs/latency/ttft.md): a prompt's own time, its wait and its company. This module
holds the parts of TTFT that are pure arithmetic on what the engine gathers:

* the company's cost given any, in the probability slices (`company_slices`, `company_top_s`):
  a lognormal conditioned below the step's room, or alike prompts' whole ones clipped at it;
* the bound on TTFT p99 the capacity search reads without the mixture's quantiles
  (`ttft_p99_bound_s`, `bound_past_waits`).

* the steps topped up by a backlog (`full_time_s`), the company's token cost (`token_cost_s`,
  `company_cap_s`), a prompt's own time (`own_ttft_s`);
* the colocated mixture (`queued_share`, `ttft_mixture`, `ttft_quantiles`) and a
  disaggregated prefill pool's TTFT (`prefill_pool_ttft`).

D, the wait before a prompt's own steps, is `delay.py`'s. The engine gathers the inputs and
keeps the results on the state."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from planner.costmodel.steptime import batch_time_s
from planner.latency.invariants import check_probability, check_time
from planner.latency.itl import LEVELS
from planner.latency.kv_full import KvFull, with_kv_full
from planner.latency.quantiles import response_quantiles, response_quantiles_phases
from planner.latency.queueing import NO_WAIT, Phases, Wait, phases_mean_s
from planner.latency.replica import Replica
from planner.latency.results import State, Steps, TtftMixture
from planner.latency.seats import SeatWait, with_seat_wait
from planner.latency.slices import (
    lognormal_slice_list,
    lognormal_slice_list_below,
    lognormal_top_slice,
    lognormal_top_slice_below,
)
from planner.latency.steady import row_sums

# 1 / (1 - 0.99): the p99 level's tail mass, inverted (P(TTFT > v) <= 1% where mass e^{-y/m}
# reaches it: y = m ln(TAIL_INVERSE mass)).
TAIL_INVERSE = 100.0
# Below this chance of queueing beyond the next step, TTFT ignores it (a tolerance: `queued_share`).
QUEUED_MIN = 1e-6

FloatArray = npt.NDArray[np.float64]


def bound_past_waits(*, top_s: float, queued_s: float, slowest_phase_s: float, waiting_mass: float) -> float:
    """p99 of TTFT is at most the largest unwaiting time `top_s`, or the largest waiting one
    `queued_s` plus y: P(TTFT > queued + y) <= mass e^{-y / m_max} (the waiting probability
    `waiting_mass`, its slowest phase's mean m_max), at most 1% at y = m_max ln(100 mass).
    Infinite with m_max (the quantiles read inf there too)."""
    check_time("slowest_phase_s", slowest_phase_s)
    if not math.isfinite(slowest_phase_s):
        return math.inf
    scaled = TAIL_INVERSE * waiting_mass
    y = slowest_phase_s * math.log(scaled) if scaled > 1.0 else 0.0
    return max(top_s, queued_s + y)


def ttft_p99_bound_s(mixture: TtftMixture) -> float:
    """A bound TTFT p99 never exceeds, from its mixture without its quantiles: beyond the
    largest time that does not wait only the waiting points reach, P(TTFT > v_q + y) <= M
    e^{-y / m_max} (`bound_past_waits`), M the waiting mass: q sum_k a_k where every queued
    point waits the same phases, sum_i p_i sum_k w_ik a_k where each waits its own (the KV-full
    branch's 2-D `waiting`)."""
    values = mixture.values
    if mixture.waiting is None:
        return float(values.max())
    if mixture.waiting.ndim == 2:
        waits = mixture.waiting @ np.array([a for a, _ in mixture.phases])
        some = waits > 0.0
        top = float(values[~some].max()) if not some.all() else 0.0
        queued = float(values[some].max())
        slowest = max(m for a_k, m in mixture.phases if a_k > 0)
        return bound_past_waits(
            top_s=top, queued_s=queued, slowest_phase_s=slowest, waiting_mass=float(mixture.probs @ waits)
        )
    phases = [(a, m) for a, m in mixture.phases if a > 0 and m > 0]
    top = float(values[: mixture.unqueued].max()) if mixture.unqueued else 0.0
    queued = float(values[mixture.unqueued :].max())
    if not phases:
        return max(top, queued)
    check_probability("mixture.queued", mixture.queued)
    return bound_past_waits(
        top_s=top, queued_s=queued, slowest_phase_s=max(m for _, m in phases),
        waiting_mass=mixture.queued * sum(a for a, _ in phases),
    )  # fmt: skip


def company_slices(*, log_sd: float, mean_cost_s: float, cap_s: float, atom_weight: float) -> list[float]:
    """The company's cost given any, in the probability slices, for a prompt not queued beyond
    the next step: a company too large for that step is what queues a prompt, so its lognormal
    is conditioned to at most `cap_s` (`lognormal_slice_list_below`); alike prompts' company is
    whole prompts, of which a prompt not queued has at most what fits, so there the slices are
    clipped at `cap_s` instead (`atom_weight`, in [0, 1], blends the two)."""
    w = atom_weight
    below = lognormal_slice_list_below(log_sd, mean_cost_s, cap_s) if w < 1.0 else []
    if w <= 0.0:
        return below
    clipped = [min(x, cap_s) for x in lognormal_slice_list(log_sd, mean_cost_s)]
    if w >= 1.0:
        return clipped
    return [w * c + (1.0 - w) * b for c, b in zip(clipped, below, strict=True)]


def company_top_s(*, log_sd: float, mean_cost_s: float, cap_s: float, atom_weight: float) -> float:
    """`company_slices(...)[-1]` alone, the same arithmetic."""
    w = atom_weight
    below = lognormal_top_slice_below(log_sd, mean_cost_s, cap_s) if w < 1.0 else 0.0
    if w <= 0.0:
        return below
    clipped = min(lognormal_top_slice(log_sd, mean_cost_s), cap_s)
    if w >= 1.0:
        return clipped
    return w * clipped + (1.0 - w) * below


def full_time_s(replica: Replica, state: State) -> FloatArray:
    """Step times of the chunk steps when other prompts wait: the step is topped up with the
    waiting prompts' tokens, on average E[Pe] / (1 - rho) of them (the queue length given
    that it is non-empty, M/M/1), up to the whole budget; those tokens are pieces of the
    FIFO stream, with its attention and prefix per token (`steady.stream_step_s`)."""
    s, r = state, replica
    s_f = max(s.share_full, 1.0)
    extra = r.mean_prefill_tokens / max(1.0 - s.rho, 1e-12)
    c = s.chunk_tokens
    o = s.chunk_offset
    e = np.minimum(c + extra, s_f) - c  # the stream's tokens beside the prompt's chunk
    a_ctx = r.prefill_attention_context
    prefix = o + e * (a_ctx / s_f + r.cached_per_computed)  # `steady.stream_step_s` per token
    return batch_time_s(
        r.step_coefficients, s.n_arr, s.n_arr * r.decode_context_tokens, c + e, c * (o + 0.5 * c) + e * a_ctx,
        prefix + c + e, prefix, empty_batches=False,
    )  # fmt: skip


def token_cost_s(idle: State) -> float:
    """The marginal time of one prefill token in a full-budget step of an idle engine (`idle`,
    the rate -> 0 state), (T_full - T_0) / B: fixed per engine, so the company's cost never
    falls with load."""
    return max(idle.t_full - idle.t_arr, 0.0) / max(idle.share_full, 1.0)


def company_cap_s(idle: State) -> float:
    """The most a prompt's company costs when nothing queues beyond the next step: one full
    budget's prefill tokens at `token_cost_s` each (an idle engine's budget: fixed)."""
    return token_cost_s(idle) * max(idle.share_full, 1.0)


def own_ttft_s(state: State, *, ttft_extra_s: FloatArray | None) -> FloatArray:
    """Each prompt's own part of TTFT when it does not queue: its service, plus the time every
    TTFT includes beyond the engine's (`ttft_extra_s`: the front end, or a KV transfer)."""
    return state.own_service if ttft_extra_s is None else state.own_service + ttft_extra_s


def queued_share(steps: Steps, *, chain_push: float | None, chain_weight: float) -> float:
    """q, the chance a prompt queues beyond the next step (`Steps.backlog`); where D is read over
    the steps' chain (`delay.delay_chain`), its pushed prompts are the queued, in its weight
    (`delay.chain_delay_weight`). Below QUEUED_MIN: 0."""
    q = steps.backlog
    if chain_push is not None:
        q = chain_weight * chain_push + (1.0 - chain_weight) * q
    return q if q >= QUEUED_MIN else 0.0


def ttft_mixture(
    replica: Replica,
    state: State,
    steps: Steps,
    *,
    delay: tuple[FloatArray, FloatArray],
    queued: float,
    own_s: FloatArray,
    full_time: FloatArray | None,
    kv_full: KvFull,
    seat: SeatWait,
) -> TtftMixture:
    """TTFT's distribution at a colocated state before its quantiles. Unless it queues beyond
    the next step (probability `queued`, `queued_share`), a prompt waits D (`delay`: values and
    probabilities, `delay.delay_values`) and is prefilled alone (`own_s`, `own_ttft_s`). Queued,
    it waits the mean step under way, one full-budget step, and the rest of the GI/G/1 queue's
    wait beyond those (`Steps.beyond`, exponential phases), and its own steps are full-budget
    steps (`full_time`, `full_time_s`: given where `queued` > 0). Then the KV-full and
    seat-wait branches (`kv_full.with_kv_full`, `seats.with_seat_wait`)."""
    s, st, q, own = state, steps, queued, own_s
    values_d, dprob = delay
    probs_i = replica.prompt_probs
    size = own.size * values_d.size
    n_all = size + own.size if q > 0 else size
    values = np.empty(n_all)
    probs = np.empty(n_all)
    np.add(own[:, None], values_d[None, :], out=values[:size].reshape(own.size, values_d.size))
    np.multiply(probs_i[:, None], ((1.0 - q) * dprob)[None, :], out=probs[:size].reshape(own.size, values_d.size))
    phases: Phases = st.beyond if q > 0 else ()
    waiting = None
    if q > 0:
        assert full_time is not None, "full_time given where prompts queue"
        full = row_sums(s.chunk_weight * full_time)
        values[size:] = full + (own - s.own_service) + (st.residual + s.t_full)
        probs[size:] = q * probs_i
        waiting = np.zeros(n_all)
        waiting[size:] = 1.0
    shown = Wait(q, phases_mean_s(phases) + s.t_full) if q > 0 else NO_WAIT
    if kv_full.probability > 0.0:
        values, probs, phases, waiting = with_kv_full(
            values=values, probs=probs, phases=phases, waiting=waiting, unqueued=size, kv_full=kv_full
        )
    if seat.probability > 0.0:
        values, probs, phases, waiting = with_seat_wait(values, probs, phases, waiting, seat)
    return TtftMixture(values, probs, phases, waiting, size, q, shown)


def ttft_quantiles(mixture: TtftMixture) -> tuple[FloatArray, Wait]:
    """TTFT p50 and p99 (`itl.LEVELS`) of a colocated state's mixture, and the wait it shows."""
    got = response_quantiles_phases(mixture.values, mixture.probs, mixture.phases, LEVELS, mixture.waiting)
    return got, mixture.shown


def prefill_pool_ttft(
    replica: Replica,
    state: State,
    wait: Wait,
    *,
    full_time: FloatArray | None,
    ttft_extra_s: FloatArray | None,
    seat: SeatWait,
) -> FloatArray:
    """TTFT p50 and p99 of a disaggregated deployment's prefill pool, modelled as a continuous
    server (no step under way, no company): the GI/G/1 wait, then the prompt's own steps topped
    up by the queue with probability rho (`full_time`, `full_time_s`: given where rho > 0),
    then the KV transfer (in `ttft_extra_s`), and the seat wait's branch."""
    s = state
    rc = min(max(s.rho, 0.0), 1.0)
    service = s.own_service
    if rc > 0:
        assert full_time is not None, "full_time given where rho > 0"
        full = row_sums(s.chunk_weight * full_time)
        service = service + rc * (full - service)
    if ttft_extra_s is not None:
        service = service + ttft_extra_s
    if seat.probability > 0.0:
        m = wait.mean_if_waiting_s
        queue: Phases = ((wait.prob, m),) if wait.prob > 0.0 and m > 0.0 else ()
        values, probs, phases, waiting = with_seat_wait(service, replica.prompt_probs, queue, None, seat)
        return response_quantiles_phases(values, probs, phases, LEVELS, waiting)
    return response_quantiles(service, replica.prompt_probs, wait, LEVELS)
