"""`plan(request)`: the cheapest deployment that meets the SLOs for a traffic forecast.

    candidates (planner/plan/search.py: GPU x TP x budget x max_num_seqs x role, capacity
    within the SLOs by root-finding, once per configuration)
      -> sizing (solvers.milp: replicas per bucket, reserved + on-demand GPUs, inventory caps)
      -> the plan: deployments with their exact vLLM flags, cost, predicted p99s at the peak,
         the reasons (binding limits, disaggregation), alternatives, warnings
      -> optionally `verify`: the peak bucket in the discrete-event simulator.

Same request, same report, byte for byte: candidates are sorted, capacities do not depend on
the worker count, and CBC runs single-threaded.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from planner.errors import InvalidInput
from planner.inputs import TraceWorkload
from planner.latency import LatencyModel, WorkloadStats
from planner.latency.engine import Point
from planner.latency.model import per_replica_arrival_cv2
from planner.plan import explain
from planner.plan.capacity import CapacityPoint, ReplicaConfig, Role, SearchContext, e2e_estimate_s
from planner.plan.pool import CapacityPool, default_workers
from planner.plan.report import (
    Alternative,
    AlternativeDeployment,
    BucketCost,
    GpuUse,
    Infeasibility,
    PlanDeployment,
    PlanReport,
    PlanTargets,
    PlanWorkload,
    PoolAtPeak,
    Predicted,
    ProfileUsed,
    SearchStats,
    Simulated,
    SolverSummary,
)
from planner.plan.request import PlanRequest, parse_plan_request
from planner.plan.search import SearchResult, shapes_of, unfit_shapes
from planner.plan.solve import HOURS_PER_MONTH, Costed, Forecast, Prices, milp_data, single_configurations
from planner.plan.split import Split, share_note
from planner.workload import Workload
from solvers.milp import MilpData, MilpResult, solve
from solvers.milp_data import MAX_BUCKETS, MAX_REPLICAS_PER_BUCKET, peak_replicas

LOW_UTILIZATION = 0.10
PREEMPTION_WARN = 0.01
# Per-replica arrival CV² from which the plan says its p99s are unreliable: the accuracy grid's
# trace has CV² 1.2; on docs/accuracy.md's bursty table (CV² 4 and 20) the model's TTFT p99 is
# from 55% below to 10% above the simulator's and ITL p99 up to 28% below (docs/latency.md,
# known limits). 4 (k = 0.25) is the table's mildest burstiness.
BURSTY_CV2_WARN = 4.0
TIGHT_RTOL = 1e-6
NIXL_CONFIG = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'


# --- the request's pieces ------------------------------------------------------------------------


def _model_ref(name: str, base: Path | None) -> str:
    from planner.catalog.models import get_model, model_names
    from planner.inputs import local_path

    if name.lower() not in {n.lower() for n in model_names()}:
        name = local_path(name, base)
    get_model(name, "model")  # a bad name or config.json is the request's fault: say so now
    return name


def _forecast(workload: Workload, req: PlanRequest) -> Forecast:
    a = workload.arrivals
    if a.buckets is None:
        assert a.requests_per_s is not None
        return Forecast((a.requests_per_s,), (3600.0,))
    if len(a.buckets) > MAX_BUCKETS:  # the MILP's limit (a workload takes more: evaluate, simulate)
        span_s = math.fsum(b.duration_s for b in a.buckets)
        field, fix = "workload.arrivals.buckets", "merge buckets"
        if isinstance(req.workload, TraceWorkload):
            field, fix = "workload.bucket_s", f"give bucket_s >= {span_s / MAX_BUCKETS:.4g} s"
        raise InvalidInput(
            field,
            f"{len(a.buckets):,} buckets over {span_s:.4g} s; a plan sizes at most {MAX_BUCKETS:,} ({fix})",
        )
    return Forecast(tuple(b.requests_per_s for b in a.buckets), tuple(b.duration_s for b in a.buckets))


def _prices(req: PlanRequest, gpu: str) -> Prices:
    from planner.catalog.gpus import get_gpu

    over = req.pricing.get(gpu)
    price = over.usd_per_gpu_hour if over is not None and over.usd_per_gpu_hour is not None else None
    return Prices(
        gpu=gpu,
        usd_per_gpu_hour=price if price is not None else get_gpu(gpu).price,
        reserved_usd_per_gpu_hour=None if over is None else over.reserved_usd_per_gpu_hour,
        inventory=req.inventory.get(gpu),
    )


def _roles(req: PlanRequest, notes: list[str]) -> list[Role]:
    mode = req.candidates.disaggregation
    if req.slo.e2e_p99_ms is not None and mode != "never":
        if mode == "always":
            raise InvalidInput(
                "slo.e2e_p99_ms",
                "the end-to-end target is judged for colocated replicas only; use candidates.disaggregation "
                "auto or never",
            )
        notes.append(
            "an E2E target is judged for colocated replicas only: disaggregated pools were not considered"
        )
        return ["colocated"]
    if mode == "never":
        return ["colocated"]
    if mode == "always":
        return ["prefill", "decode"]
    return ["colocated", "prefill", "decode"]


def _context(
    req: PlanRequest, model: str, stats: WorkloadStats, gpus: Sequence[str], base: Path | None
) -> SearchContext:
    from planner.costmodel.profiles import BUILTIN_NAMES, resolve_profile
    from planner.inputs import local_path

    spec = req.profile if req.profile in BUILTIN_NAMES else local_path(req.profile, base)
    profiles = tuple((g, resolve_profile(spec, g, "profile")) for g in sorted(gpus))
    s, c = req.slo, req.candidates
    return SearchContext(
        model=model,
        stats=stats,
        ttft_p99_s=None if s.ttft_p99_ms is None else s.ttft_p99_ms / 1e3,
        itl_p99_s=None if s.itl_p99_ms is None else s.itl_p99_ms / 1e3,
        e2e_p99_s=None if s.e2e_p99_ms is None else s.e2e_p99_ms / 1e3,
        profiles=profiles,
        weight_dtype=c.weight_dtype,
        kv_dtype=c.kv_dtype,
        gpu_memory_utilization=c.gpu_memory_utilization,
        kv_transfer_bandwidth_bytes_per_s=c.kv_transfer_bandwidth_bytes_per_s,
        kv_transfer_latency_s=c.kv_transfer_latency_s,
    )


# --- vLLM flags ----------------------------------------------------------------------------------


def default_configs(
    gpus: Sequence[str], tps: Sequence[int], unfit: Sequence[tuple[str, int, str]] = ()
) -> list[ReplicaConfig]:
    """Colocated replicas with vLLM's default budget and `max_num_seqs` for each GPU type."""
    from planner.catalog.gpus import get_gpu

    skip = {(g, tp) for g, tp, _ in unfit}
    out = []
    for g in gpus:
        spec = get_gpu(g)
        for tp in tps:
            if (g, tp) in skip:
                continue
            out.append(
                ReplicaConfig(
                    g,
                    tp,
                    "colocated",
                    spec.vllm_default_max_num_batched_tokens,
                    spec.vllm_default_max_num_seqs,
                )
            )
    return out


