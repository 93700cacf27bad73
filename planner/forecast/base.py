"""What every forecaster shares: the prepared history (gaps interpolated, periods in buckets),
the forecast it returns (rates per future bucket at each quantile), and the length rules.

A forecaster reads rates (requests/s) per bucket, never counts, so a history read at any bucket
width forecasts in the same unit the workload schema takes (`requests_per_s`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from planner.errors import InvalidInput
from planner.history.series import HistorySeries

FloatArray = npt.NDArray[np.float64]

DAY_S = 86_400.0
WEEK_S = 7 * DAY_S
MAX_QUANTILES = 16
MIN_QUANTILE = 0.01
MAX_QUANTILE = 0.999
# The seeded simulations behind the prediction intervals (ets): repetitions and the seed. Fixed,
# so one history gives one forecast byte for byte.
SIMULATION_REPETITIONS = 200
SIMULATION_SEED = 0


@dataclass(frozen=True)
class Prepared:
    """A history ready to fit: `rates_per_s` with every gap filled by linear interpolation (ends
    by the nearest observed bucket), `gap_buckets` how many were filled, and the daily and
    weekly periods in buckets (None where the bucket does not divide a day)."""

    rates_per_s: FloatArray
    bucket_s: float
    gap_buckets: int
    source: str

    @property
    def n(self) -> int:
        return int(self.rates_per_s.size)

    def period(self, seconds: float) -> int | None:
        ratio = seconds / self.bucket_s
        k = round(ratio)
        return k if k >= 2 and abs(ratio - k) < 1e-9 * ratio else None

    @property
    def day(self) -> int | None:
        return self.period(DAY_S)

    @property
    def week(self) -> int | None:
        return self.period(WEEK_S)

    def length_text(self) -> str:
        return f"{self.n} buckets of {self.bucket_s:g} s ({self.n * self.bucket_s / DAY_S:.2f} days)"


def prepare(series: HistorySeries) -> Prepared:
    """Gaps (None) filled by linear interpolation between observed neighbours, so a fit never
    learns a dip from a scrape gap; the count is reported with the forecast."""
    raw = series.rates_per_s()
    observed = np.array([r is not None for r in raw])
    y = np.array([0.0 if r is None else r for r in raw], dtype=np.float64)
    idx = np.arange(y.size, dtype=np.float64)
    filled = np.interp(idx, idx[observed], y[observed]) if not observed.all() else y
    return Prepared(filled, series.bucket_s, int((~observed).sum()), series.source)


@dataclass(frozen=True)
class Forecast:
    """Rates (requests/s) per future bucket at each asked quantile, the point forecast, the
    method that made them (after any declared fallback) and what the reader should know."""

    method: str
    bucket_s: float
    point_per_s: FloatArray
    quantiles_per_s: dict[float, FloatArray]
    notes: list[str] = field(default_factory=list)

    def scaled(self, factors: FloatArray) -> Forecast:
        return Forecast(
            self.method,
            self.bucket_s,
            self.point_per_s * factors,
            {q: v * factors for q, v in self.quantiles_per_s.items()},
            list(self.notes),
        )


def check_quantiles(quantiles: Sequence[float], field_name: str) -> tuple[float, ...]:
    if not 1 <= len(quantiles) <= MAX_QUANTILES:
        raise InvalidInput(field_name, f"give 1 to {MAX_QUANTILES} quantiles, got {len(quantiles)}")
    for q in quantiles:
        if not (math.isfinite(q) and MIN_QUANTILE <= q <= MAX_QUANTILE):
            raise InvalidInput(
                field_name, f"each quantile must be in [{MIN_QUANTILE}, {MAX_QUANTILE}], got {q}"
            )
    return tuple(sorted(set(quantiles)))


def need_buckets(prep: Prepared, n_needed: int, what: str) -> None:
    """Refuse a history too short for a seasonality, naming the history and its length."""
    if prep.n < n_needed:
        raise InvalidInput(
            "history",
            f"{what} needs at least {n_needed} buckets of {prep.bucket_s:g} s "
            f"({n_needed * prep.bucket_s / DAY_S:.2f} days); the history has {prep.length_text()}",
        )


def tile_last_cycle(values: FloatArray, period: int, horizon: int) -> FloatArray:
    """The last full cycle of `values` repeated over the horizon, phase kept: future bucket h
    takes the value one or more whole periods before it."""
    n = values.size
    steps = np.arange(horizon)
    return values[n - period + (steps % period)]


def with_residual_quantiles(
    point: FloatArray, residuals: FloatArray, quantiles: Sequence[float]
) -> dict[float, FloatArray]:
    """Quantile q of each future bucket = the point forecast + the q-quantile of the in-sample
    residuals (empirical, the same at every step: intervals do not widen with the horizon),
    never below 0 and never decreasing in q."""
    out: dict[float, FloatArray] = {}
    res = residuals[np.isfinite(residuals)]
    for q in sorted(quantiles):
        shift = float(np.quantile(res, q)) if res.size else 0.0
        out[q] = np.maximum(point + shift, 0.0)
    return out
