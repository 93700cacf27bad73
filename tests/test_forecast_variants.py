"""The forecaster made for budget planning's envelope (docs/forecast.md "Methods"):
`seasonal_peak` (a high quantile of the last week's rates at the same time of day, +- 1 h).

Synthetic series with answers derived by hand here; their figures on real traffic are pinned by
tests/test_forecast_backtest_real.py and tests/test_forecast_backtest_servegen.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from planner.errors import InvalidInput
from planner.forecast import forecast
from planner.history.series import HistorySeries
from tests.test_forecast import DAY, WEEK, _series, _sine

# --- seasonal_peak ---------------------------------------------------------------------------------


def _days_by_hour(days: int) -> np.ndarray:
    """Bucket (day d, hour h) holds 10 d + h: every rate says where it came from."""
    d, h = np.divmod(np.arange(days * DAY), DAY)
    return (10.0 * d + h).astype(np.float64)


def test_seasonal_peak_takes_the_rank_of_the_last_weeks_same_hour_and_neighbours() -> None:
    """8 days, 10 d + h. The last 7 days are d = 1..7. Future hour 0 pools hours 23, 0, 1 of
    each (23 of the same day: the window wraps at midnight): 21 rates 10d, 10d+1, 10d+23.
    Sorted: 10 11 20 21 30 31 33 40 41 43 50 51 53 60 61 63 70 71 73 83 93. Ranks
    ceil(22 q): q 0.5 -> 11th = 50; q 0.9 -> 20th = 83; q 0.95 and 0.99 -> 21st = 93 (the
    largest). Hour 5 pools 4, 5, 6: 10d+4..10d+6; the 11th is 45 and the largest 76. Day 0
    (older than a week) is never read."""
    fc = forecast(_series(_days_by_hour(8)), horizon_buckets=48, quantiles=[0.5, 0.9, 0.95, 0.99],
                  method="seasonal_peak")  # fmt: skip
    assert fc.point_per_s[0] == fc.quantiles_per_s[0.5][0] == 50.0
    assert fc.quantiles_per_s[0.9][0] == 83.0
    assert fc.quantiles_per_s[0.95][0] == fc.quantiles_per_s[0.99][0] == 93.0
    assert (fc.quantiles_per_s[0.5][5], fc.quantiles_per_s[0.99][5]) == (45.0, 76.0)
    for q in (0.5, 0.9, 0.99):  # every future day the same
        np.testing.assert_array_equal(fc.quantiles_per_s[q][:DAY], fc.quantiles_per_s[q][DAY:])
    assert np.all(fc.quantiles_per_s[0.99] >= fc.quantiles_per_s[0.9]) and fc.notes == []


def test_seasonal_peak_follows_the_day_not_the_weeks_top() -> None:
    """A daily sine 20 +- 8 over two weeks: the p99 at each hour is the sine's highest over that
    hour and its neighbours, so the trough hour stays near the trough, while last week's peak
    holds 28 all day."""
    fc = forecast(_series(_sine(2 * WEEK)), horizon_buckets=DAY, quantiles=[0.99], method="seasonal_peak")
    h = np.arange(2 * WEEK, 2 * WEEK + DAY)
    neighbours = np.stack([_sine(DAY, offset=int(h[0]) + k) for k in (-1, 0, 1)])
    np.testing.assert_allclose(fc.quantiles_per_s[0.99], neighbours.max(axis=0), rtol=0, atol=1e-12)
    assert float(fc.quantiles_per_s[0.99].min()) < 13.0  # the trough, 12, and its neighbour


def test_seasonal_peak_on_a_short_history_and_refusals() -> None:
    """A day and a half: hours 0..11 have two days' rates, 12..23 one (the partial day's are
    NaN and skipped); said in a note. Under a day, or a bucket that does not divide a day, or
    one so fine that the window would pool over 20 million rates, is refused by name."""
    fc = forecast(
        _series(_days_by_hour(2)[:36]), horizon_buckets=DAY, quantiles=[0.99], method="seasonal_peak"
    )
    # future hour 12 (bucket 36): hours 11, 12, 13: rates 11, 12, 13 (day 0) and 21 (day 1, hour 11)
    assert fc.quantiles_per_s[0.99][0] == 21.0
    assert any("shorter than 7 days" in n for n in fc.notes)
    with pytest.raises(InvalidInput) as exc:
        forecast(_series(_sine(20)), horizon_buckets=DAY, quantiles=[0.9], method="seasonal_peak")
    assert exc.value.field == "history" and "24 buckets" in exc.value.reason
    seven_hours = HistorySeries(source="x", start_unix_s=0.0, bucket_s=25_200.0, requests=(1.0,) * 40)
    with pytest.raises(InvalidInput) as exc:
        forecast(seven_hours, horizon_buckets=4, quantiles=[0.9], method="seasonal_peak")
    assert exc.value.field == "--bucket"
    ten_s = HistorySeries(source="x", start_unix_s=0.0, bucket_s=10.0, requests=(1.0,) * 8640)
    with pytest.raises(InvalidInput) as exc:  # 7 x 8,640 x 721 = 43.6 million
        forecast(ten_s, horizon_buckets=4, quantiles=[0.9], method="seasonal_peak")
    assert exc.value.field == "--bucket" and "20,000,000" in exc.value.reason


# --- both ---------------------------------------------------------------------------------------------


def _noisy_sine(n: int, seed: int, relative_sd: float = 0.1) -> np.ndarray:
    """A daily sine whose noise is in proportion to the level (as traffic's is)."""
    rng = np.random.default_rng(seed)
    return np.maximum(_sine(n) * (1.0 + rng.normal(0.0, relative_sd, n)), 0.0)


@pytest.mark.parametrize("method", ["conformal", "seasonal_peak"])
def test_same_history_same_bytes(method: str) -> None:
    y = _noisy_sine(2 * WEEK, seed=9)
    a = forecast(_series(y), horizon_buckets=48, quantiles=[0.9, 0.99], method=method)
    b = forecast(_series(y), horizon_buckets=48, quantiles=[0.9, 0.99], method=method)
    for q in (0.9, 0.99):
        assert a.quantiles_per_s[q].tobytes() == b.quantiles_per_s[q].tobytes()
