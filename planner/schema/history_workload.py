"""`workload: {history: ..., forecast: {...}}`: a workload forecast from observed traffic at plan
time, by the same code `capplan forecast` runs (planner/forecast/, docs/forecast.md "Planning
from history"):

    workload:
      history: traffic.csv            # a history file (any format of docs/forecast.md), or
      # history: {path: prom.json, format: prometheus}
      # history: {points: [{timestamp: 1700000000, requests_per_s: 12.5}, ...]}   # inline rates
      forecast: {horizon: 30d, bucket: 1h, quantile: 0.9, method: mstl, growth: 10%/month}

`points` is the inline form (the gRPC service reads no files: it takes only points): rates
sampled at unix-second timestamps, read as the plain history CSV's rows (planner/history/
rate_csv.py). Every number is ranged here; durations and growth are parsed by the forecast's
own parsers, so a bad one is named `workload.forecast.horizon` etc.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from planner.errors import echo

__all__ = ["MAX_HISTORY_POINTS", "ForecastSpec", "HistoryPoint", "HistorySource", "HistoryWorkload"]

_CONFIG = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
MAX_HISTORY_POINTS = 200_000  # inline rows: ~23 days of 10 s samples, ~5 years of 15-minute ones
MAX_TIMESTAMP_S = 1e11  # unix seconds, year ~5138
METHODS = ("mstl", "ets", "seasonal_peak", "seasonal_naive", "last_week_peak")  # planner.forecast.FORECASTERS


class HistoryPoint(BaseModel):
    """One inline history row: the request rate observed from `timestamp` (unix seconds) until
    the next row (or one step), and optionally the mean lengths of its requests."""

    model_config = _CONFIG
    timestamp: float = Field(ge=0.0, le=MAX_TIMESTAMP_S)
    requests_per_s: float = Field(ge=0.0, le=1e7)
    prompt_tokens_mean: float | None = Field(default=None, ge=0.0, le=1e7)
    output_tokens_mean: float | None = Field(default=None, ge=0.0, le=1e7)


class HistorySource(BaseModel):
    """Exactly one of `path` (a history file; CLI and planner.api only) and `points` (inline)."""

    model_config = _CONFIG
    path: str | None = Field(default=None, min_length=1, max_length=4096)
    format: str | None = Field(default=None, min_length=1, max_length=32)
    points: list[HistoryPoint] | None = Field(default=None, min_length=1, max_length=MAX_HISTORY_POINTS)

    @model_validator(mode="after")
    def _one(self) -> HistorySource:
        if (self.path is None) == (self.points is None):
            raise ValueError("give exactly one of path (a history file) and points (inline rates)")
        if self.format is not None and self.points is not None:
            raise ValueError("format is for a file; points are read as the plain rate CSV's rows")
        return self


class ForecastSpec(BaseModel):
    """`capplan forecast`'s flags as a mapping: `horizon` and `bucket` durations (30d, 1h, 15m;
    the bucket divides a day for the seasons), one `quantile` in [0.01, 0.999], a `method`
    and an optional `growth` (10%/month or a factor like 1.5)."""

    model_config = _CONFIG
    horizon: str = Field(default="7d", min_length=1, max_length=32)
    bucket: str = Field(default="1h", min_length=1, max_length=32)
    quantile: float = Field(default=0.9, ge=0.01, le=0.999)
    method: str = Field(default="mstl", min_length=1, max_length=32)
    growth: str | None = Field(default=None, min_length=1, max_length=64)

    @field_validator("horizon", "bucket")
    @classmethod
    def _duration(cls, v: str) -> str:
        from planner.errors import InvalidInput
        from planner.forecast.growth import parse_duration_s

        try:
            parse_duration_s(v, "")
        except InvalidInput as exc:
            raise ValueError(exc.reason) from None
        return v

    @field_validator("method")
    @classmethod
    def _method(cls, v: str) -> str:
        if v not in METHODS:
            raise ValueError(f"unknown method {echo(v)}; one of {', '.join(METHODS)}")
        return v

    @field_validator("growth")
    @classmethod
    def _growth(cls, v: str | None) -> str | None:
        from planner.errors import InvalidInput
        from planner.forecast.growth import parse_growth

        if v is not None:
            try:
                parse_growth(v, "")
            except InvalidInput as exc:
                raise ValueError(exc.reason) from None
        return v

    def horizon_s(self) -> float:
        from planner.forecast.growth import parse_duration_s

        return parse_duration_s(self.horizon, "horizon")

    def bucket_s(self) -> float:
        from planner.forecast.growth import parse_duration_s

        return parse_duration_s(self.bucket, "bucket")


class HistoryWorkload(BaseModel):
    """`workload: {history: ..., forecast: {...}}` (module docstring). A bare string `history`
    is a path."""

    model_config = _CONFIG
    history: HistorySource
    forecast: ForecastSpec = ForecastSpec()
    name: str | None = Field(default=None, max_length=256)
    prefix_cache_hit_fraction: float = Field(default=0.0, ge=0.0, lt=1.0)
    # the route the clients call; selects the profile's front end (planner.workload.Workload)
    endpoint: Literal["chat", "completions"] = "chat"

    @field_validator("history", mode="before")
    @classmethod
    def _path_shorthand(cls, v: Any) -> Any:
        return {"path": v} if isinstance(v, str) else v
