"""Exact cost of each single configuration in closed form (the sizing MILP's fast path).

With one configuration (an *option*: one colocated candidate, or one prefill and one decode
candidate of one group, never an incompatible pair) serving every bucket, nothing is left to
choose but the reserved units: each bucket with demand needs exactly
n_b = max(min_replicas, ceil(need_b / c_b) + spare_replicas) replicas of each member (c_b its
capacity in bucket b; fewer do not cover or break the availability rule, more never lower the
bill), a bucket without demand none, hence g_b = sum of n_b * units_per_replica units of each
resource. With R the reserved and O the on-demand price per unit-hour, H the horizon's hours and
h_b a bucket's hours, holding r reserved units costs

    cost(r) = R * H * r + O * sum_b h_b * max(0, g_b - r),

a convex piecewise-linear function of r whose breakpoints are the g_b: its minimum over the
integers is at r = 0 or at one of the g_b, so evaluating those is exact. An inventory cap C makes
the option infeasible when some g_b > C (reserved units count against the cap too, and r <= max
g_b <= C at the optimum). Resources add up independently.

So the best single configuration is known exactly without a MILP: solvers.milp answers a
single-configuration problem with it, and starts a mixed one from it. `fluid_bound` is the
closed-form lower bound every mixed answer's gap can fall back on. Pure numpy, no solver.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from solvers.milp_data import LIMIT_PREFIX, MilpData, SizeLimitError, capacity_matrix

__all__ = [
    "COVER_RTOL",
    "MAX_OPTION_CELLS",
    "Option",
    "best_reserved",
    "deployment_replicas",
    "enumerate_options",
    "evaluate_options",
    "replicas_needed",
    "shortlist",
]

# Coverage is judged with this relative tolerance everywhere (closed form, MILP right-hand sides,
# checks of the solution read back), so that need/capacity = 2.0000000000004 (float noise on an
# exact 2) asks for 2 replicas, not 3.
COVER_RTOL = 1e-9
# options x buckets evaluated by the closed form (pairs of one group multiply).
MAX_OPTION_CELLS = 5_000_000


def replicas_needed(need_per_s: np.ndarray, capacity_per_s: float | np.ndarray) -> np.ndarray:
    """Smallest replica counts with capacity_per_s * n >= need_per_s (within COVER_RTOL);
    `capacity_per_s` one value or one per bucket."""
    ratio = np.asarray(need_per_s, dtype=float) * (1.0 - COVER_RTOL) / capacity_per_s
    return np.maximum(np.ceil(ratio), 0.0).astype(np.int64)


def deployment_replicas(data: MilpData, need_per_s: np.ndarray, capacity_per_s: np.ndarray) -> np.ndarray:
    """Replicas one deployment (a candidate alone in its pool) takes per bucket under the
    availability rule: max(min_replicas, ceil(need / c) + spare_replicas) where there is demand,
    0 where there is none. Also the most replicas of a candidate any optimum holds (with that
    many it covers the bucket alone)."""
    need = np.asarray(need_per_s, dtype=float)
    n = replicas_needed(need, capacity_per_s) + data.spare_replicas
    return np.where(need > 0, np.maximum(n, data.min_replicas), 0).astype(np.int64)


@dataclass(frozen=True)
class Option:
    """One single configuration and its exact cost when it serves alone.

    members: candidate indices (one colocated, or prefill then decode). cost_usd: the optimum
    (math.inf when an inventory cap cannot be met). reserved: (resource index, reserved units)
    per resource it uses. replicas: per member, replicas per bucket."""

    members: tuple[int, ...]
    cost_usd: float
    reserved: tuple[tuple[int, int], ...]
    replicas: tuple[tuple[int, ...], ...]


def enumerate_options(data: MilpData, usable: Sequence[int]) -> list[tuple[int, ...]]:
    """Single configurations among the `usable` candidate indices: each colocated candidate, and
    each (prefill, decode) pair of one group that is not an incompatible pair, in a
    deterministic order."""
    cands = data.candidates
    banned = {frozenset(pair) for pair in data.incompatible_pairs}
    options: list[tuple[int, ...]] = [(k,) for k in usable if cands[k].pool == "colocated"]
    prefill: dict[str, list[int]] = {}
    decode: dict[str, list[int]] = {}
    for k in usable:
        if cands[k].pool == "prefill":
            prefill.setdefault(cands[k].group, []).append(k)
        elif cands[k].pool == "decode":
            decode.setdefault(cands[k].group, []).append(k)
    for group in sorted(prefill):
        for p in prefill[group]:
            options.extend(
                (p, d) for d in decode.get(group, ()) if frozenset((cands[p].id, cands[d].id)) not in banned
            )
    cells = len(options) * len(data.buckets)
    if cells > MAX_OPTION_CELLS:
        raise SizeLimitError(f"single configurations x buckets {LIMIT_PREFIX} {MAX_OPTION_CELLS}, got {cells}")
    return options


def best_reserved(
    units: np.ndarray, hours: np.ndarray, reserved_rate: float | None, on_demand_rate: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per row of `units` (options x buckets): the minimum of cost(r) and its smallest argmin."""
    on_demand_all = on_demand_rate * (units * hours).sum(axis=1)
    n = units.shape[0]
    if reserved_rate is None or n == 0:
        return on_demand_all, np.zeros(n, dtype=np.int64)
    total_hours = float(hours.sum())
    order = np.argsort(units, axis=1, kind="stable")
    g = np.take_along_axis(units, order, axis=1).astype(float)
    h = np.broadcast_to(hours, units.shape)
    h = np.take_along_axis(h, order, axis=1)
    # Suffix sums from position j: with r = g[j], every bucket at or after j in sorted order has
    # g >= r (ties add zero), every bucket before has g <= r (adds nothing).
    suffix_gh = np.cumsum((g * h)[:, ::-1], axis=1)[:, ::-1]
    suffix_h = np.cumsum(h[:, ::-1], axis=1)[:, ::-1]
    at_g = reserved_rate * total_hours * g + on_demand_rate * (suffix_gh - g * suffix_h)
    costs = np.concatenate([on_demand_all[:, None], at_g], axis=1)
    levels = np.concatenate([np.zeros((n, 1)), g], axis=1)
    # Smallest cost, then smallest r among (numerically) equal costs: deterministic.
    best = costs.min(axis=1)
    tol = 1e-12 * np.maximum(1.0, np.abs(best))
    masked = np.where(costs <= best[:, None] + tol[:, None], levels, np.inf)
    r = masked.min(axis=1)
    return best, r.astype(np.int64)


