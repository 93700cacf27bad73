"""Seasonal naive: each future bucket is the same bucket of the last observed week (the same hour
last week), repeated; the baseline every seasonal model must beat. Quantiles: the point plus the
empirical quantiles of the history's week-over-week differences y[t] - y[t - week]."""

from __future__ import annotations

from collections.abc import Sequence

from planner.forecast.base import Forecast, Prepared, need_buckets, tile_last_cycle, with_residual_quantiles

NAME = "seasonal_naive"


def forecast(prep: Prepared, horizon: int, quantiles: Sequence[float]) -> Forecast:
    week = prep.week
    if week is None:
        from planner.errors import InvalidInput

        raise InvalidInput("--bucket", f"a bucket of {prep.bucket_s:g} s does not divide a week")
    need_buckets(prep, week, "seasonal_naive (last week's same hour)")
    y = prep.rates_per_s
    point = tile_last_cycle(y, week, horizon)
    residuals = y[week:] - y[:-week] if prep.n > week else y[:0]
    return Forecast(NAME, prep.bucket_s, point, with_residual_quantiles(point, residuals, quantiles))
