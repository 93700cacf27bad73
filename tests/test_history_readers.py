"""History readers (issue #36): each format's fixture under tests/data/history/ read into a
HistorySeries, with expectations derived by hand in the tests, and bad input named by line."""

from __future__ import annotations

import itertools
import json
import statistics
from pathlib import Path

import pytest

from planner.errors import InvalidInput
from planner.history.reader import FORMATS, read_history

DATA = Path(__file__).parent / "data" / "history"
T0 = 1715299200.0  # 2024-05-10T00:00:00Z


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# --- plain CSV ------------------------------------------------------------------------------------


def test_rate_csv_time_weights_rows_and_leaves_gaps_unobserved() -> None:
    """Rows every 30 min (the step): hour 0 holds 2/s then 4/s for half an hour each, mean 3/s =
    10,800 requests; hour 1 only the 01:00 row's half hour at 6/s (its next row is 2 h later, so
    it covers one step), 6 x 3600 = 21,600; hour 2 nothing (None, not 0); hour 3 the last row,
    1/s. Prompt means weigh by requests: hour 0 (2x100 + 4x400) / 6 = 300."""
    s = read_history(DATA / "rates.csv", bucket_s=3600)
    assert s.start_unix_s == T0 and s.bucket_s == 3600
    assert s.requests == (10_800.0, 21_600.0, None, 3600.0)
    assert s.lengths is not None and s.gap_cv2 is None
    first = s.lengths[0]
    assert first is not None and first.prompt_tokens_mean == pytest.approx(300.0)
    assert first.output_tokens_mean == pytest.approx(30.0)
    assert s.lengths[2] is None
    assert "rates.csv (plain CSV" in s.source


def test_rate_csv_unix_seconds_and_finer_buckets(tmp_path: Path) -> None:
    """Unix seconds; 60 s rows re-bucketed into 120 s buckets: (1 + 3)/2 x 120 = 240, then a
    bucket half covered at 5/s: 5 x 120 = 600 (the covered part's mean rate)."""
    text = "timestamp,requests_per_s\n1200,1\n1260,3\n1320,5\n"
    s = read_history(_write(tmp_path, "u.csv", text), bucket_s=120)
    assert s.start_unix_s == 1200.0 and s.requests == (240.0, 600.0)


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        (
            "timestamp,requests_per_s\n2024-05-10T00:00:00Z,x\n",
            "history:line 2.requests_per_s",
            "'x' is not a number",
        ),
        ("timestamp,requests_per_s\nyesterday,1\n", "history:line 2.timestamp", "cannot parse 'yesterday'"),
        ("timestamp,requests_per_s\n10,1\n\n10,2\n", "history:line 4.timestamp", "not after the previous"),
        ("timestamp,requests_per_s\n10,-1\n", "history:line 2.requests_per_s", "outside 0 .. "),
        ("timestamp,requests_per_s\n10\n", "history:line 2.requests_per_s", "row too short"),
        ("timestamp,requests_per_s\n", "history", "no rows"),
    ],
)
def test_rate_csv_bad_rows_are_named_by_line(tmp_path: Path, text: str, field: str, words: str) -> None:
    p = _write(tmp_path, "bad.csv", text)
    with pytest.raises(InvalidInput) as e:
        read_history(p, bucket_s=60, format="csv")
    assert e.value.field == field
    assert words in e.value.reason and "bad.csv (plain CSV timestamp,requests_per_s)" in e.value.reason


def test_unknown_format_and_bucket_are_refused(tmp_path: Path) -> None:
    p = _write(tmp_path, "x.csv", "a,b\n1,2\n")
    with pytest.raises(InvalidInput, match="cannot tell the history format") as e:
        read_history(p, bucket_s=60)
    assert e.value.field == "history"
    with pytest.raises(InvalidInput) as e:
        read_history(p, bucket_s=60, format="parquet")
    assert e.value.field == "history.format"
    with pytest.raises(InvalidInput) as e:
        read_history(p, bucket_s=0.5)
    assert e.value.field == "history.bucket_s"


# --- request logs -----------------------------------------------------------------------------------


