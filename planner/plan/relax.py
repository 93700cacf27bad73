"""A relaxation is re-planned before it is suggested (docs/plan.md, "Infeasible answers").

An INFEASIBLE answer names the constraint that fails and a change to the request that makes a
plan exist. The change is tried first: the request with it is planned again (at most
MAX_REPLANS plans per answer, without relaxations of their own; a change to inventory or to the
candidates finds the capacities it shares with this plan in the capacity memo) and the answer
quotes the plan it gives: its bill, its GPUs at the peak and its shape, however large. A change
that gives no plan is never suggested; when none does, the answer says what was tried.

* An SLO below the candidates' idle floor: the target is raised from the floor (rounded up to
  4 significant digits) up FLOOR_STEPS until a value plans. At the floor itself a replica serves
  no load, so the floor rarely plans; the first value that does is quoted with its cost, and
  the last of the next rungs that each at least halve the bill (near the floor capacity climbs
  steeply: the first value that plans can need thousands of GPUs). Another
  catalog GPU that reaches the target is tried as `candidates.gpus` with it added.
* No configuration meets the SLOs at any positive load (bursts), or a peak beyond the replicas a
  plan sizes: the target that binds is raised up TARGET_STEPS x the request's; disaggregation is
  tried first where the request forbids it and both targets are set.
* A model that fits no candidate: other catalog GPUs where it fits, then TP up to the node's
  GPUs, then fp8 weights.
* An inventory cap: the count the solver reported, else the peak of the plan without the cap.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from planner.plan import defaults, explain
from planner.plan.planning import Planning, roomiest
from planner.schema.plan_report import AlternativeDeployment, Infeasibility, PlanReport, RelaxedPlan
from planner.schema.plan_request import MAX_INVENTORY_GPUS, PlanRequest, parse_plan_request
from solvers.milp_data import MAX_REPLICAS_PER_BUCKET

__all__ = ["MAX_REPLANS", "relaxed_report", "with_value"]

MAX_REPLANS = 10
FLOOR_STEPS = (1.0, 1.02, 1.05, 1.1, 1.25, 1.5, 2.0, 4.0, 10.0)  # x the idle floor
TARGET_STEPS = (1.25, 1.5, 2.0, 3.0, 5.0, 10.0)  # x the request's target
CHEAPER = 0.5  # rungs past the first are followed while each at most halves the bill
SLO_METRIC = {"slo.ttft_p99_ms": "TTFT", "slo.itl_p99_ms": "ITL", "slo.e2e_p99_ms": "E2E"}
SLO_FIELD = {"ttft": "slo.ttft_p99_ms", "itl": "slo.itl_p99_ms", "e2e": "slo.e2e_p99_ms"}

Replan = Callable[[PlanRequest], PlanReport]


def with_value(req: PlanRequest, field: str, value: Any) -> PlanRequest:
    """`req` with the dotted key `field` set to `value` (what a user would write in the YAML)."""
    data = req.model_dump()
    *path, last = field.split(".")
    node = data
    for key in path:
        node = node[key]
    node[last] = value
    return parse_plan_request(data)


def ceil_4(x: float) -> float:
    """`x` rounded up to 4 significant digits (a value a user can type that is not below `x`)."""
    q = 10.0 ** (math.floor(math.log10(x)) - 3)
    return float(f"{math.ceil(x / q) * q:.4g}")


def _summary(r: RelaxedPlan) -> str:
    shape = " + ".join(
        f"{d.replicas_peak:,} x {d.gpu}" + (f" TP{d.tensor_parallel_size}" if d.tensor_parallel_size > 1 else "")
        + (f" x PP{d.pipeline_parallel_size}" if d.pipeline_parallel_size else "") + f" {d.role}"
        for d in r.deployments
    )  # fmt: skip
    n = r.gpu_count_peak
    return f"${r.usd_per_month or 0.0:,.0f}/month, {n:,} GPU{'s' if n != 1 else ''} at the peak ({shape})"


class _Tries:
    """Re-plans of one answer, at most MAX_REPLANS."""

    def __init__(self, req: PlanRequest, replan: Replan) -> None:
        self.req, self.replan, self.left = req, replan, MAX_REPLANS
        self.last: PlanReport | None = None

    def plan(self, field: str, value: Any) -> RelaxedPlan | None:
        """The plan `field` = `value` gives; None when it gives none (or no re-plan is left)."""
        if self.left <= 0:
            return None
        self.left -= 1
        rep = self.last = self.replan(with_value(self.req, field, value))
        if rep.status not in ("OPTIMAL", "FEASIBLE") or rep.usd_per_month is None:
            return None
        return RelaxedPlan(
            field=field,
            value=json.dumps(value),
            status=rep.status,
            usd_per_month=rep.usd_per_month,
            usd_per_hour_peak=rep.usd_per_hour_peak,
            gpu_count_peak=rep.gpu_count_peak,
            deployments=[
                AlternativeDeployment(
                    gpu=d.gpu,
                    tensor_parallel_size=d.tensor_parallel_size,
                    role=d.role,
                    replicas_peak=d.replicas_peak,
                    max_num_batched_tokens=d.max_num_batched_tokens,
                    max_num_seqs=d.max_num_seqs,
                    pipeline_parallel_size=d.pipeline_parallel_size,
                )
                for d in rep.deployments
            ],
        )

    def ladder(
        self, field: str, start: float, steps: Sequence[float]
    ) -> tuple[list[RelaxedPlan], list[float]]:
        """Up `start` x `steps` (rounded up to 4 digits): the first value that plans and, when
        the next rungs each at least halve the bill, the last of them (where relaxing further
        stops paying); also the values tried."""
        first: RelaxedPlan | None = None
        knee: RelaxedPlan | None = None
        tried: list[float] = []
        for m in steps:
            v = ceil_4(start * m)
            if (tried and v <= tried[-1]) or self.left <= 0:
                continue
            tried.append(v)
            r = self.plan(field, v)
            if first is None:
                first = r
                continue
            last = knee or first
            if r is None or (r.usd_per_month or 0.0) > CHEAPER * (last.usd_per_month or 0.0):
                break
            knee = r
        return [r for r in (first, knee) if r is not None], tried


def _ladder_text(field: str, found: Sequence[RelaxedPlan], tried: Sequence[float], unit: str) -> str:
    if not found:
        span = f"{tried[0]:g}" + (f" to {tried[-1]:g}" if len(tried) > 1 else "")
        return f"no {field} from {span}{unit} gives a plan ({len(tried)} tried)"
    parts = [f"{field} >= {json.loads(r.value):g}: {_summary(r)}" for r in found]
    first = json.loads(found[0].value)
    if tried and first != tried[0]:
        gave_none = ", ".join(f"{v:g}" for v in tried if v < first)
        parts[0] = parts[0].replace(": ", f" ({gave_none}{unit} gives no plan): ", 1)
    return "; ".join(parts)


def _floor(pl: Planning, why: Infeasibility, tries: _Tries) -> tuple[list[RelaxedPlan], str]:
    """A target below the candidates' idle floor: raised from the floor; another GPU added."""
    from planner.plan.infeasible import other_points

    metric = SLO_METRIC[why.constraint]
    best = explain.floor_of(pl.found.points, metric)
    attr = next(a for m, a, _ in explain.FLOORS if m == metric)
    if best is None:
        return [], why.relaxation
    found, tried = tries.ladder(why.constraint, getattr(best, attr) * 1e3, FLOOR_STEPS)
    text = _ladder_text(why.constraint, found, tried, " ms")
    target = {"TTFT": pl.ctx.ttft_p99_s, "ITL": pl.ctx.itl_p99_s, "E2E": pl.ctx.e2e_p99_s}[metric]
    alt = explain.floor_of(other_points(pl), metric)
    if alt is not None and target is not None and getattr(alt, attr) <= target:
        gpus = sorted({*(g for g, _ in pl.ctx.profiles), alt.config.gpu})
        r = tries.plan("candidates.gpus", gpus)
        if r is not None:
            found.append(r)
            text += f"; or add {alt.config.gpu} to candidates.gpus: {_summary(r)}"
    return found, text


