"""MSTL: statsmodels' multi-seasonal STL splits the history into a trend, a daily and a weekly
season and a residual; the trend is carried forward by exponential smoothing (statsmodels'
`ExponentialSmoothing`, additive damped trend), each season by repeating its last cycle.
Quantiles: the point plus the empirical quantiles of the decomposition's residual (no
simulation; the interval is the same width at every step).

Fallback (declared in the forecast's notes): under two weeks of history the weekly season is
dropped and the day's kept; at two days or less the history is refused."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from planner.forecast.base import (
    Forecast,
    Prepared,
    need_buckets,
    tile_last_cycle,
    with_residual_quantiles,
)

NAME = "mstl"


def forecast(prep: Prepared, horizon: int, quantiles: Sequence[float]) -> Forecast:
    from statsmodels.tsa.holtwinters import ExponentialSmoothing
    from statsmodels.tsa.seasonal import MSTL

    day, week = prep.day, prep.week
    if day is None or week is None:
        from planner.errors import InvalidInput

        raise InvalidInput("--bucket", f"a bucket of {prep.bucket_s:g} s does not divide a day")
    need_buckets(prep, 2 * day + 1, "mstl (a daily season) needs over two days and")
    notes: list[str] = []
    # statsmodels' MSTL drops a period with 2 x period >= the history's length
    periods = [day, week] if prep.n > 2 * week else [day]
    if len(periods) == 1:
        notes.append(
            f"mstl: the history ({prep.length_text()}) is not over two weeks: weekly season dropped, daily kept"
        )
    y = prep.rates_per_s
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = MSTL(y, periods=periods).fit()
        trend = np.asarray(res.trend, dtype=np.float64)
        trend_fit = ExponentialSmoothing(
            trend, trend="add", damped_trend=True, initialization_method="heuristic"
        ).fit()
        trend_ahead = np.asarray(trend_fit.forecast(horizon), dtype=np.float64)
    seasonal = np.asarray(res.seasonal, dtype=np.float64).reshape(prep.n, -1)
    point = trend_ahead.copy()
    for j, period in enumerate(periods):
        point += tile_last_cycle(seasonal[:, j], period, horizon)
    point = np.maximum(point, 0.0)
    residuals = np.asarray(res.resid, dtype=np.float64)
    return Forecast(NAME, prep.bucket_s, point, with_residual_quantiles(point, residuals, quantiles), notes)
