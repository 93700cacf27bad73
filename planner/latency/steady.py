"""The steady state at one concurrency (docs/latency/steady-state.md, "A prompt's engine time"): Little's fixed
point n = lam d t_step, t_step = t_dec / (1 - lam E[Delta]), solved for the rate lam at a given
mean decode count n (`build_state`), and the prompt's engine time E[Delta] it rests on.

With n decoding sequences a decoder shares its steps with z others (z = 1 + (c_a^2 - 1) n /
(1 + n): bursts crowd it), an arriving prompt sees n_arr = n + z - 1 decodes and gets the budget
they leave, s_f = B - n_arr, cut into chunks of s_own (the long-prefill threshold). Its extra
engine time over the decode steps it rides on is A (`own_delta`: its own chunks, light load) or F
(`fluid`: its tokens' share of full-budget steps, when prompts queue), blended by the chance an
arrival finds the prefill queue busy (`merge_weight`); where whole prompts of alike lengths
share steps, a joiner pays Jc instead (`join_cost_s`, `shared_rate`). Pure functions of a
`Replica` and keyword inputs; the engine caches the states.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from planner.costmodel.steptime import batch_time_s, step_time_s
from planner.latency.arrivals import join_share
from planner.latency.company import room_for_more
from planner.latency.queueing import gamma_wait_probability, gamma_wait_probability_slope
from planner.latency.replica import CHUNK_GROUPS, CHUNK_ROUNDING, FloatArray, Replica, room_beside
from planner.latency.results import State

# Newton / bisection steps of `rate_with_merging` (a bound: it converges in ~4).
RATE_NEWTON_STEPS = 60
# Secant / bisection steps of `shared_rate` (a bound: it converges in ~6).
SHARED_RATE_STEPS = 60
# The root-findings of this module stop at this relative step (tolerances, not modelling).
NEWTON_RTOL = 1e-14
SECANT_RTOL = 1e-13

_ONE0 = np.array(1.0)  # 0-d: numpy takes these beside arrays faster than Python floats
_ROUNDING0 = np.array(CHUNK_ROUNDING)


class Chunks(NamedTuple):
    """Each prompt's chunks at one share (`chunks`): representatives, shape (I, columns)."""

    tokens: FloatArray
    offsets: FloatArray
    weights: FloatArray  # the chunks each representative stands for
    counts: FloatArray  # (I,) chunks per prompt


def burst_factor(replica: Replica, n: float) -> float:
    """z: the decodes a decoder shares its steps with besides itself, less one, on average."""
    return 1.0 + (replica.arrival_cv2 - 1.0) * n / (1.0 + n)


