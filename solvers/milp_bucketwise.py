"""Mixed configurations over many buckets, bucket by bucket (solvers.milp's bucket-wise path).

CBC's branch and bound does not split a model into its buckets: each bucket is a small rounding
problem that a solver closes in 10-40 ms alone, but in one model their gaps multiply (measured on
the 168-bucket bench: no solution better than the best single configuration in 300 s, and none at
all when the caps force a mix). Given the reserved units, though, the buckets are independent;
`solve_bucketwise` uses that. The one-bucket models go to HiGHS in this process (run_highs), not
to a CBC process each: on bench (b) (108 buckets left to solve) 1.2 s against 2.0 s for CBC two
processes at a time, on one core instead of two (2026-11-30, shared 2-core machine).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from solvers.milp_data import POOLS, Candidate, MilpData, Resource
from solvers.milp_fastpath import COVER_RTOL, best_reserved
from solvers.milp_model import (
    MIN_SOLVER_S,
    Model,
    Raw,
    bucket_needs,
    build,
    lp_relaxation,
    matrices,
    run_highs,
)

__all__ = ["better_elsewhere", "reserved_for", "solve_bucketwise"]


def reserved_for(data: MilpData, xs: np.ndarray) -> np.ndarray:
    """The best reserved units for given replicas (closed form, per resource)."""
    units, _ = matrices(data)
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


def solve_bucketwise(
    data: MilpData,
    labels: tuple[tuple[int, ...], ...],
    layout_of: Sequence[Candidate],
    warm_x: np.ndarray | None,
    deadline: float,
    full: Model | None = None,
) -> tuple[Raw, Model]:
    """The module docstring's problem, in four steps:

    1. the LP relaxation of the whole model gives the lower bound (for the gap) and the reserved
       units worth holding, rounded down;
    2. each bucket starts from the cheaper (at those reserved units) of the best single
       configuration and the LP's replicas rounded up, where either is valid (a start the
       reserved units hold entirely costs nothing: optimal, that bucket is done);
    3. with the reserved units fixed, HiGHS sizes each bucket alone, over the candidates
       `better_elsewhere` leaves, smallest need first, until done or out of time (a bucket not
       reached keeps its start); a bucket the last proved answer still covers takes it without
       a solve (size_buckets);
    4. the reserved units are re-chosen for the final replicas (closed form: never costs more).

    Exact when no resource has a reserved price and every bucket was proved optimal; otherwise
    FEASIBLE with the gap to the better of the LP bound and `reserved_rate_bound` (solvers.milp
    reads a gap of zero as OPTIMAL). `full`: the whole model of `data`, when already built."""
    t0 = time.perf_counter()
    if full is None:
        full = build(data, _labels=labels, _layout_of=layout_of)
    lp = lp_relaxation(full, max((deadline - time.perf_counter()) / 3, MIN_SOLVER_S))
    if lp.status == "INFEASIBLE":  # no fractional answer, so no integer one
        return Raw("INFEASIBLE", None, None, None, None, None, time.perf_counter() - t0), full
    priced = [t for t, res in enumerate(data.resources) if res.reserved_usd_per_hour is not None]
    rs = np.zeros(len(data.resources), dtype=np.int64)
    if lp.r is not None:
        rs[priced] = np.floor(lp.r[priced] + 1e-6).astype(np.int64)
    starts = [x for x in (warm_x, lp.x_ceil) if x is not None]
    xs, start_cost = cheapest_start(data, starts, rs)
    started = np.isfinite(start_cost)
    # A start that costs nothing at these reserved units (they hold it all) is optimal as it is.
    free = started & (start_cost <= 0.0)
    need = bucket_needs(data)
    order = sorted(np.flatnonzero(~free).tolist(), key=lambda j: (need[j], j))
    solved, infeasible, proved = size_buckets(data, labels, layout_of, rs, xs, started, order, deadline)
    solved = [s or bool(f) for s, f in zip(solved, free, strict=True)]
    if infeasible:
        return Raw("INFEASIBLE", None, None, None, None, None, time.perf_counter() - t0), full
    if not all(solved[j] or started[j] for j in range(len(data.buckets))):
        return Raw("NO_SOLUTION", None, None, None, None, None, time.perf_counter() - t0), full
    rs = reserved_for(data, xs)
    if not priced and proved and all(solved):
        return Raw("OPTIMAL", xs, rs, None, None, None, time.perf_counter() - t0), full
    bound, source = lp.bound, "lp_relaxation" if lp.bound is not None else None
    better = reserved_rate_bound(data, labels, layout_of, xs, bound, deadline)
    if better is not None:
        bound, source = better, "reserved_rate"
    return Raw("FEASIBLE", xs, rs, None, bound, source, time.perf_counter() - t0), full


def reserved_rate_bound(
    data: MilpData,
    labels: tuple[tuple[int, ...], ...],
    layout_of: Sequence[Candidate],
    xs: np.ndarray,
    known: float | None,
    deadline: float,
) -> float | None:
    """A lower bound on the optimum, when it beats `known`: every bucket sized alone with each
    unit priced at min(reserved, on-demand) per hour, and only in the buckets that use it.

    Valid: for any plan, R r H = sum_b h_b R r >= sum_b h_b R min(U_b, r), so its bill is at
    least sum_b h_b sum_t min(R_t, O_t) U_tb, and each bucket's U_b covers that bucket within the
    caps; the least of that per bucket is a one-bucket MILP without reserved units (the
    Lagrangian bound with the reserved price spread over the buckets by their hours). Unlike
    the LP relaxation it keeps every bucket's integer rounding, which is most of the gap when a
    bucket needs a few replicas; it is tight when the plan holds no reserved units (e.g. an
    unpriced type is cheaper than a priced one even at its reserved rate). Skipped (None) when
    it cannot beat `known`: the plan's own buckets at those prices cost no more than `known`.
    None too when time runs out before every bucket is proved."""
    units, _ = matrices(data)
    rate = np.array(
        [min(res.on_demand_usd_per_hour, res.reserved_usd_per_hour or math.inf) for res in data.resources]
    )
    hours = np.array([b.hours for b in data.buckets])
    ceiling = float(hours @ (rate @ (units @ xs)))  # the plan is a candidate answer in each bucket
    if known is not None and ceiling <= known * (1.0 + 1e-12):
        return None
    cheap = replace(
        data,
        resources=tuple(
            Resource(res.name, float(rate[t]), None, res.inventory) for t, res in enumerate(data.resources)
        ),
    )
    need = bucket_needs(data)
    order = sorted(range(len(data.buckets)), key=lambda j: (need[j], j))
    ys = xs.copy()  # the plan's replicas start each bucket (within the caps: held >= used)
    rs = np.zeros(len(data.resources), dtype=np.int64)
    started = np.ones(len(data.buckets), dtype=bool)
    solved, infeasible, proved = size_buckets(cheap, labels, layout_of, rs, ys, started, order, deadline)
    if infeasible or not proved or not all(solved):
        return None
    bound = float(hours @ (rate @ (units @ ys)))
    return bound if known is None or bound > known else None


def cheapest_start(
    data: MilpData, starts: Sequence[np.ndarray], rs: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per bucket, the start that covers it within the caps at the least on-demand bill (at
    reserved units `rs`); its bill rate per bucket (inf where no start is valid)."""
    n_b = len(data.buckets)
    xs = np.zeros((len(data.candidates), n_b), dtype=np.int64)
    best = np.full(n_b, np.inf)
    units, capacity = matrices(data)
    need = bucket_needs(data) * (1.0 - COVER_RTOL)
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


