"""Speculative decoding's k chosen by planning (`candidates.num_speculative_tokens`): one plan per
k, the cheapest solved one kept, as `candidates.weight_dtypes` chooses a weight format
(planner.plan.pipeline._by_weight_format). k = 0 plans without speculative decoding.

Why whole plans, not one more candidate axis: k changes every configuration's step times, KV
cache and decode count at once (planner.costmodel.speculative), and the candidates list is short
(at most 17 values; 0..5 by default), so a plan per k is the simple exact answer."""

from __future__ import annotations

from collections.abc import Callable

from planner.schema.plan_report import PlanReport
from planner.schema.plan_request import DEFAULT_SPECULATIVE_TOKENS, PlanRequest

__all__ = ["DEFAULT_SPECULATIVE_TOKENS", "DRAFT_MODEL_WARNING", "by_speculative_tokens", "speculative_ks"]

_SOLVED = ("OPTIMAL", "FEASIBLE")


def speculative_ks(req: PlanRequest) -> tuple[int, ...]:
    """The k values to plan: candidates.num_speculative_tokens, else speculative_decoding's own
    k, else DEFAULT_SPECULATIVE_TOKENS (empty without speculative decoding)."""
    sd = req.speculative_decoding
    if sd is None:
        return ()
    if req.candidates.num_speculative_tokens is not None:
        return req.candidates.num_speculative_tokens
    if sd.num_speculative_tokens is not None:
        return (sd.num_speculative_tokens,)
    return DEFAULT_SPECULATIVE_TOKENS


def by_speculative_tokens(req: PlanRequest, plan_one: Callable[[PlanRequest], PlanReport]) -> PlanReport:
    """`plan_one` at each k of `speculative_ks` (k fixed in the request's speculative_decoding;
    0: none), the cheapest solved plan kept (ties: the smaller k); the others' monthly cost in a
    note. Without speculative decoding: `plan_one(req)`."""
    ks = speculative_ks(req)
    sd = req.speculative_decoding
    if sd is None:
        return plan_one(req)
    report = _choose(req, ks, plan_one)
    chosen = report.deployments[0].speculative_decoding if report.deployments else None
    if sd.method == "draft" and chosen is not None:
        return report.model_copy(update={"warnings": [*report.warnings, DRAFT_MODEL_WARNING]})
    return report


# vLLM 0.11's SpeculativeConfig accepts method draft_model but its V1 engine refuses it at start-up
# (vllm/config/speculative.py __post_init__: NotImplementedError "Speculative decoding with draft
# model is not supported yet", still in 0.13: vllm-project/vllm issue #31883); draft-model
# speculation in V1 came with vllm-project/vllm PR #24322.
DRAFT_MODEL_WARNING = (
    "speculative_decoding.method draft: vLLM 0.11's V1 engine refuses draft-model speculation at start-up "
    "(NotImplementedError in vllm/config/speculative.py; added to V1 by vllm-project/vllm PR #24322): "
    "serve these flags with a vLLM that has it, or use eagle3/mtp/ngram"
)


def _choose(req: PlanRequest, ks: tuple[int, ...], plan_one: Callable[[PlanRequest], PlanReport]) -> PlanReport:
    """The cheapest solved plan over `ks` (module docstring); a note lists every k's cost."""
    sd = req.speculative_decoding
    assert sd is not None
    reports: list[tuple[int, PlanReport]] = []
    for k in ks:
        one = req.model_copy(
            update={
                "speculative_decoding": None if k == 0 else sd.at(k),
                "candidates": req.candidates.model_copy(update={"num_speculative_tokens": None}),
            }
        )
        reports.append((k, plan_one(one)))
    solved = [(k, r) for k, r in reports if r.status in _SOLVED and r.usd_per_month is not None]
    k_best, best = min(solved, key=lambda kr: (kr[1].usd_per_month or 0.0, kr[0])) if solved else reports[0]
    if len(reports) == 1:
        return best
    costs = [
        f"k={k} ${r.usd_per_month:,.0f}/month"
        if r.status in _SOLVED and r.usd_per_month is not None
        else f"k={k} {r.status}"
        for k, r in reports
    ]
    chosen = "off (k=0)" if k_best == 0 else f"k={k_best}"
    note = (
        f"candidates.num_speculative_tokens: {chosen} chosen at acceptance rate {sd.alpha:.3g}; "
        + ", ".join(costs)
    )
    return best.model_copy(update={"notes": [*best.notes, note]})
