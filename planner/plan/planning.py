"""What every part of a plan's answer reads: the request as resolved, the search's candidates,
the worker pool; and the pieces of the report that do not depend on the MILP's answer."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from planner.latency import WorkloadStats
from planner.plan.capacity import CapacityPoint, SearchContext
from planner.plan.capacity_pool import CapacityPool
from planner.plan.search import SearchResult
from planner.plan.solve import Forecast, Prices
from planner.plan.split import Split, share_note
from planner.schema.kinds import Role
from planner.schema.plan_report import PlanTargets, PlanWorkload, ProfileUsed, SearchStats
from planner.schema.plan_request import PlanRequest
from planner.workload import Workload
from solvers.milp import MilpResult
from solvers.milp_data import MAX_REPLICAS_PER_BUCKET, peak_replicas

MIN_SOLVE_S = 0.1


def replicas_at(need_per_s: float, p: CapacityPoint) -> int:
    """Replicas of `p` a bucket of `need_per_s` (headroom included) takes, as MilpData counts them."""
    return (
        peak_replicas(need_per_s, p.requests_per_s) if p.requests_per_s > 0 else MAX_REPLICAS_PER_BUCKET + 1
    )


def roomiest(points: Sequence[CapacityPoint]) -> CapacityPoint:
    """The configuration of the most capacity per replica (ties by id): the one an answer about
    too many replicas names."""
    return max(points, key=lambda p: (p.requests_per_s, p.config.id))


@dataclass
class Planning:
    """The resolved request and the search's answer. `found.best` holds only candidates the peak
    bucket needs at most MAX_REPLICAS_PER_BUCKET replicas of; the others are in `oversized`
    (they cannot be in any plan; if nothing servable is left the answer says so)."""

    req: PlanRequest
    ctx: SearchContext
    workload: Workload
    stats: WorkloadStats
    forecast: Forecast
    prices: Sequence[Prices]
    roles: Sequence[Role]
    notes: list[str]
    pool: CapacityPool
    found: SearchResult
    split: Split | None = None
    # time.perf_counter() by which the plan is to be answered (the plan's start plus
    # solver.time_limit_s): every MILP solve gets what is left of it (`solver_seconds`)
    deadline: float = math.inf
    oversized: tuple[CapacityPoint, ...] = field(init=False)
    peak_need_per_s: float = field(init=False)
    by_id: Mapping[str, CapacityPoint] = field(init=False)
    price_of: Mapping[str, Prices] = field(init=False)

    def __post_init__(self) -> None:
        self.peak_need_per_s = max(self.forecast.rates_per_s, default=0.0) * (1.0 + self.req.headroom)
        fits, self.oversized = self.sizable(self.found.best)
        if self.oversized:
            self.found = replace(self.found, best=fits)
        self.by_id = {p.config.id: p for p in self.found.best}
        self.price_of = {p.gpu: p for p in self.prices}

    def sizable(
        self, points: Sequence[CapacityPoint]
    ) -> tuple[tuple[CapacityPoint, ...], tuple[CapacityPoint, ...]]:
        """`points` split into those the peak bucket needs at most MAX_REPLICAS_PER_BUCKET
        replicas of and the others."""
        fits = tuple(p for p in points if replicas_at(self.peak_need_per_s, p) <= MAX_REPLICAS_PER_BUCKET)
        return fits, tuple(p for p in points if p not in fits)

    def solver_seconds(self) -> float:
        """What is left of the plan's time limit for a MILP solve (at least MIN_SOLVE_S: a solve
        cut at once would say nothing): the search and earlier solves already spent the rest."""
        left = self.deadline - time.perf_counter()
        return min(self.req.solver.time_limit_s, max(MIN_SOLVE_S, left))

    # -- report pieces that do not read the MILP's answer --

    def targets(self) -> PlanTargets:
        s = self.req.slo
        return PlanTargets(ttft_p99_ms=s.ttft_p99_ms, itl_p99_ms=s.itl_p99_ms, e2e_p99_ms=s.e2e_p99_ms)

    def workload_summary(self) -> PlanWorkload:
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

    def profiles_used(self) -> list[ProfileUsed]:
        return [ProfileUsed(gpu=g, name=p.name, source=p.source) for g, p in self.ctx.profiles]

    def search_stats(self, result: MilpResult | None) -> SearchStats:
        st = None if result is None else result.stats
        return SearchStats(
            configurations_evaluated=self.pool.questions,
            candidates=len(self.found.best),
            candidates_pruned_dominated=self.found.dominated + (0 if st is None else st.candidates_pruned),
            candidates_in_milp=0 if st is None else st.candidates_in_model,
            milp_variables=0 if st is None else st.variables,
            milp_constraints=0 if st is None else st.constraints,
            unfit=[f"{g} TP{tp}{f' PP{pp}' if pp > 1 else ''}: {why}" for g, tp, pp, why in self.found.unfit],
        )

    def base_notes(self) -> list[str]:
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

    def profile_warnings(self, plan_gpus: Sequence[str] = ()) -> list[str]:
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

    # -- what a MILP answer serves --

    def capacity_at(self, result: MilpResult, b: int, stable: bool = False) -> float:
        """Requests/s the plan's replicas serve in bucket `b` within the SLOs, as the MILP counts
        them (each deployment's capacity there, its spare replicas left out); `stable`: what all
        its replicas serve at all, latency aside."""
        spare = self.req.availability.spare_replicas
        cap = {"colocated": 0.0, "prefill": 0.0, "decode": 0.0}
        for cid, reps in result.replicas.items():
            p = self.by_id.get(cid)
            if p is None or reps[b] == 0:
                continue
            if stable:
                cap[p.config.role] += p.max_stable_requests_per_s * reps[b]
            else:
                by_bucket = p.capacity_by_bucket_per_s
                rate = p.requests_per_s if by_bucket is None else by_bucket[b]
                cap[p.config.role] += rate * max(reps[b] - spare, 0)
        return cap["colocated"] + min(cap["prefill"], cap["decode"])

    def slack(self, result: MilpResult, b: int) -> float:
        need = self.forecast.rates_per_s[b] * (1.0 + self.req.headroom)
        return math.inf if need <= 0 else self.capacity_at(result, b) / need - 1.0
