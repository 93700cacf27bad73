"""History -> forecast -> workload, the one path `capplan forecast` and a plan request's
`workload: {history: ..., forecast: {...}}` (planner/schema/history_workload.py) share: the same
history reader, forecaster and `workload_block`, so a plan from history plans exactly the
workload `capplan forecast` prints (docs/forecast.md "Planning from history").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from planner.errors import InvalidInput
from planner.forecast import forecast
from planner.forecast.base import Forecast
from planner.forecast.growth import parse_growth
from planner.forecast.to_workload import workload_block
from planner.history.series import HistorySeries

if TYPE_CHECKING:
    from planner.schema.history_workload import HistorySource, HistoryWorkload
    from planner.workload import Workload

__all__ = ["ForecastWorkload", "build_history_workload", "forecast_workload", "history_series"]


@dataclass(frozen=True)
class ForecastWorkload:
    """The `workload:` mapping at one quantile, the forecast it came from and the notes (the
    forecaster's, then the workload's)."""

    block: dict[str, Any]
    forecast: Forecast
    notes: list[str]


def forecast_workload(
    series: HistorySeries,
    *,
    horizon_s: float,
    quantile: float,
    method: str,
    growth: str | None,
    name: str | None = None,
) -> ForecastWorkload:
    """The forecast of `series` over `horizon_s` (whole buckets of the history's width) at
    `quantile`, as the workload mapping `capplan plan` reads. Errors name the CLI's flags
    (`--horizon`, `--quantile`, `--method`, `--growth`); callers with other names re-root them."""
    horizon = round(horizon_s / series.bucket_s)
    g = None if growth is None else parse_growth(growth)
    fc = forecast(series, horizon_buckets=horizon, quantiles=[quantile], method=method, growth=g)
    block, notes = workload_block(fc, quantile, series, name=name)
    return ForecastWorkload(block, fc, [*fc.notes, *notes])


def history_series(source: HistorySource, bucket_s: float, field: str) -> HistorySeries:
    """The history a request names: its file (the caller resolved a relative path), or its
    inline points read as the plain rate CSV's rows."""
    from planner.history import rate_csv
    from planner.history.origin import Source
    from planner.history.reader import read_history

    if source.path is not None:
        return read_history(source.path, bucket_s=bucket_s, format=source.format, field=f"{field}.path")
    assert source.points is not None
    rows: list[rate_csv.Row] = []
    for i, p in enumerate(source.points):
        if rows and p.timestamp <= rows[-1][0]:
            raise InvalidInput(f"{field}.points[{i}].timestamp", "must be after the previous point's")
        rows.append((p.timestamp, p.requests_per_s, p.prompt_tokens_mean, p.output_tokens_mean, None))
    return rate_csv.bucketed(rows, bucket_s, Source(f"{field}.points", "inline points", "csv"))


_FLAG_FIELDS = {"--horizon": "horizon", "--quantile": "quantile", "--method": "method", "--growth": "growth"}


def build_history_workload(spec: HistoryWorkload, root: str) -> Workload:
    """The workload a `{history, forecast}` request forecasts (a file path as given: the caller
    resolves a relative one); errors named under `root`."""
    from planner.workload import Workload

    f = spec.forecast
    series = history_series(spec.history, f.bucket_s(), f"{root}.history")
    try:
        fw = forecast_workload(
            series,
            horizon_s=f.horizon_s(),
            quantile=f.quantile,
            method=f.method,
            growth=f.growth,
            name=spec.name,
        )
    except InvalidInput as exc:
        if exc.field in _FLAG_FIELDS:
            raise InvalidInput(f"{root}.forecast.{_FLAG_FIELDS[exc.field]}", exc.reason) from None
        if exc.field == "history":
            raise InvalidInput(f"{root}.history", exc.reason) from None
        raise
    block = dict(fw.block)
    block["prefix_cache_hit_fraction"] = spec.prefix_cache_hit_fraction
    block["endpoint"] = spec.endpoint
    return Workload.model_validate(block)
