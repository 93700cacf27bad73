"""The sizing MILP: how many replicas of which candidates per bucket, and how many reserved units,
at least cost. This package (solvers.milp and the solvers.milp_* modules it drives) is the only
code in the project that runs a MILP solver (solvers.milp_solver: HiGHS through PuLP, CBC when
highspy is missing) or reads its status.

Steps, kept apart: data (`MilpData`, solvers.milp_data) -> `build(data)` -> `Model` (a PuLP
problem with every constraint named; the formulation is in solvers.milp_model) ->
`solve_model(model)` -> `MilpResult`. `solve(data)` runs exact reductions first (below), then
answers the reduced problem and maps the answer back.

Reductions in `solve` (each exact: the optimum's cost is unchanged; `reduce=False` skips them):
1. `prune_dominated`: a candidate with a same-resource, same-pool rival (no incompatibility it
   lacks) of which some m >= 1 replicas take no more units and serve no less in every bucket is
   dropped. Prefill (decode) candidates that can never be paired are dropped.
2. Buckets of equal demand and equal capacity of every candidate are merged (hours summed):
   given r (and y, z), buckets are independent and equal ones have the same best answer. Names
   and answers are reported per original bucket.
3. Single configuration: solvers.milp_fastpath gives each option's exact cost in closed form,
   so the cheapest (ties: the first enumerated) is the optimum (method "closed_form", no solver).
   Mixed: the cheapest single configuration (when the caps allow one) is the warm start.

Mixed over at most MONOLITHIC_MAX_BUCKETS (merged) buckets: one model (method "milp"). Over more:
bucket by bucket (solvers.milp_bucketwise, method "bucketwise"), then, when a gap is left and the
buckets are few and need few replicas (_worth_an_attempt), the whole model, warm started from
that answer, within ATTEMPT_NODES nodes: a proof there makes the answer the model's (method
"milp"); otherwise the cheaper plan and the higher bound are kept. An attempt cut by the clock
(ATTEMPT_MAX_S) is thrown away.

Time: `time_limit_s` bounds the whole call (reductions, builds, every solve, the diagnosis of an
infeasible problem; bench/bench_milp.py (y), (yb): 8,760 distinct buckets answered 0.3-0.4 s
past a 10 s limit on two busy cores). Every loop is bounded by a count, and by the clock. Same
input, same plan, wherever the clock does not cut: the solvers run single-threaded and every
order is fixed. Where it cuts (a solver stopped by its time limit, buckets of the bucket-wise
path left with the plan they had, its passes at other reserved units stopped), the plan depends on the machine's speed, and the result says
so: FEASIBLE with its true gap (or NO_SOLUTION when no plan was had at all).

Status: OPTIMAL (proved: the plan meets a bound within solvers.milp_solver's proof tolerance;
gap None), FEASIBLE (stopped by the time limit, by `gap_rel`, or a bucket-wise answer, with
`gap` = (objective - best bound) / objective, the bound the highest of the solver's, the LP
relaxation's, the reserved box's and reserved-rate bounds (solvers.milp_bucketwise) and the
closed-form one, solvers.milp_fastpath.fluid_bound, so never None), INFEASIBLE (with `infeasibility`: which named constraint cannot hold, with the
numbers), NO_SOLUTION (a limit before any plan).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from solvers.milp_data import (
    LIMIT_PREFIX,
    POOLS,
    Bucket,
    Candidate,
    MilpData,
    Resource,
    SizeLimitError,
    capacity_matrix,
    prune_dominated,
    select_buckets,
)
from solvers.milp_fastpath import Option, enumerate_options, evaluate_options, fluid_bound, shortlist
from solvers.milp_plan import (
    Raw,
    Violation,
    bucket_needs,
    check_plan,
    plan_cost,
    proved,
    totals,
    with_candidates,
)
from solvers.milp_report import binding
from solvers.milp_result import MilpResult, SolveStats

if TYPE_CHECKING:
    from solvers.milp_model import Model

# What runs a solver (PuLP and highspy, and the models built for them) is imported where a model is
# built or solved: the closed form answers one configuration alone, and a plan that needs no MILP
# (the usual one) then loads no solver.

__all__ = [
    "MAX_MODEL_VARIABLES",
    "MONOLITHIC_MAX_BUCKETS",
    "POOLS",
    "STATUSES",
    "Bucket",
    "Candidate",
    "MilpData",
    "MilpResult",
    "Model",
    "Resource",
    "SolveStats",
    "Violation",
    "prune_dominated",
    "solve",
    "solve_model",
]


STATUSES = ("OPTIMAL", "FEASIBLE", "INFEASIBLE", "NO_SOLUTION")


# Variables of a whole model built for the solver. PuLP builds about 100k variables a second in
# Python; beyond this `reduce=False` is refused rather than left to build for many seconds
# outside the solver's time limit (the reduced paths never build a whole model this large).
MAX_MODEL_VARIABLES = 200_000


# Mixed problems with more (merged) buckets than this are solved bucket-wise (solve_bucketwise);
# when that leaves a gap, no more than ATTEMPT_MAX_BUCKETS buckets each need at most
# ATTEMPT_MAX_REPLICAS replicas of the largest candidate (_few_replicas), the whole model is then
# tried, warm started from that answer, within ATTEMPT_NODES branch-and-bound nodes. ATTEMPT_MAX_S
# is a safety net only (an attempt it cuts is dropped).
MONOLITHIC_MAX_BUCKETS = 8
ATTEMPT_NODES = 50
ATTEMPT_MAX_S = 2.0
ATTEMPT_MAX_REPLICAS = 8
ATTEMPT_MAX_BUCKETS = 48


@dataclass(frozen=True)
class _Mapping:
    """From a reduced problem back to the original: model candidate k is original candidate
    `candidate_of[k]`; model bucket j stands for original buckets `labels[j]`."""

    original: MilpData
    candidate_of: tuple[int, ...]
    labels: tuple[tuple[int, ...], ...]


def solve_model(model: Model, *, time_limit_s: float | None = None, warm: bool = False) -> MilpResult:
    """Solve a built model (solvers.milp_solver) and read it; no reductions. `warm`: hand the
    solver the variables' initial values (setInitialValue) as a start."""
    from solvers.milp_model import run_model

    started = time.perf_counter()
    seconds = model.data.time_limit_s if time_limit_s is None else time_limit_s
    raw = run_model(model, seconds, warm=warm)
    n_k, n_b = len(model.data.candidates), len(model.data.buckets)
    stats = SolveStats("milp", n_k, 0, 0, n_k, n_b, n_b, 0, model.n_variables, len(model.constraints), warm,
                       raw.bound_source, model.build_s, raw.solver_s)  # fmt: skip
    mapping = _Mapping(model.data, tuple(range(n_k)), model.labels)
    return _assemble(raw, mapping, stats, started - model.build_s)


