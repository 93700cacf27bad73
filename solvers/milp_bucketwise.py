"""Mixed configurations over many buckets, bucket by bucket (solvers.milp's bucket-wise path).

Branch and bound does not split a model into its buckets: each bucket is a small rounding problem
closed in a few milliseconds alone, but in one model their gaps multiply (bench (b), 168 buckets
of 21 candidates: HiGHS stops at its 30 s limit with a 1.0% gap; CBC found nothing better than
the best single configuration in 300 s). Given the reserved units, and which candidates may be
used at all (incompatible pairs), the buckets are independent (solvers.milp_buckets sizes them at
given reserved units); `solve_bucketwise` chooses the reserved units around them and bounds the
optimum. Every model here goes through solvers.milp_solver (HiGHS through PuLP).

Time: every loop is bounded by the bucket count, and each one-bucket solve by what is left of
the deadline; a bucket the clock leaves unsolved keeps its start (a valid plan), and its part of
the bound is the closed-form one (solvers.milp_fastpath.fluid_bound_by_bucket), so the answer
is always a plan with a true bound. Where the clock does not cut, the same input gives the same
plan (HiGHS single-threaded, fixed orders, ties to the earlier candidate).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from solvers.milp_buckets import Sized, cheapest_start, size_buckets
from solvers.milp_data import Bucket, Candidate, MilpData, Resource, derive
from solvers.milp_fastpath import (
    best_reserved,
    enumerate_options,
    evaluate_options,
    fluid_bound,
    fluid_bound_by_bucket,
    shortlist,
)
from solvers.milp_model import Relaxation, build, lp_relaxation
from solvers.milp_plan import Raw, bucket_needs, live_pairs, matrices, plan_cost, with_candidates
from solvers.milp_solver import MIN_SOLVER_S

__all__ = [
    "FIXED_PASS_SHARE",
    "LP_MAX_VARIABLES",
    "LP_TIME_LIMIT_S",
    "MAX_FAMILIES",
    "families",
    "reserved_for",
    "reserved_rate_bound",
    "solve_bucketwise",
    "with_candidates",
]

# The LP relaxation is solved on a whole model of at most this many variables (counted before the
# build, so the choice does not depend on the clock): `data`'s own when it is that small, else
# `grouped`'s relaxation of it. PuLP builds the model and hands it to HiGHS at about 40k
# variables a second here (8,760 buckets x 27 candidates: 315k variables, 3.1 s to build, 4.3 s
# to solve). Shorter time limits than LP_TIME_LIMIT_S get proportionally fewer.
LP_MAX_VARIABLES = 40_000
LP_TIME_LIMIT_S = 10.0

# With incompatible pairs, at most this many maximal compatible sets of candidates are compared.
MAX_FAMILIES = 16

# With reserved prices, the buckets are sized again at other reserved units (_reserved_descent) at
# most this many times; when a plan cheaper than the best found can hold at most RESERVED_BOX
# reserved vectors, each is sized, and the least of their proved bills is the optimum.
RESERVED_PASSES = 16
RESERVED_BOX = 16

# With reserved prices, the buckets are sized twice: with the reserved units fixed (the plan) in at
# most this share of the time limit, then at reserved-rate prices (the bound) in the rest.
FIXED_PASS_SHARE = 0.6


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


def lp_variables(data: MilpData) -> int:
    """About how many variables the whole model of `data` has."""
    n_k, n_b = len(data.candidates), len(data.buckets)
    return n_k * n_b * (2 if data.availability else 1) + (len(data.resources) + 2) * n_b + n_k


def solve_bucketwise(
    data: MilpData, labels: tuple[tuple[int, ...], ...], layout_of: Sequence[Candidate], deadline: float
) -> Raw:
    """The module docstring's problem:

    1. the candidates a plan may use (`families`: all of them without incompatible pairs);
    2. the LP relaxation of the whole model, or of `grouped`'s relaxation of it when that would
       be over LP_MAX_VARIABLES (less under a time limit below LP_TIME_LIMIT_S); starts: the best single configuration among the candidates
       (closed form) and the LP's replicas rounded up (not grouped); the reserved units from the
       LP, rounded down;
    3. with the reserved units fixed, the buckets sized alone (size_buckets), until done or out
       of time (FIXED_PASS_SHARE of it with reserved prices; a bucket not reached keeps the
       cheapest plan it has, at least its start);
    4. the reserved units re-chosen for the final replicas (closed form: never costs more);
    5. with reserved prices, the buckets sized again at other reserved units from the best so
       far (`_reserved_descent`: its own re-chosen, each priced resource's one up and one down,
       then the box below), the cheapest plan kept;
    6. the bound: the highest of the closed-form one, the LP's, `_box_bound`'s (when a cheaper
       plan could hold at most RESERVED_BOX reserved vectors, each sized with every bucket
       proved: the least of those bills is the optimum) and `reserved_rate_bound`'s (without
       reserved prices and pairs, step 3 is that bound's own problem: no second pass).

    OPTIMAL when no resource has a reserved price, every candidate may be used and every bucket
    was proved; otherwise FEASIBLE (solvers.milp reads a bound that meets the plan as OPTIMAL)."""
    t0 = time.perf_counter()
    family = families(data)[0]
    allowed = with_candidates(data, family)
    bound, source = fluid_bound(data), "closed_form"
    lp, exact = _relax(data, labels, layout_of, deadline)
    if lp.status == "INFEASIBLE":  # no fractional answer, so no integer one
        return Raw("INFEASIBLE", None, None, None, None, None, time.perf_counter() - t0)
    if lp.bound is not None and lp.bound > bound:
        bound, source = lp.bound, "lp_relaxation"
    starts = [x for x in (_single_start(allowed), _restrict(lp if exact else None, family)) if x is not None]
    priced = [t for t, res in enumerate(data.resources) if res.reserved_usd_per_hour is not None]
    rs = _lp_reserved(data, lp, priced)
    xs, start_cost = cheapest_start(allowed, starts, rs)
    # Unpriced, every candidate allowed: sizing the buckets is the reserved-rate bound's own
    # problem (r = 0, every price its on-demand one), so one pass gives the plan and the bound.
    one_pass = not priced and len(family) == len(data.candidates)
    # The reserved-rate bound is at most any plan's bill at those prices: when the start's is no
    # more than the bound in hand, that pass cannot help, and the plan's pass gets all the time.
    hopeless = bool(starts) and _rate_bill(allowed, xs) <= bound * (1.0 + 1e-12)
    share = 1.0 if one_pass or hopeless else FIXED_PASS_SHARE
    until = t0 + (deadline - t0) * share
    free = np.isfinite(start_cost) & (start_cost <= 0.0)  # the reserved units hold it all: optimal
    sized = size_buckets(allowed, labels, layout_of, rs, xs, np.flatnonzero(~free).tolist(), until)
    if sized.infeasible and len(family) == len(data.candidates):
        return Raw("INFEASIBLE", None, None, None, None, None, time.perf_counter() - t0)
    if not (sized.solved | free).all():
        return Raw("NO_SOLUTION", None, None, None, bound, source, time.perf_counter() - t0, True)
    proved_at = {tuple(rs.tolist()): plan_cost(allowed, xs, rs)} if sized.proved.all() else {}
    rs = reserved_for(allowed, xs)
    if priced:
        xs, rs = _reserved_descent(allowed, labels, layout_of, starts, priced, (xs, rs), proved_at, until)
    full_xs = np.zeros((len(data.candidates), len(data.buckets)), dtype=np.int64)
    full_xs[family] = xs
    if one_pass and (sized.proved | free).all():
        return Raw("OPTIMAL", full_xs, rs, None, None, None, time.perf_counter() - t0)
    if priced:
        # with incompatible pairs only the first family was sized: the bound sizes them all
        known = proved_at if len(family) == len(data.candidates) else {}
        boxed = _box_bound(
            data, labels, layout_of, priced, plan_cost(allowed, xs, rs), known, full_xs, deadline
        )
        if boxed is not None and boxed > bound:
            bound, source = boxed, "reserved_box"
    better = _last_bound(
        data, labels, layout_of, sized, full_xs, bound, deadline, one_pass=one_pass, hopeless=hopeless
    )
    if better is not None:
        bound, source = better, "reserved_rate"
    timed_out = time.perf_counter() >= deadline
    return Raw("FEASIBLE", full_xs, rs, None, bound, source, time.perf_counter() - t0, timed_out)


def _relax(
    data: MilpData, labels: tuple[tuple[int, ...], ...], layout_of: Sequence[Candidate], deadline: float
) -> tuple[Relaxation, bool]:
    """Step 2's LP relaxation, and whether it is of `data` itself (else of `grouped`'s
    relaxation of it): the whole model when it has at most LP_MAX_VARIABLES variables (fewer
    under a time limit below LP_TIME_LIMIT_S), counted before the build so that the choice does
    not depend on the clock; a third of the time left, less the build."""
    per_bucket = lp_variables(data) / len(data.buckets)
    budget = LP_MAX_VARIABLES * min(1.0, data.time_limit_s / LP_TIME_LIMIT_S)
    groups = max(1, int(budget // per_bucket))
    exact = groups >= len(data.buckets)
    relaxed = data if exact else grouped(data, groups)
    full = build(relaxed, _labels=labels if exact else None, _layout_of=layout_of)
    lp = lp_relaxation(full, max((deadline - time.perf_counter()) / 3 - full.build_s, MIN_SOLVER_S))
    return lp, exact


def _lp_reserved(data: MilpData, lp: Relaxation, priced: Sequence[int]) -> np.ndarray:
    """Step 2's reserved units: the LP's fractional ones rounded down (1e-6 keeps an LP's
    round-off just below an integer from losing a unit), on the `priced` resources; none where
    the LP has no answer."""
    rs = np.zeros(len(data.resources), dtype=np.int64)
    if lp.r is not None:
        rs[priced] = np.floor(lp.r[priced] + 1e-6).astype(np.int64)
    return rs


def _last_bound(
    data: MilpData,
    labels: tuple[tuple[int, ...], ...],
    layout_of: Sequence[Candidate],
    sized: Sized,
    full_xs: np.ndarray,
    bound: float,
    deadline: float,
    *,
    one_pass: bool,
    hopeless: bool,
) -> float | None:
    """Step 6's reserved-rate bound, when it beats `bound`: in one pass (unpriced, every
    candidate allowed) the sizing's own per-bucket bounds, each no less than the closed-form
    one; none when the start already showed it cannot help (`hopeless`); else its own pass
    (`reserved_rate_bound`) from the plan's replicas."""
    if one_pass:
        summed = math.fsum(np.fmax(sized.lower, fluid_bound_by_bucket(data)).tolist())
        return summed if summed > bound else None
    if hopeless:
        return None
    return reserved_rate_bound(data, labels, layout_of, full_xs, bound, deadline)


