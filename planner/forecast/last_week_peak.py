"""Last week's peak: the highest bucket rate of the last 7 days, flat over the horizon; what an
operator provisions by hand, and the baseline a forecaster must beat in GPU-hours at no more
hours at risk. Every quantile is the same peak (a peak has no distribution to draw one from)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from planner.forecast.base import WEEK_S, Forecast, Prepared

NAME = "last_week_peak"


def forecast(prep: Prepared, horizon: int, quantiles: Sequence[float]) -> Forecast:
    last = max(1, round(WEEK_S / prep.bucket_s))
    peak = float(prep.rates_per_s[-last:].max())
    point = np.full(horizon, peak)
    notes = []
    if prep.n < last:
        notes.append(
            f"last_week_peak: the history is shorter than a week ({prep.length_text()}); its peak is used"
        )
    return Forecast(NAME, prep.bucket_s, point, {q: point.copy() for q in sorted(quantiles)}, notes)