def _cv2(gaps: list[float]) -> float:
    """Population variance over squared mean: the gap CV² by its definition."""
    return statistics.pvariance(gaps) / statistics.fmean(gaps) ** 2


def test_azure_2023_counts_per_second_and_gap_cv2() -> None:
    """The first 10 rows of the bundled Azure 2023 code trace, 18:17:03.98 .. 18:17:05.28: one
    arrival in second :03, seven in :04, two in :05. The gap CV² of second :04 from its
    arrival fractions (the file's rows 3-9)."""
    s = read_history(DATA / "azure2023.csv", bucket_s=1)
    assert s.requests == (1.0, 7.0, 2.0)
    assert s.start_unix_s == 1700158623.0  # 2023-11-16T18:17:03Z
    at = [0.0319600, 0.0781490, 0.1206440, 0.4249540, 0.5191470, 0.6785310, 0.9960010]
    gaps = [b - a for a, b in itertools.pairwise(at)]
    assert s.gap_cv2 is not None
    assert s.gap_cv2[1] == pytest.approx(_cv2(gaps), rel=1e-6)
    assert s.gap_cv2[0] is None and s.gap_cv2[2] is None  # fewer than 3 arrivals
    assert s.lengths is not None and s.lengths[0] is not None
    assert s.lengths[0].prompt_tokens_mean == 4808 and s.lengths[0].output_tokens_mean == 10


def test_azure_2024_week_days_and_histogram() -> None:
    """The 2024 format's offset timestamps (the first and last five rows of the week-long code
    trace, as its notebook prints them): day buckets 05-10 .. 05-16, five requests on the first
    and last day and observed zeros between (a log sees its whole span). Day 0's prompts 2162,
    2399, 76, 2376, 7670: mean 2936.6; cumulative at the 1-2-5 bounds: <=100: 1, <=1000: 1,
    <=2000: 1, <=5000: 4, <=10000: 5."""
    s = read_history(DATA / "azure2024.csv", bucket_s=86_400)
    assert s.start_unix_s == T0
    assert s.requests == (5.0, 0.0, 0.0, 0.0, 0.0, 0.0, 5.0)
    assert s.lengths is not None and s.lengths[1] is None
    day0 = s.lengths[0]
    assert day0 is not None and day0.prompt_tokens_mean == pytest.approx(2936.6)
    h = day0.prompt_histogram
    assert h is not None and h.upper_tokens[-1] == 10_000
    cum = dict(zip(h.upper_tokens, h.counts, strict=True))
    assert (cum[50], cum[100], cum[1000], cum[2000], cum[5000], cum[10_000]) == (0, 1, 1, 1, 4, 5)


def test_burstgpt_drops_failed_requests_and_counts_them() -> None:
    """Minute buckets from 0 s: 5 and 45 s in minute 0; 118 s in minute 1 (the failed request at
    120 s, 0 response tokens, is dropped); 130 s in minute 2; none in minute 3 (observed 0);
    250 s in minute 4."""
    s = read_history(DATA / "burstgpt.csv", bucket_s=60)
    assert s.requests == (2.0, 1.0, 1.0, 0.0, 1.0)
    assert s.dropped_requests == 1
    assert s.start_unix_s == 0.0


def test_mooncake_ms_timestamps_and_gap_cv2_by_hand() -> None:
    """Conversation-trace rows at 0, 0, 0, 3000, 3000, 3000 ms (bucket [0, 5) s) and 5999 x3,
    9000 x2 ms ([5, 10) s). Gaps 0,0,3,0,0: mean 0.6, mean square 1.8, variance 1.44, CV² 4;
    gaps 0,0,3.001,0: one nonzero of four, CV² = 4 - 1 = 3."""
    s = read_history(DATA / "mooncake.jsonl", bucket_s=5)
    assert s.requests == (6.0, 5.0)
    assert s.gap_cv2 is not None
    assert s.gap_cv2[0] == pytest.approx(4.0) and s.gap_cv2[1] == pytest.approx(3.0)