def _reserved_descent(
    data: MilpData,
    labels: tuple[tuple[int, ...], ...],
    layout_of: Sequence[Candidate],
    starts: Sequence[np.ndarray],
    priced: Sequence[int],
    first: tuple[np.ndarray, np.ndarray],
    exact: dict[tuple[int, ...], float],
    until: float,
) -> tuple[np.ndarray, np.ndarray]:
    """The buckets sized again at other reserved units, the cheapest plan kept: from the best so
    far, its own reserved units re-chosen (`reserved_for`) and each priced resource's count one
    up and one down, while a pass finds a cheaper plan; then the rest of the box `_box_bound`
    needs. At most RESERVED_PASSES passes, none after `until`; a pass the clock cuts is dropped.
    The LP relaxation's reserved units, which start the first pass, can be far off: with
    availability floors and a few replicas per bucket its fractional replicas hold 0.2 reserved
    GPUs where 2 are best, and every bucket is then sized as if on-demand were the only price.
    `exact` collects, per reserved vector whose pass proved every bucket, the optimum's bill at
    exactly those reserved units."""
    best_xs, best_rs = first
    best = plan_cost(data, best_xs, best_rs)
    tried = set(exact)
    for _ in range(RESERVED_PASSES):  # bounded
        steps = [best_rs.copy()]
        for t in priced:
            for d in (1, -1):
                r = best_rs.copy()
                r[t] += d
                steps.append(r)
        todo = [r for r in steps if r.min() >= 0 and tuple(r.tolist()) not in tried]
        if not todo:
            todo = [np.array(r) for r in _box(data, priced, best) or () if r not in tried]
        if not todo or time.perf_counter() >= until:
            break
        rs = todo[0]
        tried.add(tuple(rs.tolist()))
        xs, start_cost = cheapest_start(data, starts, rs)
        free = np.isfinite(start_cost) & (start_cost <= 0.0)
        sized = size_buckets(data, labels, layout_of, rs, xs, np.flatnonzero(~free).tolist(), until)
        if sized.infeasible or not (sized.solved | free).all() or time.perf_counter() >= until:
            continue
        if sized.proved.all():
            exact[tuple(rs.tolist())] = plan_cost(data, xs, rs)
        rs = reserved_for(data, xs)
        cost = plan_cost(data, xs, rs)
        if cost < best * (1.0 - 1e-12):
            best, best_xs, best_rs = cost, xs, rs
    return best_xs, best_rs


