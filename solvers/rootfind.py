"""Bracketed root finding over SciPy's Brent method, with diagnostics.

`find_root(f, lo, hi)` finds x in [lo, hi] with f(x) = 0 when f(lo) and f(hi) have opposite
signs, and otherwise says why it did not: which end values were seen, whether an expansion of
the bracket was tried and how far. It never raises for a bracket that fails to straddle a root;
the caller decides what "no root" means. `last_met(f, lo, hi, ...)` finds the edge of
{x : f(x) <= 0} for a rising f that may jump (a capacity: the last point that met a target and
the first that missed it, to a precision of the former). `first_sign_change(xs, ys)` turns a
coarse grid of values into a bracket.

Numeric only: plain floats and callables, no domain vocabulary. SciPy is imported inside the
functions so that importing this module stays cheap.
"""

from __future__ import annotations

import math
import operator
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

__all__ = ["Edge", "Expansion", "RootResult", "find_root", "first_sign_change", "last_met"]


@dataclass(frozen=True)
class Expansion:
    """How to widen a bracket whose ends have the same sign: move `hi` away from `lo` by
    `factor` times the current width (or `lo` away from `hi` when `side="lo"`, both when
    "both"), at most `max_steps` times, never past `limit_lo` / `limit_hi`."""

    factor: float = 2.0
    max_steps: int = 20
    side: str = "hi"  # "hi", "lo" or "both"
    limit_lo: float = -math.inf
    limit_hi: float = math.inf

    def __post_init__(self) -> None:
        if not self.factor > 0:
            raise ValueError(f"expansion factor must be > 0, got {self.factor}")
        if self.max_steps < 0:
            raise ValueError(f"max_steps must be >= 0, got {self.max_steps}")
        if self.side not in ("hi", "lo", "both"):
            raise ValueError(f"side must be 'hi', 'lo' or 'both', got {self.side!r}")


@dataclass(frozen=True)
class RootResult:
    """Outcome of a bracketed search.

    root: the root found (None when none was). converged: Brent's convergence flag (True also
    when an end of the bracket is itself a root). bracket / f_bracket: the bracket finally used
    and f at its ends (after any expansion). iterations / function_calls: Brent's iterations and
    the calls of f actually made (ends and expansion included). expansions: how many times the
    bracket was widened. reason: empty when converged, else why there is no root.
    final_bracket: the last points evaluated on the side of `lo` (f of lo's sign) and on the
    side of `hi` — the root lies between them; pick a side when it matters (e.g. the last point
    that still met a target)."""

    root: float | None
    converged: bool
    bracket: tuple[float, float]
    f_bracket: tuple[float, float]
    iterations: int
    function_calls: int
    expansions: int
    reason: str
    final_bracket: tuple[float, float] | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "root": self.root,
            "converged": self.converged,
            "bracket": list(self.bracket),
            "f_bracket": list(self.f_bracket),
            "final_bracket": None if self.final_bracket is None else list(self.final_bracket),
            "iterations": self.iterations,
            "function_calls": self.function_calls,
            "expansions": self.expansions,
            "reason": self.reason,
        }


def _fail(
    lo: float, hi: float, flo: float, fhi: float, calls: int, expansions: int, reason: str
) -> RootResult:
    return RootResult(None, False, (lo, hi), (flo, fhi), 0, calls, expansions, reason)


