"""Forecasts of request rates from observed traffic (issue #36, `capplan forecast`, docs/forecast.md).

One forecaster per module behind `FORECASTERS` (name -> `forecast(prepared, horizon_buckets,
quantiles) -> Forecast`): `mstl` (the default: daily + weekly seasons and a smoothed trend),
`conformal` (mstl's point, its upper bound calibrated on mstl's own past forecast errors), `ets` (exponential smoothing, one
daily season), `seasonal_peak` (the last week's high at each time of day), and the baselines
`seasonal_naive` (last week's same hour) and `last_week_peak` (the last 7 days' peak, flat).
`forecast()` prepares the history (gaps interpolated and counted), runs one, and applies growth.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import MappingProxyType

from planner.errors import InvalidInput, echo
from planner.forecast import (
    conformal,
    ets,
    last_week_peak,
    mstl,
    seasonal_naive,
    seasonal_peak,
)
from planner.forecast.base import Forecast, Prepared, check_quantiles, prepare
from planner.forecast.growth import Growth, growth_factors
from planner.history.series import HistorySeries

__all__ = ["DEFAULT_METHOD", "FORECASTERS", "Forecast", "Growth", "forecast"]

ForecastFn = Callable[[Prepared, int, Sequence[float]], Forecast]
FORECASTERS: MappingProxyType[str, ForecastFn] = MappingProxyType(
    {
        m.NAME: m.forecast
        for m in (mstl, conformal, ets, seasonal_peak, seasonal_naive, last_week_peak)
    }
)
BASELINES = ("seasonal_naive", "last_week_peak")
DEFAULT_METHOD = "mstl"
MAX_HORIZON_BUCKETS = 100_000  # the workload schema's MAX_BUCKETS


def method_named(name: str, field: str = "--method") -> ForecastFn:
    fn = FORECASTERS.get(name)
    if fn is None:
        raise InvalidInput(field, f"unknown method {echo(name)}; one of {', '.join(FORECASTERS)}")
    return fn


def forecast(
    series: HistorySeries,
    *,
    horizon_buckets: int,
    quantiles: Sequence[float],
    method: str = DEFAULT_METHOD,
    growth: Growth | None = None,
) -> Forecast:
    """`horizon_buckets` future buckets (of the history's width) after the history's end, at
    each quantile (0.01 .. 0.999), by `method`, times `growth` compounded from the end."""
    if not 1 <= horizon_buckets <= MAX_HORIZON_BUCKETS:
        raise InvalidInput(
            "--horizon",
            f"must be 1 to {MAX_HORIZON_BUCKETS} buckets of {series.bucket_s:g} s, got {horizon_buckets}",
        )
    qs = check_quantiles(quantiles, "--quantile")
    fn = method_named(method)
    prep = prepare(series)
    result = fn(prep, horizon_buckets, qs)
    if prep.gap_buckets:
        result.notes.append(
            f"{prep.gap_buckets} of {prep.n} history buckets were unobserved and interpolated for the fit"
        )
    if growth is not None:
        result = result.scaled(growth_factors(growth, horizon_buckets, series.bucket_s))
        result.notes.append(f"growth {growth.text} applied")
    return result
