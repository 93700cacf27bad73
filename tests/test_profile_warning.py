"""A transferred profile (a GPU without its own measurements timed with the nearest measured GPU's
efficiencies, planner/costmodel/profiles.py) carries a warning; every report that names its
profile carries the warning too, and the CLI's summary prints it as a `warning:` line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import run_cli, write

from planner import api
from planner.costmodel.profiles import resolve_profile

EVALUATE = """
deployment: {{model: Qwen/Qwen3-8B, gpu: {gpu}}}
workload:
  arrivals: {{requests_per_s: 2}}
  input_tokens: {{constant: 1000}}
  output_tokens: {{constant: 100}}
"""


def _warning(gpu: str) -> str | None:
    return resolve_profile("auto", gpu).warning


def test_the_catalog_has_a_transferred_and_a_measured_gpu() -> None:
    # The premise of every test below: h100-pcie has no profile of its own, h100-sxm has one.
    assert _warning("h100-pcie") is not None and "h100-pcie" in str(_warning("h100-pcie"))
    assert _warning("h100-sxm") is None


def test_evaluate_prints_the_transfer_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(tmp_path, EVALUATE.format(gpu="h100-pcie"))
    rc, out, err = run_cli(["evaluate", str(f)], capsys)
    assert rc == 0, err
    assert f"warning: {_warning('h100-pcie')}" in out.splitlines()

    rc, out, err = run_cli(["evaluate", str(f), "--json"], capsys)
    assert rc == 0, err
    dep = json.loads(out)["deployment"]
    assert dep["profile"].startswith("calibrated (transferred from ")
    assert dep["profile_warning"] == _warning("h100-pcie")


def test_a_measured_gpu_has_no_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(tmp_path, EVALUATE.format(gpu="h100-sxm"))
    rc, out, _ = run_cli(["evaluate", str(f)], capsys)
    assert rc == 0 and "warning:" not in out
    rc, out, _ = run_cli(["evaluate", str(f), "--json"], capsys)
    assert json.loads(out)["deployment"]["profile_warning"] is None


def test_simulate_carries_and_prints_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(tmp_path, EVALUATE.format(gpu="h100-pcie"))
    rc, out, err = run_cli(["simulate", str(f), "--requests", "50", "--seed", "1"], capsys)
    assert rc == 0, err
    assert f"warning: {_warning('h100-pcie')}" in out.splitlines()
    rc, out, err = run_cli(["simulate", str(f), "--requests", "50", "--seed", "1", "--json"], capsys)
    assert json.loads(out)["deployment"]["profile_warning"] == _warning("h100-pcie")


def test_analyze_prints_it_when_the_profile_is_auto(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "analyze",
        "kv-capacity",
        "--model",
        "Qwen/Qwen3-8B",
        "--gpu",
        "h100-pcie",
        "--context-tokens",
        "2000",
    ]
    rc, out, err = run_cli([*argv, "--profile", "auto"], capsys)
    assert rc == 0, err
    assert f"warning: {_warning('h100-pcie')}" in out.splitlines()
    rc, out, _ = run_cli(argv, capsys)  # theoretical by default: no stand-in, no warning
    assert rc == 0 and "warning:" not in out

    report = api.analyze(
        {
            "model": "Qwen/Qwen3-8B",
            "gpu": "h100-pcie",
            "profile": "auto",
            "kv_capacity": {"context_tokens": 2000},
        }
    )
    assert report.replica.profile_warning == _warning("h100-pcie")


PLAN = """
model: Qwen/Qwen3-8B
slo: {ttft_p99_ms: 500, itl_p99_ms: 50}
workload:
  arrivals: {requests_per_s: 10}
  input_tokens: {constant: 800}
  output_tokens: {constant: 200}
candidates: {gpus: [h100-pcie], tensor_parallel_sizes: [1], disaggregation: never, allow_transferred_profiles: true}
"""


def test_plan_lists_it_among_its_warnings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(tmp_path, PLAN)
    rc, out, err = run_cli(["plan", str(f), "--json"], capsys)
    assert rc == 0, err
    assert f"h100-pcie: {_warning('h100-pcie')}" in json.loads(out)["warnings"]
    rc, out, err = run_cli(["plan", str(f)], capsys)
    assert f"  - h100-pcie: {_warning('h100-pcie')}" in out.splitlines()


def test_plan_refuses_a_transferred_profile_unless_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = write(tmp_path, PLAN.replace(", allow_transferred_profiles: true", ""))
    rc, _, err = run_cli(["plan", str(f)], capsys)
    assert rc == 2
    assert err.startswith("capplan: error: candidates.gpus: h100-pcie has no measured profile")
    assert "candidates.allow_transferred_profiles: true" in err