def vllm_args(ctx: SearchContext, cfg: ReplicaConfig) -> list[str]:
    """The `vllm serve` flags of a replica configuration: exactly the operating point modelled."""
    args = [
        "--tensor-parallel-size", str(cfg.tensor_parallel_size),
        "--max-num-batched-tokens", str(cfg.max_num_batched_tokens),
        "--max-num-seqs", str(cfg.max_num_seqs),
        "--gpu-memory-utilization", f"{ctx.gpu_memory_utilization:g}",
    ]  # fmt: skip
    if cfg.long_prefill_token_threshold:
        args += ["--long-prefill-token-threshold", str(cfg.long_prefill_token_threshold)]
    if ctx.weight_dtype == "fp8":
        args += ["--quantization", "fp8"]
    if ctx.kv_dtype == "fp8":
        args += ["--kv-cache-dtype", "fp8"]
    if cfg.role != "colocated":
        args += ["--kv-transfer-config", NIXL_CONFIG]
    return args


# --- the peak bucket -----------------------------------------------------------------------------


def _replicas_at(need_per_s: float, p: CapacityPoint) -> int:
    """Replicas of `p` a bucket of `need_per_s` (headroom included) takes, as MilpData counts them."""
    return (
        peak_replicas(need_per_s, p.requests_per_s) if p.requests_per_s > 0 else MAX_REPLICAS_PER_BUCKET + 1
    )


def _roomiest(points: Sequence[CapacityPoint]) -> CapacityPoint:
    """The configuration of the most capacity per replica (ties by id): the one an answer about
    too many replicas names."""
    return max(points, key=lambda p: (p.requests_per_s, p.config.id))


@dataclass(frozen=True)
class Serving:
    """A configuration serving at the peak bucket: its replicas and its per-replica rate."""

    point: CapacityPoint
    replicas: int
    requests_per_s_per_replica: float


def _shares(points: Sequence[tuple[CapacityPoint, int]], demand: float) -> list[Serving]:
    """Split the peak demand over what serves it, in proportion to the capacity each part
    provides (colocated replicas, and the prefill/decode pools as one unit of min(P, D))."""
    cap = {"colocated": 0.0, "prefill": 0.0, "decode": 0.0}
    for p, n in points:
        cap[p.config.role] += p.requests_per_s * n
    dis = min(cap["prefill"], cap["decode"])
    total = cap["colocated"] + dis
    out = []
    for p, n in points:
        role = p.config.role
        part = cap["colocated"] if role == "colocated" else dis
        share = demand * (part / total) if total > 0 else 0.0
        pool_cap = cap[role]
        rate = share * (p.requests_per_s / pool_cap) if pool_cap > 0 else 0.0
        out.append(Serving(p, n, rate))
    return out


def _point_at(ctx: SearchContext, cfg: ReplicaConfig, rate: float, share: float) -> Point | None:
    """The operating point of a replica at `rate`, taking `share` of the stream (split at random:
    its arrival CV² is `per_replica_arrival_cv2`)."""
    cv2 = per_replica_arrival_cv2(ctx.stats.arrival_cv2, min(1.0, max(share, 1e-12)))
    model = LatencyModel(ctx.resolve(cfg), replace(ctx.stats, arrival_cv2=cv2))
    engine = model.engines[cfg.role]
    s = engine.solve(rate)
    return None if s is None else engine.point(s[0])


def _ms(x: float | None) -> float | None:
    return None if x is None else x * 1e3


def _at_peak(point: Point | None, role: Role, rate: float) -> PoolAtPeak | None:
    if point is None:
        return None
    return PoolAtPeak(
        requests_per_s_per_replica=rate,
        ttft_p50_ms=_ms(point.ttft_p50_s) if role != "decode" else None,
        ttft_p99_ms=_ms(point.ttft_p99_s) if role != "decode" else None,
        itl_p50_ms=_ms(point.itl_p50_s) if role != "prefill" else None,
        itl_p99_ms=_ms(point.itl_p99_s) if role != "prefill" else None,
        kv_cache_usage=point.kv_cache_usage,
        preemption_risk=point.preemption_risk,
        running_requests=point.running_requests,
    )


# --- the plan ------------------------------------------------------------------------------------


