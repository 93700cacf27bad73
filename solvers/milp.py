"""The sizing MILP: how many replicas of which candidates per bucket, and how many reserved units,
at least cost (PuLP model; CBC solver, and HiGHS in-process for the bucket-wise path's one-bucket
models). This package (solvers.milp and the solvers.milp_* modules it drives) is the only code in
the project that runs a MILP solver or reads a PuLP status.

Steps, kept apart: data (`MilpData`, solvers.milp_data) -> `build(data)` -> `Model` (a PuLP
problem with every constraint named; the formulation is in solvers.milp_model) ->
`solve_model(model)` -> `MilpResult`. `solve(data)` runs exact reductions first (below), then
builds and solves the reduced model and maps the answer back.

Reductions in `solve` (each exact: the optimum's cost is unchanged; `reduce=False` skips them):
1. `prune_dominated`: a candidate with a same-resource, same-pool rival of which some m >= 1
   replicas take no more units and serve no less (m = 1: the rival is at least as good; m >= 2:
   e.g. two TP1 replicas beat one TP2 that serves less than both) is dropped. Prefill (decode)
   candidates that can never be paired are dropped.
2. Buckets of equal demand are merged (hours summed): given r (and y), buckets are independent
   and equal ones have the same best answer. Names and answers are reported per original bucket.
3. Single configuration: solvers.milp_fastpath gives each option's exact cost in closed form;
   the MILP gets the SHORTLIST cheapest options (everything left out costs at least as much as
   each option kept) and the cheapest as a warm start. Mixed: the cheapest single configuration
   (when the caps allow one) is the warm start.

Mixed over more than MONOLITHIC_MAX_BUCKETS (merged) buckets: one model is hopeless for CBC
(see solvers.milp_bucketwise), so the LP relaxation of the whole model fixes the reserved units,
each bucket is then sized alone (HiGHS, in this process), and the bound is the better of the LP
relaxation's and the reserved-rate bound (every bucket alone with each GPU at min(reserved,
on-demand) price: it keeps the integer rounding the LP loses, and proves the plan optimal when
the optimum holds no reserved units). When a gap is left and the buckets are few and need few
replicas (_worth_an_attempt), CBC tries the whole model, warm started from that answer, within
ATTEMPT_NODES nodes: a proof there makes the answer CBC's (method "milp"); otherwise the
cheaper plan and the higher bound are kept. `stats.method` says which path ran. An attempt cut
by ATTEMPT_MAX_S is thrown away: what CBC had by then depends on the machine's speed, and the
same input must give the same plan.

Time: `time_limit_s` bounds the whole call. CBC gets what is left after the build, less the
build's own duration again (PuLP writes the model file and reads the solution back in about
that time).

Status: OPTIMAL (proved; gap None), FEASIBLE (stopped by the time limit or by `gap_rel` with a
solution, or a bucket-wise answer: `gap` = (objective - best bound) / objective, the bound from
CBC's log, the LP relaxation or the reserved-rate bound, whichever is highest; None only if no
bound could be had; a bucket-wise answer whose bound meets it is OPTIMAL), INFEASIBLE (with
`infeasibility`: which named constraint cannot hold, with the numbers), NO_SOLUTION (time limit
before any solution).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pulp

from solvers.milp_bucketwise import solve_bucketwise
from solvers.milp_data import (
    LIMIT_PREFIX,
    POOLS,
    Bucket,
    Candidate,
    MilpData,
    Resource,
    prune_dominated,
)
from solvers.milp_fastpath import (
    COVER_RTOL,
    Option,
    enumerate_options,
    evaluate_options,
    replicas_needed,
    shortlist,
)
from solvers.milp_model import (
    MIN_SOLVER_S,
    Model,
    Raw,
    bucket_needs,
    build,
    cbc_solver,
    layout,
    matrices,
    read_status,
    run_cbc,
    set_initial,
    totals,
)

__all__ = [
    "BINDING_RTOL",
    "MAX_MODEL_VARIABLES",
    "MONOLITHIC_MAX_BUCKETS",
    "POOLS",
    "SHORTLIST",
    "STATUSES",
    "Bucket",
    "Candidate",
    "MilpData",
    "MilpResult",
    "Model",
    "Resource",
    "SolveStats",
    "Violation",
    "build",
    "prune_dominated",
    "solve",
    "solve_model",
]


STATUSES = ("OPTIMAL", "FEASIBLE", "INFEASIBLE", "NO_SOLUTION")


# Variables of the model handed to CBC (after reductions). PuLP builds and writes about 30k
# variables a second in Python; beyond this a request is refused rather than left to build for
# many seconds outside the solver's time limit.
MAX_MODEL_VARIABLES = 200_000


# Single configurations handed to the MILP after the closed-form ranking (their costs are exact,
# so any N >= 1 keeps the optimum; the MILP confirms it among the N cheapest). Bench (b): 8 took
# 0.65 s, 4 took 0.38 s, 2 took 0.36 s.
SHORTLIST = 4


# A constraint is binding when its slack is within this fraction of max(1, |right-hand side|).
BINDING_RTOL = 1e-6


# Below this relative gap a stop "within gap tolerance" counts as proved optimal.
OPTIMAL_GAP = 1e-9


# Mixed problems with more (merged) buckets than this are solved bucket-wise (solve_bucketwise);
# when that leaves a gap, no more than ATTEMPT_MAX_BUCKETS buckets each need at most
# ATTEMPT_MAX_REPLICAS replicas of the largest candidate (_few_replicas), CBC then tries the whole
# model, warm started from that answer, within ATTEMPT_NODES branch-and-bound nodes. Measured:
# bench (b) mixed as one model, 8 buckets: 2.4 s to prove, 12: not proved in 20 s (12 replicas
# at its peak); examples/week-forecast.yaml over the catalog (15 distinct levels, 1 replica of
# the largest): 2 nodes, 0.09-0.11 s; the same with 5% noise on every hour (165 levels): 50
# nodes take over 2 s; the tests' random instances: 50 nodes in 0.02-0.35 s. ATTEMPT_MAX_S is a
# safety net only (an attempt it cuts is dropped, see the module docstring).
MONOLITHIC_MAX_BUCKETS = 8
ATTEMPT_NODES = 50
ATTEMPT_MAX_S = 2.0
ATTEMPT_MAX_REPLICAS = 8
ATTEMPT_MAX_BUCKETS = 48


_FAMILIES = ("demand", "colocated_demand", "prefill_demand", "decode_demand", "units", "inventory")


@dataclass(frozen=True)
class Violation:
    """Why a problem is infeasible, in the model's own terms: the named constraint that cannot
    hold, what it would need and the most it allows (`unit`: "per_s" for demand, "units" for a
    resource, "configs" for the one-configuration rule), and what the numbers are."""

    constraint: str
    needed: float
    limit: float
    unit: str
    note: str


@dataclass(frozen=True)
class SolveStats:
    method: str  # "milp" (one model) | "bucketwise" (mixed, many buckets: see solve_bucketwise)
    candidates_in: int
    candidates_pruned: int  # dominated (prune_dominated)
    candidates_unpairable: int  # prefill/decode with no partner pool
    candidates_in_model: int
    buckets_in: int
    buckets_in_model: int  # after merging equal demands
    options_evaluated: int  # single configurations costed in closed form
    options_in_model: int  # of those, handed to the MILP (single configuration only)
    variables: int
    constraints: int
    warm_start: bool
    bound_source: str | None  # "solver_log" | "lp_relaxation" | "reserved_rate" | None
    build_s: float
    solver_s: float  # PuLP's write + CBC + PuLP's read (bucket-wise: the LP and every bucket)


@dataclass(frozen=True)
class MilpResult:
    """The answer, per original candidate id, resource name and bucket index.

    objective_usd: the bill over the horizon (recomputed from the integer solution).
    best_bound_usd: no solution costs less (equal to objective_usd when OPTIMAL).
    gap: (objective - bound) / objective when FEASIBLE (None if no bound could be had), else None.
    replicas[id][b]; reserved[resource]; on_demand[resource][b]; used[resource][b] (units in use);
    usd_per_hour[b]: the bill rate in bucket b (all reserved units + on-demand units in use), so
    objective_usd = sum_b usd_per_hour[b] * hours_b.
    selected: ids with a replica in some bucket (single configuration: the selected ones, even at
    zero demand). binding: named inequality constraints with zero slack that involve a nonzero
    variable, sorted by family (demand, colocated_demand, prefill_demand, decode_demand, units,
    inventory), key and bucket. In the split form, `demand_b{b}` binds when the bucket has no
    spare capacity at all, and then so do the coverage rows of the pools that hold it tight.
    infeasibility: filled when INFEASIBLE."""

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


def _check_cover(data: MilpData, xs: np.ndarray) -> None:
    """The solution read back must cover every bucket (else a solver or tolerance slip)."""
    _, capacity = matrices(data)
    col, pre, dec = capacity @ xs
    short = col + np.minimum(pre, dec) < bucket_needs(data) * (1.0 - 1e-6)
    if short.any():
        b = int(np.flatnonzero(short)[0])
        raise RuntimeError(f"the solver's replicas do not cover bucket {b}")


def _binding(data: MilpData, xs: np.ndarray, rs: np.ndarray) -> tuple[str, ...]:
    """Inequality rows (module docstring) with zero slack at the solution and a nonzero variable,
    evaluated on the original buckets with o = max(0, used - r) and, in the split form, the
    shares at their largest (s_col = colocated capacity, s_dis = the smaller pool's)."""
    has_col, has_dis = layout(data.candidates)
    rhs = bucket_needs(data) * (1.0 - COVER_RTOL)
    tol = BINDING_RTOL * np.maximum(1.0, rhs)
    _, capacity = matrices(data)
    col, pre, dec = capacity @ xs
    found: list[tuple[int, str, int]] = []

    def mark(family: str, key: str, rows: np.ndarray) -> None:
        found.extend((_FAMILIES.index(family), key, int(b)) for b in np.flatnonzero(rows))

    if has_col and has_dis:
        tight = (col + np.minimum(pre, dec) - rhs <= tol) & (rhs > 0)
        mark("demand", "", tight)
        mark("colocated_demand", "", tight & (col > 0))
        mark("prefill_demand", "", tight & (pre > 0) & (pre <= dec + tol))
        mark("decode_demand", "", tight & (dec > 0) & (dec <= pre + tol))
    elif has_col:
        mark("demand", "", (col - rhs <= tol) & (col > 0))
    else:
        mark("prefill_demand", "", (pre - rhs <= tol) & (pre > 0))
        mark("decode_demand", "", (dec - rhs <= tol) & (dec > 0))
    used, _, _ = totals(data, xs, rs)
    in_model = {c.resource for c in data.candidates}
    for t, res in enumerate(data.resources):
        if res.name not in in_model:
            continue
        held = np.maximum(used[t], rs[t])  # r + o
        mark("units", res.name, (used[t] >= rs[t]) & (held > 0))
        if res.inventory is not None:
            mark("inventory", res.name, (held >= res.inventory) & (held > 0))
    names = []
    for family, key, b in sorted(found):
        parts = [_FAMILIES[family], key, f"b{b}"] if key else [_FAMILIES[family], f"b{b}"]
        names.append("_".join(parts))
    return tuple(names)


@dataclass(frozen=True)
class _Mapping:
    """From a reduced problem back to the original: model candidate k is original candidate
    `candidate_of[k]`; model bucket j stands for original buckets `labels[j]`."""

    original: MilpData
    candidate_of: tuple[int, ...]
    labels: tuple[tuple[int, ...], ...]


def solve_model(model: Model, *, time_limit_s: float | None = None, warm: bool = False) -> MilpResult:
    """Solve a built model with CBC (serial search: same input, same answer) and read it; no
    reductions. `warm`: hand CBC the variables' initial values (setInitialValue) as a start."""
    started = time.perf_counter()
    seconds = model.data.time_limit_s if time_limit_s is None else time_limit_s
    raw = run_cbc(model, seconds, warm=warm)
    n_k, n_b = len(model.data.candidates), len(model.data.buckets)
    stats = SolveStats("milp", n_k, 0, 0, n_k, n_b, n_b, 0, 0, model.n_variables, len(model.constraints), warm,
                       raw.bound_source, model.build_s, raw.solver_s)  # fmt: skip
    mapping = _Mapping(model.data, tuple(range(n_k)), model.labels)
    return _assemble(raw, mapping, stats, started - model.build_s)


def _assemble(raw: Raw, mapping: _Mapping, stats: SolveStats, started: float) -> MilpResult:
    orig = mapping.original
    n_b = len(orig.buckets)
    zeros = tuple(0 for _ in range(n_b))
    if raw.x is None or raw.r is None:
        return MilpResult(
            status=raw.status,
            objective_usd=None,
            best_bound_usd=None,
            gap=None,
            replicas={c.id: zeros for c in orig.candidates},
            reserved={res.name: 0 for res in orig.resources},
            on_demand={res.name: zeros for res in orig.resources},
            used={res.name: zeros for res in orig.resources},
            usd_per_hour=tuple(0.0 for _ in range(n_b)),
            selected=(),
            binding=(),
            infeasibility=_diagnose(orig) if raw.status == "INFEASIBLE" else (),
            solve_time_s=time.perf_counter() - started,
            stats=stats,
        )
    bucket_class = np.zeros(n_b, dtype=np.int64)
    for j, members in enumerate(mapping.labels):
        bucket_class[list(members)] = j
    xs = np.zeros((len(orig.candidates), n_b), dtype=np.int64)
    for k, k_orig in enumerate(mapping.candidate_of):
        xs[k_orig] = raw.x[k][bucket_class]
    rs = np.asarray(raw.r, dtype=np.int64)  # the reduced data keeps the resources as they are
    _check_cover(orig, xs)
    used, on_demand, rate = totals(orig, xs, rs)
    objective = math.fsum(float(v) * b.hours for v, b in zip(rate, orig.buckets, strict=True))
    if raw.y is not None:
        chosen = {mapping.candidate_of[k] for k in np.flatnonzero(raw.y)}
    else:
        chosen = {int(k) for k in np.flatnonzero(xs.any(axis=1))}
    status, bound, gap = raw.status, raw.bound_usd, None
    if bound is not None:
        bound = min(bound, objective)
        rel = (objective - bound) / objective if objective > 0 else 0.0
        gap = rel if rel > OPTIMAL_GAP else None
    if status == "OPTIMAL" and gap is not None:
        status = "FEASIBLE"  # stopped within gap_rel: not proved
    if status == "FEASIBLE" and gap is None and bound is not None:
        status = "OPTIMAL"  # the bound meets the objective
    if status == "OPTIMAL":
        bound = objective
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
        binding=_binding(orig, xs, rs),
        infeasibility=(),
        solve_time_s=time.perf_counter() - started,
        stats=stats,
    )