def _empty(raw: Raw, orig: MilpData, stats: SolveStats, started: float) -> MilpResult:
    from solvers.milp_diagnose import diagnose

    zeros = tuple(0 for _ in orig.buckets)
    return MilpResult(
        status=raw.status,
        objective_usd=None,
        best_bound_usd=None,
        gap=None,
        replicas={c.id: zeros for c in orig.candidates},
        reserved={res.name: 0 for res in orig.resources},
        on_demand={res.name: zeros for res in orig.resources},
        used={res.name: zeros for res in orig.resources},
        usd_per_hour=tuple(0.0 for _ in orig.buckets),
        selected=(),
        binding=(),
        infeasibility=diagnose(orig, solve, started + orig.time_limit_s)
        if raw.status == "INFEASIBLE"
        else (),
        solve_time_s=time.perf_counter() - started,
        stats=stats,
    )


def _assemble(raw: Raw, mapping: _Mapping, stats: SolveStats, started: float) -> MilpResult:
    orig = mapping.original
    if raw.x is None or raw.r is None:
        return _empty(raw, orig, stats, started)
    n_b = len(orig.buckets)
    bucket_class = np.zeros(n_b, dtype=np.int64)
    for j, members in enumerate(mapping.labels):
        bucket_class[list(members)] = j
    xs = np.zeros((len(orig.candidates), n_b), dtype=np.int64)
    for k, k_orig in enumerate(mapping.candidate_of):
        xs[k_orig] = raw.x[k][bucket_class]
    rs = np.asarray(raw.r, dtype=np.int64)  # the reduced data keeps the resources as they are
    check_plan(orig, xs)
    used, on_demand, rate = totals(orig, xs, rs)
    objective = math.fsum(float(v) * b.hours for v, b in zip(rate, orig.buckets, strict=True))
    if raw.y is not None:
        chosen = {mapping.candidate_of[k] for k in np.flatnonzero(raw.y)}
    else:
        chosen = {int(k) for k in np.flatnonzero(xs.any(axis=1))}
    status, bound, source = raw.status, raw.bound_usd, stats.bound_source
    if status == "FEASIBLE" and bound is None:  # the solver proved nothing: the closed form did
        bound, source = fluid_bound(orig), "closed_form"
    gap = None
    if status == "OPTIMAL" or (bound is not None and proved(objective, bound)):
        status, bound = "OPTIMAL", objective
    elif bound is not None:
        bound = min(bound, objective)
        gap = (objective - bound) / objective if objective > 0 else 0.0
    return MilpResult(
        status=status,
        objective_usd=objective,
        best_bound_usd=bound,
        gap=gap,
        replicas={c.id: tuple(xs[k].tolist()) for k, c in enumerate(orig.candidates)},
        reserved={res.name: int(rs[t]) for t, res in enumerate(orig.resources)},
        on_demand={res.name: tuple(on_demand[t].tolist()) for t, res in enumerate(orig.resources)},
        used={res.name: tuple(used[t].tolist()) for t, res in enumerate(orig.resources)},
        usd_per_hour=tuple(float(v) for v in rate),
        selected=tuple(c.id for k, c in enumerate(orig.candidates) if k in chosen),
        binding=binding(orig, xs, rs, chosen),
        infeasibility=(),
        solve_time_s=time.perf_counter() - started,
        stats=replace(stats, bound_source=source),
    )


