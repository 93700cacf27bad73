"""History readers (issue #36): each format's fixture under tests/data/history/ read into a
HistorySeries, with expectations derived by hand in the tests, and bad input named by line."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.errors import InvalidInput
from planner.history.reader import read_history

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
