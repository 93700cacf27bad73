"""The decode count's variance (docs/latency/decode-count.md): how far the number
of decoding sequences n spreads around its mean, and the other decodes a decoder meets in its
decode-only steps. Pure functions of named inputs; the `*_at` functions gather them from a
replica and its state (the engine keeps the results on the state).

The count is GI/G/inf's, n (1 + (c_a^2 - 1) eta) (eta the workload's `decode_overlap`; the
burst part fading as n / (1 + n) at vanishing load, as the burst factor z does), the arrivals
of the last lifetime, amplified by the count's own feedback (`count_feedback`): 1 / (1 - busy)^2
(the prompts' coupling, instantaneous) and 1 / loop (the lifetime's window: a window loop of
gain g amplifies the variance of a noise of the window's own spectrum by exactly 1 / (1 - g)).
"""

from __future__ import annotations

import math
from typing import NamedTuple

from planner.latency.replica import Replica, decode_step_s
from planner.latency.results import CountFeedback, State

# The count's loop gain (and its whole gain keep^2 loop) never falls below this: where the
# feedback would cancel the count's restoring force, Var n stays finite instead of diverging
# (a tolerance, not a modelling choice: at the stability limit the boundary binds first).
DECODE_GAIN_FLOOR = 1e-3


class DecodeCompany(NamedTuple):
    """The other decodes in a decoder's decode-only steps, as a lognormal."""

    mean: float
    log_sd: float


def count_feedback(
    *, decodes: float, busy: float, decode_step_s: float, decode_slope_s: float, drag_per_decode: float
) -> CountFeedback:
    """(1 - busy, loop). The decodes that end now were delayed by E[Delta] for each prompt that
    arrived during their lifetime, and those prompts are the decodes now: an excess holds
    busy = lam E[Delta] times itself more, at once. Over a lifetime, a step is longer by
    `decode_slope_s` (b) per decode beside it, e = n b / t_dec; and where prompts queue, a high
    count slows prefill (`drag_per_decode`, beta; 0 without a prefill queue), so prompts become
    decodes at lam beta fewer per second per decode, e_q = n beta. Linearized, dn = noise /
    (1 - busy) + (e - e_q / (1 - busy)) K*dn, K the lifetime's moving average: loop = 1 - e +
    e_q / (1 - busy). (How a prompt's engine time moves with the count, E[Delta]', and the
    drag's relaxation over the queue's own time were terms here once: with both out the
    synthetic grid reads 191 of 192 cells against 190, the others unchanged; either alone
    cost cells. docs/latency/decode-count.md.)"""
    keep = 1.0 - busy
    n = decodes
    e = min(n * decode_slope_s / decode_step_s, 1.0) if decode_step_s > 0.0 else 0.0
    e_q = n * drag_per_decode
    return CountFeedback(keep, max(1.0 - e + e_q / keep, DECODE_GAIN_FLOOR))  # (keep, loop)


def count_wanders(decodes: float, decode_step_s: float, busy: float) -> bool:
    """Whether the count has a spread to compute: decodes under way, steps that take time and
    a busy share in [0, 1) (else the count is taken as still: variance 0)."""
    return decodes > 0.0 and decode_step_s > 0.0 and 0.0 <= busy < 1.0


def decode_count_variance(
    *, decodes: float, arrival_cv2: float, decode_overlap: float, feedback: CountFeedback
) -> float:
    """Var n at a state where the count wanders (`count_wanders`): the last lifetime's arrivals,
    n (1 + (c_a^2 - 1) eta n / (1 + n)), through the feedback's gain keep^2 loop."""
    n = decodes
    noise = max(1.0 + (arrival_cv2 - 1.0) * decode_overlap * n / (1.0 + n), 0.0)
    return n * noise / max(feedback.keep * feedback.keep * feedback.loop, DECODE_GAIN_FLOOR)


def decode_company(decodes: float, variance: float) -> DecodeCompany | None:
    """The other decodes in the decode-only steps a decoder sees, as a lognormal's mean and
    log-sd. A decoder rides a step in proportion to its decodes, so it sees the size-biased
    count: itself and M others; with n negative binomial of mean n and variance v, M has mean
    n + v/n - 1 and variance v + (v/n)^2 - v/n (Poisson, v = n: M is the n others, Poisson).
    None without a spread (or without others)."""
    if not variance > 0.0:
        return None
    ratio = variance / decodes
    mean = decodes + ratio - 1.0
    var = variance + ratio * ratio - ratio
    if not (mean > 0.0 and var > 0.0):
        return None
    return DecodeCompany(mean, math.sqrt(math.log1p(var / (mean * mean))))  # (mean, log_sd)


def decode_slope_s(replica: Replica, s: State) -> float:
    """What one more decode adds to a decode-only step at the state: t_dec - t_arr (a step
    with one decode fewer) where prompts arrive, else the step at n_dec - 1 timed."""
    if replica.has_prefill:
        return max(s.t_dec - s.t_arr, 0.0)
    return max(s.t_dec - decode_step_s(replica, max(s.n_dec - 1.0, 0.0)), 0.0)
