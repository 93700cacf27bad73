"""Latency under load for a whole deployment: `evaluate` (predictions at a rate) and `capacity`
(the highest rate within TTFT / ITL p99 targets). The engine model is in `engine.py`; the
document is docs/latency.md.

Rates in a `Workload` are for the whole deployment; colocated replicas split them evenly, and so
do the replicas of each pool of a disaggregated deployment. The split also smooths bursts: each
replica of a pool of R is modelled with the per-replica arrival CV² of a random split,
`per_replica_arrival_cv2(cv2, 1/R)` (docs/plan.md, "Bursty arrivals over replicas"). Times are
seconds inside; the JSON contract (`to_dict`) is in milliseconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from planner.costmodel.analyses import usd_per_million
from planner.deployment import Deployment, Mode, ResolvedDeployment
from planner.errors import InvalidInput
from planner.latency.engine import HUGE, Engine
from planner.latency.results import Boundary, Point, State
from planner.latency.stats import WorkloadStats
from planner.schema.kinds import BindingLimit, Role, StabilityLimit
from planner.slo import Slo
from planner.workload import Workload
from solvers.rootfind import RootResult, last_met

# The capacity is the last point that met the SLO, found to this share of itself below the first
# point that missed it (a tolerance on the whole stable range instead leaves a capacity far below
# the range's end, a tight SLO, coarse: docs/latency/capacity.md).
CAPACITY_PRECISION = 1e-2
# Brent's tolerance: 0.9 of that precision of the point (its bracket then closes within the
# precision in one pass; `last_met` goes on between the two points where it does not), plus
# CAPACITY_XTOL of the stable range: where no positive rate meets the SLO the search stops that
# close to 0 (the decades below, or under bursts "no positive rate", take over from there).
CAPACITY_RTOL = 0.9 * CAPACITY_PRECISION
CAPACITY_XTOL = 1e-3
# `Engine.ttft_p99_at_most_s` is a bound in exact arithmetic; the quantile's own rounding is
# covered by this relative margin before the capacity search trusts it.
TTFT_BOUND_MARGIN = 1.0 + 1e-6
# Where the SLO is met only below that precision (a target just above an idle floor that p99
# leaves steeply), the search goes on towards 0 by factors of 10, at most this many times.
NEAR_ZERO_DECADES = 9

__all__ = [
    "BindingLimit",
    "CapacityResult",
    "Floors",
    "LatencyModel",
    "PoolCapacity",
    "Prediction",
    "Slo",
    "capacity",
    "evaluate",
    "per_replica_arrival_cv2",
]


def per_replica_arrival_cv2(cv2: float, share: float) -> float:
    """The inter-arrival CV² one replica sees when it gets `share` (0 < share <= 1) of a renewal
    stream whose gaps have CV² `cv2`, each request routed at random (a Kubernetes Service's
    kube-proxy picks a pod at random): its gap is a sum of N ~ Geometric(share) stream gaps, so
    CV² = (E[N] Var X + Var N E[X]²) / (E[N] E[X])² = 1 + (cv2 - 1) share. Poisson stays Poisson;
    bursts spread out, smooth streams roughen towards Poisson. A round-robin router does better
    (cv2 share for iid gaps: `share` consecutive gaps per replica), so this is the conservative
    reading of an unknown router; `share` = 1 gives the stream itself."""
    if not (0.0 < share <= 1.0):
        raise ValueError(f"share must be in (0, 1], got {share}")
    return 1.0 + (cv2 - 1.0) * share


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
            "ttft_p99_ms": _ms(self.ttft_p99_s),
            "itl_p99_ms": _ms(self.itl_p99_s),
            "itl_mixed_step_ms": _ms(self.itl_mixed_step_s),
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
                "ttft_p99_ms": None if at is None else _ms(at.ttft_p99_s),
                "itl_p99_ms": None if at is None else _ms(at.itl_p99_s),
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
            "ttft_p99_ms": _ms(self.ttft_p99_s),
            "itl_p99_ms": _ms(self.itl_p99_s),
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
            "ttft_p50_ms": _ms(self.ttft_p50_s),
            "ttft_p99_ms": _ms(self.ttft_p99_s),
            "itl_p50_ms": _ms(self.itl_p50_s),
            "itl_p99_ms": _ms(self.itl_p99_s),
            "itl_worst_case_ms": _ms(self.itl_worst_case_s),
            "decode_concurrency": self.decode_concurrency,
            "mean_step_ms": _ms(self.mean_step_s),
            "mixed_step_fraction": self.mixed_step_fraction,
            "prefill_chunk_tokens": self.prefill_chunk_tokens,
            "prefill_utilization": self.prefill_utilization,
            "queue_wait_mean_ms": _ms(self.queue_wait_mean_s),
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


def _ms(x: float | None) -> float | None:
    return None if x is None else x * 1e3


class LatencyModel:
    """A resolved deployment and a workload, ready to answer many questions cheaply."""

    def __init__(self, deployment: ResolvedDeployment, stats: WorkloadStats) -> None:
        self.deployment = deployment
        self.stats = stats
        self.coefficients = deployment.replica.coefficients
        self._floors: Floors | None = None
        config = deployment.scheduler
        self.engines: dict[Role, Engine] = {}
        self.replicas: dict[Role, int]
        # vLLM's front end adds a constant to every request's TTFT, outside the engine's steps.
        front_end_s = deployment.replica.profile.request_overhead_s
        if deployment.disaggregated:
            self.replicas = {"prefill": deployment.prefill_replicas, "decode": deployment.decode_replicas}
            # Each GPU of the TP group ships its share of the prompt's KV over its own NIC.
            kv = deployment.replica.kv_bytes_per_token
            transfer = (
                stats.prompt_tokens * kv / deployment.kv_transfer_bandwidth_bytes_per_s
                + deployment.kv_transfer_latency_s
                + front_end_s
            )
            k = self.coefficients
            self.engines["prefill"] = Engine(
                k, self.replica_stats("prefill"), config, "prefill", ttft_extra_s=transfer
            )
            if stats.decode_steps > 0:
                self.engines["decode"] = Engine(k, self.replica_stats("decode"), config, "decode")
        else:
            self.replicas = {"colocated": deployment.replicas}
            front = np.full(stats.prompt_tokens.shape, front_end_s) if front_end_s > 0 else None
            self.engines["colocated"] = Engine(
                self.coefficients, self.replica_stats("colocated"), config, "colocated", ttft_extra_s=front
            )

    def replica_stats(self, role: Role) -> WorkloadStats:
        """The workload as one replica of `role`'s pool sees it: the stream split at random over
        the pool's replicas (`per_replica_arrival_cv2`); the stream itself for a single replica."""
        reps = self.replicas[role]
        cv2 = self.stats.arrival_cv2
        split = per_replica_arrival_cv2(cv2, 1.0 / reps) if reps > 1 else cv2
        return self.stats if split == cv2 else replace(self.stats, arrival_cv2=split)

    # ---- building blocks ------------------------------------------------------------------------

    def boundaries(self) -> dict[Role, Boundary]:
        return {role: e.boundary() for role, e in self.engines.items()}

    def max_stable_requests_per_s(self) -> float:
        """The deployment's max stable arrival rate (all replicas)."""
        return min(self.replicas[r] * b.lam_max for r, b in self.boundaries().items())

    def _bottleneck(self) -> Role:
        return min(self.boundaries().items(), key=lambda kv: self.replicas[kv[0]] * kv[1].lam_max)[0]

    def floors(self) -> Floors:
        if self._floors is None:
            self._floors = self._find_floors()
        return self._floors

    def _find_floors(self) -> Floors:
        ttft = itl = mixed = None
        for role, e in self.engines.items():
            p = e.zero_point()
            if role in ("colocated", "prefill"):
                ttft = p.ttft_p99_s
            if e.has_decode:
                itl = p.itl_p99_s
                if role == "colocated":
                    mixed = p.itl_worst_case_s
        return Floors(ttft, itl, mixed)

    # ---- evaluate -------------------------------------------------------------------------------

    def evaluate(self, requests_per_s: float | None = None, per_bucket: bool = True) -> Prediction:
        """Predictions at `requests_per_s` for the whole deployment (default: the workload's rate;
        for bucketed arrivals the peak bucket, and each bucket when `per_bucket`)."""
        st = self.stats
        bucketed = requests_per_s is None and st.bucket_rates is not None
        rate = st.peak_requests_per_s if requests_per_s is None else float(requests_per_s)
        if not (math.isfinite(rate) and rate >= 0):
            raise InvalidInput("requests_per_s", f"must be a non-negative number, got {rate}")
        notes: list[str] = []
        if bucketed:
            notes.append(
                f"arrival rate varies over {st.bucket_rates.size} buckets "  # type: ignore[union-attr]
                f"(mean {st.mean_requests_per_s:.3g}/s); evaluated at the peak bucket, {rate:.3g}/s"
            )
        points: dict[Role, Point | None] = {}
        for role, e in self.engines.items():
            lam = rate / self.replicas[role]
            s = e.solve(lam)
            points[role] = None if s is None else e.point(s[0])
        stable = all(p is not None for p in points.values())
        deploy_max = self.max_stable_requests_per_s()
        total = self.deployment.total_replicas
        bounds = self.boundaries()
        bottleneck = self._bottleneck()
        binding = bounds[bottleneck].binding
        if not stable:
            notes.append(
                f"unstable: {rate:.4g} requests/s exceeds the {deploy_max:.4g}/s this deployment can serve "
                f"(limit: {binding}{'' if len(bounds) == 1 else ' in the ' + bottleneck + ' pool'}); "
                "queues grow without bound, so no latency is reported"
            )
        served = rate if stable else deploy_max
        cost = self._costs(served)
        ttft_role: Role = "colocated" if "colocated" in self.engines else "prefill"
        dec_role: Role = "colocated" if "colocated" in self.engines else "decode"
        tp = points.get(ttft_role)
        dp = points.get(dec_role) if dec_role in self.engines else None
        util = max(
            (rate / self.replicas[r]) / b.lam_max if b.lam_max > 0 else math.inf for r, b in bounds.items()
        )
        notes += self._notes(points)
        pools: dict[str, dict[str, Any]] = {}
        if self.deployment.disaggregated:
            for role, p in points.items():
                pools[role] = self._pool_dict(role, rate, p, bounds[role])
        buckets = self._buckets() if bucketed and per_bucket else None
        mean_cost = None
        if bucketed:
            assert st.bucket_rates is not None and st.bucket_durations_s is not None
            served_mean = float(
                np.minimum(st.bucket_rates, deploy_max) @ st.bucket_durations_s / st.bucket_durations_s.sum()
            )
            mean_cost = self._costs(served_mean)[0]
        main = dp if dp is not None else tp
        return Prediction(
            mode=self.deployment.mode,
            requests_per_s=rate,
            requests_per_s_per_replica=rate / total,
            stable=stable,
            ttft_p50_s=None if tp is None else tp.ttft_p50_s,
            ttft_p99_s=None if tp is None else tp.ttft_p99_s,
            itl_p50_s=None if dp is None else dp.itl_p50_s,
            itl_p99_s=None if dp is None else dp.itl_p99_s,
            itl_worst_case_s=None if dp is None else dp.itl_worst_case_s,
            decode_concurrency=None if dp is None else dp.n,
            mean_step_s=None if dp is None else dp.mean_step_s,
            mixed_step_fraction=None if dp is None else dp.mixed_step_fraction,
            prefill_chunk_tokens=None if tp is None else tp.prefill_chunk_tokens,
            prefill_utilization=None if tp is None else tp.prefill_utilization,
            queue_wait_mean_s=None if tp is None else tp.queue_wait_mean_s,
            kv_cache_usage=None if main is None else main.kv_cache_usage,
            kv_cache_tokens=int(self.deployment.kv.kv_cache_tokens),
            preemption_risk=None if main is None else main.preemption_risk,
            running_requests=None if main is None else main.running_requests,
            gpu_utilization=min(util, 1.0) if stable else 1.0,
            mfu=self._mfu(served),
            max_stable_requests_per_s=deploy_max / total,
            deployment_max_stable_requests_per_s=deploy_max,
            usd_per_hour=self.deployment.usd_per_hour,
            usd_per_million_output_tokens=cost[0],
            usd_per_million_input_tokens=cost[1],
            binding_limit=binding,
            floors=self.floors(),
            pools=pools,
            buckets=buckets,
            mean_load_usd_per_million_output_tokens=mean_cost,
            notes=tuple(notes),
        )

    def _costs(self, served_requests_per_s: float) -> tuple[float | None, float | None]:
        """USD per 1M output / input tokens: the whole bill over each kind of token."""
        usd = self.deployment.usd_per_hour
        out_tps = served_requests_per_s * self.stats.mean_output_tokens
        in_tps = served_requests_per_s * self.stats.mean_prompt_tokens
        return (
            usd_per_million(usd, out_tps) if out_tps > 0 else None,
            usd_per_million(usd, in_tps) if in_tps > 0 else None,
        )

    def _mfu(self, served_requests_per_s: float) -> float:
        """Linear-layer FLOP/s achieved over the GPUs' dense peak (prefill + decode tokens)."""
        r = self.deployment.replica
        tokens = self.stats.mean_prefill_tokens + self.stats.decode_steps
        flops = served_requests_per_s * tokens * 2.0 * r.model.active_params
        return flops / (self.deployment.gpus * r.gpu.matmul_flops(r.weight_dtype))

    def _pool_dict(self, role: Role, rate: float, p: Point | None, b: Boundary) -> dict[str, Any]:
        reps = self.replicas[role]
        return {
            "replicas": reps,
            "requests_per_s_per_replica": rate / reps,
            "stable": p is not None,
            "max_stable_requests_per_s_per_replica": b.lam_max,
            "binding_limit": b.binding,
            "ttft_p99_ms": None if p is None else _ms(p.ttft_p99_s),
            "itl_p99_ms": None if p is None else _ms(p.itl_p99_s),
            "decode_concurrency": None if p is None or role == "prefill" else p.n,
            "kv_cache_usage": None if p is None else p.kv_cache_usage,
            "preemption_risk": None if p is None else p.preemption_risk,
        }

    def _notes(self, points: dict[Role, Point | None]) -> list[str]:
        d = self.deployment
        st = self.stats
        out = [
            "token budget read as vLLM V1: decodes are scheduled first, a prompt's chunk is the rest "
            f"of max_num_batched_tokens ({d.max_num_batched_tokens})"
            + (
                f", at most {d.long_prefill_token_threshold} per prompt"
                if d.long_prefill_token_threshold
                else ""
            )
        ]
        if st.prefix_cache_hit_fraction > 0:
            out.append(
                f"prefix cache: {st.prefix_cache_hit_fraction:.0%} of each prompt is a cache hit; "
                "only the rest is prefilled (KV still holds the whole prompt)"
            )
        split = [
            f"{'each' if role == 'colocated' else 'each ' + role} of {self.replicas[role]} sees CV² "
            f"{e.stats.arrival_cv2:.3g}"
            for role, e in self.engines.items()
            if self.replicas[role] > 1
        ]
        if split and st.arrival_cv2 != 1.0:
            out.append(
                f"arrivals (CV² {st.arrival_cv2:.3g}) taken as split at random over the replicas: "
                + ", ".join(split)
                + " (1 + (CV² - 1)/replicas; a round-robin router smooths more)"
            )
        if st.decode_steps <= 0:
            out.append("every answer is one token: no decode steps, no inter-token latency")
        longest = st.prompt_max_tokens + st.output_max_tokens
        if longest > d.kv.kv_cache_tokens:
            out.append(
                f"the longest request ({longest:.0f} tokens) does not fit the KV cache "
                f"({d.kv.kv_cache_tokens} tokens): vLLM can never schedule it"
            )
        if longest > d.model.max_position_embeddings:
            out.append(
                f"the longest request ({longest:.0f} tokens) exceeds the model's context "
                f"({d.model.max_position_embeddings} tokens)"
            )
        for role, p in points.items():
            where = "" if role == "colocated" else f" ({role} pool)"
            if p is not None and p.preemption_risk > 0.01:
                wait = (
                    f"; an arrival that finds it full waits ~{p.kv_full_wait_s * 1e3:,.0f} ms for blocks, "
                    "counted in TTFT"
                    if 0.0 < p.kv_full_wait_s < math.inf
                    else ""
                )
                out.append(
                    f"preemption risk{where}: KV use is {p.kv_cache_usage:.0%} of the cache on average; "
                    f"it overflows {p.preemption_risk:.1%} of the time (watch vllm:num_preemptions){wait}"
                )
            if p is not None and p.seat_wait_probability > 0.01:
                out.append(
                    f"seats{where}: {p.seat_wait_probability:.0%} of prompts find all {d.max_num_seqs} "
                    f"max_num_seqs seats taken ({p.running_requests:.1f} running on average) and wait "
                    f"~{p.seat_wait_s * 1e3:,.0f} ms for one, counted in TTFT "
                    "(watch vllm:num_requests_waiting)"
                )
        return out

    def _buckets(self) -> tuple[BucketPoint, ...]:
        st = self.stats
        assert st.bucket_rates is not None and st.bucket_durations_s is not None
        starts = np.concatenate(([0.0], np.cumsum(st.bucket_durations_s)[:-1]))
        cache: dict[float, tuple[bool, Point | None, Point | None]] = {}
        out = []
        ttft_role = "colocated" if "colocated" in self.engines else "prefill"
        dec_role = "colocated" if "colocated" in self.engines else "decode"
        for start, dur, rate in zip(starts, st.bucket_durations_s, st.bucket_rates, strict=True):
            r = float(rate)
            if r not in cache:
                pts: dict[str, Point | None] = {}
                for role, e in self.engines.items():
                    s = e.solve(r / self.replicas[role])
                    pts[role] = None if s is None else e.point(s[0])
                stable = all(p is not None for p in pts.values())
                cache[r] = (stable, pts.get(ttft_role), pts.get(dec_role))
            stable, tp, dp = cache[r]
            main = dp if dp is not None else tp
            out.append(
                BucketPoint(
                    start_s=float(start),
                    duration_s=float(dur),
                    requests_per_s=r,
                    stable=stable,
                    ttft_p99_s=None if tp is None or not stable else tp.ttft_p99_s,
                    itl_p99_s=None if dp is None or not stable else dp.itl_p99_s,
                    decode_concurrency=None if dp is None or not stable else dp.n,
                    kv_cache_usage=None if main is None or not stable else main.kv_cache_usage,
                )
            )
        return tuple(out)

    # ---- capacity -------------------------------------------------------------------------------

    def capacity(self, slo: Slo) -> CapacityResult:
        """The highest arrival rate meeting `slo`, by bracketed root-finding on each engine's stable
        branch (over decode concurrency n; over the rate for a prefill-only engine). TPOT and
        end-to-end targets are the simulator's; `slo` needs a TTFT or an ITL target."""
        if not slo.has_latency_targets:
            raise InvalidInput(
                "slo",
                "the analytic capacity needs ttft_p99_s or itl_p99_s; TPOT and end-to-end targets "
                "are judged by the simulator",
            )
        floors = self.floors()
        pools = {role: self._pool_capacity(role, e, slo) for role, e in self.engines.items()}
        totals = {role: self.replicas[role] * p.requests_per_s_per_replica for role, p in pools.items()}
        worst = min(totals, key=lambda r: totals[r])
        deploy = totals[worst]
        feasible = all(p.feasible for p in pools.values())
        reasons = [p.reason for p in pools.values() if p.reason]
        if not feasible:
            deploy = 0.0
        bad = [p for p in pools.values() if not p.feasible]
        binding = bad[0].binding_limit if bad else pools[worst].binding_limit
        return CapacityResult(
            feasible=feasible,
            max_requests_per_s_within_slo=deploy / self.deployment.total_replicas,
            deployment_max_requests_per_s_within_slo=deploy,
            binding_limit=binding,
            reason="; ".join(reasons),
            slo=slo,
            floors=floors,
            pools=pools,
        )

    def _pool_capacity(self, role: Role, e: Engine, slo: Slo) -> PoolCapacity:
        ttft_t = slo.ttft_p99_s if e.has_prefill else None
        itl_t = slo.itl_p99_s if e.has_decode else None
        b = e.boundary()
        if ttft_t is None and itl_t is None:
            return PoolCapacity(role, b.lam_max, True, b.binding, "", None, None)

        # Per point: the state and the p99 / target ratios computed there (None: not needed).
        memo: dict[float, tuple[State, float | None, float | None]] = {}

        def f(x: float) -> float:
            st = e.state_at(x)
            # Only the sign matters to the bracket: skip the second metric once one fails.
            ri = e.itl_p99_s(st) / itl_t if itl_t is not None else None
            rt = None
            if ttft_t is not None and (ri is None or ri <= 1.0):
                # Where a bound on TTFT p99 already sits below ITL's ratio, f is ITL's: the
                # exact TTFT p99 (its quantiles, ~a third of a point's cost) is not needed.
                itl_nearer = ri is not None and e.ttft_p99_at_most_s(st) * TTFT_BOUND_MARGIN / ttft_t <= ri
                rt = None if itl_nearer else e.ttft_p99_s(st) / ttft_t
            memo[x] = (st, ri, rt)
            v = max(-math.inf if ri is None else ri - 1.0, -math.inf if rt is None else rt - 1.0)
            return min(v, HUGE) if math.isfinite(v) else HUGE

        where = "" if role == "colocated" else f" in the {role} pool"
        p0 = e.zero_point()
        rt0 = p0.ttft_p99_s / ttft_t if ttft_t is not None and p0.ttft_p99_s is not None else 0.0
        ri0 = p0.itl_p99_s / itl_t if itl_t is not None and p0.itl_p99_s is not None else 0.0
        if max(rt0, ri0) > 1.0:
            parts = []
            if rt0 > 1.0 and ttft_t is not None and p0.ttft_p99_s is not None:
                parts.append(
                    f"TTFT p99 target {ttft_t * 1e3:.4g} ms is below the {p0.ttft_p99_s * 1e3:.4g} ms floor"
                    f"{where} (prefill of the p99 prompt on an idle replica)"
                )
            if ri0 > 1.0 and itl_t is not None and p0.itl_p99_s is not None:
                parts.append(
                    f"ITL p99 target {itl_t * 1e3:.4g} ms is below the {p0.itl_p99_s * 1e3:.4g} ms floor"
                    f"{where} (a decode step of one sequence on an idle replica)"
                )
            floor_limit: BindingLimit = "ttft" if rt0 >= ri0 else "itl"
            return PoolCapacity(role, 0.0, False, floor_limit, "; ".join(parts), None, None)
        x_hi = b.n_max if e.has_decode else b.lam_max
        f_hi = f(x_hi)
        if f_hi <= 0:
            return PoolCapacity(role, b.lam_max, True, b.binding, "", None, e.point(memo[x_hi][0]))
        # Not under bursts (gaps of CV^2 > 1) below the root's precision: the model's burst
        # factor fades as the rate vanishes (z -> 1 with n) where gamma clumps persist (P(a gap
        # < L) ~ (k lam L)^k), so its low-rate limit is not to be trusted there: bursts that
        # queue at any rate read as no positive rate.
        decades = NEAR_ZERO_DECADES if e.stats.arrival_cv2 <= 1.0 else 0
        # Decode roles search the rate axis (`Engine.concurrency_at`), the precision judged on
        # each state's own rate: the capacity's unit, and about linear in the targets. A
        # prefill-only engine's axis is the rate already.
        on_rates = e.has_decode and b.lam_max > 0.0
        axis = e.concurrency_at if on_rates else _same
        u_hi = b.lam_max if on_rates else x_hi
        edge = last_met(
            lambda u: f(axis(u)),
            0.0,
            u_hi,
            f_lo=max(rt0, ri0) - 1.0,
            f_hi=f_hi,
            xtol=CAPACITY_XTOL * u_hi,
            rtol=CAPACITY_RTOL,
            precision=CAPACITY_PRECISION,
            decades=decades,
            measure=(lambda u: e.state_at(axis(u)).lam) if on_rates else None,
        )
        x, x_fail = axis(edge.met), axis(edge.missed)
        res = edge.search
        if x <= 0.0:
            return self._no_positive_rate(role, e, slo, res, x_fail, where)
        st = memo[x][0] if x in memo else e.state_at(x)
        at = e.point(st)
        return PoolCapacity(
            role, st.lam, True, self._failing_target(e, memo, x_fail, ttft_t, itl_t), "", res, at
        )

    @staticmethod
    def _failing_target(
        e: Engine,
        memo: dict[float, tuple[State, float | None, float | None]],
        x_fail: float,
        ttft_t: float | None,
        itl_t: float | None,
    ) -> BindingLimit:
        """The SLO that binds: the target missed at the first failing point of the root-find,
        just above the capacity, not the one closer to its target at the capacity itself (a
        p99 can jump in between). ITL is checked first there (as in the root-find's f): if both
        are missed, they crossed within the root's tolerance of each other. At an exact root
        (nothing missed) the target nearest to its limit binds."""
        st, ri, rt = memo[x_fail] if x_fail in memo else (e.state_at(x_fail), None, None)
        if itl_t is not None and ri is None:
            ri = e.itl_p99_s(st) / itl_t
        if ri is not None and ri > 1.0:
            return "itl"
        if ttft_t is not None and rt is None:
            rt = e.ttft_p99_s(st) / ttft_t
        if rt is not None and rt > 1.0:
            return "ttft"
        return "itl" if ri is not None and (rt is None or ri >= rt) else "ttft"

    def _no_positive_rate(
        self, role: Role, e: Engine, slo: Slo, res: RootResult, x_min: float, where: str
    ) -> PoolCapacity:
        """The idle replica meets the SLO but no positive load does: with bursty (gamma, k < 1)
        arrivals, bursts of about 1/k requests queue behind each other however rare they are, so
        the floor at a vanishing rate sits above the idle one. `x_min`: the least point tried."""
        at = e.point(e.state_at(x_min))
        parts = []
        if slo.ttft_p99_s is not None and at.ttft_p99_s is not None and at.ttft_p99_s > slo.ttft_p99_s:
            parts.append(f"TTFT p99 is {at.ttft_p99_s * 1e3:.4g} ms > {slo.ttft_p99_s * 1e3:.4g} ms")
        if slo.itl_p99_s is not None and at.itl_p99_s is not None and at.itl_p99_s > slo.itl_p99_s:
            parts.append(f"ITL p99 is {at.itl_p99_s * 1e3:.4g} ms > {slo.itl_p99_s * 1e3:.4g} ms")
        k = 1.0 / e.stats.arrival_cv2 if e.stats.arrival_cv2 > 0 else math.inf
        why = (
            f"arrivals come in bursts (burstiness k={k:.3g}, about {1 / k:.0f} requests at once) that queue "
            "behind each other at any rate"
            if k < 1
            else "the SLO sits at the idle floor"
        )
        reason = (
            f"no positive arrival rate meets the SLO{where}: even at {at.lam:.3g} req/s per replica, "
            f"{' and '.join(parts) or 'a target is missed'}; {why}"
        )
        binding: BindingLimit = "ttft" if parts and parts[0].startswith("TTFT") else "itl"
        return PoolCapacity(role, 0.0, False, binding, reason, res, at)


