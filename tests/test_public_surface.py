"""Tests reach the latency model through its public surface (issue #34): the component
functions and the front objects' public methods, never a private method of `Engine` or
`LatencyModel`. The rule, read from the sources with `ast`: no call `x._name(...)`, no
attribute `Engine._name` / `LatencyModel._name` and no `setattr(Engine, "_name", ...)` where
`_name` (one leading underscore, not a dunder) is a method those classes define. Test-local
helpers (bare `_helper(...)` calls) and other modules' private functions are not its concern."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from planner.latency.engine import Engine
from planner.latency.model import LatencyModel

ROOT = Path(__file__).resolve().parent.parent
FRONTS = {"Engine": Engine, "LatencyModel": LatencyModel}


def _private_methods() -> set[str]:
    """The front objects' private callables: one leading underscore, not a dunder."""
    names: set[str] = set()
    for cls in FRONTS.values():
        for name, value in vars(cls).items():
            if name.startswith("_") and not name.startswith("__") and callable(value):
                names.add(name)
    return names


def private_uses(source: str, private: set[str]) -> list[tuple[int, str]]:
    """(line, what) for every use of a front object's private method in `source`."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in private:
            found.append((node.lineno, f".{node.func.attr}(...)"))
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in FRONTS
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            found.append((node.lineno, f"{node.value.id}.{node.attr}"))
        if isinstance(node, ast.Call) and len(node.args) >= 2:
            target, attr = node.args[0], node.args[1]
            if (
                isinstance(target, ast.Name)
                and target.id in FRONTS
                and isinstance(attr, ast.Constant)
                and isinstance(attr.value, str)
                and attr.value.startswith("_")
                and not attr.value.startswith("__")
            ):
                found.append((node.lineno, f"setattr({target.id}, {attr.value!r})"))
    return found


def test_the_rule_flags_private_calls_and_patches_but_not_dunders_or_helpers() -> None:
    private = _private_methods()
    assert {"_state", "_unshared_state", "_find_floors"} <= private
    src = inspect.cleandoc(
        """
        e._state(1.0, None)
        Engine._unshared_state
        monkeypatch.setattr(Engine, "_state", f)
        e.__class__.__name__
        e.point(s).__repr__()
        _state(e, s)
        acc._traced_run(r)
        """
    )
    assert [line for line, _ in private_uses(src, private)] == [1, 2, 3]


def test_no_test_or_accuracy_tool_reads_a_private_method_of_the_latency_front() -> None:
    private = _private_methods()
    files = [*sorted((ROOT / "tests").glob("*.py")), ROOT / "tools" / "accuracy.py"]
    hits = [
        f"{path.relative_to(ROOT)}:{line}: {what}"
        for path in files
        if path.name != Path(__file__).name
        for line, what in private_uses(path.read_text(encoding="utf-8"), private)
    ]
    assert not hits, "\n".join(hits)
