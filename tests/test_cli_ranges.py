"""Every range a command enforces: a value outside it exits 2 with one stderr line naming the
flag and the limit (the request models' Field bounds, planner/schema/inputs.py), no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import run_cli, write

from planner.schema import inputs

ROOT = Path(__file__).resolve().parent.parent
MEAS = str(ROOT / "planner" / "costmodel" / "data" / "measurements" / "h200_qwen3_8b_shape.json")
FILE = """
deployment: {model: Qwen/Qwen3-8B, gpu: h100-sxm}
workload:
  arrivals: {requests_per_s: 2}
  input_tokens: {constant: 500}
  output_tokens: {constant: 50}
"""
A = ["--model", "Qwen/Qwen3-8B", "--gpu", "h100-sxm"]
CONC = ["analyze", "concurrency", *A, "--context-tokens", "1000", "--concurrency", "8"]
KV = ["analyze", "kv-capacity", *A, "--context-tokens", "1000"]
UTIL = ["analyze", "utilization", *A, "--context-tokens", "1000", "--output-tokens-per-day", "1e6"]
CHUNK = [
    "analyze",
    "chunked-prefill",
    *A,
    "--prompt-tokens",
    "4000",
    "--decodes",
    "8",
    "--context-tokens",
    "100",
]
STATIC = ["analyze", "static-batching", *A, "--context-tokens", "1000", "--output-lengths", "100:1"]
big = "1e300"

# (argv, the flag named, the limit the message states); FILE stands for the evaluate file.
CASES: list[tuple[list[str], str, str]] = [
    (["evaluate", "FILE", "--requests-per-s", "1e7"], "--requests-per-s", f"{inputs.MAX_REQUESTS_PER_S:.0f}"),
    (["evaluate", "FILE", "--requests-per-s", "0"], "--requests-per-s", "greater than 0"),
    (["evaluate", "FILE", "--slo-ttft-p99-ms", "1e9"], "--slo-ttft-p99-ms", "3600000"),
    (["evaluate", "FILE", "--slo-itl-p99-ms", "-1"], "--slo-itl-p99-ms", "greater than 0"),
    (["evaluate", "FILE", "--slo-itl-p99-ms", "inf"], "--slo-itl-p99-ms", "finite number"),
    (["evaluate", "FILE", "--usd-per-gpu-hour", "5000"], "--usd-per-gpu-hour", "less than or equal to 1000"),
    (["simulate", "FILE", "--requests", str(inputs.MAX_SIMULATED_REQUESTS + 1)], "--requests", "1000000"),
    (["simulate", "FILE", "--requests", "0"], "--requests", "greater than or equal to 1"),
    (["simulate", "FILE", "--horizon-s", big], "--horizon-s", "less than or equal to"),
    (["simulate", "FILE", "--horizon-s", "1e7"], "--horizon-s", "at most 1,000,000"),
    (["simulate", "FILE", "--seed", "-1"], "--seed", "greater than or equal to 0"),
    (["simulate", "FILE", "--seed", str(2**64)], "--seed", "less than or equal to"),
    (["simulate", "FILE", "--requests-per-s", big], "--requests-per-s", "less than or equal to"),
    (["simulate", "FILE", "--slo-tpot-p99-ms", "nan"], "--slo-tpot-p99-ms", "finite number"),
    (["simulate", "FILE", "--slo-e2e-p99-ms", "0"], "--slo-e2e-p99-ms", "greater than 0"),
    ([*CONC[:-1], "2000000"], "--concurrency", "less than or equal to 1000000"),
    ([*CONC, "--gpu-memory-utilization", "0"], "--gpu-memory-utilization", "greater than 0"),
    ([*CONC, "--usd-per-gpu-hour", big], "--usd-per-gpu-hour", "less than or equal to 1000"),
    ([*CONC, "--tp", "128"], "--tp", "less than or equal to 64"),
    ([*CONC[:6], "--context-tokens", "1e9", "--concurrency", "8"], "--context-tokens", "valid integer"),
    ([*CONC[:6], "--context-tokens", "100000000", "--concurrency", "8"], "--context-tokens", "10000000"),
    ([*CONC[:-1], ",".join(["1"] * 1001)], "--concurrency", "at most 1000 items"),
    ([*STATIC, "--batch", "0"], "--batch", "greater than or equal to 1"),
    ([*CHUNK, "--chunk", "20000000"], "--chunk", "less than or equal to 10000000"),
    (
        [*CHUNK[:8], "--decodes", "0", "--context-tokens", "100", "--chunk", "512"],
        "--decodes",
        "greater than",
    ),
    ([*UTIL[:-2], "--output-tokens-per-day", "1e16"], "--output-tokens-per-day", "1000000000000000"),
    ([*UTIL, "--floor-concurrency", "0"], "--floor-concurrency", "greater than or equal to 1"),
    ([*KV, "--max-num-seqs", "0"], "--max-num-seqs", "greater than or equal to 1"),
    ([*KV, "--max-num-batched-tokens", "1e12"], "--max-num-batched-tokens", "valid integer"),
    ([*KV, "--gpu-memory-utilization", "1.5"], "--gpu-memory-utilization", "less than or equal to 1"),
    (["analyze", "prefill", *A, "--prompt-tokens", "50000"], "--prompt-tokens", "maximum context of 40960"),
    (["catalog", "models", "--batch", "0"], "--batch", "greater than or equal to 1"),
    (
        ["calibrate", MEAS, "--model", "Qwen/Qwen3-8B", "--gpu", "h200-sxm", "--fix", "eta_matmul=2"],
        "--fix",
        "1",
    ),
    (
        ["calibrate", MEAS, "--model", "Qwen/Qwen3-8B", "--gpu", "h200-sxm", "--fix", "step_overhead_s=-1"],
        "--fix",
        "0",
    ),
]


@pytest.mark.parametrize(
    ("argv", "flag", "limit"), CASES, ids=lambda x: " ".join(x[1:3]) if isinstance(x, list) else None
)
def test_out_of_range_is_one_line_naming_the_flag_and_limit(
    argv: list[str], flag: str, limit: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = write(tmp_path, FILE)
    argv = [str(f) if a == "FILE" else a for a in argv]
    rc, out, err = run_cli(argv, capsys)
    assert rc == 2 and out == "", err
    assert err.count("\n") == 1 and err.startswith(f"capplan: error: {flag}: "), err
    assert limit in err, err


BOMB = "a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1]\n" + "".join(
    f"{n}: &{n} [{', '.join(['*' + p] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True)
)


@pytest.mark.parametrize(
    ("argv", "field", "reason"),
    [
        (["evaluate", "/dev/zero"], "/dev/zero", "not a regular file"),
        (["simulate", "BOMB"], "BOMB", "expands to more than 1,000,000 values"),
        (
            ["evaluate", "FILE", "--profile", "/dev/zero"],
            "--profile",
            "is a character device, not a regular file",
        ),
        (
            ["calibrate", "/dev/zero", "--model", "Qwen/Qwen3-8B", "--gpu", "h200-sxm"],
            "MEASUREMENTS",
            "not a regular",
        ),
        (["evaluate", "FILE", "--trace", "/dev/zero"], "", "unrecognized arguments"),
        (
            ["simulate", "FILE", "--trace", "/dev/zero"],
            "--trace",
            "is a character device, not a regular file",
        ),
    ],
)
def test_files_that_never_end_are_refused(
    argv: list[str], field: str, reason: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f, bomb = write(tmp_path, FILE), write(tmp_path, BOMB, "bomb.yaml")
    argv = [str(f) if a == "FILE" else str(bomb) if a == "BOMB" else a for a in argv]
    field = str(bomb) if field == "BOMB" else field
    rc, out, err = run_cli(argv, capsys)
    assert rc == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith(f"capplan: error: {field}") and reason in err, err
