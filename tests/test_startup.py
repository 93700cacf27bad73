"""Fast from a shell (issue 32): commands that compute nothing import no SciPy (its import alone
is about 0.2 s of CPU): `capplan --help`, `capplan catalog`, `capplan plan --server` (the service
computes). A small plan starts no worker process (starting them costs more than its search) and
says the same as with workers. What a whole command costs is measured by bench/bench_cli.py, not
here (a timed test would fail on a busy machine, not on a slow change).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from grpc_helpers import CHAT_PLAN, quiet_server

ROOT = Path(__file__).resolve().parent.parent

# The CLI in a fresh process, then the SciPy modules it loaded (on stderr, after what it printed).
PROBE = textwrap.dedent(
    """
    import sys
    from planner.cli import main
    try:
        rc = main(sys.argv[1:])
    except SystemExit as exc:
        rc = exc.code
    loaded = sorted(m for m in sys.modules if m == "scipy" or m.startswith("scipy."))
    print("SCIPY " + " ".join(loaded), file=sys.stderr)
    print("SOLVER " + " ".join(sorted(m for m in sys.modules if m in ("pulp", "highspy"))), file=sys.stderr)
    sys.exit(rc)
    """
)


def _probe(*argv: str) -> tuple[int, str, list[str]]:
    rc, out, loaded = _probe_all(*argv)
    return rc, out, loaded["SCIPY"]


def _probe_all(*argv: str) -> tuple[int, str, dict[str, list[str]]]:
    """Exit code, stdout, and the SciPy ("SCIPY") and solver ("SOLVER": PuLP, highspy) modules loaded."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    lines = [x.split() for x in done.stderr.splitlines() if x.startswith(("SCIPY", "SOLVER"))]
    return done.returncode, done.stdout, {x[0]: x[1:] for x in lines}


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["plan", "--help"], ["catalog", "gpus"], ["catalog", "models", "--json"]],
    ids=["help", "plan-help", "catalog-gpus", "catalog-models"],
)
def test_commands_that_compute_nothing_import_no_scipy(argv: list[str]) -> None:
    rc, out, scipy = _probe(*argv)
    assert rc == 0 and out
    assert scipy == []


def test_the_probe_sees_scipy_where_a_command_computes() -> None:
    """The check can fail: a local plan does load SciPy (the latency model's special functions)."""
    rc, out, scipy = _probe("plan", "examples/chat.yaml", "--json", "--workers", "1")
    assert rc == 0 and json.loads(out)["status"] == "OPTIMAL"
    assert "scipy.special" in scipy


def test_a_plan_of_one_configuration_loads_no_solver(tmp_path: Path) -> None:
    """The closed form answers one configuration (solvers.milp_plan): PuLP, which loads highspy
    (~0.1 s of CPU), comes in only where a model is solved: a mix of GPU types."""
    rc, out, loaded = _probe_all("plan", "examples/chat.yaml", "--json", "--workers", "1")
    assert rc == 0 and json.loads(out)["solver"]["status"] == "OPTIMAL"
    assert loaded["SOLVER"] == []
    mixed = yaml.safe_load((ROOT / "examples" / "chat.yaml").read_text())
    mixed["candidates"]["mixed_gpu_types"] = True
    path = tmp_path / "mixed.yaml"
    path.write_text(yaml.safe_dump(mixed))
    rc, out, loaded = _probe_all("plan", str(path), "--json", "--workers", "1")
    assert rc == 0 and "pulp" in loaded["SOLVER"]


@pytest.fixture(scope="module")
def address() -> Iterator[str]:
    with quiet_server() as addr:  # the server shares this process: its logs stay out of the output
        yield addr


def test_plan_on_a_server_imports_no_scipy(tmp_path: Path, address: str) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(CHAT_PLAN))
    rc, out, scipy = _probe("plan", str(path), "--json", "--server", address)
    assert rc == 0, out
    assert json.loads(out)["status"] == "OPTIMAL"
    assert scipy == []


def test_the_engines_normal_quantiles_are_scipys() -> None:
    """planner/latency/slices.py writes out Phi^-1 at its slice edges (so that importing it loads
    no SciPy): they are scipy.special.ndtri's, bit for bit."""
    from scipy import special

    from planner.latency import slices

    assert slices.SLICE_NORMAL_QUANTILES.tolist() == special.ndtri(slices.SLICE_EDGES).tolist()


def test_the_lazy_special_functions_are_scipys() -> None:
    from scipy import special

    from planner.latency.scipy_special import special as lazy

    assert lazy.gammainc is special.gammainc and lazy.ndtri is special.ndtri
    with pytest.raises(AttributeError):
        _ = lazy.no_such_function


def test_a_small_plan_starts_no_worker_process_and_says_the_same() -> None:
    from planner import api
    from planner.plan import capacity_pool
    from planner.plan.memo import clear_memo
    from planner.schema.inputs import read_mapping_file

    data = read_mapping_file(str(ROOT / "examples" / "chat.yaml"), "plan")
    capacity_pool.shutdown_workers()
    clear_memo()
    with_workers = api.plan(data, base_dir=ROOT / "examples", workers=2)
    assert not capacity_pool._EXECUTORS, "a small plan started the worker processes"
    clear_memo()
    alone = api.plan(data, base_dir=ROOT / "examples", workers=1)
    assert with_workers.model_dump(mode="json") == alone.model_dump(mode="json")


def test_a_plan_past_the_in_process_budget_hands_the_rest_to_the_workers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The other side of the rule (the workers' answers are the same: tests/test_plan.py)."""
    from planner import api
    from planner.plan import capacity_pool
    from planner.plan.memo import clear_memo
    from planner.schema.inputs import read_mapping_file

    monkeypatch.setattr(capacity_pool, "IN_PROCESS_S", 0.0)
    data = read_mapping_file(str(ROOT / "examples" / "chat.yaml"), "plan")
    capacity_pool.shutdown_workers()
    clear_memo()
    api.plan(data, base_dir=ROOT / "examples", workers=2)
    assert 2 in capacity_pool._EXECUTORS
    pids = list(capacity_pool._EXECUTORS[2]._processes or {})  # type: ignore[attr-defined]
    assert pids and all(pid != os.getpid() for pid in pids)
    capacity_pool.shutdown_workers()
