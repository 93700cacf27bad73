"""One name per job: no two modules under planner/ share a file name (`__init__.py` aside), so a
name in a traceback, an import or a review says which module without its folder (issue 34: two
engine.py, three pool.py, report.py beside reports.py and plan/report.py).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _duplicates(paths: Iterable[str]) -> dict[str, list[str]]:
    """File names held by more than one module, with their paths (relative, '/'-separated)."""
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in paths:
        name = path.rsplit("/", 1)[-1]
        if name != "__init__.py":
            by_name[name].append(path)
    return {name: sorted(ps) for name, ps in sorted(by_name.items()) if len(ps) > 1}


def _planner_modules() -> list[str]:
    return sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "planner").rglob("*.py"))


def test_module_names_are_unique() -> None:
    dups = _duplicates(_planner_modules())
    assert not dups, f"module names used twice under planner/: {dups}"


def test_the_check_finds_a_duplicate() -> None:
    """It can fail: a repeated name is reported (planner/latency's too), __init__.py is not."""
    modules = _planner_modules()
    assert "planner/api/__init__.py" in modules and len(modules) > 50
    fake = ["planner/a/pool.py", "planner/b/pool.py", "planner/a/__init__.py", "planner/b/__init__.py"]
    fake += ["planner/latency/model.py", "planner/x/model.py"]
    assert _duplicates(fake) == {
        "model.py": ["planner/latency/model.py", "planner/x/model.py"],
        "pool.py": ["planner/a/pool.py", "planner/b/pool.py"],
    }
