"""What the latency model answers: `Prediction` (the figures at one arrival rate, per bucket
when the rate varies), `CapacityResult` and its `PoolCapacity` per role (the highest rate within
the SLO), and the `Floors` no load can beat. Times are seconds inside; `to_dict`, the JSON
contract, is in milliseconds. The model that fills them is `planner/latency/model.py`; the
capacity search, `planner/latency/slo_capacity.py`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from planner.deployment import Mode
from planner.latency.results import Point
from planner.schema.kinds import BindingLimit, Role, StabilityLimit
from planner.slo import Slo
from solvers.rootfind import RootResult

__all__ = ["BucketPoint", "CapacityResult", "Floors", "PoolCapacity", "Prediction", "ms"]


@dataclass(frozen=True)
class Floors:
    """What no load can beat: the p99s as the arrival rate goes to 0. TTFT: the prefill of the
    p99 prompt alone (+ KV transfer when disaggregated). ITL: a decode step of one sequence.
    `itl_mixed_step_s`: a step that carries a full budget at the p99 prompt's last chunk — the
    tail a decode meets once prompts arrive (colocated only)."""

    ttft_p99_s: float | None
    itl_p99_s: float | None
    itl_mixed_step_s: float | None

    def to_dict(self) -> dict[str, float | None]:
        return {
            "ttft_p99_ms": ms(self.ttft_p99_s),
            "itl_p99_ms": ms(self.itl_p99_s),
            "itl_mixed_step_ms": ms(self.itl_mixed_step_s),
        }


@dataclass(frozen=True)
class PoolCapacity:
    """One engine role's capacity: requests/s per replica within the SLO (or stability)."""

    role: Role
    requests_per_s_per_replica: float
    feasible: bool
    binding_limit: BindingLimit
    reason: str
    root: RootResult | None
    at_capacity: Point | None


@dataclass(frozen=True)
class CapacityResult:
    """The highest arrival rate that meets the SLO. `max_requests_per_s_within_slo` is per
    replica (the deployment's rate / its replica count; for a disaggregated deployment the pools
    in their given ratio); `binding_limit` is ttft, itl (an SLO binds) or the stability limit
    (compute, kv_capacity, max_num_seqs, max_num_batched_tokens) when the SLO is looser than
    what the replica can serve at all. Infeasible: the SLO is below the floor (`floors`)."""

    feasible: bool
    max_requests_per_s_within_slo: float
    deployment_max_requests_per_s_within_slo: float
    binding_limit: BindingLimit
    reason: str
    slo: Slo
    floors: Floors
    pools: dict[Role, PoolCapacity]

    @property
    def root(self) -> RootResult | None:
        pool = min(self.pools.values(), key=lambda p: p.requests_per_s_per_replica)
        return pool.root

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "slo": {k: v for k, v in self.slo.to_dict().items() if k in ("ttft_p99_ms", "itl_p99_ms")},
            "slo_feasible": self.feasible,
            "max_requests_per_s_within_slo": self.max_requests_per_s_within_slo,
            "deployment_max_requests_per_s_within_slo": self.deployment_max_requests_per_s_within_slo,
            "binding_limit": self.binding_limit,
            "reason": self.reason,
            "floors": self.floors.to_dict(),
            "pools": {},
        }
        for name, p in self.pools.items():
            at = p.at_capacity
            out["pools"][name] = {
                "requests_per_s_per_replica": p.requests_per_s_per_replica,
                "feasible": p.feasible,
                "binding_limit": p.binding_limit,
                "reason": p.reason,
                "ttft_p99_ms": None if at is None else ms(at.ttft_p99_s),
                "itl_p99_ms": None if at is None else ms(at.itl_p99_s),
                "decode_concurrency": None if at is None or p.role == "prefill" else at.n,
                "root_find": None if p.root is None else p.root.to_dict(),
            }
        return out


