"""capplan forecast (issue #36, planner/forecast/, docs/forecast.md): each forecaster on synthetic
series whose continuation is known, quantiles, growth, gaps, refusals, the workload round trip
into `capplan plan`, determinism and the backtest's arithmetic.

The series are synthetic on purpose (edge cases with a known answer); real traces are the
readers' and the backtest figures' business.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from planner import api
from planner.errors import InvalidInput
from planner.forecast import FORECASTERS, forecast
from planner.forecast.backtest import Score, backtest, score_plan
from planner.forecast.growth import parse_duration_s, parse_growth
from planner.history.series import BucketLengths, HistorySeries
from tests.cli_helpers import run_cli

HOUR_S = 3600.0
DAY = 24
WEEK = 168


def _series(rates_per_s: np.ndarray | list[float | None], **kw: object) -> HistorySeries:
    """A synthetic history (tests only): rates per hourly bucket as counted requests."""
    reqs = tuple(None if r is None else float(r) * HOUR_S for r in rates_per_s)
    return HistorySeries(source="synthetic", start_unix_s=0.0, bucket_s=HOUR_S, requests=reqs, **kw)  # type: ignore[arg-type]


def _sine(n: int, offset: int = 0, weekly: float = 0.0) -> np.ndarray:
    h = np.arange(offset, offset + n)
    return 20 + 8 * np.sin(2 * np.pi * h / DAY) + weekly * np.sin(2 * np.pi * h / WEEK)


# --- each forecaster on a series with a known continuation -------------------------------------


def test_seasonal_naive_continues_a_pure_daily_sine_exactly() -> None:
    n = 3 * WEEK
    fc = forecast(_series(_sine(n)), horizon_buckets=48, quantiles=[0.5, 0.9], method="seasonal_naive")
    # last week's same hour of a 24 h-periodic series is the series itself; its week-over-week
    # differences are all 0 (to rounding), so every quantile is the point
    np.testing.assert_allclose(fc.point_per_s, _sine(48, offset=n), atol=1e-9)
    np.testing.assert_allclose(fc.quantiles_per_s[0.9], fc.point_per_s, atol=1e-9)


def test_mstl_recovers_daily_and_weekly_seasons() -> None:
    """Tolerance: 0.1 req/s over the next 48 h, 1.25% of the 8 req/s daily amplitude (measured
    0.045); the forecast's dominant period is 24 buckets."""
    n = 3 * WEEK
    fc = forecast(_series(_sine(n, weekly=3.0)), horizon_buckets=48, quantiles=[0.5], method="mstl")
    assert np.max(np.abs(fc.point_per_s - _sine(48, offset=n, weekly=3.0))) < 0.1
    spectrum = np.abs(np.fft.rfft(fc.point_per_s - fc.point_per_s.mean()))
    assert 48 / (int(np.argmax(spectrum[1:])) + 1) == 24
    assert fc.notes == []


def test_ets_follows_a_daily_sine() -> None:
    """One season only (the day): within 0.2 req/s (2.5% of the amplitude) on a pure daily sine."""
    n = 2 * WEEK
    fc = forecast(_series(_sine(n)), horizon_buckets=48, quantiles=[0.5], method="ets")
    assert np.max(np.abs(fc.point_per_s - _sine(48, offset=n))) < 0.2


def test_last_week_peak_is_flat_at_the_last_7_days_max() -> None:
    rates = np.full(2 * WEEK, 5.0)
    rates[10] = 100.0  # older than a week: not counted
    rates[WEEK + 30] = 17.0
    fc = forecast(_series(rates), horizon_buckets=30, quantiles=[0.5, 0.99], method="last_week_peak")
    assert fc.point_per_s.tolist() == [17.0] * 30
    assert fc.quantiles_per_s[0.5].tolist() == fc.quantiles_per_s[0.99].tolist() == [17.0] * 30


@pytest.mark.parametrize("method", sorted(FORECASTERS))
def test_quantiles_are_ordered_and_nonnegative(method: str) -> None:
    noise = np.random.default_rng(7).normal(0.0, 2.0, 3 * WEEK)
    fc = forecast(_series(np.maximum(_sine(3 * WEEK) + noise, 0)), horizon_buckets=72,
                  quantiles=[0.9, 0.1, 0.5], method=method)  # fmt: skip
    q10, q50, q90 = (fc.quantiles_per_s[q] for q in (0.1, 0.5, 0.9))
    assert np.all(q10 <= q50) and np.all(q50 <= q90) and np.all(q10 >= 0)
    if method not in ("last_week_peak",):
        assert float(np.mean(q90 - q10)) > 1.0  # noise of sd 2: a real interval, not a point


