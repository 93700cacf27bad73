"""`capplan evaluate`: the shipped examples evaluate, the JSON contract, and bad input as one line
naming the field (YAML key path, trace line, flag) with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import run_cli, write

ROOT = Path(__file__).resolve().parent.parent
# Files that hold a deployment to judge (the plan examples ask for one instead).
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.yaml") if "\ndeployment:" in "\n" + p.read_text())

JSON_KEYS = {
    "ttft_p50_ms",
    "ttft_p99_ms",
    "itl_p50_ms",
    "itl_p99_ms",
    "decode_concurrency",
    "max_requests_per_s_within_slo",
    "usd_per_million_output_tokens",
    "usd_per_million_input_tokens",
    "binding_limit",
    "stable",
    "kv_cache_usage",
    "preemption_risk",
    "gpu_utilization",
    "max_stable_requests_per_s",
    "prefill_chunk_tokens",
    "notes",
}

MINIMAL = """
deployment: {model: Qwen/Qwen3-8B, gpu: h100-sxm}
workload:
  arrivals: {requests_per_s: 2}
  input_tokens: {constant: 1000}
  output_tokens: {constant: 100}
"""


run = run_cli


def test_examples_are_shipped() -> None:
    names = {p.name for p in EXAMPLES}
    assert {"chat-qwen3-8b-h100.yaml", "azure-conv-h200.yaml", "bursty-code.yaml"} <= names


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_evaluates(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(["evaluate", str(path), "--json"], capsys)
    assert rc == 0, err
    data = json.loads(out)
    assert set(data) >= JSON_KEYS
    assert data["stable"] is True
    assert data["ttft_p99_ms"] >= data["ttft_p50_ms"] > 0
    assert data["usd_per_million_output_tokens"] > 0
    rc, text, _ = run(["evaluate", str(path)], capsys)
    assert rc == 0 and "TTFT p50" in text and "ITL" in text


def test_json_with_slo_flags_adds_the_capacity(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    f = write(tmp_path, MINIMAL)
    rc, out, _ = run(["evaluate", str(f), "--json"], capsys)
    base = json.loads(out)
    assert rc == 0 and base["max_requests_per_s_within_slo"] is None and base["capacity"] is None
    rc, out, _ = run(
        ["evaluate", str(f), "--json", "--slo-ttft-p99-ms", "500", "--slo-itl-p99-ms", "30"], capsys
    )
    data = json.loads(out)
    assert rc == 0
    assert data["slo"] == {"ttft_p99_ms": 500.0, "itl_p99_ms": 30.0}
    assert data["slo_feasible"] is True
    assert 0 < data["max_requests_per_s_within_slo"] <= data["max_stable_requests_per_s"]
    assert data["binding_limit"] in {
        "ttft",
        "itl",
        "compute",
        "kv_capacity",
        "max_num_seqs",
        "max_num_batched_tokens",
    }
    root = data["capacity"]["pools"]["colocated"]["root_find"]
    assert root is None or root["converged"] is True
    # Flags override one target of the file's slo: and keep the other.
    g = write(tmp_path, MINIMAL + "slo: {ttft_p99_ms: 800, itl_p99_ms: 25}\n", "with_slo.yaml")
    rc, out, _ = run(["evaluate", str(g), "--json", "--slo-itl-p99-ms", "40"], capsys)
    assert json.loads(out)["slo"] == {"ttft_p99_ms": 800.0, "itl_p99_ms": 40.0}


def test_slo_below_the_floor_is_an_answer(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    f = write(tmp_path, MINIMAL)
    rc, out, _ = run(["evaluate", str(f), "--json", "--slo-itl-p99-ms", "1"], capsys)
    data = json.loads(out)
    assert rc == 0
    assert data["slo_feasible"] is False and data["max_requests_per_s_within_slo"] == 0.0
    assert data["binding_limit"] == "itl" and "floor" in data["capacity"]["reason"]
    rc, text, _ = run(["evaluate", str(f), "--slo-itl-p99-ms", "1"], capsys)
    assert "not achievable" in text and "floor" in text


def test_overload_reports_unstable(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    f = write(tmp_path, MINIMAL)
    rc, out, _ = run(["evaluate", str(f), "--json", "--requests-per-s", "10000"], capsys)
    data = json.loads(out)
    assert rc == 0 and data["stable"] is False
    assert data["ttft_p99_ms"] is None and data["itl_p99_ms"] is None
    assert data["max_stable_requests_per_s"] > 0
    rc, text, _ = run(["evaluate", str(f), "--requests-per-s", "10000"], capsys)
    assert "UNSTABLE" in text


def test_trace_workload_with_a_csv_path(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rows = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    rows += [f"2023-11-16 18:{m:02d}:{s:02d}.5,{300 + 7 * i},{40 + i % 9}" for i, (m, s) in
             enumerate((m, s) for m in range(10, 14) for s in range(0, 60, 3))]  # fmt: skip
    (tmp_path / "t.csv").write_text("\n".join(rows) + "\n")
    f = write(
        tmp_path,
        "deployment: {model: Qwen/Qwen3-8B, gpu: h100-sxm}\n"
        "workload: {trace: t.csv, bucket_s: 5, burstiness: 2.0, requests_per_s: 3}\n",
    )
    rc, out, err = run(["evaluate", str(f), "--json"], capsys)
    assert rc == 0, err
    data = json.loads(out)
    assert data["workload"]["burstiness"] == pytest.approx(2.0)
    assert data["workload"]["mean_requests_per_s"] == pytest.approx(3.0, rel=0.05)
    assert data["buckets"] is not None and len(data["buckets"]) >= 3


def test_profile_flag(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    f = write(tmp_path, MINIMAL)
    rc, out, _ = run(["evaluate", str(f), "--json", "--profile", "calibrated"], capsys)
    cal = json.loads(out)
    rc2, out2, _ = run(["evaluate", str(f), "--json", "--profile", "theoretical"], capsys)
    theo = json.loads(out2)
    rc3, out3, _ = run(["evaluate", str(f), "--json"], capsys)
    auto = json.loads(out3)
    assert rc == rc2 == rc3 == 0
    assert theo["deployment"]["profile"] == "theoretical" and cal["deployment"]["profile"] != "theoretical"
    assert cal["itl_p50_ms"] > theo["itl_p50_ms"]  # a real stack is slower than the roofline
    # the default, auto, takes the calibrated profile where one ships for the GPU
    assert auto == cal


# ---- bad input: one line, the field, exit 2 -----------------------------------------------------


def _yaml(workload: str, deployment: str = "{model: Qwen/Qwen3-8B, gpu: h100-sxm}") -> str:
    return f"deployment: {deployment}\nworkload: {workload}\n"


GOOD_LENGTHS = "input_tokens: 100, output_tokens: 10"

BAD: list[tuple[str, str, str]] = [
    (
        _yaml("{arrivals: {requests_per_s: -3}, " + GOOD_LENGTHS + "}"),
        "workload.arrivals.requests_per_s",
        "greater than",
    ),
    (
        _yaml("{arrivals: {requests_per_s: 3, burstiness: 0}, " + GOOD_LENGTHS + "}"),
        "workload.arrivals.burstiness",
        "greater than",
    ),
    (
        _yaml("{arrivals: {requests_per_s: 3}, input_tokens: {pairs: []}, output_tokens: 10}"),
        "workload.input_tokens.pairs",
        "is empty",
    ),
    (
        _yaml(
            "{arrivals: {requests_per_s: 3}, input_tokens: {pairs: [[100, 0.5], [200, 0.2]]}, output_tokens: 10}"
        ),
        "workload.input_tokens.pairs",
        "sum to 0.7",
    ),
    (
        _yaml("{arrivals: {requests_per_s: 3}, input_tokens: {pairs: [[100, 0.5, 3]]}, output_tokens: 10}"),
        "workload.input_tokens.pairs[0]",
        "[tokens, probability]",
    ),
    (
        _yaml(
            "{arrivals: {requests_per_s: 3}, input_tokens: {percentiles: {p50: 900, p99: 400}}, output_tokens: 10}"
        ),
        "workload.input_tokens.percentiles",
        "not monotone",
    ),
    (
        _yaml("{arrivals: {requests_per_s: 3}, input_tokens: {}, output_tokens: 10}"),
        "workload.input_tokens",
        "exactly one of",
    ),
    (_yaml("{arrivals: {requests_per_s: 3}, input_tokens: 100}"), "workload.output_tokens", "Field required"),
    (
        _yaml(
            "{arrivals: {requests_per_s: 1}, " + GOOD_LENGTHS + "}",
            "{model: Qwen/Qwen3-8B, gpu: h100-sxm, foo: 1}",
        ),
        "deployment.foo",
        "Extra inputs",
    ),
    (
        _yaml("{arrivals: {requests_per_s: 1}, " + GOOD_LENGTHS + "}", "{model: Qwen/Qwen3-8B, gpu: h999}"),
        "deployment.gpu",
        "unknown GPU",
    ),
    (
        _yaml("{arrivals: {requests_per_s: 1}, " + GOOD_LENGTHS + "}", "{model: nope/none, gpu: h100-sxm}"),
        "deployment.model",
        "",
    ),
    (
        _yaml(
            "{arrivals: {requests_per_s: 1}, " + GOOD_LENGTHS + "}",
            "{model: Qwen/Qwen3-8B, gpu: h100-sxm, max_num_batched_tokens: 64, max_num_seqs: 128}",
        ),
        "deployment.max_num_batched_tokens",
        ">= max_num_seqs",
    ),
    (
        _yaml(
            "{arrivals: {requests_per_s: 1}, " + GOOD_LENGTHS + "}",
            "{model: Qwen/Qwen3-8B, gpu: h100-sxm, tp: 12}",
        ),
        "deployment.tp",
        "must fill whole nodes",
    ),
    (
        _yaml(
            "{arrivals: {requests_per_s: 1}, " + GOOD_LENGTHS + "}",
            "{model: meta-llama/Llama-3.1-70B-Instruct, gpu: l40s}",
        ),
        "deployment.tp",
        "leave no KV cache",
    ),
    (
        _yaml(
            "{arrivals: {requests_per_s: 1}, " + GOOD_LENGTHS + "}",
            "{model: Qwen/Qwen3-8B, gpu: h100-sxm, disaggregated: {prefill_replicas: 0, decode_replicas: 1}}",
        ),
        "deployment.disaggregated.prefill_replicas",
        "greater than or equal to 1",
    ),
    (_yaml("{trace: no-such-trace}"), "workload.trace", "neither a built-in trace"),
    (_yaml("{trace: azure-conv-2023, bucket_s: -60}"), "workload.bucket_s", "greater than 0"),
    (_yaml("{trace: azure-conv-2023, burstiness: wild}"), "workload.burstiness", "must be gaps, rescaled"),
    (_yaml("{trace: azure-conv-2023, burstiness: -1}"), "workload.burstiness", "k > 0"),
    ("deployment: {model: Qwen/Qwen3-8B, gpu: h100-sxm}\n", "workload", "Field required"),
    (
        _yaml("{arrivals: {requests_per_s: 1}, " + GOOD_LENGTHS + "}") + "extra: 1\n",
        "extra",
        "unknown top-level key",
    ),
    (
        _yaml("{arrivals: {requests_per_s: 1}, " + GOOD_LENGTHS + "}") + "slo: {ttft_p99_ms: -5}\n",
        "slo.ttft_p99_ms",
        "",
    ),
    ("- just\n- a list\n", "in.yaml", "expected a mapping"),
]


@pytest.mark.parametrize(("text", "field", "reason"), BAD)
def test_bad_files_name_the_field(
    text: str, field: str, reason: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    f = write(tmp_path, text)
    rc, out, err = run(["evaluate", str(f)], capsys)
    assert rc == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    prefix = f"capplan: error: {field}" if field != "in.yaml" else f"capplan: error: {f}"
    assert lines[0].startswith(prefix + ":"), lines[0]
    assert reason in lines[0]


def test_trace_csv_errors_name_the_column_or_the_row(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "missing.csv").write_text("TIMESTAMP,ContextTokens\n2023-11-16 18:15:46.68,374\n")
    (tmp_path / "badrow.csv").write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,374,44\n2023-11-16 18:15:47.1,abc,44\n"
    )
    (tmp_path / "badtime.csv").write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,374,44\nyesterday,10,4\n"
    )
    cases = [
        ("missing.csv", "capplan: error: workload.trace.GeneratedTokens: missing column GeneratedTokens"),
        ("badrow.csv", "capplan: error: workload.trace:line 3.ContextTokens: 'abc' is not a number"),
        ("badtime.csv", "capplan: error: workload.trace:line 3.TIMESTAMP: cannot parse 'yesterday'"),
    ]
    for name, want in cases:
        f = write(
            tmp_path, f"deployment: {{model: Qwen/Qwen3-8B, gpu: h100-sxm}}\nworkload: {{trace: {name}}}\n"
        )
        rc, _, err = run(["evaluate", str(f)], capsys)
        assert rc == 2 and err.startswith(want), err
        assert len(err.strip().splitlines()) == 1


def test_file_and_yaml_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rc, _, err = run(["evaluate", str(tmp_path / "nope.yaml")], capsys)
    assert rc == 2 and err.strip() == f"capplan: error: {tmp_path / 'nope.yaml'}: no such file"
    f = write(tmp_path, "deployment: {model: Qwen/Qwen3-8B\nworkload: 3\n")
    rc, _, err = run(["evaluate", str(f)], capsys)
    assert rc == 2 and "not valid YAML at line" in err and len(err.strip().splitlines()) == 1
    f = write(tmp_path, "", "empty.yaml")
    rc, _, err = run(["evaluate", str(f)], capsys)
    assert rc == 2 and "is empty" in err


@pytest.mark.parametrize(
    ("flags", "field"),
    [
        (["--slo-ttft-p99-ms", "-1"], "--slo-ttft-p99-ms"),
        (["--slo-itl-p99-ms", "abc"], "--slo-itl-p99-ms"),
        (["--requests-per-s", "0"], "--requests-per-s"),
        (["--profile", "no-such.json"], "--profile"),
    ],
)
def test_bad_flags(flags: list[str], field: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    f = write(tmp_path, MINIMAL)
    rc, _, err = run(["evaluate", str(f), *flags], capsys)
    assert rc == 2 and err.startswith(f"capplan: error: {field}: ") and len(err.strip().splitlines()) == 1


def test_no_traceback_in_a_real_process(tmp_path: Path) -> None:
    f = write(tmp_path, _yaml("{arrivals: {requests_per_s: -3}, " + GOOD_LENGTHS + "}"))
    proc = subprocess.run(
        [sys.executable, "-m", "planner.cli", "evaluate", str(f)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("capplan: error: workload.arrivals.requests_per_s:")
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
