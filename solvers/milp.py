"""The sizing MILP: how many replicas of which candidates per bucket, and how many reserved units,
at least cost (PuLP model, CBC solver). The only code in the project that reads a PuLP status.

Steps, kept apart: data (`MilpData`, solvers.milp_data) -> `build(data)` -> `Model` (a PuLP
problem with every constraint named) -> `solve_model(model)` -> `MilpResult`. `solve(data)` runs
exact reductions first (below), then builds and solves the reduced model and maps the answer back.

Model. Buckets b (need_b = demand_b * (1 + headroom), hours h_b, H = sum h_b), resources t
(on-demand price O_t, reserved price R_t, cap C_t), candidates k (units u_k, capacity c_k).

    x[k,b] >= 0 integer   replicas of k in bucket b (upper bound ceil(need_b / c_k): more never helps)
    r[t]   >= 0 integer   reserved units of t, held (and billed) all horizon; absent when no R_t
    o[t,b] >= 0           on-demand units of t in bucket b (integral at any optimum: x and r are)
    y[k]   binary         k selected (single configuration only)
    s_col[b], s_dis[b]    the part of need_b served by colocated replicas / by the prefill+decode
                          pools (only when both kinds of candidate exist)

    min  sum_t R_t * H * r[t] + sum_{t,b} O_t * h_b * o[t,b]
    demand_b{b}:            s_col + s_dis >= need_b               (split form)
    colocated_demand_b{b}:  sum_{k colocated} c_k x[k,b] >= s_col
    prefill_demand_b{b}:    sum_{k prefill} c_k x[k,b] >= s_dis   (need_b without split variables)
    decode_demand_b{b}:     sum_{k decode} c_k x[k,b] >= s_dis    (idem)
    units_{t}_b{b}:         sum_{k on t} u_k x[k,b] <= r[t] + o[t,b]
    inventory_{t}_b{b}:     r[t] + o[t,b] <= C_t
    select_{k}_b{b}:        x[k,b] = ceil(need_b / c_k) * y[k]    (single configuration)
    one_config:             sum_{k colocated or prefill} y[k] = 1
    pair_{g}:               sum_{k prefill in g} y[k] = sum_{k decode in g} y[k]

Without both kinds of candidate, `demand_b{b}` is the colocated coverage itself, or
`prefill_demand_b{b}` / `decode_demand_b{b}` carry need_b directly. The split is exact: a bucket
is covered iff some share s_col of it fits the colocated capacity and the rest fits both pools.
With one configuration, `one_config` and `pair_{g}` leave exactly one colocated candidate, or one
prefill and one decode candidate of one group, and `select` fixes their replicas at the fewest
that cover (that member alone must cover the bucket, and more never lowers the bill): the usual
x <= M y with its big-M made exact, so that once y is fixed nothing fractional is left to branch
on (with x free below M, CBC spent seconds closing rounding gaps bucket by bucket). Coverage
uses need_b * (1 - COVER_RTOL). Constraints of merged buckets (below) carry the first original
bucket's index in the PuLP model; results name every original bucket.

Reductions in `solve` (each exact: the optimum's cost is unchanged; `reduce=False` skips them):
1. `prune_dominated`: a candidate with a same-resource, same-pool rival of no more units and no
   less capacity is dropped. Prefill (decode) candidates that can never be paired are dropped.
2. Buckets of equal demand are merged (hours summed): given r (and y), buckets are independent
   and equal ones have the same best answer. Names and answers are reported per original bucket.
3. Single configuration: solvers.milp_fastpath gives each option's exact cost in closed form;
   the MILP gets the SHORTLIST cheapest options (everything left out costs at least as much as
   each option kept) and the cheapest as a warm start. Mixed: the cheapest single configuration
   (when the caps allow one) is the warm start.

Mixed over more than MONOLITHIC_MAX_BUCKETS (merged) buckets: one model is hopeless for CBC
(see `_solve_bucketwise`), so the LP relaxation of the whole model fixes the reserved units and
gives the bound, and CBC then sizes each bucket alone. `stats.method` says which path ran.

Time: `time_limit_s` bounds the whole call. CBC gets what is left after the build, less the
build's own duration again (PuLP writes the model file and reads the solution back in about
that time).

Status: OPTIMAL (proved; gap None), FEASIBLE (stopped by the time limit or by `gap_rel` with a
solution, or a bucket-wise answer: `gap` = (objective - best bound) / objective, the bound from
CBC's log, else from the LP relaxation; None only if no bound could be had), INFEASIBLE (with
`infeasibility`: which named constraint cannot hold, with the numbers), NO_SOLUTION (time limit
before any solution).
"""

