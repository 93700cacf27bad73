"""Operating points on a replica's stable branch (docs/latency/stability.md): the steady state at
an arrival rate, the least root of lam(n) = rate below the boundary (`solve`, `least_root`:
lam(n) dips where a prompt starts needing one more chunk), and the branch as an axis of rates for
the capacity search (`rate_axis`, `concurrency_at`). The boundary itself is `stability.py`'s."""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from planner.latency.replica import Replica
from planner.latency.results import Boundary, State
from planner.latency.steady import burst_factor
from solvers.rootfind import RootResult, find_root

# The state at (decodes, rate or None): the engine's cache of `steady.build_state`.
StateOf = Callable[[float, float | None], State]

SOLVE_TOL = 1e-9  # the steady state's root in n (relative to n_max; and its rtol)
LEAST_ROOT_CHUNKS = 64  # chunk-count changes per prompt `least_root` checks at most
DIP_SIDE = 1e-12  # `least_root` reads the rate this far (relative) left of a chunk-count change
SHARE_FLOOR = 1e-9  # `least_root` divides by a chunk share at least this (tokens)


class RateAxis(NamedTuple):
    """`concurrency_at`'s points: rates and concurrencies, both ascending."""

    rates: list[float]
    ns: list[float]


# ---- operating points on the branch ------------------------------------------------------------


def rate_axis(b: Boundary) -> RateAxis:
    """`concurrency_at`'s points: (0, 0), the scan's points where both the rate and the
    concurrency rise (the branch dips where a prompt starts needing another chunk), and the
    branch's end (lam_max, n_max)."""
    rates, ns = [0.0], [0.0]
    if b.grid_n is not None and b.grid_lam is not None:
        for n, lam in zip(b.grid_n.tolist(), b.grid_lam.tolist(), strict=True):
            if rates[-1] < lam < b.lam_max and ns[-1] < n < b.n_max:
                rates.append(lam)
                ns.append(n)
    rates.append(b.lam_max)
    ns.append(b.n_max)
    return RateAxis(rates, ns)


def concurrency_at(axis: RateAxis, rate: float) -> float:
    """The capacity search's axis (decode roles): the concurrency at which the stable branch
    runs `rate` requests/s, read off the boundary's grid by linear interpolation (exact at
    its points, n_max from lam_max up). The SLO metrics move about linearly in the rate
    where they bend in n (the step grows with n: n = lam d t_step), so Brent brackets
    their edge in fewer steady states on this axis. Between grid points it is not the
    branch itself: the search judges its precision on the state's own rate."""
    rates, ns = axis
    if rate >= rates[-1]:
        return ns[-1]
    if not rate > 0.0:
        return 0.0
    i = bisect.bisect_right(rates, rate)  # rates[i - 1] <= rate < rates[i]
    r0, n0 = rates[i - 1], ns[i - 1]
    return n0 + (ns[i] - n0) * (rate - r0) / (rates[i] - r0)


def solve(
    replica: Replica, b: Boundary, rate: float, *, state_of: StateOf, idle: Callable[[], State]
) -> tuple[State, RootResult | None] | None:
    """The steady state at arrival rate `rate` (per replica): the fixed point n = lam d t_step,
    found by root-finding on lam(n) = rate over the stable branch `b`. None when the rate is
    not stable (at or above the max stable rate). `idle`: the rate-0 state."""
    lam = rate
    if not lam < b.lam_max or lam < 0:
        return None
    if not replica.has_decode:
        return state_of(0.0, lam), None
    if lam == 0:
        return idle(), None
    lo, hi, f_lo, f_hi = 0.0, b.n_max, -lam, b.lam_max - lam
    if b.grid_n is not None and b.grid_lam is not None and b.grid_n.size:
        # Narrow the bracket to the grid interval where the rate passes lam.
        i = int(b.grid_lam.searchsorted(lam, side="right"))
        if i > 0 and float(b.grid_lam[i - 1]) < lam:
            lo, f_lo = float(b.grid_n[i - 1]), float(b.grid_lam[i - 1]) - lam
        g_lam = b.grid_lam
        if i < b.grid_n.size and float(g_lam[i]) > lam and (g_lam[1 : i + 1] > g_lam[:i]).all():
            hi, f_hi = float(b.grid_n[i]), float(b.grid_lam[i]) - lam
    res = find_root(
        lambda x: state_of(x, None).lam - lam,
        lo,
        hi,
        f_lo=f_lo,
        f_hi=f_hi,
        xtol=SOLVE_TOL * max(b.n_max, 1.0),
        rtol=SOLVE_TOL,
    )
    n = res.root if res.root is not None else b.n_max
    s = state_of(least_root(replica, state_of, lam, lo, n), None)
    assert math.isfinite(s.lam) and s.lam >= 0.0, f"the steady state's rate {s.lam}"
    return s, res


def least_root(replica: Replica, state_of: StateOf, lam: float, lo: float, root: float) -> float:
    """The smallest n in [lo, root] with lam(n) = lam. lam(n) rises with n except for tiny
    dips where a prompt of the support starts needing one more chunk (the chunk share
    B - decodes shrinks past Pe / j); if lam already reaches `lam` just below such a point,
    the least fixed point (the one reached as load grows) is below it."""
    if not replica.has_prefill or root <= lo:
        return root
    s_hi = share_own_at(replica, lo) if lo > 0 else replica.budget_tokens
    s_lo = state_of(root, None).share_own
    if not s_lo < s_hi:
        return root
    pe = replica.prefill_tokens
    j_min = np.floor(pe / s_hi) + 1.0
    j_max = np.floor(pe / max(s_lo, SHARE_FLOOR))
    some = j_max >= j_min  # prompts with a chunk count change in (s_lo, s_hi): usually none
    if not some.any():
        return root
    points: list[float] = []
    for p_i, a, b in zip(pe[some].tolist(), j_min[some].tolist(), j_max[some].tolist(), strict=True):
        for j in range(int(a), min(int(b), int(a) + LEAST_ROOT_CHUNKS) + 1):
            share = p_i / j
            if s_lo < share < s_hi:
                points.append(
                    n_for_arrival_decodes(
                        replica, (replica.budget_tokens - share) / replica.decode_budget_tokens
                    )
                )
    prev = lo
    for n_b in sorted(points):
        if not lo < n_b < root:
            continue
        left = n_b * (1.0 - DIP_SIDE)
        lam_left = state_of(left, None).lam
        if lam_left >= lam:
            res = find_root(
                lambda x: state_of(x, None).lam - lam,
                prev,
                left,
                f_hi=lam_left - lam,
                xtol=SOLVE_TOL * max(root, 1.0),
                rtol=SOLVE_TOL,
            )
            return res.root if res.root is not None else left
        prev = n_b
    return root


def share_own_at(replica: Replica, n: float) -> float:
    """`State.share_own` at concurrency n without the rest of the state (decode roles)."""
    s_f = replica.budget_tokens - max(0.0, n + burst_factor(replica, n) - 1.0) * replica.decode_budget_tokens
    threshold = replica.chunk_threshold_tokens
    return min(s_f, threshold) if threshold > 0 else s_f


def n_for_arrival_decodes(replica: Replica, n_arr: float) -> float:
    """Invert n_arr = n + (c_a^2 - 1) n / (1 + n): n^2 + (c_a^2 - n_arr) n - n_arr = 0."""
    b = replica.arrival_cv2 - n_arr
    return max(0.0, (-b + math.sqrt(b * b + 4.0 * n_arr)) / 2.0)
