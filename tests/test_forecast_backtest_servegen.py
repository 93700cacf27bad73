"""The backtest in dollars on ServeGen's two other language-model services (issue #36, "Done
when"): planner/data/history/servegen-m-mid-hourly.csv and servegen-m-small-hourly.csv (14 days
hourly each, Apache-2.0, planner/data/history/README.md), planned with the same plan file as
m-large (examples/forecast-servegen.yaml: Qwen3-8B on on-demand H100s, replicas following the
load; each fold takes its lengths from the history) and the same daily origins over the second
week: 7 folds, each fitting on every hour before its origin and scored on the 24 after it,
which no fit (nor conformal's calibration, made inside the fitted hours) sees.

What the data shows (measured: `capplan forecast planner/data/history/servegen-MODEL-hourly.csv
--backtest --plan examples/forecast-servegen.yaml --origin-step 1d --min-train 7d --quantiles
0.5,0.9,0.95,0.99`):

* m-small: the claim holds for one configuration. Last week's peak buys 1,320 GPU-hours with 1
  hour at risk (hour 236); conformal at 0.99 buys 1,277 (3.3% fewer) with 1 hour at risk (hour
  233). It is the only method x quantile that does both; every other that buys fewer has 4 or
  more (seasonal_peak 0.95: 1,015 GPU-hours, 23% fewer, 5 hours at risk, all on day 9, whose
  peak, 2,362 requests/s, is 31% above any hour of the week before).
* m-mid: the claim does not hold. Last week's peak buys 4,608 GPU-hours with 1 hour at risk;
  the methods with at most 1 (conformal 0.99: 6,674 / 1, ets 0.99: 6,311 / 0) buy more, and
  those that buy fewer leave 9 or more hours at risk (seasonal_peak 0.95: 4,323 / 9, at the new
  highs of days 11-12). The service grows over the two weeks (day means 1,235 to 2,628
  requests/s) and has near-empty hours (README) that widen every error-based interval.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from planner.forecast.backtest import Score, backtest
from planner.history.reader import read_history
from tests.cli_helpers import run_cli
from tests.test_forecast_backtest_real import DAILY, METHODS, PLAN, QUANTILES

ROOT = Path(__file__).resolve().parents[1]


def history(model: str) -> Path:
    return ROOT / "planner" / "data" / "history" / f"servegen-{model}-hourly.csv"


# model -> (method, quantile) -> (GPU-hours, hours at risk): measured, the command in the docstring
PINNED = {
    "m-small": {
        ("mstl", 0.5): (839, 31), ("mstl", 0.9): (912, 21), ("mstl", 0.95): (948, 18), ("mstl", 0.99): (1043, 8),
        ("conformal", 0.5): (800, 39), ("conformal", 0.9): (952, 18), ("conformal", 0.95): (1011, 9),
        ("conformal", 0.99): (1277, 1),
        ("ets", 0.5): (822, 36), ("ets", 0.9): (1004, 12), ("ets", 0.95): (1067, 5), ("ets", 0.99): (1185, 4),
        ("seasonal_peak", 0.5): (739, 55), ("seasonal_peak", 0.9): (951, 12), ("seasonal_peak", 0.95): (1015, 5),
        ("seasonal_peak", 0.99): (1015, 5),
        ("seasonal_naive", 0.5): (791, 46), ("seasonal_naive", 0.9): (968, 12), ("seasonal_naive", 0.95): (1023, 9),
        ("seasonal_naive", 0.99): (1095, 8),
        ("last_week_peak", 0.5): (1320, 1), ("last_week_peak", 0.9): (1320, 1), ("last_week_peak", 0.95): (1320, 1),
        ("last_week_peak", 0.99): (1320, 1),
    },
    "m-mid": {
        ("mstl", 0.5): (3668, 53), ("mstl", 0.9): (4320, 34), ("mstl", 0.95): (4496, 30), ("mstl", 0.99): (4723, 22),
        ("conformal", 0.5): (3823, 48), ("conformal", 0.9): (5202, 17), ("conformal", 0.95): (5728, 12),
        ("conformal", 0.99): (6674, 1),
        ("ets", 0.5): (3037, 83), ("ets", 0.9): (4783, 19), ("ets", 0.95): (5342, 8), ("ets", 0.99): (6311, 0),
        ("seasonal_peak", 0.5): (3064, 83), ("seasonal_peak", 0.9): (4197, 9), ("seasonal_peak", 0.95): (4323, 9),
        ("seasonal_peak", 0.99): (4323, 9),
        ("seasonal_naive", 0.5): (3531, 54), ("seasonal_naive", 0.9): (4403, 26), ("seasonal_naive", 0.95): (4596, 24),
        ("seasonal_naive", 0.99): (4958, 24),
        ("last_week_peak", 0.5): (4608, 1), ("last_week_peak", 0.9): (4608, 1), ("last_week_peak", 0.95): (4608, 1),
        ("last_week_peak", 0.99): (4608, 1),
    },
}  # fmt: skip
# model -> the method x quantile that buy fewer GPU-hours than last week's peak at no more hours at risk
DOMINATES = {"m-small": [("conformal", 0.99)], "m-mid": []}


@pytest.fixture(scope="module", params=sorted(PINNED))
def scored(request: pytest.FixtureRequest) -> tuple[str, dict[tuple[str, float], Score]]:
    model = str(request.param)
    series = read_history(str(history(model)), bucket_s=3600.0)
    plan = yaml.safe_load(PLAN.read_text())
    out = backtest(series, plan, methods=METHODS, quantiles=QUANTILES, base_dir=PLAN.parent, origins=DAILY)
    return model, {(s.method, s.quantile): s for s in out}


def test_backtest_figures_are_pinned(scored: tuple[str, dict[tuple[str, float], Score]]) -> None:
    model, scores = scored
    got = {k: (round(s.gpu_hours), round(s.hours_at_risk)) for k, s in scores.items()}
    assert got == PINNED[model]
    for s in scores.values():
        assert (s.folds, s.plans_failed) == (7, 0)
        assert float(s.gpu_hours).is_integer() and float(s.hours_at_risk).is_integer()  # whole GPUs x 1 h
        assert s.usd == pytest.approx(s.gpu_hours * 4.29)  # on-demand H100s only


def test_which_forecasts_beat_last_week_peak(scored: tuple[str, dict[tuple[str, float], Score]]) -> None:
    """The claim, per service (module docstring): fewer GPU-hours than last week's peak at no
    more hours at risk: conformal at 0.99 on m-small, nothing on m-mid."""
    model, scores = scored
    peak = scores[("last_week_peak", 0.9)]
    dominates = [
        k for k, s in scores.items() if s.gpu_hours < peak.gpu_hours and s.hours_at_risk <= peak.hours_at_risk
    ]
    assert dominates == DOMINATES[model]


def test_cli_backtests_conformal_on_m_small(capsys: pytest.CaptureFixture[str]) -> None:
    """The same figure through `capplan forecast --backtest --json`."""
    argv = ["forecast", str(history("m-small")), "--backtest", "--plan", str(PLAN), "--methods",
            "conformal,last_week_peak", "--quantiles", "0.99", "--origin-step", "1d", "--min-train", "7d",
            "--json"]  # fmt: skip
    rc, out, err = run_cli(argv, capsys)
    assert rc == 0, err
    got = {(s["method"], s["gpu_hours"], s["hours_at_risk"]) for s in json.loads(out)["scores"]}
    assert got == {("conformal", 1277.0, 1.0), ("last_week_peak", 1320.0, 1.0)}


def test_conformal_workload_plans(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`capplan forecast --method conformal --plan` prints a request `capplan plan` solves."""
    rc, out, err = run_cli(["forecast", str(history("m-small")), "--method", "conformal", "--horizon", "1d",
                            "--quantile", "0.99", "--plan", str(PLAN)], capsys)  # fmt: skip
    assert rc == 0, err
    assert "conformal: quantiles from" in err
    request = tmp_path / "plan.yaml"
    request.write_text(out)
    rc, plan_out, err = run_cli(["plan", str(request), "--workers", "1", "--json"], capsys)
    assert rc == 0, err
    assert json.loads(plan_out)["status"] in ("OPTIMAL", "FEASIBLE")
