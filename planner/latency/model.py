"""Latency under load for a whole deployment: `evaluate` (predictions at a rate) and `capacity`
(the highest rate within TTFT / ITL p99 targets). The engine model is in `engine.py`, the
answers' types in `predictions.py`, the capacity search per pool in `slo_capacity.py`; the
document is docs/latency.md.

Rates in a `Workload` are for the whole deployment; colocated replicas split them evenly, and so
do the replicas of each pool of a disaggregated deployment. The split also smooths bursts: each
replica of a pool of R is modelled with the per-replica arrival CV² of a random split,
`per_replica_arrival_cv2(cv2, 1/R)` (docs/plan.md, "Bursty arrivals over replicas"). Times are
seconds inside; the JSON contract (`to_dict`) is in milliseconds.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from planner.costmodel.analyses import usd_per_million
from planner.deployment import Deployment, ResolvedDeployment
from planner.errors import InvalidInput
from planner.latency.engine import Engine
from planner.latency.predictions import BucketPoint, CapacityResult, Floors, Prediction, ms
from planner.latency.results import Boundary, Point
from planner.latency.slo_capacity import pool_capacity
from planner.latency.stats import WorkloadStats
from planner.schema.kinds import Role
from planner.slo import Slo
from planner.workload import Workload

__all__ = ["LatencyModel", "capacity", "evaluate", "per_replica_arrival_cv2"]


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
            "ttft_p99_ms": None if p is None else ms(p.ttft_p99_s),
            "itl_p99_ms": None if p is None else ms(p.itl_p99_s),
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
        pools = {role: pool_capacity(role, e, slo) for role, e in self.engines.items()}
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