def plan(
    request: PlanRequest | Mapping[str, Any],
    *,
    base_dir: str | Path | None = None,
    verify: bool = False,
    workers: int | None = None,
) -> PlanReport:
    """The cheapest plan for `request` (docs/plan.md). `verify`: simulate the peak bucket.
    `workers`: processes answering capacity questions (default 2; 1 = in this process, e.g.
    inside a threaded server). Bad input raises InvalidInput; an SLO no configuration meets is
    an answer (status INFEASIBLE with the reason and the nearest relaxation)."""
    from planner.catalog.gpus import gpu_names
    from planner.inputs import build_workload

    req = parse_plan_request(request)
    base = None if base_dir is None else Path(base_dir)
    workload = build_workload(req.workload, "workload", base)
    model = _model_ref(req.model, base)
    stats = WorkloadStats.of(workload)
    notes: list[str] = []
    roles = _roles(req, notes)
    listed = list(req.candidates.gpus or gpu_names())
    gpus = [g for g in listed if req.inventory.get(g) != 0]
    if len(gpus) < len(listed):
        notes.append("inventory 0 excludes " + ", ".join(g for g in listed if g not in gpus))
    ctx = _context(req, model, stats, listed, base)
    forecast = _forecast(workload, req)
    prices = [_prices(req, g) for g in sorted(listed)]
    with CapacityPool(ctx, default_workers() if workers is None else workers) as pool:
        unfit = unfit_shapes(model, req.candidates, gpus, ctx.profile)
        also = default_configs(gpus, req.candidates.tensor_parallel_sizes, unfit)  # for the alternatives
        shapes = shapes_of(req.candidates, gpus, roles, unfit)
        split = Split.of(forecast.rates_per_s, req.headroom)
        found = pool.search(shapes, also, split) if shapes else SearchResult((), (), ())
        found = replace(found, unfit=tuple(sorted({*found.unfit, *unfit})))
        builder = _Builder(req, ctx, workload, stats, forecast, prices, roles, notes, pool, found, split)
        return builder.build(verify)