def _pairable(candidates: Sequence[Candidate], single_config: bool) -> tuple[list[Candidate], int]:
    """Drop prefill (decode) candidates that can never have a decode (prefill) partner: none at
    all, or, with one configuration, none in their group."""
    if single_config:
        pre = {c.group for c in candidates if c.pool == "prefill"}
        dec = {c.group for c in candidates if c.pool == "decode"}
        partner = {"prefill": dec, "decode": pre}
        ok = [c for c in candidates if c.pool == "colocated" or c.group in partner[c.pool]]
    else:
        both = {"prefill", "decode"} <= {c.pool for c in candidates}
        ok = [c for c in candidates if c.pool == "colocated" or both]
    return ok, len(candidates) - len(ok)


def _merge_buckets(data: MilpData) -> tuple[tuple[Bucket, ...], tuple[tuple[int, ...], ...]]:
    """Buckets of equal demand as one, hours summed, in first-seen order."""
    classes: dict[float, list[int]] = {}
    for b, bucket in enumerate(data.buckets):
        classes.setdefault(bucket.demand_per_s, []).append(b)
    labels = tuple(tuple(members) for members in classes.values())
    merged = tuple(
        Bucket(data.buckets[m[0]].demand_per_s, math.fsum(data.buckets[b].hours for b in m)) for m in labels
    )
    return merged, labels


