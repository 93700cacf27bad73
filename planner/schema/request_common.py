"""The ranges of the requests' numbers, and the pieces the requests share: the workload a request
names (planner.workload's schema, a trace reference, or a history to forecast) and the SLO
targets. planner/schema/inputs.py re-exports every name here.

A workload is the schema of planner.workload, a trace reference, or a history to forecast
(`workload: {history: ..., forecast: {...}}`, planner/schema/history_workload.py):

    workload:
      trace: azure-conv-2023        # a built-in trace name, or a CSV path
      bucket_s: 60                  # per-bucket arrival rates (null: one constant mean rate)
      burstiness: rescaled          # rescaled (CV of gaps once bucket rates are taken out) | gaps | a number k (CV^2 = 1/k)
      bins: null                    # null: exact empirical lengths; N: N-bin histograms
      requests_per_s: null          # rescale the trace's time to this mean rate
      prefix_cache_hit_fraction: 0
      endpoint: chat                # chat (/v1/chat/completions) | completions (/v1/completions)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator, model_validator

from planner.costmodel import fit_data
from planner.errors import echo
from planner.schema.history_workload import HistoryWorkload
from planner.slo import MAX_SLO_S, Slo
from planner.workload import MAX_REQUESTS_PER_S, Workload

# --- ranges --------------------------------------------------------------------------------------
# Generous for any real service, tight enough that no request can run for minutes or exhaust memory.
MAX_LATENCY_MS = MAX_SLO_S * 1e3  # an SLO target: one hour
# Requests one `simulate` request may generate (`requests`, or rate x `horizon_s`, or one pass
# over the buckets or the trace): about 2 minutes of one core at the worst measured cost
# (~130 us a request with the replicas overloaded, bench/bench_admission.py). The
# service admits fewer (planner/server/policy.py); the simulator itself streams up to
# planner.workload.MAX_SAMPLED_REQUESTS.
MAX_SIMULATED_REQUESTS = 1_000_000
MAX_SEED = 2**63 - 1
MAX_CONTEXT_TOKENS = 10_000_000  # beyond every model's context; each model's own limit also applies
MAX_CONCURRENCY = 1_000_000  # sequences, batch sizes, decodes
MAX_TOKEN_BUDGET = 10_000_000  # max_num_batched_tokens, chunk sizes
MAX_TOKENS_PER_DAY = 1e15
MAX_LIST_ITEMS = 1_000  # values in one sweep (concurrencies, batches, chunk sizes)
MAX_TRACE_BINS = 10_000
MAX_BUCKET_S = 31_622_400.0
MAX_MEASUREMENT_ROWS = fit_data.MAX_ROWS  # inline rows: as many as a measurements file takes

_CONFIG = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
Router = Literal["round_robin", "least_outstanding_tokens"]
Replay = Literal["recorded", "scaled"]


# --- shared pieces -------------------------------------------------------------------------------


class TraceWorkload(BaseModel):
    """`workload: {trace: ...}`: a workload derived from a request trace (see module docstring)."""

    model_config = _CONFIG
    trace: str = Field(min_length=1)
    bucket_s: float | None = Field(default=60.0, gt=0, le=MAX_BUCKET_S)
    burstiness: str | float = "rescaled"
    bins: int | None = Field(default=None, ge=1, le=MAX_TRACE_BINS)
    requests_per_s: float | None = Field(default=None, gt=0, le=MAX_REQUESTS_PER_S)
    prefix_cache_hit_fraction: float = Field(default=0.0, ge=0.0, lt=1.0)
    endpoint: Literal["chat", "completions"] = "chat"  # as Workload.endpoint
    name: str | None = None

    @field_validator("burstiness", mode="before")
    @classmethod
    def _burstiness(cls, v: Any) -> Any:
        if v in ("gaps", "rescaled"):
            return v
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v > 0:
            return float(v)
        raise ValueError(f"must be gaps, rescaled or a number k > 0 (CV^2 of the gaps = 1/k), got {echo(v)}")


def _workload_kind(v: Any) -> str:
    # Tags in brackets are dropped from error paths (planner.validation.loc_to_path).
    if isinstance(v, TraceWorkload) or (isinstance(v, Mapping) and "trace" in v):
        return "[trace]"
    if isinstance(v, HistoryWorkload) or (isinstance(v, Mapping) and "history" in v):
        return "[history]"
    return "[distributions]"


WorkloadInput = Annotated[
    Annotated[Workload, Tag("[distributions]")]
    | Annotated[TraceWorkload, Tag("[trace]")]
    | Annotated[HistoryWorkload, Tag("[history]")],
    Discriminator(_workload_kind),
]


class SloTargets(BaseModel):
    """p99 targets in milliseconds (null: none on that metric; give at least one). `evaluate`
    predicts TTFT and ITL; `simulate` also judges TPOT and end-to-end latency, per request
    (goodput, as `vllm bench serve --goodput`) and on the p99."""

    model_config = _CONFIG
    ttft_p99_ms: float | None = Field(default=None, gt=0, le=MAX_LATENCY_MS)
    itl_p99_ms: float | None = Field(default=None, gt=0, le=MAX_LATENCY_MS)
    tpot_p99_ms: float | None = Field(default=None, gt=0, le=MAX_LATENCY_MS)
    e2el_p99_ms: float | None = Field(default=None, gt=0, le=MAX_LATENCY_MS)

    @model_validator(mode="after")
    def _one_target(self) -> SloTargets:
        if all(v is None for v in (self.ttft_p99_ms, self.itl_p99_ms, self.tpot_p99_ms, self.e2el_p99_ms)):
            raise ValueError("give ttft_p99_ms, itl_p99_ms or both")
        return self

    def to_slo(self) -> Slo:
        """The domain's targets (planner.slo.Slo, seconds)."""

        def s(ms: float | None) -> float | None:
            return None if ms is None else ms / 1e3

        return Slo(
            ttft_p99_s=s(self.ttft_p99_ms),
            itl_p99_s=s(self.itl_p99_ms),
            tpot_p99_s=s(self.tpot_p99_ms),
            e2el_p99_s=s(self.e2el_p99_ms),
        )