# --- growth, gaps, refusals ----------------------------------------------------------------------


def test_growth_rate_compounds_from_the_end_and_a_factor_multiplies() -> None:
    base = forecast(_series(_sine(2 * WEEK)), horizon_buckets=720, quantiles=[0.5], method="seasonal_naive")
    grown = forecast(_series(_sine(2 * WEEK)), horizon_buckets=720, quantiles=[0.5], method="seasonal_naive",
                     growth=parse_growth("10%/month"))  # fmt: skip
    # bucket h's middle is (h + 0.5) hours after the end; a month is 720 h: 1.1 ** ((h + 0.5) / 720)
    expected = base.point_per_s * 1.1 ** ((np.arange(720) + 0.5) / 720)
    np.testing.assert_allclose(grown.point_per_s, expected, rtol=1e-12)
    flat = forecast(_series(_sine(2 * WEEK)), horizon_buckets=5, quantiles=[0.5], method="last_week_peak",
                    growth=parse_growth("1.5"))  # fmt: skip
    assert flat.point_per_s.tolist() == [28.0 * 1.5] * 5  # peak of 20 + 8 sin: 28 at hour 6
    for bad in ("10", "ten%/month", "-100%/month", "0", "10%/fortnight"):
        if bad == "10":
            assert parse_growth(bad).factor == 10.0
            continue
        with pytest.raises(InvalidInput) as exc:
            parse_growth(bad)
        assert exc.value.field == "--growth"


def test_gaps_are_interpolated_and_reported() -> None:
    rates: list[float | None] = list(_sine(2 * WEEK))
    gap = 2 * WEEK - WEEK + 5  # in the last week: seasonal naive reads it
    before, after = rates[gap - 1], rates[gap + 1]
    rates[gap] = None
    fc = forecast(_series(rates), horizon_buckets=WEEK, quantiles=[0.5], method="seasonal_naive")
    assert before is not None and after is not None
    assert fc.point_per_s[5] == pytest.approx((before + after) / 2, abs=1e-12)
    assert any("1 of 336 history buckets were unobserved" in n for n in fc.notes)


def test_too_short_history_is_refused_naming_the_history_and_its_length() -> None:
    with pytest.raises(InvalidInput) as exc:
        forecast(_series(_sine(30)), horizon_buckets=24, quantiles=[0.5], method="mstl")
    assert exc.value.field == "history" and "30 buckets of 3600 s" in exc.value.reason
    with pytest.raises(InvalidInput) as exc:
        forecast(_series(_sine(30)), horizon_buckets=24, quantiles=[0.5], method="seasonal_naive")
    assert exc.value.field == "history" and "168 buckets" in exc.value.reason
    with pytest.raises(InvalidInput) as exc:
        forecast(_series(_sine(3 * WEEK)), horizon_buckets=0, quantiles=[0.5])
    assert exc.value.field == "--horizon"


def test_mstl_falls_back_to_the_daily_season_under_two_weeks() -> None:
    fc = forecast(_series(_sine(5 * DAY)), horizon_buckets=24, quantiles=[0.5], method="mstl")
    assert any("weekly season dropped" in n for n in fc.notes)
    assert np.max(np.abs(fc.point_per_s - _sine(24, offset=5 * DAY))) < 0.5


def test_durations() -> None:
    assert parse_duration_s("30d", "--horizon") == 30 * 86_400
    assert parse_duration_s("15m", "--bucket") == 900
    with pytest.raises(InvalidInput) as exc:
        parse_duration_s("soon", "--horizon")
    assert exc.value.field == "--horizon"


# --- the command: YAML into `capplan plan`, JSON, determinism ---------------------------------

PLAN_KEYS = """model: Qwen/Qwen3-8B
slo: {ttft_p99_ms: 500, itl_p99_ms: 50}
candidates: {gpus: [h100-sxm], tensor_parallel_sizes: [1], disaggregation: never}
availability: {min_replicas: 1}
headroom: 0.1
"""