from __future__ import annotations

import math
import os
import re
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np
import pulp

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
    best_reserved,
    enumerate_options,
    evaluate_options,
    replicas_needed,
    shortlist,
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
# CBC always gets at least this long, even when building used up the time limit.
MIN_SOLVER_S = 0.2
# Mixed problems with more (merged) buckets than this are solved bucket-wise (_solve_bucketwise).
MONOLITHIC_MAX_BUCKETS = 8
# CBC processes run side by side on the bucket-wise path (each one searches serially).
BUCKET_WORKERS = 2

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
    method: str  # "milp" (one model) | "bucketwise" (mixed, many buckets: see _solve_bucketwise)
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
    bound_source: str | None  # "solver_log" | "lp_relaxation" | None
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


@dataclass
class Model:
    """A built PuLP problem and the handles to read it. `constraints` maps each readable name to
    its PuLP constraint (PuLP's own name replaces "-+[] " by "_"). `labels[j]`: the original
    buckets model bucket j stands for (one each unless `solve` merged equal buckets)."""

    data: MilpData
    problem: pulp.LpProblem
    x: dict[tuple[int, int], pulp.LpVariable]
    r: dict[int, pulp.LpVariable]
    o: dict[tuple[int, int], pulp.LpVariable]
    y: dict[int, pulp.LpVariable]
    s_col: dict[int, pulp.LpVariable]
    s_dis: dict[int, pulp.LpVariable]
    constraints: dict[str, pulp.LpConstraint]
    labels: tuple[tuple[int, ...], ...]
    build_s: float

    @property
    def n_variables(self) -> int:
        return sum(len(d) for d in (self.x, self.r, self.o, self.y, self.s_col, self.s_dis))


def _layout(candidates: Sequence[Candidate]) -> tuple[bool, bool]:
    """(any colocated candidate, any prefill or decode candidate): which coverage rows exist."""
    pools = {c.pool for c in candidates}
    return "colocated" in pools, bool(pools & {"prefill", "decode"})


