"""The sizing MILP as a PuLP model, and CBC (or, for small models, HiGHS in this process) to solve
it. Together with solvers.milp, which drives it, the only code in the project that runs a MILP
solver or reads a PuLP status (`read_status`).

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
uses need_b * (1 - COVER_RTOL). Constraints of buckets that solvers.milp merged (equal demands)
carry the first original bucket's index; its results name every original bucket.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pulp

from solvers.milp_data import POOLS, Candidate, MilpData
from solvers.milp_fastpath import COVER_RTOL, replicas_needed

__all__ = [
    "MIN_SOLVER_S",
    "Model",
    "Raw",
    "Relaxation",
    "bucket_needs",
    "build",
    "cbc_solver",
    "layout",
    "log_bound",
    "lp_bound",
    "lp_relaxation",
    "matrices",
    "read_status",
    "run_cbc",
    "run_highs",
    "set_initial",
    "totals",
]

# CBC always gets at least this long, even when building used up the time limit.
MIN_SOLVER_S = 0.2


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


def layout(candidates: Sequence[Candidate]) -> tuple[bool, bool]:
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
    has_col, has_dis = layout(_layout_of if _layout_of is not None else cands)
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


@dataclass(frozen=True)
class Raw:
    """CBC's answer in the model's own indices (None arrays when it has no solution)."""

    status: str
    x: np.ndarray | None  # model candidates x model buckets
    r: np.ndarray | None  # per resource
    y: np.ndarray | None  # per model candidate (single configuration)
    bound_usd: float | None
    bound_source: str | None
    solver_s: float
    timed_out: bool = False  # CBC stopped on its time limit (not on optimality or max_nodes)


_STOPPED_ON_TIME = re.compile(r"^Result - Stopped on time", re.MULTILINE)


_BEST_POSSIBLE = re.compile(r"best possible\s+([-+0-9.eE]+)")


_INTEGER_GAP = re.compile(r"integer gap of\s+([-+0-9.eE]+)")


_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$")


def log_bound(log: str, objective: float) -> float | None:
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


def cbc_solver(
    seconds: float,
    gap_rel: float | None,
    *,
    mip: bool = True,
    log: str | None = None,
    warm: bool = False,
    max_nodes: int | None = None,
) -> pulp.COIN_CMD:
    # COIN_CMD on the CBC binary PuLP ships (PULP_CBC_CMD itself is deprecated in PuLP 3.3).
    # No `threads`: CBC's default (0) is its serial, deterministic search. `-threads 1` turns on
    # its threaded code with one worker, and CBC 2.10.3 (the binary PuLP 3.3 ships) then now and
    # again waits 10 s for that worker on a problem solved in a millisecond (log: "Thread 0 used
    # 0 times, waiting to start 10.000101"; 3 stalls in 300 tiny solves here, none without it).
    # `max_nodes` bounds the branch and bound by its node count: unlike a time limit, the same
    # input then stops at the same place on any machine.
    return pulp.COIN_CMD(
        path=pulp.PULP_CBC_CMD.pulp_cbc_path,
        mip=mip,
        msg=False,
        timeLimit=max(float(seconds), MIN_SOLVER_S),
        gapRel=gap_rel,
        logPath=log,
        warmStart=warm,
        maxNodes=max_nodes,
    )


def read_status(prob: pulp.LpProblem) -> str:
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


def run_cbc(
    model: Model, seconds: float, *, warm: bool, want_bound: bool = True, max_nodes: int | None = None
) -> Raw:
    data = model.data
    fd, log_path = tempfile.mkstemp(prefix="capplan-cbc-", suffix=".log")
    os.close(fd)
    t0 = time.perf_counter()
    try:
        model.problem.solve(cbc_solver(seconds, data.gap_rel, log=log_path, warm=warm, max_nodes=max_nodes))
        with open(log_path, encoding="utf-8", errors="replace") as f:
            log = f.read()
    finally:
        os.unlink(log_path)
    solver_s = time.perf_counter() - t0
    status = read_status(model.problem)
    timed_out = bool(_STOPPED_ON_TIME.search(log))
    if status in ("INFEASIBLE", "NO_SOLUTION"):
        return Raw(status, None, None, None, None, None, solver_s, timed_out)
    xs, rs, ys = _read_values(model)
    objective = float(pulp.value(model.problem.objective) or 0.0)
    bound = log_bound(log, objective)
    source: str | None = "solver_log" if bound is not None else None
    if status == "FEASIBLE" and bound is None and want_bound:
        bound, source = lp_bound(model.problem, seconds), "lp_relaxation"
    return Raw(status, xs, rs, ys, bound, source, time.perf_counter() - t0, timed_out)


def _read_values(model: Model) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """x, r and y of the model's variables' values, rounded to integers."""
    data = model.data
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
    return xs, rs, ys


def run_highs(model: Model, seconds: float) -> Raw:
    """The same model solved in this process by HiGHS (scipy.optimize.milp, relative gap 0: a
    proof of optimality, or its time limit). For the many small models of the bucket-wise path:
    a CBC run costs a process start, a model file written and a solution file read (30-40 ms on
    two busy cores against 2-5 ms here). HiGHS's search is deterministic. Variables take the
    values found (varValue), as after CBC."""
    from scipy.optimize import Bounds, LinearConstraint, milp  # here: importing SciPy costs ~0.2 s
    from scipy.sparse import coo_array

    t0 = time.perf_counter()
    prob = model.problem
    variables = prob.variables()
    index = {v.name: i for i, v in enumerate(variables)}
    cost = np.zeros(len(variables))
    for v, a in prob.objective.items():
        cost[index[v.name]] = a
    rows, cols, vals = [], [], []
    lo = np.full(len(model.constraints), -np.inf)
    hi = np.full(len(model.constraints), np.inf)
    for i, con in enumerate(model.constraints.values()):
        for v, a in con.items():
            rows.append(i)
            cols.append(index[v.name])
            vals.append(a)
        rhs = -con.constant
        if con.sense != pulp.LpConstraintLE:
            lo[i] = rhs
        if con.sense != pulp.LpConstraintGE:
            hi[i] = rhs
    matrix = coo_array((vals, (rows, cols)), shape=(len(lo), len(variables))).tocsr()
    lower = np.array([0.0 if v.lowBound is None else v.lowBound for v in variables], dtype=float)
    upper = np.array([np.inf if v.upBound is None else v.upBound for v in variables], dtype=float)
    integral = np.array([v.cat == pulp.LpInteger for v in variables], dtype=np.int64)
    res = milp(
        cost,
        constraints=LinearConstraint(matrix, lo, hi),
        bounds=Bounds(lower, upper),
        integrality=integral,
        options={"time_limit": max(float(seconds), MIN_SOLVER_S), "mip_rel_gap": 0.0},
    )
    solver_s = time.perf_counter() - t0
    if res.status == 2:
        return Raw("INFEASIBLE", None, None, None, None, None, solver_s)
    if res.x is None:
        if res.status == 1:  # time limit before any solution
            return Raw("NO_SOLUTION", None, None, None, None, None, solver_s, timed_out=True)
        raise RuntimeError(f"HiGHS ended with status {res.status}: {res.message}")
    for v, value in zip(variables, res.x, strict=True):
        v.varValue = float(value)
    xs, rs, ys = _read_values(model)
    if res.status == 0:
        return Raw("OPTIMAL", xs, rs, ys, None, None, solver_s)
    bound = (
        res.mip_dual_bound if res.mip_dual_bound is not None and math.isfinite(res.mip_dual_bound) else None
    )
    return Raw(
        "FEASIBLE", xs, rs, ys, bound, "solver_log" if bound is not None else None, solver_s, res.status == 1
    )


def lp_bound(prob: pulp.LpProblem, seconds: float) -> float | None:
    """The LP relaxation's optimum: a lower bound on any integer solution (only when CBC's log
    gave none)."""
    prob.solve(cbc_solver(seconds, None, mip=False))
    if prob.status != pulp.LpStatusOptimal:
        return None
    return float(pulp.value(prob.objective) or 0.0)


@dataclass(frozen=True)
class Relaxation:
    status: str
    bound: float | None
    r: np.ndarray | None  # reserved units (fractional)
    x_ceil: np.ndarray | None  # replicas rounded up
    cost_by_bucket: np.ndarray | None  # on-demand bill rate x hours per bucket in the LP


def lp_relaxation(model: Model, seconds: float) -> Relaxation:
    """The LP relaxation of a built model (integers relaxed), solved by CBC."""
    model.problem.solve(cbc_solver(seconds, None, mip=False))
    if model.problem.status == pulp.LpStatusInfeasible:
        return Relaxation("INFEASIBLE", None, None, None, None)
    if model.problem.status != pulp.LpStatusOptimal:
        return Relaxation("NO_SOLUTION", None, None, None, None)
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
    return Relaxation("OPTIMAL", bound, r, x, cost)


@lru_cache(maxsize=16)
def matrices(data: MilpData) -> tuple[np.ndarray, np.ndarray]:
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


def totals(data: MilpData, xs: np.ndarray, rs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Units used and on-demand units per (resource, bucket), and the bill rate per bucket."""
    units, _ = matrices(data)
    used = np.rint(units @ xs).astype(np.int64)
    on_demand = np.maximum(used - rs[:, None], 0)
    reserved_usd = np.array([res.reserved_usd_per_hour or 0.0 for res in data.resources])
    od_usd = np.array([res.on_demand_usd_per_hour for res in data.resources])
    rate = float(reserved_usd @ rs) + od_usd @ on_demand
    return used, on_demand, rate


def bucket_needs(data: MilpData) -> np.ndarray:
    return np.array([data.need_per_s(b) for b in range(len(data.buckets))])


def set_initial(model: Model, xs: np.ndarray, rs: np.ndarray, chosen: Sequence[int] = ()) -> None:
    """Initial values for a CBC warm start: replicas `xs`, reserved `rs` (where r is a
    variable), on-demand units for the rest, demand shares to match, and the selection
    `chosen` (candidate indices; single configuration)."""
    data = model.data
    for (k, b), v in model.x.items():
        v.setInitialValue(int(xs[k, b]))
    for t, v in model.r.items():
        v.setInitialValue(int(rs[t]))
    _, on_demand, _ = totals(data, xs, rs)
    for (t, b), v in model.o.items():
        v.setInitialValue(int(on_demand[t, b]))
    for k, v in model.y.items():
        v.setInitialValue(1 if k in chosen else 0)
    if model.s_col:
        _, capacity = matrices(data)
        col = capacity[POOLS.index("colocated")] @ xs
        need = bucket_needs(data)
        for b, v in model.s_col.items():
            share = min(float(need[b]), float(col[b]))
            v.setInitialValue(share)
            model.s_dis[b].setInitialValue(max(float(need[b]) - share, 0.0))