def _refuse_if_large(data: MilpData) -> None:
    n_k, n_b, n_t = len(data.candidates), len(data.buckets), len(data.resources)
    estimate = n_k * (n_b + 1) + n_t * (n_b + 1) + 2 * n_b
    if estimate > MAX_MODEL_VARIABLES:
        raise ValueError(
            f"model variables {LIMIT_PREFIX} {MAX_MODEL_VARIABLES}, got about {estimate} "
            f"({n_k} candidates x {n_b} distinct buckets after reductions)"
        )


def solve(data: MilpData, *, reduce: bool = True) -> MilpResult:
    """Cheapest sizing for `data` within `data.time_limit_s` (the whole call: reductions, build,
    CBC). `reduce=False` builds and solves the full model as is (for checks)."""
    started = time.perf_counter()
    deadline = started + data.time_limit_s
    if not reduce:
        _refuse_if_large(data)
        model = build(data)
        result = solve_model(model, time_limit_s=_solver_seconds(deadline, model))
        return replace(result, solve_time_s=time.perf_counter() - started)

    kept, n_pruned = prune_dominated(data.candidates, respect_groups=data.single_config)
    usable, n_unpairable = _pairable(kept, data.single_config)
    if not usable:  # nothing can serve: the model says so (or covers an all-zero demand)
        usable, n_unpairable = list(kept), 0
    merged, labels = _merge_buckets(data)
    reduced = replace(data, buckets=merged, candidates=tuple(usable))
    in_model = list(range(len(reduced.candidates)))
    options: list[Option] = []
    try:
        options = evaluate_options(reduced, enumerate_options(reduced, in_model))
    except ValueError:
        if data.single_config:
            raise
        options = []  # mixed: the warm start is a nicety; too many pairs to cost, go without
    best = shortlist(options, SHORTLIST if data.single_config else 1) if options else []
    warm = best[0] if best and math.isfinite(best[0].cost_usd) else None
    if data.single_config and best:
        in_model = sorted({k for opt in best for k in opt.members})
    sub = replace(reduced, candidates=tuple(reduced.candidates[k] for k in in_model))
    _refuse_if_large(sub)
    warm_x = _option_replicas(sub, warm, reduced) if warm is not None else None
    warm_r = _option_reserved(sub, warm) if warm is not None else None
    method = "milp"
    model = build(sub, _labels=labels, _layout_of=data.candidates)
    if warm is not None and warm_x is not None and warm_r is not None:
        pos = {c.id: k for k, c in enumerate(sub.candidates)}
        set_initial(model, warm_x, warm_r, [pos[reduced.candidates[k].id] for k in warm.members])
    if not data.single_config and len(sub.buckets) > MONOLITHIC_MAX_BUCKETS:
        method = "bucketwise"
        raw, _ = solve_bucketwise(sub, labels, data.candidates, warm_x, deadline, full=model)
        if _worth_an_attempt(sub, raw):
            assert raw.x is not None and raw.r is not None
            set_initial(model, raw.x, raw.r)
            attempt = _attempt(model, deadline, warm=True)
            if attempt is not None and attempt.status == "OPTIMAL":
                method = "milp"
                raw = replace(attempt, solver_s=raw.solver_s + attempt.solver_s)
            elif attempt is not None:
                raw = _better(sub, raw, attempt)
    else:
        raw = run_cbc(model, _solver_seconds(deadline, model), warm=warm_x is not None)
    index_of = {c.id: i for i, c in enumerate(data.candidates)}
    mapping = _Mapping(data, tuple(index_of[c.id] for c in sub.candidates), labels)
    stats = SolveStats(
        method=method,
        candidates_in=len(data.candidates),
        candidates_pruned=n_pruned,
        candidates_unpairable=n_unpairable,
        candidates_in_model=len(sub.candidates),
        buckets_in=len(data.buckets),
        buckets_in_model=len(sub.buckets),
        options_evaluated=len(options),
        options_in_model=len(best) if data.single_config else 0,
        variables=model.n_variables,
        constraints=len(model.constraints),
        warm_start=warm is not None,
        bound_source=raw.bound_source,
        build_s=model.build_s,
        solver_s=raw.solver_s,
    )
    return _assemble(raw, mapping, stats, started)


