"""Why a sizing problem is infeasible, in the model's own terms (solvers.milp calls `diagnose` once
a solver or the closed form has proved infeasibility): the named constraint that cannot hold, what
it would need and the most it allows."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pulp

from solvers.milp_data import Bucket, MilpData, Resource, capacity_matrix, prune_dominated
from solvers.milp_fastpath import COVER_RTOL, deployment_replicas
from solvers.milp_plan import Violation, layout
from solvers.milp_result import MilpResult
from solvers.milp_solver import MIN_SOLVER_S, run

__all__ = ["Violation", "diagnose"]


def diagnose(
    data: MilpData, solve: Callable[[MilpData], MilpResult], deadline: float
) -> tuple[Violation, ...]:
    """In order: a missing kind of candidate; then demand above the most the inventory caps let
    any allowed combination serve in one bucket (exact: a small MILP without buckets, with the
    same availability rule and pairs; with r = 0 every bucket faces the same caps, so at the
    bucket with the largest need relative to what can be served this is the whole story), and,
    at that bucket, per capped resource, the units that resource alone would need (exact: the
    sizing model on that bucket and resource at one dollar per unit, through `solve`) against its
    cap. Empty when neither explains it (e.g. pairs that no single set of candidates can honour
    in every bucket), or when the `deadline` (the solve's) comes first: each small MILP gets at
    least MIN_SOLVER_S, the loops stop at the deadline."""
    cands = data.candidates
    needs = [data.need_per_s(b) for b in range(len(data.buckets))]
    peak_b = int(np.argmax(needs))
    peak = needs[peak_b]
    has_col, _ = layout(cands)
    if data.single_config:
        pre = {c.group for c in cands if c.pool == "prefill"}
        dec = {c.group for c in cands if c.pool == "decode"}
        if not has_col and not pre & dec:
            note = "no colocated candidate and no group with both a prefill and a decode candidate"
            return (Violation("one_config", 1.0, 0.0, "configs", note),)
    elif not has_col:
        missing = [p for p in ("prefill", "decode") if p not in {c.pool for c in cands}]
        if missing:
            return tuple(
                Violation(
                    f"{p}_demand_b{peak_b}", peak, 0.0, "per_s", f"no {p} candidate and no colocated one"
                )
                for p in missing
            )
    out: list[Violation] = []
    families = ["demand"] if has_col else ["prefill_demand", "decode_demand"]
    note = "demand with headroom vs the most any allowed combination can serve within the inventory caps"
    worst: tuple[int, float] | None = None
    for b, most in _most_by_bucket(data, deadline):
        if needs[b] * (1.0 - COVER_RTOL) > most:
            out.extend(Violation(f"{f}_b{b}", needs[b], most, "per_s", note) for f in families)
            if worst is None or needs[b] - most > needs[worst[0]] - worst[1]:
                worst = (b, most)
    if worst is None:
        return ()
    for res in data.resources:
        left = deadline - time.perf_counter()
        if res.inventory is None or left <= 0:
            continue
        units = _units_alone(data, res, worst[0], solve, left)
        if units is not None and units > res.inventory:
            note = "units of this resource alone (ignoring its cap) to cover the bucket"
            out.append(
                Violation(
                    f"inventory_{res.name}_b{worst[0]}", float(units), float(res.inventory), "units", note
                )
            )
    return tuple(out)


def _most_by_bucket(data: MilpData, deadline: float) -> list[tuple[int, float]]:
    """(bucket, the most it can have covered), for the bucket of the largest need among those
    with the same capacities, each distinct capacity column once (until the time limit)."""
    if all(res.inventory is None for res in data.resources):
        return []
    capacity = capacity_matrix(data)
    needs = [data.need_per_s(b) for b in range(len(data.buckets))]
    top: dict[bytes, int] = {}
    for b in range(len(data.buckets)):  # bounded: one pass over the buckets
        key = capacity[:, b].tobytes()
        if key not in top or needs[b] > needs[top[key]]:
            top[key] = b
    out: list[tuple[int, float]] = []
    for b in sorted(top.values(), key=lambda b: (-needs[b], b)):
        if out and time.perf_counter() >= deadline:
            break
        most = _max_coverage(data, b, deadline - time.perf_counter()) if needs[b] > 0 else None
        if most is not None:
            out.append((b, most))
    return out


def _max_coverage(data: MilpData, bucket: int, seconds: float) -> float | None:
    """The largest demand bucket `bucket` can have covered within the inventory caps (capped at
    its need), with the same pools, availability rule, pairs and selection rules as the sizing
    model. None if unknown."""
    peak = data.need_per_s(bucket)
    kept, _ = prune_dominated(
        data.candidates, respect_groups=data.single_config, incompatible_pairs=data.incompatible_pairs
    )
    cands = list(kept)
    capacity = [c.capacity_in(bucket) for c in cands]
    spare = float(data.spare_replicas)
    prob = pulp.LpProblem("coverage", pulp.LpMinimize)
    x: dict[int, pulp.LpVariable] = {}
    a: dict[int, pulp.LpVariable] = {}
    for k, c in enumerate(cands):
        res = data.resource(c.resource)
        ub = int(deployment_replicas(data, np.array([peak]), np.array([capacity[k]]))[0])
        if res.inventory is not None:
            ub = min(ub, res.inventory // c.units_per_replica)
        if ub > 0:
            x[k] = prob.add_variable(f"x_c{k}", 0, ub, pulp.LpInteger)
            a[k] = prob.add_variable(f"a_c{k}", 0, 1, pulp.LpBinary)
            add(prob, f"amax_c{k}", [(x[k], 1.0), (a[k], -float(ub))], pulp.LpConstraintLE, 0.0)
            if data.min_replicas > 1:
                add(
                    prob,
                    f"amin_c{k}",
                    [(x[k], 1.0), (a[k], -float(data.min_replicas))],
                    pulp.LpConstraintGE,
                    0.0,
                )
    s_col = prob.add_variable("scol", 0, peak, pulp.LpContinuous)
    s_dis = prob.add_variable("sdis", 0, peak, pulp.LpContinuous)
    for pool, s in (("colocated", s_col), ("prefill", s_dis), ("decode", s_dis)):
        terms = [(x[k], capacity[k]) for k in x if cands[k].pool == pool]
        terms += [(a[k], -spare * capacity[k]) for k in x if cands[k].pool == pool and spare]
        add(prob, f"{pool}_cover", [*terms, (s, -1.0)], pulp.LpConstraintGE, 0.0)
    add(prob, "total", [(s_col, 1.0), (s_dis, 1.0)], pulp.LpConstraintLE, peak)
    for t, res in enumerate(data.resources):
        if res.inventory is not None:
            terms = [(x[k], float(cands[k].units_per_replica)) for k in x if cands[k].resource == res.name]
            if terms:
                add(prob, f"cap_t{t}", terms, pulp.LpConstraintLE, res.inventory)
    index = {c.id: k for k, c in enumerate(cands)}
    for i, (p, q) in enumerate(data.incompatible_pairs):
        if index.get(p) in a and index.get(q) in a:
            add(prob, f"pair_{i}", [(a[index[p]], 1.0), (a[index[q]], 1.0)], pulp.LpConstraintLE, 1.0)
    if data.single_config:
        _one_config(prob, cands, x, a)
    prob.setObjective(pulp.LpAffineExpression([(s_col, -1.0), (s_dis, -1.0)]))
    solved = run(prob, seconds)
    if solved.status != "OPTIMAL" or solved.objective is None:
        return None
    return -solved.objective


def _one_config(prob: pulp.LpProblem, cands: list, x: dict, a: dict) -> None:
    """One colocated candidate, or one prefill and one decode of one group (a[k]: k selected)."""
    add(
        prob,
        "one",
        [(a[k], 1.0) for k in x if cands[k].pool in ("colocated", "prefill")],
        pulp.LpConstraintLE,
        1.0,
    )
    for i, g in enumerate(sorted({cands[k].group for k in x if cands[k].pool != "colocated"})):
        terms = [(a[k], 1.0) for k in x if cands[k].pool == "prefill" and cands[k].group == g]
        terms += [(a[k], -1.0) for k in x if cands[k].pool == "decode" and cands[k].group == g]
        add(prob, f"pair_{i}", terms, pulp.LpConstraintEQ, 0.0)


def add(prob: pulp.LpProblem, name: str, terms: list, sense: int, rhs: float) -> None:
    prob.addConstraint(pulp.LpConstraint(pulp.LpAffineExpression(terms), sense, name, float(rhs)))


def _units_alone(
    data: MilpData, res: Resource, bucket: int, solve: Callable[[MilpData], MilpResult], seconds: float
) -> int | None:
    """Fewest units of `res` alone (no cap) that cover `bucket`, under the same rules."""
    cands = tuple(
        replace(c, capacity_per_s=c.capacity_in(bucket), capacity_by_bucket_per_s=None)
        for c in data.candidates
        if c.resource == res.name
    )
    if not cands:
        return None
    ids = {c.id for c in cands}
    sub = MilpData(
        buckets=(Bucket(data.buckets[bucket].demand_per_s, 1.0),),
        resources=(Resource(res.name, 1.0),),
        candidates=cands,
        headroom=data.headroom,
        single_config=data.single_config,
        time_limit_s=min(max(seconds, MIN_SOLVER_S), 5.0),
        min_replicas=data.min_replicas,
        spare_replicas=data.spare_replicas,
        incompatible_pairs=tuple(p for p in data.incompatible_pairs if p[0] in ids and p[1] in ids),
    )
    result = solve(sub)
    if result.status != "OPTIMAL" or result.objective_usd is None:
        return None
    return round(result.objective_usd)
