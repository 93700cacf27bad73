"""The requests of `evaluate` (a deployment under a workload, by the latency model) and `simulate`
(the same, through the discrete-event simulator of vLLM V1's scheduler): one file a CLI user
writes, plus overrides. planner/schema/inputs.py re-exports them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from planner.costmodel.profiles import DEFAULT_PROFILE
from planner.deployment import Deployment
from planner.errors import InvalidInput
from planner.schema.request_common import (
    MAX_SEED,
    MAX_SIMULATED_REQUESTS,
    Replay,
    Router,
    SloTargets,
    WorkloadInput,
)
from planner.workload import MAX_HORIZON_S, MAX_REQUESTS_PER_S

_CONFIG = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class _ServingRequest(BaseModel):
    """What `evaluate` and `simulate` share: the file a CLI user writes, plus overrides."""

    model_config = _CONFIG
    deployment: Deployment
    workload: WorkloadInput
    slo: SloTargets | None = None
    profile: str = Field(default=DEFAULT_PROFILE, min_length=1)
    requests_per_s: float | None = Field(default=None, gt=0, le=MAX_REQUESTS_PER_S)

    @model_validator(mode="before")
    @classmethod
    def _rate_without_arrivals(cls, data: Any) -> Any:
        """`requests_per_s` given and the workload has no `arrivals`: Poisson arrivals at it."""
        if not isinstance(data, Mapping) or data.get("requests_per_s") is None:
            return data
        wl = data.get("workload")
        if isinstance(wl, Mapping) and "trace" not in wl and "arrivals" not in wl:
            rate = data["requests_per_s"]
            try:
                ok = 0 < float(rate) <= MAX_REQUESTS_PER_S and not isinstance(rate, bool)
            except (TypeError, ValueError):
                ok = False
            # A bad rate is reported once, at requests_per_s: the placeholder never gets used.
            arrivals = {"requests_per_s": rate if ok else 1.0}
            return {**data, "workload": {**wl, "arrivals": arrivals}}
        return data


class EvaluateRequest(_ServingRequest):
    """A deployment under a workload: latency, KV use and cost; with `slo` (TTFT and ITL p99),
    the most requests/s per replica within it. `requests_per_s` evaluates at that rate (whole
    deployment) instead of the workload's, and stands in for a workload without `arrivals`.
    `profile`: theoretical, calibrated, auto (the default: calibrated where one ships for the
    GPU) or a profile file."""


class SimulateRequest(_ServingRequest):
    """The deployment run through the discrete-event simulator of vLLM V1's scheduler.

    Requests: sampled from `workload` with `seed` (`requests_per_s` rescales its mean rate,
    bucket shape kept), or `trace` replayed (`replay: recorded` keeps its timestamps, `scaled`
    time-scales it to `requests_per_s`; scaled is implied by a rate). `requests` of them, or all
    arrivals before `horizon_s`; neither: one pass over bucketed arrivals, else 10,000 requests,
    or the whole trace. `slo`: TTFT, TPOT and E2E targets judge each request (goodput) and the
    p99; ITL the p99. `series: false` leaves the per-minute series empty."""

    seed: int = Field(default=0, ge=0, le=MAX_SEED)
    requests: int | None = Field(default=None, ge=1, le=MAX_SIMULATED_REQUESTS)
    horizon_s: float | None = Field(default=None, gt=0, le=MAX_HORIZON_S)
    trace: str | None = Field(default=None, min_length=1)
    replay: Replay | None = None
    router: Router = "round_robin"
    series: bool = True

    def check(self) -> None:
        """Cross-field rules, each naming the field to change."""
        if self.requests is not None and self.horizon_s is not None:
            raise InvalidInput("horizon_s", "give requests or horizon_s, not both")
        if self.trace is None:
            if self.replay is not None:
                raise InvalidInput("replay", "only with trace (the workload is sampled otherwise)")
            return
        if not self.trace.strip():
            raise InvalidInput("trace", "must name a built-in trace or a CSV file")
        if self.replay == "scaled" and self.requests_per_s is None:
            raise InvalidInput("requests_per_s", "required with replay scaled (the target mean rate)")
        if self.replay == "recorded" and self.requests_per_s is not None:
            raise InvalidInput(
                "requests_per_s", "a trace replayed as recorded keeps its rate; use replay scaled"
            )
