"""`plan(request)`: the cheapest deployment that meets the SLOs for a traffic forecast.

    candidates (planner/plan/search.py: GPU x TP x budget x max_num_seqs x role, capacity
    within the SLOs by root-finding, once per configuration)
      -> sizing (solvers.milp: replicas per bucket, reserved + on-demand GPUs, inventory caps)
      -> the plan: deployments with their exact vLLM flags, cost, predicted p99s at the peak,
         the reasons (binding limits, disaggregation), alternatives, warnings
      -> optionally `verify`: each part at its hardest bucket in the discrete-event simulator.

Same request, same report, byte for byte: candidates are sorted, capacities do not depend on
the worker count, and CBC runs single-threaded.
"""

from __future__ import annotations

import math
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from planner.costmodel.speculative import with_measured_acceptance
from planner.errors import InvalidInput, TooLarge
from planner.latency import WorkloadStats
from planner.plan import defaults
from planner.plan.alternatives import Alternatives
from planner.plan.capacity import CapacityPoint, ReplicaConfig, SearchContext
from planner.plan.capacity_pool import CapacityPool, default_workers
from planner.plan.ep_variants import by_expert_parallel, expert_parallel_summary
from planner.plan.flags import default_configs, incompatible_pairs, plan_max_model_len, vllm_args
from planner.plan.infeasible import infeasible_report, milp_infeasible, no_candidate, too_many_replicas
from planner.plan.peak import at_peak, points_at, predicted, shares
from planner.plan.planning import Planning
from planner.plan.recheck import exact_answer
from planner.plan.relax import relaxed_report
from planner.plan.search import SearchResult, shapes_of, unfit_shapes
from planner.plan.solve import HOURS_PER_MONTH, Forecast, milp_data, single_configurations
from planner.plan.speculative_k import by_speculative_tokens
from planner.plan.split import Split
from planner.plan.warn import plan_warnings
from planner.schema.inputs import TraceWorkload
from planner.schema.kinds import Role
from planner.schema.plan_report import (
    BucketCost,
    GpuUse,
    LoraMemory,
    PlanDeployment,
    PlanReport,
    Simulated,
    SolverSummary,
    SpeculativeSummary,
)
from planner.schema.plan_request import MAX_BUCKETS, PlanRequest, check_buckets, parse_plan_request
from planner.workload import Workload
from solvers.milp import MilpData, MilpResult, solve
from solvers.milp_data import SizeLimitError

__all__ = ["default_configs", "plan", "vllm_args"]

TIGHT_RTOL = 1e-6  # a bucket whose capacity meets demand within this is reported as binding


# --- the request's pieces ------------------------------------------------------------------------


def _model_ref(name: str, base: Path | None) -> str:
    from planner.catalog.models import get_model, model_names
    from planner.schema.inputs import local_path

    if name.lower() not in {n.lower() for n in model_names()}:
        name = local_path(name, base)
    get_model(name, "model")  # a bad name or config.json is the request's fault: say so now
    return name


def _forecast(workload: Workload, req: PlanRequest) -> Forecast:
    a = workload.arrivals
    if a.buckets is None:
        assert a.requests_per_s is not None
        return Forecast((a.requests_per_s,), (3600.0,))
    if len(a.buckets) > MAX_BUCKETS:  # a trace's buckets (written ones are refused at validation)
        span_s = math.fsum(b.duration_s for b in a.buckets)
        field, fix = "workload.arrivals.buckets", "merge buckets"
        if isinstance(req.workload, TraceWorkload):
            field, fix = "workload.bucket_s", f"give bucket_s >= {span_s / MAX_BUCKETS:.4g} s"
        check_buckets(len(a.buckets), span_s, field, fix)
    return Forecast(tuple(b.requests_per_s for b in a.buckets), tuple(b.duration_s for b in a.buckets))


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
    req: PlanRequest,
    model: str,
    stats: WorkloadStats,
    gpus: Sequence[str],
    base: Path | None,
    max_model_len: int,
) -> SearchContext:
    from planner.costmodel.profiles import BUILTIN_NAMES, resolve_profile
    from planner.schema.inputs import local_path

    spec = req.profile if req.profile in BUILTIN_NAMES else local_path(req.profile, base)
    endpoint = req.workload.endpoint  # its front end per request (Profile.for_endpoint)
    profiles = tuple((g, resolve_profile(spec, g, "profile", endpoint)) for g in sorted(gpus))
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
        max_model_len=max_model_len,
        lora=req.lora,
        weight_group_size=c.weight_group_size,
        expert_parallel_skew=c.routing_skew if c.expert_parallel else None,
        speculative=req.speculative_decoding,  # its k fixed by _by_speculative_tokens
        checkpoint=c.weight_checkpoints.get(c.weight_dtype),
    )