def _csv(tmp_path: Path, rates: np.ndarray) -> Path:
    p = tmp_path / "history.csv"
    rows = [f"{int(i * HOUR_S)},{r:.4f},800,300" for i, r in enumerate(rates)]
    p.write_text("timestamp,requests_per_s,prompt_tokens_mean,output_tokens_mean\n" + "\n".join(rows) + "\n")
    return p


def test_yaml_workload_pipes_into_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csv = _csv(tmp_path, 3 * _sine(3 * WEEK, weekly=2.0))
    rc, out, err = run_cli(
        ["forecast", str(csv), "--horizon", "1d", "--bucket", "1h", "--quantile", "0.9"], capsys
    )
    assert rc == 0, err
    block = yaml.safe_load(out)["workload"]
    rates = [b["requests_per_s"] for b in block["arrivals"]["buckets"]]
    assert len(rates) == 24 and all(b["duration_s"] == 3600 for b in block["arrivals"]["buckets"])
    assert block["input_tokens"] == {"constant": 800} and block["output_tokens"] == {"constant": 300}
    assert "Poisson" in err  # the CSV has no timestamps per request: burstiness 1, said
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text(PLAN_KEYS + out)
    rc, plan_out, err = run_cli(["plan", str(plan_file), "--workers", "1", "--json"], capsys)
    assert rc == 0, err
    report = json.loads(plan_out)
    assert report["workload"]["buckets"] == 24
    assert report["workload"]["peak_requests_per_s"] == pytest.approx(max(rates))


def test_json_and_plan_file_give_a_whole_plan_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = _csv(tmp_path, _sine(3 * WEEK))
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text(
        PLAN_KEYS + "workload: {arrivals: {requests_per_s: 1}, input_tokens: 10, output_tokens: 10}\n"
    )
    rc, out, err = run_cli(["forecast", str(csv), "--horizon", "12h", "--plan", str(plan_file), "--json",
                            "--method", "ets", "--growth", "5%/week"], capsys)  # fmt: skip
    assert rc == 0, err
    request = json.loads(out)
    assert request["model"] == "Qwen/Qwen3-8B" and len(request["workload"]["arrivals"]["buckets"]) == 12
    assert request["workload"]["input_tokens"] == {"constant": 800}  # the history's, over the file's
    assert api.plan(request, workers=1).status in ("OPTIMAL", "FEASIBLE")


@pytest.mark.parametrize("method", ["mstl", "ets", "seasonal_peak"])
def test_same_history_same_bytes(tmp_path: Path, capsys: pytest.CaptureFixture[str], method: str) -> None:
    noise = np.random.default_rng(3).normal(0.0, 1.0, 3 * WEEK)
    csv = _csv(tmp_path, np.maximum(_sine(3 * WEEK) + noise, 0))
    argv = ["forecast", str(csv), "--horizon", "2d", "--method", method, "--quantile", "0.99"]
    first = run_cli(argv, capsys)
    assert first[0] == 0 and first == run_cli(argv, capsys)


def test_bad_flags_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csv = _csv(tmp_path, _sine(3 * WEEK))
    for flags, name in (
        (["--method", "prophet"], "--method"),
        (["--growth", "lots"], "--growth"),
        (["--quantile", "1.5"], "--quantile"),
        (["--horizon", "forever"], "--horizon"),
        (["--backtest"], "--plan"),
    ):
        rc, _, err = run_cli(["forecast", str(csv), *flags], capsys)
        assert rc == 2 and err.startswith(f"capplan: error: {name}:"), (flags, err)
    rc, _, err = run_cli(["forecast", str(_csv(tmp_path, _sine(20))), "--horizon", "1d"], capsys)
    assert rc == 2 and "history: " in err and "20 buckets" in err


# --- the backtest --------------------------------------------------------------------------------