def test_otlp_llm_request_spans_only() -> None:
    """Four llm_request spans at +1, +2, +5 and +61 s (a POST span between them is not a request
    to count): minute 0 holds three, prompts 100, 300, 200 (mean 200), minute 1 one."""
    s = read_history(DATA / "otlp_spans.json", bucket_s=60)
    assert s.start_unix_s == T0 and s.requests == (3.0, 1.0)
    assert s.lengths is not None and s.lengths[0] is not None
    assert s.lengths[0].prompt_tokens_mean == pytest.approx(200.0)
    assert s.lengths[0].output_tokens_mean == pytest.approx(20.0)


def test_out_of_order_rows_count_but_give_no_gap_cv2(tmp_path: Path) -> None:
    text = "TIMESTAMP,ContextTokens,GeneratedTokens\n3,1,1\n1,1,1\n2,1,1\n4,1,1\n"
    s = read_history(_write(tmp_path, "o.csv", text), bucket_s=10)
    assert s.requests == (4.0,) and s.gap_cv2 == (None,)


@pytest.mark.parametrize(
    ("name", "text", "field", "words"),
    [
        (
            "a.csv",
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 00:00:00,5,x\n",
            "history:line 2.GeneratedTokens",
            "'x' is not a number of tokens",
        ),
        (
            "a.csv",
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 00:00:00,-5,1\n",
            "history:line 2.ContextTokens",
            "negative",
        ),
        (
            "a.csv",
            "TIMESTAMP,ContextTokens,GeneratedTokens\n\n2024-13-10 00:00:00,5,1\n",
            "history:line 3.TIMESTAMP",
            "cannot parse",
        ),
        (
            "b.csv",
            "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,1\n",
            "history:line 2.Response tokens",
            "row too short",
        ),
        (
            "m.jsonl",
            '{"timestamp": 0, "input_length": 5, "output_length": 1}\n{"timestamp": 1, "input_length": 5}\n',
            "history:line 2.output_length",
            "missing",
        ),
        (
            "m.jsonl",
            '{"timestamp": 0, "input_length": 5, "output_length": 1}\n{"timestamp": -1, "input_length": 5, "output_length": 1}\n',
            "history:line 2.timestamp",
            "not milliseconds",
        ),
        (
            "m.jsonl",
            '{"timestamp": 0, "input_length": 5, "output_length": 1}\n{nope\n',
            "history:line 2",
            "not JSON",
        ),
    ],
)
def test_request_log_bad_rows_are_named_by_line(
    tmp_path: Path, name: str, text: str, field: str, words: str
) -> None:
    with pytest.raises(InvalidInput) as e:
        read_history(_write(tmp_path, name, text), bucket_s=60)
    assert e.value.field == field
    assert words in e.value.reason and name in e.value.reason


def test_otlp_span_without_token_attributes_is_named(tmp_path: Path) -> None:
    doc = json.loads((DATA / "otlp_spans.json").read_text())
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[4]["attributes"] = spans[4]["attributes"][:2]  # completion_tokens gone
    with pytest.raises(InvalidInput) as e:
        read_history(_write(tmp_path, "t.json", json.dumps(doc)), bucket_s=60)
    assert e.value.field == "history.spans[4].attributes"
    assert "gen_ai.usage.completion_tokens" in e.value.reason and "OTLP JSON" in e.value.reason
    spans[4]["attributes"] = [{"key": "gen_ai.usage.prompt_tokens", "value": {"intValue": "x"}}]
    with pytest.raises(InvalidInput) as e:
        read_history(_write(tmp_path, "t.json", json.dumps(doc)), bucket_s=60)
    assert e.value.field == "history.spans[4].attributes.gen_ai.usage.prompt_tokens"


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("rates.csv", "csv"),
        ("azure2023.csv", "azure"),
        ("azure2024.csv", "azure"),
        ("burstgpt.csv", "burstgpt"),
        ("mooncake.jsonl", "mooncake"),
        ("otlp_spans.json", "otlp"),
    ],
)
def test_detected_format_is_named_in_the_source(name: str, fmt: str) -> None:
    s = read_history(DATA / name, bucket_s=3600)
    assert s.source == f"{DATA / name} ({FORMATS[fmt]})"