def _same(x: float) -> float:
    """The identity: a search axis that is its own quantity."""
    return x


# ---- functional entry points -----------------------------------------------------------------


def _model(
    deployment: Deployment | ResolvedDeployment, workload: Workload | WorkloadStats, profile: Any
) -> LatencyModel:
    resolved = deployment if isinstance(deployment, ResolvedDeployment) else deployment.resolve(profile)
    stats = workload if isinstance(workload, WorkloadStats) else WorkloadStats.of(workload)
    return LatencyModel(resolved, stats)


def evaluate(
    deployment: Deployment | ResolvedDeployment,
    workload: Workload | WorkloadStats,
    profile: Any = None,
    *,
    requests_per_s: float | None = None,
) -> Prediction:
    """Predictions for `deployment` serving `workload` (at `requests_per_s` for the whole
    deployment when given, else the workload's rate — the peak bucket's for bucketed arrivals).
    `profile`: a costmodel Profile (default theoretical); ignored for a ResolvedDeployment."""
    return _model(deployment, workload, profile).evaluate(requests_per_s)


def capacity(
    deployment: Deployment | ResolvedDeployment,
    workload: Workload | WorkloadStats,
    slo: Slo,
    profile: Any = None,
) -> CapacityResult:
    """The highest arrival rate (per replica and for the deployment) meeting `slo`. The
    workload's rate is not used: only its lengths, burstiness and prefix-cache hits."""
    return _model(deployment, workload, profile).capacity(slo)