# --- the plan ------------------------------------------------------------------------------------


def plan(
    request: PlanRequest | Mapping[str, Any],
    *,
    base_dir: str | Path | None = None,
    verify: bool = False,
    workers: int | None = None,
) -> PlanReport:
    """The cheapest plan for `request` (docs/plan.md). `verify`: simulate each part at its hardest bucket.
    `workers`: processes answering capacity questions (default 2; 1 = in this process, e.g.
    inside a threaded server). Bad input raises InvalidInput; an SLO no configuration meets is
    an answer (status INFEASIBLE with the reason and the nearest relaxation, re-planned:
    planner/plan/relax.py)."""
    base = None if base_dir is None else Path(base_dir)
    req = parse_plan_request(request)
    if req.speculative_decoding is not None:  # acceptance_from: a vllm bench result
        sd = with_measured_acceptance(req.speculative_decoding, base, "speculative_decoding")
        req = req.model_copy(update={"speculative_decoding": sd})
    try:
        return _by_weight_format(
            req,
            lambda r: by_expert_parallel(
                r, lambda r1: by_speculative_tokens(r1, lambda one: _plan(one, base, verify, workers, relax=True))
            ),
        )
    except SizeLimitError as exc:
        raise TooLarge(
            f"the sizing problem is larger than the solver takes ({exc}); list fewer candidates "
            "or give coarser buckets (workload.bucket_s)"
        ) from None


def served_model(pl: Planning) -> str:
    """What `vllm serve` loads: the format's pre-quantized checkpoint where the request names one."""
    return pl.req.candidates.weight_checkpoints.get(pl.ctx.weight_dtype, pl.ctx.model)


_SOLVED = ("OPTIMAL", "FEASIBLE")


def _by_weight_format(req: PlanRequest, plan_one: Callable[[PlanRequest], PlanReport]) -> PlanReport:
    """`candidates.weight_dtypes`: one plan per format (at most the six formats), the cheapest
    solved one kept (ties: the first listed); the others' monthly cost goes in a note. A plan in
    a quantized format carries its warnings (quality is the user's call; roofline GEMM rates)."""
    from planner.catalog.quantization import quantized_warnings

    c = req.candidates
    formats = c.weight_dtypes or (c.weight_dtype,)
    reports: list[tuple[str, PlanReport]] = []
    for each in dict.fromkeys(formats):  # listed order, each once
        one = req.model_copy(
            update={"candidates": c.model_copy(update={"weight_dtype": each, "weight_dtypes": None})}
        )
        reports.append((each, plan_one(one)))
    solved = [(f, r) for f, r in reports if r.status in _SOLVED and r.usd_per_month is not None]
    fmt, best = min(solved, key=lambda fr: fr[1].usd_per_month or 0.0) if solved else reports[0]
    notes = list(best.notes)
    if len(reports) > 1:
        costs = [
            f"{f} ${r.usd_per_month:,.0f}/month"
            if r.status in _SOLVED and r.usd_per_month is not None
            else f"{f} {r.status}"
            for f, r in reports
        ]
        notes.append(f"candidates.weight_dtypes: {fmt} chosen; " + ", ".join(costs))
    warnings = [*best.warnings, *quantized_warnings(fmt, [g.gpu for g in best.gpus])]
    if fmt not in ("bf16", "fp8") and fmt not in c.weight_checkpoints:
        warnings.append(
            f"vllm serve needs a pre-quantized {fmt} checkpoint of {best.model}: name it in "
            f"candidates.weight_checkpoints ({fmt}: <Hugging Face id>); the commands serve {best.model}"
        )
    if notes == best.notes and warnings == best.warnings:
        return best
    return best.model_copy(update={"notes": notes, "warnings": warnings})