def _attempt(model: Model, deadline: float, *, warm: bool) -> Raw | None:
    """The whole model by CBC within ATTEMPT_NODES nodes and ATTEMPT_MAX_S (at most a quarter of
    what is left): forecasts of a few distinct levels and replicas are proved in a few nodes.
    None when the time ran out first: what CBC had then depends on the machine's speed, and a
    plan must not (a node count stops it at the same place everywhere)."""
    seconds = min(ATTEMPT_MAX_S, (deadline - time.perf_counter()) / 4) - model.build_s
    if seconds < MIN_SOLVER_S:
        return None
    raw = run_cbc(model, seconds, warm=warm, want_bound=False, max_nodes=ATTEMPT_NODES)
    return None if raw.timed_out else raw


def _worth_an_attempt(data: MilpData, raw: Raw) -> bool:
    """After the bucket-wise path: a gap left (beyond `gap_rel`), few buckets needing few
    replicas (_few_replicas), so that the whole model may close it in ATTEMPT_NODES nodes."""
    if raw.status != "FEASIBLE" or raw.x is None or len(data.buckets) > ATTEMPT_MAX_BUCKETS:
        return False
    if not _few_replicas(data):
        return False
    cost = _cost(data, raw)
    if raw.bound_usd is not None and cost > 0:
        gap = (cost - raw.bound_usd) / cost
        if gap <= max(OPTIMAL_GAP, data.gap_rel or 0.0):
            return False
    return True