def _binding_target(pl: Planning, binding: Sequence[str]) -> str:
    """The SLO field to relax: the target most configurations missed, among those set (else the
    first set: TTFT, ITL, E2E)."""
    s = pl.req.slo
    have = {"ttft": s.ttft_p99_ms, "itl": s.itl_p99_ms, "e2e": s.e2e_p99_ms}
    counts = Counter(b for b in binding if have.get(b) is not None)
    if not counts:
        return SLO_FIELD[next(b for b, v in have.items() if v is not None)]
    return SLO_FIELD[min(counts, key=lambda b: (-counts[b], b))]


def _target_ladder(pl: Planning, field: str, tries: _Tries) -> tuple[list[RelaxedPlan], str]:
    start = getattr(pl.req.slo, field.split(".")[1])
    found, tried = tries.ladder(field, start, TARGET_STEPS)
    return found, _ladder_text(field, found, tried, " ms")


def _slo(pl: Planning, why: Infeasibility, tries: _Tries) -> tuple[list[RelaxedPlan], str]:
    """No configuration meets the SLOs at a positive load: disaggregation, then the target."""
    if pl.req.candidates.disaggregation == "never" and "allow disaggregation" in why.relaxation:
        r = tries.plan("candidates.disaggregation", "auto")
        if r is not None:
            return [r], f"candidates.disaggregation: auto: {_summary(r)}"
    missed = [p.binding_limit for p in pl.found.points if p.fits and not p.feasible]
    return _target_ladder(pl, _binding_target(pl, missed), tries)


