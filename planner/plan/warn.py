"""A plan's warnings: what a reader must know before trusting it (a time-limited solve, idle
GPUs, the router bursty arrivals assume, where the latency model is least right, KV pressure,
profiles of unequal evidence, prices from more than one source, a replica without failover)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from planner.latency.model import per_replica_arrival_cv2
from planner.plan.defaults import price_warnings
from planner.plan.peak import Points, Serving
from planner.plan.planning import Planning
from solvers.milp import MilpResult

LOW_UTILIZATION = 0.10
PREEMPTION_WARN = 0.01
# Per-replica arrival CV² from which the plan says its p99s are unreliable: the accuracy grid's
# trace has CV² 1.2; on docs/accuracy.md's bursty table (CV² 4 and 20) the model's TTFT p99 is
# from 64% below to 4% above the simulator's and ITL p99 from 1% below to 13% above (TTFT p99
# reads low near capacity, where bursts preempt). 4 (k = 0.25) is the table's mildest burstiness.
BURSTY_CV2_WARN = 4.0


def solver_warning(pl: Planning, result: MilpResult) -> list[str]:
    if result.status != "FEASIBLE":
        return []
    gap = "unknown" if result.gap is None else f"{result.gap:.2%}"
    limit = f"{pl.req.solver.time_limit_s:g} s"
    if result.stats.method == "bucketwise":  # not necessarily cut by the clock (docs/plan.md)
        why = f"sized the buckets one at a time (mixed GPU types, many buckets, time limit {limit})"
    else:
        why = f"stopped at its time limit ({limit})"
    return [f"the MILP {why} with a gap of {gap}: a cheaper plan may exist"]


def utilization_warning(
    pl: Planning, result: MilpResult, requests: float, out_tokens: float, objective: float
) -> list[str]:
    """Demand over what the GPUs held could serve at all (their max stable rate, latency aside),
    over the horizon: the seed article's idle-cost measure."""
    f = pl.forecast
    most = math.fsum(
        pl.capacity_at(result, b, stable=True) * f.durations_s[b] for b in range(len(f.rates_per_s))
    )
    util = requests / most if most > 0 else 0.0
    if not (util < LOW_UTILIZATION and out_tokens > 0):
        return []
    full = objective * util / out_tokens * 1e6
    return [
        f"utilization is {util:.1%}: the GPUs could serve {1 / util:,.0f}x this traffic, so idle time sets "
        f"the price (${objective / out_tokens * 1e6:,.2f} per 1M output tokens, ${full:,.2f} if fully used); "
        "a smaller GPU, sharing GPUs between services, or a pay-per-token API may be cheaper at this volume"
    ]


def burst_warnings(pl: Planning, serving: Sequence[Serving]) -> list[str]:
    cv2 = pl.stats.arrival_cv2
    demand = pl.forecast.rates_per_s[pl.forecast.peak]
    # the arrival CV² each deployment's replicas see at the peak (their share of the stream; a
    # deployment the MILP leaves idle at the peak, say one GPU type's pool sized for other
    # buckets, sees none)
    seen = {
        id(s): per_replica_arrival_cv2(cv2, min(1.0, s.requests_per_s_per_replica / demand))
        if demand > 0
        else cv2
        for s in serving
        if s.requests_per_s_per_replica > 0 or demand <= 0
    }
    split = [
        f"{s.point.config.id}: {s.replicas} replicas, CV² {seen[id(s)]:.3g} each"
        for s in serving
        if s.replicas > 1 and demand > 0 and id(s) in seen
    ]
    out = []
    if cv2 > 1 and split:
        out.append(
            f"bursty arrivals (k={1 / cv2:.3g}, CV² {cv2:.3g}): the plan assumes the router spreads each burst "
            f"at random over the replicas (at the peak {'; '.join(split)}); a round-robin router spreads "
            "them more evenly, but one that keeps a client's requests on one replica (session affinity) "
            "does not, and then the replicas see the whole stream's bursts"
        )
    worst = max(seen.values(), default=0.0)
    if worst >= BURSTY_CV2_WARN:
        out.append(
            f"arrivals this bursty (CV² up to {worst:.3g} per replica at the peak) are where the latency model is "
            "least right: against the simulator it reads TTFT p99 from ~65% low to ~5% high (low near "
            "capacity) and ITL p99 up to ~15% high at CV² 4-20 (docs/accuracy.md); check this plan with --verify"
        )
    return out


def point_warnings(points: Points) -> list[str]:
    out = []
    for s, pt in points.values():
        if pt is None:
            out.append(f"{s.point.config.id}: the latency model found no steady state at the peak rate")
        elif pt.preemption_risk > PREEMPTION_WARN:
            out.append(
                f"{s.point.config.id}: KV cache {pt.kv_cache_usage:.0%} used at the peak; it overflows "
                f"{pt.preemption_risk:.1%} of the time (preemptions: watch vllm:num_preemptions)"
            )
    return out


def single_replica_warnings(pl: Planning, result: MilpResult) -> list[str]:
    """A deployment with one replica in a bucket with demand has no failover: a restart, an
    upgrade or a lost node stops it (possible with availability.min_replicas: 1 and no spare)."""
    a = pl.req.availability
    if a.min_replicas > 1 or a.spare_replicas > 0:
        return []
    rates = pl.forecast.rates_per_s
    out = []
    for cid, reps in sorted(result.replicas.items()):
        alone = [b for b, n in enumerate(reps) if n == 1 and rates[b] > 0]
        if alone:
            out.append(
                f"{cid}: 1 replica in {len(alone)} of {len(rates)} buckets (availability.min_replicas: 1): a "
                "restart, an upgrade or a lost node stops it there; availability.min_replicas: 2 or "
                "spare_replicas: 1 keeps one serving"
            )
    return out


def plan_warnings(
    pl: Planning,
    result: MilpResult,
    serving: Sequence[Serving],
    points: Points,
    requests: float,
    out_tokens: float,
    objective: float,
) -> list[str]:
    return [
        *solver_warning(pl, result),
        *utilization_warning(pl, result, requests, out_tokens, objective),
        *burst_warnings(pl, serving),
        *point_warnings(points),
        *pl.profile_warnings(sorted({s.point.config.gpu for s in serving})),
        *price_warnings(pl.req, [g for g, _ in pl.ctx.profiles]),
        *single_replica_warnings(pl, result),
    ]
