"""vLLM's defaults and the domain's Literal types are defined once: a module that restates one
(a literal 0.92, its own block size, its own `Role = Literal[...]`) drifts the day vLLM or the
domain changes it. Read from the source (ast), so a restated value fails even when it agrees today.
"""

from __future__ import annotations

import ast
from pathlib import Path

from planner import vllm_defaults

ROOT = Path(__file__).resolve().parent.parent
HOME_OF_DEFAULTS = ROOT / "planner" / "vllm_defaults.py"

# Literal type aliases and where each is defined (the domain module that owns the concept).
TYPE_HOMES = {
    "Mode": "planner/deployment.py",
    "Role": "planner/latency/engine.py",
    "StabilityLimit": "planner/latency/engine.py",
    "BindingLimit": "planner/latency/model.py",
    "Bound": "planner/costmodel/roofline.py",
}
CONSTANT_HOMES = {"DEFAULT_PROFILE": "planner/costmodel/profiles.py"}


def _sources() -> list[Path]:
    return sorted((ROOT / "planner").rglob("*.py"))


def test_gpu_memory_utilization_default_is_not_restated() -> None:
    value = vllm_defaults.GPU_MEMORY_UTILIZATION
    found = []
    for path in _sources():
        if path == HOME_OF_DEFAULTS:
            continue
        text = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Constant) and (
                (type(node.value) is float and node.value == value)
                or (isinstance(node.value, str) and f"default {value}" in node.value)
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []


def test_block_size_is_not_restated() -> None:
    found = []
    for path in _sources():
        if path == HOME_OF_DEFAULTS:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
                if any("BLOCK" in n for n in names) and isinstance(node.value, ast.Constant):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []


def test_domain_names_are_defined_in_their_home_only() -> None:
    homes = {**TYPE_HOMES, **CONSTANT_HOMES}
    found = []
    for path in _sources():
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name) and t.id in homes and homes[t.id] != rel:
                        found.append(f"{rel}:{node.lineno} {t.id}")
    assert found == []


def test_defaults_reach_the_requests_and_the_help() -> None:
    from planner.commands.analyze import register  # noqa: F401  (imports cleanly)
    from planner.inputs import ConcurrencyAnalysis, KvCapacityAnalysis
    from planner.plan.request import CandidateSpace

    value = vllm_defaults.GPU_MEMORY_UTILIZATION
    for model in (ConcurrencyAnalysis, KvCapacityAnalysis, CandidateSpace):
        assert model.model_fields["gpu_memory_utilization"].default == value
