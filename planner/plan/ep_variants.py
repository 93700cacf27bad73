"""`candidates.expert_parallel`: a MoE model planned with vLLM's --enable-expert-parallel, beside
the same request with the experts split over TP for comparison.

EP is a whole-plan setting, as the weight format is (planner.plan.pipeline): every candidate of
TP > 1 runs with EP (EP size = TP, planner.costmodel.expert_parallel), TP 1 candidates as they
are (vLLM turns EP on only for 2 GPUs or more). The request asked for EP, so the EP plan is the
answer whenever it is solved (a checkpoint may need it: e.g. block-quantized experts whose width
does not split over TP); the plan with the experts split over TP is solved too, its cost goes in
a note, and a warning says so where it is cheaper. Only when the EP plan has no solution and the
other has is the other returned. A dense model, or a request without the key, plans once. A note
per EP layout of the plan says whether measured kernels or the roofline priced its MoE layers
(planner.costmodel.ep_measured).
"""

from __future__ import annotations

from collections.abc import Callable

from planner.plan.capacity import ReplicaConfig, SearchContext
from planner.schema.plan_report import ExpertParallelSummary, PlanReport
from planner.schema.plan_request import PlanRequest

__all__ = ["by_expert_parallel", "expert_parallel_summary"]

_SOLVED = ("OPTIMAL", "FEASIBLE")


def by_expert_parallel(req: PlanRequest, plan_one: Callable[[PlanRequest], PlanReport]) -> PlanReport:
    """The EP plan when the request allows EP for a MoE model, with the TP-split plan's monthly
    cost in a note (and a warning where it is lower); the TP-split plan where EP has no solution."""
    from planner.catalog.models import get_model

    c = req.candidates
    if not c.expert_parallel or not get_model(req.model, "model").is_moe:
        return plan_one(req)
    with_ep = plan_one(req)
    without = plan_one(
        req.model_copy(update={"candidates": c.model_copy(update={"expert_parallel": False, "routing_skew": 1.0})})
    )

    def cost(r: PlanReport) -> float | None:
        return r.usd_per_month if r.status in _SOLVED else None

    def shown(v: float | None, r: PlanReport) -> str:
        return f"${v:,.0f}/month" if v is not None else r.status

    ep_cost, tp_cost = cost(with_ep), cost(without)
    best = without if ep_cost is None and tp_cost is not None else with_ep
    note = (
        f"candidates.expert_parallel: {'expert-parallel' if best is with_ep else 'experts split over TP'} "
        f"planned; expert-parallel (routing_skew {c.routing_skew:g}) {shown(ep_cost, with_ep)}, "
        f"experts split over TP {shown(tp_cost, without)}"
    )
    warnings = list(best.warnings)
    if best is with_ep and ep_cost is not None and tp_cost is not None and tp_cost < ep_cost:
        warnings.append(
            f"expert parallelism costs ${ep_cost:,.0f}/month where splitting the experts over TP costs "
            f"${tp_cost:,.0f}: drop candidates.expert_parallel unless the checkpoint needs it"
        )
    notes = [*best.notes, note]
    if best is with_ep:
        notes += _pricing_notes(req.model, best)
    return best.model_copy(update={"notes": notes, "warnings": warnings})


def _pricing_notes(model_name: str, report: PlanReport) -> list[str]:
    """One note per EP layout of the plan: measured kernels or the roofline priced its MoE layers
    (planner.costmodel.ep_measured)."""
    from planner.catalog.models import get_model
    from planner.costmodel.ep_measured import table_note

    model = get_model(model_name, "model")
    layouts = sorted({
        (d.gpu, d.weight_dtype, d.expert_parallel.ep_size)
        for d in report.deployments if d.expert_parallel is not None
    })  # fmt: skip
    return [f"candidates.expert_parallel: {table_note(model, g, w, e)}" for g, w, e in layouts]


def expert_parallel_summary(ctx: SearchContext, cfg: ReplicaConfig) -> ExpertParallelSummary | None:
    """The deployment's EP group and per-GPU experts (None where EP is off)."""
    if not ctx.expert_parallel(cfg):
        return None
    m = ctx.resolve(cfg).expert_parallel_summary()
    return None if m is None else ExpertParallelSummary(**m)
