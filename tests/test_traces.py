"""Azure-format traces: parsing, field-named errors, published statistics, derived workloads."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from planner.errors import InvalidInput
from planner.traces import Trace, builtin_trace, builtin_trace_names, load_trace, parse_trace

HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


def _write(tmp_path: Path, text: str, name: str = "t.csv") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# ---- the bundled traces match their published numbers ----------------------------------------
# Literals from summary_azure2023_{conv,code}.json (Azure/AzurePublicDataset, Splitwise ISCA'24):
# conv: 19366 requests, span 3501.722 s, mean 5.5304 req/s, inter-arrival CV 1.0942,
#       input mean 1154.7 / p50 1020 / p99 4142, output mean 211.13 / p99 601,
#       per-minute rate min 3.1833 max 8.45.
# code: 8819 requests, inter-arrival CV 13.1513, per-minute peak/mean 4.104,
#       input mean 2047.85, output mean 27.88.


def test_builtin_names() -> None:
    assert builtin_trace_names() == ["azure-code-2023", "azure-conv-2023"]
    with pytest.raises(InvalidInput) as exc:
        builtin_trace("nope")
    assert exc.value.field == "trace"


def test_conv_trace_matches_published_stats() -> None:
    tr = builtin_trace("azure-conv-2023")
    s = tr.summary()
    assert s.num_requests == 19366
    assert s.duration_s == pytest.approx(3501.722, abs=1e-3)
    assert round(s.input_tokens.mean) == 1155
    assert s.input_tokens.p50 == 1020 and s.input_tokens.p99 == 4142
    assert round(s.output_tokens.mean) == 211
    assert s.output_tokens.p99 == 601
    assert round(s.interarrival_cv, 2) == 1.09
    assert round(s.mean_requests_per_s, 1) == 5.5
    assert s.mean_requests_per_s == pytest.approx(5.5304, abs=1e-4)
    assert s.bucket_rate_min == pytest.approx(3.1833, abs=1e-4)
    assert s.bucket_rate_max == pytest.approx(8.45)
    assert tr.clamped_zero_tokens == 0
    assert tr.arrival_s[0] == 0.0 and np.all(np.diff(tr.arrival_s) >= 0)


def test_code_trace_is_bursty() -> None:
    s = builtin_trace("azure-code-2023").summary()
    assert s.num_requests == 8819
    assert round(s.interarrival_cv, 1) == 13.2
    assert round(s.peak_to_mean, 1) == 4.1
    assert round(s.input_tokens.mean) == 2048
    assert round(s.output_tokens.mean) == 28
    assert s.bucket_rate_min == 0.0  # silent minutes


def test_builtin_traces_are_read_only_and_cached() -> None:
    tr = builtin_trace("azure-conv-2023")
    assert builtin_trace("azure-conv-2023") is tr
    with pytest.raises(ValueError):
        tr.arrival_s[0] = 1.0


# ---- derived workloads ----------------------------------------------------------------------


def test_conv_to_workload() -> None:
    tr = builtin_trace("azure-conv-2023")
    w = tr.to_workload(burstiness="gaps")
    assert w.name == "azure-conv-2023"
    assert w.arrivals.buckets is not None and len(w.arrivals.buckets) == 59
    assert w.arrivals.mean_requests_per_s == pytest.approx(tr.mean_requests_per_s, rel=1e-9)
    assert w.arrivals.burstiness == pytest.approx(1 / 1.0942**2, rel=1e-3)
    assert w.input_tokens.mean() == pytest.approx(1154.7, abs=0.1)
    assert w.output_tokens.quantile(1.0) == 1000
    r = w.sample_requests(seed=0, horizon_s=tr.duration_s)
    assert len(r) == pytest.approx(tr.num_requests, rel=0.05)
    rescaled = tr.to_workload()  # the default: buckets explain the slow variation
    assert rescaled.arrivals.burstiness > w.arrivals.burstiness  # buckets explain part of the CV
    flat = tr.to_workload(bucket_s=None, bins=32)
    assert flat.arrivals.requests_per_s == pytest.approx(5.5304, abs=1e-4)
    assert flat.input_tokens.kind == "histogram"
    assert flat.output_tokens.mean() == pytest.approx(211.13, rel=0.02)


def test_code_to_workload_keeps_silent_minutes() -> None:
    w = builtin_trace("azure-code-2023").to_workload(burstiness="gaps")
    assert w.arrivals.buckets is not None
    assert min(b.requests_per_s for b in w.arrivals.buckets) == 0.0
    assert w.arrivals.burstiness == pytest.approx(1 / 13.1513**2, rel=1e-3)
    # by default the per-minute rates carry the slow swings; the gaps within minutes still CV ~7
    rescaled = builtin_trace("azure-code-2023").to_workload()
    assert 1 / rescaled.arrivals.burstiness**0.5 == pytest.approx(7.08, abs=0.1)


def test_time_scaled() -> None:
    tr = builtin_trace("azure-conv-2023")
    fast = tr.time_scaled(20.0)
    assert fast.mean_requests_per_s == pytest.approx(20.0)
    assert fast.interarrival_cv == pytest.approx(tr.interarrival_cv)
    assert np.array_equal(fast.prompt_tokens, tr.prompt_tokens)
    with pytest.raises(InvalidInput) as exc:
        tr.time_scaled(-1)
    assert exc.value.field == "requests_per_s"


# ---- parsing ------------------------------------------------------------------------------------


def test_parse_seven_digit_fractions_and_sorting(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        HEADER
        + "2023-11-16 18:15:47.0000001,10,5\n"
        + "2023-11-16 18:15:46.6805900,374,44\n"
        + "\n"
        + "2023-11-16 18:16:46.6805900,0,3\n",
    )
    tr = load_trace(p)
    assert tr.name == "t"
    assert tr.arrival_s.tolist() == pytest.approx([0.0, 0.3194101, 60.0], abs=1e-9)
    assert tr.prompt_tokens.tolist() == [374, 10, 1]  # sorted by time; 0 clamped to 1
    assert tr.output_tokens.tolist() == [44, 5, 3]
    assert tr.clamped_zero_tokens == 1


def test_parse_variants(tmp_path: Path) -> None:
    text = (
        "generated_at,timestamp,contexttokens,GeneratedTokens\n"
        "x,2023-11-16T18:00:00Z,10,5\n"
        "y,2023-11-16T20:00:01+02:00,11,6\n"
        "z,2023-11-16 18:00:02,12.0,7\n"
    )
    tr = load_trace(_write(tmp_path, text))
    assert tr.arrival_s.tolist() == pytest.approx([0.0, 1.0, 2.0])
    assert tr.prompt_tokens.tolist() == [10, 11, 12]
    secs = parse_trace((HEADER + "0.5,10,5\n1.5,10,5\n").splitlines())
    assert secs.arrival_s.tolist() == [0.0, 1.0]


def test_missing_column_names_it(tmp_path: Path) -> None:
    p = _write(tmp_path, "TIMESTAMP,ContextTokens\n2023-11-16 18:15:46.6805900,374\n")
    with pytest.raises(InvalidInput) as exc:
        load_trace(p)
    assert exc.value.field == "trace.GeneratedTokens"
    assert "missing column" in exc.value.reason


def test_bad_row_names_line_and_column(tmp_path: Path) -> None:
    good = "2023-11-16 18:15:46.6805900,374,44\n"
    p = _write(tmp_path, HEADER + good + good + "2023-11-16 18:15:47.1,abc,44\n")
    with pytest.raises(InvalidInput) as exc:
        load_trace(p)
    assert exc.value.field == "trace:line 4.ContextTokens"
    p = _write(tmp_path, HEADER + good + "2023-13-16 18:15:47.1,3,44\n")
    with pytest.raises(InvalidInput) as exc:
        load_trace(p)
    assert exc.value.field == "trace:line 3.TIMESTAMP"
    p = _write(tmp_path, HEADER + good + "\n" + "2023-11-16 18:15:47.1,3,-4\n")
    with pytest.raises(InvalidInput) as exc:
        load_trace(p)
    assert exc.value.field == "trace:line 4.GeneratedTokens"
    assert "negative" in exc.value.reason
    p = _write(tmp_path, HEADER + "2023-11-16 18:15:47.1,3\n")
    with pytest.raises(InvalidInput) as exc:
        load_trace(p)
    assert exc.value.field == "trace:line 2.GeneratedTokens"
    p = _write(tmp_path, HEADER + good + "1.5,3,4\n")
    with pytest.raises(InvalidInput) as exc:
        load_trace(p, field="--trace")
    assert exc.value.field == "--trace:line 3.TIMESTAMP"


def test_empty_traces(tmp_path: Path) -> None:
    for text in ("", HEADER, HEADER + "\n\n"):
        with pytest.raises(InvalidInput) as exc:
            load_trace(_write(tmp_path, text))
        assert exc.value.field == "trace"
    with pytest.raises(InvalidInput) as exc:
        load_trace(tmp_path / "absent.csv")
    assert exc.value.field == "trace"


def test_single_request_has_no_rate() -> None:
    tr = Trace.from_arrays([5.0], [10], [3])
    assert tr.arrival_s.tolist() == [0.0]
    with pytest.raises(InvalidInput):
        _ = tr.mean_requests_per_s


def test_from_arrays_rejects_fractional_tokens() -> None:
    with pytest.raises(InvalidInput) as exc:
        Trace.from_arrays([0.0, 1.0], [10.5, 3.0], [1, 2])
    assert exc.value.field == "trace.prompt_tokens"
    assert Trace.from_arrays([0.0, 1.0], [10.0, 3.0], [1, 2]).prompt_tokens.tolist() == [10, 3]


# ---- ranges -------------------------------------------------------------------------------------

HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


@pytest.mark.parametrize(
    ("rows", "field", "reason"),
    [
        ("0,10,10\n1e30,10,10\n", "trace:line 3.TIMESTAMP", "a trace may span at most 1e+07 s"),
        ("0,10,10\n-1e300,10,10\n", "trace:line 2.TIMESTAMP", "a trace may span at most 1e+07 s"),
        ("0,1e30,10\n", "trace:line 2.ContextTokens", "more than 10,000,000"),
        ("0,10,20000000\n", "trace:line 2.GeneratedTokens", "more than 10,000,000"),
        ("0," + "9" * 200_000 + ",1\n", "trace:line 2", "field larger than field limit"),
        ("0,1\x00,1\n", "trace:line 2.ContextTokens", "not a number of tokens"),
    ],
)
def test_hostile_rows_name_the_line(rows: str, field: str, reason: str) -> None:
    with pytest.raises(InvalidInput) as exc:
        parse_trace((HEADER + rows).splitlines(keepends=True))
    assert exc.value.field == field
    assert reason in exc.value.reason


def test_trace_size_is_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    import planner.trace_csv as trace_csv
    import planner.trace_model as trace_model

    # The limit lives in trace_model; trace_csv imports it to count rows as it reads them.
    monkeypatch.setattr(trace_model, "MAX_TRACE_REQUESTS", 3)
    monkeypatch.setattr(trace_csv, "MAX_TRACE_REQUESTS", 3)
    with pytest.raises(InvalidInput, match="more than 3 requests") as exc:
        parse_trace((HEADER + "0,1,1\n1,1,1\n2,1,1\n3,1,1\n").splitlines(keepends=True))
    assert exc.value.field == "trace:line 5"
    with pytest.raises(InvalidInput, match="more than the 3 limit"):
        Trace.from_arrays([0, 1, 2, 3], [1] * 4, [1] * 4)


def test_trace_options_outside_their_range_name_the_option() -> None:
    tr = builtin_trace("azure-conv-2023")
    for kw, field in (
        ({"bucket_s": 1e-6}, "bucket_s"),
        ({"bucket_s": 1e8}, "bucket_s"),
        ({"bucket_s": 0.01}, "bucket_s"),  # 360,000 buckets over the hour
        ({"bins": 0}, "bins"),
        ({"bins": 100_001}, "bins"),
    ):
        with pytest.raises(InvalidInput) as exc:
            tr.to_workload(**kw)
        assert exc.value.field == field, kw
    with pytest.raises(
        InvalidInput, match="cuts the trace's 3,502 s into 350,173 buckets, more than 100,000"
    ):
        tr.to_workload(bucket_s=0.01)
    for rate in (0.0, 1e-9, 1e7, float("nan")):
        with pytest.raises(InvalidInput) as exc:
            tr.time_scaled(rate)
        assert exc.value.field == "requests_per_s"
    with pytest.raises(InvalidInput, match="stretches the trace") as exc:
        tr.time_scaled(1e-3)  # 19,366 requests at 1e-3/s: ~223 days
    # Three requests 0.1 microseconds apart: 1.5e7 requests/s, more than a workload may have.
    burst = Trace.from_arrays([0.0, 1e-7, 2e-7], [5, 5, 5], [5, 5, 5])
    with pytest.raises(InvalidInput, match="above the 1e\\+06 limit") as exc:
        burst.to_workload(bucket_s=None)
    assert exc.value.field == "trace"
    with pytest.raises(InvalidInput, match=r"per-bucket rates need at least 0\.001 s") as exc:
        burst.to_workload()
    assert exc.value.field == "trace"


def test_arrays_with_garbage_are_refused_by_field() -> None:
    for cols, field in (
        ((["a", "b"], [1, 1], [1, 1]), "trace.arrival_s"),
        (([0, 1], ["x", "y"], [1, 1]), "trace.prompt_tokens"),
        (([0, 1], [1, 1], [1e30, 1]), "trace.output_tokens"),
        (([0, float("inf")], [1, 1], [1, 1]), "trace.arrival_s"),
        (([0, 1e30], [1, 1], [1, 1]), "trace.arrival_s"),
    ):
        with pytest.raises(InvalidInput) as exc:
            Trace.from_arrays(*cols)
        assert exc.value.field == field, cols
