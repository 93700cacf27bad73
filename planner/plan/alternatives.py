"""The plans next to the chosen one: on each other GPU type, in the other disaggregation mode,
and with vLLM's default flags, each costed exactly as a single configuration
(solvers.milp_fastpath: no MILP solves); and why the plan is colocated or disaggregated."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from planner.plan.capacity import CapacityPoint
from planner.plan.defaults import availability
from planner.plan.explain import below_floor
from planner.plan.flags import default_configs
from planner.plan.planning import Planning, replicas_at, roomiest
from planner.plan.solve import HOURS_PER_MONTH, Costed, milp_data, single_configurations
from planner.schema.plan_report import Alternative, AlternativeDeployment
from solvers.milp_data import MAX_REPLICAS_PER_BUCKET


def cheapest(options: Sequence[Costed], keep: Callable[[Costed], bool]) -> Costed | None:
    ok = [o for o in options if o.feasible and keep(o)]
    return min(ok, key=lambda o: (o.cost_usd, o.members)) if ok else None


class Alternatives:
    """The alternatives of one plan; `extra` holds the configurations costed beyond the search's
    candidates (vLLM's defaults), so their rows can name them."""

    def __init__(self, pl: Planning, options: Sequence[Costed], base_month: float) -> None:
        self.pl, self.options, self.base_month = pl, options, base_month
        self.extra: dict[str, CapacityPoint] = {}

    def month(self, o: Costed) -> float:
        return o.cost_usd / self.pl.forecast.horizon_hours * HOURS_PER_MONTH

    def row(self, kind: str, label: str, o: Costed | None, reason: str) -> Alternative:
        if o is None:
            return Alternative(
                kind=kind, label=label, feasible=False, usd_per_month=None, usd_per_hour_peak=None,  # type: ignore[arg-type]
                delta_usd_per_month=None, delta_fraction=None, gpu_count_peak=None, deployments=[], reason=reason,
            )  # fmt: skip
        month = self.month(o)
        deps = []
        for cid, reps in zip(o.members, o.replicas, strict=True):
            p = self.pl.by_id.get(cid) or self.extra[cid]
            deps.append(
                AlternativeDeployment(
                    gpu=p.config.gpu,
                    tensor_parallel_size=p.config.tensor_parallel_size,
                    role=p.config.role,
                    replicas_peak=max(reps),
                    max_num_batched_tokens=p.config.max_num_batched_tokens,
                    max_num_seqs=p.config.max_num_seqs,
                    pipeline_parallel_size=p.config.pipeline_parallel_size
                    if p.config.pipeline_parallel_size > 1
                    else None,
                )
            )
        base = self.base_month
        return Alternative(
            kind=kind,  # type: ignore[arg-type]
            label=label,
            feasible=True,
            usd_per_month=month,
            usd_per_hour_peak=max(o.usd_per_hour),
            delta_usd_per_month=month - base,
            delta_fraction=(month - base) / base if base > 0 else None,
            gpu_count_peak=max(o.gpus),
            deployments=deps,
            reason=reason,
        )

    def all(self, cand_gpu: dict[str, str], chosen: Sequence[CapacityPoint]) -> list[Alternative]:
        """Other GPU types, the other disaggregation mode, vLLM's defaults: feasible ones first
        (the defaults, then by cost), then the infeasible ones."""
        pl = self.pl
        out: list[Alternative] = []
        plan_gpus = sorted({p.config.gpu for p in chosen})
        for g, _ in pl.ctx.profiles:
            if g in plan_gpus:
                continue
            on_g = [o for o in self.options if all(cand_gpu[m] == g for m in o.members)]
            best = cheapest(on_g, lambda o: True)
            reason = "" if best is not None else self.why_not(g)
            out.append(self.row("gpu", f"{g} only", best, reason))
        if "colocated" in pl.roles and "prefill" in pl.roles:
            plan_dis = any(p.config.role != "colocated" for p in chosen)
            want = 1 if plan_dis else 2
            best = cheapest(self.options, lambda o: len(o.members) == want)
            label = "colocated" if plan_dis else "disaggregated prefill/decode"
            reason = "" if best is not None else f"no {label} configuration meets the SLOs"
            out.append(self.row("disaggregation", label, best, reason))
        out.append(self.defaults(plan_gpus))
        feasible = sorted(
            (a for a in out if a.feasible),
            key=lambda a: (a.kind != "vllm_defaults", a.usd_per_month or 0.0, a.label),
        )
        return feasible + sorted((a for a in out if not a.feasible), key=lambda a: (a.kind, a.label))

    def targets(self) -> dict[str, float | None]:
        c = self.pl.ctx
        return {"TTFT": c.ttft_p99_s, "ITL": c.itl_p99_s, "E2E": c.e2e_p99_s}

    def why_not(self, gpu: str) -> str:
        pl = self.pl
        pts = [p for p in pl.found.points if p.config.gpu == gpu]
        if pts and not any(p.fits for p in pts):
            return f"{pl.ctx.model} does not fit: {pts[0].reason}"
        floor = below_floor(self.targets(), pts)
        if floor is not None:
            return f"no configuration meets the SLOs: {floor}"
        reasons = sorted({p.reason for p in pts if p.reason})
        return (
            f"no configuration meets the SLOs: {reasons[0]}" if reasons else "no configuration meets the SLOs"
        )

    def defaults(self, gpus: Sequence[str]) -> Alternative:
        from planner.catalog.gpus import get_gpu

        pl = self.pl
        cfgs = default_configs(gpus, pl.req.candidates.tensor_parallel_sizes)
        evaluated = pl.pool.evaluate(cfgs)
        pts = pl.pool.split([p for p in evaluated if p.feasible], pl.split)
        label = (
            "vLLM defaults ("
            + ", ".join(
                f"{g}: budget {get_gpu(g).vllm_default_max_num_batched_tokens}, {get_gpu(g).vllm_default_max_num_seqs} seqs"
                for g in gpus
            )
            + ", colocated)"
        )
        if not pts:
            reasons = sorted({p.reason for p in evaluated if p.reason})
            why = below_floor(self.targets(), evaluated) or (reasons[0] if reasons else "")
            return self.row("vllm_defaults", label, None,
                            "no TP meets the SLOs with vLLM's default flags" + (f": {why}" if why else ""))  # fmt: skip
        sized, oversized = pl.sizable(pts)
        if not sized:
            top = roomiest(oversized)
            return self.row("vllm_defaults", label, None,
                            f"vLLM's defaults need {replicas_at(pl.peak_need_per_s, top):,} replicas at the "
                            f"peak, more than the {MAX_REPLICAS_PER_BUCKET:,} a plan sizes")  # fmt: skip
        self.extra.update({p.config.id: p for p in sized})
        data = milp_data(
            sized, pl.forecast, pl.prices, pl.req.headroom, True, pl.req.solver.time_limit_s, None,
            **availability(pl.req),
        )  # fmt: skip
        best = cheapest(single_configurations(data), lambda o: True)
        reason = "" if best is not None else "vLLM's defaults exceed the inventory caps"
        return self.row("vllm_defaults", label, best, reason)

    def disaggregation_reason(self, disaggregated: bool, usd_per_month: float) -> str:
        pl = self.pl
        mode = pl.req.candidates.disaggregation
        if "prefill" not in pl.roles:
            why = (
                "the request says never"
                if mode == "never"
                else "an E2E target is judged for colocated replicas only"
            )
            return f"colocated: {why}"
        if "colocated" not in pl.roles:
            return "disaggregated: the request says always"
        col = cheapest(self.options, lambda o: len(o.members) == 1)
        dis = cheapest(self.options, lambda o: len(o.members) == 2)
        if disaggregated:
            if col is None:
                reasons = sorted(
                    {p.reason for p in pl.found.points if p.config.role == "colocated" and p.reason}
                )
                return "disaggregated: no colocated configuration meets the SLOs" + (
                    f" ({reasons[0]})" if reasons else ""
                )
            best_col = pl.by_id[col.members[0]]
            return (
                f"disaggregated: ${usd_per_month:,.0f}/month vs ${self.month(col):,.0f} for the best colocated plan "
                f"({best_col.config.id}, limited by {best_col.binding_limit}); separate prefill and decode pools keep "
                "prompt chunks out of the decode steps"
            )
        if dis is None:
            reasons = sorted({p.reason for p in pl.found.points if p.config.role != "colocated" and p.reason})
            return "colocated: no disaggregated configuration meets the SLOs" + (
                f" ({reasons[0]})" if reasons else ""
            )
        return (
            f"colocated: ${usd_per_month:,.0f}/month vs ${self.month(dis):,.0f} for the best prefill/decode pools "
            f"({' + '.join(dis.members)}); disaggregation isolates ITL from prompt chunks but does not raise "
            "throughput, and each pool is sized on its own"
        )
