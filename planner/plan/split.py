"""Replicas per bucket when a router splits a bursty stream over the replicas, exact at the rates
that matter.

A pool of replicas behind a Kubernetes Service gets each request routed to a pod at random, and a
replica that takes a share q of a stream whose gaps have CV² c² sees gaps of CV² 1 + (c² - 1) q
(`planner.latency.model.per_replica_arrival_cv2`): a burst is spread over the pool, so a
replica's capacity grows with the number of replicas n sharing the stream. Each candidate is
sized bucket by bucket:

- c_n, its capacity (a root-find on the rate) with per-replica CV² 1 + (c² - 1)/n, rises with n.
  n runs over a grid (GRID: 1, 2, 3, 4, 6, 8, 12, 16, ...); between grid points the lower grid
  point's capacity is used (its CV² is higher: conservative), so c_g(n) is a step function.
- A bucket of need D (its demand x (1 + headroom)) takes N(D) = min{n : n c_g(n) >= D} replicas;
  n c_g(n) rises with n, so N is found by a search over the grid's ranges (only the grid points it
  visits are root-found) and is nondecreasing in D: more traffic never needs fewer replicas.
- The MILP gets the capacity D_b / N(D_b) in bucket b: each replica there carries at most
  1 / N(D_b) of the stream, the share it was sized at, whatever else serves the bucket beside it
  (a mixed plan credits each replica with the share its configuration would take alone, and the
  plan's router splits by those capacities: docs/plan.md).

A Poisson stream (c² = 1) has one capacity at every n; a smoother one (c² < 1) roughens towards
Poisson when split at random and a share can be arbitrarily small, so its replicas are sized as
Poisson (CV² 1). Either way one capacity per candidate (a *line*), and the MILP gets it as such.

Exact at the rates that matter. A root-find's capacity is the last rate it saw meet the SLOs, the
first it saw miss at most CAPACITY_PRECISION above (`RUNNER_UP_SPAN` covers it): a bucket whose
count differs between those two ends is *open*. `Sizing.refine` settles every open bucket with
single steady states (`meets_at`) at the rates D / n themselves, one bisection over each line's
sorted rates, and then checks that the line's first miss is where the root-find's precision says
(else it widens, at most MAX_WIDENINGS times). Lines are computed once per candidate and CV² and
remembered in the capacity memo under the configuration's key and the CV² (no rate: a traffic
scenario reuses them); counts and refinements read the rates and are made afresh, in this
process, in a fixed order: the plan is the same whatever the worker count and the memo's state.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property

from planner.latency import LatencyModel
from planner.latency.model import per_replica_arrival_cv2
from planner.plan.capacity import (
    Built,
    CapacityPoint,
    ReplicaConfig,
    SearchContext,
    evaluate_config,
    meets_at,
    slo_bound,
)
from planner.plan.search import RUNNER_UP_SPAN
from solvers.milp_data import MAX_REPLICAS_PER_BUCKET
from solvers.milp_fastpath import COVER_RTOL

ROUTER_SPLIT = "random"  # what the plan assumes a router does (docs/plan.md)
MAX_WIDENINGS = 3  # a line's first miss looked for this many spans further up at most


def _grid(upper: int) -> tuple[int, ...]:
    """1, 2, 3, 4, 6, 8, 12, 16, 24, ... (steps of 4/3x and 3/2x from 4) up to `upper`."""
    out, base = {1, 2, 3}, 4
    while base <= upper:
        out.add(base)
        out.add(base * 3 // 2)
        base *= 2
    return tuple(sorted(v for v in out if v <= upper))


GRID = _grid(MAX_REPLICAS_PER_BUCKET)


def grid_floor(n: int) -> int:
    """The largest grid point <= n (n >= 1)."""
    return GRID[bisect_right(GRID, n) - 1]


def needed(need_per_s: float, capacity_per_s: float) -> int:
    """Replicas of `capacity_per_s` that cover `need_per_s`, as the MILP counts them (within
    solvers.milp_fastpath.COVER_RTOL)."""
    if need_per_s <= 0:
        return 0
    return max(1, math.ceil(need_per_s * (1.0 - COVER_RTOL) / capacity_per_s))


@dataclass(frozen=True)
class Split:
    """The buckets' needs, demand x (1 + headroom) requests/s each."""

    needs_per_s: tuple[float, ...]

    @classmethod
    def of(cls, rates_per_s: tuple[float, ...], headroom: float) -> Split | None:
        """None when no bucket has demand (nothing to size)."""
        if not any(r > 0 for r in rates_per_s):
            return None
        return cls(tuple(r * (1.0 + headroom) for r in rates_per_s))

    @cached_property
    def distinct_needs(self) -> tuple[float, ...]:
        return tuple(sorted({d for d in self.needs_per_s if d > 0}))

    @cached_property
    def positions(self) -> tuple[int, ...]:
        """Each bucket's need's place in `distinct_needs` (-1: no demand)."""
        where = {d: i for i, d in enumerate(self.distinct_needs)}
        return tuple(where.get(d, -1) for d in self.needs_per_s)


