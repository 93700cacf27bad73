"""Seasonal peak: each future bucket takes a high quantile of what the last week did at the same
time of day (within an hour either side); last week's peak, hour by hour.

Why: `last_week_peak` holds one number, the week's highest bucket, through every hour, so the
night buys the evening's capacity; a fitted model (mstl, ets) follows the latest level, so a
quiet spell in the history (ServeGen's m-large runs at half its traffic for three days, then
returns) sets the forecast just before the traffic comes back. Here bucket h of a future day
takes the q-quantile of the `WINDOW_DAYS` x (2 w + 1) rates of the last week at its time of day
+- w buckets (w = one hour; the window covers a daily peak that moves by an hour from day to
day): it keeps the week's busiest day at each hour, whatever the last days did, and still
follows the daily cycle.

Quantile q is the ceil((m + 1) q)-th smallest of the m rates in the window (the conformal rank:
the largest for q > (m - 1) / (m + 1), 0.909 for 21 hourly rates); the point is q = 0.5. The
same values every future day (no trend, no weekly season: the window pools the week's days). A
history shorter than a week gives what it has (a note says so); under a day is refused.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from planner.errors import InvalidInput
from planner.forecast.base import FloatArray, Forecast, Prepared, need_buckets

NAME = "seasonal_peak"
WINDOW_DAYS = 7
WINDOW_S = 3600.0  # +- this much of the time of day
MAX_WINDOW_VALUES = 20_000_000  # days x buckets a day x window width: the memory bound


def forecast(prep: Prepared, horizon: int, quantiles: Sequence[float]) -> Forecast:
    day = prep.day
    if day is None:
        raise InvalidInput(
            "--bucket", f"a bucket of {prep.bucket_s:g} s does not divide a day into 2 or more"
        )
    need_buckets(prep, day, f"{NAME} (a day of the same times of day)")
    half = min(round(WINDOW_S / prep.bucket_s), (day - 1) // 2)
    if WINDOW_DAYS * day * (2 * half + 1) > MAX_WINDOW_VALUES:
        raise InvalidInput(
            "--bucket",
            f"{NAME} pools {WINDOW_DAYS} days x {day} buckets x {2 * half + 1} neighbours, over "
            f"{MAX_WINDOW_VALUES:,} rates: use a bucket of a minute or more",
        )
    window = pooled_by_time_of_day(prep.rates_per_s, day, half)
    phases = (prep.n + np.arange(horizon)) % day
    notes = []
    if prep.n < WINDOW_DAYS * day:
        notes.append(
            f"{NAME}: the history is shorter than {WINDOW_DAYS} days ({prep.length_text()}); all of it is used"
        )
    out = {q: rank_quantile(window, q)[phases] for q in sorted(set(quantiles) | {0.5})}
    point = out[0.5]
    return Forecast(NAME, prep.bucket_s, point, {q: out[q] for q in sorted(quantiles)}, notes)


def pooled_by_time_of_day(y: FloatArray, day: int, half: int) -> FloatArray:
    """The last `WINDOW_DAYS` days of `y` (all of it if shorter) as columns by time of day (the
    bucket index mod `day`), each column stacked with its `half` neighbours either side (wrapping
    at midnight): shape (rows x (2 half + 1), day), NaN where a day is partial."""
    n = y.size
    start = max(0, n - WINDOW_DAYS * day)
    first_day = start // day
    rows = -(-(n - first_day * day) // day)
    grid = np.full(rows * day, np.nan)
    grid[start - first_day * day : n - first_day * day] = y[start:]
    by_phase = grid.reshape(rows, day)
    return np.concatenate([np.roll(by_phase, -k, axis=1) for k in range(-half, half + 1)])


def rank_quantile(window: FloatArray, q: float) -> FloatArray:
    """Per column, the ceil((m + 1) q)-th smallest of its m finite rates, clamped to ranks 1..m
    ((m + 1) q taken 1e-9 low, as `conformal` does); every column has m >= 1 (a day of history
    fills each time of day once)."""
    ordered = np.sort(window, axis=0)  # NaN last
    m = np.isfinite(window).sum(axis=0)
    rank = np.clip(np.ceil((m + 1) * q - 1e-9), 1, m).astype(np.int64)
    return np.asarray(ordered[rank - 1, np.arange(window.shape[1])], dtype=np.float64)