def _box(data: MilpData, priced: Sequence[int], incumbent: float) -> list[tuple[int, ...]] | None:
    """Every reserved vector a plan cheaper than `incumbent` may hold (the others' reserved bill
    alone exceeds it; within the inventory caps), or None when there are more than RESERVED_BOX."""
    tops = []
    for t in priced:
        res = data.resources[t]
        assert res.reserved_usd_per_hour is not None
        top = int(incumbent // (res.reserved_usd_per_hour * data.total_hours))
        tops.append(min(top, res.inventory) if res.inventory is not None else top)
    if math.prod(top + 1 for top in tops) > RESERVED_BOX:
        return None
    out = []
    for combo in itertools.product(*(range(top + 1) for top in tops)):
        r = [0] * len(data.resources)
        for t, v in zip(priced, combo, strict=True):
            r[t] = v
        out.append(tuple(r))
    return out


def _box_bound(
    data: MilpData,
    labels: tuple[tuple[int, ...], ...],
    layout_of: Sequence[Candidate],
    priced: Sequence[int],
    incumbent: float,
    known: dict[tuple[int, ...], float],
    start: np.ndarray,
    deadline: float,
) -> float | None:
    """A lower bound on the optimum from every reserved vector of the box (`_box`): given the
    reserved units the buckets are independent, so the least over the box of the bills with
    every bucket proved is the optimum. `known`: such bills already in hand (exact); the others
    are sized here over every candidate, each bucket alone (its incompatible pairs within the
    bucket only: a relaxation, so still a bound), from `start`. None when the box is too large,
    or the clock or an unproved bucket leaves a vector of it out."""
    box = _box(data, priced, incumbent)
    if box is None:
        return None
    bills = []
    for r in box:  # bounded: at most RESERVED_BOX
        if r in known:
            bills.append(known[r])
            continue
        if time.perf_counter() >= deadline:
            return None
        rs = np.array(r, dtype=np.int64)
        xs = start.copy()
        sized = size_buckets(data, labels, layout_of, rs, xs, range(len(data.buckets)), deadline)
        if sized.infeasible or not sized.proved.all():
            return None
        bills.append(plan_cost(data, xs, rs))
    return min(bills)


def _rate_bill(data: MilpData, xs: np.ndarray) -> float:
    """The bill of replicas `xs` with every unit at min(reserved, on-demand) per hour."""
    units, _ = matrices(data)
    rate = np.array(
        [min(res.on_demand_usd_per_hour, res.reserved_usd_per_hour or math.inf) for res in data.resources]
    )
    hours = np.array([b.hours for b in data.buckets])
    return math.fsum((hours * (rate @ (units @ xs))).tolist())


def grouped(data: MilpData, groups: int) -> MilpData:
    """A relaxation of `data` over fewer buckets, for a whole model small enough to solve: the
    buckets in order of need cut into `groups` runs, each one bucket of its least need, its
    hours summed, and every candidate's most capacity in the run. Any plan of `data` gives one
    of this that costs no more (each run takes its cheapest bucket's replicas, which cover the
    least need with no more capacity, at the least bill rate; the reserved units and which
    candidates are used stay), so its LP relaxation is a lower bound on `data`'s optimum."""
    need = bucket_needs(data)
    order = sorted(range(len(data.buckets)), key=lambda j: (need[j], j))
    runs = [chunk.tolist() for chunk in np.array_split(np.array(order, dtype=np.int64), groups) if chunk.size]
    _, capacity = matrices(data)
    buckets = tuple(
        Bucket(data.buckets[run[0]].demand_per_s, math.fsum(data.buckets[b].hours for b in run))
        for run in runs
    )
    cands = tuple(
        c if c.capacity_by_bucket_per_s is None
        else replace(c, capacity_by_bucket_per_s=tuple(float(capacity[k, run].max()) for run in runs))
        for k, c in enumerate(data.candidates)
    )  # fmt: skip
    return derive(data, buckets=buckets, candidates=cands)


def _single_start(data: MilpData) -> np.ndarray | None:
    """The replicas of the best single configuration of `data` (closed form), if one fits."""
    try:
        options = evaluate_options(data, enumerate_options(data, range(len(data.candidates))))
    except ValueError:  # too many to cost
        return None
    best = shortlist(options, 1) if options else []
    if not best or not math.isfinite(best[0].cost_usd):
        return None
    xs = np.zeros((len(data.candidates), len(data.buckets)), dtype=np.int64)
    for k, reps in zip(best[0].members, best[0].replicas, strict=True):
        xs[k] = reps
    return xs


def _restrict(lp: Relaxation | None, family: Sequence[int]) -> np.ndarray | None:
    """The LP's rounded-up replicas, when they use only the `family`'s candidates."""
    x = lp.x_ceil if lp is not None else None
    if x is None:
        return None
    outside = np.ones(x.shape[0], dtype=bool)
    outside[list(family)] = False
    return None if x[outside].any() else x[list(family)]


def families(data: MilpData) -> list[list[int]]:
    """Sets of candidates (indices) of which a plan may use all: every candidate outside the
    incompatible pairs, plus a maximal compatible set of those in them, greedily from each one
    in turn (at most MAX_FAMILIES), cheapest fluid bound first (ties: found first). A plan's
    candidates always fit in some maximal compatible set, but only the first family is sized:
    the others are left to the bound."""
    pairs = live_pairs(data)
    if not pairs:
        return [list(range(len(data.candidates)))]
    conflict: dict[int, set[int]] = {}
    for i, j in pairs:
        conflict.setdefault(i, set()).add(j)
        conflict.setdefault(j, set()).add(i)
    involved = sorted(conflict)
    found: list[list[int]] = []
    for first in involved:  # bounded: one greedy pass per candidate in a pair
        chosen = {first}
        for k in involved:
            if k not in chosen and not conflict[k] & chosen:
                chosen.add(k)
        family = sorted(chosen | (set(range(len(data.candidates))) - set(involved)))
        if family not in found:
            found.append(family)
        if len(found) >= MAX_FAMILIES:
            break
    scores = [fluid_bound(with_candidates(data, f)) for f in found]
    return [found[i] for i in sorted(range(len(found)), key=lambda i: (scores[i], i))]


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
    caps, the availability rule and the incompatible pairs; the least of that per bucket is a
    one-bucket MILP without reserved units (the Lagrangian bound with the reserved price spread
    over the buckets by their hours). Unlike the LP relaxation it keeps every bucket's integer
    rounding; it is tight when the plan holds no reserved units. A bucket the clock leaves
    unproved counts with its solver bound or its closed-form one (fluid_bound_by_bucket, at the
    same prices). Skipped (None) when it cannot beat `known`: the plan's own buckets at those
    prices cost no more than `known`."""
    units, _ = matrices(data)
    rate = np.array(
        [min(res.on_demand_usd_per_hour, res.reserved_usd_per_hour or math.inf) for res in data.resources]
    )
    hours = np.array([b.hours for b in data.buckets])
    if known is not None and _rate_bill(data, xs) <= known * (1.0 + 1e-12):
        return None  # the plan is a candidate answer in each bucket
    cheap = derive(
        data,
        resources=tuple(
            Resource(res.name, float(rate[t]), None, res.inventory) for t, res in enumerate(data.resources)
        ),
    )
    ys = xs.copy()  # the plan's replicas start each bucket (within the caps: held >= used)
    zero = np.zeros(len(data.resources), dtype=np.int64)
    sized = size_buckets(cheap, labels, layout_of, zero, ys, range(len(data.buckets)), deadline)
    if sized.infeasible:
        return None
    proved_cost = hours * (rate @ (units @ ys))
    fallback = np.fmax(fluid_bound_by_bucket(cheap), sized.lower)
    bound = math.fsum(np.where(sized.proved, proved_cost, fallback).tolist())
    return bound if known is None or bound > known else None