def _plan(req: PlanRequest, base: Path | None, verify: bool, workers: int | None, relax: bool) -> PlanReport:
    from planner.catalog.models import get_model
    from planner.schema.inputs import build_workload

    deadline = time.perf_counter() + req.solver.time_limit_s  # the whole plan's (solver.time_limit_s)
    workload = build_workload(req.workload, "workload", base)
    model = _model_ref(req.model, base)
    spec = get_model(model, "model")
    stats = WorkloadStats.of(workload)
    notes: list[str] = []
    roles = _roles(req, notes)
    listed, why = defaults.candidate_gpus(req, base)
    notes += [*why, defaults.price_note(req, listed)]
    gpus = [g for g in listed if req.inventory.get(g) != 0]
    if len(gpus) < len(listed):
        notes.append("inventory 0 excludes " + ", ".join(g for g in listed if g not in gpus))
    ctx = _context(req, model, stats, listed, base, plan_max_model_len(req.max_model_len, workload, spec))
    forecast = _forecast(workload, req)
    prices = defaults.prices(req, listed)
    with CapacityPool(ctx, default_workers() if workers is None else workers) as pool:
        unfit = unfit_shapes(
            model, req.candidates, gpus, ctx.profile, ctx.max_model_len, req.lora, req.speculative_decoding
        )
        also = default_configs(gpus, req.candidates.tensor_parallel_sizes, unfit)  # for the alternatives
        shapes = shapes_of(req.candidates, gpus, roles, unfit)
        split = Split.of(forecast.rates_per_s, req.headroom)
        found = pool.search(shapes, also, split) if shapes else SearchResult((), (), ())
        found = replace(found, unfit=tuple(sorted({*found.unfit, *unfit})))
        pl = Planning(req, ctx, workload, stats, forecast, prices, roles, notes, pool, found, split, deadline)
        report = _build(pl, verify)
    if relax and report.status == "INFEASIBLE":
        report = relaxed_report(pl, report, lambda r: _plan(r, base, False, workers, relax=False))
    return report


def _kv_heads(pl: Planning) -> int:
    from planner.catalog.models import get_model

    return get_model(pl.ctx.model).kv_heads


def _servable(pl: Planning) -> bool:
    """Some colocated candidate, or a prefill and a decode candidate (of one GPU type unless
    mixing is allowed)."""
    best = pl.found.best
    if any(p.config.role == "colocated" for p in best):
        return True
    pre = {p.config.gpu for p in best if p.config.role == "prefill"}
    dec = {p.config.gpu for p in best if p.config.role == "decode"}
    return bool(pre and dec) if pl.req.candidates.mixed_gpu_types else bool(pre & dec)


def _milp_data(pl: Planning, points: Sequence[CapacityPoint]) -> MilpData:
    """The sizing problem over `points` (a bursty stream's candidates with their capacity per
    bucket, planner/plan/split.py)."""
    return milp_data(
        points,
        pl.forecast,
        pl.prices,
        pl.req.headroom,
        not pl.req.candidates.mixed_gpu_types,
        pl.solver_seconds(),
        pl.req.solver.relative_gap,
        incompatible_pairs=incompatible_pairs(points, _kv_heads(pl)),
        **defaults.availability(pl.req),
    )


