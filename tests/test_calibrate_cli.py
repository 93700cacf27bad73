"""`capplan calibrate`: the table and --json, the profile file it writes and its use through
--profile, and bad input as one line with exit code 2."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from planner.cli import main
from planner.costmodel.calibrated import FITTED_MEASUREMENTS, PARAMETERS
from planner.costmodel.fit_data import measurements_to_csv, parse_json

MEAS_PATH = str(resources.files("planner.costmodel") / "data" / "measurements" / FITTED_MEASUREMENTS)
BASE = ["calibrate", MEAS_PATH, "--model", "Qwen/Qwen3-8B", "--gpu", "h200-sxm"]


def _run(capsys, argv: list[str]) -> tuple[int, str, str]:
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def test_table_lists_every_row_and_the_mape(capsys, tmp_path: Path) -> None:
    out_path = tmp_path / "h200.json"
    rc, out, err = _run(capsys, [*BASE, "-o", str(out_path)])
    assert rc == 0, err
    assert "prefill_ms" in out and "worst_step_ms" in out
    assert "MAPE 5.2%" in out
    assert "eta_bandwidth" in out and "prefix_query_kv_passes" in out and "matmul_phantom_tokens" in out
    assert f"written to {out_path}" in out
    assert out.count("linear ") >= 12
    prof = json.loads(out_path.read_text())
    assert prof["gpu"] == "h200-sxm" and prof["name"] == "h200-sxm-calibrated"
    # the written file is a --profile for analyze on that GPU ...
    rc, out, err = _run(
        capsys,
        [
            "analyze",
            "concurrency",
            "--model",
            "Qwen/Qwen3-8B",
            "--gpu",
            "h200-sxm",
            "--context-tokens",
            "1500",
            "--concurrency",
            "1,64",
            "--profile",
            str(out_path),
            "--json",
        ],
    )
    assert rc == 0, err
    rows = json.loads(out)["rows"]
    assert rows[1]["step_ms"] == pytest.approx(9.47, abs=0.05)  # measured 8.69
    # ... and is refused on another GPU
    rc, out, err = _run(
        capsys,
        [
            "analyze",
            "concurrency",
            "--model",
            "Qwen/Qwen3-8B",
            "--gpu",
            "h100-sxm",
            "--context-tokens",
            "1500",
            "--concurrency",
            "1",
            "--profile",
            str(out_path),
        ],
    )
    assert rc == 2 and err.count("\n") == 1 and "fitted on h200-sxm, not h100-sxm" in err


def test_json_output(capsys) -> None:
    rc, out, _ = _run(capsys, [*BASE, "--json", "--name", "mine"])
    assert rc == 0
    d = json.loads(out)
    assert d["model"] == "Qwen/Qwen3-8B" and d["gpu"] == "h200-sxm" and d["output"] is None
    assert len(d["rows"]) == 33
    r = d["rows"][0]
    assert {"kind", "line", "quantity", "measured_ms", "fitted_ms", "theoretical_ms", "error_percent"} <= set(
        r
    )
    assert d["mape_percent"] == pytest.approx(
        sum(abs(x["error_percent"]) for x in d["rows"]) / len(d["rows"])
    )
    assert d["mape_percent"] <= 10
    assert set(d["parameters"]) == {
        "eta_bandwidth",
        "eta_matmul",
        "eta_attention",
        "step_overhead_s",
        "prefix_query_kv_passes",
        "decode_attention_items_per_sm",
        "matmul_phantom_tokens",
        "activation_passes",
    }
    assert d["profile"]["name"] == "mine"
    assert d["ceilings"]["bf16_gemm_TFLOPs"]["fraction_of_datasheet"] == pytest.approx(0.796, abs=1e-3)


def test_csv_input_gives_the_same_fit(capsys, tmp_path: Path) -> None:
    meas = parse_json(Path(MEAS_PATH).read_text(), "x")
    csv_path = tmp_path / "m.csv"
    csv_path.write_text(measurements_to_csv(meas.rows))
    rc, out, _ = _run(
        capsys, ["calibrate", str(csv_path), "--model", "Qwen/Qwen3-8B", "--gpu", "h200-sxm", "--json"]
    )
    assert rc == 0
    from_csv = json.loads(out)["profile"]
    rc, out, _ = _run(capsys, [*BASE, "--json"])
    from_json = json.loads(out)["profile"]
    for k in PARAMETERS:
        assert from_csv[k] == pytest.approx(from_json[k], rel=1e-6, abs=1e-12)


def test_fix_flag(capsys, tmp_path: Path) -> None:
    meas = parse_json(Path(MEAS_PATH).read_text(), "x")
    csv_path = tmp_path / "m.csv"
    csv_path.write_text(measurements_to_csv([r for r in meas.rows if r.kind != "chunked_prefill"]))
    argv = ["calibrate", str(csv_path), "--model", "Qwen/Qwen3-8B", "--gpu", "h200-sxm"]
    rc, _, err = _run(capsys, argv)
    assert rc == 2 and err.count("\n") == 1
    assert "cannot pin prefix_query_kv_passes" in err and "fix NAME=VALUE" in err
    # the old name holds the new parameter (prefix_kv_passes P = prefix_query_kv_passes P / G)
    rc, out, err = _run(capsys, [*argv, "--fix", "prefix_kv_passes=0", "--json"])
    assert rc == 0, err
    assert json.loads(out)["parameters"]["prefix_query_kv_passes"] == {
        "value": 0.0,
        "std_error": None,
        "independence": None,
        "fixed": True,
        "at_bound": False,
    }


def _bad(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


@pytest.mark.parametrize(
    ("setup", "msg"),
    [
        (lambda t: ["calibrate", str(t / "missing.json")], "MEASUREMENTS: no such file"),
        (
            lambda t: ["calibrate", _bad(t, "a.json", '{"rows": [\n{"kind": "linear",,}]}')],
            "a.json:2: malformed JSON",
        ),
        (
            lambda t: ["calibrate", _bad(t, "b.csv", "kind,tokens,ms\nlinear,1,4.0\nlinear,x,4.0\n")],
            "b.csv:3: tokens must be a number",
        ),
        (
            lambda t: ["calibrate", _bad(t, "c.csv", "kind,tokens,ms\nwarp,1,4.0\n")],
            "c.csv:2: unknown kind 'warp'",
        ),
        (
            lambda t: ["calibrate", _bad(t, "d.json", '{"rows": [{"kind": "teleport", "ms": 1}]}')],
            "unknown kind 'teleport'",
        ),
        (lambda t: ["calibrate", MEAS_PATH, "--gpu", "h900"], "--gpu: unknown GPU 'h900'"),
        (lambda t: ["calibrate", MEAS_PATH, "--model", "Qwen/Qwen3-32B"], "--model: "),
        (lambda t: ["calibrate", MEAS_PATH, "--fix", "eta_matmul"], "--fix: expected NAME=VALUE"),
        (
            lambda t: ["calibrate", MEAS_PATH, "--fix", "eta_matmul=fast"],
            "--fix: eta_matmul: Input should be a valid number",
        ),
        (lambda t: ["calibrate", MEAS_PATH, "--fix", "eta_warp=0.5"], "--fix: unknown parameter 'eta_warp'"),
        (
            lambda t: ["calibrate", MEAS_PATH, "-o", str(t / "no" / "dir" / "p.json")],
            "--output: cannot write",
        ),
        (lambda t: ["calibrate", MEAS_PATH, "--name", " "], "--name: must not be empty"),
    ],
)
def test_bad_input_is_one_line_exit_2(capsys, tmp_path: Path, setup, msg: str) -> None:
    argv = setup(tmp_path)
    defaults = {"--model": "Qwen/Qwen3-8B", "--gpu": "h200-sxm"}
    for flag, value in defaults.items():
        if flag not in argv:
            argv += [flag, value]
    rc, out, err = _run(capsys, argv)
    assert rc == 2
    assert out == ""
    assert err.startswith("capplan: error: ") and err.count("\n") == 1, err
    assert msg in err


def test_missing_required_flag_is_one_line(capsys) -> None:
    # --model is required without --serving: refused by capplan (not argparse), exit 2 all the same
    assert main(["calibrate", MEAS_PATH, "--gpu", "h200-sxm"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--model" in err


def test_a_poor_fit_is_refused_unless_forced(capsys, tmp_path: Path) -> None:
    """Every other linear/decode/prefill timing made 4x slower: no profile describes both halves."""
    doc = json.loads(Path(MEAS_PATH).read_text())
    rows = [
        {**r, "ms": 4 * r["ms"]} if r["kind"] in ("linear", "decode", "prefill") and i % 2 else r
        for i, r in enumerate(doc["rows"])
    ]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"rows": rows}))
    argv = [
        "calibrate",
        str(bad),
        "--model",
        "Qwen/Qwen3-8B",
        "--gpu",
        "h200-sxm",
        "-o",
        str(tmp_path / "p.json"),
    ]
    rc, out, err = _run(capsys, argv)
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("capplan: error: MEASUREMENTS: ") and "MAPE over 25%" in err and "force" in err
    assert not (tmp_path / "p.json").exists()
    rc, out, err = _run(capsys, [*argv, "--force", "--json"])
    assert rc == 0, err
    assert json.loads(out)["mape_percent"] > 25 and (tmp_path / "p.json").exists()