def _few_replicas(data: MilpData) -> bool:
    """Whether the largest candidate covers every bucket with at most ATTEMPT_MAX_REPLICAS
    replicas: then the LP relaxation is far from the integers (a bucket-wise answer's gap is
    wide) and CBC's cuts close it in a few nodes; with many replicas the LP is close and the one
    model's search is long (bench (b): its root alone takes 1.5 s)."""
    need = bucket_needs(data)
    biggest = max(c.capacity_per_s for c in data.candidates)
    return int(replicas_needed(need, biggest).max(initial=0)) <= ATTEMPT_MAX_REPLICAS


def _cost(data: MilpData, raw: Raw) -> float:
    """The bill of an answer in `data`'s (merged) buckets."""
    assert raw.x is not None and raw.r is not None
    _, _, rate = totals(data, raw.x, np.asarray(raw.r, dtype=np.int64))
    return math.fsum(float(v) * b.hours for v, b in zip(rate, data.buckets, strict=True))


def _better(data: MilpData, found: Raw, attempt: Raw) -> Raw:
    """The bucket-wise answer `found`, or the attempt's when it costs less (ties keep `found`),
    with the higher of their bounds."""
    if found.status in ("OPTIMAL", "INFEASIBLE") or attempt.x is None:
        return found
    if found.x is None:  # the bucket-wise path ran out of time, the attempt has a plan
        return replace(attempt, solver_s=found.solver_s + attempt.solver_s)
    pick = attempt if _cost(data, attempt) < _cost(data, found) * (1.0 - 1e-12) else found
    bounds = [(b, src) for b, src in ((found.bound_usd, found.bound_source),
                                      (attempt.bound_usd, attempt.bound_source)) if b is not None]  # fmt: skip
    bound, source = max(bounds, key=lambda bs: bs[0]) if bounds else (None, None)
    return replace(pick, status="FEASIBLE", bound_usd=bound, bound_source=source,
                   solver_s=found.solver_s + attempt.solver_s)  # fmt: skip