def evaluate_options(data: MilpData, options: Sequence[tuple[int, ...]]) -> list[Option]:
    """Exact cost of each option serving alone (see the module docstring)."""
    if not options:
        return []
    cands = data.candidates
    hours = np.array([b.hours for b in data.buckets], dtype=float)
    bucket_need = np.array([data.need_per_s(b) for b in range(len(data.buckets))])
    capacity = capacity_matrix(data)
    n_opt = len(options)
    n_bucket = len(bucket_need)
    # Replicas per (candidate) are shared across the options that use it.
    needed: dict[int, np.ndarray] = {}
    for option in options:
        for k in option:
            if k not in needed:
                needed[k] = deployment_replicas(data, bucket_need, capacity[k])
    # Units per resource, only for the options that use that resource.
    rows: dict[int, list[int]] = {}
    for i, option in enumerate(options):
        for t in sorted({data.resource_index(cands[k].resource) for k in option}):
            rows.setdefault(t, []).append(i)
    total = np.zeros(n_opt)
    reserved_of: list[list[tuple[int, int]]] = [[] for _ in options]
    for t in sorted(rows):
        res = data.resources[t]
        units = np.zeros((len(rows[t]), n_bucket), dtype=np.int64)
        for j, i in enumerate(rows[t]):
            for k in options[i]:
                if data.resource_index(cands[k].resource) == t:
                    units[j] += needed[k] * cands[k].units_per_replica
        cost, r = best_reserved(units, hours, res.reserved_usd_per_hour, res.on_demand_usd_per_hour)
        if res.inventory is not None:
            cost = np.where(units.max(axis=1) > res.inventory, math.inf, cost)
        total[rows[t]] += cost
        for j, i in enumerate(rows[t]):
            reserved_of[i].append((t, int(r[j])))
    out: list[Option] = []
    for i, option in enumerate(options):
        out.append(
            Option(
                members=option,
                cost_usd=float(total[i]),
                reserved=tuple(reserved_of[i]),
                replicas=tuple(tuple(int(v) for v in needed[k]) for k in option),
            )
        )
    return out


def shortlist(options: Sequence[Option], keep: int) -> list[Option]:
    """The `keep` cheapest options (ties by enumeration order). Every option left out costs at
    least as much as each one kept, and its cost is exact, so the optimum is among those kept."""
    ranked = sorted(range(len(options)), key=lambda i: (options[i].cost_usd, i))
    return [options[i] for i in ranked[: max(keep, 1)]]


def fluid_bound_by_bucket(data: MilpData) -> np.ndarray:
    """Per bucket, a lower bound on what any plan pays in it (bill rate x hours), in closed form:
    each unit priced at min(reserved, on-demand) per hour, replicas fractional, no caps, no
    availability rule, no incompatible pairs. Valid: a plan pays R r H = sum_b h_b R r >= sum_b
    h_b R min(U_b, r) for its reserved units, so at least sum_b h_b sum_t min(R_t, O_t) U_tb in
    all; and covering need_b costs at least need_b x the cheapest price per unit of capacity
    (colocated, or the cheapest prefill plus the cheapest decode candidate: s_col + s_dis >= need
    and each share is bought at no less). Infinite where nothing can serve."""
    need = np.array([data.need_per_s(b) for b in range(len(data.buckets))])
    capacity = capacity_matrix(data)
    rate = np.array(
        [min(res.on_demand_usd_per_hour, res.reserved_usd_per_hour or math.inf) for res in data.resources]
    )
    price = np.array([rate[data.resource_index(c.resource)] * c.units_per_replica for c in data.candidates])
    per_capacity = price[:, None] / capacity
    cheapest = {}
    for pool in ("colocated", "prefill", "decode"):
        rows = [k for k, c in enumerate(data.candidates) if c.pool == pool]
        cheapest[pool] = per_capacity[rows].min(axis=0) if rows else np.full(len(need), math.inf)
    best = np.minimum(cheapest["colocated"], cheapest["prefill"] + cheapest["decode"])
    hours = np.array([b.hours for b in data.buckets])
    out = np.zeros(len(need))
    busy = need > 0
    out[busy] = hours[busy] * need[busy] * best[busy]
    return out


def fluid_bound(data: MilpData) -> float:
    """No plan for `data` costs less (fluid_bound_by_bucket, summed)."""
    return math.fsum(fluid_bound_by_bucket(data).tolist())
