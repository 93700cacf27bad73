"""The optimum over the search's own candidates, exactly: the near-ties that the root-finds'
precision leaves open are settled at the MILP's answer (docs/plan.md, "Exact at the answer").

The MILP sizes each candidate with the rate its root-find saw meet the SLOs, up to
CAPACITY_PRECISION below the first rate it saw miss. So a bucket can take one replica more than
the candidate's exact capacity needs, and a configuration the search ranked second within that
precision (a *runner-up*) can serve the same buckets with fewer. After the MILP (its bill C):

1. Every *contender* (the MILP's candidates; the runners-up: the shapes' near-ties, the
   configuration a lowered `max_num_seqs` replaced, those pruned as divisibly dominated) gets an
   optimistic count per bucket, from the rates no capacity exceeds (no exact count is lower), and
   every single configuration of contenders (one colocated, or a prefill and a decode pool) is
   costed from those counts: a lower bound on its exact bill.
2. In the order of that bound, while it is below the least bill known: the option's members are
   made exact where it matters (split.Sizing.refine: each bucket whose count the precision left
   open settled by single steady states at need / replicas) and the option costed exactly.
3. A mixed answer's own candidates are refined too, at the rates where one replica fewer would
   do: (need - what the rest serves) / (replicas - 1).
4. If an option now costs less than C, or a mixed answer's candidate serves more than the MILP
   read: the MILP once more, with the refined capacities and the refined contenders.

Bounded: at most MAX_OPTIONS options refined (`truncated` says when the bound cut in) and one
more MILP; every steady state and root-find counted in the pool's `questions` (the report's
`search.configurations_evaluated`). In this process, in a fixed order: the same answer whatever
the worker count or the memo's state. The contenders do not depend on the rates, prices or
inventory, so neither does the set the answer is the optimum of: a harder request of those
kinds never costs less. (A bursty stream's candidates are each shape's best at the whole
stream's burstiness and its near-ties there; at the lower per-replica burstiness of a large pool
another configuration of the shape can serve more: see docs/plan.md, "Bursty arrivals".)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from planner.plan.capacity import CapacityPoint, ReplicaConfig
from planner.plan.planning import Planning
from planner.plan.split import Sizing
from solvers.milp import MilpData, MilpResult
from solvers.milp_data import MAX_REPLICAS_PER_BUCKET, Candidate, Resource
from solvers.milp_fastpath import MAX_OPTION_CELLS, best_reserved, evaluate_options

MAX_OPTIONS = 32  # single configurations refined at most per plan
SAME_COST_RTOL = 1e-12  # bills this close are equal (float sums in another order)

Counts = tuple[int, ...]


def _optimistic(s: Sizing) -> Counts:
    return s.counts(optimistic=True)


def _pessimistic(s: Sizing) -> Counts:
    return s.counts()


@dataclass(frozen=True)
class Exact:
    """The answer after the re-check: the planning (its candidates as finally sized), the MILP
    data and result; `refined` options, `resolved` whether the MILP ran again, `truncated`
    whether MAX_OPTIONS cut the re-check short."""

    planning: Planning
    data: MilpData
    result: MilpResult
    refined: int
    resolved: bool
    truncated: bool


class _Recheck:
    def __init__(self, pl: Planning, data: MilpData, result: MilpResult) -> None:
        self.pl, self.data, self.result = pl, data, result
        assert pl.split is not None and result.objective_usd is not None
        self.cost = result.objective_usd
        self.split = pl.split
        self.sizings: dict[ReplicaConfig, Sizing] = {}
        for p in (*pl.found.best, *pl.pool.runners_up):
            s = self._sizing(p)
            if s.exact_point().feasible and max(s.counts(), default=0) <= MAX_REPLICAS_PER_BUCKET:
                self.sizings[p.config] = s

    def _sizing(self, point: CapacityPoint) -> Sizing:
        got = self.pl.pool.sizings.get(point.config)
        if got is None:
            got = self.pl.pool.sizing(point, self.split)
        return got

    # -- single configurations and their bills --------------------------------------------------

    def priced(self, cfgs: Sequence[ReplicaConfig], counts: Callable[[Sizing], Counts]) -> MilpData:
        """The answer's problem (its buckets, headroom, availability rule) over `cfgs`, each with
        the capacity D_b / n_b in bucket b for these replica counts: costed by
        solvers.milp_fastpath exactly as the MILP counts (n_b back, then availability, reserved
        levels and inventory caps)."""
        data, needs = self.data, self.split.needs_per_s
        cands = []
        for cfg in cfgs:
            s = self.sizings[cfg]
            whole = max(s.exact_point().requests_per_s, 1e-9)
            by_bucket = tuple(d / n if n > 0 else whole for d, n in zip(needs, counts(s), strict=True))
            cands.append(
                Candidate(
                    id=cfg.id,
                    resource=cfg.gpu,
                    units_per_replica=cfg.gpus,
                    capacity_per_s=max(by_bucket),
                    pool=cfg.role,
                    group=cfg.gpu,
                    capacity_by_bucket_per_s=by_bucket,
                )
            )
        gpus = {c.resource for c in cands}
        resources = [
            Resource(pr.gpu, pr.usd_per_gpu_hour, pr.reserved_usd_per_gpu_hour, pr.inventory)
            for pr in self.pl.prices
            if pr.gpu in gpus
        ]
        ids = {c.id for c in cands}
        pairs = tuple(pair for pair in data.incompatible_pairs if set(pair) <= ids)
        return replace(
            data,
            resources=tuple(resources),
            candidates=tuple(cands),
            single_config=True,
            incompatible_pairs=pairs,
        )

    def alone(self, cfgs: Sequence[ReplicaConfig]) -> list[float]:
        """Each configuration's bill from its optimistic counts as the only deployment (as
        solvers.milp_fastpath costs it: the availability rule, the best reserved level, inf past
        an inventory cap), a few array calls per GPU type: a lower bound on any option's bill
        that holds it (one more member never costs less)."""
        data = self.data
        hours = np.asarray(self.pl.forecast.hours, dtype=float)
        has_demand = np.asarray(self.split.needs_per_s) > 0
        out = np.zeros(len(cfgs))
        for gpu in sorted({c.gpu for c in cfgs}):
            rows = [i for i, c in enumerate(cfgs) if c.gpu == gpu]
            n = np.asarray([_optimistic(self.sizings[cfgs[i]]) for i in rows], dtype=np.int64)
            n = np.where(has_demand, np.maximum(n + data.spare_replicas, data.min_replicas), 0)
            units = n * np.asarray([cfgs[i].gpus for i in rows], dtype=np.int64)[:, None]
            price = self.pl.price_of[gpu]
            cost, _ = best_reserved(units, hours, price.reserved_usd_per_gpu_hour, price.usd_per_gpu_hour)
            if price.inventory is not None:
                cost = np.where(units.max(axis=1) > price.inventory, math.inf, cost)
            out[rows] = cost
        return [float(v) for v in out]

    def options(self) -> list[tuple[ReplicaConfig, ...]]:
        """The single configurations of contenders that could cost less than the answer: each
        colocated one, each prefill and decode pair of one GPU type the answer's data lets
        deploy together, with a member whose counts the root-finds' precision leaves open or
        that the MILP did not see (an option of candidates the MILP saw, every count settled,
        costs what the MILP's optimum over them already beat). In a fixed order."""
        seen = {p.config for p in self.pl.found.best}
        exact_milp = self.data.single_config and self.result.status == "OPTIMAL"
        loose = {c for c, s in self.sizings.items() if c not in seen or s.counts(True) != s.counts()}
        banned = {frozenset(pair) for pair in self.data.incompatible_pairs}
        # an option's bill is at least each member's alone: drop those no bound puts below it
        cfgs = sorted(self.sizings)
        alone = self.alone(cfgs)
        cfgs = [c for c, bill in zip(cfgs, alone, strict=True) if bill < self.cost * (1.0 - SAME_COST_RTOL)]
        out: list[tuple[ReplicaConfig, ...]] = [(c,) for c in cfgs if c.role == "colocated"]
        for p in (c for c in cfgs if c.role == "prefill"):
            out.extend(
                (p, d)
                for d in cfgs
                if d.role == "decode" and d.gpu == p.gpu and frozenset((p.id, d.id)) not in banned
            )
        return [o for o in out if not exact_milp or any(c in loose for c in o)]

    # -- the re-check -------------------------------------------------------------------------------

    def run(self) -> tuple[float, int, bool]:
        """Refine options in the order of their lower bounds while one is below the least bill
        known; returns (that bill, options refined, whether MAX_OPTIONS cut in)."""
        cost = self.cost
        options = self.options()
        if not options:
            return cost, 0, False
        members = sorted({c for o in options for c in o})
        if len(options) * len(self.split.needs_per_s) > MAX_OPTION_CELLS:
            return cost, 0, True  # more than the closed form costs at once
        index = {c: k for k, c in enumerate(members)}
        optimistic = self.priced(members, _optimistic)
        bounds = [
            o.cost_usd for o in evaluate_options(optimistic, [tuple(index[c] for c in o) for o in options])
        ]
        order = sorted(range(len(options)), key=lambda i: (bounds[i], options[i]))
        best, refined = cost, 0
        for i in order:
            if not bounds[i] < best * (1.0 - SAME_COST_RTOL):
                return best, refined, False
            if refined >= MAX_OPTIONS:
                return best, refined, True
            for cfg in options[i]:
                s = self.sizings[cfg]
                if not s.refined:
                    s.refine()
            refined += 1
            exact = evaluate_options(self.priced(options[i], _pessimistic), [tuple(range(len(options[i])))])
            best = min(best, exact[0].cost_usd)
        return best, refined, False

    def refine_answer(self, data: MilpData) -> bool:
        """A mixed answer: refine its candidates, a one-capacity stream's also at the rates where
        one replica fewer would do. True when one of them can now do with one replica fewer
        somewhere (it meets the SLOs at such a rate, or a bucket's count fell)."""
        changed = False
        for cid in sorted(self.result.selected):
            p = self.pl.by_id.get(cid)
            if p is None or p.config not in self.sizings:
                continue
            s = self.sizings[p.config]
            before = s.counts()
            fewer = self._one_fewer(cid, data) if s.cv2 <= 1.0 else []
            s.refine(fewer)
            met = s.exact_point().requests_per_s
            changed = changed or s.counts() != before or any(r <= met for r in fewer)
        return changed

    def _one_fewer(self, cid: str, data: MilpData) -> list[float]:
        """Per bucket, the rate each of `cid`'s replicas would carry with one replica fewer while the
        rest of the answer serves what it does (colocated replicas, and the pools as min(P, D))."""
        pl, result = self.pl, self.result
        role = pl.by_id[cid].config.role
        out = []
        for b, need in enumerate(self.split.needs_per_s):
            x = result.replicas[cid][b]
            if need <= 0 or x < 2:
                continue
            cap = {"colocated": 0.0, "prefill": 0.0, "decode": 0.0}
            for other, reps in result.replicas.items():
                q = pl.by_id.get(other)
                if q is not None and other != cid:
                    cap[q.config.role] += q.requests_per_s * reps[b]
            # what must come from `cid`'s pool beside its own replicas: colocated replicas cover
            # need - min(P, D); a prefill (decode) pool covers need - the colocated replicas
            if role == "colocated":
                rest = cap["colocated"] + min(cap["prefill"], cap["decode"])
            else:
                rest = cap["colocated"] + cap[role]
            if need > rest:
                out.append((need - rest) / (x - 1))
        return out

    def points(self) -> tuple[CapacityPoint, ...]:
        """The MILP's candidates as refined, and the refined contenders besides (sorted by id)."""
        by_cfg = {p.config: p for p in self.pl.found.best}
        for cfg, s in self.sizings.items():
            if s.refined:
                by_cfg[cfg] = s.exact_point()
        return tuple(sorted(by_cfg.values(), key=lambda p: p.config.id))


def exact_answer(
    pl: Planning,
    data: MilpData,
    result: MilpResult,
    build: Callable[[Sequence[CapacityPoint]], MilpData],
    solve: Callable[[MilpData], MilpResult],
) -> Exact:
    """The MILP's answer re-checked (module docstring): the same answer where nothing a
    tolerance left open would cost less, else the MILP's answer over the refined capacities."""
    cost = result.objective_usd
    if pl.split is None or cost is None or not math.isfinite(cost):
        return Exact(pl, data, result, 0, False, False)
    before = sum(s.questions for s in pl.pool.sizings.values())
    rc = _Recheck(pl, data, result)
    best, refined, truncated = rc.run()
    changed = (not data.single_config) and rc.refine_answer(data)
    pl.pool.questions += sum(s.questions for s in pl.pool.sizings.values()) - before
    if not (best < cost * (1.0 - SAME_COST_RTOL) or changed):
        return Exact(pl, data, result, refined, False, truncated)
    points = rc.points()
    found = replace(pl.found, best=points)
    again = replace(pl, found=found)
    data2 = build(again.found.best)
    result2 = solve(data2)
    better = result2.objective_usd is not None and result2.objective_usd <= cost * (1.0 + SAME_COST_RTOL)
    if result2.status in ("OPTIMAL", "FEASIBLE") and better:
        return Exact(again, data2, result2, refined, True, truncated)
    return Exact(pl, data, result, refined, True, truncated)
