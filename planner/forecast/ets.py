"""ETS with one season (the day): statsmodels' `ExponentialSmoothing`, additive damped trend and
additive daily season, parameters fitted by maximum likelihood from a heuristic start.
Quantiles: the model's own simulated prediction intervals, `SIMULATION_REPETITIONS` future
paths drawn with bootstrapped in-sample errors from a fixed seed (so intervals widen with the
horizon and the same history gives the same bytes)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from planner.forecast.base import (
    SIMULATION_REPETITIONS,
    SIMULATION_SEED,
    Forecast,
    Prepared,
    need_buckets,
)

NAME = "ets"


def forecast(prep: Prepared, horizon: int, quantiles: Sequence[float]) -> Forecast:
    from statsmodels.tsa.holtwinters import ExponentialSmoothing

    day = prep.day
    if day is None:
        from planner.errors import InvalidInput

        raise InvalidInput("--bucket", f"a bucket of {prep.bucket_s:g} s does not divide a day")
    need_buckets(prep, 2 * day, "ets (a daily season) needs two days and")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence chatter: the fit is used as it stands
        model = ExponentialSmoothing(
            prep.rates_per_s,
            trend="add",
            damped_trend=True,
            seasonal="add",
            seasonal_periods=day,
            initialization_method="heuristic",
        )
        fit = model.fit()
        point = np.asarray(fit.forecast(horizon), dtype=np.float64)
        paths = np.asarray(
            fit.simulate(
                horizon,
                anchor="end",
                repetitions=SIMULATION_REPETITIONS,
                error="add",
                random_errors="bootstrap",
                random_state=SIMULATION_SEED,
            ),
            dtype=np.float64,
        ).reshape(horizon, -1)
    out = {q: np.maximum(np.quantile(paths, q, axis=1), 0.0) for q in sorted(quantiles)}
    _monotone(out)
    return Forecast(NAME, prep.bucket_s, np.maximum(point, 0.0), out)


def _monotone(by_quantile: dict[float, np.ndarray]) -> None:
    """Sample quantiles of one set of paths never cross, but make it a guarantee."""
    prev = None
    for q in sorted(by_quantile):
        if prev is not None:
            by_quantile[q] = np.maximum(by_quantile[q], prev)
        prev = by_quantile[q]