def better_elsewhere(data: MilpData, rs: np.ndarray) -> dict[int, int]:
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


def size_buckets(
    data: MilpData,
    labels: tuple[tuple[int, ...], ...],
    layout_of: Sequence[Candidate],
    rs: np.ndarray,
    xs: np.ndarray,
    started: np.ndarray,
    order: Sequence[int],
    deadline: float,
) -> tuple[list[bool], bool, bool]:
    """Each bucket alone with the reserved units fixed, in `order` (smallest need first), over
    the candidates `better_elsewhere` leaves (starts moved onto them), solved in this process by
    HiGHS (solvers.milp_model.run_highs); or, when an answer proved optimal for a smaller need
    covers the bucket too, that answer: with the same reserved units and caps in every bucket, a bigger need
    costs at least as much, so an answer that covers it is optimal. The answers go into `xs`
    (whose columns are the starts where `started`). Returns which buckets were solved, whether
    one was proved infeasible, and whether all solved ones were proved optimal."""
    n_b = len(data.buckets)
    swap = better_elsewhere(data, rs)
    keep = [k for k in range(len(data.candidates)) if k not in swap]
    for k, j in swap.items():
        xs[j] += xs[k]
        xs[k] = 0
    narrow = replace(data, candidates=tuple(data.candidates[k] for k in keep))
    _, capacity = matrices(narrow)
    need = bucket_needs(data) * (1.0 - COVER_RTOL)
    solved = [False] * n_b
    verdicts: list[str] = []
    reach = -np.inf  # the most a proved answer so far covers
    best: np.ndarray | None = None
    for j in order:
        if best is not None and need[j] <= reach:
            xs[keep, j] = best
            solved[j] = True
            continue
        left = deadline - time.perf_counter()
        if left <= 0:
            break
        part = replace(narrow, buckets=(data.buckets[j],))
        model = build(part, _labels=[labels[j]], _layout_of=layout_of, _reserved=rs.tolist())
        raw = run_highs(model, left - model.build_s)
        verdicts.append(raw.status if raw.bound_usd is None else "FEASIBLE")
        if raw.x is not None:
            xs[keep, j] = raw.x[:, 0]
            solved[j] = True
        if raw.status == "OPTIMAL" and raw.bound_usd is None and raw.x is not None:
            col, pre, dec = capacity @ raw.x[:, 0]
            if col + min(pre, dec) > reach:  # any proved answer that covers a bigger need will do
                best = raw.x[:, 0].copy()
                reach = float(col + min(pre, dec))
    return solved, "INFEASIBLE" in verdicts, all(v == "OPTIMAL" for v in verdicts)