def build_state(replica: Replica, *, decodes: float, rate_per_s: float | None, unshared: bool) -> State:
    """The steady state at mean decode count `decodes` (decode roles: the rate follows) or at
    `rate_per_s` (prefill-only). `unshared`: whole prompts are not let share steps (the
    stability boundary's form, `stability.shared_boundary`)."""
    assert math.isfinite(decodes) and decodes >= 0.0, f"decodes {decodes} finite and >= 0"
    n = decodes
    coef = replica.step_coefficients
    context = replica.decode_context_tokens
    if replica.has_decode:
        z = burst_factor(replica, n)
        n_dec = n + z
        n_arr = max(0.0, n + z - 1.0)
        t_dec = step_time_s(coef, 0.0, 0.0, n_dec, n_dec * context)
    else:
        z, n_dec, n_arr, t_dec = 1.0, 0.0, 0.0, 0.0
    if not replica.has_prefill:
        return _decode_only_state(replica, n, z, n_dec, n_arr, t_dec)
    ctx = n_arr * context
    t_arr = step_time_s(coef, 0.0, 0.0, n_arr, ctx)
    s_f = replica.budget_tokens - n_arr * replica.decode_budget_tokens
    threshold = replica.chunk_threshold_tokens
    s_own = min(s_f, threshold) if threshold > 0 else s_f
    s_f1 = max(s_f, 1.0)
    t_full = stream_step_s(replica, s_f1, n_arr, ctx)
    q = replica.mean_prefill_tokens * t_full / s_f1
    fluid = replica.mean_prefill_tokens * (t_full - t_arr) / s_f1
    ch = chunks(replica, max(s_own, 1.0))
    tau = step_time_s(coef, ch.tokens, ch.offsets, n_arr, ctx, empty_batches=False)
    own = row_sums(ch.weights * tau)
    probs = replica.prompt_probs
    extra_k = ch.counts * t_arr
    np.subtract(own, extra_k, out=extra_k)
    own_delta = float(extra_k.dot(probs))  # (own - k t_arr) . pw
    mean_k = float(ch.counts.dot(probs))
    has_decode = replica.has_decode
    lam = _rate_at(replica, n, q, own_delta, fluid, t_dec) if has_decode else float(rate_per_s or 0.0)
    rho = lam * q
    busy = lam * (own_delta + merge_weight(replica, rho) * (fluid - own_delta))
    wj = jc = joined = 0.0
    if replica.shares_steps and not unshared and lam > 0.0 and math.isfinite(lam):
        room = room_beside(
            budget_share_tokens=s_f,
            mean_chunks=mean_k,
            own_share_tokens=s_own,
            mean_prefill_tokens=replica.mean_prefill_tokens,
        )
        wj = replica.atom_weight * room_for_more(room, replica.mean_prefill_tokens)
        if wj > 0.0:
            jc = join_cost_s(replica, n_arr, ctx)
            lam, busy, joined = shared_rate(
                replica, decodes=n, rate0=lam, full_service_s=q, own_delta_s=own_delta,
                fluid_s=fluid, decode_step_s=t_dec, join_cost_s=jc, join_weight=wj,
            )  # fmt: skip
            rho = lam * q
    t_step = (t_dec / (1.0 - busy) if busy < 1.0 else math.inf) if replica.has_decode else math.nan
    return State(
        n=n, lam=lam, z=z, n_dec=n_dec, n_arr=n_arr, t_dec=t_dec, t_arr=t_arr,
        share_full=s_f, share_own=s_own, t_full=t_full, rho=rho, busy=busy, t_step=t_step,
        mean_chunks=mean_k, chunk_tokens=ch.tokens, chunk_offset=ch.offsets,
        chunk_weight=ch.weights, chunk_time=tau, own_service=own,
        join_weight=wj, join_cost=jc, joined=joined,
    )  # fmt: skip


def _decode_only_state(
    replica: Replica, n: float, z: float, n_dec: float, n_arr: float, t_dec: float
) -> State:
    """A decode pool's state: decode steps only, lam = n / (d t_dec)."""
    assert replica.decode_steps > 0.0 and t_dec > 0.0, "a decode pool decodes: d > 0, t_dec > 0"
    lam = n / (replica.decode_steps * t_dec)
    e = np.empty((0, 0))
    return State(
        n=n, lam=lam, z=z, n_dec=n_dec, n_arr=n_arr, t_dec=t_dec, t_arr=t_dec,
        share_full=math.nan, share_own=math.nan, t_full=math.nan, rho=0.0, busy=0.0,
        t_step=t_dec, mean_chunks=0.0, chunk_tokens=e, chunk_offset=e,
        chunk_weight=e, chunk_time=e, own_service=np.empty(0),
    )  # fmt: skip


def _rate_at(replica: Replica, n: float, q: float, own_delta: float, fluid: float, t_dec: float) -> float:
    """lam at concurrency n: the quadratic's root with the full-step share rho (Poisson), then
    the gamma gaps' share (`rate_with_merging`). NaN where no root exists."""
    d_t = replica.decode_steps * t_dec
    a2 = n * q * (fluid - own_delta)
    b = d_t + n * own_delta
    disc = b * b + 4.0 * a2 * n
    den = b + math.sqrt(max(disc, 0.0))
    lam = 2.0 * n / den if disc >= 0 and den > 0 else math.nan
    if replica.gap_shape != 1.0 and lam > 0.0 and math.isfinite(lam):
        lam = rate_with_merging(replica, n, q, own_delta, fluid - own_delta, d_t, lam)
    return lam


