"""`workload: {history: ..., forecast: {...}}` (issue #36; planner/schema/history_workload.py,
planner/forecast/from_history.py, docs/forecast.md "Planning from history"): a plan request
that forecasts its own workload plans exactly what `capplan forecast` prints."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from planner import api
from planner.errors import InvalidInput
from planner.schema.plan_request import parse_plan_request
from tests.cli_helpers import run_cli

HOUR_S = 3600
WEEK = 168
PLAN: dict[str, Any] = {
    "model": "Qwen/Qwen3-8B",
    "slo": {"ttft_p99_ms": 500, "itl_p99_ms": 50},
    "candidates": {"gpus": ["h100-sxm"], "tensor_parallel_sizes": [1], "disaggregation": "never"},
    "availability": {"min_replicas": 1},
    "headroom": 0.1,
}


def _rates(n: int = 3 * WEEK) -> np.ndarray:
    """A synthetic history (tests only): a daily sine with seeded noise, requests/s per hour."""
    h = np.arange(n)
    noise = np.random.default_rng(5).normal(0.0, 1.0, n)
    return np.maximum(60 + 24 * np.sin(2 * np.pi * h / 24) + noise, 0.0)


def _csv(tmp_path: Path) -> Path:
    p = tmp_path / "history.csv"
    rows = [f"{i * HOUR_S},{r:.4f},800,300" for i, r in enumerate(_rates())]
    p.write_text("timestamp,requests_per_s,prompt_tokens_mean,output_tokens_mean\n" + "\n".join(rows) + "\n")
    return p


def _points() -> list[dict[str, float]]:
    return [
        {"timestamp": float(i * HOUR_S), "requests_per_s": float(f"{r:.4f}"),
         "prompt_tokens_mean": 800.0, "output_tokens_mean": 300.0}
        for i, r in enumerate(_rates())
    ]  # fmt: skip


FORECAST = {"horizon": "1d", "bucket": "1h", "quantile": 0.9, "method": "mstl", "growth": "10%/month"}


@pytest.mark.parametrize("method", ["mstl", "seasonal_peak"])
def test_plan_from_history_plans_what_capplan_forecast_prints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], method: str
) -> None:
    csv = _csv(tmp_path)
    rc, out, err = run_cli(["forecast", str(csv), "--horizon", "1d", "--quantile", "0.9",
                            "--growth", "10%/month", "--method", method, "--json"], capsys)  # fmt: skip
    assert rc == 0, err
    printed = json.loads(out)["workload"]
    forecast = {**FORECAST, "method": method}
    direct = api.plan({**PLAN, "workload": {"history": str(csv), "forecast": forecast}}, workers=1)
    piped = api.plan({**PLAN, "workload": printed}, workers=1)
    assert direct.status in ("OPTIMAL", "FEASIBLE")
    assert direct.workload.buckets == 24
    assert direct.model_dump_json() == piped.model_dump_json()


def test_inline_points_plan_as_the_same_rows_in_a_file(tmp_path: Path) -> None:
    csv = _csv(tmp_path)
    from_file = api.plan(
        {**PLAN, "workload": {"history": {"path": str(csv)}, "forecast": FORECAST}}, workers=1
    )
    inline = api.plan(
        {**PLAN, "workload": {"history": {"points": _points()}, "forecast": FORECAST}}, workers=1
    )
    assert from_file.model_dump_json() == inline.model_dump_json()
    again = api.plan(
        {**PLAN, "workload": {"history": {"points": _points()}, "forecast": FORECAST}}, workers=1
    )
    assert again.model_dump_json() == inline.model_dump_json()  # same input, same bytes


@pytest.mark.parametrize(
    ("forecast", "field"),
    [
        ({"quantile": 1.5}, "workload.forecast.quantile"),
        ({"quantile": 0.0}, "workload.forecast.quantile"),
        ({"horizon": "forever"}, "workload.forecast.horizon"),
        ({"bucket": "0h"}, "workload.forecast.bucket"),
        ({"method": "prophet"}, "workload.forecast.method"),
        ({"growth": "lots"}, "workload.forecast.growth"),
        ({"seasons": 2}, "workload.forecast.seasons"),
    ],
)
def test_bad_forecast_is_named_by_dotted_path(forecast: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as exc:
        parse_plan_request({**PLAN, "workload": {"history": {"points": _points()[:3]}, "forecast": forecast}})
    assert exc.value.field == field, exc.value


def test_bad_history_is_named_by_dotted_path() -> None:
    pts = _points()[:3]
    cases: list[tuple[Any, str]] = [
        ({"points": [{**pts[0], "requests_per_s": -1.0}]}, "workload.history.points[0].requests_per_s"),
        ({"points": []}, "workload.history.points"),
        ({"points": pts, "path": "x.csv"}, "workload.history"),
        ({"points": pts, "format": "csv"}, "workload.history"),
    ]
    for history, field in cases:
        with pytest.raises(InvalidInput) as exc:
            parse_plan_request({**PLAN, "workload": {"history": history}})
        assert exc.value.field == field, (history, exc.value)
    with pytest.raises(InvalidInput) as exc:  # out of order: found when the rows are read
        api.plan({**PLAN, "workload": {"history": {"points": [pts[1], pts[0]]}}}, workers=1)
    assert exc.value.field == "workload.history.points[1].timestamp"
    with pytest.raises(InvalidInput) as exc:  # 3 hours cannot show a day's season
        api.plan({**PLAN, "workload": {"history": {"points": pts}}}, workers=1)
    assert exc.value.field == "workload.history" and "3 buckets" in exc.value.reason


def test_plan_cli_reads_a_history_workload_relative_to_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _csv(tmp_path)
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text(
        yaml.safe_dump({**PLAN, "workload": {"history": "history.csv", "forecast": FORECAST}})
    )
    rc, out, err = run_cli(["plan", str(plan_file), "--workers", "1", "--json"], capsys)
    assert rc == 0, err
    assert json.loads(out)["workload"]["buckets"] == 24