def line_cv2(cv2: float, n: int) -> float:
    """The per-replica CV² a line is sized with: n replicas sharing a stream of CV² `cv2` at
    random (bursty), else Poisson's 1 (a smoother stream roughens towards it; Poisson stays)."""
    return per_replica_arrival_cv2(cv2, 1.0 / n) if cv2 > 1.0 else 1.0


def line_key(cv2: float, n: int) -> int:
    """Which line n replicas read: their grid point (bursty), else the one line (0)."""
    return grid_floor(n) if cv2 > 1.0 else 0


def built_at(ctx: SearchContext, cfg: ReplicaConfig, cv2: float) -> tuple[SearchContext, Built]:
    """The context with arrival CV² `cv2` and `cfg` (concrete) modelled in it, resolved once with
    the plan's context (resolving does not read the arrivals)."""
    c = replace(ctx, stats=replace(ctx.stats, arrival_cv2=cv2))
    resolved = ctx.resolve(cfg)
    return c, Built(cfg, resolved, LatencyModel(resolved, c.stats), "")


def line_capacity(ctx: SearchContext, point: CapacityPoint, cv2: float) -> CapacityPoint:
    """`point`'s configuration root-found at per-replica CV² `cv2` (`point` itself where that is
    the CV² it was found at); the answer's `arrival_cv2` says which."""
    own = ctx.stats.arrival_cv2 if point.arrival_cv2 is None else point.arrival_cv2
    if cv2 == own or not point.fits:
        return replace(point, arrival_cv2=cv2)
    c, b = built_at(ctx, point.config, cv2)
    return replace(evaluate_config(c, point.config, b), arrival_cv2=cv2)


def line_memo_key(config_key: Hashable, cv2: float) -> Hashable:
    """The memo key of a line: the configuration's own key (its capacity inputs and the
    configuration) and the per-replica CV², bitwise."""
    return ("line", config_key, cv2)


@dataclass
class Line:
    """One candidate at one per-replica CV²: `met`, a rate seen to meet the SLOs (the root-find's
    capacity, raised by refinement); `missed`, a rate seen to miss them (None: not yet looked
    for; the root-find's precision puts it within RUNNER_UP_SPAN of `met`)."""

    point: CapacityPoint
    met: float
    missed: float | None
    span: float = RUNNER_UP_SPAN

    @classmethod
    def of(cls, point: CapacityPoint) -> Line:
        rate = point.requests_per_s if point.feasible else 0.0
        exact = point.feasible and not slo_bound(point)
        return cls(point, rate, rate if exact or rate <= 0 else None)

    @property
    def upper(self) -> float:
        """No capacity above this (a rate seen to miss, else the root-find's precision)."""
        return self.missed if self.missed is not None else self.met * (1.0 + self.span)


LineSource = Callable[[CapacityPoint, float], CapacityPoint]


