"""`candidates.expert_parallel`: a MoE model planned with and without vLLM's
--enable-expert-parallel, the cheaper plan kept.

EP is a whole-plan switch, as the weight format is (planner.plan.pipeline): every candidate of TP
> 1 runs with EP (EP size = TP, planner.costmodel.expert_parallel) in one plan and with experts
split over TP in the other. Ties go to EP: at routing skew 1 the roofline gives both the same
bytes and FLOPs per GPU, and EP's fewer, larger expert GEMMs (which the roofline does not
model) are the reason to ask for it. A dense model, or a request without the key, plans once.
"""

from __future__ import annotations

from collections.abc import Callable

from planner.plan.capacity import ReplicaConfig, SearchContext
from planner.schema.plan_report import ExpertParallelSummary, PlanReport
from planner.schema.plan_request import PlanRequest

__all__ = ["by_expert_parallel", "expert_parallel_summary"]

_SOLVED = ("OPTIMAL", "FEASIBLE")


def by_expert_parallel(req: PlanRequest, plan_one: Callable[[PlanRequest], PlanReport]) -> PlanReport:
    """One plan with EP and one without when the request allows EP for a MoE model; the cheaper
    solved one kept (ties: EP), the other's monthly cost in a note."""
    from planner.catalog.models import get_model

    c = req.candidates
    if not c.expert_parallel or not get_model(req.model, "model").is_moe:
        return plan_one(req)
    with_ep = plan_one(req)
    without = plan_one(
        req.model_copy(
            update={"candidates": c.model_copy(update={"expert_parallel": False, "routing_skew": 1.0})}
        )
    )

    def cost(r: PlanReport) -> float | None:
        return r.usd_per_month if r.status in _SOLVED else None

    ep_cost, tp_cost = cost(with_ep), cost(without)
    keep_ep = ep_cost is not None and (tp_cost is None or ep_cost <= tp_cost)
    best = with_ep if keep_ep or tp_cost is None else without

    def shown(v: float | None, r: PlanReport) -> str:
        return f"${v:,.0f}/month" if v is not None else r.status

    note = (
        f"candidates.expert_parallel: {'expert-parallel' if best is with_ep else 'experts split over TP'} "
        f"chosen; expert-parallel (routing_skew {c.routing_skew:g}) {shown(ep_cost, with_ep)}, "
        f"experts split over TP {shown(tp_cost, without)}"
    )
    return best.model_copy(update={"notes": [*best.notes, note]})


def expert_parallel_summary(ctx: SearchContext, cfg: ReplicaConfig) -> ExpertParallelSummary | None:
    """The deployment's EP group and per-GPU experts (None where EP is off)."""
    if not ctx.expert_parallel(cfg):
        return None
    m = ctx.resolve(cfg).expert_parallel_summary()
    return None if m is None else ExpertParallelSummary(**m)
