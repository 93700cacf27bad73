"""Discrete-event simulation of vLLM V1 engines (one, several behind a router, or disaggregated
prefill/decode pools), to verify plans against the analytic latency model.

    result = simulate(requests, timer, EngineConfig(kv_cache_blocks=20000), replicas=2,
                      router="least_outstanding_tokens", slo=SLO(ttft_s=2.0, tpot_s=0.05))
    json.dumps(result.to_dict())

`timer` is any planner.costmodel.timer.StepTimer. See scheduler.py for the step semantics.
"""

from planner.simulate.config import SLO, EngineConfig
from planner.simulate.disagg import simulate_disaggregated, transfer_s_per_token
from planner.simulate.engine import simulate
from planner.simulate.metrics import (
    Goodput,
    LatencyStats,
    MinuteSeries,
    ReplicaStats,
    SimResult,
    weighted_percentiles,
)
from planner.simulate.requests import RequestArrays, SimRequest, as_request_arrays
from planner.simulate.router import (
    ROUTER_POLICIES,
    LeastOutstandingTokens,
    RoundRobin,
    Router,
)
from planner.simulate.scheduler import StepTrace

__all__ = [
    "ROUTER_POLICIES",
    "SLO",
    "EngineConfig",
    "Goodput",
    "LatencyStats",
    "LeastOutstandingTokens",
    "MinuteSeries",
    "ReplicaStats",
    "RequestArrays",
    "RoundRobin",
    "Router",
    "SimRequest",
    "SimResult",
    "StepTrace",
    "as_request_arrays",
    "simulate",
    "simulate_disaggregated",
    "transfer_s_per_token",
    "weighted_percentiles",
]
