"""The sizing MILP as a PuLP model, and the reading of a solved model (the solver itself is run by
solvers.milp_solver, the only code that reads a solver's status).

Model. Buckets b (need_b = demand_b * (1 + headroom), hours h_b, H = sum h_b), resources t
(on-demand price O_t, reserved price R_t, cap C_t), candidates k (units u_k, capacity c_kb in
bucket b), availability (min replicas N, spare replicas S), incompatible pairs (i, j).
M_kb = max(N, ceil(need_b / c_kb) + S) where need_b > 0: the most replicas of k any optimum holds
in b (with that many, k alone covers the bucket); no x[k,b] where need_b = 0.

    x[k,b] in 0..M_kb integer   replicas of k in bucket b
    r[t]   >= 0 integer   reserved units of t, held (and billed) all horizon; absent when no R_t
    o[t,b] >= 0           on-demand units of t in bucket b (integral at any optimum: x and r are)
    y[k]   binary         k selected (single configuration only)
    a[k,b] binary         k serves in bucket b (mixed, with the availability rule: N > 1 or S > 0)
    z[k]   binary         k used in some bucket (mixed, k in an incompatible pair)
    s_col[b], s_dis[b]    the part of need_b served by colocated replicas / by the prefill+decode
                          pools (only when both kinds of candidate exist)

    min  sum_t R_t * H * r[t] + sum_{t,b} O_t * h_b * o[t,b]
    demand_b{b}:            s_col + s_dis >= need_b               (split form)
    colocated_demand_b{b}:  sum_{k colocated} c_kb (x[k,b] - S a[k,b]) >= s_col
    prefill_demand_b{b}:    sum_{k prefill} c_kb (x[k,b] - S a[k,b]) >= s_dis   (need_b without split)
    decode_demand_b{b}:     sum_{k decode} c_kb (x[k,b] - S a[k,b]) >= s_dis    (idem)
    units_{t}_b{b}:         sum_{k on t} u_k x[k,b] <= r[t] + o[t,b]
    inventory_{t}_b{b}:     r[t] + o[t,b] <= C_t
    serve_max_{k}_b{b}:     x[k,b] <= M_kb a[k,b]                 (mixed, availability rule)
    serve_min_{k}_b{b}:     x[k,b] >= N a[k,b]                    (mixed, N > 1)
    used_{k}_b{b}:          x[k,b] <= M_kb z[k]                   (mixed, k in a pair)
    incompatible_{i}_{j}:   z[i] + z[j] <= 1                      (single configuration: y[i] + y[j])
    select_{k}_b{b}:        x[k,b] = M_kb * y[k]                  (single configuration)
    one_config:             sum_{k colocated or prefill} y[k] = 1
    pair_{g}:               sum_{k prefill in g} y[k] = sum_{k decode in g} y[k]

With one configuration the coverage rows read c_kb (x[k,b] - S y[k]) (a[k,b] is y[k] there); with
neither availability rule a[k,b] is left out (S = 0, N <= 1 hold anyway). Without both kinds of
candidate, `demand_b{b}` is the colocated coverage itself, or `prefill_demand_b{b}` /
`decode_demand_b{b}` carry need_b directly. The split is exact: a bucket is covered iff some
share s_col of it fits the colocated capacity and the rest fits both pools. The availability rule
is per deployment (one candidate's replicas in a bucket): at least N replicas when it serves, and
S of them spare: with any S down, what is left covers its share (S = 1: N+1). A deployment of at
most S replicas covers nothing, so an optimum never holds one. With one configuration,
`one_config` and `pair_{g}` leave exactly one colocated candidate, or one prefill and one decode
candidate of one group, and `select` fixes their replicas at the fewest that cover under the
availability rule (that member alone must cover the bucket, and more never lowers the bill): the
usual x <= M y with its big-M made exact, so that once y is fixed nothing fractional is left to
branch on. Coverage uses need_b * (1 - COVER_RTOL). Constraints of buckets that solvers.milp
merged (equal demands and capacities) carry the first original bucket's index; its results name
every original bucket.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pulp

from solvers.milp_data import POOLS, Candidate, MilpData, capacity_matrix
from solvers.milp_fastpath import COVER_RTOL, deployment_replicas
from solvers.milp_plan import (
    Raw,
    bucket_needs,
    check_plan,
    covered,
    layout,
    live_pairs,
    matrices,
    served,
    totals,
)
from solvers.milp_solver import run

__all__ = [
    "Model",
    "Raw",
    "Relaxation",
    "bucket_needs",
    "build",
    "check_plan",
    "covered",
    "layout",
    "live_pairs",
    "lp_relaxation",
    "matrices",
    "run_model",
    "served",
    "set_initial",
    "totals",
]

Terms = list[tuple[pulp.LpVariable, float]]


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
    a: dict[tuple[int, int], pulp.LpVariable]
    z: dict[int, pulp.LpVariable]
    s_col: dict[int, pulp.LpVariable]
    s_dis: dict[int, pulp.LpVariable]
    constraints: dict[str, pulp.LpConstraint]
    labels: tuple[tuple[int, ...], ...]
    build_s: float

    @property
    def n_variables(self) -> int:
        parts = (self.x, self.r, self.o, self.y, self.a, self.z, self.s_col, self.s_dis)
        return sum(len(d) for d in parts)


class _Rows:
    """Named constraints added to a PuLP problem (PuLP's own names made unique)."""

    def __init__(self, prob: pulp.LpProblem) -> None:
        self.prob = prob
        self.named: dict[str, pulp.LpConstraint] = {}
        self.pulp_names: set[str] = set()

    def add(self, name: str, terms: Terms, sense: int, rhs: float) -> None:
        pulp_name = base = name.translate(pulp.LpAffineExpression.trans)
        n = 1
        while pulp_name in self.pulp_names:  # names that differ only in "-+[] " collide in PuLP
            n += 1
            pulp_name = f"{base}__{n}"
        self.pulp_names.add(pulp_name)
        con = pulp.LpConstraint(pulp.LpAffineExpression(terms), sense, pulp_name, float(rhs))
        self.prob.addConstraint(con)
        self.named[name] = con


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
    need = bucket_needs(data)
    prob = pulp.LpProblem("sizing", pulp.LpMinimize)
    rows = _Rows(prob)
    model = Model(data, prob, {}, {}, {}, {}, {}, {}, {}, {}, rows.named, labels, 0.0)
    tag = [f"b{ls[0]}" for ls in labels]
    bound = _replicas(model, need, reserved_fixed=_reserved is not None)
    _shares(model, need, has_col and has_dis)
    _coverage(model, rows, need, tag, has_col, has_dis)
    _units(model, rows, tag, _reserved)
    if data.single_config:
        _selection(model, rows, bound, tag)
    else:
        _availability(model, rows, bound, tag)
        _incompatible(model, rows, bound, tag)
    hours = [bk.hours for bk in data.buckets]
    total_hours = data.total_hours
    objective = [
        (v, (data.resources[t].reserved_usd_per_hour or 0.0) * total_hours) for t, v in model.r.items()
    ]
    objective += [(v, data.resources[t].on_demand_usd_per_hour * hours[b]) for (t, b), v in model.o.items()]
    prob.setObjective(pulp.LpAffineExpression(objective))
    model.build_s = time.perf_counter() - t0
    return model


def _replicas(model: Model, need: np.ndarray, *, reserved_fixed: bool = False) -> dict[tuple[int, int], int]:
    """x (where need_b > 0), r (unless the reserved units are fixed: `build`'s `_reserved`), o, y,
    a and z; returns M_kb per x variable."""
    data, prob = model.data, model.problem
    capacity = capacity_matrix(data)
    bound: dict[tuple[int, int], int] = {}
    for k in range(len(data.candidates)):
        m = deployment_replicas(data, need, capacity[k])
        for j in np.flatnonzero(m).tolist():
            model.x[(k, j)] = prob.add_variable(f"x_c{k}_b{j}", 0, int(m[j]), pulp.LpInteger)
            bound[(k, j)] = int(m[j])
    for t in sorted({data.resource_index(c.resource) for c in data.candidates}):
        res = data.resources[t]
        if res.reserved_usd_per_hour is not None and not reserved_fixed:
            model.r[t] = prob.add_variable(f"r_t{t}", 0, res.inventory, pulp.LpInteger)
        for b in range(len(data.buckets)):
            model.o[(t, b)] = prob.add_variable(f"o_t{t}_b{b}", 0, res.inventory, pulp.LpContinuous)
    if data.single_config:
        model.y.update(
            {k: prob.add_variable(f"y_c{k}", 0, 1, pulp.LpBinary) for k in range(len(data.candidates))}
        )
        return bound
    if data.availability:
        model.a.update({(k, j): prob.add_variable(f"a_c{k}_b{j}", 0, 1, pulp.LpBinary) for k, j in model.x})
    for k in sorted({k for pair in live_pairs(data) for k in pair}):
        model.z[k] = prob.add_variable(f"z_c{k}", 0, 1, pulp.LpBinary)
    return bound


def _shares(model: Model, need: np.ndarray, split: bool) -> None:
    if split:
        for b in range(len(need)):
            model.s_col[b] = model.problem.add_variable(f"scol_b{b}", 0, float(need[b]), pulp.LpContinuous)
            model.s_dis[b] = model.problem.add_variable(f"sdis_b{b}", 0, float(need[b]), pulp.LpContinuous)


def _coverage(
    model: Model, rows: _Rows, need: np.ndarray, tag: list[str], has_col: bool, has_dis: bool
) -> None:
    data = model.data
    capacity = capacity_matrix(data)
    spare = float(data.spare_replicas)
    cover: dict[str, list[Terms]] = {p: [[] for _ in range(len(need))] for p in POOLS}
    for (k, b), v in model.x.items():
        c = float(capacity[k, b])
        terms = cover[data.candidates[k].pool][b]
        terms.append((v, c))
        serves = model.y.get(k) if data.single_config else model.a.get((k, b))
        if spare and serves is not None:
            terms.append((serves, -spare * c))
    rhs = need * (1.0 - COVER_RTOL)
    ge = pulp.LpConstraintGE
    for b in range(len(need)):
        if has_col and has_dis:
            s_col, s_dis = model.s_col[b], model.s_dis[b]
            rows.add(f"demand_{tag[b]}", [(s_col, 1.0), (s_dis, 1.0)], ge, rhs[b])
            rows.add(f"colocated_demand_{tag[b]}", [*cover["colocated"][b], (s_col, -1.0)], ge, 0.0)
            rows.add(f"prefill_demand_{tag[b]}", [*cover["prefill"][b], (s_dis, -1.0)], ge, 0.0)
            rows.add(f"decode_demand_{tag[b]}", [*cover["decode"][b], (s_dis, -1.0)], ge, 0.0)
        elif has_col:
            rows.add(f"demand_{tag[b]}", cover["colocated"][b], ge, rhs[b])
        else:
            rows.add(f"prefill_demand_{tag[b]}", cover["prefill"][b], ge, rhs[b])
            rows.add(f"decode_demand_{tag[b]}", cover["decode"][b], ge, rhs[b])


def _units(model: Model, rows: _Rows, tag: list[str], reserved: Sequence[int] | None) -> None:
    data = model.data
    units: dict[tuple[int, int], Terms] = {}
    for (k, b), v in model.x.items():
        c = data.candidates[k]
        units.setdefault((data.resource_index(c.resource), b), []).append((v, float(c.units_per_replica)))
    for t, b in model.o:  # resources in use, then buckets
        res = data.resources[t]
        held = [(model.o[(t, b)], 1.0)] + ([(model.r[t], 1.0)] if t in model.r else [])
        fixed = float(reserved[t]) if reserved is not None else 0.0
        rows.add(f"units_{res.name}_{tag[b]}", units.get((t, b), []) + [(v, -1.0) for v, _ in held],
                 pulp.LpConstraintLE, fixed)  # fmt: skip
        if res.inventory is not None:
            rows.add(f"inventory_{res.name}_{tag[b]}", held, pulp.LpConstraintLE, res.inventory - fixed)


def _selection(model: Model, rows: _Rows, bound: dict[tuple[int, int], int], tag: list[str]) -> None:
    cands, y = model.data.candidates, model.y
    for (k, b), v in model.x.items():
        rows.add(f"select_{cands[k].id}_{tag[b]}", [(v, 1.0), (y[k], -float(bound[(k, b)]))],
                 pulp.LpConstraintEQ, 0.0)  # fmt: skip
    heads = [(y[k], 1.0) for k, c in enumerate(cands) if c.pool in ("colocated", "prefill")]
    rows.add("one_config", heads, pulp.LpConstraintEQ, 1.0)
    for g in sorted({c.group for c in cands if c.pool != "colocated"}):
        terms = [(y[k], 1.0) for k, c in enumerate(cands) if c.pool == "prefill" and c.group == g]
        terms += [(y[k], -1.0) for k, c in enumerate(cands) if c.pool == "decode" and c.group == g]
        rows.add(f"pair_{g}", terms, pulp.LpConstraintEQ, 0.0)
    for i, j in live_pairs(model.data):
        rows.add(
            f"incompatible_{cands[i].id}_{cands[j].id}", [(y[i], 1.0), (y[j], 1.0)], pulp.LpConstraintLE, 1.0
        )


def _availability(model: Model, rows: _Rows, bound: dict[tuple[int, int], int], tag: list[str]) -> None:
    data = model.data
    le, ge = pulp.LpConstraintLE, pulp.LpConstraintGE
    for (k, b), a in model.a.items():
        x, cid = model.x[(k, b)], data.candidates[k].id
        rows.add(f"serve_max_{cid}_{tag[b]}", [(x, 1.0), (a, -float(bound[(k, b)]))], le, 0.0)
        if data.min_replicas > 1:
            rows.add(f"serve_min_{cid}_{tag[b]}", [(x, 1.0), (a, -float(data.min_replicas))], ge, 0.0)


def _incompatible(model: Model, rows: _Rows, bound: dict[tuple[int, int], int], tag: list[str]) -> None:
    cands, z = model.data.candidates, model.z
    for (k, b), x in model.x.items():
        if k in z:
            rows.add(f"used_{cands[k].id}_{tag[b]}", [(x, 1.0), (z[k], -float(bound[(k, b)]))],
                     pulp.LpConstraintLE, 0.0)  # fmt: skip
    for i, j in live_pairs(model.data):
        rows.add(
            f"incompatible_{cands[i].id}_{cands[j].id}", [(z[i], 1.0), (z[j], 1.0)], pulp.LpConstraintLE, 1.0
        )


# ---------------------------------------------------------------------------------------------
# Solving a built model and reading it back


def run_model(
    model: Model, seconds: float, *, warm: bool = False, max_nodes: int | None = None, gap: bool = True
) -> Raw:
    """The model solved as a MILP (solvers.milp_solver.run) and read back; `gap`: stop within
    data.gap_rel (else prove optimality)."""
    solved = run(model.problem, seconds, gap_rel=model.data.gap_rel if gap else None, warm=warm,
                 max_nodes=max_nodes)  # fmt: skip
    if solved.status in ("INFEASIBLE", "NO_SOLUTION"):
        return Raw(solved.status, None, None, None, None, None, solved.solver_s, solved.timed_out)
    xs, rs, ys = _read_values(model)
    source = "solver" if solved.bound is not None else None
    return Raw(solved.status, xs, rs, ys, solved.bound, source, solved.solver_s, solved.timed_out)


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


@dataclass(frozen=True)
class Relaxation:
    status: str
    bound: float | None
    r: np.ndarray | None  # reserved units (fractional)
    x_ceil: np.ndarray | None  # replicas rounded up


def lp_relaxation(model: Model, seconds: float) -> Relaxation:
    """The LP relaxation of a built model (integers and binaries relaxed)."""
    solved = run(model.problem, seconds, mip=False)
    if solved.status != "OPTIMAL":
        return Relaxation(solved.status, None, None, None)
    data = model.data
    r = np.zeros(len(data.resources))
    for t, v in model.r.items():
        r[t] = v.varValue or 0.0
    x = np.zeros((len(data.candidates), len(data.buckets)), dtype=np.int64)
    for (k, b), v in model.x.items():
        x[k, b] = math.ceil((v.varValue or 0.0) - 1e-6)
    return Relaxation("OPTIMAL", solved.objective, r, x)


# ---------------------------------------------------------------------------------------------
# Plans as arrays (candidates x buckets): what they use, serve and cost


def set_initial(model: Model, xs: np.ndarray, rs: np.ndarray, chosen: Sequence[int] = ()) -> None:
    """Initial values for a warm start: replicas `xs`, reserved `rs` (where r is a variable),
    on-demand units for the rest, serving and use flags and demand shares to match, and the
    selection `chosen` (candidate indices; single configuration)."""
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
    for (k, b), v in model.a.items():
        v.setInitialValue(1 if xs[k, b] > 0 else 0)
    for k, v in model.z.items():
        v.setInitialValue(1 if xs[k].any() else 0)
    if model.s_col:
        col = served(data, xs)[POOLS.index("colocated")]
        need = bucket_needs(data)
        for b, v in model.s_col.items():
            share = min(float(need[b]), max(float(col[b]), 0.0))
            v.setInitialValue(share)
            model.s_dis[b].setInitialValue(max(float(need[b]) - share, 0.0))
