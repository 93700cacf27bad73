"""Conformal, relative: mstl's point forecast with quantiles calibrated, as `conformal`'s are, on
mstl's own past forecast errors inside the history, but each error scaled by the level it was
made at, so the headroom follows the daily cycle.

Why: `conformal` pools absolute errors (requests/s) over every hour and adds the same headroom to
each; the errors of the busy hours set it, and the quiet hours buy the busy hours' headroom. On a
service whose peak hour is twice its trough (ServeGen's m-small) that is capacity bought in
the trough for an error made at the peak. Here each calibration error is a score s = (observed - point) /
max(point, floor), the future bucket's quantile q is point + max(point, floor) x the scores'
conformal q-quantile (the ceil((m + 1) q)-th smallest of m, as in `conformal`), never below 0:
headroom in proportion to the forecast level.

The floor, `FLOOR_OF_MEDIAN` x the median rate of the history given, keeps a score bounded where
mstl forecasts near zero (after an outage-like hour in the history: ServeGen's m-mid has hours
at 0 among hours at ~1,800 requests/s): a point below a quarter of the typical rate is scaled as
if it were that quarter. A quarter sits well below the daily trough of each bundled history (its
quietest hour of the day averages 66% to 84% of its mean), so ordinary quiet hours are scaled
by their own level.

Same origins, spans, fallback and cost as `conformal` (one mstl fit per calibration origin, up to
14): nothing after the history's end is read.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from planner.forecast import mstl
from planner.forecast.base import WEEK_S, Forecast, Prepared
from planner.forecast.conformal import calibration_folds, calibration_origins, conformal_quantile

NAME = "conformal_relative"
FLOOR_OF_MEDIAN = 0.25  # the scale floor, a fraction of the history's median rate


def forecast(prep: Prepared, horizon: int, quantiles: Sequence[float]) -> Forecast:
    base = mstl.forecast(prep, horizon, quantiles)
    day = prep.day
    assert day is not None  # mstl refuses a bucket that does not divide a day
    span = min(horizon, round(WEEK_S / prep.bucket_s))
    origins = calibration_origins(prep.n, day, span)
    notes = list(base.notes)
    if not origins:
        notes.append(
            f"{NAME}: the history ({prep.length_text()}) holds no calibration origin (over two days "
            f"before one and {span} buckets after): mstl's own quantiles kept"
        )
        return Forecast(NAME, prep.bucket_s, base.point_per_s, base.quantiles_per_s, notes)
    floor_per_s = FLOOR_OF_MEDIAN * float(np.median(prep.rates_per_s))
    observed, point = calibration_folds(prep, origins, span)
    scores = (observed - point) / np.maximum(point, floor_per_s) if floor_per_s > 0 else observed - point
    scale = np.maximum(base.point_per_s, floor_per_s) if floor_per_s > 0 else np.ones(horizon)
    factor = {q: conformal_quantile(scores, q) for q in sorted(quantiles)}
    out = {q: np.maximum(base.point_per_s + scale * f, 0.0) for q, f in factor.items()}
    unit = "x the level" if floor_per_s > 0 else "/s (the history's median is 0: errors kept absolute)"
    notes.append(
        f"{NAME}: quantiles from {scores.size} scaled forecast errors of mstl at {len(origins)} daily "
        f"origins inside the history ({span} buckets ahead each, level floor {floor_per_s:.4g}/s): "
        + ", ".join(f"q{q:g} {f:+.4g} {unit}" for q, f in factor.items())
    )
    return Forecast(NAME, prep.bucket_s, base.point_per_s, out, notes)
