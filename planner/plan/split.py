"""A replica's capacity when a router splits a bursty stream over many replicas.

The shape search (search.py) sizes a configuration with the whole stream's arrival CV² c², as if
one replica took every burst. A pool of replicas behind a Kubernetes Service gets each request
routed to a pod at random, and a replica that takes a share q of the stream sees gaps of CV²
1 + (c² - 1) q (`planner.latency.model.per_replica_arrival_cv2`): a burst is spread over the
pool. So a replica's capacity grows with the number of replicas sharing the stream, while the
MILP needs one constant capacity per candidate.

The constant used is valid whatever replica counts and mixes the MILP picks. The MILP covers
each bucket's demand d_b with capacity d_b (1 + headroom), and the plan routes by capacity, so a
replica of capacity c carries at most c / (1 + headroom), a share of the stream of at most
q(c) = c / ((1 + headroom) d_min), d_min the smallest positive bucket demand. Its per-replica CV²
is then at most X(c) = 1 + (c² - 1) min(1, q(c)), and the capacity is the largest c that meets
the SLOs at rate c with arrival CV² X(c) (the p99s rise with both the rate and the CV², so the
set of such c is an interval from 0):

1. c0 = the whole-stream capacity (X <= c² always, so c0 qualifies);
2. c1 = the capacity at CV² X(c0) (c1 >= c*: any c above c0 has X(c) >= X(c0));
3. bisection on [c0, c1], each step one steady state (`meets_at`) at CV² X(mid), until the
   bracket is within SPLIT_RTOL; the lower end is the answer (it met the SLOs).

A smooth stream (c² < 1) roughens towards Poisson when split at random, and a share can be
arbitrarily small, so its replicas are sized as Poisson (CV² 1): conservative, one root-find.
Poisson (c² = 1) is unchanged. Deterministic and bounded (two root-finds and at most
SPLIT_MAX_STEPS steady states per candidate); answers are memoized with the capacity memo under
their capacity key plus d_min (1 + headroom), so a warm plan is the cold plan byte for byte.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, replace

from planner.latency import LatencyModel
from planner.latency.model import per_replica_arrival_cv2
from planner.plan.capacity import (
    Built,
    CapacityPoint,
    ReplicaConfig,
    SearchContext,
    evaluate_config,
    meets_at,
)

SPLIT_RTOL = 1e-3  # bracket width relative to its top: 0.1% of capacity, within the model's error
SPLIT_MAX_STEPS = 40  # bisection steps at most (2^-40 of the first bracket: never reached)
ROUTER_SPLIT = "random"  # what the plan assumes a router does (docs/plan.md)


@dataclass(frozen=True)
class Split:
    """The stream a replica's share is measured against: d_min (1 + headroom) requests/s."""

    demand_per_s: float

    @classmethod
    def of(cls, rates_per_s: tuple[float, ...], headroom: float) -> Split | None:
        """None when no bucket has demand (nothing to split)."""
        positive = [r for r in rates_per_s if r > 0]
        return None if not positive else cls(min(positive) * (1.0 + headroom))

    def cv2_at(self, cv2: float, rate_per_s: float) -> float:
        """X(c): the per-replica CV² of a replica of capacity `rate_per_s`, at most."""
        if cv2 < 1.0:
            return 1.0
        return per_replica_arrival_cv2(cv2, min(1.0, rate_per_s / self.demand_per_s))


def _built(ctx: SearchContext, cfg: ReplicaConfig, cv2: float) -> tuple[SearchContext, Built]:
    """The context with arrival CV² `cv2` and `cfg` (concrete) modelled in it, resolved once with
    the plan's context (resolving does not read the arrivals)."""
    c = replace(ctx, stats=replace(ctx.stats, arrival_cv2=cv2))
    resolved = ctx.resolve(cfg)
    return c, Built(cfg, resolved, LatencyModel(resolved, c.stats), "")


def _capacity(ctx: SearchContext, cfg: ReplicaConfig, cv2: float) -> CapacityPoint:
    c, b = _built(ctx, cfg, cv2)
    return replace(evaluate_config(c, cfg, b), arrival_cv2=cv2)


def split_capacity(ctx: SearchContext, split: Split, point: CapacityPoint) -> CapacityPoint:
    """`point` (computed with the whole stream's CV²) re-sized for a stream split at random over
    the replicas (module docstring). Infeasible points, and Poisson streams, come back as they
    are; the answer's `arrival_cv2` is the per-replica CV² it was sized with."""
    cv2 = ctx.stats.arrival_cv2
    if not point.feasible or cv2 == 1.0:
        return point
    cfg = point.config
    if cv2 < 1.0:
        return _capacity(ctx, cfg, 1.0)
    whole = replace(point, arrival_cv2=cv2)
    lo = point.requests_per_s
    x0 = split.cv2_at(cv2, lo)
    if x0 >= cv2:  # one replica takes the whole stream at the least demand: nothing to gain
        return whole
    upper = _capacity(ctx, cfg, x0)
    hi = upper.requests_per_s
    if not (upper.feasible and hi > lo):
        return whole
    for _ in range(SPLIT_MAX_STEPS):
        if hi - lo <= SPLIT_RTOL * hi:
            break
        mid = 0.5 * (lo + hi)
        c, b = _built(ctx, cfg, split.cv2_at(cv2, mid))
        if meets_at(c, cfg, mid, b):
            lo = mid
        else:
            hi = mid
    if lo == point.requests_per_s:
        return whole
    x = split.cv2_at(cv2, lo)
    c, b = _built(ctx, cfg, x)
    at = evaluate_config(c, cfg, b)  # binding limit, floors, KV limit at this CV²; rate >= lo
    assert b.model is not None
    engine = b.model.engines[cfg.role]
    solved = engine.solve(lo)
    p = None if solved is None else engine.point(solved[0])
    return replace(
        at,
        requests_per_s=lo,
        running_requests=0.0 if p is None else p.running_requests,
        decode_concurrency=0.0 if p is None or cfg.role == "prefill" else p.n,
        ttft_p99_s=None if p is None else p.ttft_p99_s,
        itl_p99_s=None if p is None else p.itl_p99_s,
        arrival_cv2=x,
    )


def split_key(config_key: Hashable, split: Split) -> Hashable:
    """The memo key of a split answer: the configuration's own key (its capacity inputs and the
    configuration, which fix the whole-stream answer) and the demand its share is measured
    against, bitwise."""
    return ("split", config_key, split.demand_per_s)


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
        f"Service picks a pod at random): a replica with a share q of the stream sees CV² 1 + ({cv2:.3g} - 1) q; "
        "each capacity is sized at the largest share it can carry, its capacity over "
        f"{split.demand_per_s:.4g} req/s (the least bucket's demand x (1 + headroom))"
    )