def find_root(
    f: Callable[[float], float],
    lo: float,
    hi: float,
    *,
    xtol: float = 1e-12,
    rtol: float = 1e-10,
    maxiter: int = 100,
    expand: Expansion | None = None,
    f_lo: float | None = None,
    f_hi: float | None = None,
) -> RootResult:
    """Root of f in [lo, hi] by `scipy.optimize.brentq`.

    `f_lo` / `f_hi`: f at the ends when the caller already has them (saves two calls).
    `expand`: widen the bracket while its ends have the same sign (see `Expansion`).
    Returns a `RootResult`; a bracket that does not straddle a root (or a NaN at an end) is
    reported through `reason`, not raised. Exceptions raised by f propagate."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return _fail(lo, hi, math.nan, math.nan, 0, 0, f"bracket [{lo:g}, {hi:g}] is not finite")
    if lo > hi:
        lo, hi = hi, lo
        f_lo, f_hi = f_hi, f_lo
    calls = 0
    if f_lo is None:
        f_lo = float(f(lo))
        calls += 1
    if f_hi is None:
        f_hi = float(f(hi))
        calls += 1
    bracket = _straddle(f, _Bracket(lo, hi, f_lo, f_hi, calls, 0), expand)
    if isinstance(bracket, RootResult):
        return bracket
    return _brent_search(f, bracket, xtol, rtol, maxiter)


class _Bracket(NamedTuple):
    """A bracket and f at its ends, with the calls of f and the widenings spent to get it: what
    `find_root` carries from the ends' checks to Brent's method."""

    lo: float
    hi: float
    f_lo: float
    f_hi: float
    calls: int
    expansions: int


def _settled(b: _Bracket) -> RootResult | None:
    """The answer the ends alone give, if any: a NaN at an end stops the search (Brent cannot
    compare it), an end where f is exactly 0 is the root. None: the ends decide nothing yet."""
    lo, hi, f_lo, f_hi, calls, expansions = b
    if math.isnan(f_lo) or math.isnan(f_hi):
        end = lo if math.isnan(f_lo) else hi
        return _fail(lo, hi, f_lo, f_hi, calls, expansions, f"f({end:g}) is NaN")
    if f_lo == 0.0:
        return RootResult(lo, True, (lo, hi), (f_lo, f_hi), 0, calls, expansions, "")
    if f_hi == 0.0:
        return RootResult(hi, True, (lo, hi), (f_lo, f_hi), 0, calls, expansions, "")
    return None


def _straddle(f: Callable[[float], float], b: _Bracket, expand: Expansion | None) -> RootResult | _Bracket:
    """A bracket whose ends have opposite signs, for Brent: `b` itself, or `b` widened by
    `expand` until its ends differ in sign; or the answer the ends settle (`_settled`), or why
    no bracket could be had (same signs and no expansion, or its steps or limits spent)."""
    while True:  # bounded: at most expand.max_steps widenings
        done = _settled(b)
        if done is not None:
            return done
        lo, hi, f_lo, f_hi, calls, expansions = b
        if (f_lo < 0) != (f_hi < 0):
            return b
        reason = (
            f"f({lo:g}) = {f_lo:g} and f({hi:g}) = {f_hi:g} have the same sign: "
            f"the bracket [{lo:g}, {hi:g}] does not straddle a root"
        )
        if expand is None:
            return _fail(lo, hi, f_lo, f_hi, calls, expansions, reason)
        if expansions >= expand.max_steps:
            return _fail(lo, hi, f_lo, f_hi, calls, expansions, f"{reason} (after {expansions} expansions)")
        wider = _widen(f, b, expand)
        if wider is None:
            return _fail(lo, hi, f_lo, f_hi, calls, expansions, f"{reason} (expansion reached its limits)")
        b = wider


def _widen(f: Callable[[float], float], b: _Bracket, expand: Expansion) -> _Bracket | None:
    """`b` widened once by `expand` (`hi` first, then `lo`, each by `factor` times the width
    before the step, within the limits), f called at each moved end; None when neither end may
    move (both at their limits)."""
    lo, hi, f_lo, f_hi, calls, expansions = b
    width = (hi - lo) or 1.0
    moved = False
    if expand.side in ("hi", "both") and hi < expand.limit_hi:
        hi = min(expand.limit_hi, hi + expand.factor * width)
        f_hi = float(f(hi))
        calls += 1
        moved = True
    if expand.side in ("lo", "both") and lo > expand.limit_lo:
        lo = max(expand.limit_lo, lo - expand.factor * width)
        f_lo = float(f(lo))
        calls += 1
        moved = True
    if not moved:
        return None
    return _Bracket(lo, hi, f_lo, f_hi, calls, expansions + 1)


def _brent_search(
    f: Callable[[float], float], bracket: _Bracket, xtol: float, rtol: float, maxiter: int
) -> RootResult:
    """Brent's method on a bracket whose ends differ in sign, as a `RootResult`.

    brentq evaluates both ends again: answer those from what we know. Track the last point
    seen on each side of the root: Brent keeps its contrapoint as the latest point of the
    other sign, so these two are the final bracket."""
    lo, hi, f_lo, f_hi, calls, expansions = bracket
    a, b, fa, fb = lo, hi, f_lo, f_hi
    lo_negative = f_lo < 0
    side = [lo, hi]
    used = [0]

    def g(x: float) -> float:
        if x == a:
            return fa
        if x == b:
            return fb
        used[0] += 1
        v = float(f(x))
        if not math.isnan(v):
            side[0 if (v < 0) == lo_negative and v != 0 else 1] = x
        return v

    root, iterations, flag = _brent(g, lo, hi, xtol, rtol, maxiter)
    converged = flag == "converged"
    return RootResult(
        float(root) if converged else None,
        converged,
        (lo, hi),
        (f_lo, f_hi),
        iterations,
        calls + used[0],
        expansions,
        "" if converged else f"Brent's method did not converge in {maxiter} iterations ({flag})",
        (side[0], side[1]),
    )


# scipy.optimize.brentq's own flags (RootResults.flag), by the C solver's return code.
_BRENT_FLAGS = {0: "converged", -1: "sign error", -2: "convergence error", -3: "value error", 1: "No error"}
_BRENT_C: Callable[..., tuple[float, int, int, int]] | None = None  # the C solver, once found
_BRENT_C_LOOKED = False


def _private_brent() -> Callable[..., tuple[float, int, int, int]]:
    from scipy.optimize import _zeros

    solver: Callable[..., tuple[float, int, int, int]] = _zeros._brentq
    return solver


def _brent_c() -> Callable[..., tuple[float, int, int, int]] | None:
    """The C routine behind `scipy.optimize.brentq` (private: None if this SciPy lacks it)."""
    global _BRENT_C, _BRENT_C_LOOKED
    if not _BRENT_C_LOOKED:
        _BRENT_C_LOOKED = True
        try:
            from scipy.optimize import brentq

            solver = _private_brent()
            # A private routine may change shape in any release: use it only if it answers a
            # known problem exactly as the public brentq does.
            got = solver(lambda x: x * x - 2.0, 0.0, 2.0, 1e-12, 1e-12, 100, (), True, False)
            want, info = brentq(lambda x: x * x - 2.0, 0.0, 2.0, xtol=1e-12, rtol=1e-12, full_output=True)
            ok = float(got[0]) == float(want) and int(got[2]) == int(info.iterations) and int(got[3]) == 0
            _BRENT_C = solver if ok else None
        except Exception:  # any failure of the private routine means: do not use it
            _BRENT_C = None
    return _BRENT_C


def _brent(
    g: Callable[[float], float], lo: float, hi: float, xtol: float, rtol: float, maxiter: int
) -> tuple[float, int, str]:
    """`scipy.optimize.brentq(g, lo, hi, xtol, rtol, maxiter, full_output=True)` as (root,
    iterations, flag). brentq checks its tolerances, wraps g to raise on NaN and calls its C
    solver; this does the same around the same solver without brentq's per-call wrapper and
    result objects (~10 us a call; the latency model root-finds three times per candidate), and
    falls back on brentq itself if a SciPy does not have that private solver.
    tests/test_rootfind.py holds both paths to the same results."""
    solver = _brent_c()
    if solver is None:
        from scipy.optimize import brentq

        root, info = brentq(g, lo, hi, xtol=xtol, rtol=rtol, maxiter=maxiter, full_output=True, disp=False)
        return float(root), int(info.iterations), str(info.flag)
    if xtol <= 0:
        raise ValueError(f"xtol too small ({xtol:g} <= 0)")
    if rtol < 4 * sys.float_info.epsilon:
        raise ValueError(f"rtol too small ({rtol:g} < {4 * sys.float_info.epsilon:g})")

    def g_checked(x: float) -> float:
        v = g(x)
        if math.isnan(v):
            raise ValueError(f"The function value at x={x} is NaN; solver cannot continue.")
        return v

    root, _calls, iterations, code = solver(
        g_checked, lo, hi, xtol, rtol, operator.index(maxiter), (), True, False
    )
    return float(root), int(iterations), _BRENT_FLAGS.get(code, str(code))


MEASURE_PASSES = 4  # `last_met`'s passes between the two points when precision is on a measure


@dataclass(frozen=True)
class Edge:
    """Where a rising f first turns positive (`last_met`): `met`, the last point seen with
    f <= 0, and `missed`, the first point above it seen with f > 0 (both the edge itself where
    Brent landed on it exactly, f = 0 there); `search`, the root-find that settled them (its
    first bracket, the work of every pass, its final bracket). `met` is the bracket's low end
    when no point above it met, and `missed` then the least point tried."""

    met: float
    missed: float
    search: RootResult


def last_met(
    f: Callable[[float], float],
    lo: float,
    hi: float,
    *,
    f_lo: float,
    f_hi: float,
    xtol: float,
    rtol: float,
    precision: float,
    decades: int = 0,
    measure: Callable[[float], float] | None = None,
) -> Edge:
    """The edge of {x : f(x) <= 0} in [lo, hi], from f(lo) <= 0 < f(hi): the last point that
    met (f <= 0) and the first that missed, to within `precision` of the former. Brent first
    (`xtol`, `rtol`: a tolerance on the whole bracket); where the two points are further apart
    than `precision` x met, Brent again between them (a tolerance on the whole bracket leaves
    an edge far below its top coarse); where no point above `lo` met, up to `decades` points
    below the first miss by factors of 10, then Brent between the last two, to `rtol` of the
    lower (or a tenth of `precision` where finer, as in the passes between two points). Where
    f may jump, the root itself can miss: the answer is a point seen to meet.

    `measure`: judge the precision on measure(x) instead of x (rising, positive above `lo`):
    a search run on an axis that only approximates the quantity asked for (a rate read off a
    grid) still answers to `precision` of that quantity. The passes between the two points then
    shrink the tolerance by how much faster the measure moves than x there (at most
    MEASURE_PASSES of them)."""
    seen = _Seen(f, lo, hi, f_lo, f_hi)
    res = find_root(seen.g, lo, hi, f_lo=f_lo, f_hi=f_hi, xtol=xtol, rtol=rtol)
    met, missed = seen.ends(res, lo, hi)
    fine_rtol = min(rtol, 0.1 * precision)
    res, met, missed = _close_in(seen, res, met, missed, precision, fine_rtol, measure)
    if met > lo:
        return Edge(met, missed, res)
    return _decades_below(seen, res, missed, decades, fine_rtol)


class _Seen:
    """f at every point `last_met` has evaluated, the bracket's ends included: a point is never
    evaluated twice, and where Brent lands on a point its own value says whether it met."""

    def __init__(self, f: Callable[[float], float], lo: float, hi: float, f_lo: float, f_hi: float) -> None:
        self.f = f
        self.lo, self.hi, self.f_lo, self.f_hi = lo, hi, f_lo, f_hi
        self.values: dict[float, float] = {}

    def g(self, x: float) -> float:
        """f(x), remembered."""
        v = self.f(x)
        self.values[x] = v
        return v

    def value(self, x: float) -> float:
        """f at a point already seen (an end, or a call) without a call; else a call."""
        if x in self.values:
            return self.values[x]
        return self.f_lo if x == self.lo else self.f_hi if x == self.hi else self.g(x)

    def ends(self, res: RootResult, a: float, b: float) -> tuple[float, float]:
        """The last point that met and the first that missed after a search of [a, b]: its
        final bracket, or the root where Brent landed on the edge exactly (f piecewise affine
        can) and f met there."""
        if res.final_bracket is None:
            return a, b
        met, missed = res.final_bracket
        r = res.root
        if r is not None and r > met and self.values.get(r, math.inf) <= 0.0:
            met = r  # Brent landed on the edge exactly (f piecewise affine can): it meets
        return met, missed


def _close_in(
    seen: _Seen,
    res: RootResult,
    met: float,
    missed: float,
    precision: float,
    fine_rtol: float,
    measure: Callable[[float], float] | None,
) -> tuple[RootResult, float, float]:
    """Brent again between the last point that met and the first that missed while they are
    further apart than `precision` (on x, or on `measure`: up to MEASURE_PASSES passes): a
    tolerance on the whole first bracket leaves an edge far below its top coarse. Returns the
    search as one (the first bracket, every pass's work, the final bracket) and the two points."""
    for _ in range(MEASURE_PASSES if measure is not None else 1):
        pass_xtol = _pass_xtol(seen.lo, met, missed, precision, measure)
        if pass_xtol is None:
            break
        fine = find_root(
            seen.g,
            met,
            missed,
            f_lo=seen.value(met),
            f_hi=seen.value(missed),
            xtol=pass_xtol,
            rtol=fine_rtol,
        )
        met, missed = seen.ends(fine, met, missed)
        res = replace(  # one search: the first bracket, every pass's work, the final bracket
            res,
            root=fine.root,
            converged=fine.converged,
            iterations=res.iterations + fine.iterations,
            function_calls=res.function_calls + fine.function_calls,
            reason=fine.reason,
            final_bracket=fine.final_bracket,
        )
    return res, met, missed


def _pass_xtol(
    lo: float, met: float, missed: float, precision: float, measure: Callable[[float], float] | None
) -> float | None:
    """The tolerance on x for one more pass between `met` and `missed`, or None when no pass is
    due (no point above `lo` met, or the two are within `precision` already)."""
    if not (met > lo and missed > met):
        return None
    stretch = 1.0
    if measure is None:
        if not missed - met > precision * met:
            return None
    else:
        m_met, m_missed = measure(met), measure(missed)
        if not m_met > 0.0 or m_missed - m_met <= precision * m_met:
            return None
        # The measure's relative gap over x's: how much faster it moves here, so that the
        # next pass's tolerance on x lands within the precision on the measure.
        stretch = max(1.0, (m_missed - m_met) * met / (m_met * (missed - met)))
    return 0.9 * precision * met / stretch


def _decades_below(seen: _Seen, res: RootResult, missed: float, decades: int, fine_rtol: float) -> Edge:
    """Where no point above `lo` met: up to `decades` points below the first miss by factors of
    10 towards `lo`, then Brent between the first that meets and the one above it; else the
    bracket's low end and the least point tried (`res` the search that got there)."""
    lo = seen.lo
    top, f_top = missed, seen.value(missed)
    for _ in range(decades):
        below = lo + 0.1 * (top - lo)
        f_below = seen.g(below)
        if f_below <= 0.0:
            # to a tenth of the precision of the decade's low end (its top is 10x the edge at most:
            # a tolerance on the top left the two points up to ~1% of the edge apart)
            near = find_root(
                seen.g, below, top, f_lo=f_below, f_hi=f_top, xtol=fine_rtol * (below - lo), rtol=fine_rtol
            )
            met, missed = seen.ends(near, below, top)
            return Edge(met, missed, near)
        top, f_top = below, f_below
    return Edge(lo, top, res)


def first_sign_change(xs: Sequence[float], ys: Sequence[float]) -> int | None:
    """Index i of the first pair (xs[i], xs[i+1]) whose values have opposite signs (or where
    ys[i+1] is exactly 0); None when the values never change sign. NaNs count as no sign."""
    if len(xs) != len(ys):
        raise ValueError(f"xs and ys differ in length ({len(xs)} vs {len(ys)})")
    for i in range(len(ys) - 1):
        a, b = ys[i], ys[i + 1]
        if math.isnan(a) or math.isnan(b):
            continue
        if b == 0.0 or (a < 0) != (b < 0):
            return i
    return None