def test_score_plan_by_hand() -> None:
    """Two hourly buckets: 1 then 2 replicas of 10 req/s each (1 then 2 GPUs, $3/GPU-h); 15 req/s
    came in both. GPU-hours 1 + 2 = 3; $9; bucket 0 (capacity 10 < 15) is at risk, bucket 1
    (20) is not; tokens 2 x 15 x 3600 x (800 + 300)."""
    report = SimpleNamespace(
        status="OPTIMAL",
        deployments=[
            SimpleNamespace(role="colocated", replicas_by_bucket=[1, 2], requests_per_s_per_replica=10.0)
        ],
        buckets=[SimpleNamespace(gpus=1, usd_per_hour=3.0), SimpleNamespace(gpus=2, usd_per_hour=6.0)],
        workload=SimpleNamespace(mean_input_tokens=800.0, mean_output_tokens=300.0),
    )
    score = Score("x", 0.9)
    score_plan(report, [15.0, 15.0], HOUR_S, score)
    assert (score.gpu_hours, score.usd, score.hours_at_risk) == (3.0, 9.0, 1.0)
    assert score.tokens == 2 * 15 * 3600 * 1100
    assert score.usd_per_million_tokens == pytest.approx(9.0 / (2 * 15 * 3600 * 1100) * 1e6)


def test_backtest_last_week_peak_buys_its_peak_all_week(tmp_path: Path) -> None:
    """Three weeks: one fold (fit weeks 1-2, test week 3). Week 2's peak is 3 x 28 = 84 req/s
    (20 + 8 sin peaks at 28), week 3 is the same: last_week_peak plans 84 req/s flat for 168 h,
    so it buys 168 x G GPU-hours, G the GPUs of the plan for a flat 84 req/s, and no hour is at
    risk. seasonal_naive plans the sine itself: fewer GPU-hours."""
    series = _series(3 * _sine(3 * WEEK))
    request = yaml.safe_load(PLAN_KEYS)
    request["workload"] = {"input_tokens": 800, "output_tokens": 300}
    scores = backtest(series, request, methods=["last_week_peak", "seasonal_naive"], quantiles=[0.9])
    flat = dict(
        request, workload={"arrivals": {"requests_per_s": 84.0}, "input_tokens": 800, "output_tokens": 300}
    )
    gpus = api.plan(flat, workers=1).gpu_count_peak
    assert gpus >= 2  # the case is not trivially one GPU
    peak, naive = scores
    assert (peak.method, peak.folds, peak.gpu_hours, peak.hours_at_risk) == (
        "last_week_peak",
        1,
        168.0 * gpus,
        0.0,
    )
    assert naive.gpu_hours < peak.gpu_hours and naive.hours_at_risk == 0.0
    assert math.isclose(peak.tokens, float(np.sum(3 * _sine(WEEK, offset=2 * WEEK))) * 3600 * 1100)


def test_backtest_cli_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csv = _csv(tmp_path, 3 * _sine(3 * WEEK))
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text(PLAN_KEYS + "workload: {arrivals: {requests_per_s: 1}}\n")
    argv = ["forecast", str(csv), "--backtest", "--plan", str(plan_file), "--methods", "last_week_peak,mstl",
            "--quantiles", "0.5,0.9"]  # fmt: skip
    rc, out, err = run_cli(argv, capsys)
    assert rc == 0, err
    assert "hours at risk" in out and "last_week_peak" in out and "mstl" in out
    rc, out, err = run_cli([*argv, "--json"], capsys)
    rows = json.loads(out)["scores"]
    assert [(r["method"], r["quantile"]) for r in rows] == [
        ("last_week_peak", 0.5), ("last_week_peak", 0.9), ("mstl", 0.5), ("mstl", 0.9)
    ]  # fmt: skip
    assert all(r["folds"] == 1 and r["gpu_hours"] > 0 for r in rows)


def test_lengths_weighted_by_requests() -> None:
    lengths = (BucketLengths(prompt_tokens_mean=100, output_tokens_mean=10),
               BucketLengths(prompt_tokens_mean=400, output_tokens_mean=40))  # fmt: skip
    from planner.forecast.to_workload import lengths as length_forms

    series = HistorySeries(source="s", start_unix_s=0, bucket_s=HOUR_S, requests=(1.0, 3.0), lengths=lengths)
    # (1 x 100 + 3 x 400) / 4 = 325; (1 x 10 + 3 x 40) / 4 = 32.5 -> 32 (round half to even)
    assert length_forms(series, []) == {"input_tokens": {"constant": 325}, "output_tokens": {"constant": 32}}