def _pairable(data: MilpData, candidates: Sequence[Candidate]) -> tuple[list[Candidate], int]:
    """Drop prefill (decode) candidates that can never have a decode (prefill) partner: none
    that is compatible with them at all, or, with one configuration, none in their group."""
    conflicts = data.conflicts()
    none: frozenset[str] = frozenset()

    def partnered(c: Candidate) -> bool:
        other = "decode" if c.pool == "prefill" else "prefill"
        mine = conflicts.get(c.id, none)
        return any(
            p.pool == other and p.id not in mine and (not data.single_config or p.group == c.group)
            for p in candidates
        )

    ok = [c for c in candidates if c.pool == "colocated" or partnered(c)]
    return ok, len(candidates) - len(ok)


def _merge_buckets(data: MilpData) -> tuple[MilpData, tuple[tuple[int, ...], ...]]:
    """Buckets of equal demand and equal capacities as one, hours summed, in first-seen order."""
    capacity = capacity_matrix(data)
    classes: dict[tuple[float, bytes], list[int]] = {}
    for b, bucket in enumerate(data.buckets):
        classes.setdefault((bucket.demand_per_s, capacity[:, b].tobytes()), []).append(b)
    labels = tuple(tuple(members) for members in classes.values())
    return select_buckets(data, labels), labels


def _refuse_if_large(data: MilpData) -> None:
    n_k, n_b, n_t = len(data.candidates), len(data.buckets), len(data.resources)
    estimate = n_k * (n_b + 1) + n_t * (n_b + 1) + 2 * n_b
    if estimate > MAX_MODEL_VARIABLES:
        raise SizeLimitError(
            f"model variables {LIMIT_PREFIX} {MAX_MODEL_VARIABLES}, got about {estimate} "
            f"({n_k} candidates x {n_b} distinct buckets after reductions)"
        )