def build(
    data: MilpData,
    *,
    _labels: Sequence[Sequence[int]] | None = None,
    _layout_of: Sequence[Candidate] | None = None,
    _reserved: Sequence[int] | None = None,
) -> Model:
    """The MILP of the module docstring for `data`, as is (no reductions). `_reserved` (per
    resource) fixes the reserved units: no r variables, and the objective leaves out their
    (then constant) bill."""
    t0 = time.perf_counter()
    cands = data.candidates
    n_b = len(data.buckets)
    labels = tuple(tuple(ls) for ls in _labels) if _labels is not None else tuple((b,) for b in range(n_b))
    has_col, has_dis = _layout(_layout_of if _layout_of is not None else cands)
    split = has_col and has_dis
    need = np.array([data.need_per_s(b) for b in range(n_b)])
    rhs = need * (1.0 - COVER_RTOL)
    tag = [f"b{ls[0]}" for ls in labels]
    prob = pulp.LpProblem("sizing", pulp.LpMinimize)
    integer, continuous = pulp.LpInteger, pulp.LpContinuous

    # Variables, and the terms of the rows they enter, gathered in one pass.
    x: dict[tuple[int, int], pulp.LpVariable] = {}
    bound: dict[tuple[int, int], int] = {}
    cover: dict[str, list[list[tuple[pulp.LpVariable, float]]]] = {p: [[] for _ in range(n_b)] for p in POOLS}
    used_types = sorted({data.resource_index(c.resource) for c in cands})
    units: dict[int, list[list[tuple[pulp.LpVariable, float]]]] = {
        t: [[] for _ in range(n_b)] for t in used_types
    }
    for k, c in enumerate(cands):
        t = data.resource_index(c.resource)
        m = replicas_needed(need, c.capacity_per_s)
        for j in np.flatnonzero(m).tolist():
            v = prob.add_variable(f"x_c{k}_b{j}", 0, int(m[j]), integer)
            x[(k, j)] = v
            bound[(k, j)] = int(m[j])
            cover[c.pool][j].append((v, c.capacity_per_s))
            units[t][j].append((v, float(c.units_per_replica)))
    r: dict[int, pulp.LpVariable] = {}
    o: dict[tuple[int, int], pulp.LpVariable] = {}
    for t in used_types:
        res = data.resources[t]
        if res.reserved_usd_per_hour is not None and _reserved is None:
            r[t] = prob.add_variable(f"r_t{t}", 0, res.inventory, integer)
        for b in range(n_b):
            o[(t, b)] = prob.add_variable(f"o_t{t}_b{b}", 0, res.inventory, continuous)
    y: dict[int, pulp.LpVariable] = {}
    if data.single_config:
        y = {k: prob.add_variable(f"y_c{k}", 0, 1, pulp.LpBinary) for k in range(len(cands))}
    s_col: dict[int, pulp.LpVariable] = {}
    s_dis: dict[int, pulp.LpVariable] = {}
    if split:
        for b in range(n_b):
            s_col[b] = prob.add_variable(f"scol_b{b}", 0, float(need[b]), continuous)
            s_dis[b] = prob.add_variable(f"sdis_b{b}", 0, float(need[b]), continuous)

    constraints: dict[str, pulp.LpConstraint] = {}
    pulp_names: set[str] = set()
    ge, le, eq = pulp.LpConstraintGE, pulp.LpConstraintLE, pulp.LpConstraintEQ

    def add(name: str, terms: list[tuple[pulp.LpVariable, float]], sense: int, rhs_value: float) -> None:
        pulp_name = base = name.translate(pulp.LpAffineExpression.trans)
        n = 1
        while pulp_name in pulp_names:  # names that differ only in "-+[] " collide in PuLP
            n += 1
            pulp_name = f"{base}__{n}"
        pulp_names.add(pulp_name)
        con = pulp.LpConstraint(pulp.LpAffineExpression(terms), sense, pulp_name, float(rhs_value))
        prob.addConstraint(con)
        constraints[name] = con

    for b in range(n_b):
        if split:
            add(f"demand_{tag[b]}", [(s_col[b], 1.0), (s_dis[b], 1.0)], ge, rhs[b])
            add(f"colocated_demand_{tag[b]}", [*cover["colocated"][b], (s_col[b], -1.0)], ge, 0.0)
            add(f"prefill_demand_{tag[b]}", [*cover["prefill"][b], (s_dis[b], -1.0)], ge, 0.0)
            add(f"decode_demand_{tag[b]}", [*cover["decode"][b], (s_dis[b], -1.0)], ge, 0.0)
        elif has_col:
            add(f"demand_{tag[b]}", cover["colocated"][b], ge, rhs[b])
        else:
            add(f"prefill_demand_{tag[b]}", cover["prefill"][b], ge, rhs[b])
            add(f"decode_demand_{tag[b]}", cover["decode"][b], ge, rhs[b])
    for t in used_types:
        res = data.resources[t]
        for b in range(n_b):
            held = [(o[(t, b)], 1.0)] + ([(r[t], 1.0)] if t in r else [])
            fixed = float(_reserved[t]) if _reserved is not None else 0.0
            add(f"units_{res.name}_{tag[b]}", units[t][b] + [(v, -1.0) for v, _ in held], le, fixed)
            if res.inventory is not None:
                add(f"inventory_{res.name}_{tag[b]}", held, le, res.inventory - fixed)
    if data.single_config:
        for (k, b), v in x.items():
            add(f"select_{cands[k].id}_{tag[b]}", [(v, 1.0), (y[k], -float(bound[(k, b)]))], eq, 0.0)
        heads = [(y[k], 1.0) for k, c in enumerate(cands) if c.pool in ("colocated", "prefill")]
        add("one_config", heads, eq, 1.0)
        for g in sorted({c.group for c in cands if c.pool != "colocated"}):
            terms = [(y[k], 1.0) for k, c in enumerate(cands) if c.pool == "prefill" and c.group == g]
            terms += [(y[k], -1.0) for k, c in enumerate(cands) if c.pool == "decode" and c.group == g]
            add(f"pair_{g}", terms, eq, 0.0)

    hours = [bk.hours for bk in data.buckets]
    total_hours = data.total_hours
    objective = [(v, (data.resources[t].reserved_usd_per_hour or 0.0) * total_hours) for t, v in r.items()]
    objective += [(v, data.resources[t].on_demand_usd_per_hour * hours[b]) for (t, b), v in o.items()]
    prob.setObjective(pulp.LpAffineExpression(objective))
    return Model(data, prob, x, r, o, y, s_col, s_dis, constraints, labels, time.perf_counter() - t0)