def _solver_seconds(deadline: float, model: Model) -> float:
    """What is left for CBC: the time limit less what has run, less the build's duration again
    for PuLP to write the model and read the answer."""
    return deadline - time.perf_counter() - model.build_s


def _option_replicas(data: MilpData, option: Option, source: MilpData) -> np.ndarray:
    """The option's replicas as a (candidates of `data`) x buckets array."""
    pos = {c.id: k for k, c in enumerate(data.candidates)}
    xs = np.zeros((len(data.candidates), len(data.buckets)), dtype=np.int64)
    for k, reps in zip(option.members, option.replicas, strict=True):
        xs[pos[source.candidates[k].id]] = reps
    return xs


def _option_reserved(data: MilpData, option: Option) -> np.ndarray:
    rs = np.zeros(len(data.resources), dtype=np.int64)
    for t, units in option.reserved:
        rs[t] = units
    return rs


def _diagnose(data: MilpData) -> tuple[Violation, ...]:
    """Which named constraint makes `data` infeasible, with its numbers (called once CBC has
    proved infeasibility). In order: a missing kind of candidate; then demand above the most the
    inventory caps let any allowed combination serve in one bucket (exact: a small MILP without
    buckets; with r = 0 every bucket faces the same caps, so this is the whole story), and, at the
    peak bucket, per capped resource, the units that resource alone would need (exact: the sizing
    model on that bucket and resource at one dollar per unit) against its cap."""
    started = time.perf_counter()
    cands = data.candidates
    needs = [data.need_per_s(b) for b in range(len(data.buckets))]
    peak_b = int(np.argmax(needs))
    peak = needs[peak_b]
    pools = {c.pool for c in cands}
    has_col, _ = layout(cands)
    if data.single_config:
        pre = {c.group for c in cands if c.pool == "prefill"}
        dec = {c.group for c in cands if c.pool == "decode"}
        if not has_col and not pre & dec:
            note = "no colocated candidate and no group with both a prefill and a decode candidate"
            return (Violation("one_config", 1.0, 0.0, "configs", note),)
    elif not has_col:
        missing = [p for p in ("prefill", "decode") if p not in pools]
        if missing:
            return tuple(
                Violation(
                    f"{p}_demand_b{peak_b}", peak, 0.0, "per_s", f"no {p} candidate and no colocated one"
                )
                for p in missing
            )
    most = _max_coverage(data, peak, data.time_limit_s)
    if most is None or most >= peak * (1.0 - COVER_RTOL):
        return ()
    out: list[Violation] = []
    families = ["demand"] if has_col else ["prefill_demand", "decode_demand"]
    note = "demand with headroom vs the most any allowed combination can serve within the inventory caps"
    for b, need in enumerate(needs):
        if need * (1.0 - COVER_RTOL) > most:
            out.extend(Violation(f"{f}_b{b}", need, most, "per_s", note) for f in families)
    for res in data.resources:
        if res.inventory is None or time.perf_counter() - started > data.time_limit_s:
            continue
        units = _units_alone(data, res, peak_b)
        if units is not None and units > res.inventory:
            note = "units of this resource alone (ignoring its cap) to cover the peak bucket"
            out.append(
                Violation(
                    f"inventory_{res.name}_b{peak_b}", float(units), float(res.inventory), "units", note
                )
            )
    return tuple(out)


