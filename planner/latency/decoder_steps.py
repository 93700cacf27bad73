"""The steps a decoder sees besides decode-only ones, timed and weighted (docs/latency/steps.md, "The
step mix"): last chunks alone, full chunks, last chunks with each company slice (timed exactly, each
prompt counting its tokens' share of its step), the rests of the groups the budget splits, and a
backlog's full steps; weighted by the decodes each step carries. The last stage of the step mix
(`steps.step_mix`), a pure function of keyword inputs.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from planner.costmodel.steptime import batch_time_s
from planner.latency.queueing import Phases, phases_mean_s
from planner.latency.replica import FloatArray, Replica
from planner.latency.results import State
from planner.latency.slices import SLICE_PROB_LIST, SLICE_PROBS


class SplitRests(NamedTuple):
    """Per company slice, the rest of a group the budget splits: alone (f_*) or ahead of one
    newcomer (n_*), as step rows (tokens, attention pairs, prefix) and rates; `keep` the
    group's count left in its full steps."""

    keep: list[float]
    rows: list[list[list[float]]]  # [tokens, pairs, prefix] x [alone, ahead] x slice: one block
    alone_rates: list[float]
    ahead_rates: list[float]


def decoder_steps(
    replica: Replica,
    s: State,
    *,
    chunk_steps_s: FloatArray,
    chunk_rates: FloatArray,
    last_rates: FloatArray,
    backlog: float,
    beyond: Phases,
    step_lb: float,
    backlog_rate: float,
    burst_factor: float,
    company_any: float,
    company: tuple[list[float], list[float]],
    full_step_cv2: float,
    full_step_shape: FloatArray,
    step_ratio: float,
) -> tuple[FloatArray, FloatArray]:
    """(step times, their shares of all steps). `chunk_steps_s`, `chunk_rates`: each chunk's
    step and rate (I, cols); `last_rates` last chunks per step by prompt; `backlog`, `beyond`
    the queue beyond the next step; `company_any`, `company` P(company) and its tokens given
    any; `step_ratio` the steps' chain's steps per second over the mix's."""
    pi, x = company_any, company[0]
    quiet = 1.0 - backlog
    s_f = max(s.share_full, 1.0)
    vl = chunk_steps_s[:, -1]
    cols = chunk_steps_s.shape[1]
    n_i = vl.size
    n_full = n_i * (cols - 1)
    n_comp = n_i * len(x) if pi > 0 else 0
    r_bar = replica.mean_prefill_tokens - (s.mean_chunks - 1.0) * max(s.share_own, 1.0)  # mean last chunk
    # the budget splits groups: their rests' steps, by slice (a rest alone, and one ahead of a newcomer)
    n_frag = 2 * len(x) if pi > 0 and r_bar + max(x) > s_f else 0
    n_back = (SLICE_PROBS.size if full_step_cv2 > 0.0 else 1) if backlog > 0 else 0
    n_all = n_i + n_full + n_comp + n_frag + n_back
    vals = np.empty(n_all)
    rts = np.empty(n_all)
    vals[:n_i] = vl
    np.multiply(last_rates, quiet * (1.0 - pi), out=rts[:n_i])
    if cols > 1:
        vals[n_i : n_i + n_full].reshape(n_i, cols - 1)[...] = chunk_steps_s[:, :-1]
        np.multiply(chunk_rates[:, :-1], quiet, out=rts[n_i : n_i + n_full].reshape(n_i, cols - 1))
    if pi > 0:
        lam_t = s.lam * s.t_step
        rests = None
        if n_frag:
            # positional (replica, s, company, r_bar, burst_factor, with_company): per state
            rests = split_rests(replica, s, company, r_bar, burst_factor, (quiet * pi) * lam_t * r_bar)
        # positional (replica, s, vals, rts, company, rests, lo, n_comp, n_frag, share_weight,
        # alone_total): a keyword call costs more, and this runs per state
        _company_steps(
            replica, s, vals, rts, company, rests, n_i + n_full, n_comp, n_frag,
            last_rates * (quiet * pi), lam_t * quiet * (1.0 - pi),
        )  # fmt: skip
    # Decoders see a step in proportion to the decodes it carries. A mixed step follows an
    # arrival, which finds n_arr = n + z - 1 decodes (bursts: more than the mean n), so the
    # mixed steps count n_arr / n of their share; a backlog's full steps also carry the
    # prompts prefilled earlier in the run, on average half of those a queued prompt waits
    # behind (its wait over a prompt's service). Poisson (z = 1): only the latter.
    n_seen = max(s.n, 1.0)
    if step_ratio != 1.0:  # the chain's steps per second (`steps.chain_company`)
        rts[: n_all - n_back] *= step_ratio
    if s.n_arr > n_seen:
        rts[: n_all - n_back] *= s.n_arr / n_seen
    if backlog > 0:
        full_step = s.t_full + (s.t_dec - s.t_arr)
        ahead = (
            (step_lb / 2.0 + s.t_full + phases_mean_s(beyond))
            * s_f
            / (replica.mean_prefill_tokens * s.t_full)
        )
        rate = backlog_rate * max(1.0, (s.n_arr + 0.5 * ahead) / n_seen)
        if n_back == 1:
            vals[-1] = full_step
            rts[-1] = rate
        else:  # the full steps' spread: a lognormal in the probability slices
            vals[-n_back:] = full_step_shape
            vals[-n_back:] *= full_step
            np.multiply(SLICE_PROBS, rate, out=rts[-n_back:])
    return vals, rts


