"""What a solve answers: the plan per candidate, resource and bucket, and how it was reached.
Apart from solvers.milp so that the diagnosis (solvers.milp_diagnose), which milp calls, can name
the result type without importing milp back."""

from __future__ import annotations

from dataclasses import dataclass

from solvers.milp_plan import Violation

__all__ = ["MilpResult", "SolveStats"]


@dataclass(frozen=True)
class SolveStats:
    method: str  # "closed_form" | "milp" (one model) | "bucketwise" (mixed, many buckets)
    candidates_in: int
    candidates_pruned: int  # dominated (prune_dominated)
    candidates_unpairable: int  # prefill/decode with no partner
    candidates_in_model: int
    buckets_in: int
    buckets_in_model: int  # after merging equal buckets
    options_evaluated: int  # single configurations costed in closed form
    variables: int  # of the whole model solved (0 when none was)
    constraints: int
    warm_start: bool
    bound_source: str | None  # "solver" | "lp_relaxation" | "reserved_rate" | "reserved_box" | "closed_form" | None
    build_s: float
    solver_s: float  # the solver runs (bucket-wise: the LP and every bucket)


@dataclass(frozen=True)
class MilpResult:
    """The answer, per original candidate id, resource name and bucket index.

    objective_usd: the bill over the horizon (recomputed from the integer solution).
    best_bound_usd: no solution costs less (equal to objective_usd when OPTIMAL).
    gap: (objective - bound) / objective when FEASIBLE, else None.
    replicas[id][b]; reserved[resource]; on_demand[resource][b]; used[resource][b] (units in use);
    usd_per_hour[b]: the bill rate in bucket b (all reserved units + on-demand units in use), so
    objective_usd = sum_b usd_per_hour[b] * hours_b.
    selected: ids with a replica in some bucket (single configuration: the selected ones, even at
    zero demand). binding: named inequality constraints with zero slack that involve a nonzero
    variable (solvers.milp_report.binding). infeasibility: filled when INFEASIBLE."""

    status: str
    objective_usd: float | None
    best_bound_usd: float | None
    gap: float | None
    replicas: dict[str, tuple[int, ...]]
    reserved: dict[str, int]
    on_demand: dict[str, tuple[int, ...]]
    used: dict[str, tuple[int, ...]]
    usd_per_hour: tuple[float, ...]
    selected: tuple[str, ...]
    binding: tuple[str, ...]
    infeasibility: tuple[Violation, ...]
    solve_time_s: float
    stats: SolveStats