def test_burstiness_and_length_histograms_from_the_history() -> None:
    """Gap CV² 4, 2, 1: median 2, so the gamma shape k = 1/2. Prompt histograms with the same
    bounds (100, 1000, inf) sum: cumulative (1, 3, 3) + (0, 2, 4) = (1, 5, 7), bins 1, 4 and 2
    above 1000 tokens (dropped, with a note). Output lengths have means only: weighted by
    requests, (3 x 30 + 4 x 60) / 7 = 47.1 -> 47."""
    from planner.forecast.to_workload import workload_block
    from planner.history.series import LengthHistogram

    def hist(*counts: float) -> LengthHistogram:
        return LengthHistogram(upper_tokens=(100.0, 1000.0, math.inf), counts=counts)

    lengths = (
        BucketLengths(prompt_tokens_mean=300, output_tokens_mean=30, prompt_histogram=hist(1, 3, 3)),
        BucketLengths(prompt_tokens_mean=600, output_tokens_mean=60, prompt_histogram=hist(0, 2, 4)),
        None,
    )
    series = HistorySeries(source="s", start_unix_s=0, bucket_s=HOUR_S, requests=(3.0, 4.0, 0.0),
                           lengths=lengths, gap_cv2=(4.0, 2.0, 1.0))  # fmt: skip
    fc = forecast(series, horizon_buckets=2, quantiles=[0.5], method="last_week_peak")
    block, notes = workload_block(fc, 0.5, series)
    assert block["arrivals"]["burstiness"] == 0.5
    assert block["input_tokens"] == {"histogram": {"edges": [1.0, 100.0, 1000.0], "counts": [1, 4]}}
    assert block["output_tokens"] == {"constant": 47}
    assert any("2 requests above the last bound kept (1000) dropped" in n for n in notes)
    from planner.workload import Workload

    Workload.from_mapping(block)  # the workload schema takes it


@pytest.mark.parametrize(
    "name",
    ["azure2023.csv", "azure2024.csv", "burstgpt.csv", "mooncake.jsonl", "otlp_spans.json", "rates.csv"],
)
def test_every_history_format_gives_a_workload_plan_takes(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The readers' fixtures (tests/data/history/, minutes long): the baseline forecast of each,
    with the history's lengths (request logs: their summed 1-2-5 histograms, a shorter bucket's
    bounds a prefix of the longest) and burstiness, is a workload `capplan plan` accepts."""
    history = Path(__file__).parent / "data" / "history" / name
    argv = ["forecast", str(history), "--bucket", "1m", "--horizon", "5m", "--method", "last_week_peak"]
    rc, out, err = run_cli(argv, capsys)
    assert rc == 0, err
    block = yaml.safe_load(out)["workload"]
    if name.endswith((".jsonl", ".json")) or name.startswith("azure"):
        assert "histogram" in block["input_tokens"] and "histogram" in block["output_tokens"]
    plan_file = tmp_path / "plan.yaml"
    # Mooncake's prompts reach the 50k-100k bin: past Qwen3-8B's 40,960 context, so a 128k model
    keys = PLAN_KEYS.replace("Qwen/Qwen3-8B", "meta-llama/Llama-3.1-8B-Instruct")
    plan_file.write_text(keys + out)
    rc, _, err = run_cli(["plan", str(plan_file), "--workers", "1"], capsys)
    # Mooncake's 100k-token prompts meet no 500 ms TTFT on one H100 at TP 1: the input is
    # accepted and the plan says INFEASIBLE (exit 3), the others plan
    assert rc == (3 if name == "mooncake.jsonl" else 0), err


def test_with_workload_drops_a_trace_or_history_workload_s_own_keys() -> None:
    from planner.forecast.backtest import with_workload

    block = {"arrivals": {"buckets": [{"duration_s": 3600.0, "requests_per_s": 2.0}]}}
    history = {"history": "h.csv", "forecast": {"quantile": 0.9}, "endpoint": "completions", "name": "w"}
    got = with_workload({"workload": history, "slo": {}}, block)
    assert got["workload"] == {"endpoint": "completions", "name": "w", **block}
    trace = {"trace": "azure-conv-2023", "bucket_s": 60.0, "prefix_cache_hit_fraction": 0.2}
    assert with_workload({"workload": trace}, block)["workload"] == {"prefix_cache_hit_fraction": 0.2, **block}