def join_cost_s(replica: Replica, n_arr: float, ctx: float) -> float:
    """Jc: what a second whole prompt adds to a step that carries one (each attending to
    itself, at the mean prompt and cached prefix), beside n_arr decodes. The first prompt's
    chunk partly hides in the decode step's memory time (A, `own_delta`); a further one
    finds the step compute-bound and pays its whole compute: H100, budget 8192, 1,155-token
    prompts, 90% load, the simulator's steps with 1, 2, 3, 4 prompts are 8.45, 27.83, 46.95,
    66.15 ms over their decodes (19.4 ms a joiner), where the full step's average per prompt
    (F, `fluid`) is 17.8."""
    pe, p0 = replica.mean_prefill_tokens, replica.mean_cached_tokens
    coef = replica.step_coefficients
    pairs = pe * (p0 + 0.5 * pe)
    one = batch_time_s(coef, n_arr, ctx, pe, pairs, p0 + pe, p0, empty_batches=False)
    two = batch_time_s(
        coef, n_arr, ctx, 2.0 * pe, 2.0 * pairs, 2.0 * (p0 + pe), 2.0 * p0, empty_batches=False
    )
    return max(two - one, 0.0)


def shared_cost_s(
    replica: Replica,
    lam: float,
    q: float,
    a: float,
    f: float,
    t_dec: float,
    jc: float,
    wj: float,
    hint: float | None,
) -> tuple[float, float, float]:
    """E[Delta] where whole prompts share steps, at rate lam: (E[Delta], j, P(J = 0)). A
    prompt opens its step (A) or joins one another opened (Jc), E[Delta] = A + j (Jc - A), j
    the steps' chain's share of joiners (`arrivals.join_share`, started from `hint`, its
    P(J = 0) at a nearby rate); blended by wj with the unshared form A + w(rho)(F - A)
    (`merge_weight`)."""
    j, p0 = join_share(lam, t_dec, a, jc, replica.count_dispersion, hint)
    cost = a + j * (jc - a)
    if wj < 1.0:
        cost = wj * cost + (1.0 - wj) * (a + merge_weight(replica, lam * q) * (f - a))
    return cost, j, p0


def shared_rate(
    replica: Replica,
    *,
    decodes: float,
    rate0: float,
    full_service_s: float,
    own_delta_s: float,
    fluid_s: float,
    decode_step_s: float,
    join_cost_s: float,
    join_weight: float,
) -> tuple[float, float, float]:
    """The rate at concurrency n where whole prompts share steps (alike prompts with room
    beside them, weight wj): the root of h(lam) = lam (d t_dec + n E[Delta](lam)) - n
    (Little with t_step = t_dec / (1 - lam E[Delta]); E[Delta] `shared_cost_s`, rising with
    lam), by the secant method from the unshared form's root `rate0`, kept inside a bracket
    (h(0) = -n; h >= 0 where E[Delta] is at its least, min(A, Jc, F)); at most
    SHARED_RATE_STEPS steps. Returns (lam, busy = lam E[Delta], j).

    The unshared form had every prompt that meets a busy prefill queue (GI/M/1's chance)
    pay the full step's average F: constant 1,155-token prompts at budget 8192 (H100, 90%
    load) read E[Delta] 14.3 ms against the simulator's 12.9 (openers 8.45 ms, joiners 19.4,
    j 0.409; `join_share` 0.40, E[Delta] 13.0 ms), and near capacity 1 / (1 - lam E[Delta])
    turned that into 16% more decodes (docs/latency/limits.md, "What still misses", item 4)."""
    n, lam0, q, a, f = decodes, rate0, full_service_s, own_delta_s, fluid_s
    t_dec, jc, wj = decode_step_s, join_cost_s, join_weight
    d_t = replica.decode_steps * t_dec
    least = max(min(a, jc, f), 0.0)
    lo, hi = 0.0, n / (d_t + n * least) if d_t + n * least > 0.0 else lam0

    hint: float | None = None  # this solve's last P(J = 0) (its own: a pure function of n)

    def h(x: float) -> tuple[float, float, float]:
        nonlocal hint
        cost, j, hint = shared_cost_s(replica, x, q, a, f, t_dec, jc, wj, hint)
        return x * (d_t + n * cost) - n, cost, j

    x0 = min(max(lam0, lo), hi)
    v0, cost, j = h(x0)
    if v0 == 0.0:
        return x0, x0 * cost, j
    if v0 < 0.0:
        lo = x0
    else:
        hi = x0
    # the fixed-point step (E[Delta] held at x0's) is near the root: the secant from there
    x = min(max(n / (d_t + n * cost), lo), hi)
    x1, v1 = x0, v0
    v, cost, j = h(x)
    if v < 0.0:
        lo = x
    else:
        hi = x
    if v == 0.0:
        return x, x * cost, j
    for _ in range(SHARED_RATE_STEPS):
        nxt = x - v * (x - x1) / (v - v1) if v != v1 else 0.5 * (lo + hi)
        if not lo < nxt < hi:
            nxt = 0.5 * (lo + hi)
        x1, v1 = x, v
        x = nxt
        v, cost, j = h(x)
        if v < 0.0:
            lo = x
        else:
            hi = x
        if v == 0.0 or abs(x - x1) <= SECANT_RTOL * x or hi - lo <= SECANT_RTOL * hi:
            break
    return x, x * cost, j


