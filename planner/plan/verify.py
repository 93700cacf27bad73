"""`--verify`: the plan's deployment at its peak bucket, replayed through the discrete-event
simulator of vLLM V1's scheduler (planner/simulate), with the flags the plan emits.

Requests are sampled from the workload's length distributions at the peak bucket's rate with the
workload's burstiness (a seeded, deterministic stream). A plan serving with several
configurations at once (mixed GPU types) sends each its share of the peak rate, in proportion to
the capacity it provides, as a capacity-weighted router would; the reported p99s are the worst
of the parts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from planner.plan.capacity import CapacityPoint, SearchContext
from planner.workload import Arrivals, Workload

SEED = 0
MIN_REQUESTS = 2_000
MAX_REQUESTS = 20_000
HORIZON_S = 600.0  # ten minutes of the peak bucket, within the request bounds


@dataclass(frozen=True)
class Group:
    """What serves one share of the traffic: a colocated configuration, or a prefill and a
    decode configuration joined by the KV link, with their replica counts at the peak."""

    members: tuple[tuple[CapacityPoint, int], ...]
    requests_per_s: float


@dataclass(frozen=True)
class Verified:
    requests: int
    ttft_p99_s: float | None
    itl_p99_s: float | None


def _requests_for(rate: float) -> int:
    return int(min(MAX_REQUESTS, max(MIN_REQUESTS, math.ceil(rate * HORIZON_S))))


def simulate_group(ctx: SearchContext, workload: Workload, group: Group) -> Verified:
    from planner.simulate.engine import simulate
    from planner.simulate.run import engine_config, kv_transfer, workload_requests

    if group.requests_per_s <= 0:
        return Verified(0, None, None)
    at_peak = workload.model_copy(
        update={
            "arrivals": Arrivals(requests_per_s=group.requests_per_s, burstiness=workload.arrivals.burstiness)
        }
    )
    count = _requests_for(group.requests_per_s)
    reqs = workload_requests(at_peak, SEED, count=count)
    hit = workload.prefix_cache_hit_fraction
    roles = {p.config.role: (p, n) for p, n in group.members}
    if "colocated" in roles:
        point, n = roles["colocated"]
        resolved = ctx.deployment(point.config, replicas=n).resolve(ctx.profile(point.config.gpu))
        res = simulate(reqs, resolved.replica, engine_config(resolved, hit), replicas=n)
    else:
        from planner.simulate.disagg import simulate_disaggregated

        (pp, n_p), (dp, n_d) = roles["prefill"], roles["decode"]
        rp = ctx.deployment(pp.config).resolve(ctx.profile(pp.config.gpu))
        rd = ctx.deployment(dp.config).resolve(ctx.profile(dp.config.gpu))
        res = simulate_disaggregated(
            reqs,
            rp.replica,
            rd.replica,
            engine_config(rp, hit),
            engine_config(rd, hit),
            prefill_replicas=n_p,
            decode_replicas=n_d,
            kv_transfer=kv_transfer(rp),
        )
    ttft = res.ttft.p99_s if res.ttft.count else None
    itl = res.itl.p99_s if res.itl.count else None
    return Verified(count, _finite(ttft), _finite(itl))


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def verify(ctx: SearchContext, workload: Workload, groups: Sequence[Group]) -> Verified:
    """Simulate every group; the worst p99s and the total request count."""
    parts = [simulate_group(ctx, workload, g) for g in groups]
    ttfts = [p.ttft_p99_s for p in parts if p.ttft_p99_s is not None]
    itls = [p.itl_p99_s for p in parts if p.itl_p99_s is not None]
    return Verified(
        requests=sum(p.requests for p in parts),
        ttft_p99_s=max(ttfts) if ttfts else None,
        itl_p99_s=max(itls) if itls else None,
    )