def _company_steps(
    replica: Replica,
    s: State,
    vals: FloatArray,
    rts: FloatArray,
    company: tuple[list[float], list[float]],
    rests: SplitRests | None,
    lo: int,
    n_comp: int,
    n_frag: int,
    share_weight: FloatArray,
    alone_total: float,
) -> None:
    """Writes the company steps (from `lo`) into `vals` and `rts`: each (prompt, company slice)
    step's tokens, attention and prefix, timed in one call with the split groups' rests. Each
    prompt counts its tokens' share of its step, r / c (c = min(G, s_f) of its group's G
    tokens): the mix then carries every prompt token once (1 / (1 + x / E[Pe]) counted steps,
    not tokens: where the budget caps the step the company's rest went uncounted, and the mix's
    mean step fell below t_step)."""
    x, xp = company
    n_i = s.chunk_tokens.shape[0]
    s_f = max(s.share_full, 1.0)
    r_tok = np.ascontiguousarray(s.chunk_tokens[:, -1:])  # contiguous: each use below is cheaper
    xs = np.array(x)
    r_off = np.ascontiguousarray(s.chunk_offset[:, -1:])
    r_pairs = 0.5 * r_tok
    r_pairs += r_off
    r_pairs *= r_tok  # r_tok (offset + r_tok / 2)
    dims = (n_i + 2 if n_frag else n_i, xs.size)
    block = np.empty((3, *dims))  # one allocation for the three
    c_all, pairs_all, prefix_all = block[0], block[1], block[2]  # (indexing: cheaper than unpacking)
    c = c_all[:n_i]
    np.minimum(r_tok + xs, s_f, out=c)  # the last chunk and its whole company, in tokens
    xc = c - r_tok
    # r_pairs + x_c min(x_c, E[Pe^2]/E[Pe]) / 2: each prompt attends to itself
    pairs = pairs_all[:n_i]
    np.multiply(xc, 0.5, out=pairs)
    pairs *= np.minimum(xc, replica.token_mean_prefill_tokens)
    pairs += r_pairs
    # KV and prefix: the last chunk's offset, and the company's cached prefixes
    prefix = prefix_all[:n_i]
    np.multiply(xc, replica.cached_per_computed, out=prefix)
    prefix += r_off
    share = np.reciprocal(c)
    share *= r_tok
    if rests is not None:
        block[:, n_i:] = rests.rows  # the rests' two rows of each, in one conversion
        half = n_frag // 2
        rts[lo + n_comp : lo + n_comp + half] = rests.alone_rates
        ahead = rts[lo + n_comp + half : lo + n_comp + n_frag]
        wanted = math.fsum(rests.ahead_rates)
        if wanted > 0.0 and alone_total > 0.0:  # alone_total: rts[:n_i]'s sum (weights sum to 1)
            take = min(wanted, alone_total)
            ahead[:] = rests.ahead_rates
            ahead *= take / wanted
            rts[:n_i] *= 1.0 - take / alone_total
        else:
            ahead[:] = 0.0
        share *= np.array(rests.keep)
    else:
        share *= SLICE_PROBS if xp is SLICE_PROB_LIST else np.array(xp)
    share *= share_weight[:, None]
    # A company step carries its last chunk (> 0 tokens); a split group's rest may be
    # empty, a step then only where decodes ride it (n_arr > 0: no mask to apply).
    tc = batch_time_s(
        replica.step_coefficients, s.n_arr, s.n_arr * replica.decode_context_tokens, c_all, pairs_all,
        prefix_all + c_all, prefix_all, empty_batches=not s.n_arr > 0.0,
    )  # fmt: skip
    np.add(tc.ravel(), s.t_dec - s.t_arr, out=vals[lo : lo + n_comp + n_frag])
    rts[lo : lo + n_comp] = share.ravel()


