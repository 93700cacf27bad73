"""Conformal: mstl's point forecast with quantiles calibrated on mstl's own past forecast errors
(split conformal prediction over rolling origins inside the history), instead of on the
residual of one fit.

Why: mstl's quantiles are the point plus the in-sample residual of its decomposition, which
measures noise around the fitted seasons, not how wrong a forecast made a day or a week ahead
turns out. A level shift (a quiet spell, a return from one) is absent from that residual, so
mstl's p90 under-covers when capacity matters most. Here the history is replayed: at up to
`MAX_CALIBRATION_ORIGINS` daily origins inside it (the latest), mstl is fitted on the buckets
before the origin only and forecasts the next `span` buckets (the horizon, at most a week); the
errors observed - point of all those buckets, pooled, give the headroom: quantile q of each
future bucket is the point plus the errors' conformal q-quantile, the ceil((m + 1) q)-th
smallest of m errors (the rank that makes split conformal prediction's coverage hold in finite
samples; the largest error where that rank is past m), never below 0.

Errors in requests/s, not ratios to the point: a point forecast near zero (after an outage-like
hour in the history) makes a ratio unbounded, while an error stays within the traffic's range.

Nothing after the history's end is read: in a backtest every calibration fold lies inside the
fold's training part. Fallback (declared in the notes): a history with no calibration origin
(mstl needs over two days before one, and `span` buckets must follow it) keeps mstl's own
quantiles. Lead times beyond a week take the errors measured up to a week ahead. Cost: one mstl
fit per origin on top of the forecast's own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from planner.forecast import mstl
from planner.forecast.base import WEEK_S, FloatArray, Forecast, Prepared

NAME = "conformal"
MAX_CALIBRATION_ORIGINS = 14  # two weeks of daily origins: 14 extra mstl fits at most


def forecast(prep: Prepared, horizon: int, quantiles: Sequence[float]) -> Forecast:
    base = mstl.forecast(prep, horizon, quantiles)
    day = prep.day
    assert day is not None  # mstl refuses a bucket that does not divide a day
    span = min(horizon, round(WEEK_S / prep.bucket_s))
    origins = calibration_origins(prep.n, day, span)
    notes = list(base.notes)
    if not origins:
        notes.append(
            f"conformal: the history ({prep.length_text()}) holds no calibration origin (over two days "
            f"before one and {span} buckets after): mstl's own quantiles kept"
        )
        return Forecast(NAME, prep.bucket_s, base.point_per_s, base.quantiles_per_s, notes)
    errors = calibration_errors(prep, origins, span)
    headroom = {q: conformal_quantile(errors, q) for q in sorted(quantiles)}
    out = {q: np.maximum(base.point_per_s + h, 0.0) for q, h in headroom.items()}
    notes.append(
        f"conformal: quantiles from {errors.size} forecast errors of mstl at {len(origins)} daily origins "
        f"inside the history ({span} buckets ahead each): "
        + ", ".join(f"q{q:g} {h:+.4g}/s" for q, h in headroom.items())
    )
    return Forecast(NAME, prep.bucket_s, base.point_per_s, out, notes)


def calibration_origins(n: int, day: int, span: int) -> list[int]:
    """Daily origins (bucket indices) with over two days before each (mstl's minimum) and
    `span` tested buckets after it within the history: the latest `MAX_CALIBRATION_ORIGINS`,
    oldest first."""
    last, first = n - span, 2 * day + 1
    if last < first:
        return []
    return list(range(last, first - 1, -day))[:MAX_CALIBRATION_ORIGINS][::-1]


def calibration_errors(prep: Prepared, origins: Sequence[int], span: int) -> FloatArray:
    """Observed - mstl's point (requests/s) over every calibration fold's tested buckets, each
    fold fitted on the buckets before its origin only."""
    observed, point = calibration_folds(prep, origins, span)
    return observed - point


def calibration_folds(prep: Prepared, origins: Sequence[int], span: int) -> tuple[FloatArray, FloatArray]:
    """The observed rates and mstl's point forecasts (requests/s) over every calibration fold's
    tested buckets, concatenated; each fold fitted on the buckets before its origin only."""
    y = prep.rates_per_s
    observed, points = [], []
    for origin in origins:
        head = Prepared(y[:origin], prep.bucket_s, 0, prep.source)
        points.append(mstl.forecast(head, span, [0.5]).point_per_s)
        observed.append(y[origin : origin + span])
    return np.concatenate(observed), np.concatenate(points)


def conformal_quantile(errors: FloatArray, q: float) -> float:
    """The ceil((m + 1) q)-th smallest of the m errors, clamped to ranks 1..m ((m + 1) q is
    taken 1e-9 low, so a product that is whole in exact arithmetic is not pushed up a rank by
    its rounding)."""
    m = errors.size
    rank = min(max(math.ceil((m + 1) * q - 1e-9), 1), m)
    return float(np.sort(errors)[rank - 1])
