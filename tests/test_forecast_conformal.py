"""The conformal forecaster (planner/forecast/conformal.py, docs/forecast.md "Methods"): mstl's
point with quantiles from mstl's own forecast errors at daily origins inside the history.

Synthetic series on purpose (known continuations); its figures on real traffic are pinned by
tests/test_forecast_backtest_real.py and tests/test_forecast_backtest_servegen.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from planner.forecast import forecast
from planner.forecast import mstl as mstl_module
from planner.forecast.base import Prepared, prepare
from planner.forecast.conformal import (
    MAX_CALIBRATION_ORIGINS,
    calibration_errors,
    calibration_origins,
    conformal_quantile,
)
from tests.test_forecast import DAY, WEEK, _series, _sine


def test_calibration_origins_are_daily_inside_the_history() -> None:
    """By hand: 7 days (168 buckets), 24 ahead: the last origin leaves 24 buckets (144), the
    first needs over two days (49) before it: 144, 120, 96, 72 (48 is too early)."""
    assert calibration_origins(168, DAY, DAY) == [72, 96, 120, 144]
    assert calibration_origins(72, DAY, DAY) == []  # 48 < 49: no origin
    # a week ahead over 90 days: the latest 14, a day apart, the last one a week before the end
    got = calibration_origins(2160, DAY, WEEK)
    assert len(got) == MAX_CALIBRATION_ORIGINS == 14
    assert got[-1] == 2160 - WEEK and np.all(np.diff(got) == DAY)


def test_conformal_rank_is_ceil_m_plus_1_times_q() -> None:
    """Nine errors 1..9: q 0.9 -> rank ceil(10 x 0.9) = 9 -> 9; q 0.5 -> rank 5 -> 5;
    q 0.99 -> rank 10, past m: the largest, 9; q 0.01 -> rank 1 -> 1."""
    errors = np.array([5.0, 3.0, 9.0, 1.0, 7.0, 2.0, 8.0, 4.0, 6.0])
    assert [conformal_quantile(errors, q) for q in (0.9, 0.5, 0.99, 0.01)] == [9.0, 5.0, 9.0, 1.0]


def test_errors_replay_mstl_fitted_before_each_origin_only() -> None:
    """The errors are mstl's own point forecasts made at each origin from the buckets before it,
    against the history after it: recomputed here with mstl directly."""
    y = np.maximum(_sine(10 * DAY) + np.random.default_rng(3).normal(0.0, 2.0, 10 * DAY), 0.0)
    prep = prepare(_series(y))
    origins = calibration_origins(prep.n, DAY, DAY)
    assert origins == [72, 96, 120, 144, 168, 192, 216]
    got = calibration_errors(prep, origins, DAY)
    r = prep.rates_per_s
    expected = [
        r[o : o + DAY] - mstl_module.forecast(Prepared(r[:o], 3600.0, 0, "x"), DAY, [0.5]).point_per_s
        for o in origins
    ]
    np.testing.assert_allclose(got, np.concatenate(expected), rtol=0, atol=1e-12)


def test_quantiles_are_the_point_plus_the_conformal_error_quantile() -> None:
    y = np.maximum(_sine(10 * DAY) + np.random.default_rng(3).normal(0.0, 2.0, 10 * DAY), 0.0)
    fc = forecast(_series(y), horizon_buckets=DAY, quantiles=[0.5, 0.9], method="conformal")
    base = forecast(_series(y), horizon_buckets=DAY, quantiles=[0.5], method="mstl")
    errors = calibration_errors(prepare(_series(y)), calibration_origins(10 * DAY, DAY, DAY), DAY)
    assert errors.size == 7 * DAY
    np.testing.assert_array_equal(fc.point_per_s, base.point_per_s)
    for q in (0.5, 0.9):
        np.testing.assert_allclose(
            fc.quantiles_per_s[q], np.maximum(base.point_per_s + conformal_quantile(errors, q), 0.0)
        )
    assert fc.notes == [
        *base.notes,  # mstl's own (under two weeks: the weekly season dropped)
        "conformal: quantiles from 168 forecast errors of mstl at 7 daily origins inside the history "
        f"(24 buckets ahead each): q0.5 {conformal_quantile(errors, 0.5):+.4g}/s, "
        f"q0.9 {conformal_quantile(errors, 0.9):+.4g}/s",
    ]


def test_p90_covers_the_next_week_where_mstls_own_does_not() -> None:
    """A daily sine with Gaussian noise (sd 2), three weeks fitted, the next week held out, three
    seeds pooled (504 hours): the conformal p90 holds 94.6% of the held-out hours (measured),
    mstl's own p90 (the decomposition's residual, which the fitted seasons shrink) 68.9%."""
    covered = {"conformal": 0, "mstl": 0}
    for seed in (0, 1, 2):
        y = np.maximum(_sine(4 * WEEK) + np.random.default_rng(seed).normal(0.0, 2.0, 4 * WEEK), 0.0)
        for method in covered:
            fc = forecast(_series(y[: 3 * WEEK]), horizon_buckets=WEEK, quantiles=[0.9], method=method)
            covered[method] += int(np.sum(y[3 * WEEK :] <= fc.quantiles_per_s[0.9]))
    assert covered["conformal"] / (3 * WEEK) == pytest.approx(0.946, abs=0.001)
    assert covered["mstl"] / (3 * WEEK) == pytest.approx(0.689, abs=0.001)


def test_a_history_without_a_calibration_origin_keeps_mstls_quantiles() -> None:
    y = _sine(3 * DAY) + np.random.default_rng(5).normal(0.0, 1.0, 3 * DAY)
    fc = forecast(_series(y), horizon_buckets=DAY, quantiles=[0.9], method="conformal")
    base = forecast(_series(y), horizon_buckets=DAY, quantiles=[0.9], method="mstl")
    np.testing.assert_array_equal(fc.quantiles_per_s[0.9], base.quantiles_per_s[0.9])
    assert fc.method == "conformal"
    assert any("holds no calibration origin" in n and "mstl's own quantiles kept" in n for n in fc.notes)


def test_same_history_same_bytes() -> None:
    y = np.maximum(_sine(2 * WEEK) + np.random.default_rng(9).normal(0.0, 2.0, 2 * WEEK), 0.0)
    a = forecast(_series(y), horizon_buckets=48, quantiles=[0.9, 0.99], method="conformal")
    b = forecast(_series(y), horizon_buckets=48, quantiles=[0.9, 0.99], method="conformal")
    for q in (0.9, 0.99):
        assert a.quantiles_per_s[q].tobytes() == b.quantiles_per_s[q].tobytes()