class Sizing:
    """One candidate's replicas per bucket of `split` (module docstring). `source(point, cv2)`
    answers a line's root-find (the pool's memo); `questions` counts the root-finds and steady
    states this candidate's sizing asked for (memo hits included)."""

    def __init__(self, ctx: SearchContext, point: CapacityPoint, split: Split, source: LineSource) -> None:
        self.ctx, self.point, self.split, self.source = ctx, point, split, source
        self.cv2 = ctx.stats.arrival_cv2
        self.lines: dict[int, Line] = {}
        self._built: dict[int, tuple[SearchContext, Built]] = {}
        self.questions = 0
        self.refined = False
        # ("all", optimistic) -> every bucket's count, while no line moves
        self._counts: dict[tuple[str, bool], tuple[int, ...]] = {}
        self._positions = split.positions
        self._point: CapacityPoint | None = None  # exact_point, while no line moves

    # -- lines --------------------------------------------------------------------------------

    def line(self, key: int) -> Line:
        got = self.lines.get(key)
        if got is None:
            cv2 = line_cv2(self.cv2, max(key, 1))
            got = self.lines[key] = Line.of(self.source(self.point, cv2))
            self._moved()
        return got

    def _moved(self) -> None:
        """A line was added or refined: forget what was read off the lines."""
        self._counts.clear()
        self._point = None

    def met(self, key: int) -> float:
        """A rate line `key` meets: its own, or a line's of fewer replicas (a higher CV²) where that
        is higher (root-finds land anywhere within their precision; meeting at a CV² means
        meeting at any lower one)."""
        own = self.line(key).met
        return max([own, *(ln.met for k, ln in self.lines.items() if k < key)])

    def upper(self, key: int) -> float:
        """No capacity of line `key` above this: the least upper bound of the lines computed at or
        above it (capacity rises with n). Called with a line at or above `key` computed."""
        return min(ln.upper for k, ln in self.lines.items() if k >= key)

    # -- counts -------------------------------------------------------------------------------

    def count(self, need_per_s: float, optimistic: bool = False) -> int:
        """N(need): the fewest replicas that cover `need_per_s` from the rates seen to meet
        (`optimistic`: from the upper bounds, with no new root-find: no exact count is lower);
        MAX_REPLICAS_PER_BUCKET + 1 where none do."""
        if need_per_s <= 0:
            return 0
        if self.cv2 <= 1.0:
            line = self.line(0)
            rate = line.upper if optimistic else line.met
            return (
                min(needed(need_per_s, rate), MAX_REPLICAS_PER_BUCKET + 1)
                if rate > 0
                else MAX_REPLICAS_PER_BUCKET + 1
            )
        first = self.line(1).met
        if first <= 0:
            return MAX_REPLICAS_PER_BUCKET + 1
        # n0 replicas at the whole stream's capacity cover the need, and capacity rises with n
        # (`met` reads the lines below): the answer is in n0's grid range or one below it.
        n0 = needed(need_per_s, first)
        top = GRID.index(grid_floor(min(n0, MAX_REPLICAS_PER_BUCKET)))
        pessimistic = self._grid_count(
            need_per_s, lambda i: self.met(GRID[i]), top, n0 > MAX_REPLICAS_PER_BUCKET
        )
        if not optimistic or pessimistic > MAX_REPLICAS_PER_BUCKET:
            return pessimistic
        top = GRID.index(grid_floor(pessimistic))
        return self._grid_count(need_per_s, lambda i: self.upper(GRID[i]), top, False)

    @staticmethod
    def _grid_count(need: float, rate: Callable[[int], float], top: int, check: bool) -> int:
        """The first grid range (index <= `top`, which covers `need` unless `check` says to look)
        in which some n covers `need` at the range's capacity `rate(i)` (n c rises with n: a
        bisection over the ranges), and that n."""

        def covers(i: int) -> bool:
            c = rate(i)
            end = GRID[i + 1] - 1 if i + 1 < len(GRID) else MAX_REPLICAS_PER_BUCKET
            return c > 0 and needed(need, c) <= end

        if check and not covers(top):
            return MAX_REPLICAS_PER_BUCKET + 1
        lo, hi = 0, top
        while lo < hi:
            mid = (lo + hi) // 2
            if covers(mid):
                hi = mid
            else:
                lo = mid + 1
        return max(GRID[lo], needed(need, rate(lo)))

    def counts(self, optimistic: bool = False) -> tuple[int, ...]:
        """`count` of each bucket's need (once per distinct need while no line moves; again if a line
        was added meanwhile, so that each count reads every line there is: at most one pass per
        grid point)."""
        whole = self._counts.get(("all", optimistic))
        if whole is not None:
            return whole
        distinct = self.split.distinct_needs
        per: list[int] = []
        for _ in range(len(GRID) + 1):
            lines = len(self.lines)
            per = [self.count(d, optimistic) for d in distinct]
            if len(self.lines) == lines:
                break
        got = self._counts[("all", optimistic)] = tuple(per[i] if i >= 0 else 0 for i in self._positions)
        return got

    def capacity_by_bucket(self) -> tuple[float, ...] | None:
        """D_b / N(D_b) per bucket (bursty; buckets without demand: the whole stream's capacity),
        None for a one-line stream (one capacity serves every bucket)."""
        if self.cv2 <= 1.0:
            return None
        whole = self.line(1).met
        return tuple(
            d / n if 0 < n <= MAX_REPLICAS_PER_BUCKET else whole
            for d, n in zip(self.split.needs_per_s, self.counts(), strict=True)
        )

    # -- exact at the rates that matter -------------------------------------------------------

    def open_rates(self, extra: Sequence[float] = ()) -> dict[int, list[float]]:
        """Per line, the rates D / n whose outcome could change a bucket's count (n between the
        optimistic and the pessimistic count), strictly between the rate the line was seen to
        meet and its upper bound. `extra`: further rates of the one line (a one-capacity
        candidate's in a mixed answer)."""
        out: dict[int, set[float]] = {}
        for d in self.split.distinct_needs:
            hi = self.count(d)
            lo = self.count(d, optimistic=True)
            for n in range(max(lo, 1), min(hi, MAX_REPLICAS_PER_BUCKET + 1)):
                key = line_key(self.cv2, n)
                r = d / n
                if self.met(key) < r < self.upper(key):
                    out.setdefault(key, set()).add(r)
        if extra and self.cv2 <= 1.0:
            out.setdefault(0, set()).update(r for r in extra if self.met(0) < r < self.upper(0))
        return {k: sorted(v) for k, v in sorted(out.items()) if v}

    def meets(self, key: int, rate: float) -> bool:
        """One steady state: does line `key`'s configuration meet the SLOs at `rate`?"""
        got = self._built.get(key)
        if got is None:
            got = self._built[key] = built_at(self.ctx, self.point.config, line_cv2(self.cv2, max(key, 1)))
        self.questions += 1
        return meets_at(got[0], self.point.config, rate, got[1])

    def refine(self, extra: Sequence[float] = ()) -> None:
        """Settle every open bucket (and the `extra` rates) exactly: per line, a bisection over its
        sorted open rates with `meets`, then the line's first miss checked where the root-find's
        precision puts it, widened (at most MAX_WIDENINGS times) if the line still meets there."""
        for _ in range(MAX_WIDENINGS + 1):
            todo = self.open_rates(extra)
            if not todo:
                break
            for key, rates in todo.items():
                self._bisect(key, rates)
        self.refined = True

    def _bisect(self, key: int, rates: list[float]) -> None:
        line = self.line(key)
        lo, hi = -1, len(rates)  # rates[lo] met (or none), rates[hi] missed (or none)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.meets(key, rates[mid]):
                lo = mid
            else:
                hi = mid
        if lo >= 0:
            line.met = rates[lo]
        if hi < len(rates):
            line.missed = rates[hi] if line.missed is None else min(line.missed, rates[hi])
        else:
            top = self.upper(key)
            if self.meets(key, top):  # a root-find's precision did not hold here: look further up
                line.met = top
                for k, other in self.lines.items():
                    if k >= key and other.missed is None:
                        other.span *= 2.0
            else:
                line.missed = top
        self._moved()

    def exact_point(self) -> CapacityPoint:
        """The candidate as the MILP reads it: a one-line stream's capacity (refined), or the
        peak bucket's D / N(D) with each bucket's in `capacity_by_bucket_per_s` and the peak's
        line (its CV², binding limit, operating point). Made once while no line moves."""
        if self._point is None:
            self._point = self._exact_point()
        return self._point

    def _exact_point(self) -> CapacityPoint:
        if self.cv2 <= 1.0:
            line = self.line(0)
            return replace(line.point, requests_per_s=line.met) if line.point.feasible else line.point
        needs = self.split.needs_per_s
        peak = max(range(len(needs)), key=lambda b: (needs[b], -b))
        n = self.count(needs[peak])
        at = self.line(line_key(self.cv2, max(n, 1)))
        if not at.point.feasible or n > MAX_REPLICAS_PER_BUCKET:
            return self.line(1).point
        rate = needs[peak] / n
        by_bucket = self.capacity_by_bucket()
        if by_bucket is not None and all(c == rate for c in by_bucket):
            by_bucket = None  # one capacity serves every bucket (one bucket, or one need)
        return replace(at.point, requests_per_s=rate, capacity_by_bucket_per_s=by_bucket)


def share_note(cv2: float, split: Split | None) -> str | None:
    """The plan's statement of the assumption (None: a Poisson stream, nothing assumed)."""
    if split is None or cv2 == 1.0:
        return None
    if cv2 < 1.0:
        return (
            f"arrivals smoother than Poisson (CV² {cv2:.3g}) are sized as Poisson per replica: a router "
            "that splits them at random makes each replica's share closer to Poisson"
        )
    return (
        f"bursty arrivals (CV² {cv2:.3g}) are taken as split at random over the replicas (a Kubernetes "
        f"Service picks a pod at random): each of n replicas sees CV² 1 + ({cv2:.3g} - 1)/n; each bucket "
        "is sized with the fewest replicas n whose capacity at that CV² covers it (n on a grid 1, 2, 3, 4, "
        "6, 8, 12, ..., the lower grid point's CV² between them)"
    )
