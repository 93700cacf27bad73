"""`capplan report --backtest BACKTEST.json` (planner/htmlreport/forecast_figure.py): the forecast vs
actual vs planned capacity figure drawn from a small real backtest (the bundled ServeGen history,
two methods at one quantile, daily origins: tests/test_forecast_backtest_real.py), alone and on
a plan's page; bad files refused naming the place."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from planner.forecast.backtest import Origins, as_json, backtest
from planner.forecast.base import DAY_S
from planner.history.reader import read_history
from planner.htmlreport import forecast_figure
from planner.htmlreport.figures import FIGURES, build, write_files
from tests.cli_helpers import run_cli

ROOT = Path(__file__).resolve().parents[1]
HISTORY = ROOT / "planner" / "data" / "history" / "servegen-m-large-hourly.csv"
PLAN = ROOT / "examples" / "forecast-servegen.yaml"
SERIES = ("planned capacity", "forecast (planned for)", "actual")


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    series = read_history(str(HISTORY), bucket_s=3600.0)
    scores = backtest(series, yaml.safe_load(PLAN.read_text()), methods=["mstl", "last_week_peak"],
                      quantiles=[0.9], base_dir=PLAN.parent,
                      origins=Origins(step_s=DAY_S, test_s=DAY_S, min_train_s=11 * DAY_S))  # fmt: skip
    data = as_json(series, scores)
    path = tmp_path_factory.mktemp("bt") / "backtest.json"
    path.write_text(json.dumps(data))
    return path, data


def test_figure_data_is_the_backtest_read_back(small: tuple[Path, dict[str, Any]]) -> None:
    path, data = small
    d = forecast_figure.figure_data(forecast_figure.read_backtest(path))
    assert [p["label"].split(":")[0] for p in d["panels"]] == [
        "mstl at quantile 0.9",
        "last_week_peak at quantile 0.9",
    ]
    for panel, score in zip(d["panels"], data["scores"], strict=True):
        assert len(panel["folds"]) == 3  # origins at days 11, 12, 13
        for fold, t in zip(panel["folds"], score["timeline"], strict=True):
            o = t["origin_bucket"]
            assert fold["edges_h"][0] == o and fold["edges_h"][-1] == o + 24  # hourly buckets
            assert fold["actual_per_s"] == data["actual_per_s"][o : o + 24]
            assert (fold["forecast_per_s"], fold["capacity_per_s"]) == (
                t["forecast_per_s"],
                t["capacity_per_s"],
            )
    assert f"{data['scores'][1]['gpu_hours']:,.0f} GPU-hours" in d["panels"][1]["label"]


def test_cli_draws_the_three_series(small: tuple[Path, dict[str, Any]], tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    path, _ = small
    rc, out, err = run_cli(["report", "--backtest", str(path), "-o", str(tmp_path / "out")], capsys)
    assert rc == 0, err
    png, svg = tmp_path / "out" / "forecast.png", tmp_path / "out" / "forecast.svg"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and str(png) in out
    text = svg.read_text()
    assert all(label in text for label in SERIES)  # svg.fonttype none: legend text is text
    fig = forecast_figure.draw(forecast_figure.figure_data(forecast_figure.read_backtest(path)))
    assert len(fig.axes) == 2
    assert fig.axes[0].get_legend_handles_labels()[1] == list(SERIES)
    rc, _, _ = run_cli(["report", "--backtest", str(path), "-o", str(tmp_path / "again")], capsys)
    assert (tmp_path / "again" / "forecast.svg").read_bytes() == svg.read_bytes()  # byte-stable


def test_plan_page_gains_the_forecast_section(small: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    path, _ = small
    chat = ROOT / "examples" / "chat.yaml"
    plan, figures = build(yaml.safe_load(chat.read_text()), base_dir=chat.parent, workers=1)
    d = forecast_figure.figure_data(forecast_figure.read_backtest(path))
    files = write_files(plan, figures, tmp_path, d)
    assert {f.name for f in files} >= {f"{n}.svg" for n in (*FIGURES, "forecast")}
    page = (tmp_path / "index.html").read_text()
    assert '<section id="forecast">' in page and "forecast vs actual vs planned capacity" in page


def test_bad_backtests_are_refused_naming_the_place(small: tuple[Path, dict[str, Any]], tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    _, data = small
    out = str(tmp_path / "out")
    rc, _, err = run_cli(["report", "-o", out], capsys)
    assert rc == 2 and err.startswith("capplan: error: FILE:")
    cases: list[tuple[Any, str]] = [
        ("{not json", "--backtest:"),
        ({**data, "scores": data["scores"] * 7}, "--backtest.scores:"),
        ({**data, "actual_per_s": data["actual_per_s"][:300]}, "--backtest.scores[0].timeline[1]:"),
        ({**data, "bucket_s": -1}, "--backtest.bucket_s:"),
    ]
    for i, (content, field) in enumerate(cases):
        p = tmp_path / f"bad{i}.json"
        p.write_text(content if isinstance(content, str) else json.dumps(content))
        rc, _, err = run_cli(["report", "--backtest", str(p), "-o", out], capsys)
        assert rc == 2 and err.startswith(f"capplan: error: {field}"), (field, err)
