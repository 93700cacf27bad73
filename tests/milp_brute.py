"""An enumeration of the sizing problem that shares no code with solvers.milp: every replica
count of every candidate in every bucket within a box, the rules checked as the data's docstrings
state them, every reserved count. For the tests' small instances only (the box multiplies)."""

from __future__ import annotations

import itertools
import math

import numpy as np

from solvers.milp import MilpData

POOLS = ("colocated", "prefill", "decode")


def capacity(data: MilpData, k: int, b: int) -> float:
    c = data.candidates[k]
    return c.capacity_per_s if c.capacity_by_bucket_per_s is None else c.capacity_by_bucket_per_s[b]


def selections(data: MilpData) -> list[tuple[int, ...]]:
    """Which candidates may have replicas: one configuration (a colocated candidate, or a prefill
    and a decode candidate of one group, not an incompatible pair), or all of them."""
    cands = data.candidates
    banned = {frozenset(p) for p in data.incompatible_pairs}
    if not data.single_config:
        return [tuple(range(len(cands)))]
    out: list[tuple[int, ...]] = [(k,) for k, c in enumerate(cands) if c.pool == "colocated"]
    for p, cp in enumerate(cands):
        for d, cd in enumerate(cands):
            pair = cp.pool == "prefill" and cd.pool == "decode" and cp.group == cd.group
            if pair and frozenset((cp.id, cd.id)) not in banned:
                out.append((p, d))
    return out


def brute_force(data: MilpData, slack: int = 1) -> float | None:
    """Cheapest bill by enumeration; None if infeasible. A bucket with demand is covered when,
    with `spare_replicas` replicas of every deployment (a candidate with replicas) down, the
    colocated capacity plus the smaller of the prefill and decode capacities reaches the need;
    every deployment there has at least `min_replicas` replicas; no incompatible pair both has
    replicas in any bucket. Replica counts 0..ceil(need / c) + spare + slack (and at least
    min_replicas) per candidate and bucket."""
    cands, buckets = data.candidates, data.buckets
    n_k, n_b = len(cands), len(buckets)
    need = np.array([b.demand_per_s * (1 + data.headroom) for b in buckets])
    hours = np.array([b.hours for b in buckets])
    spare, least = data.spare_replicas, data.min_replicas
    box = [
        [max(least, math.ceil(need[b] / capacity(data, k, b)) + spare + slack) if need[b] > 0 else 0
         for b in range(n_b)]
        for k in range(n_k)
    ]  # fmt: skip
    best = math.inf
    for sel in selections(data):
        ranges = [range(box[k][b] + 1) if k in sel else range(1) for k in range(n_k) for b in range(n_b)]
        xs = np.array(list(itertools.product(*ranges)), dtype=float).reshape(-1, n_k, n_b)
        ok = np.ones(len(xs), dtype=bool)
        cap = {p: np.zeros((len(xs), n_b)) for p in POOLS}
        for k, c in enumerate(cands):
            x = xs[:, k, :]
            left = np.where(x > 0, x - spare, 0.0)  # spare replicas down
            cap[c.pool] += left * np.array([capacity(data, k, b) for b in range(n_b)])
            ok &= np.all((x == 0) | (x >= least) | (need == 0), axis=1)
        ok &= np.all(
            cap["colocated"] + np.minimum(cap["prefill"], cap["decode"]) >= need * (1 - 1e-9), axis=1
        )
        index = {c.id: k for k, c in enumerate(cands)}
        for a, b in data.incompatible_pairs:
            ok &= ~(xs[:, index[a], :].any(axis=1) & xs[:, index[b], :].any(axis=1))
        cost = np.zeros(len(xs))
        for res in data.resources:
            used = sum(
                c.units_per_replica * xs[:, k, :] for k, c in enumerate(cands) if c.resource == res.name
            )
            if isinstance(used, int):
                continue
            if res.inventory is not None:
                ok &= np.all(used <= res.inventory, axis=1)
            if res.reserved_usd_per_hour is None:
                cost += res.on_demand_usd_per_hour * (used * hours).sum(axis=1)
                continue
            per_r = [
                res.reserved_usd_per_hour * hours.sum() * r
                + res.on_demand_usd_per_hour * (np.maximum(used - r, 0) * hours).sum(axis=1)
                for r in range(int(used.max()) + 1)
            ]
            cost += np.min(np.array(per_r), axis=0)
        if ok.any():
            best = min(best, float(cost[ok].min()))
    return None if math.isinf(best) else best


def plan_ok(data: MilpData, replicas: dict[str, tuple[int, ...]], reserved: dict[str, int]) -> float:
    """The bill of a plan, after checking it keeps every rule (the brute force's own terms)."""
    total = 0.0
    index = {c.id: k for k, c in enumerate(data.candidates)}
    for b, bucket in enumerate(data.buckets):
        need = bucket.demand_per_s * (1 + data.headroom)
        cap = dict.fromkeys(POOLS, 0.0)
        for c in data.candidates:
            x = replicas[c.id][b]
            assert x == 0 or need == 0 or x >= data.min_replicas, (c.id, b, x)
            if x > 0:
                cap[c.pool] += capacity(data, index[c.id], b) * (x - data.spare_replicas)
        assert cap["colocated"] + min(cap["prefill"], cap["decode"]) >= need * (1 - 1e-6), b
        for r in data.resources:
            used = sum(
                c.units_per_replica * replicas[c.id][b] for c in data.candidates if c.resource == r.name
            )
            assert r.inventory is None or max(used, reserved[r.name]) <= r.inventory
            total += bucket.hours * r.on_demand_usd_per_hour * max(used - reserved[r.name], 0)
    for a, b in data.incompatible_pairs:
        assert not (any(replicas[a]) and any(replicas[b])), (a, b)
    for r in data.resources:
        total += (r.reserved_usd_per_hour or 0.0) * data.total_hours * reserved[r.name]
    return total