def _replicas(pl: Planning, why: Infeasibility, tries: _Tries) -> tuple[list[RelaxedPlan], str]:
    """The peak needs more replicas than a plan sizes: relax the target that holds a replica."""
    top = roomiest(pl.oversized)
    room = MAX_REPLICAS_PER_BUCKET * top.requests_per_s / (1.0 + pl.req.headroom)
    found, text = _target_ladder(pl, _binding_target(pl, [top.binding_limit]), tries)
    return found, f"{text}; or plan the service in parts of at most {room:.4g} req/s at the peak"


def _fit(pl: Planning, tries: _Tries) -> tuple[list[RelaxedPlan], str]:
    """The model fits no candidate: GPUs where it fits, larger TPs, fp8 weights, two pipeline
    stages (replicas of two nodes' GPUs: docs/multi-node.md), in that order."""
    from planner.catalog.gpus import get_gpu
    from planner.plan.search import unfit_shapes

    req, space = pl.req, pl.req.candidates
    listed = [g for g, _ in pl.ctx.profiles]
    others = defaults.other_gpus(req, listed)
    from planner.costmodel.profiles import resolve_profile

    profile = (
        (lambda g: resolve_profile(req.profile, g))
        if req.profile in ("auto", "calibrated", "theoretical")
        else None
    )
    unfit = {
        (g, tp, pp)
        for g, tp, pp, _ in unfit_shapes(
            pl.ctx.model, space, others, profile, lora=pl.ctx.lora, speculative=pl.ctx.speculative
        )
    }
    shapes = [(tp, pp) for tp in space.tensor_parallel_sizes for pp in space.pipeline_parallel_sizes]
    fitting = [g for g in others if any((g, tp, pp) not in unfit for tp, pp in shapes)]
    node = min(get_gpu(g).max_gpus_per_node for g in listed)
    tps = sorted({*space.tensor_parallel_sizes, *(t for t in (1, 2, 4, 8) if t <= node)})
    changes: list[tuple[str, Any]] = []
    if fitting:
        changes.append(("candidates.gpus", sorted({*listed, *fitting})))
    if tps != list(space.tensor_parallel_sizes):
        changes.append(("candidates.tensor_parallel_sizes", tps))
    if space.weight_dtype == "bf16":  # fp8 halves bf16's weights; the other formats are smaller already
        changes.append(("candidates.weight_dtype", "fp8"))
    if max(space.pipeline_parallel_sizes) < 2:  # half the layers a GPU, at twice the GPUs a replica
        changes.append(("candidates.pipeline_parallel_sizes", sorted({*space.pipeline_parallel_sizes, 2})))
    for field, value in changes:
        r = tries.plan(field, value)
        if r is not None:
            return [r], f"{field}: {json.dumps(value)}: {_summary(r)}"
    tried = ", ".join(f"{f}: {json.dumps(v)}" for f, v in changes) or "nothing left to try"
    return [], f"no change tried gives a plan ({tried}); use a GPU with more memory"


