"""Latency under load: p50/p99 TTFT and ITL, KV use, cost and capacity of a vLLM deployment
serving a workload, from the roofline cost model and queueing approximations (docs/latency.md).

    from planner.latency import evaluate, capacity, Slo
    pred = evaluate(deployment, workload, profile)            # -> Prediction
    cap = capacity(deployment, workload, Slo(ttft_p99_s=1.0, itl_p99_s=0.05), profile)

For many questions on one workload, build `WorkloadStats.of(workload)` once and a
`LatencyModel(deployment.resolve(profile), stats)` per deployment.
"""

from planner.latency.model import LatencyModel, capacity, evaluate
from planner.latency.predictions import CapacityResult, Floors, PoolCapacity, Prediction
from planner.latency.stats import WorkloadStats
from planner.schema.kinds import BindingLimit, Role, StabilityLimit
from planner.slo import Slo

__all__ = [
    "BindingLimit",
    "CapacityResult",
    "Floors",
    "LatencyModel",
    "PoolCapacity",
    "Prediction",
    "Role",
    "Slo",
    "StabilityLimit",
    "WorkloadStats",
    "capacity",
    "evaluate",
]
