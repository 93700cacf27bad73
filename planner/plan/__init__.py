"""The planner: the cheapest vLLM deployment that meets TTFT/ITL p99 SLOs for a traffic
forecast (docs/plan.md).

    from planner.plan import plan
    report = plan(yaml.safe_load(open("examples/chat.yaml")), base_dir="examples")

The request and the report are the API's schema (planner/schema/plan_request.py,
planner/schema/plan_report.py). Modules: capacity (one configuration -> requests/s within the
SLOs), capacity_pool (many, on the cores), memo (answers remembered across plans), search (which
configurations to ask), split (capacities for a bursty stream split over replicas), solve (the
MILP's data and exact single-configuration costs), pipeline (search, sizing, the plan), planning
(what every part of the answer reads), flags (the vLLM flags), peak (the peak bucket's operating
points), alternatives, warn (warnings), infeasible and explain (answers without a plan), verify
(the simulator).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from planner.plan.pipeline import plan, vllm_args

__all__ = ["plan", "vllm_args"]

# Each name from its module on first use: importing one part (`planner.plan.defaults`) imports
# neither the search nor the solvers.
_HOMES = {
    "plan": "planner.plan.pipeline",
    "vllm_args": "planner.plan.pipeline",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'planner.plan' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