# ---------------------------------------------------------------------------------------------
# Running CBC and reading its answer


@dataclass(frozen=True)
class _Raw:
    """CBC's answer in the model's own indices (None arrays when it has no solution)."""

    status: str
    x: np.ndarray | None  # model candidates x model buckets
    r: np.ndarray | None  # per resource
    y: np.ndarray | None  # per model candidate (single configuration)
    bound_usd: float | None
    bound_source: str | None
    solver_s: float


_BEST_POSSIBLE = re.compile(r"best possible\s+([-+0-9.eE]+)")
_INTEGER_GAP = re.compile(r"integer gap of\s+([-+0-9.eE]+)")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$")


def _log_bound(log: str, objective: float) -> float | None:
    """CBC's final best bound from its log, when the search did not prove optimality: a stop
    within the gap tolerance prints the absolute gap ("Exiting as integer gap of G"); a search cut
    short ends with "Partial search - best objective X (best possible B)". A search run to the end
    prints "Search completed" (its bound is the objective: None here), and the "best possible"
    of its progress lines are not final."""
    gap = _INTEGER_GAP.findall(log)
    if gap and _NUMBER.match(gap[-1]):
        return objective - float(gap[-1])
    partial = [line for line in log.splitlines() if "Partial search" in line]
    best = _BEST_POSSIBLE.findall(partial[-1]) if partial else []
    if best and _NUMBER.match(best[-1]):
        value = float(best[-1])
        return value if abs(value) < 1e49 else None  # CBC prints 1e+50 for "none yet"
    return None


def _solver(
    seconds: float, gap_rel: float | None, *, mip: bool = True, log: str | None = None, warm: bool = False
) -> pulp.COIN_CMD:
    # COIN_CMD on the CBC binary PuLP ships (PULP_CBC_CMD itself is deprecated in PuLP 3.3).
    # No `threads`: CBC's default (0) is its serial, deterministic search. `-threads 1` turns on
    # its threaded code with one worker, and CBC 2.10.3 (the binary PuLP 3.3 ships) then now and
    # again waits 10 s for that worker on a problem solved in a millisecond (log: "Thread 0 used
    # 0 times, waiting to start 10.000101"; 3 stalls in 300 tiny solves here, none without it).
    return pulp.COIN_CMD(
        path=pulp.PULP_CBC_CMD.pulp_cbc_path,
        mip=mip,
        msg=False,
        timeLimit=max(float(seconds), MIN_SOLVER_S),
        gapRel=gap_rel,
        logPath=log,
        warmStart=warm,
    )


def _read_status(prob: pulp.LpProblem) -> str:
    """PuLP 3.3 reads CBC's solution file: "Optimal" -> (Optimal, Optimal); "Stopped on time -
    objective value" (a solution in hand) -> (Optimal, IntegerFeasible); "Stopped on time (no
    integer solution ...)" -> (Not Solved, No Solution Found); "Infeasible" / "Integer
    infeasible" -> Infeasible. A stop within the gap tolerance also reads (Optimal, Optimal):
    the caller checks the gap from the log."""
    status, sol = prob.status, prob.sol_status
    if status == pulp.LpStatusOptimal and sol == pulp.LpSolutionOptimal:
        return "OPTIMAL"
    if status == pulp.LpStatusOptimal and sol == pulp.LpSolutionIntegerFeasible:
        return "FEASIBLE"
    if status == pulp.LpStatusInfeasible:
        return "INFEASIBLE"
    if status == pulp.LpStatusNotSolved:
        return "NO_SOLUTION"
    raise RuntimeError(f"CBC ended with {pulp.LpStatus.get(status)} / {pulp.LpSolution.get(sol)}")


