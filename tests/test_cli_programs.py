"""`capplan plan` as a program runs it (a pipeline reading `--json` and the exit status), each call a
fresh process: stdout is the JSON and nothing else, whatever a solver, a library or a worker
process writes to file descriptor 1 while the plan is computed; the exit status says what
happened (0 a plan, 3 no plan, 2 bad input, 1 an internal error; README.md, docs/plan.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_helpers import run_cli

from planner.commands.plan import EXIT_CODES_HELP

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
CHAT = EXAMPLES / "chat.yaml"


def _plan_examples() -> list[Path]:
    """The examples that are plan requests (the others are evaluate/simulate files)."""
    out = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        if isinstance(data, dict) and "slo" in data and "model" in data and "deployment" not in data:
            out.append(path)
    return out


def capplan(*argv: str, script: str | None = None) -> subprocess.CompletedProcess[str]:
    """`capplan argv` in a new process (or `script`, which calls the CLI itself, with argv)."""
    head = [sys.executable, "-m", "planner.cli"] if script is None else [sys.executable, "-c", script]
    # As a shell runs it: C's stdout buffered (PYTHONUNBUFFERED would make C's stdio unbuffered too)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    return subprocess.run(
        [*head, *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env=env,
    )


def _variant(tmp_path: Path, source: Path, name: str, **candidates: Any) -> Path:
    data = yaml.safe_load(source.read_text())
    data["candidates"] = {**data.get("candidates", {}), **candidates}
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_examples_cover_plan_and_its_solver_paths() -> None:
    names = {p.name for p in _plan_examples()}
    assert {"chat.yaml", "week-forecast.yaml", "azure-code-bursty.yaml"} <= names
    week = yaml.safe_load((EXAMPLES / "week-forecast.yaml").read_text())
    rates = {b["requests_per_s"] for b in week["workload"]["arrivals"]["buckets"]}
    # more distinct buckets than solvers.milp.MONOLITHIC_MAX_BUCKETS: mixed, it is sized bucket-wise
    assert len(rates) > 8


@pytest.mark.parametrize("example", _plan_examples(), ids=lambda p: p.stem)
def test_json_stdout_is_the_json_for_every_plan_example(example: Path) -> None:
    done = capplan("plan", str(example), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["status"] in ("OPTIMAL", "FEASIBLE")


@pytest.mark.parametrize(
    ("source", "mixed"),
    [
        (CHAT, False),  # one configuration (closed form, then the MILP over single configurations)
        (CHAT, True),  # mixed GPU types, one bucket: the MILP as one model
        (EXAMPLES / "week-forecast.yaml", True),  # mixed over 15 distinct buckets: bucket-wise
    ],
    ids=["single-configuration", "mixed", "mixed-bucketwise"],
)
def test_json_stdout_is_the_json_on_every_solver_path(tmp_path: Path, source: Path, mixed: bool) -> None:
    path = _variant(tmp_path, source, "plan.yaml", mixed_gpu_types=mixed)
    done = capplan("plan", str(path), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["status"] in ("OPTIMAL", "FEASIBLE")
    assert len({d["gpu"] for d in report["deployments"]}) >= 1


# Writes to descriptor 1 from inside the computation, as native code does: os.write (no Python
# buffer), C's printf (C's own buffer, flushed at exit unless flushed before), a Python print, and
# os.write in the worker processes (forked inside the computation: they inherit descriptor 1).
NOISY = textwrap.dedent(
    """
    import ctypes, os, sys
    from planner import api
    from planner.plan import capacity_pool
    from planner.cli import main

    libc = ctypes.CDLL(None)
    real_plan, real_answer = api.plan, capacity_pool._answer

    def noisy_plan(*args, **kwargs):
        os.write(1, b"NOISE native write\\n")
        libc.printf(b"NOISE C printf\\n")
        print("NOISE python print")
        return real_plan(*args, **kwargs)

    def noisy_answer(item):
        os.write(1, f"NOISE worker {os.getpid()}\\n".encode())
        return real_answer(item)

    api.plan, capacity_pool._answer = noisy_plan, noisy_answer
    capacity_pool.IN_PROCESS_S = 0.0  # hand the batches to the worker processes
    print(f"PARENT {os.getpid()}", file=sys.stderr)
    sys.exit(main(sys.argv[1:]))
    """
)


def test_what_native_code_writes_to_fd_1_stays_off_stdout() -> None:
    done = capplan("plan", str(CHAT), "--json", "--workers", "2", script=NOISY)
    assert done.returncode == 0, done.stderr
    assert "NOISE" not in done.stdout
    assert json.loads(done.stdout)["status"] == "OPTIMAL"
    err = done.stderr.splitlines()
    parent = next(line.split()[1] for line in err if line.startswith("PARENT"))
    for noise in ("NOISE native write", "NOISE C printf", "NOISE python print"):
        assert noise in err, done.stderr[-2000:]
    workers = {line.split()[2] for line in err if line.startswith("NOISE worker")}
    assert workers - {parent}, "no worker process answered: the test did not exercise them"


def test_the_readable_summary_is_kept_clean_too() -> None:
    done = capplan("plan", str(CHAT), script=NOISY)
    assert done.returncode == 0, done.stderr
    assert "NOISE" not in done.stdout and done.stdout.startswith("Qwen/Qwen3-8B:")


# --- exit status ---------------------------------------------------------------------------------


def test_exit_3_is_no_plan_and_the_report_is_printed() -> None:
    done = capplan("plan", str(CHAT), "--json", "--slo-ttft-p99-ms", "1", "--workers", "1")
    assert done.returncode == 3, done.stderr
    report = json.loads(done.stdout)
    assert report["status"] == "INFEASIBLE" and report["deployments"] == []
    assert report["infeasibility"]["constraint"]
    done = capplan("plan", str(CHAT), "--slo-ttft-p99-ms", "1", "--workers", "1")
    assert done.returncode == 3 and "status INFEASIBLE" in done.stdout


def test_exit_3_when_emit_has_no_plan_to_emit() -> None:
    done = capplan("plan", str(CHAT), "--emit", "k8s", "--slo-ttft-p99-ms", "1", "--workers", "1")
    assert done.returncode == 3
    assert done.stdout == ""
    assert done.stderr.startswith("capplan: error: the plan is INFEASIBLE") and done.stderr.count("\n") == 1


def test_no_solution_is_exit_3_with_its_report(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """NO_SOLUTION (the time limit before any plan) is no plan, like INFEASIBLE: exit 3, the report
    on stdout says which."""
    from planner import api

    real = api.plan

    def timed_out(*args: Any, **kwargs: Any) -> Any:
        report = real(*args, **kwargs)
        assert report.status == "INFEASIBLE"
        return report.model_copy(update={"status": "NO_SOLUTION"})

    monkeypatch.setattr(api, "plan", timed_out)
    rc, out, _ = run_cli(["plan", str(CHAT), "--json", "--slo-ttft-p99-ms", "1", "--workers", "1"], capsys)
    assert rc == 3 and json.loads(out)["status"] == "NO_SOLUTION"


def test_exit_2_is_bad_input_one_line_naming_the_field(tmp_path: Path) -> None:
    done = capplan("plan", str(CHAT), "--json", "--slo-ttft-p99-ms", "-5")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("capplan: error: --slo-ttft-p99-ms:") and done.stderr.count("\n") == 1
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"model": "Qwen/Qwen3-8B", "slo": {"ttft_p99_ms": 500}}))
    done = capplan("plan", str(bad), "--json")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("capplan: error: workload:"), done.stderr


BROKEN = textwrap.dedent(
    """
    import sys
    from planner import api
    from planner.cli import main

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    api.plan = broken
    sys.exit(main(sys.argv[1:]))
    """
)


def test_exit_1_is_an_internal_error_with_its_traceback() -> None:
    done = capplan("plan", str(CHAT), "--json", script=BROKEN)
    assert (done.returncode, done.stdout) == (1, "")
    assert "Traceback" in done.stderr and "RuntimeError: a bug" in done.stderr


def test_the_exit_codes_are_documented() -> None:
    done = capplan("plan", "--help")
    assert done.returncode == 0
    assert "exit status:" in done.stdout
    for code in ("0  a plan", "3  no plan", "2  bad input", "1  internal error"):
        assert code in EXIT_CODES_HELP and code in done.stdout
    for doc in (ROOT / "README.md", ROOT / "docs" / "plan.md"):
        text = " ".join(doc.read_text().split())
        for words in ("exit status", "INFEASIBLE", "NO_SOLUTION"):
            assert words in text, (doc.name, words)
