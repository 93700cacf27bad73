"""The plan at its peak bucket: how the demand splits over what serves it, and each part's
operating point in the latency model (the report's `at_peak` and `predicted`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from planner.latency import LatencyModel
from planner.latency.engine import Point
from planner.latency.model import per_replica_arrival_cv2
from planner.plan.capacity import CapacityPoint, ReplicaConfig, SearchContext, e2e_estimate_s
from planner.schema.kinds import Role
from planner.schema.plan_report import PoolAtPeak, Predicted


@dataclass(frozen=True)
class Serving:
    """A configuration serving at the peak bucket: its replicas and its per-replica rate."""

    point: CapacityPoint
    replicas: int
    requests_per_s_per_replica: float


def shares(points: Sequence[tuple[CapacityPoint, int]], demand: float) -> list[Serving]:
    """Split the peak demand over what serves it, in proportion to the capacity each part
    provides (colocated replicas, and the prefill/decode pools as one unit of min(P, D))."""
    cap = {"colocated": 0.0, "prefill": 0.0, "decode": 0.0}
    for p, n in points:
        cap[p.config.role] += p.requests_per_s * n
    dis = min(cap["prefill"], cap["decode"])
    total = cap["colocated"] + dis
    out = []
    for p, n in points:
        role = p.config.role
        part = cap["colocated"] if role == "colocated" else dis
        share = demand * (part / total) if total > 0 else 0.0
        pool_cap = cap[role]
        rate = share * (p.requests_per_s / pool_cap) if pool_cap > 0 else 0.0
        out.append(Serving(p, n, rate))
    return out


def point_at(ctx: SearchContext, cfg: ReplicaConfig, rate: float, share: float) -> Point | None:
    """The operating point of a replica at `rate`, taking `share` of the stream (split at random:
    its arrival CV² is `per_replica_arrival_cv2`)."""
    cv2 = per_replica_arrival_cv2(ctx.stats.arrival_cv2, min(1.0, max(share, 1e-12)))
    model = LatencyModel(ctx.resolve(cfg), replace(ctx.stats, arrival_cv2=cv2))
    engine = model.engines[cfg.role]
    s = engine.solve(rate)
    return None if s is None else engine.point(s[0])


def ms(x: float | None) -> float | None:
    return None if x is None else x * 1e3


def at_peak(point: Point | None, role: Role, rate: float) -> PoolAtPeak | None:
    if point is None:
        return None
    return PoolAtPeak(
        requests_per_s_per_replica=rate,
        ttft_p50_ms=ms(point.ttft_p50_s) if role != "decode" else None,
        ttft_p99_ms=ms(point.ttft_p99_s) if role != "decode" else None,
        itl_p50_ms=ms(point.itl_p50_s) if role != "prefill" else None,
        itl_p99_ms=ms(point.itl_p99_s) if role != "prefill" else None,
        kv_cache_usage=point.kv_cache_usage,
        preemption_risk=point.preemption_risk,
        running_requests=point.running_requests,
    )


Points = Mapping[str, tuple[Serving, Point | None]]


def points_at(
    ctx: SearchContext, serving: Sequence[Serving], demand: float
) -> dict[str, tuple[Serving, Point | None]]:
    """Each serving configuration's operating point at its share of the peak (by id)."""
    return {
        s.point.config.id: (
            s,
            point_at(
                ctx,
                s.point.config,
                s.requests_per_s_per_replica,
                s.requests_per_s_per_replica / demand if demand > 0 else 1.0,
            ),
        )
        for s in serving
        if s.replicas > 0
    }


def predicted(ctx: SearchContext, points: Points, demand: float) -> Predicted | None:
    """The worst of the deployments at the peak bucket."""
    got = [(s.point.config.role, pt) for s, pt in points.values()]
    if not got or any(pt is None for _, pt in got):
        return None

    def worst(attr: str, roles: tuple[str, ...]) -> float | None:
        vals = [getattr(pt, attr) for role, pt in got if role in roles and getattr(pt, attr) is not None]
        return max(vals) if vals else None

    ttft99 = worst("ttft_p99_s", ("colocated", "prefill"))
    step = worst("mean_step_s", ("colocated", "decode"))
    e2e = e2e_estimate_s(ctx, ttft99, step) if ttft99 is not None and step is not None else None
    return Predicted(
        requests_per_s=demand,
        ttft_p50_ms=ms(worst("ttft_p50_s", ("colocated", "prefill"))),
        ttft_p99_ms=ms(ttft99),
        itl_p50_ms=ms(worst("itl_p50_s", ("colocated", "decode"))),
        itl_p99_ms=ms(worst("itl_p99_s", ("colocated", "decode"))),
        e2e_p99_ms=ms(e2e),
    )
