"""solvers.fit: bounded least squares with identifiability diagnostics, on plain numbers."""

from __future__ import annotations

import numpy as np
import pytest

from solvers.fit import least_squares_fit

X = np.linspace(0.0, 1.0, 20)


def test_recovers_a_line_and_reports_standard_errors() -> None:
    y = 3.0 + 2.0 * X

    def resid(p: np.ndarray) -> np.ndarray:
        return p[0] + p[1] * X - y

    res = least_squares_fit(
        resid, ["a", "b"], [[0.0, 0.0], [10.0, -5.0]], [-100, -100], [100, 100], noise_floor=0.01
    )
    assert res.params == pytest.approx({"a": 3.0, "b": 2.0}, abs=1e-8)
    assert res.rms == pytest.approx(0.0, abs=1e-8)
    for d in res.diagnostics:
        assert d.identifiable(0.05)
        assert 0 < d.std_error < 0.02  # from the 1% noise floor, not a claimed infinite precision
        assert 0 < d.independence <= 1


def test_collinear_parameters_are_flagged_with_their_partner() -> None:
    y = 1.0 + 5.0 * X

    def resid(p: np.ndarray) -> np.ndarray:  # only a + b matters
        return p[0] + p[1] + p[2] * X - y

    res = least_squares_fit(resid, ["a", "b", "c"], [[0.5, 0.5, 1.0]], [-10, -10, -10], [10, 10, 10])
    bad = {d.name: d for d in res.unidentifiable(0.05)}
    assert set(bad) == {"a", "b"}
    assert bad["a"].most_aligned == "b" and bad["a"].alignment == pytest.approx(1.0)
    assert res.params["c"] == pytest.approx(5.0)


def test_parameter_without_effect_is_flagged() -> None:
    def resid(p: np.ndarray) -> np.ndarray:
        return p[0] * X - 2.0 * X + 0.0 * p[1]

    res = least_squares_fit(resid, ["k", "ghost"], [[1.0, 0.3]], [0, 0], [10, 10])
    (bad,) = res.unidentifiable(0.05)
    assert bad.name == "ghost" and bad.sensitivity == 0.0


def test_kink_effect_is_zero_on_one_side() -> None:
    """max(a, b*x): if every row sits on the `a` side, b is not pinned."""
    y = np.full_like(X, 5.0)

    def resid(p: np.ndarray) -> np.ndarray:
        return np.maximum(p[0], p[1] * X) / y - 1

    res = least_squares_fit(resid, ["a", "b"], [[1.0, 1.0]], [0, 0], [100, 100])
    assert [d.name for d in res.unidentifiable(0.05)] == ["b"]


def test_a_bound_the_data_push_against_pins_the_parameter() -> None:
    y = -1.0 + 0.0 * X  # wants a = -1, bounded at 0

    def resid(p: np.ndarray) -> np.ndarray:
        return p[0] + p[1] * X - y

    res = least_squares_fit(resid, ["a", "b"], [[1.0, 1.0]], [0, -10], [10, 10])
    a = res.diagnostics[0]
    assert a.value == pytest.approx(0.0, abs=1e-9)
    assert a.binding_bound and a.identifiable(0.05) and a.std_error == 0.0


def test_best_of_several_starts() -> None:
    """A two-well objective: the start near the deeper well wins."""

    def resid(p: np.ndarray) -> np.ndarray:
        x = p[0]
        return np.array([(x - 1) * (x - 4) * 0.1, 0.3 * (x - 4)])

    res = least_squares_fit(resid, ["x"], [[0.0], [5.0]], [-10], [10])
    assert res.params["x"] == pytest.approx(4.0, abs=1e-6)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        least_squares_fit(lambda p: p, ["a"], [[0.0]], [1.0], [0.0])
    with pytest.raises(ValueError):
        least_squares_fit(lambda p: p, ["a"], [], [0.0], [1.0])