def _caps_lifted(pl: Planning, tries: _Tries) -> tuple[list[RelaxedPlan], str]:
    """Caps that no single count explains: the plan without them, then caps at its peaks."""
    if tries.plan("inventory", {}) is None or tries.last is None:
        return [], "no plan even without inventory caps"
    caps = {u.gpu: u.peak for u in tries.last.gpus}
    r = tries.plan("inventory", caps)
    if r is None:
        return [], "no plan even without inventory caps"
    return [r], f"inventory: {json.dumps(caps)}: {_summary(r)}"


def _inventory(pl: Planning, why: Infeasibility, tries: _Tries) -> tuple[list[RelaxedPlan], str]:
    """An inventory cap: all caps 0 lifted; or the capped GPU's count the solver reported, else
    the peak of the plan with the cap lifted; caps the solver does not name: all of them."""
    if why.constraint == "inventory":
        caps = {g: n for g, n in pl.req.inventory.items() if n != 0}
        r = tries.plan("inventory", caps)
        if r is None:
            return [], f"inventory: {json.dumps(caps)} (no cap of 0) gives no plan either"
        return [r], f"inventory: {json.dumps(caps)} (no cap of 0): {_summary(r)}"
    gpus = [g for g, _ in pl.ctx.profiles if why.constraint.startswith(f"inventory_{g}")]
    if not gpus:
        return _caps_lifted(pl, tries)
    gpu = max(gpus, key=len)
    field = f"inventory.{gpu}"
    m = re.search(r"needs (\d+) ", why.reason)
    r = tries.plan(field, int(m.group(1))) if m else None
    if r is None and tries.plan(field, MAX_INVENTORY_GPUS) is not None and tries.last is not None:
        r = tries.plan(field, max((u.peak for u in tries.last.gpus if u.gpu == gpu), default=0))
    if r is None:
        return [], f"no {field} tried gives a plan; add GPU types to candidates.gpus"
    return [r], f"{field} >= {json.loads(r.value)}: {_summary(r)}"


def relaxed_report(pl: Planning, report: PlanReport, replan: Replan) -> PlanReport:
    """`report` (INFEASIBLE) with its relaxation re-planned: the text quotes what the change
    costs, `infeasibility.relaxed` holds the plans. Answers without a relaxation to try (a time
    limit) are returned as they are."""
    why = report.infeasibility
    if why is None or report.status != "INFEASIBLE":
        return report
    tries = _Tries(pl.req, replan)
    c = why.constraint
    if c in SLO_METRIC:
        found, text = _floor(pl, why, tries)
    elif c == "slo":
        found, text = _slo(pl, why, tries)
    elif c == "max_replicas_per_bucket":
        found, text = _replicas(pl, why, tries)
    elif c == "candidates":
        found, text = _fit(pl, tries)
    elif c.startswith("inventory"):
        found, text = _inventory(pl, why, tries)
    elif pl.req.inventory:  # a MILP constraint the caps make infeasible
        found, text = _caps_lifted(pl, tries)
    else:
        return report
    inf = why.model_copy(update={"relaxation": text, "relaxed": found})
    return report.model_copy(update={"infeasibility": inf})