def merge_weight(replica: Replica, rho: float) -> float:
    """The share of prompts prefilled in full steps (E[Delta] = A + w (F - A)): those that
    arrive to find the prefill queue busy, GI/M/1's chance of waiting for gamma gaps of shape
    1/c_a^2 (`gamma_wait_probability`: rho itself for Poisson arrivals, more for bursts, which
    land together). A probability: in [0, 1]."""
    r = min(max(rho, 0.0), 1.0)
    shape = replica.gap_shape
    w = gamma_wait_probability(r, shape, r if shape < 1.0 else 0.0)
    # a probability (NaN where the state has no rate: lam(n) has no root there)
    assert not (w < 0.0 or w > 1.0), f"the chance of finding the prefill queue busy: {w}"
    return w


def rate_with_merging(
    replica: Replica, n: float, q: float, a: float, b: float, d_t: float, lam0: float
) -> float:
    """The rate at concurrency n where the full-step share is `merge_weight`, not rho: the
    root of h(lam) = lam (d t_dec + n A) + n lam w(lam q) (F - A) - n (Little's n = lam d
    t_step with t_step = t_dec / (1 - lam E[Delta])), by Newton's method from the Poisson
    form's root lam0 (its quadratic), kept inside a bracket [lo, hi] with h(lo) < 0 <= h(hi)
    (h(0) = -n); at most RATE_NEWTON_STEPS steps. a = A, b = F - A, d_t = d t_dec."""
    shape = replica.gap_shape

    def h(lam: float) -> tuple[float, float]:
        rho = lam * q
        w = merge_weight(replica, rho)
        slope = gamma_wait_probability_slope(rho, shape, w) if rho < 1.0 else 0.0
        return lam * (d_t + n * a) + n * lam * w * b - n, d_t + n * a + n * b * (w + rho * slope)

    lo, hi = 0.0, lam0
    x = lam0
    v, dv = h(x)
    for _ in range(RATE_NEWTON_STEPS):  # an upper end: h(hi) >= 0
        if v >= 0.0:
            break
        lo, hi = hi, 2.0 * hi
        x = hi
        v, dv = h(x)
    else:
        return lam0
    hi = x
    for _ in range(RATE_NEWTON_STEPS):
        step = v / dv if dv > 0.0 else math.inf
        nxt = x - step
        if not lo < nxt < hi:
            nxt = 0.5 * (lo + hi)
        if abs(nxt - x) <= NEWTON_RTOL * x:
            return nxt
        x = nxt
        v, dv = h(x)
        if v < 0.0:
            lo = x
        else:
            hi = x
        if v == 0.0:
            return x
    return x