def split_rests(
    replica: Replica,
    s: State,
    company: tuple[list[float], list[float]],
    r_bar: float,
    burst_factor: float,
    with_company: float,
) -> SplitRests:
    """The rests of the groups the budget splits, per company slice, for the mean last chunk
    r_bar (exact for alike prompts), in plain floats (eight of them: numpy's per-call cost
    would dominate). A group of G > s_f tokens fills floor(G / s_f) full steps and leaves a
    rest of R tokens: a step alone if nothing arrived during the last full one (e^{-lam zf
    T_full}), else shared with the newcomers, counted as its share R / s_f of a full step, so
    the full steps keep 1 - e^{-...} R / G of the group's count. A rest with one newcomer rides
    ahead of its chunk (FIFO): that step is the newcomer's, R tokens longer (the mean last
    chunk at its mean offset, p0 + (k - 1) share on average), and the prompts alone give it up.
    `with_company`: last-chunk tokens with company, per step."""
    s_f = max(s.share_full, 1.0)
    alone_f = math.exp(-s.lam * burst_factor * s.t_full)  # nothing arrived during the last full step
    one_f = s.lam * burst_factor * s.t_full * alone_f  # exactly one did
    p_tok = replica.token_mean_prefill_tokens
    p0_share = replica.cached_per_computed
    o_bar = p0_share * replica.mean_prefill_tokens + (s.mean_chunks - 1.0) * max(s.share_own, 1.0)
    own_pairs = r_bar * (o_bar + 0.5 * r_bar)
    taken_f = alone_f + one_f  # the rest leaves the full steps: alone, or ahead of one newcomer
    keep: list[float] = []
    f_rest: list[float] = []
    f_pairs: list[float] = []
    f_prefix: list[float] = []
    f_rate: list[float] = []
    n_tok: list[float] = []
    n_pairs: list[float] = []
    n_prefix: list[float] = []
    n_rate: list[float] = []
    for xj, pj in zip(company[0], company[1], strict=True):
        g = xj + r_bar
        rest = math.fmod(g, s_f) if g > s_f else 0.0
        # the group's count its rest takes from the full steps: alone, or ahead of one
        # newcomer (with more of them it stays in the full step it overflowed)
        cut = taken_f * rest / g
        keep.append(pj * (1.0 - cut))
        f_rest.append(rest)  # the tail of a prompt (E_tok[Pe] on average) at its offset
        pairs_j = rest * (p_tok - 0.5 * min(rest, p_tok))
        prefix_j = max(p_tok - rest, 0.0) + rest * p0_share
        f_pairs.append(pairs_j)
        f_prefix.append(prefix_j)
        f_rate.append(with_company * pj * alone_f / g if rest > 0.0 else 0.0)
        n_tok.append(min(rest + r_bar, s_f))
        n_pairs.append(pairs_j + own_pairs)
        n_prefix.append(prefix_j + o_bar)
        n_rate.append(with_company * pj * one_f / g if rest > 0.0 else 0.0)
    return SplitRests(keep, [[f_rest, n_tok], [f_pairs, n_pairs], [f_prefix, n_prefix]], f_rate, n_rate)