def _run_cbc(model: Model, seconds: float, *, warm: bool, lp_bound: bool = True) -> _Raw:
    data = model.data
    fd, log_path = tempfile.mkstemp(prefix="capplan-cbc-", suffix=".log")
    os.close(fd)
    t0 = time.perf_counter()
    try:
        model.problem.solve(_solver(seconds, data.gap_rel, log=log_path, warm=warm))
        with open(log_path, encoding="utf-8", errors="replace") as f:
            log = f.read()
    finally:
        os.unlink(log_path)
    solver_s = time.perf_counter() - t0
    status = _read_status(model.problem)
    if status in ("INFEASIBLE", "NO_SOLUTION"):
        return _Raw(status, None, None, None, None, None, solver_s)
    xs = np.zeros((len(data.candidates), len(data.buckets)), dtype=np.int64)
    for (k, b), v in model.x.items():
        xs[k, b] = round(v.varValue or 0.0)
    rs = np.zeros(len(data.resources), dtype=np.int64)
    for t, v in model.r.items():
        rs[t] = round(v.varValue or 0.0)
    ys = (
        np.array([round(model.y[k].varValue or 0.0) for k in range(len(data.candidates))])
        if model.y
        else None
    )
    objective = float(pulp.value(model.problem.objective) or 0.0)
    bound = _log_bound(log, objective)
    source: str | None = "solver_log" if bound is not None else None
    if status == "FEASIBLE" and bound is None and lp_bound:
        bound, source = _lp_bound(model.problem, seconds), "lp_relaxation"
    return _Raw(status, xs, rs, ys, bound, source, time.perf_counter() - t0)


def _lp_bound(prob: pulp.LpProblem, seconds: float) -> float | None:
    """The LP relaxation's optimum: a lower bound on any integer solution (only when CBC's log
    gave none)."""
    prob.solve(_solver(seconds, None, mip=False))
    if prob.status != pulp.LpStatusOptimal:
        return None
    return float(pulp.value(prob.objective) or 0.0)


@lru_cache(maxsize=16)
def _matrices(data: MilpData) -> tuple[np.ndarray, np.ndarray]:
    """units (resources x candidates) and capacity (pools x candidates) coefficient matrices
    (cached: a solve reads them a few times, and each bucket-wise worker for its own data)."""
    units = np.zeros((len(data.resources), len(data.candidates)))
    capacity = np.zeros((len(POOLS), len(data.candidates)))
    for k, c in enumerate(data.candidates):
        units[data.resource_index(c.resource), k] = c.units_per_replica
        capacity[POOLS.index(c.pool), k] = c.capacity_per_s
    units.setflags(write=False)  # cached: shared by every caller
    capacity.setflags(write=False)
    return units, capacity


