"""Plans as arrays (candidates x buckets): what replicas use, serve and cost, whether they cover
the demand, and when an objective counts as proved. Plain NumPy, no PuLP: the closed-form path
(one configuration, the usual plan) answers with these alone, so a plan that needs no MILP never
imports a solver (PuLP loads highspy, ~0.1 s of a CLI call)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from solvers.milp_data import POOLS, Candidate, MilpData, capacity_matrix, derive

__all__ = [
    "PROOF_ABS_USD",
    "PROOF_REL",
    "Raw",
    "Violation",
    "bucket_needs",
    "check_plan",
    "covered",
    "layout",
    "live_pairs",
    "matrices",
    "plan_cost",
    "proved",
    "served",
    "totals",
    "with_candidates",
]

# An objective within this of the bound is proved optimal: HiGHS's mip_abs_gap (set explicitly
# in solvers.milp_solver, its default) plus float noise on large bills.
PROOF_ABS_USD = 1e-6
PROOF_REL = 1e-9


def layout(candidates: Sequence[Candidate]) -> tuple[bool, bool]:
    """(any colocated candidate, any prefill or decode candidate): which coverage rows exist."""
    pools = {c.pool for c in candidates}
    return "colocated" in pools, bool(pools & {"prefill", "decode"})


def live_pairs(data: MilpData) -> list[tuple[int, int]]:
    """The incompatible pairs as candidate indices, each once, in input order."""
    index = {c.id: k for k, c in enumerate(data.candidates)}
    seen: set[frozenset[int]] = set()
    out = []
    for a, b in data.incompatible_pairs:
        pair = (index[a], index[b])
        if frozenset(pair) not in seen:
            seen.add(frozenset(pair))
            out.append(pair)
    return out


def bucket_needs(data: MilpData) -> np.ndarray:
    return np.array([data.need_per_s(b) for b in range(len(data.buckets))])


def matrices(data: MilpData) -> tuple[np.ndarray, np.ndarray]:
    """units (resources x candidates) and capacity (candidates x buckets) matrices (cached on the
    data, read-only: a solve reads them a few times)."""
    units = data._cache.get("units")
    if units is None:
        units = np.zeros((len(data.resources), len(data.candidates)))
        for k, c in enumerate(data.candidates):
            units[data.resource_index(c.resource), k] = c.units_per_replica
        units.setflags(write=False)
        data._cache["units"] = units
    return units, capacity_matrix(data)


def served(data: MilpData, xs: np.ndarray) -> np.ndarray:
    """Per pool (POOLS order) and bucket, what the replicas `xs` serve as the coverage rows count
    it: c_kb (x[k,b] - S) for each deployment with replicas."""
    _, capacity = matrices(data)
    effective = capacity * np.where(xs > 0, xs - data.spare_replicas, 0)
    pool = np.array([POOLS.index(c.pool) for c in data.candidates])
    out = np.zeros((len(POOLS), xs.shape[1]))
    for p in range(len(POOLS)):
        out[p] = effective[pool == p].sum(axis=0)
    return out


def covered(data: MilpData, xs: np.ndarray) -> np.ndarray:
    """The demand per bucket the replicas `xs` cover: colocated + min(prefill, decode)."""
    col, pre, dec = served(data, xs)
    return col + np.minimum(pre, dec)


def check_plan(data: MilpData, xs: np.ndarray) -> None:
    """A plan read back must cover every bucket and keep the availability rule and the
    incompatible pairs (else a solver or tolerance slip)."""
    short = np.asarray(covered(data, xs) < bucket_needs(data) * (1.0 - 1e-6))
    few = np.asarray((xs > 0) & (xs < data.min_replicas)).any(axis=0)
    if short.any() or few.any():
        b = int(np.flatnonzero(short | few)[0])
        raise RuntimeError(f"the solver's replicas do not cover bucket {b} under the availability rule")
    used: list[bool] = [bool(row.any()) for row in xs]
    for i, j in live_pairs(data):
        if used[i] and used[j]:
            raise RuntimeError(
                f"the solver deployed the incompatible pair {data.candidates[i].id}, {data.candidates[j].id}"
            )


def totals(data: MilpData, xs: np.ndarray, rs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Units used and on-demand units per (resource, bucket), and the bill rate per bucket."""
    units, _ = matrices(data)
    used = np.rint(units @ xs).astype(np.int64)
    on_demand = np.maximum(used - rs[:, None], 0)
    reserved_usd = np.array([res.reserved_usd_per_hour or 0.0 for res in data.resources])
    od_usd = np.array([res.on_demand_usd_per_hour for res in data.resources])
    rate = float(reserved_usd @ rs) + od_usd @ on_demand
    return used, on_demand, rate


def plan_cost(data: MilpData, xs: np.ndarray, rs: np.ndarray) -> float:
    """The bill of replicas `xs` and reserved units `rs` over `data`'s buckets."""
    _, _, rate = totals(data, xs, np.asarray(rs, dtype=np.int64))
    return math.fsum(float(v) * b.hours for v, b in zip(rate, data.buckets, strict=True))


def with_candidates(data: MilpData, keep: Sequence[int]) -> MilpData:
    """`data` over the candidates `keep` (indices), with the pairs among them."""
    cands = tuple(data.candidates[k] for k in keep)
    ids = {c.id for c in cands}
    pairs = tuple(p for p in data.incompatible_pairs if p[0] in ids and p[1] in ids)
    return derive(data, candidates=cands, incompatible_pairs=pairs)


def proved(objective: float, bound: float | None) -> bool:
    return bound is not None and objective - bound <= PROOF_ABS_USD + PROOF_REL * abs(objective)


@dataclass(frozen=True)
class Raw:
    """A solver's answer in the model's own indices (None arrays when it has no solution)."""

    status: str
    x: np.ndarray | None  # model candidates x model buckets
    r: np.ndarray | None  # per resource
    y: np.ndarray | None  # per model candidate (single configuration)
    bound_usd: float | None
    bound_source: str | None
    solver_s: float
    timed_out: bool = False  # stopped on its time limit (not on optimality or a node limit)


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
