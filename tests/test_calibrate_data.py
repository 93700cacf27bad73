"""Measurement files: the JSON format, the CSV of the same facts, errors naming the line."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from planner.costmodel.calibrated import FITTED_MEASUREMENTS
from planner.costmodel.fit_data import (
    load_measurements,
    measurements_to_csv,
    measurements_to_json,
    parse_csv,
    parse_json,
)
from planner.errors import InvalidInput

TEXT = (resources.files("planner.costmodel") / "data" / "measurements" / FITTED_MEASUREMENTS).read_text()
MEAS = parse_json(TEXT, FITTED_MEASUREMENTS)


def test_shipped_measurements_parse() -> None:
    assert len(MEAS.rows) == 27
    assert {r.kind for r in MEAS.rows} == {"linear", "decode", "prefill", "chunked_prefill"}
    assert MEAS.info["kv_bytes_per_token"] == 147_456
    assert MEAS.ceilings["d2d_copy_TBps"] == pytest.approx(4.2195, rel=1e-4)
    cp = next(r for r in MEAS.rows if r.kind == "chunked_prefill")
    assert (cp.prompt, cp.chunk, cp.decodes, cp.ctx, cp.chunk_steps) == (16000, 512, 64, 1500, 32)
    assert cp.time_s == pytest.approx(1.0457123832702637)
    assert cp.worst_step_s == pytest.approx(0.04589228820800781)
    # line numbers point at each row's opening brace in the file
    lines = TEXT.splitlines()
    for r in MEAS.rows:
        assert r.line is not None and lines[r.line - 1].strip() == "{"


def test_json_and_csv_round_trip(tmp_path: Path) -> None:
    doc = measurements_to_json(MEAS)
    back = parse_json(json.dumps(doc, indent=1), "x.json")
    assert [replace_line(r) for r in back.rows] == [replace_line(r) for r in MEAS.rows]
    assert back.info == MEAS.info and back.ceilings == MEAS.ceilings and back.about == MEAS.about
    path = tmp_path / "m.csv"
    path.write_text("# my H200\n" + measurements_to_csv(MEAS.rows))
    from_csv = load_measurements(path)
    assert [replace_line(r) for r in from_csv.rows] == [replace_line(r) for r in MEAS.rows]
    assert from_csv.rows[0].line == 3  # comment, header, first row


def replace_line(r):
    from dataclasses import replace

    return replace(r, line=None)


def test_csv_by_hand() -> None:
    text = (
        "kind,tokens,batch,ctx,prompt,chunk,decodes,ms,worst_step_ms\n"
        "linear,512,,,,,,10.6,\n"
        "decode,,64,1500,,,,8.69,\n"
        "prefill,,,,16000,,,529.6,\n"
        "chunked_prefill,,,1500,16000,512,64,1045.7,45.9\n"
    )
    m = parse_csv(text, "x.csv")
    assert [r.kind for r in m.rows] == ["linear", "decode", "prefill", "chunked_prefill"]
    assert m.rows[3].time_s == pytest.approx(1.0457) and m.rows[3].worst_step_s == pytest.approx(0.0459)
    # columns in any order, only the used ones
    m2 = parse_csv("ms,kind,tokens\n4.03,linear,1\n", "y.csv")
    assert m2.rows[0].tokens == 1 and m2.rows[0].time_s == pytest.approx(4.03e-3)


CSV_HEAD = "kind,tokens,batch,ctx,prompt,chunk,decodes,ms,worst_step_ms\n"


@pytest.mark.parametrize(
    ("body", "msg"),
    [
        ("linear,1,,,,,,4.0,\nwarp,1,,,,,,4.0,\n", "x.csv:3: unknown kind 'warp'"),
        ("linear,,,,,,,4.0,\n", "x.csv:2: linear row needs 'tokens'"),
        ("linear,1,8,,,,,4.0,\n", "x.csv:2: linear rows take ms, tokens; not 'batch'"),
        ("linear,one,,,,,,4.0,\n", "x.csv:2: tokens must be a number"),
        ("linear,1.5,,,,,,4.0,\n", "x.csv:2: tokens must be an integer"),
        ("linear,0,,,,,,4.0,\n", "x.csv:2: tokens must be positive"),
        ("linear,1,,,,,,-4.0,\n", "x.csv:2: ms must be a positive number"),
        ("linear,1,,,,,,4.0\n", "x.csv:2: 8 cells, the header has 9"),
        ("decode,,8,1500,,,,,\n", "x.csv:2: decode row needs 'ms'"),
        ("chunked_prefill,,,1500,16000,512,64,1045.7,\n", "needs 'worst_step_ms'"),
        ("chunked_prefill,,,1500,16000,512,64,10.0,45.9\n", "worst_step_ms exceeds the total"),
        ("chunked_prefill,,,0,16000,512,64,1045.7,45.9\n", "ctx must be positive when decodes > 0"),
    ],
)
def test_csv_errors_name_the_line(body: str, msg: str) -> None:
    with pytest.raises(InvalidInput, match=msg.replace("(", r"\(")) as exc:
        parse_csv(CSV_HEAD + body, "x.csv")
    assert exc.value.field == "MEASUREMENTS"


def test_csv_header_errors() -> None:
    with pytest.raises(InvalidInput, match=r"x\.csv:1: unknown column 'tokenz'"):
        parse_csv("kind,tokenz,ms\n", "x.csv")
    with pytest.raises(InvalidInput, match="needs a 'ms' column"):
        parse_csv("kind,tokens\nlinear,1\n", "x.csv")
    with pytest.raises(InvalidInput, match="empty CSV"):
        parse_csv("# nothing\n\n", "x.csv")
    with pytest.raises(InvalidInput, match="no timing rows"):
        parse_csv(CSV_HEAD, "x.csv")


def _doc(*rows: dict) -> str:
    return json.dumps({"about": "t", "rows": list(rows)}, indent=1)


@pytest.mark.parametrize(
    ("text", "msg"),
    [
        ('{"rows": [\n {"kind": "linear", "tokens": 1, "ms": 4.0},\n', "x.json:3: malformed JSON"),
        (
            _doc({"kind": "linear", "tokens": 1, "ms": 4}, {"kind": "warp", "ms": 1}),
            r"x.json:\d+: rows\[1\]: unknown kind 'warp'",
        ),
        (_doc({"kind": "decode", "batch": 8, "ms": 4}), r"rows\[0\]: decode row needs 'ctx'"),
        (_doc({"kind": "decode", "batch": 8, "ctx": 100, "ms": "4"}), "ms must be a positive number"),
        (_doc({"kind": "decode", "batch": True, "ctx": 100, "ms": 4}), "batch must be an integer"),
        (_doc({"kind": "prefill", "prompt": 512, "ms": 15, "note": "x"}), "not 'note'"),
        (
            _doc(
                {
                    "kind": "chunked_prefill",
                    "prompt": 1000,
                    "chunk": 512,
                    "decodes": 0,
                    "ctx": 0,
                    "steps": 3,
                    "prefill_ms": 9,
                    "worst_step_ms": 5,
                }
            ),
            "steps is 3, but a 1000-token prompt in 512-token chunks takes 2",
        ),
        (_doc({"kind": "ceiling", "what": "x"}), "a ceiling row needs"),
        # found by the CLI fuzzer's exploration mode: a batch of 2.4e155 (a float equal to an
        # integer) overflowed the fit inside SciPy; a 1e308 TB/s ceiling read "inf of the datasheet"
        (
            _doc({"kind": "decode", "batch": 2.415732213238354e155, "ctx": 100, "ms": 4}),
            r"rows\[0\]: batch must be at most 10,000,000",
        ),
        (_doc({"kind": "linear", "tokens": 10_000_001, "ms": 4}), "tokens must be at most 10,000,000"),
        (
            _doc({"kind": "ceiling", "what": "d2d_copy_TBps", "value": 1e308}),
            r"rows\[0\]: value must be at most 1e\+30",
        ),
        (
            _doc({"kind": "info", "params": 1e20}, {"kind": "linear", "tokens": 1, "ms": 4}),
            r"info.params must be at most 1e\+15",
        ),
        (
            _doc({"kind": "info", "params": "many"}, {"kind": "linear", "tokens": 1, "ms": 4}),
            "info.params must be a positive number",
        ),
        (_doc({"kind": "info"}), "no timing rows"),
        ('{"data": []}', "expected an object with a 'rows' list"),
        ('{"rows": {}}', "'rows' must be a list"),
        (_doc(7), r"rows\[0\]: expected an object"),
    ],
)
def test_json_errors(text: str, msg: str) -> None:
    with pytest.raises(InvalidInput, match=msg):
        parse_json(text, "x.json")


def test_json_error_names_the_line() -> None:
    text = _doc({"kind": "linear", "tokens": 1, "ms": 4}, {"kind": "linear", "tokens": 2})
    with pytest.raises(InvalidInput) as exc:
        parse_json(text, "x.json")
    line = int(exc.value.reason.split(":")[1])
    assert text.splitlines()[line - 1].strip() == "{"
    assert '"tokens": 2' in "\n".join(text.splitlines()[line - 1 : line + 3])


def test_bare_list_of_rows_is_accepted() -> None:
    m = parse_json('[{"kind": "linear", "tokens": 1, "ms": 4.0}]', "x.json")
    assert m.rows[0].line == 1


def test_missing_and_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="no such file"):
        load_measurements(tmp_path / "nope.json")
    with pytest.raises(InvalidInput, match="is a directory"):
        load_measurements(tmp_path)
    bad = tmp_path / "b.json"
    bad.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(InvalidInput, match="is not UTF-8 text"):
        load_measurements(bad)
