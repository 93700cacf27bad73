"""Tiny and odd traces (issue 32): Azure-format CSVs of 1-300 rows (planner/traces.py), with equal
timestamps, one bucket or a span of days, zero and huge token counts within the documented ranges
(0 .. 10,000,000 tokens, read as at least 1), given to `plan` and `evaluate` through the Python
API and the CLI. Each must plan (or evaluate), or refuse with InvalidInput naming the workload
field at fault (exit 2, one line); never another exception (a 240-row trace once crashed both
with a ZeroDivisionError deep in the latency model).

Derandomized (tests/conftest.py); the @example rows are cases the exploration found, each a
crash before its fix: a histogram edge half a token past the range (10M-token requests binned),
a decode pool's KV limit above a deployment's max_num_seqs (1-token requests), and more buckets
than the plan's MILP sizes (a trace over 9 days in 60 s buckets).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from fuzz_support import check, run
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from planner import api
from planner.errors import InvalidInput

HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens"
PLAN = {
    "model": "Qwen/Qwen3-8B",
    "slo": {"ttft_p99_ms": 2000, "itl_p99_ms": 100},
    "candidates": {"gpus": ["h100-sxm"], "tensor_parallel_sizes": [1, 2]},
}
DEPLOYMENT = {"model": "Qwen/Qwen3-8B", "gpu": "h100-sxm", "replicas": 1}

# Token counts: zero (read as 1), tiny, typical, the model's context and past it, the range's top.
TOKENS = st.one_of(
    st.integers(0, 3),
    st.integers(0, 40_000),
    st.sampled_from([0, 1, 40_960, 40_961, 9_999_999, 10_000_000]),
)
GAPS_S = st.sampled_from([0.25, 0.0, 1e-6, 0.001, 1.0, 60.0, 3600.0, 1e5])
OPTIONS = st.fixed_dictionaries(
    {},
    optional={
        "bucket_s": st.sampled_from([0.001, 1.0, 60.0, 3600.0, 1e7]),
        "burstiness": st.sampled_from(["gaps", "rescaled", 1.0, 0.01, 100.0]),
        "bins": st.sampled_from([1, 2, 50]),
        "requests_per_s": st.sampled_from([1e-7, 0.5, 50.0, 1e6]),
    },
)
SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))


@st.composite
def traces(draw: st.DrawFn) -> str:
    """A trace CSV: 1-300 rows, all at one instant or apart by drawn gaps, times as seconds or
    as dates; a length column may be one value throughout."""
    n = draw(st.integers(1, 300))
    same_instant = draw(st.integers(0, 5)) == 0  # mostly apart: one instant has no rate to plan
    as_dates = draw(st.booleans())
    t = draw(st.sampled_from([0.0, 5.0, 1e6]))
    prompt = draw(st.one_of(st.none(), TOKENS))
    output = draw(st.one_of(st.none(), TOKENS))
    rows = []
    for i in range(n):
        if i and not same_instant:
            t += draw(GAPS_S)
        stamp = (
            (dt.datetime(2023, 11, 16) + dt.timedelta(seconds=t)).isoformat(sep=" ") if as_dates else repr(t)
        )
        p = draw(TOKENS) if prompt is None else prompt
        o = draw(TOKENS) if output is None else output
        rows.append(f"{stamp},{p},{o}")
    return "\n".join([HEADER, *rows]) + "\n"


def _rows(*rows: str) -> str:
    return "\n".join([HEADER, *rows]) + "\n"


HUGE_BINNED = _rows("1000000.0,40960,40000", *[f"1000000.001,40960,{o}" for o in (1, 9999999, 10000000)])
ONE_TOKEN = _rows("0.0,1,2", "0.25,1,2", *[f"{100000.25 + i * 1e-6!r},1,2" for i in range(100)])
NINE_DAYS = _rows("5.0,53,0", "818000.0,53,3")
ONE_ROW = _rows("5.0,100,20")
ONE_INSTANT = _rows(*["7.5,300,40"] * 240)


def _answers_or_names_the_field(call: Any, request: dict[str, Any], base: Path) -> None:
    try:
        call(request, base_dir=base)
    except InvalidInput as exc:
        assert exc.field.startswith("workload") and exc.reason, (exc.field, exc.reason)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "trace.csv"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("traces")


def _plan(request: dict[str, Any], *, base_dir: Path) -> Any:
    return api.plan(request, base_dir=base_dir, workers=1)


@SETTINGS
@given(traces(), OPTIONS)
@example(HUGE_BINNED, {"bins": 2})
@example(ONE_TOKEN, {})
@example(NINE_DAYS, {})
@example(ONE_ROW, {})
@example(ONE_INSTANT, {})
def test_plan_on_odd_traces(base: Path, text: str, options: dict[str, Any]) -> None:
    _write(base, text)
    _answers_or_names_the_field(_plan, {**PLAN, "workload": {"trace": "trace.csv", **options}}, base)


@SETTINGS
@given(traces(), OPTIONS)
@example(HUGE_BINNED, {"bins": 2})
@example(ONE_TOKEN, {})
@example(ONE_ROW, {})
@example(ONE_INSTANT, {})
def test_evaluate_on_odd_traces(base: Path, text: str, options: dict[str, Any]) -> None:
    _write(base, text)
    request = {"deployment": DEPLOYMENT, "workload": {"trace": "trace.csv", **options}}
    _answers_or_names_the_field(api.evaluate, request, base)


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(traces(), st.sampled_from(["plan", "evaluate"]))
@example(NINE_DAYS, "plan")
@example(ONE_INSTANT, "evaluate")
def test_the_cli_on_odd_traces(base: Path, text: str, command: str) -> None:
    """Exit 0 (or 3: no plan) with strict JSON, or 2 with one line naming the field."""
    trace = _write(base, text)
    if command == "plan":
        body: dict[str, Any] = {**PLAN, "workload": {"trace": trace.name}}
    else:
        body = {"deployment": DEPLOYMENT, "workload": {"trace": trace.name}}
    request = base / f"{command}.yaml"
    request.write_text(json.dumps(body))
    o = run([command, str(request), "--json", *(["--workers", "1"] if command == "plan" else [])])
    check(o)
    assert o.rc in (0, 2, 3), o.err
    if o.rc == 2:
        assert o.err.startswith("capplan: error: workload"), o.err


def test_the_examples_fail_loudly_before_their_fixes(tmp_path: Path) -> None:
    """The @example cases answer now; each names what it exercised."""
    _write(tmp_path, NINE_DAYS)
    with pytest.raises(InvalidInput, match=r"a plan sizes at most 8,784 \(give bucket_s >= 93.1") as exc:
        _plan({**PLAN, "workload": {"trace": "trace.csv"}}, base_dir=tmp_path)
    assert exc.value.field == "workload.bucket_s"
    _write(tmp_path, ONE_TOKEN)
    report = _plan({**PLAN, "workload": {"trace": "trace.csv"}}, base_dir=tmp_path)
    assert report.status in ("OPTIMAL", "FEASIBLE")
    assert all(d.max_num_seqs <= 65_536 for d in report.deployments)
    _write(tmp_path, HUGE_BINNED)
    report = api.evaluate(
        {"deployment": DEPLOYMENT, "workload": {"trace": "trace.csv", "bins": 2}}, base_dir=tmp_path
    )
    assert report.workload.p99_output_tokens <= 10_000_000  # binned: the top bin ends at the range


def test_a_written_forecast_past_the_plans_buckets_names_its_field() -> None:
    """The same limit for buckets written out (a workload takes 100,000; the plan's MILP 8,784)."""
    buckets = [{"duration_s": 60, "requests_per_s": 1 + i % 3} for i in range(9000)]
    workload = {
        "arrivals": {"buckets": buckets},
        "input_tokens": {"constant": 100},
        "output_tokens": {"constant": 100},
    }
    with pytest.raises(InvalidInput, match=r"9,000 buckets over 5\.4e") as exc:
        _plan({**PLAN, "workload": workload}, base_dir=Path("."))
    assert exc.value.field == "workload.arrivals.buckets"
