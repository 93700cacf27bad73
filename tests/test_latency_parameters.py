"""The latency model's parameter table (planner/latency/parameters.py) against the code: every
numeric module-level constant of planner/latency has exactly one row and every row a constant;
each row says what it holds and where it comes from; a pin names a test that exists; and
docs/latency/parameters.md is the table rendered."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

from planner.latency.parameters import GOLDEN_TEST, PARAMETERS

ROOT = Path(__file__).resolve().parents[1]
LATENCY = ROOT / "planner" / "latency"


def numeric_constants(folder: Path = LATENCY) -> set[str]:
    """ "module.NAME" of every module-level UPPER_CASE name bound to a number literal."""
    found: set[str] = set()
    for path in sorted(folder.glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if not isinstance(node, ast.Assign | ast.AnnAssign) or node.value is None:
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if not (isinstance(target, ast.Name) and target.id.lstrip("_").isupper()):
                    continue
                try:
                    value = ast.literal_eval(node.value)
                except ValueError:
                    continue
                if isinstance(value, int | float) and not isinstance(value, bool):
                    found.add(f"{path.stem}.{target.id}")
    return found


def test_every_constant_has_one_row_and_every_row_a_constant() -> None:
    names = [p.name for p in PARAMETERS]
    assert len(names) == len(set(names)), "a constant listed twice"
    constants = numeric_constants()
    assert sorted(constants - set(names)) == [], "constants without a row in planner/latency/parameters.py"
    assert sorted(set(names) - constants) == [], "rows without a constant"


def test_the_scan_finds_a_new_constant(tmp_path: Path) -> None:
    """The check can fail: a module with a new number is seen."""
    (tmp_path / "new_term.py").write_text("NEW_TERM_WEIGHT = 0.5\nname = 1\nTUPLE = (1, 2)\n")
    assert numeric_constants(tmp_path) == {"new_term.NEW_TERM_WEIGHT"}


@pytest.mark.parametrize("param", PARAMETERS, ids=lambda p: p.name)
def test_each_row_is_complete(param: object) -> None:
    from planner.latency.parameters import Parameter

    assert isinstance(param, Parameter)
    assert math.isfinite(param.value)
    assert param.kind in ("modelling", "tolerance", "bound")
    assert param.holds and param.source
    if param.kind == "modelling":  # a modelling choice must move predictions
        assert param.pinned == "golden", f"{param.name}: a modelling choice no golden figure depends on"
    for page in (part.split(";")[0].split(":")[0].strip() for part in param.source.split(";")):
        if page.startswith("docs/") or page.startswith("tools/"):
            assert (ROOT / page).exists(), page


def test_the_golden_pin_names_a_test_that_exists() -> None:
    path, name = GOLDEN_TEST.split("::")
    tree = ast.parse((ROOT / path).read_text())
    assert name in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}


def test_the_docs_page_is_the_table_rendered() -> None:
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, "tools/latency_parameters.py", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
