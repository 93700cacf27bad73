"""The capacity search: the highest arrival rate at which one engine meets TTFT / ITL p99
targets, by a bracketed root-find (`solvers.rootfind.last_met`) on its stable branch, and which
target binds there; or why no rate does (a target below the idle floor, bursts that queue at any
rate). `LatencyModel.capacity` runs it per pool; the planner runs it for one pool at a time
(docs/latency/capacity.md)."""

from __future__ import annotations

import math

from planner.latency.engine import HUGE, Engine
from planner.latency.predictions import PoolCapacity
from planner.latency.results import State
from planner.schema.kinds import BindingLimit, Role
from planner.slo import Slo
from solvers.rootfind import RootResult, last_met

# The capacity is the last point that met the SLO, found to this share of itself below the first
# point that missed it (a tolerance on the whole stable range instead leaves a capacity far below
# the range's end, a tight SLO, coarse: docs/latency/capacity.md).
CAPACITY_PRECISION = 1e-2
# Brent's tolerance: 0.9 of that precision of the point (its bracket then closes within the
# precision in one pass; `last_met` goes on between the two points where it does not), plus
# CAPACITY_XTOL of the stable range: where no positive rate meets the SLO the search stops that
# close to 0 (the decades below, or under bursts "no positive rate", take over from there).
CAPACITY_RTOL = 0.9 * CAPACITY_PRECISION
CAPACITY_XTOL = 1e-3
# `Engine.ttft_p99_at_most_s` is a bound in exact arithmetic; the quantile's own rounding is
# covered by this relative margin before the capacity search trusts it.
TTFT_BOUND_MARGIN = 1.0 + 1e-6
# Where the SLO is met only below that precision (a target just above an idle floor that p99
# leaves steeply), the search goes on towards 0 by factors of 10, at most this many times.
NEAR_ZERO_DECADES = 9

__all__ = [
    "CAPACITY_PRECISION",
    "CAPACITY_RTOL",
    "CAPACITY_XTOL",
    "NEAR_ZERO_DECADES",
    "TTFT_BOUND_MARGIN",
    "failing_target",
    "no_positive_rate",
    "pool_capacity",
]


def pool_capacity(role: Role, e: Engine, slo: Slo) -> PoolCapacity:
    ttft_t = slo.ttft_p99_s if e.has_prefill else None
    itl_t = slo.itl_p99_s if e.has_decode else None
    b = e.boundary()
    if ttft_t is None and itl_t is None:
        return PoolCapacity(role, b.lam_max, True, b.binding, "", None, None)

    # Per point: the state and the p99 / target ratios computed there (None: not needed).
    memo: dict[float, tuple[State, float | None, float | None]] = {}

    def f(x: float) -> float:
        st = e.state_at(x)
        # Only the sign matters to the bracket: skip the second metric once one fails.
        ri = e.itl_p99_s(st) / itl_t if itl_t is not None else None
        rt = None
        if ttft_t is not None and (ri is None or ri <= 1.0):
            # Where a bound on TTFT p99 already sits below ITL's ratio, f is ITL's: the
            # exact TTFT p99 (its quantiles, ~a third of a point's cost) is not needed.
            itl_nearer = ri is not None and e.ttft_p99_at_most_s(st) * TTFT_BOUND_MARGIN / ttft_t <= ri
            rt = None if itl_nearer else e.ttft_p99_s(st) / ttft_t
        memo[x] = (st, ri, rt)
        v = max(-math.inf if ri is None else ri - 1.0, -math.inf if rt is None else rt - 1.0)
        return min(v, HUGE) if math.isfinite(v) else HUGE

    where = "" if role == "colocated" else f" in the {role} pool"
    p0 = e.zero_point()
    rt0 = p0.ttft_p99_s / ttft_t if ttft_t is not None and p0.ttft_p99_s is not None else 0.0
    ri0 = p0.itl_p99_s / itl_t if itl_t is not None and p0.itl_p99_s is not None else 0.0
    if max(rt0, ri0) > 1.0:
        parts = []
        if rt0 > 1.0 and ttft_t is not None and p0.ttft_p99_s is not None:
            parts.append(
                f"TTFT p99 target {ttft_t * 1e3:.4g} ms is below the {p0.ttft_p99_s * 1e3:.4g} ms floor"
                f"{where} (prefill of the p99 prompt on an idle replica)"
            )
        if ri0 > 1.0 and itl_t is not None and p0.itl_p99_s is not None:
            parts.append(
                f"ITL p99 target {itl_t * 1e3:.4g} ms is below the {p0.itl_p99_s * 1e3:.4g} ms floor"
                f"{where} (a decode step of one sequence on an idle replica)"
            )
        floor_limit: BindingLimit = "ttft" if rt0 >= ri0 else "itl"
        return PoolCapacity(role, 0.0, False, floor_limit, "; ".join(parts), None, None)
    x_hi = b.n_max if e.has_decode else b.lam_max
    f_hi = f(x_hi)
    if f_hi <= 0:
        return PoolCapacity(role, b.lam_max, True, b.binding, "", None, e.point(memo[x_hi][0]))
    # Not under bursts (gaps of CV^2 > 1) below the root's precision: the model's burst
    # factor fades as the rate vanishes (z -> 1 with n) where gamma clumps persist (P(a gap
    # < L) ~ (k lam L)^k), so its low-rate limit is not to be trusted there: bursts that
    # queue at any rate read as no positive rate.
    decades = NEAR_ZERO_DECADES if e.stats.arrival_cv2 <= 1.0 else 0
    # Decode roles search the rate axis (`Engine.concurrency_at`), the precision judged on
    # each state's own rate: the capacity's unit, and about linear in the targets. A
    # prefill-only engine's axis is the rate already.
    on_rates = e.has_decode and b.lam_max > 0.0
    axis = e.concurrency_at if on_rates else _same
    u_hi = b.lam_max if on_rates else x_hi
    edge = last_met(
        lambda u: f(axis(u)),
        0.0,
        u_hi,
        f_lo=max(rt0, ri0) - 1.0,
        f_hi=f_hi,
        xtol=CAPACITY_XTOL * u_hi,
        rtol=CAPACITY_RTOL,
        precision=CAPACITY_PRECISION,
        decades=decades,
        measure=(lambda u: e.state_at(axis(u)).lam) if on_rates else None,
    )
    x, x_fail = axis(edge.met), axis(edge.missed)
    res = edge.search
    if x <= 0.0:
        return no_positive_rate(role, e, slo, res, x_fail, where)
    st = memo[x][0] if x in memo else e.state_at(x)
    at = e.point(st)
    return PoolCapacity(
        role, st.lam, True, failing_target(e, memo, x_fail, ttft_t, itl_t), "", res, at
    )