def _max_coverage(data: MilpData, peak: float, seconds: float) -> float | None:
    """The largest demand one bucket can have covered within the inventory caps (capped at
    `peak`), with the same pools and selection rules as the sizing model. None if unknown."""
    if all(res.inventory is None for res in data.resources) or peak <= 0:
        return None
    cands, _ = prune_dominated(data.candidates, respect_groups=data.single_config)
    prob = pulp.LpProblem("coverage", pulp.LpMaximize)
    x: dict[int, pulp.LpVariable] = {}
    ub: dict[int, int] = {}
    for k, c in enumerate(cands):
        res = data.resource(c.resource)
        ub[k] = int(replicas_needed(np.array([peak]), c.capacity_per_s)[0])
        if res.inventory is not None:
            ub[k] = min(ub[k], res.inventory // c.units_per_replica)
        if ub[k] > 0:
            x[k] = prob.add_variable(f"x_c{k}", 0, ub[k], pulp.LpInteger)
    s_col = prob.add_variable("scol", 0, peak, pulp.LpContinuous)
    s_dis = prob.add_variable("sdis", 0, peak, pulp.LpContinuous)
    ge, le, eq = pulp.LpConstraintGE, pulp.LpConstraintLE, pulp.LpConstraintEQ

    def add(name: str, terms: list[tuple[pulp.LpVariable, float]], sense: int, rhs: float) -> None:
        prob.addConstraint(pulp.LpConstraint(pulp.LpAffineExpression(terms), sense, name, float(rhs)))

    for pool, s in (("colocated", s_col), ("prefill", s_dis), ("decode", s_dis)):
        terms = [(x[k], cands[k].capacity_per_s) for k in x if cands[k].pool == pool]
        add(f"{pool}_cover", [*terms, (s, -1.0)], ge, 0.0)
    add("total", [(s_col, 1.0), (s_dis, 1.0)], le, peak)
    for t, res in enumerate(data.resources):
        if res.inventory is not None:
            terms = [(x[k], float(cands[k].units_per_replica)) for k in x if cands[k].resource == res.name]
            if terms:
                add(f"cap_t{t}", terms, le, res.inventory)
    if data.single_config:
        y = {k: prob.add_variable(f"y_c{k}", 0, 1, pulp.LpBinary) for k in x}
        for k in x:
            add(f"sel_c{k}", [(x[k], 1.0), (y[k], -float(ub[k]))], le, 0.0)
        add("one", [(y[k], 1.0) for k in x if cands[k].pool in ("colocated", "prefill")], le, 1.0)
        for i, g in enumerate(sorted({cands[k].group for k in x if cands[k].pool != "colocated"})):
            terms = [(y[k], 1.0) for k in x if cands[k].pool == "prefill" and cands[k].group == g]
            terms += [(y[k], -1.0) for k in x if cands[k].pool == "decode" and cands[k].group == g]
            add(f"pair_{i}", terms, eq, 0.0)
    prob.setObjective(pulp.LpAffineExpression([(s_col, 1.0), (s_dis, 1.0)]))
    prob.solve(cbc_solver(seconds, None))
    if read_status(prob) != "OPTIMAL":
        return None
    return float(pulp.value(prob.objective) or 0.0)


def _units_alone(data: MilpData, res: Resource, bucket: int) -> int | None:
    """Fewest units of `res` alone (no cap) that cover `bucket`, under the same rules."""
    cands = tuple(c for c in data.candidates if c.resource == res.name)
    if not cands:
        return None
    sub = MilpData(
        buckets=(Bucket(data.buckets[bucket].demand_per_s, 1.0),),
        resources=(Resource(res.name, 1.0),),
        candidates=cands,
        headroom=data.headroom,
        single_config=data.single_config,
        time_limit_s=min(data.time_limit_s, 5.0),
    )
    result = solve(sub)
    if result.status != "OPTIMAL" or result.objective_usd is None:
        return None
    return round(result.objective_usd)