class _Builder:
    """Assembles the report from the search, the MILP and the alternatives."""

    def __init__(
        self,
        req: PlanRequest,
        ctx: SearchContext,
        workload: Workload,
        stats: WorkloadStats,
        forecast: Forecast,
        prices: Sequence[Prices],
        roles: Sequence[Role],
        notes: list[str],
        pool: CapacityPool,
        found: SearchResult,
        split: Split | None = None,
    ) -> None:
        self.req, self.ctx, self.workload, self.stats = req, ctx, workload, stats
        self.forecast, self.prices, self.roles, self.notes = forecast, prices, roles, notes
        # A candidate the peak would need more replicas of than a plan sizes (MilpData's limit)
        # cannot be in any plan: it leaves the candidates, and if nothing servable is left the
        # answer says so (`_too_many_replicas`) instead of the MILP's data refusing it.
        self.peak_need_per_s = max(forecast.rates_per_s, default=0.0) * (1.0 + req.headroom)
        fits, self.oversized = self._sizable(found.best)
        if self.oversized:
            found = replace(found, best=fits)
        self.pool, self.found, self.split = pool, found, split
        self.warnings: list[str] = []
        self.by_id = {p.config.id: p for p in found.best}
        self.price_of = {p.gpu: p for p in prices}
        self._extra: dict[str, CapacityPoint] = {}

    # -- shared pieces --

    def _targets(self) -> PlanTargets:
        s = self.req.slo
        return PlanTargets(ttft_p99_ms=s.ttft_p99_ms, itl_p99_ms=s.itl_p99_ms, e2e_p99_ms=s.e2e_p99_ms)

    def _workload(self) -> PlanWorkload:
        st, f = self.stats, self.forecast
        return PlanWorkload(
            name=st.name,
            buckets=len(f.rates_per_s),
            horizon_hours=f.horizon_hours,
            mean_requests_per_s=st.mean_requests_per_s,
            peak_requests_per_s=st.peak_requests_per_s,
            peak_bucket=f.peak,
            burstiness=1.0 / st.arrival_cv2,
            mean_input_tokens=st.mean_prompt_tokens,
            p99_input_tokens=st.prompt_p99_tokens,
            mean_output_tokens=st.mean_output_tokens,
            p99_output_tokens=st.output_p99_tokens,
            prefix_cache_hit_fraction=st.prefix_cache_hit_fraction,
        )

    def _profiles(self) -> list[ProfileUsed]:
        return [ProfileUsed(gpu=g, name=p.name, source=p.source) for g, p in self.ctx.profiles]

    def _search_stats(self, result: MilpResult | None) -> SearchStats:
        st = None if result is None else result.stats
        return SearchStats(
            configurations_evaluated=self.pool.questions,
            candidates=len(self.found.best),
            candidates_pruned_dominated=self.found.dominated + (0 if st is None else st.candidates_pruned),
            candidates_in_milp=0 if st is None else st.candidates_in_model,
            milp_variables=0 if st is None else st.variables,
            milp_constraints=0 if st is None else st.constraints,
            unfit=[f"{g} TP{tp}: {why}" for g, tp, why in self.found.unfit],
        )

    def _base_notes(self) -> list[str]:
        st = self.stats
        k = 1.0 / st.arrival_cv2
        out = list(self.notes)
        out.append(
            "capacity per replica is computed once per configuration from the workload's lengths, "
            f"burstiness (k={k:.3g}{'' if k == 1 else ', as a replica taking its share of the stream sees it'}) "
            "and prefix-cache hits, the same in every bucket; each bucket is taken as a steady state (long against "
            "the queue's relaxation time)"
        )
        split = share_note(st.arrival_cv2, self.split)
        if split is not None:
            out.append(split)
        out.append(
            "token budget read as vLLM V1: decodes are scheduled first, a prompt's chunk is the rest of "
            "max_num_batched_tokens"
        )
        if k < 1:
            out.append(
                f"bursty arrivals (k={k:.3g}: about {1 / k:.0f} requests at once) queue behind each other: "
                "they cost TTFT capacity at any rate"
            )
        return out

    def _profile_warnings(self, plan_gpus: Sequence[str] = ()) -> list[str]:
        """A plan compares GPUs, so each needs the same standard of evidence: a roofline GPU next to
        measured ones looks up to ~2x cheaper than it is; a transferred profile carries its warning."""
        out = []
        measured = sorted(g for g, p in self.ctx.profiles if p.name != "theoretical" and p.warning is None)
        for g in plan_gpus:
            p = self.ctx.profile(g)
            if p.name == "theoretical" and measured:
                out.append(
                    f"{g} has no measured profile: the theoretical roofline is optimistic (up to ~2x) next to "
                    f"the measured {', '.join(measured)}, so the plan may favour it unfairly; calibrate it "
                    "(capplan calibrate) or leave it out of candidates.gpus"
                )
            elif p.warning:
                out.append(f"{g}: {p.warning}")
        return out

    # -- the answer --

    def _servable(self) -> bool:
        """Some colocated candidate, or a prefill and a decode candidate (of one GPU type unless
        mixing is allowed)."""
        best = self.found.best
        if any(p.config.role == "colocated" for p in best):
            return True
        pre = {p.config.gpu for p in best if p.config.role == "prefill"}
        dec = {p.config.gpu for p in best if p.config.role == "decode"}
        return bool(pre and dec) if self.req.candidates.mixed_gpu_types else bool(pre & dec)

    def build(self, verify: bool) -> PlanReport:
        if not self._servable():
            return self._infeasible(
                self._too_many_replicas() if self.oversized else self._no_candidate(), None
            )
        single = not self.req.candidates.mixed_gpu_types
        data = milp_data(
            self.found.best,
            self.forecast,
            self.prices,
            self.req.headroom,
            single,
            self.req.solver.time_limit_s,
            self.req.solver.relative_gap,
        )
        result = solve(data)
        if result.status in ("INFEASIBLE", "NO_SOLUTION"):
            return self._infeasible(self._milp_infeasible(data, result), result)
        return self._plan(data, result, verify)

    def _sizable(
        self, points: Sequence[CapacityPoint]
    ) -> tuple[tuple[CapacityPoint, ...], tuple[CapacityPoint, ...]]:
        """`points` split into those the peak bucket needs at most MAX_REPLICAS_PER_BUCKET
        replicas of and the others."""
        fits = tuple(p for p in points if _replicas_at(self.peak_need_per_s, p) <= MAX_REPLICAS_PER_BUCKET)
        return fits, tuple(p for p in points if p not in fits)

    def _too_many_replicas(self) -> Infeasibility:
        """The peak needs more replicas of every servable candidate than a plan sizes per bucket:
        named with the candidate of the most capacity, and the demand a plan of it can take."""
        top = _roomiest(self.oversized)
        peak = max(self.forecast.rates_per_s)
        need = _replicas_at(self.peak_need_per_s, top)
        room = MAX_REPLICAS_PER_BUCKET * top.requests_per_s / (1.0 + self.req.headroom)
        return Infeasibility(
            constraint="max_replicas_per_bucket",
            reason=(
                f"the peak bucket's {peak:.6g} req/s (with {self.req.headroom:.0%} headroom) needs {need:,} "
                f"replicas of {top.config.id} ({top.requests_per_s:.4g} req/s each within the SLOs), more "
                f"than the {MAX_REPLICAS_PER_BUCKET:,} replicas per bucket a plan sizes"
            ),
            relaxation=(
                f"plan the service in parts of at most {room:.4g} req/s at the peak, or relax the SLOs "
                f"that hold a replica to {top.requests_per_s:.4g} req/s"
            ),
        )

    def _no_candidate(self) -> Infeasibility:
        from planner.catalog.gpus import gpu_names

        if not [g for g in (self.req.candidates.gpus or gpu_names()) if self.req.inventory.get(g) != 0]:
            return Infeasibility(
                constraint="inventory",
                reason="every candidate GPU type has inventory 0",
                relaxation="raise an inventory cap above 0",
            )
        listed = {g for g, _ in self.ctx.profiles}
        others = [g for g in gpu_names() if g not in listed]
        other_points: list[CapacityPoint] = []
        if others:
            from planner.costmodel.profiles import BUILTIN_NAMES, resolve_profile

            spec = self.req.profile if self.req.profile in BUILTIN_NAMES else "auto"  # a file fits one GPU
            ctx2 = replace(self.ctx, profiles=tuple((g, resolve_profile(spec, g)) for g in sorted(others)))
            with CapacityPool(ctx2, 1) as pool2:
                other_points = pool2.evaluate(
                    explain.floor_probes(others, self.req.candidates.tensor_parallel_sizes, 16384)
                )
        return explain.no_candidate(
            self.ctx.model,
            self.ctx.ttft_p99_s,
            self.ctx.itl_p99_s,
            self.ctx.e2e_p99_s,
            self.found.points,
            other_points,
            self.found.unfit,
            self.req.candidates.disaggregation,
        )

    def _milp_infeasible(self, data: MilpData, result: MilpResult) -> Infeasibility:
        if result.status == "NO_SOLUTION":
            return Infeasibility(
                constraint="solver.time_limit_s",
                reason=f"the MILP found no plan within {self.req.solver.time_limit_s:g} s",
                relaxation="raise solver.time_limit_s",
            )
        for v in result.infeasibility:
            if v.unit == "units":
                gpu = next(
                    (r.name for r in data.resources if v.constraint.startswith(f"inventory_{r.name}_")), None
                )
                if gpu is not None:
                    return explain.inventory_answer(
                        gpu, math.ceil(v.needed), int(v.limit), None, v.constraint
                    )
        # No diagnosis from the solver: the cheapest single configuration without caps, per capped GPU.
        free = MilpData(
            buckets=data.buckets,
            resources=tuple(
                type(r)(r.name, r.on_demand_usd_per_hour, r.reserved_usd_per_hour, None)
                for r in data.resources
            ),
            candidates=data.candidates,
            headroom=data.headroom,
            single_config=True,
        )
        options = [o for o in single_configurations(free) if o.feasible]
        if options:
            best = min(options, key=lambda o: (o.cost_usd, o.members))
            for gpu, peak in self._gpus_of(free, best).items():
                cap = self.price_of[gpu].inventory
                if cap is not None and peak > cap:
                    return explain.inventory_answer(gpu, peak, cap, None, f"inventory_{gpu}")
        for v in result.infeasibility:
            return Infeasibility(
                constraint=v.constraint,
                reason=f"{v.note}: needs {v.needed:.4g}, at most {v.limit:.4g} ({v.unit})",
                relaxation="raise the inventory caps, add GPU types or allow mixing them (candidates.mixed_gpu_types)",
            )
        return Infeasibility(
            constraint="inventory",
            reason="the inventory caps cannot cover the peak demand",
            relaxation="raise the inventory caps, add GPU types or allow mixing them (candidates.mixed_gpu_types)",
        )

    def _gpus_of(self, data: MilpData, option: Costed) -> dict[str, int]:
        """Peak GPUs per type an option needs."""
        cands = {c.id: c for c in data.candidates}
        out: dict[str, list[int]] = {}
        for cid, reps in zip(option.members, option.replicas, strict=True):
            c = cands[cid]
            cur = out.setdefault(c.resource, [0] * len(reps))
            for b, n in enumerate(reps):
                cur[b] += n * c.units_per_replica
        return {g: max(v) for g, v in sorted(out.items())}

    def _infeasible(self, why: Infeasibility, result: MilpResult | None) -> PlanReport:
        return PlanReport(
            status="INFEASIBLE" if result is None or result.status == "INFEASIBLE" else "NO_SOLUTION",
            model=self.ctx.model,
            slo=self._targets(),
            workload=self._workload(),
            deployments=[],
            gpus=[],
            gpu_count_peak=0,
            usd_per_hour_peak=None,
            usd_per_month=None,
            usd_per_million_output_tokens=None,
            usd_per_million_input_tokens=None,
            predicted=None,
            simulated=None,
            disaggregated=False,
            disaggregation_reason="no plan",
            binding_constraints=[f"{why.constraint}: {why.reason}"],
            alternatives=[],
            warnings=self._profile_warnings(),
            notes=self._base_notes(),
            infeasibility=why,
            profiles=self._profiles(),
            buckets=[],
            search=self._search_stats(result),
            solver=SolverSummary(
                status="INFEASIBLE" if result is None else result.status,  # type: ignore[arg-type]
                objective_usd=None,
                gap=None,
                time_limit_s=self.req.solver.time_limit_s,
            ),
        )

    def _plan(self, data: MilpData, result: MilpResult, verify: bool) -> PlanReport:
        f = self.forecast
        n_b = len(f.rates_per_s)
        peak = f.peak
        demand = f.rates_per_s[peak]
        chosen = [self.by_id[cid] for cid in sorted(result.selected)]
        serving = _shares([(p, result.replicas[p.config.id][peak]) for p in chosen], demand)
        points = {s.point.config.id: (s, _point_at(self.ctx, s.point.config, s.requests_per_s_per_replica,
                                                   s.requests_per_s_per_replica / demand if demand > 0 else 1.0))
                  for s in serving if s.replicas > 0}  # fmt: skip
        deployments = []
        for p in chosen:
            cfg = p.config
            reps = list(result.replicas[cfg.id])
            s, at = points.get(cfg.id, (None, None))
            deployments.append(
                PlanDeployment(
                    id=cfg.id,
                    gpu=cfg.gpu,
                    tensor_parallel_size=cfg.tensor_parallel_size,
                    role=cfg.role,
                    replicas_peak=max(reps),
                    replicas_by_bucket=reps,
                    max_num_batched_tokens=cfg.max_num_batched_tokens,
                    max_num_seqs=cfg.max_num_seqs,
                    long_prefill_token_threshold=cfg.long_prefill_token_threshold,
                    gpu_memory_utilization=self.ctx.gpu_memory_utilization,
                    weight_dtype=self.ctx.weight_dtype,
                    kv_dtype=self.ctx.kv_dtype,
                    vllm_args=vllm_args(self.ctx, cfg),
                    vllm_command=shlex.join(["vllm", "serve", self.ctx.model, *vllm_args(self.ctx, cfg)]),
                    requests_per_s_per_replica=p.requests_per_s,
                    binding_limit=p.binding_limit,
                    usd_per_gpu_hour=self.price_of[cfg.gpu].usd_per_gpu_hour,
                    profile=self.ctx.profile(cfg.gpu).name,
                    at_peak=None if s is None else _at_peak(at, cfg.role, s.requests_per_s_per_replica),
                )
            )
        objective = result.objective_usd or 0.0
        hours = f.horizon_hours
        seconds = [r * d for r, d in zip(f.rates_per_s, f.durations_s, strict=True)]
        requests = math.fsum(seconds)
        out_tokens = requests * self.stats.mean_output_tokens
        in_tokens = requests * self.stats.mean_prompt_tokens
        gpu_use = []
        held = [0] * n_b
        for res in data.resources:
            od = list(result.on_demand[res.name])
            r = result.reserved[res.name]
            if r == 0 and not any(od):
                continue
            for b in range(n_b):
                held[b] += r + od[b]
            pr = self.price_of[res.name]
            gpu_use.append(
                GpuUse(
                    gpu=res.name,
                    reserved=r,
                    on_demand_by_bucket=od,
                    peak=max(r + v for v in od),
                    usd_per_gpu_hour=pr.usd_per_gpu_hour,
                    reserved_usd_per_gpu_hour=pr.reserved_usd_per_gpu_hour,
                    inventory=pr.inventory,
                )
            )
        buckets = [
            BucketCost(
                start_s=s0, duration_s=d, requests_per_s=r, gpus=held[b], usd_per_hour=result.usd_per_hour[b]
            )
            for b, (s0, d, r) in enumerate(zip(f.starts_s, f.durations_s, f.rates_per_s, strict=True))
        ]
        usd_per_month = objective / hours * HOURS_PER_MONTH if hours > 0 else None
        options = single_configurations(data)
        disaggregated = any(p.config.role != "colocated" for p in chosen)
        alternatives = self._alternatives(data, options, chosen, usd_per_month or 0.0, hours)
        predicted = self._predicted(serving, points, demand)
        simulated = self._verify(serving) if verify else None
        warnings = self._plan_warnings(result, data, serving, points, requests, f, out_tokens, objective)
        return PlanReport(
            status=result.status,  # type: ignore[arg-type]
            model=self.ctx.model,
            slo=self._targets(),
            workload=self._workload(),
            deployments=deployments,
            gpus=gpu_use,
            gpu_count_peak=max(held) if held else 0,
            usd_per_hour_peak=max(result.usd_per_hour) if result.usd_per_hour else None,
            usd_per_month=usd_per_month,
            usd_per_million_output_tokens=objective / out_tokens * 1e6 if out_tokens > 0 else None,
            usd_per_million_input_tokens=objective / in_tokens * 1e6 if in_tokens > 0 else None,
            predicted=predicted,
            simulated=simulated,
            disaggregated=disaggregated,
            disaggregation_reason=self._disaggregation_reason(
                options, data, disaggregated, usd_per_month or 0.0
            ),
            binding_constraints=self._binding(result, chosen),
            alternatives=alternatives,
            warnings=warnings,
            notes=self._base_notes(),
            infeasibility=None,
            profiles=self._profiles(),
            buckets=buckets,
            search=self._search_stats(result),
            solver=SolverSummary(
                status=result.status,  # type: ignore[arg-type]
                objective_usd=result.objective_usd,
                gap=result.gap,
                time_limit_s=self.req.solver.time_limit_s,
            ),
        )

    # -- predictions, verification --

    def _predicted(
        self, serving: Sequence[Serving], points: Mapping[str, tuple[Serving, Point | None]], demand: float
    ) -> Predicted | None:
        got = [(s.point.config.role, pt) for s, pt in points.values()]
        if not got or any(pt is None for _, pt in got):
            return None

        def worst(attr: str, roles: tuple[str, ...]) -> float | None:
            vals = [getattr(pt, attr) for role, pt in got if role in roles and getattr(pt, attr) is not None]
            return max(vals) if vals else None

        ttft99 = worst("ttft_p99_s", ("colocated", "prefill"))
        step = worst("mean_step_s", ("colocated", "decode"))
        e2e = e2e_estimate_s(self.ctx, ttft99, step) if ttft99 is not None and step is not None else None
        return Predicted(
            requests_per_s=demand,
            ttft_p50_ms=_ms(worst("ttft_p50_s", ("colocated", "prefill"))),
            ttft_p99_ms=_ms(ttft99),
            itl_p50_ms=_ms(worst("itl_p50_s", ("colocated", "decode"))),
            itl_p99_ms=_ms(worst("itl_p99_s", ("colocated", "decode"))),
            e2e_p99_ms=_ms(e2e),
        )

    def _verify(self, serving: Sequence[Serving]) -> Simulated:
        from planner.plan.verify import SEED, Group, verify

        groups: list[Group] = []
        col = [s for s in serving if s.point.config.role == "colocated" and s.replicas > 0]
        for s in col:
            groups.append(Group(((s.point, s.replicas),), s.requests_per_s_per_replica * s.replicas))
        pre = [s for s in serving if s.point.config.role == "prefill" and s.replicas > 0]
        dec = [s for s in serving if s.point.config.role == "decode" and s.replicas > 0]
        if pre and dec:
            # One simulated pair per prefill configuration, with the decode pool in proportion.
            p, d = pre[0], dec[0]
            rate = sum(s.requests_per_s_per_replica * s.replicas for s in pre)
            groups.append(
                Group(
                    ((p.point, sum(s.replicas for s in pre)), (d.point, sum(s.replicas for s in dec))), rate
                )
            )
        v = verify(self.ctx, self.workload, groups)
        t, i = self.ctx.ttft_p99_s, self.ctx.itl_p99_s
        met = (t is None or (v.ttft_p99_s is not None and v.ttft_p99_s <= t)) and (
            i is None or v.itl_p99_s is None or v.itl_p99_s <= i
        )
        return Simulated(
            requests=v.requests,
            seed=SEED,
            ttft_p99_ms=_ms(v.ttft_p99_s),
            itl_p99_ms=_ms(v.itl_p99_s),
            slo_met=met,
        )

    # -- reasons --

    def _binding(self, result: MilpResult, chosen: Sequence[CapacityPoint]) -> list[str]:
        out = []
        slo = {"ttft": "TTFT p99", "itl": "ITL p99", "e2e": "E2E p99"}
        for p in chosen:
            c = p.config
            what = slo.get(p.binding_limit, f"the {p.binding_limit} limit (stability)")
            out.append(
                f"{c.id}: {what} caps a replica at {p.requests_per_s:.4g} req/s"
                + ("" if p.binding_limit in slo else " (the SLOs are looser than what it can serve)")
            )
        n_b = len(self.forecast.rates_per_s)
        tight = [b for b in range(n_b) if self._slack(result, b) <= TIGHT_RTOL]
        if tight:
            shown = ", ".join(f"b{b}" for b in tight[:3]) + (", ..." if len(tight) > 3 else "")
            out.append(
                f"demand: the SLO capacity exactly meets demand x (1 + headroom) in {len(tight)} of {n_b} buckets ({shown})"
            )
        families: dict[str, list[str]] = {}
        for name in result.binding:
            # Coverage rows are judged above on the capacity itself; GPUs held = GPUs used, the
            # selection rows and the one-configuration equalities are structural.
            fam = name.rsplit("_b", 1)[0] if "_b" in name else name
            if fam.startswith("inventory_"):
                families.setdefault(fam, []).append(name)
        for fam, names in sorted(families.items()):
            shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
            gpu = fam[len("inventory_") :]
            out.append(
                f"{fam}: every {gpu} the inventory allows is in use in {len(names)} of {n_b} buckets ({shown})"
            )
        return out

    def _capacity_at(self, result: MilpResult, b: int, stable: bool = False) -> float:
        """Requests/s the plan's replicas serve in bucket `b` within the SLOs (`stable`: at all)."""
        cap = {"colocated": 0.0, "prefill": 0.0, "decode": 0.0}
        for cid, reps in result.replicas.items():
            p = self.by_id.get(cid)
            if p is not None:
                rate = p.max_stable_requests_per_s if stable else p.requests_per_s
                cap[p.config.role] += rate * reps[b]
        return cap["colocated"] + min(cap["prefill"], cap["decode"])

    def _slack(self, result: MilpResult, b: int) -> float:
        need = self.forecast.rates_per_s[b] * (1.0 + self.req.headroom)
        return math.inf if need <= 0 else self._capacity_at(result, b) / need - 1.0

    def _cheapest(self, options: Sequence[Costed], data: MilpData, keep: Any) -> Costed | None:
        ok = [o for o in options if o.feasible and keep(o)]
        return min(ok, key=lambda o: (o.cost_usd, o.members)) if ok else None

    def _disaggregation_reason(
        self, options: Sequence[Costed], data: MilpData, disaggregated: bool, usd_per_month: float
    ) -> str:
        mode = self.req.candidates.disaggregation
        if "prefill" not in self.roles:
            why = (
                "the request says never"
                if mode == "never"
                else "an E2E target is judged for colocated replicas only"
            )
            return f"colocated: {why}"
        if "colocated" not in self.roles:
            return "disaggregated: the request says always"
        hours = self.forecast.horizon_hours
        col = self._cheapest(options, data, lambda o: len(o.members) == 1)
        dis = self._cheapest(options, data, lambda o: len(o.members) == 2)

        def month(o: Costed) -> float:
            return o.cost_usd / hours * HOURS_PER_MONTH

        if disaggregated:
            if col is None:
                reasons = sorted(
                    {p.reason for p in self.found.points if p.config.role == "colocated" and p.reason}
                )
                return "disaggregated: no colocated configuration meets the SLOs" + (
                    f" ({reasons[0]})" if reasons else ""
                )
            best_col = self.by_id[col.members[0]]
            return (
                f"disaggregated: ${usd_per_month:,.0f}/month vs ${month(col):,.0f} for the best colocated plan "
                f"({best_col.config.id}, limited by {best_col.binding_limit}); separate prefill and decode pools keep "
                "prompt chunks out of the decode steps"
            )
        if dis is None:
            reasons = sorted(
                {p.reason for p in self.found.points if p.config.role != "colocated" and p.reason}
            )
            return "colocated: no disaggregated configuration meets the SLOs" + (
                f" ({reasons[0]})" if reasons else ""
            )
        return (
            f"colocated: ${usd_per_month:,.0f}/month vs ${month(dis):,.0f} for the best prefill/decode pools "
            f"({' + '.join(dis.members)}); disaggregation isolates ITL from prompt chunks but does not raise "
            "throughput, and each pool is sized on its own"
        )

    def _alternative(
        self, kind: str, label: str, o: Costed | None, base_month: float, reason: str
    ) -> Alternative:
        if o is None:
            return Alternative(
                kind=kind, label=label, feasible=False, usd_per_month=None, usd_per_hour_peak=None,  # type: ignore[arg-type]
                delta_usd_per_month=None, delta_fraction=None, gpu_count_peak=None, deployments=[], reason=reason,
            )  # fmt: skip
        hours = self.forecast.horizon_hours
        month = o.cost_usd / hours * HOURS_PER_MONTH
        deps = []
        for cid, reps in zip(o.members, o.replicas, strict=True):
            p = self.by_id.get(cid) or self._extra[cid]
            deps.append(
                AlternativeDeployment(
                    gpu=p.config.gpu,
                    tensor_parallel_size=p.config.tensor_parallel_size,
                    role=p.config.role,
                    replicas_peak=max(reps),
                    max_num_batched_tokens=p.config.max_num_batched_tokens,
                    max_num_seqs=p.config.max_num_seqs,
                )
            )
        return Alternative(
            kind=kind,  # type: ignore[arg-type]
            label=label,
            feasible=True,
            usd_per_month=month,
            usd_per_hour_peak=max(o.usd_per_hour),
            delta_usd_per_month=month - base_month,
            delta_fraction=(month - base_month) / base_month if base_month > 0 else None,
            gpu_count_peak=max(o.gpus),
            deployments=deps,
            reason=reason,
        )

    def _alternatives(
        self,
        data: MilpData,
        options: Sequence[Costed],
        chosen: Sequence[CapacityPoint],
        base_month: float,
        hours: float,
    ) -> list[Alternative]:
        self._extra = {}
        out: list[Alternative] = []
        plan_gpus = sorted({p.config.gpu for p in chosen})
        cand_gpu = {c.id: c.resource for c in data.candidates}
        # another GPU type
        for g, _ in self.ctx.profiles:
            if g in plan_gpus:
                continue
            best = self._cheapest(options, data, lambda o, g=g: all(cand_gpu[m] == g for m in o.members))
            reason = "" if best is not None else self._why_not(g)
            out.append(self._alternative("gpu", f"{g} only", best, base_month, reason))
        # the other disaggregation mode
        if "colocated" in self.roles and "prefill" in self.roles:
            plan_dis = any(p.config.role != "colocated" for p in chosen)
            want = 1 if plan_dis else 2
            best = self._cheapest(options, data, lambda o: len(o.members) == want)
            label = "colocated" if plan_dis else "disaggregated prefill/decode"
            reason = "" if best is not None else f"no {label} configuration meets the SLOs"
            out.append(self._alternative("disaggregation", label, best, base_month, reason))
        # vLLM's defaults on the plan's GPU types
        out.append(self._defaults(plan_gpus, base_month))
        feasible = sorted(
            (a for a in out if a.feasible),
            key=lambda a: (a.kind != "vllm_defaults", a.usd_per_month or 0.0, a.label),
        )
        return feasible + sorted((a for a in out if not a.feasible), key=lambda a: (a.kind, a.label))

    def _why_not(self, gpu: str) -> str:
        pts = [p for p in self.found.points if p.config.gpu == gpu]
        if pts and not any(p.fits for p in pts):
            return f"{self.ctx.model} does not fit: {pts[0].reason}"
        reasons = sorted({p.reason for p in pts if p.reason})
        return (
            f"no configuration meets the SLOs: {reasons[0]}" if reasons else "no configuration meets the SLOs"
        )

    def _defaults(self, gpus: Sequence[str], base_month: float) -> Alternative:
        from planner.catalog.gpus import get_gpu

        cfgs = default_configs(gpus, self.req.candidates.tensor_parallel_sizes)
        pts = self.pool.split([p for p in self.pool.evaluate(cfgs) if p.feasible], self.split)
        label = (
            "vLLM defaults ("
            + ", ".join(
                f"{g}: budget {get_gpu(g).vllm_default_max_num_batched_tokens}, {get_gpu(g).vllm_default_max_num_seqs} seqs"
                for g in gpus
            )
            + ", colocated)"
        )
        if not pts:
            reasons = sorted({p.reason for p in self.pool.evaluate(cfgs) if p.reason})
            return self._alternative("vllm_defaults", label, None, base_month,
                                     "no TP meets the SLOs with vLLM's default flags" + (f": {reasons[0]}" if reasons else ""))  # fmt: skip
        sized, oversized = self._sizable(pts)
        if not sized:
            top = _roomiest(oversized)
            return self._alternative("vllm_defaults", label, None, base_month,
                                     f"vLLM's defaults need {_replicas_at(self.peak_need_per_s, top):,} replicas at the "
                                     f"peak, more than the {MAX_REPLICAS_PER_BUCKET:,} a plan sizes")  # fmt: skip
        self._extra = {**self._extra, **{p.config.id: p for p in sized}}
        data = milp_data(
            sized, self.forecast, self.prices, self.req.headroom, True, self.req.solver.time_limit_s, None
        )
        best = self._cheapest(single_configurations(data), data, lambda o: True)
        reason = "" if best is not None else "vLLM's defaults exceed the inventory caps"
        return self._alternative("vllm_defaults", label, best, base_month, reason)

    # -- warnings --

    def _plan_warnings(
        self,
        result: MilpResult,
        data: MilpData,
        serving: Sequence[Serving],
        points: Mapping[str, tuple[Serving, Point | None]],
        requests: float,
        f: Forecast,
        out_tokens: float,
        objective: float,
    ) -> list[str]:
        out = []
        if result.status == "FEASIBLE":
            gap = "unknown" if result.gap is None else f"{result.gap:.2%}"
            limit = f"{self.req.solver.time_limit_s:g} s"
            if result.stats.method == "bucketwise":  # not necessarily cut by the clock (docs/plan.md)
                why = f"sized the buckets one at a time (mixed GPU types, many buckets, time limit {limit})"
            else:
                why = f"stopped at its time limit ({limit})"
            out.append(f"the MILP {why} with a gap of {gap}: a cheaper plan may exist")
        # Utilization: demand over what the GPUs held could serve at all (their max stable rate,
        # latency aside), over the horizon: the seed article's idle-cost measure.
        most = math.fsum(
            self._capacity_at(result, b, stable=True) * f.durations_s[b] for b in range(len(f.rates_per_s))
        )
        util = requests / most if most > 0 else 0.0
        if util < LOW_UTILIZATION and out_tokens > 0:
            full = objective * util / out_tokens * 1e6
            out.append(
                f"utilization is {util:.1%}: the GPUs could serve {1 / util:,.0f}x this traffic, so idle time sets "
                f"the price (${objective / out_tokens * 1e6:,.2f} per 1M output tokens, ${full:,.2f} if fully used); "
                "a smaller GPU, sharing GPUs between services, or a pay-per-token API may be cheaper at this volume"
            )
        cv2 = self.stats.arrival_cv2
        demand = f.rates_per_s[f.peak]
        # the arrival CV² each deployment's replicas see at the peak (their share of the stream;
        # a deployment the MILP leaves idle at the peak, say one GPU type's pool sized for other
        # buckets, sees none)
        seen = {
            id(s): per_replica_arrival_cv2(cv2, min(1.0, s.requests_per_s_per_replica / demand))
            if demand > 0
            else cv2
            for s in serving
            if s.requests_per_s_per_replica > 0 or demand <= 0
        }
        split = [
            f"{s.point.config.id}: {s.replicas} replicas, CV² {seen[id(s)]:.3g} each"
            for s in serving
            if s.replicas > 1 and demand > 0 and id(s) in seen
        ]
        if cv2 > 1 and split:
            out.append(
                f"bursty arrivals (k={1 / cv2:.3g}, CV² {cv2:.3g}): the plan assumes the router spreads each burst "
                f"at random over the replicas (at the peak {'; '.join(split)}); a round-robin router spreads "
                "them more evenly, but one that keeps a client's requests on one replica (session affinity) "
                "does not, and then the replicas see the whole stream's bursts"
            )
        worst = max(seen.values(), default=0.0)
        if worst >= BURSTY_CV2_WARN:
            out.append(
                f"arrivals this bursty (CV² up to {worst:.3g} per replica at the peak) are where the latency model is "
                "least right: against the simulator it reads TTFT p99 from ~55% low to ~40% high and ITL p99 "
                "up to ~30% low at CV² 4-20 (docs/accuracy.md); check this plan with --verify"
            )
        for s, pt in points.values():
            if pt is None:
                out.append(f"{s.point.config.id}: the latency model found no steady state at the peak rate")
            elif pt.preemption_risk > PREEMPTION_WARN:
                out.append(
                    f"{s.point.config.id}: KV cache {pt.kv_cache_usage:.0%} used at the peak; it overflows "
                    f"{pt.preemption_risk:.1%} of the time (preemptions: watch vllm:num_preemptions)"
                )
        return out + self._profile_warnings(sorted({s.point.config.gpu for s in serving}))