def _totals(data: MilpData, xs: np.ndarray, rs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Units used and on-demand units per (resource, bucket), and the bill rate per bucket."""
    units, _ = _matrices(data)
    used = np.rint(units @ xs).astype(np.int64)
    on_demand = np.maximum(used - rs[:, None], 0)
    reserved_usd = np.array([res.reserved_usd_per_hour or 0.0 for res in data.resources])
    od_usd = np.array([res.on_demand_usd_per_hour for res in data.resources])
    rate = float(reserved_usd @ rs) + od_usd @ on_demand
    return used, on_demand, rate


def _needs(data: MilpData) -> np.ndarray:
    return np.array([data.need_per_s(b) for b in range(len(data.buckets))])


def _check_cover(data: MilpData, xs: np.ndarray) -> None:
    """The solution read back must cover every bucket (else a solver or tolerance slip)."""
    _, capacity = _matrices(data)
    col, pre, dec = capacity @ xs
    short = col + np.minimum(pre, dec) < _needs(data) * (1.0 - 1e-6)
    if short.any():
        b = int(np.flatnonzero(short)[0])
        raise RuntimeError(f"the solver's replicas do not cover bucket {b}")


def _binding(data: MilpData, xs: np.ndarray, rs: np.ndarray) -> tuple[str, ...]:
    """Inequality rows (module docstring) with zero slack at the solution and a nonzero variable,
    evaluated on the original buckets with o = max(0, used - r) and, in the split form, the
    shares at their largest (s_col = colocated capacity, s_dis = the smaller pool's)."""
    has_col, has_dis = _layout(data.candidates)
    rhs = _needs(data) * (1.0 - COVER_RTOL)
    tol = BINDING_RTOL * np.maximum(1.0, rhs)
    _, capacity = _matrices(data)
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
    used, _, _ = _totals(data, xs, rs)
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
    raw = _run_cbc(model, seconds, warm=warm)
    n_k, n_b = len(model.data.candidates), len(model.data.buckets)
    stats = SolveStats("milp", n_k, 0, 0, n_k, n_b, n_b, 0, 0, model.n_variables, len(model.constraints), warm,
                       raw.bound_source, model.build_s, raw.solver_s)  # fmt: skip
    mapping = _Mapping(model.data, tuple(range(n_k)), model.labels)
    return _assemble(raw, mapping, stats, started - model.build_s)


def _assemble(raw: _Raw, mapping: _Mapping, stats: SolveStats, started: float) -> MilpResult:
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
    used, on_demand, rate = _totals(orig, xs, rs)
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


# ---------------------------------------------------------------------------------------------
# Reductions and the one entry point


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
    if not data.single_config and len(sub.buckets) > MONOLITHIC_MAX_BUCKETS:
        method = "bucketwise"
        raw, model = _solve_bucketwise(sub, labels, data.candidates, warm_x, deadline)
    else:
        method = "milp"
        model = build(sub, _labels=labels, _layout_of=data.candidates)
        if warm is not None and warm_x is not None and warm_r is not None:
            pos = {c.id: k for k, c in enumerate(sub.candidates)}
            _set_initial(model, warm_x, warm_r, [pos[reduced.candidates[k].id] for k in warm.members])
        raw = _run_cbc(model, _solver_seconds(deadline, model), warm=warm_x is not None)
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


def _set_initial(model: Model, xs: np.ndarray, rs: np.ndarray, chosen: Sequence[int] = ()) -> None:
    """Initial values for a CBC warm start: replicas `xs`, reserved `rs` (where r is a
    variable), on-demand units for the rest, demand shares to match, and the selection
    `chosen` (candidate indices; single configuration)."""
    data = model.data
    for (k, b), v in model.x.items():
        v.setInitialValue(int(xs[k, b]))
    for t, v in model.r.items():
        v.setInitialValue(int(rs[t]))
    _, on_demand, _ = _totals(data, xs, rs)
    for (t, b), v in model.o.items():
        v.setInitialValue(int(on_demand[t, b]))
    for k, v in model.y.items():
        v.setInitialValue(1 if k in chosen else 0)
    if model.s_col:
        _, capacity = _matrices(data)
        col = capacity[POOLS.index("colocated")] @ xs
        need = _needs(data)
        for b, v in model.s_col.items():
            share = min(float(need[b]), float(col[b]))
            v.setInitialValue(share)
            model.s_dis[b].setInitialValue(max(float(need[b]) - share, 0.0))


def _reserved_for(data: MilpData, xs: np.ndarray) -> np.ndarray:
    """The best reserved units for given replicas (closed form, per resource)."""
    units, _ = _matrices(data)
    used = np.rint(units @ xs).astype(np.int64)
    hours = np.array([b.hours for b in data.buckets])
    rs = np.zeros(len(data.resources), dtype=np.int64)
    for t, res in enumerate(data.resources):
        if res.reserved_usd_per_hour is not None and used[t].any():
            _, r = best_reserved(
                used[t][None, :], hours, res.reserved_usd_per_hour, res.on_demand_usd_per_hour
            )
            rs[t] = int(r[0])
    return rs


def _solve_bucketwise(
    data: MilpData,
    labels: tuple[tuple[int, ...], ...],
    layout_of: Sequence[Candidate],
    warm_x: np.ndarray | None,
    deadline: float,
) -> tuple[_Raw, Model]:
    """Mixed configurations over many buckets. CBC's branch and bound does not split a model
    into its buckets: each bucket is a small rounding problem that CBC closes in about 30 ms
    alone, but in one model their gaps multiply (measured on the 168-bucket bench: no solution
    better than the best single configuration in 300 s, and none at all when the caps force a
    mix). Given the reserved units, though, the buckets are independent. So:

    1. the LP relaxation of the whole model gives the lower bound (for the gap) and the reserved
       units worth holding, rounded down;
    2. each bucket starts from the cheaper (at those reserved units) of the best single
       configuration and the LP's replicas rounded up, where either is valid;
    3. with the reserved units fixed, CBC sizes each bucket alone (two at a time), largest
       possible saving first, until done or out of time (a bucket not reached keeps its start);
    4. the reserved units are re-chosen for the final replicas (closed form: never costs more).

    Exact when no resource has a reserved price and every bucket was proved optimal; otherwise
    FEASIBLE with the gap to the LP bound."""
    t0 = time.perf_counter()
    full = build(data, _labels=labels, _layout_of=layout_of)
    lp = _lp_relaxation(full, max((deadline - time.perf_counter()) / 3, MIN_SOLVER_S))
    if lp.status == "INFEASIBLE":  # no fractional answer, so no integer one
        return _Raw("INFEASIBLE", None, None, None, None, None, time.perf_counter() - t0), full
    priced = [t for t, res in enumerate(data.resources) if res.reserved_usd_per_hour is not None]
    rs = np.zeros(len(data.resources), dtype=np.int64)
    if lp.r is not None:
        rs[priced] = np.floor(lp.r[priced] + 1e-6).astype(np.int64)
    starts = [x for x in (warm_x, lp.x_ceil) if x is not None]
    xs, start_cost = _cheapest_start(data, starts, rs)
    saving = start_cost - (lp.cost_by_bucket if lp.cost_by_bucket is not None else 0.0)
    hours = np.array([b.hours for b in data.buckets])
    order = sorted(range(len(data.buckets)), key=lambda j: (-saving[j] * hours[j], j))
    started = np.isfinite(start_cost)
    solved, infeasible, proved = _size_buckets(data, labels, layout_of, rs, xs, started, order, deadline)
    if infeasible:
        return _Raw("INFEASIBLE", None, None, None, None, None, time.perf_counter() - t0), full
    if not all(solved[j] or started[j] for j in range(len(data.buckets))):
        return _Raw("NO_SOLUTION", None, None, None, None, None, time.perf_counter() - t0), full
    rs = _reserved_for(data, xs)
    elapsed = time.perf_counter() - t0
    if not priced and proved and all(solved):
        return _Raw("OPTIMAL", xs, rs, None, None, None, elapsed), full
    source = "lp_relaxation" if lp.bound is not None else None
    return _Raw("FEASIBLE", xs, rs, None, lp.bound, source, elapsed), full


@dataclass(frozen=True)
class _Relaxation:
    status: str
    bound: float | None
    r: np.ndarray | None  # reserved units (fractional)
    x_ceil: np.ndarray | None  # replicas rounded up
    cost_by_bucket: np.ndarray | None  # on-demand bill rate x hours per bucket in the LP


def _lp_relaxation(model: Model, seconds: float) -> _Relaxation:
    """The LP relaxation of a built model (integers relaxed), solved by CBC."""
    model.problem.solve(_solver(seconds, None, mip=False))
    if model.problem.status == pulp.LpStatusInfeasible:
        return _Relaxation("INFEASIBLE", None, None, None, None)
    if model.problem.status != pulp.LpStatusOptimal:
        return _Relaxation("NO_SOLUTION", None, None, None, None)
    data = model.data
    r = np.zeros(len(data.resources))
    for t, v in model.r.items():
        r[t] = v.varValue or 0.0
    x = np.zeros((len(data.candidates), len(data.buckets)), dtype=np.int64)
    for (k, b), v in model.x.items():
        x[k, b] = math.ceil((v.varValue or 0.0) - 1e-6)
    cost = np.zeros(len(data.buckets))
    for (t, b), v in model.o.items():
        cost[b] += data.resources[t].on_demand_usd_per_hour * (v.varValue or 0.0)
    bound = float(pulp.value(model.problem.objective) or 0.0)
    return _Relaxation("OPTIMAL", bound, r, x, cost)


def _cheapest_start(
    data: MilpData, starts: Sequence[np.ndarray], rs: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per bucket, the start that covers it within the caps at the least on-demand bill (at
    reserved units `rs`); its bill rate per bucket (inf where no start is valid)."""
    n_b = len(data.buckets)
    xs = np.zeros((len(data.candidates), n_b), dtype=np.int64)
    best = np.full(n_b, np.inf)
    units, capacity = _matrices(data)
    need = _needs(data) * (1.0 - COVER_RTOL)
    caps = np.array([np.inf if res.inventory is None else res.inventory for res in data.resources])
    od = np.array([res.on_demand_usd_per_hour for res in data.resources])
    for start in starts:
        used = units @ start
        col, pre, dec = capacity @ start
        valid = (col + np.minimum(pre, dec) >= need) & np.all(used <= caps[:, None], axis=0)
        cost = od @ np.maximum(used - rs[:, None], 0.0)
        take = valid & (cost < best)
        xs[:, take] = start[:, take]
        best[take] = cost[take]
    return xs, best


def _better_elsewhere(data: MilpData, rs: np.ndarray) -> dict[int, int]:
    """With the reserved units fixed at `rs`, candidate k -> a candidate j that beats it in any
    one bucket: same pool, capacity no less, on-demand price per replica no more, on a resource
    without a cap, and k's resource holds no reserved units (else k's replicas may cost nothing).
    Swapping every replica of k for one of j then covers as much for no more. Ties go to the
    earlier candidate; chains are followed to a candidate that stays."""
    cands = data.candidates
    n = len(cands)
    cap = np.array([c.capacity_per_s for c in cands])
    price = np.array([data.resource(c.resource).on_demand_usd_per_hour * c.units_per_replica for c in cands])
    free = np.array([rs[data.resource_index(c.resource)] > 0 for c in cands])
    uncapped = np.array([data.resource(c.resource).inventory is None for c in cands])
    pool = np.array([POOLS.index(c.pool) for c in cands])
    index = np.arange(n)
    out: dict[int, int] = {}
    for k in range(n):
        if free[k]:
            continue
        strict = (cap > cap[k]) | (price < price[k]) | (index < k)
        beats = (pool == pool[k]) & uncapped & (cap >= cap[k]) & (price <= price[k]) & strict & (index != k)
        if beats.any():
            # the best of them: most capacity, then cheapest, then earliest
            out[k] = min(np.flatnonzero(beats).tolist(), key=lambda i: (-cap[i], price[i], i))
    for k in list(out):
        last = out[k]
        for _ in range(n):  # bounded: the relation is a strict order
            if last not in out:
                break
            last = out[last]
        out[k] = last
    return out


def _size_buckets(
    data: MilpData,
    labels: tuple[tuple[int, ...], ...],
    layout_of: Sequence[Candidate],
    rs: np.ndarray,
    xs: np.ndarray,
    started: np.ndarray,
    order: Sequence[int],
    deadline: float,
) -> tuple[list[bool], bool, bool]:
    """CBC on each bucket alone with the reserved units fixed, in `order`, BUCKET_WORKERS at a
    time, writing the answers into `xs` (whose columns are the starts where `started`), over the
    candidates `_better_elsewhere` leaves (starts moved onto them). Returns which buckets were
    solved, whether one was proved infeasible, and whether all solved ones were proved optimal."""
    n_b = len(data.buckets)
    swap = _better_elsewhere(data, rs)
    keep = [k for k in range(len(data.candidates)) if k not in swap]
    for k, j in swap.items():
        xs[j] += xs[k]
        xs[k] = 0
    narrow = replace(data, candidates=tuple(data.candidates[k] for k in keep))
    solved = [False] * n_b
    verdicts: list[str] = []

    def one(j: int) -> None:
        left = deadline - time.perf_counter()
        if left <= 0:
            return
        part = replace(narrow, buckets=(data.buckets[j],))
        model = build(part, _labels=[labels[j]], _layout_of=layout_of, _reserved=rs.tolist())
        if started[j]:
            _set_initial(model, xs[keep][:, [j]], rs)
        raw = _run_cbc(model, left - model.build_s, warm=bool(started[j]), lp_bound=False)
        verdicts.append(raw.status if raw.bound_usd is None else "FEASIBLE")
        if raw.x is not None:
            xs[keep, j] = raw.x[:, 0]
            solved[j] = True

    with ThreadPoolExecutor(max_workers=BUCKET_WORKERS) as pool:
        list(pool.map(one, order))
    return solved, "INFEASIBLE" in verdicts, all(v == "OPTIMAL" for v in verdicts)


# ---------------------------------------------------------------------------------------------
# Infeasibility diagnosis


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
    has_col, _ = _layout(cands)
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
    prob.solve(_solver(seconds, None))
    if _read_status(prob) != "OPTIMAL":
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
