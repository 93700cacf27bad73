"""The bundled history (planner/data/history/, README there): it reads as a plain history CSV
and keeps the shape the README states, measured from the ServeGen files it was made from."""

from __future__ import annotations

from importlib import resources

import numpy as np
import pytest

from planner.history.reader import read_history


@pytest.mark.parametrize(
    ("model", "mean_per_s", "trough_hour", "peak_hour", "peak_over_trough", "no_lengths"),
    [
        ("m-large", 195.84, 8, 19, 1.450, 0),
        ("m-mid", 1790.06, 16, 3, 1.391, 8),
        ("m-small", 1174.40, 5, 20, 2.205, 1),
    ],
)
def test_servegen_services_keep_their_measured_shape(
    model: str, mean_per_s: float, trough_hour: int, peak_hour: int, peak_over_trough: float, no_lengths: int
) -> None:
    """The README's figures, measured from tools/servegen_history.py's output: 14 days hourly,
    every rate observed, the hour-of-day profile's trough and peak; the buckets without lengths
    are the hours no client with a length file was active."""
    path = resources.files("planner") / "data" / "history" / f"servegen-{model}-hourly.csv"
    s = read_history(str(path), bucket_s=3600)
    assert s.start_unix_s == 0.0 and len(s.requests) == 14 * 24
    rates = s.rates_per_s()
    assert all(r is not None for r in rates)
    by_day = np.array(rates, dtype=np.float64).reshape(14, 24)
    profile = by_day.mean(axis=0)
    assert float(by_day.mean()) == pytest.approx(mean_per_s, abs=0.01)
    assert int(profile.argmin()) == trough_hour and int(profile.argmax()) == peak_hour
    assert float(profile.max() / profile.min()) == pytest.approx(peak_over_trough, abs=0.001)
    assert s.lengths is not None and sum(length is None for length in s.lengths) == no_lengths


def test_m_mid_keeps_its_near_empty_hours_as_published() -> None:
    """17 hours under 10 requests/s (8 at 0) against a 1,790 mean: kept, not marked unobserved
    (README), so a backtest sees them as traffic."""
    path = resources.files("planner") / "data" / "history" / "servegen-m-mid-hourly.csv"
    rates = np.array(read_history(str(path), bucket_s=3600).rates_per_s(), dtype=np.float64)
    assert int((rates < 10).sum()) == 17 and int((rates == 0).sum()) == 8