def _build(pl: Planning, verify: bool) -> PlanReport:
    if not _servable(pl):
        return infeasible_report(pl, too_many_replicas(pl) if pl.oversized else no_candidate(pl), None)
    data = _milp_data(pl, pl.found.best)
    result = solve(data)
    if result.status in ("INFEASIBLE", "NO_SOLUTION"):
        return infeasible_report(pl, milp_infeasible(pl, data, result), result)
    # Near-ties the root-finds' precision left open, settled at the answer (planner/plan/recheck.py).
    exact = exact_answer(pl, data, result, lambda points: _milp_data(pl, points), solve)
    return _Answer(exact.planning, exact.data, exact.result).report(verify)


class _Answer:
    """The report of a MILP answer: deployments with their flags, the bill, the peak's
    predictions, alternatives, reasons and warnings."""

    def __init__(self, pl: Planning, data: MilpData, result: MilpResult) -> None:
        self.pl, self.data, self.result = pl, data, result
        f = pl.forecast
        self.demand = f.rates_per_s[f.peak]
        self.chosen = [pl.by_id[cid] for cid in sorted(result.selected)]
        self.serving = shares([(p, result.replicas[p.config.id][f.peak]) for p in self.chosen], self.demand)
        self.points = points_at(pl.ctx, self.serving, self.demand)

    def _deployment(self, p: CapacityPoint) -> PlanDeployment:
        pl, cfg = self.pl, p.config
        reps = list(self.result.replicas[cfg.id])
        s, at = self.points.get(cfg.id, (None, None))
        args = vllm_args(pl.ctx, cfg)
        return PlanDeployment(
            id=cfg.id,
            gpu=cfg.gpu,
            tensor_parallel_size=cfg.tensor_parallel_size,
            role=cfg.role,
            replicas_peak=max(reps),
            replicas_by_bucket=reps,
            max_num_batched_tokens=cfg.max_num_batched_tokens,
            max_num_seqs=cfg.max_num_seqs,
            long_prefill_token_threshold=cfg.long_prefill_token_threshold,
            gpu_memory_utilization=pl.ctx.gpu_memory_utilization,
            weight_dtype=pl.ctx.weight_dtype,
            kv_dtype=pl.ctx.kv_dtype,
            vllm_args=args,
            vllm_command=shlex.join(["vllm", "serve", served_model(pl), *args]),
            requests_per_s_per_replica=p.requests_per_s,
            binding_limit=p.binding_limit,
            usd_per_gpu_hour=pl.price_of[cfg.gpu].usd_per_gpu_hour,
            profile=pl.ctx.profile(cfg.gpu).name,
            at_peak=None if s is None else at_peak(at, cfg.role, s.requests_per_s_per_replica),
            lora=_lora_memory(pl.ctx, cfg),
            pipeline_parallel_size=cfg.pipeline_parallel_size if cfg.pipeline_parallel_size > 1 else None,
            expert_parallel=expert_parallel_summary(pl.ctx, cfg),
            speculative_decoding=_speculative_summary(pl.ctx, cfg),
        )

    def _gpus(self) -> tuple[list[GpuUse], list[int]]:
        """GPUs per type (reserved, on demand per bucket) and GPUs held per bucket."""
        pl, result = self.pl, self.result
        held = [0] * len(pl.forecast.rates_per_s)
        out = []
        for res in self.data.resources:
            od = list(result.on_demand[res.name])
            r = result.reserved[res.name]
            if r == 0 and not any(od):
                continue
            for b, n in enumerate(od):
                held[b] += r + n
            pr = pl.price_of[res.name]
            out.append(
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
        return out, held

    def report(self, verify: bool) -> PlanReport:
        pl, result, f = self.pl, self.result, self.pl.forecast
        objective = result.objective_usd or 0.0
        hours = f.horizon_hours
        requests = math.fsum(r * d for r, d in zip(f.rates_per_s, f.durations_s, strict=True))
        out_tokens = requests * pl.stats.mean_output_tokens
        in_tokens = requests * pl.stats.mean_prompt_tokens
        deployments = [self._deployment(p) for p in self.chosen]
        gpu_use, held = self._gpus()
        buckets = [
            BucketCost(
                start_s=s0, duration_s=d, requests_per_s=r, gpus=held[b], usd_per_hour=result.usd_per_hour[b]
            )
            for b, (s0, d, r) in enumerate(zip(f.starts_s, f.durations_s, f.rates_per_s, strict=True))
        ]
        usd_per_month = objective / hours * HOURS_PER_MONTH if hours > 0 else None
        disaggregated = any(p.config.role != "colocated" for p in self.chosen)
        alts = Alternatives(pl, single_configurations(self.data), usd_per_month or 0.0)
        alternatives = alts.all({c.id: c.resource for c in self.data.candidates}, self.chosen)
        return PlanReport(
            status=result.status,  # type: ignore[arg-type]
            model=pl.ctx.model,
            served_model=pl.req.candidates.weight_checkpoints.get(pl.ctx.weight_dtype),
            slo=pl.targets(),
            workload=pl.workload_summary(),
            deployments=deployments,
            gpus=gpu_use,
            gpu_count_peak=max(held) if held else 0,
            usd_per_hour_peak=max(result.usd_per_hour) if result.usd_per_hour else None,
            usd_per_month=usd_per_month,
            usd_per_million_output_tokens=objective / out_tokens * 1e6 if out_tokens > 0 else None,
            usd_per_million_input_tokens=objective / in_tokens * 1e6 if in_tokens > 0 else None,
            predicted=predicted(pl.ctx, self.points, self.demand),
            simulated=self._verify() if verify else None,
            disaggregated=disaggregated,
            disaggregation_reason=alts.disaggregation_reason(disaggregated, usd_per_month or 0.0),
            binding_constraints=self._binding(),
            alternatives=alternatives,
            warnings=plan_warnings(pl, result, self.serving, self.points, requests, out_tokens, objective),
            notes=pl.base_notes(),
            infeasibility=None,
            profiles=pl.profiles_used(),
            buckets=buckets,
            search=pl.search_stats(result),
            solver=SolverSummary(
                status=result.status,  # type: ignore[arg-type]
                objective_usd=result.objective_usd,
                gap=result.gap,
                time_limit_s=pl.req.solver.time_limit_s,
            ),
        )

    def _verify(self) -> Simulated:
        """Each part of the plan in the simulator at its hardest bucket (planner/plan/verify.py)."""
        from planner.plan.verify import verify

        pl = self.pl
        return verify(pl.ctx, pl.workload, self.chosen, self.result.replicas, pl.forecast.rates_per_s)

    def _binding(self) -> list[str]:
        pl, result = self.pl, self.result
        out = []
        slo = {"ttft": "TTFT p99", "itl": "ITL p99", "e2e": "E2E p99"}
        for p in self.chosen:
            what = slo.get(p.binding_limit, f"the {p.binding_limit} limit (stability)")
            out.append(
                f"{p.config.id}: {what} caps a replica at {p.requests_per_s:.4g} req/s"
                + ("" if p.binding_limit in slo else " (the SLOs are looser than what it can serve)")
            )
        n_b = len(pl.forecast.rates_per_s)
        tight = [b for b in range(n_b) if pl.slack(result, b) <= TIGHT_RTOL]
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
        return out + defaults.availability_binding(pl, result)


def _lora_memory(ctx: SearchContext, cfg: ReplicaConfig) -> LoraMemory | None:
    """The deployment's LoRA buffers and the KV cache left beside them (None without LoRA)."""
    m = None if ctx.lora is None else ctx.resolve(cfg).lora_memory()
    return None if m is None else LoraMemory(**m)


def _speculative_summary(ctx: SearchContext, cfg: ReplicaConfig) -> SpeculativeSummary | None:
    """The deployment's speculative decoding: k, alpha, E, the proposer's memory and the KV left
    (None without it)."""
    m = None if ctx.speculative is None else ctx.resolve(cfg).speculative_summary()
    return None if m is None else SpeculativeSummary(**m)
