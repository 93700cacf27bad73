"""solvers.rootfind: bracketed Brent root finding with diagnostics."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from solvers.rootfind import Expansion, find_root, first_sign_change, last_met


def test_finds_a_straddled_root_with_diagnostics() -> None:
    r = find_root(lambda x: x * x - 2.0, 0.0, 2.0)
    assert r.converged and r.reason == ""
    assert r.root == pytest.approx(math.sqrt(2.0), abs=1e-10)
    assert r.bracket == (0.0, 2.0)
    assert r.f_bracket == (-2.0, 2.0)
    assert r.expansions == 0
    assert 0 < r.iterations < 20
    assert r.function_calls >= 2  # both ends, plus Brent's interior points
    lo, hi = r.final_bracket or (math.nan, math.nan)
    assert lo * lo - 2.0 < 0 < hi * hi - 2.0  # the final bracket still straddles the root
    assert abs(hi - lo) < 1e-8


def test_known_end_values_are_not_recomputed() -> None:
    calls: list[float] = []

    def f(x: float) -> float:
        calls.append(x)
        return x - 0.3

    r = find_root(f, 0.0, 1.0, f_lo=-0.3, f_hi=0.7)
    assert r.converged and r.root == pytest.approx(0.3)
    assert 0.0 not in calls and 1.0 not in calls
    assert r.function_calls == len(calls)


def test_no_straddle_is_explained_not_raised() -> None:
    r = find_root(lambda x: x * x + 1.0, -1.0, 1.0)
    assert not r.converged and r.root is None
    assert "same sign" in r.reason and "does not straddle" in r.reason
    assert r.f_bracket == (2.0, 2.0)
    assert r.to_dict()["reason"] == r.reason


def test_expansion_widens_until_it_straddles() -> None:
    r = find_root(lambda x: x - 37.0, 0.0, 1.0, expand=Expansion(factor=2.0, max_steps=10))
    assert r.converged and r.root == pytest.approx(37.0)
    assert r.expansions > 0
    assert r.bracket[0] == 0.0 and r.bracket[1] >= 37.0


def test_expansion_gives_up_with_a_reason() -> None:
    r = find_root(lambda x: 1.0 + x * x, 0.0, 1.0, expand=Expansion(max_steps=3))
    assert not r.converged and r.expansions == 3
    assert "after 3 expansions" in r.reason
    r = find_root(lambda x: 1.0 + x, 0.0, 1.0, expand=Expansion(limit_hi=1.0))
    assert not r.converged and "limits" in r.reason


def test_expansion_downwards() -> None:
    r = find_root(lambda x: x + 5.0, 0.0, 1.0, expand=Expansion(side="lo"))
    assert r.converged and r.root == pytest.approx(-5.0)


def test_nan_and_bad_brackets() -> None:
    r = find_root(lambda x: math.nan if x > 0.5 else -1.0, 0.0, 1.0)
    assert not r.converged and "NaN" in r.reason
    r = find_root(lambda x: x, 0.0, math.inf)
    assert not r.converged and "not finite" in r.reason
    # Reversed ends are accepted.
    r = find_root(lambda x: x - 0.25, 1.0, 0.0)
    assert r.converged and r.root == pytest.approx(0.25)


def test_root_at_an_end() -> None:
    r = find_root(lambda x: x, 0.0, 1.0)
    assert r.converged and r.root == 0.0 and r.iterations == 0


def test_discontinuous_function_converges_to_the_jump() -> None:
    r = find_root(lambda x: -1.0 if x < 0.7 else 1.0, 0.0, 1.0, xtol=1e-9, rtol=1e-12)
    assert r.converged and r.root == pytest.approx(0.7, abs=1e-8)
    lo, hi = r.final_bracket or (math.nan, math.nan)
    assert lo < 0.7 <= hi


def test_bad_expansion_settings() -> None:
    with pytest.raises(ValueError):
        Expansion(factor=0.0)
    with pytest.raises(ValueError):
        Expansion(side="up")


def test_first_sign_change() -> None:
    assert first_sign_change([0, 1, 2, 3], [-1, -0.5, 0.5, 1]) == 1
    assert first_sign_change([0, 1, 2], [1, 2, 3]) is None
    assert first_sign_change([0, 1, 2], [1, math.nan, -1]) is None  # NaNs never count
    assert first_sign_change([0, 1], [-1, 0]) == 0
    with pytest.raises(ValueError):
        first_sign_change([0, 1], [0])


@settings(max_examples=60, deadline=None)
@given(
    root=st.floats(-1e3, 1e3),
    slope=st.floats(0.01, 100.0),
    width=st.floats(0.1, 1e3),
)
def test_linear_roots_are_found(root: float, slope: float, width: float) -> None:
    r = find_root(lambda x: slope * (x - root), root - width, root + 0.5 * width, xtol=1e-12, rtol=1e-12)
    assert r.converged and r.root is not None
    assert r.root == pytest.approx(root, abs=1e-8 * max(1.0, abs(root), width))


def _interior_nan(x: float) -> float:
    return math.nan if 0.4 < x < 0.6 else x - 0.5


CASES = [
    (lambda x: x**3 - 2.0 * x - 5.0, 2.0, 3.0, {}),
    (lambda x: -1.0 if x < 0.7 else 1.0, 0.0, 1.0, {"xtol": 1e-9, "rtol": 1e-12}),
    (lambda x: math.exp(x) - 10.0, 0.0, 5.0, {"xtol": 1e-4, "rtol": 1e-4}),
    (lambda x: math.atan(x - 1.3) + 0.1, 0.0, 3.0, {"maxiter": 2}),  # stops unconverged
    (lambda x: x - 0.25, 1.0, 0.0, {"f_lo": 0.75}),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_direct_solver_equals_scipy_brentq(case: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """find_root calls brentq's C solver itself (rootfind._brent); the fallback, through
    scipy.optimize.brentq (its literal reference), gives the same RootResult field for field."""
    import solvers.rootfind as rf

    f, lo, hi, kw = CASES[case]
    assert rf._brent_c() is not None  # the SciPy under test has it: the fast path runs
    fast = find_root(f, lo, hi, **kw)
    monkeypatch.setattr(rf, "_BRENT_C", None)
    ref = find_root(f, lo, hi, **kw)
    assert fast == ref
    assert fast.reason == ref.reason and (case != 3 or not fast.converged)


def test_direct_solver_raises_on_nan_like_brentq(monkeypatch: pytest.MonkeyPatch) -> None:
    import solvers.rootfind as rf

    with pytest.raises(ValueError, match="is NaN; solver cannot continue") as fast:
        find_root(_interior_nan, 0.0, 1.0)
    monkeypatch.setattr(rf, "_BRENT_C", None)
    with pytest.raises(ValueError, match="is NaN; solver cannot continue") as ref:
        find_root(_interior_nan, 0.0, 1.0)
    assert str(fast.value) == str(ref.value)


def test_a_changed_private_solver_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """The private C routine is used only if it answers a known problem as brentq does: one
    whose shape changed (here: other arguments) leaves the public brentq in charge."""
    import solvers.rootfind as rf

    def changed(f, a, b, xtol, rtol, maxiter):  # type: ignore[no-untyped-def]
        return 0.0, 0, 0, 0

    monkeypatch.setattr(rf, "_private_brent", lambda: changed)
    monkeypatch.setattr(rf, "_BRENT_C", None)
    monkeypatch.setattr(rf, "_BRENT_C_LOOKED", False)
    assert rf._brent_c() is None
    res = find_root(lambda x: x - 0.25, 0.0, 1.0)
    assert res.converged and res.root == pytest.approx(0.25)


# ---- last_met: the edge of {f <= 0} ---------------------------------------------------------


def test_last_met_refines_an_edge_far_below_the_bracket_to_its_precision() -> None:
    """f = ln(1 + 100 x) - ln 2 on [0, 1] (root 0.01) with a tolerance of 1e-3 of the bracket:
    Brent alone stops with its last point met and first missed 5% apart around the root; the
    second pass closes them to 1% of the answer, met below the root and missed above it, and
    the diagnostics count every pass's calls against the first pass's bracket."""
    calls: list[float] = []

    def f(x: float) -> float:
        calls.append(x)
        return math.log1p(100.0 * x) - math.log(2.0)

    f_lo, f_hi = -math.log(2.0), math.log(50.5)
    first = find_root(f, 0.0, 1.0, f_lo=f_lo, f_hi=f_hi, xtol=1e-3, rtol=1e-3)
    assert first.final_bracket is not None
    met0, missed0 = first.final_bracket
    assert missed0 - met0 > 0.04 * met0  # coarse: a tolerance of the whole bracket
    calls.clear()
    edge = last_met(f, 0.0, 1.0, f_lo=f_lo, f_hi=f_hi, xtol=1e-3, rtol=1e-3, precision=1e-2)
    assert edge.met < 0.01 < edge.missed
    assert edge.missed - edge.met <= 1e-2 * edge.met
    assert edge.search.bracket == (0.0, 1.0)  # the first pass's bracket
    assert edge.search.function_calls == len(calls) > first.function_calls
    assert edge.search.final_bracket == (edge.met, edge.missed)


def test_last_met_judges_its_precision_on_a_measure() -> None:
    """A search on an axis u for a quantity m = u^2 (the capacity's rate axis against the
    states' own rates): f jumps from -1 to +1 where m passes 0.2 (u = 0.447). Brent to 0.9% of
    u ends with met and missed 0.88% apart in u but 1.76% in m; judged on m, one more pass
    between them (its tolerance shrunk by m's stretch, 2x here) closes them to 0.88% of m."""

    def f(u: float) -> float:
        return -1.0 if u * u < 0.2 else 1.0

    kw: dict[str, Any] = {"f_lo": -1.0, "f_hi": 1.0, "xtol": 1e-4, "rtol": 0.009, "precision": 1e-2}
    on_u = last_met(f, 0.0, 1.0, **kw)
    assert (on_u.missed - on_u.met) / on_u.met == pytest.approx(0.00877, abs=1e-5)
    assert (on_u.missed**2 - on_u.met**2) / on_u.met**2 == pytest.approx(0.01762, abs=1e-5)
    on_m = last_met(f, 0.0, 1.0, **kw, measure=lambda u: u * u)
    assert on_m.met * on_m.met < 0.2 <= on_m.missed * on_m.missed
    assert (on_m.missed**2 - on_m.met**2) / on_m.met**2 == pytest.approx(0.00879, abs=1e-5)
    assert on_m.search.function_calls == on_u.search.function_calls + 1
    assert on_m.search.final_bracket == (on_m.met, on_m.missed)


def test_last_met_answers_a_point_that_met_where_f_jumps_over_zero() -> None:
    """A step: f = -1 below 0.3, +1 from 0.3 on. No root exists; met is a point that met
    (below 0.3), missed one that did not, within 1% of met (every answer is a point seen)."""
    edge = last_met(
        lambda x: -1.0 if x < 0.3 else 1.0,
        0.0,
        1.0,
        f_lo=-1.0,
        f_hi=1.0,
        xtol=1e-3,
        rtol=1e-3,
        precision=1e-2,
    )
    assert edge.met < 0.3 <= edge.missed
    assert edge.missed - edge.met <= 1e-2 * edge.met


def test_last_met_takes_an_exact_landing_on_the_edge() -> None:
    """f = x - 0.5, affine: the first secant step lands on 0.5 exactly, where f = 0 meets."""
    edge = last_met(lambda x: x - 0.5, 0.0, 1.0, f_lo=-0.5, f_hi=0.5, xtol=1e-3, rtol=1e-3, precision=1e-2)
    assert edge.met == 0.5


def test_last_met_goes_down_by_decades_below_the_first_tolerance_or_stops() -> None:
    """f = x - 1e-6 on [0, 1] with a tolerance of 1e-3: no point Brent tries above 0 meets.
    With decades, points 10x lower each until one meets (1e-6 at the sixth), then Brent
    between it and the point above, to 1e-3 of that; without, met is the low end (0) and
    missed the least point tried."""
    edge = last_met(
        lambda x: x - 1e-6, 0.0, 1.0, f_lo=-1e-6, f_hi=1.0, xtol=1e-3, rtol=1e-3, precision=1e-2, decades=9
    )
    assert 0.0 < edge.met <= 1e-6 < edge.missed <= 1e-5
    assert edge.missed - edge.met <= 1e-3 * 1e-5 * 1.000001
    none = last_met(
        lambda x: x - 1e-6, 0.0, 1.0, f_lo=-1e-6, f_hi=1.0, xtol=1e-3, rtol=1e-3, precision=1e-2, decades=0
    )
    assert none.met == 0.0 and 1e-6 < none.missed <= 2e-3
    few = last_met(
        lambda x: x - 1e-6, 0.0, 1.0, f_lo=-1e-6, f_hi=1.0, xtol=1e-3, rtol=1e-3, precision=1e-2, decades=2
    )
    assert few.met == 0.0 and few.missed == pytest.approx(1e-2 * none.missed)  # two decades tried


@given(
    root=st.floats(1e-6, 0.999),
    slope=st.floats(0.01, 100.0),
    jump=st.floats(0.0, 5.0),
    curve=st.sampled_from(["affine", "log", "sqrt"]),
)
@settings(max_examples=200, deadline=None)
def test_last_met_brackets_a_rising_edge_to_its_precision(
    root: float, slope: float, jump: float, curve: str
) -> None:
    """Any rising f crossing 0 once, smooth or jumping there, with the edge anywhere from 1e-6
    to the top of [0, 1]: met meets, missed misses, the edge lies between them, and they are
    within 1% of met (the decades reach 1e-9 of the bracket)."""
    shape = {"affine": lambda x: x, "log": lambda x: math.log1p(1e3 * x), "sqrt": math.sqrt}[curve]

    def f(x: float) -> float:
        return slope * (shape(x) - shape(root)) + (jump if x >= root else 0.0)

    edge = last_met(f, 0.0, 1.0, f_lo=f(0.0), f_hi=f(1.0), xtol=1e-3, rtol=1e-3, precision=1e-2, decades=9)
    # the edge between them, up to f's own rounding there (f can read 0 a few ulps off it)
    assert 0.0 < edge.met <= root * (1 + 1e-12) and root * (1 - 1e-12) <= edge.missed
    assert f(edge.met) <= 0.0
    assert f(edge.missed) > 0.0 or edge.missed == edge.met  # or Brent landed on the edge exactly
    assert edge.missed - edge.met <= 1e-2 * edge.met * (1 + 1e-9)