def solve(data: MilpData, *, reduce: bool = True) -> MilpResult:
    """Cheapest sizing for `data` within `data.time_limit_s` (the whole call). `reduce=False`
    builds and solves the full model as is (the reference, for checks)."""
    started = time.perf_counter()
    deadline = started + data.time_limit_s
    if not reduce:
        from solvers.milp_model import build

        _refuse_if_large(data)
        model = build(data)
        result = solve_model(model, time_limit_s=deadline - time.perf_counter() - model.build_s)
        return replace(result, solve_time_s=time.perf_counter() - started)
    kept, n_pruned = prune_dominated(
        data.candidates, respect_groups=data.single_config, incompatible_pairs=data.incompatible_pairs
    )
    usable, n_unpairable = _pairable(data, kept)
    if not usable:  # nothing can serve: the model says so (or covers an all-zero demand)
        usable, n_unpairable = list(kept), 0
    index_of = {c.id: i for i, c in enumerate(data.candidates)}
    sub, labels = _merge_buckets(with_candidates(data, [index_of[c.id] for c in usable]))
    mapping = _Mapping(data, tuple(index_of[c.id] for c in sub.candidates), labels)
    stats = SolveStats("closed_form", len(data.candidates), n_pruned, n_unpairable, len(sub.candidates),
                       len(data.buckets), len(sub.buckets), 0, 0, 0, False, None, 0.0, 0.0)  # fmt: skip
    if data.single_config:
        raw, stats = _closed_form(sub, stats)
    else:
        raw, stats = _mixed(sub, data.candidates, labels, stats, deadline)
    return _assemble(raw, mapping, stats, started)


def _closed_form(sub: MilpData, stats: SolveStats) -> tuple[Raw, SolveStats]:
    """One configuration: the cheapest option, exact (solvers.milp_fastpath)."""
    t0 = time.perf_counter()
    options = evaluate_options(sub, enumerate_options(sub, range(len(sub.candidates))))
    best = shortlist(options, 1)[0] if options else None
    stats = replace(stats, options_evaluated=len(options))
    if best is None or not math.isfinite(best.cost_usd):
        return Raw("INFEASIBLE", None, None, None, None, None, time.perf_counter() - t0), stats
    xs = _option_replicas(sub, best)
    ys = np.zeros(len(sub.candidates), dtype=np.int64)
    ys[list(best.members)] = 1
    raw = Raw("OPTIMAL", xs, _option_reserved(sub, best), ys, None, None, time.perf_counter() - t0)
    return raw, replace(stats, solver_s=raw.solver_s)


def _mixed(
    sub: MilpData, layout_of: Sequence[Candidate], labels: tuple[tuple[int, ...], ...], stats: SolveStats,
    deadline: float,
) -> tuple[Raw, SolveStats]:  # fmt: skip
    """Any mix: one model over few buckets, else bucket by bucket (module docstring)."""
    from solvers.milp_bucketwise import solve_bucketwise
    from solvers.milp_model import build, run_model, set_initial

    warm = None
    try:
        options = evaluate_options(sub, enumerate_options(sub, range(len(sub.candidates))))
        stats = replace(stats, options_evaluated=len(options))
        best = shortlist(options, 1)[0] if options else None
        warm = best if best is not None and math.isfinite(best.cost_usd) else None
    except ValueError:  # too many pairs to cost: go without a warm start
        pass
    if len(sub.buckets) <= MONOLITHIC_MAX_BUCKETS:
        model = build(sub, _labels=labels, _layout_of=layout_of)
        if warm is not None:
            set_initial(model, _option_replicas(sub, warm), _option_reserved(sub, warm))
        raw = run_model(model, deadline - time.perf_counter() - model.build_s, warm=warm is not None)
        return raw, replace(stats, method="milp", variables=model.n_variables,
                            constraints=len(model.constraints), warm_start=warm is not None,
                            bound_source=raw.bound_source, build_s=model.build_s, solver_s=raw.solver_s)  # fmt: skip
    raw = solve_bucketwise(sub, labels, layout_of, deadline)
    stats = replace(
        stats, method="bucketwise", warm_start=True, bound_source=raw.bound_source, solver_s=raw.solver_s
    )
    if not _worth_an_attempt(sub, raw):
        return raw, stats
    assert raw.x is not None and raw.r is not None
    model = build(sub, _labels=labels, _layout_of=layout_of)
    set_initial(model, raw.x, raw.r)
    stats = replace(
        stats, variables=model.n_variables, constraints=len(model.constraints), build_s=model.build_s
    )
    attempt = _attempt(model, deadline)
    if attempt is None:
        return raw, stats
    if attempt.status == "OPTIMAL":
        return (replace(attempt, solver_s=raw.solver_s + attempt.solver_s),
                replace(stats, method="milp", bound_source=None, solver_s=raw.solver_s + attempt.solver_s))  # fmt: skip
    better = _better(sub, raw, attempt)
    return better, replace(stats, bound_source=better.bound_source, solver_s=better.solver_s)


