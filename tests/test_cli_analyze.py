"""`capplan analyze` error contract: one line naming the field and the reason, exit 2, no traceback."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from planner.cli import main

S = ["--model", "Qwen/Qwen3-8B", "--gpu", "h100-sxm"]


@pytest.mark.parametrize(
    ("argv", "field", "reason"),
    [
        (
            ["kv-capacity", "--model", "Qwen/Qwen3-8B", "--gpu", "h999", "--context-tokens", "10"],
            "--gpu",
            "valid: a100-80gb-sxm",
        ),
        (
            ["kv-capacity", "--model", "nope", "--gpu", "h100-sxm", "--context-tokens", "10"],
            "--model",
            "valid: Qwen/Qwen3-14B, Qwen/Qwen3-30B-A3B",
        ),
        (["kv-capacity", *S, "--context-tokens", "0"], "--context-tokens", "greater than or equal to 1"),
        (["kv-capacity", *S, "--context-tokens", "-5"], "--context-tokens", "greater than or equal to 1"),
        (["kv-capacity", *S, "--context-tokens", "abc"], "--context-tokens", "valid integer"),
        (["kv-capacity", *S, "--context-tokens", "50000"], "--context-tokens", "maximum context of 40960"),
        (
            ["kv-capacity", *S, "--context-tokens", "10", "--gpu-memory-utilization", "1.5"],
            "--gpu-memory-utilization",
            "less than or equal to 1",
        ),
        (
            ["concurrency", *S, "--context-tokens", "10", "--concurrency", "1,0"],
            "--concurrency",
            "[1]: Input should be greater than or equal to 1",
        ),
        (
            ["concurrency", *S, "--context-tokens", "10", "--concurrency", "1", "--usd-per-gpu-hour", "-1"],
            "--usd-per-gpu-hour",
            "greater than 0",
        ),
        (
            ["concurrency", *S, "--context-tokens", "10", "--concurrency", "1", "--tp", "12"],
            "--tp",
            "must fill whole nodes",
        ),
        (
            ["concurrency", *S, "--context-tokens", "10", "--concurrency", "1", "--weight-dtype", "int4"],
            "--weight-dtype",
            "'bf16', 'fp8', 'int8', 'int4-awq', 'int4-gptq' or 'nvfp4'",
        ),
        (
            [
                "static-batching",
                *S,
                "--context-tokens",
                "10",
                "--batch",
                "8",
                "--output-lengths",
                "100:0.5,300:0.3",
            ],
            "--output-lengths",
            "sum to 0.8, not 1",
        ),
        (
            ["static-batching", *S, "--context-tokens", "10", "--batch", "8", "--output-lengths", "100"],
            "--output-lengths",
            "TOKENS:PROBABILITY",
        ),
        (
            [
                "chunked-prefill",
                *S,
                "--prompt-tokens",
                "100",
                "--decodes",
                "64",
                "--context-tokens",
                "10",
                "--budget",
                "64",
            ],
            "--budget",
            "no room",
        ),
        (
            ["prefill", *S, "--prompt-tokens", "10", "--profile", "/nonexistent.json"],
            "--profile",
            "no such profile file",
        ),
    ],
)
def test_bad_input_names_the_field(
    argv: list[str], field: str, reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["analyze", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert err.startswith(f"capplan: error: {field}: ")
    assert reason in err


def test_usage_errors_are_one_line_too(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["analyze", "kv-capacity", *S])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--context-tokens" in err


def test_usage_errors_echoing_a_newline_stay_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """argparse echoes unrecognized arguments; one holding newlines must not break the line."""
    with pytest.raises(SystemExit) as e:
        main(["catalog", "gpus", "a\nb", "\n"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.endswith("\n")
    assert err.startswith("capplan: error: unrecognized arguments: a b")


def test_real_process_has_no_traceback() -> None:
    p = subprocess.run(
        [sys.executable, "-m", "planner.cli", "analyze", "prefill", *S, "--prompt-tokens", "0"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert p.returncode == 2
    assert "Traceback" not in p.stderr and p.stderr.startswith("capplan: error: --prompt-tokens:")


def test_kv_not_fitting_is_marked_not_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", "concurrency", *S, "--context-tokens", "8000", "--concurrency", "32,64,512"]) == 0
    out = capsys.readouterr().out
    assert "NO = KV cache does not fit (limit 50 sequences)" in out
    assert (
        main(["analyze", "concurrency", *S, "--context-tokens", "8000", "--concurrency", "64", "--json"]) == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["rows"][0]["fits_in_memory"] is False and data["kv_max_concurrency"] == 50


def test_default_price_comes_from_the_catalog(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", "prefill", *S, "--prompt-tokens", "1500", "--json"]) == 0
    default = json.loads(capsys.readouterr().out)
    from planner.catalog.gpus import get_gpu

    twice = f"{2 * get_gpu('h100-sxm').price:g}"  # the default price list's, doubled
    assert (
        main(["analyze", "prefill", *S, "--prompt-tokens", "1500", "--json", "--usd-per-gpu-hour", twice])
        == 0
    )
    doubled = json.loads(capsys.readouterr().out)
    assert doubled["usd_per_million_input_tokens"] == pytest.approx(
        2 * default["usd_per_million_input_tokens"]
    )