def failing_target(
    e: Engine,
    memo: dict[float, tuple[State, float | None, float | None]],
    x_fail: float,
    ttft_t: float | None,
    itl_t: float | None,
) -> BindingLimit:
    """The SLO that binds: the target missed at the first failing point of the root-find,
    just above the capacity, not the one closer to its target at the capacity itself (a
    p99 can jump in between). ITL is checked first there (as in the root-find's f): if both
    are missed, they crossed within the root's tolerance of each other. At an exact root
    (nothing missed) the target nearest to its limit binds."""
    st, ri, rt = memo[x_fail] if x_fail in memo else (e.state_at(x_fail), None, None)
    if itl_t is not None and ri is None:
        ri = e.itl_p99_s(st) / itl_t
    if ri is not None and ri > 1.0:
        return "itl"
    if ttft_t is not None and rt is None:
        rt = e.ttft_p99_s(st) / ttft_t
    if rt is not None and rt > 1.0:
        return "ttft"
    return "itl" if ri is not None and (rt is None or ri >= rt) else "ttft"

def no_positive_rate(
    role: Role, e: Engine, slo: Slo, res: RootResult, x_min: float, where: str
) -> PoolCapacity:
    """The idle replica meets the SLO but no positive load does: with bursty (gamma, k < 1)
    arrivals, bursts of about 1/k requests queue behind each other however rare they are, so
    the floor at a vanishing rate sits above the idle one. `x_min`: the least point tried."""
    at = e.point(e.state_at(x_min))
    parts = []
    if slo.ttft_p99_s is not None and at.ttft_p99_s is not None and at.ttft_p99_s > slo.ttft_p99_s:
        parts.append(f"TTFT p99 is {at.ttft_p99_s * 1e3:.4g} ms > {slo.ttft_p99_s * 1e3:.4g} ms")
    if slo.itl_p99_s is not None and at.itl_p99_s is not None and at.itl_p99_s > slo.itl_p99_s:
        parts.append(f"ITL p99 is {at.itl_p99_s * 1e3:.4g} ms > {slo.itl_p99_s * 1e3:.4g} ms")
    k = 1.0 / e.stats.arrival_cv2 if e.stats.arrival_cv2 > 0 else math.inf
    why = (
        f"arrivals come in bursts (burstiness k={k:.3g}, about {1 / k:.0f} requests at once) that queue "
        "behind each other at any rate"
        if k < 1
        else "the SLO sits at the idle floor"
    )
    reason = (
        f"no positive arrival rate meets the SLO{where}: even at {at.lam:.3g} req/s per replica, "
        f"{' and '.join(parts) or 'a target is missed'}; {why}"
    )
    binding: BindingLimit = "ttft" if parts and parts[0].startswith("TTFT") else "itl"
    return PoolCapacity(role, 0.0, False, binding, reason, res, at)


def _same(x: float) -> float:
    """The identity: a search axis that is its own quantity."""
    return x