def _attempt(model: Model, deadline: float) -> Raw | None:
    """The whole model within ATTEMPT_NODES nodes and ATTEMPT_MAX_S (at most a quarter of what is
    left): forecasts of a few distinct levels and replicas are proved in a few nodes. None when
    the time ran out first: what the solver had then depends on the machine's speed, and a plan
    must not (a node count stops it at the same place everywhere)."""
    from solvers.milp_model import run_model
    from solvers.milp_solver import MIN_SOLVER_S

    seconds = min(ATTEMPT_MAX_S, (deadline - time.perf_counter()) / 4) - model.build_s
    if seconds < MIN_SOLVER_S:
        return None
    raw = run_model(model, seconds, warm=True, max_nodes=ATTEMPT_NODES)
    return None if raw.timed_out else raw


def _worth_an_attempt(data: MilpData, raw: Raw) -> bool:
    """After the bucket-wise path: a gap left (beyond `gap_rel`), few buckets needing few
    replicas (_few_replicas), so that the whole model may close it in ATTEMPT_NODES nodes."""
    if raw.status != "FEASIBLE" or raw.x is None or raw.r is None or len(data.buckets) > ATTEMPT_MAX_BUCKETS:
        return False
    if not _few_replicas(data):
        return False
    cost = plan_cost(data, raw.x, raw.r)
    if raw.bound_usd is not None and cost > 0:
        gap = (cost - raw.bound_usd) / cost
        if proved(cost, raw.bound_usd) or gap <= (data.gap_rel or 0.0):
            return False
    return True


def _few_replicas(data: MilpData) -> bool:
    """Whether the largest candidate covers every bucket with at most ATTEMPT_MAX_REPLICAS
    replicas: then the LP relaxation is far from the integers (a bucket-wise answer's gap is
    wide) and the solver's cuts close it in a few nodes; with many replicas the LP is close and
    the one model's search is long."""
    need = bucket_needs(data)
    biggest = capacity_matrix(data).max(axis=0)
    return bool(np.all(np.ceil(need / biggest) + data.spare_replicas <= ATTEMPT_MAX_REPLICAS))


def _better(data: MilpData, found: Raw, attempt: Raw) -> Raw:
    """The bucket-wise answer `found`, or the attempt's when it costs less (ties keep `found`),
    with the higher of their bounds."""
    if found.status in ("OPTIMAL", "INFEASIBLE") or attempt.x is None or attempt.r is None:
        return found
    if found.x is None or found.r is None:  # the bucket-wise path ran out of time, the attempt has a plan
        return replace(attempt, solver_s=found.solver_s + attempt.solver_s)
    cheaper = plan_cost(data, attempt.x, attempt.r) < plan_cost(data, found.x, found.r) * (1.0 - 1e-12)
    pick = attempt if cheaper else found
    bounds = [(b, src) for b, src in ((found.bound_usd, found.bound_source),
                                      (attempt.bound_usd, attempt.bound_source)) if b is not None]  # fmt: skip
    bound, source = max(bounds, key=lambda bs: bs[0]) if bounds else (None, None)
    return replace(pick, status="FEASIBLE", bound_usd=bound, bound_source=source,
                   solver_s=found.solver_s + attempt.solver_s)  # fmt: skip


def _option_replicas(data: MilpData, option: Option) -> np.ndarray:
    """The option's replicas as a (candidates of `data`) x buckets array."""
    xs = np.zeros((len(data.candidates), len(data.buckets)), dtype=np.int64)
    for k, reps in zip(option.members, option.replicas, strict=True):
        xs[k] = reps
    return xs


def _option_reserved(data: MilpData, option: Option) -> np.ndarray:
    rs = np.zeros(len(data.resources), dtype=np.int64)
    for t, units in option.reserved:
        rs[t] = units
    return rs


def __getattr__(name: str) -> object:
    """`build` and `Model` (solvers.milp_model) on first use: importing them loads PuLP."""
    if name in ("build", "Model"):
        from solvers import milp_model

        return getattr(milp_model, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
