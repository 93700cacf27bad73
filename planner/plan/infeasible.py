"""Answers without a plan: what fails and the nearest change that makes a plan exist."""

from __future__ import annotations

import math
from dataclasses import replace

from planner.plan import defaults, explain
from planner.plan.capacity import CapacityPoint
from planner.plan.capacity_pool import CapacityPool
from planner.plan.planning import Planning, replicas_at, roomiest
from planner.plan.solve import Costed, single_configurations
from planner.schema.plan_report import Infeasibility, PlanReport, SolverSummary
from solvers.milp import MilpData, MilpResult
from solvers.milp_data import MAX_REPLICAS_PER_BUCKET


def too_many_replicas(pl: Planning) -> Infeasibility:
    """The peak needs more replicas of every servable candidate than a plan sizes per bucket:
    named with the candidate of the most capacity, and the demand a plan of it can take."""
    top = roomiest(pl.oversized)
    peak = max(pl.forecast.rates_per_s)
    need = replicas_at(pl.peak_need_per_s, top)
    room = MAX_REPLICAS_PER_BUCKET * top.requests_per_s / (1.0 + pl.req.headroom)
    return Infeasibility(
        constraint="max_replicas_per_bucket",
        reason=(
            f"the peak bucket's {peak:.6g} req/s (with {pl.req.headroom:.0%} headroom) needs {need:,} "
            f"replicas of {top.config.id} ({top.requests_per_s:.4g} req/s each within the SLOs), more "
            f"than the {MAX_REPLICAS_PER_BUCKET:,} replicas per bucket a plan sizes"
        ),
        relaxation=(
            f"plan the service in parts of at most {room:.4g} req/s at the peak, or relax the SLOs "
            f"that hold a replica to {top.requests_per_s:.4g} req/s"
        ),
    )


def no_candidate(pl: Planning) -> Infeasibility:
    """No configuration meets the SLOs: the floors, and other catalog GPUs that reach them."""
    listed = [g for g, _ in pl.ctx.profiles]
    if not [g for g in listed if pl.req.inventory.get(g) != 0]:
        return Infeasibility(
            constraint="inventory",
            reason="every candidate GPU type has inventory 0",
            relaxation="raise an inventory cap above 0",
        )
    return explain.no_candidate(
        pl.ctx.model,
        pl.ctx.ttft_p99_s,
        pl.ctx.itl_p99_s,
        pl.ctx.e2e_p99_s,
        pl.found.points,
        other_points(pl),
        pl.found.unfit,
        pl.req.candidates.disaggregation,
    )


def other_points(pl: Planning) -> list[CapacityPoint]:
    """The floors of the catalog GPUs the request could add as it stands (defaults.other_gpus):
    each at every TP in the candidates, so a GPU's floor is its best TP's (from the capacity
    memo when asked again)."""
    others = defaults.other_gpus(pl.req, [g for g, _ in pl.ctx.profiles])
    if not others:
        return []
    from planner.costmodel.profiles import resolve_profile

    endpoint = pl.req.workload.endpoint
    profiles = tuple((g, resolve_profile(pl.req.profile, g, "profile", endpoint)) for g in sorted(others))
    ctx2 = replace(pl.ctx, profiles=profiles)
    with CapacityPool(ctx2, 1) as pool2:
        return pool2.evaluate(explain.floor_probes(others, pl.req.candidates.tensor_parallel_sizes, 16384))


MIXING = "raise the inventory caps, add GPU types or allow mixing them (candidates.mixed_gpu_types)"


def milp_infeasible(pl: Planning, data: MilpData, result: MilpResult) -> Infeasibility:
    """The MILP found no plan: the time limit, or the inventory cap that cannot hold."""
    if result.status == "NO_SOLUTION":
        return Infeasibility(
            constraint="solver.time_limit_s",
            reason=f"the MILP found no plan within {pl.req.solver.time_limit_s:g} s",
            relaxation="raise solver.time_limit_s",
        )
    for v in result.infeasibility:
        if v.unit == "units":
            gpu = next(
                (r.name for r in data.resources if v.constraint.startswith(f"inventory_{r.name}_")), None
            )
            if gpu is not None:
                return explain.inventory_answer(gpu, math.ceil(v.needed), int(v.limit), None, v.constraint)
    # No diagnosis from the solver: the cheapest single configuration without caps, per capped GPU.
    free = replace(
        data,
        resources=tuple(
            type(r)(r.name, r.on_demand_usd_per_hour, r.reserved_usd_per_hour, None) for r in data.resources
        ),
        single_config=True,
    )  # the same buckets, candidates, headroom and availability rule
    options = [o for o in single_configurations(free) if o.feasible]
    if options:
        best = min(options, key=lambda o: (o.cost_usd, o.members))
        for gpu, peak in gpus_of(free, best).items():
            cap = pl.price_of[gpu].inventory
            if cap is not None and peak > cap:
                return explain.inventory_answer(gpu, peak, cap, None, f"inventory_{gpu}")
    for v in result.infeasibility:
        return Infeasibility(
            constraint=v.constraint,
            reason=f"{v.note}: needs {v.needed:.4g}, at most {v.limit:.4g} ({v.unit})",
            relaxation=MIXING,
        )
    return Infeasibility(
        constraint="inventory", reason="the inventory caps cannot cover the peak demand", relaxation=MIXING
    )


def gpus_of(data: MilpData, option: Costed) -> dict[str, int]:
    """Peak GPUs per type an option needs."""
    cands = {c.id: c for c in data.candidates}
    out: dict[str, list[int]] = {}
    for cid, reps in zip(option.members, option.replicas, strict=True):
        c = cands[cid]
        cur = out.setdefault(c.resource, [0] * len(reps))
        for b, n in enumerate(reps):
            cur[b] += n * c.units_per_replica
    return {g: max(v) for g, v in sorted(out.items())}


def infeasible_report(pl: Planning, why: Infeasibility, result: MilpResult | None) -> PlanReport:
    return PlanReport(
        status="INFEASIBLE" if result is None or result.status == "INFEASIBLE" else "NO_SOLUTION",
        model=pl.ctx.model,
        slo=pl.targets(),
        workload=pl.workload_summary(),
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
        warnings=pl.profile_warnings(),
        notes=pl.base_notes(),
        infeasibility=why,
        profiles=pl.profiles_used(),
        buckets=[],
        search=pl.search_stats(result),
        solver=SolverSummary(
            status="INFEASIBLE" if result is None else result.status,  # type: ignore[arg-type]
            objective_usd=None,
            gap=None,
            time_limit_s=pl.req.solver.time_limit_s,
        ),
    )
