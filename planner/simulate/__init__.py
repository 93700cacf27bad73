"""Discrete-event simulation of vLLM V1 engines (one, several behind a router, or disaggregated
prefill/decode pools), to verify plans against the analytic latency model.

    result = simulate(requests, timer, SchedulerConfig(kv_cache_blocks=20000), replicas=2,
                      router="least_outstanding_tokens", slo=Slo(ttft_p99_s=2.0, tpot_p99_s=0.05))
    json.dumps(result.to_dict())

`timer` is any planner.costmodel.timer.StepTimer. See scheduler.py for the step semantics.
"""

from planner.scheduler_config import SchedulerConfig
from planner.simulate.colocated import simulate
from planner.simulate.disagg import simulate_disaggregated, transfer_s_per_token
from planner.simulate.metrics import (
    Goodput,
    LatencyStats,
    MinuteSeries,
    ReplicaStats,
    SimResult,
    weighted_percentiles,
)
from planner.simulate.requests import RequestArrays, RequestStream, SimRequest, as_request_arrays
from planner.simulate.router import (
    ROUTER_POLICIES,
    LeastOutstandingTokens,
    RoundRobin,
    Router,
)
from planner.simulate.scheduler import StepTrace
from planner.slo import Slo

__all__ = [
    "ROUTER_POLICIES",
    "Goodput",
    "LatencyStats",
    "LeastOutstandingTokens",
    "MinuteSeries",
    "ReplicaStats",
    "RequestArrays",
    "RequestStream",
    "RoundRobin",
    "Router",
    "SchedulerConfig",
    "SimRequest",
    "SimResult",
    "Slo",
    "StepTrace",
    "as_request_arrays",
    "simulate",
    "simulate_disaggregated",
    "transfer_s_per_token",
    "weighted_percentiles",
]