def stream_step_s(
    replica: Replica, share: FloatArray | float, n_arr: FloatArray | float, ctx: FloatArray | float
) -> Any:
    """A full-budget step while prompts queue: `share` prompt tokens from the FIFO stream of
    waiting prompts beside n_arr decodes. The stream cuts prompts at step boundaries, so a
    step carries the pieces of one or more prompts, each at its own offset; over a uniform
    phase the offsets of a prompt's chunks sum to E[Pe^2] / (2 s) + p0 (1 + Pe / s), so per
    step the chunks' prefix (re-read, `prefix_tokens`) is a_ctx + s E[p0] / E[Pe], their KV
    read that + s, and their attention s a_ctx (docs/latency/steady-state.md, "Full steps"). One chunk of
    s tokens at a_ctx - s/2 has the same attention but half a budget less prefix. Floats give
    a float, arrays an array (`batch_time_s`'s two branches); share >= 1 at every caller."""
    a_ctx = replica.prefill_attention_context
    prefix = share * replica.cached_per_computed
    prefix += a_ctx
    return batch_time_s(
        replica.step_coefficients, n_arr, ctx, share, share * a_ctx, prefix + share, prefix,
        empty_batches=False,
    )  # fmt: skip


def chunks(replica: Replica, share: float) -> Chunks:
    """Each prompt's chunks at `share` (>= 1) tokens per step: k - 1 full chunks then the rest.
    Up to CHUNK_GROUPS full chunks are listed one by one; more are represented by group
    midpoints (exact for step times affine in the chunk index). Only as many columns as the
    longest prompt needs."""
    assert share >= 1.0, f"a chunk share of {share} tokens (>= 1: no zero-token steps)"
    pe = replica.prefill_tokens
    p0 = replica.cached_tokens
    k = pe * (1.0 / share)
    k -= _ROUNDING0
    np.ceil(k, out=k)
    np.maximum(k, _ONE0, out=k)
    m = k - _ONE0
    done = m * share  # tokens in the full chunks
    m_max = math.ceil(replica.longest_prefill_tokens / share - CHUNK_ROUNDING) - 1
    if m_max <= 0:
        return Chunks((pe - done)[:, None], (p0 + done)[:, None], replica.ones_column, k)
    cols = min(m_max, CHUNK_GROUPS)
    g = replica.chunk_group_index[:cols]
    shape = (pe.size, cols + 1)
    toks, offs, wts = np.empty(shape), np.empty(shape), np.empty(shape)
    toks[:, :cols] = share
    np.subtract(pe, done, out=toks[:, cols])
    if cols == 1 and share < math.inf:  # one full chunk at offset 0 share + p0, if 0 < m
        offs[:, 0] = p0
        np.minimum(m, _ONE0, out=wts[:, 0])  # 0 < m as 1.0 / 0.0 (m counts chunks: 0, 1, ...)
    elif m_max <= CHUNK_GROUPS:  # every chunk listed: chunk j at offset j share, if j < m
        np.add(g * share, replica.cached_column, out=offs[:, :cols])
        np.less(g, m[:, None], out=wts[:, :cols])
    else:
        # prompts of at most CHUNK_GROUPS full chunks list them (chunk j at j share, if j < m);
        # longer ones stand for m / CHUNK_GROUPS chunks each, at the group midpoints
        m_col = m[:, None]
        many = m_col > CHUNK_GROUPS
        j = replica.chunk_group_midpoints[:cols] * m_col
        j /= CHUNK_GROUPS
        j -= 0.5
        np.copyto(j, g, where=~many)
        np.multiply(j, share, out=offs[:, :cols])
        np.less(g, m_col, out=wts[:, :cols])
        np.copyto(wts[:, :cols], m_col / CHUNK_GROUPS, where=many)
        offs[:, :cols] += replica.cached_column
    np.add(p0, done, out=offs[:, cols])
    wts[:, cols] = 1.0
    return Chunks(toks, offs, wts, k)


def row_sums(a: FloatArray) -> FloatArray:
    """a.sum(axis=-1) for the few columns of a prompt's chunks: numpy sums a row's columns in
    order, ((a0 + a1) + a2) + ..., and so do these column additions, cheaper than its
    reduction on arrays this small (tests/test_latency.py holds them to it bit for bit)."""
    cols = a.shape[-1]
    if cols < 2 or cols > CHUNK_GROUPS + 1:
        return np.add.reduce(a, axis=-1)
    out = a[..., 0] + a[..., 1]
    for j in range(2, cols):
        out += a[..., j]
    return out
