"""The bundled history (planner/data/history/, README there): it reads as a plain history CSV
and keeps the shape the README states, measured from the ServeGen files it was made from."""

from __future__ import annotations

from importlib import resources

import numpy as np
import pytest

from planner.history.reader import read_history


def test_servegen_hourly_history_has_its_daily_shape() -> None:
    path = resources.files("planner") / "data" / "history" / "servegen-m-large-hourly.csv"
    s = read_history(str(path), bucket_s=3600)
    assert s.start_unix_s == 0.0 and len(s.requests) == 14 * 24
    rates = s.rates_per_s()
    assert all(r is not None for r in rates)
    by_day = np.array(rates, dtype=np.float64).reshape(14, 24)
    profile = by_day.mean(axis=0)
    assert float(by_day.mean()) == pytest.approx(195.8, abs=0.05)
    assert int(profile.argmin()) == 8 and int(profile.argmax()) == 19
    assert float(profile.max() / profile.min()) == pytest.approx(1.45, abs=0.005)
    assert s.lengths is not None and all(length is not None for length in s.lengths)