@dataclass(frozen=True)
class BucketPoint:
    start_s: float
    duration_s: float
    requests_per_s: float
    stable: bool
    ttft_p99_s: float | None
    itl_p99_s: float | None
    decode_concurrency: float | None
    kv_cache_usage: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "start_s": self.start_s,
            "duration_s": self.duration_s,
            "requests_per_s": self.requests_per_s,
            "stable": self.stable,
            "ttft_p99_ms": ms(self.ttft_p99_s),
            "itl_p99_ms": ms(self.itl_p99_s),
            "decode_concurrency": self.decode_concurrency,
            "kv_cache_usage": self.kv_cache_usage,
        }


@dataclass(frozen=True)
class Prediction:
    """Predictions for a deployment at one arrival rate (the peak bucket's for bucketed
    arrivals). Latencies are None when the load is unstable: the deployment cannot serve it,
    and `max_stable_requests_per_s` says what it can. Per-replica figures are per replica of the
    pool they describe (decode pool for decode figures, prefill pool for TTFT when
    disaggregated)."""

    mode: Mode
    requests_per_s: float
    requests_per_s_per_replica: float
    stable: bool
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    itl_p50_s: float | None
    itl_p99_s: float | None
    itl_worst_case_s: float | None
    decode_concurrency: float | None
    mean_step_s: float | None
    mixed_step_fraction: float | None
    prefill_chunk_tokens: float | None
    prefill_utilization: float | None
    queue_wait_mean_s: float | None
    kv_cache_usage: float | None
    kv_cache_tokens: int
    preemption_risk: float | None
    running_requests: float | None
    gpu_utilization: float
    mfu: float
    max_stable_requests_per_s: float
    deployment_max_stable_requests_per_s: float
    usd_per_hour: float
    usd_per_million_output_tokens: float | None
    usd_per_million_input_tokens: float | None
    binding_limit: StabilityLimit
    floors: Floors
    pools: dict[str, dict[str, Any]] = field(default_factory=dict)
    buckets: tuple[BucketPoint, ...] | None = None
    mean_load_usd_per_million_output_tokens: float | None = None
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "requests_per_s": self.requests_per_s,
            "requests_per_s_per_replica": self.requests_per_s_per_replica,
            "stable": self.stable,
            "ttft_p50_ms": ms(self.ttft_p50_s),
            "ttft_p99_ms": ms(self.ttft_p99_s),
            "itl_p50_ms": ms(self.itl_p50_s),
            "itl_p99_ms": ms(self.itl_p99_s),
            "itl_worst_case_ms": ms(self.itl_worst_case_s),
            "decode_concurrency": self.decode_concurrency,
            "mean_step_ms": ms(self.mean_step_s),
            "mixed_step_fraction": self.mixed_step_fraction,
            "prefill_chunk_tokens": self.prefill_chunk_tokens,
            "prefill_utilization": self.prefill_utilization,
            "queue_wait_mean_ms": ms(self.queue_wait_mean_s),
            "kv_cache_usage": self.kv_cache_usage,
            "kv_cache_tokens": self.kv_cache_tokens,
            "preemption_risk": self.preemption_risk,
            "running_requests": self.running_requests,
            "gpu_utilization": self.gpu_utilization,
            "mfu": self.mfu,
            "max_stable_requests_per_s": self.max_stable_requests_per_s,
            "deployment_max_stable_requests_per_s": self.deployment_max_stable_requests_per_s,
            "usd_per_hour": self.usd_per_hour,
            "usd_per_million_output_tokens": self.usd_per_million_output_tokens,
            "usd_per_million_input_tokens": self.usd_per_million_input_tokens,
            "mean_load_usd_per_million_output_tokens": self.mean_load_usd_per_million_output_tokens,
            "binding_limit": self.binding_limit,
            "floors": self.floors.to_dict(),
            "pools": self.pools,
            "buckets": None if self.buckets is None else [b.to_dict() for b in self.buckets],
            "notes": list(self.notes),
        }


def ms(x: float | None) -> float | None:
    """Seconds to milliseconds, None kept (the JSON contract's unit)."""
    return None if x is None else x * 1e3
