"""vLLM's defaults and the domain's Literal types are defined once: a module that restates one
(a literal 0.92, its own block size, its own `Role = Literal[...]`) drifts the day vLLM or the
domain changes it. Read from the source (ast), so a restated value fails even when it agrees today.
So are the limits on requests (buckets, simulated requests, samples, solver time): a second
definition drifts from what the solver or simulator can do, and a request passes validation only
to fail inside it.
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
    # The names a report is keyed by live in the schema, which imports no latency model (issue 34).
    "Role": "planner/schema/kinds.py",
    "StabilityLimit": "planner/schema/kinds.py",
    "BindingLimit": "planner/schema/kinds.py",
    "Bound": "planner/costmodel/roofline.py",
}
CONSTANT_HOMES = {"DEFAULT_PROFILE": "planner/costmodel/profiles.py"}
# Second definitions still to be replaced by an import: planner/latency/results.py is being
# restructured in another branch (issue 34), which takes `from planner.schema.kinds import Role,
# StabilityLimit` with it. Until then tests/test_schema_kinds.py pins them to the same values.
PENDING_RESTATEMENTS: dict[str, set[str]] = {}


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
                    if (
                        isinstance(t, ast.Name)
                        and t.id in homes
                        and homes[t.id] != rel
                        and t.id not in PENDING_RESTATEMENTS.get(rel, ())
                    ):
                        found.append(f"{rel}:{node.lineno} {t.id}")
    assert found == []


def test_defaults_reach_the_requests_and_the_help() -> None:
    from planner.commands.analyze import register  # noqa: F401  (imports cleanly)
    from planner.schema.inputs import ConcurrencyAnalysis, KvCapacityAnalysis
    from planner.schema.plan_request import CandidateSpace

    value = vllm_defaults.GPU_MEMORY_UTILIZATION
    for model in (ConcurrencyAnalysis, KvCapacityAnalysis, CandidateSpace):
        assert model.model_fields["gpu_memory_utilization"].default == value


# --- limits: each defined once, in the module that can do the work (solvers never import planner) --

# A limit's name -> the one module that assigns it a value; every other module imports it.
LIMIT_HOMES = {
    "MAX_SIMULATED_REQUESTS": "planner/schema/request_common.py",  # what one `simulate` request may generate
    "MAX_SAMPLED_REQUESTS": "planner/workload/limits.py",  # what a workload sample (and the simulator) holds
    "MAX_SIM_REQUESTS": None,  # planner/simulate/replica_pool.py: an alias of MAX_SAMPLED_REQUESTS
    "MAX_SAMPLES": "planner/workload/limits.py",
    "MAX_HORIZON_S": "planner/workload/limits.py",
    "MAX_REQUESTS_PER_S": "planner/workload/limits.py",
    "MAX_TIME_LIMIT_S": "solvers/milp_data.py",
    "MAX_SPARE_REPLICAS": "solvers/milp_data.py",
    "MAX_AVAILABILITY_REPLICAS": None,  # planner/schema/plan_request.py: an alias of MAX_SPARE_REPLICAS
    "PLAN_CONFIGURATIONS_PER_CALL": "planner/server/policy.py",
    "SIMULATED_REQUESTS_PER_CALL": "planner/server/policy.py",
}
PLAN_BUCKETS_HOME = "solvers/milp_data.py"


def _module_constants() -> list[tuple[str, int, str, object]]:
    """(module, line, name, literal value) of every module-level NAME = <literal number>."""
    out = []
    for path in sorted([*(ROOT / "planner").rglob("*.py"), *(ROOT / "solvers").rglob("*.py")]):
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign)
                else []
            )
            value = getattr(node, "value", None)
            if isinstance(value, ast.Constant) and type(value.value) in (int, float):
                out.extend((rel, node.lineno, t.id, value.value) for t in targets if isinstance(t, ast.Name))
    return out


def test_each_limit_is_assigned_a_value_in_its_home_only() -> None:
    found = [
        f"{rel}:{line} {name} = {value}"
        for rel, line, name, value in _module_constants()
        if name in LIMIT_HOMES and LIMIT_HOMES[name] != rel
    ]
    assert found == []


def test_a_limit_is_not_restated_under_its_own_name() -> None:
    """The same MAX_ name with the same literal value in two modules is one limit defined twice."""
    seen: dict[tuple[str, object], str] = {}
    found = []
    for rel, line, name, value in _module_constants():
        if name.startswith("MAX_"):
            key = (name, float(value))  # type: ignore[arg-type]
            if key in seen and seen[key] != rel:
                found.append(f"{rel}:{line} {name} = {value} (also {seen[key]})")
            seen.setdefault(key, rel)
    assert found == []


def test_the_plan_bucket_limit_is_one_number() -> None:
    """A leap year of hours (8,784) is what the MILP sizes; the schema, the plan and the service
    use solvers.milp_data.MAX_BUCKETS, and no other module writes the number."""
    from planner.server.policy import Limits
    from solvers.milp_data import MAX_BUCKETS, MAX_HOURS_PER_BUCKET

    found = []
    for path in sorted([*(ROOT / "planner").rglob("*.py"), *(ROOT / "solvers").rglob("*.py")]):
        rel = path.relative_to(ROOT).as_posix()
        if rel == PLAN_BUCKETS_HOME:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and (
                (type(node.value) in (int, float) and node.value in (MAX_BUCKETS, MAX_HOURS_PER_BUCKET))
                or (isinstance(node.value, str) and f"{MAX_BUCKETS:,}" in node.value)
            ):
                found.append(f"{rel}:{node.lineno}")
    assert found == []
    assert Limits().max_buckets == MAX_BUCKETS


def test_the_service_limits_are_the_schemas_or_within_them() -> None:
    """The service's defaults import the schema's caps where those bound the work, and its cost
    limits never admit what the api would refuse."""
    from planner import api
    from planner.schema.inputs import MAX_SIMULATED_REQUESTS
    from planner.server import policy
    from planner.workload import MAX_SAMPLES

    limits = policy.Limits()
    assert limits.max_length_samples == MAX_SAMPLES
    assert limits.max_simulated_requests <= MAX_SIMULATED_REQUESTS
    assert limits.max_simulated_requests >= api.DEFAULT_SIMULATED_REQUESTS
    assert policy.simulated_arrivals({}) == ("requests", api.DEFAULT_SIMULATED_REQUESTS)
    restated = {MAX_SAMPLES, MAX_SIMULATED_REQUESTS}
    source = (ROOT / "planner" / "server" / "policy.py").read_text(encoding="utf-8")
    found = [
        n.lineno
        for n in ast.walk(ast.parse(source))
        if isinstance(n, ast.Constant) and type(n.value) is int and n.value in restated
    ]
    assert found == []
