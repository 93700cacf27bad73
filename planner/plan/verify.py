"""`--verify`: every part of the plan replayed through the discrete-event simulator of vLLM V1's
scheduler (planner/simulate), with the flags the plan emits, at the bucket where it is hardest
pressed; `capplan report` draws these same figures.

The parts (groups) are what serve their own share of the traffic: each colocated configuration,
and the prefill and decode pools together (one group, however many configurations each pool
holds). In each bucket the plan splits the demand over the groups in proportion to the capacity
each provides (planner/plan/peak.py `shares`), as the router `--emit k8s` writes does (a Gateway
API HTTPRoute with those weights, planner/export.py).

Which bucket: a group is checked at the bucket where the latency model's p99s, at the group's
per-replica load and per-replica burstiness there, are worst relative to the targets (largest
predicted p99 / target over TTFT, ITL and E2E, and over the group's configurations); a bucket
where the model finds no steady state is the hardest. With Poisson arrivals that is the bucket of
the highest per-replica rate; with bursty arrivals a bucket with fewer replicas (a larger share of
the bursts each) may be harder at a lower rate. Buckets no harder in every respect (no higher
per-replica rate and no burstier per-replica arrivals for any configuration) than one already
judged are skipped, and at most MAX_JUDGED_BUCKETS are judged, in order of their highest
utilization. Ties go to the higher utilization, then the earlier bucket.

What is simulated: requests sampled from the workload's lengths at the bucket's whole rate with
the workload's burstiness (seed SEED), each sent to a group at random with the plan's shares as
probabilities (a gateway's weighted backends), the group's part kept: MIN_REQUESTS to
MAX_REQUESTS of them (ten minutes of its rate, HORIZON_S). Within a group, replicas of one
configuration take requests round robin; pools of several configurations send each request to
a configuration drawn at random with the plan's shares, then round robin. Latencies include
vLLM's front end per request (the profile's `request_overhead_s`), as `capplan simulate` adds it
(colocated groups run through `planner.simulate.run.run`, exactly `capplan simulate`'s call).
Deterministic: same plan, same requests, same figures.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from planner.latency.engine import Point
from planner.latency.model import per_replica_arrival_cv2
from planner.plan.capacity import CapacityPoint, SearchContext, e2e_estimate_s
from planner.plan.peak import Serving, ms, point_at, shares
from planner.schema.plan_report import Simulated, SimulatedGroup
from planner.simulate.metrics import SimResult
from planner.simulate.requests import RequestArrays
from planner.workload import Arrivals, Workload

SEED = 0
MIN_REQUESTS = 2_000
MAX_REQUESTS = 20_000
HORIZON_S = 600.0  # ten minutes of a group's rate, within the request bounds
MAX_STREAM_REQUESTS = 1_000_000  # the bucket's whole stream a group's part is drawn from, at most
OVERSAMPLE = 1.1  # the whole stream drawn 10% longer than the part needs (the split is random)
MAX_JUDGED_BUCKETS = 64  # buckets a group's latency model is asked about, at most
# The split's generators: the groups' shares, then a pool's configurations (numpy SeedSequence
# entropy: SEED and the stream's number).
GROUP_SPLIT_SEED = (SEED, 1)
PREFILL_SPLIT_SEED = (SEED, 2)
DECODE_SPLIT_SEED = (SEED, 3)

Group = tuple[str, ...]  # the configuration ids of a group


def groups_of(chosen: Sequence[CapacityPoint]) -> list[Group]:
    """Each colocated configuration alone, then the prefill and decode pools as one group."""
    ids = {
        role: [p.config.id for p in chosen if p.config.role == role]
        for role in ("colocated", "prefill", "decode")
    }
    out: list[Group] = [(i,) for i in ids["colocated"]]
    if ids["prefill"] and ids["decode"]:
        out.append((*ids["prefill"], *ids["decode"]))
    return out


def group_rate(members: Sequence[Serving]) -> float:
    """Requests/s a group takes: its colocated replicas' load, or its prefill pool's."""
    return math.fsum(
        s.requests_per_s_per_replica * s.replicas for s in members if s.point.config.role != "decode"
    )


@dataclass(frozen=True)
class Check:
    """A group at one bucket: the bucket's whole rate, the group's serving configurations
    (replicas > 0) and every group's share of the rate (req/s, in group order)."""

    group: int
    bucket: int
    demand_per_s: float
    members: tuple[Serving, ...]
    weights: tuple[float, ...]

    @property
    def requests_per_s(self) -> float:
        return self.weights[self.group]

    def utilization(self) -> float:
        return max(s.requests_per_s_per_replica / s.point.requests_per_s for s in self.members)


def checks_at(
    chosen: Sequence[CapacityPoint],
    groups: Sequence[Group],
    replicas: Mapping[str, Sequence[int]],
    demand_per_s: float,
    bucket: int,
) -> list[Check | None]:
    """Every group at `bucket` (None where it serves nothing there)."""
    serving = shares([(p, replicas[p.config.id][bucket]) for p in chosen], demand_per_s)
    by_id = {s.point.config.id: s for s in serving}
    parts = [[by_id[k] for k in g if by_id[k].replicas > 0] for g in groups]
    weights = tuple(group_rate(m) for m in parts)
    out: list[Check | None] = []
    for i, members in enumerate(parts):
        roles = {s.point.config.role for s in members}
        served = weights[i] > 0 and ("colocated" in roles or {"prefill", "decode"} <= roles)
        out.append(Check(i, bucket, demand_per_s, tuple(members), weights) if served else None)
    return out


# --- which bucket --------------------------------------------------------------------------------


def _load(ctx: SearchContext, c: Check) -> dict[str, tuple[float, float]]:
    """Per configuration: per-replica rate and per-replica arrival CV² (the random split's)."""
    cv2 = ctx.stats.arrival_cv2
    return {
        s.point.config.id: (
            s.requests_per_s_per_replica,
            per_replica_arrival_cv2(cv2, min(1.0, max(s.requests_per_s_per_replica / c.demand_per_s, 1e-12))),
        )
        for s in c.members
    }


def _dominates(a: Mapping[str, tuple[float, float]], b: Mapping[str, tuple[float, float]]) -> bool:
    """`a` presses every configuration at least as hard as `b` (rate and burstiness)."""
    none = (0.0, -math.inf)
    return all(a.get(k, none)[0] >= r and a.get(k, none)[1] >= x for k, (r, x) in b.items())


def candidates(ctx: SearchContext, checks: Sequence[Check]) -> list[Check]:
    """The checks worth judging: by highest utilization first (then bucket), those no judged
    one dominates, at most MAX_JUDGED_BUCKETS."""
    kept: list[tuple[Check, dict[str, tuple[float, float]]]] = []
    seen: set[tuple[tuple[str, float, float], ...]] = set()
    for c in sorted(checks, key=lambda c: (-c.utilization(), c.bucket)):
        load = _load(ctx, c)
        key = tuple(sorted((k, r, x) for k, (r, x) in load.items()))
        if key in seen or any(_dominates(other, load) for _, other in kept):
            continue
        seen.add(key)
        kept.append((c, load))
        if len(kept) >= MAX_JUDGED_BUCKETS:
            break
    return [c for c, _ in kept]


@dataclass(frozen=True)
class Judged:
    check: Check
    points: tuple[Point | None, ...]  # per member
    fraction: float  # worst predicted p99 / target; inf where no steady state


def _fraction(ctx: SearchContext, role: str, pt: Point | None) -> float:
    if pt is None:
        return math.inf
    out = [0.0]
    if role != "decode" and ctx.ttft_p99_s is not None:
        out.append((pt.ttft_p99_s if pt.ttft_p99_s is not None else math.inf) / ctx.ttft_p99_s)
    if role != "prefill" and ctx.itl_p99_s is not None and pt.itl_p99_s is not None:
        out.append(pt.itl_p99_s / ctx.itl_p99_s)
    if role == "colocated" and ctx.e2e_p99_s is not None:
        out.append(e2e_estimate_s(ctx, pt.ttft_p99_s, pt.mean_step_s) / ctx.e2e_p99_s)
    worst = max(out)
    return worst if math.isfinite(worst) else math.inf


def judge(ctx: SearchContext, c: Check) -> Judged:
    points = tuple(
        point_at(
            ctx, s.point.config, s.requests_per_s_per_replica, s.requests_per_s_per_replica / c.demand_per_s
        )
        for s in c.members
    )
    worst = max(_fraction(ctx, s.point.config.role, pt) for s, pt in zip(c.members, points, strict=True))
    return Judged(c, points, worst)


def hardest(ctx: SearchContext, checks: Sequence[Check]) -> Judged:
    """The check whose predicted p99s are worst against the targets (module docstring)."""
    judged = [judge(ctx, c) for c in candidates(ctx, checks)]
    return max(judged, key=lambda j: (j.fraction, j.check.utilization(), -j.check.bucket))


def hardest_checks(
    ctx: SearchContext,
    chosen: Sequence[CapacityPoint],
    replicas: Mapping[str, Sequence[int]],
    rates_per_s: Sequence[float],
) -> list[Judged]:
    """Each group of the plan at its hardest bucket (groups serving in no bucket are left out)."""
    groups = groups_of(chosen)
    per_group: list[list[Check]] = [[] for _ in groups]
    for b, rate in enumerate(rates_per_s):
        if rate <= 0:
            continue
        for i, c in enumerate(checks_at(chosen, groups, replicas, rate, b)):
            if c is not None:
                per_group[i].append(c)
    return [hardest(ctx, checks) for checks in per_group if checks]


# --- the simulation ------------------------------------------------------------------------------


def part_size(requests_per_s: float) -> int:
    return int(min(MAX_REQUESTS, max(MIN_REQUESTS, math.ceil(requests_per_s * HORIZON_S))))


def stream(workload: Workload, c: Check) -> RequestArrays:
    """The group's requests: the bucket's whole stream (its rate, the workload's burstiness and
    lengths, seed SEED), each request sent to a group at random by the shares; the group's
    first `part_size` requests."""
    from planner.simulate.router import draw_parts
    from planner.simulate.run import workload_requests

    want = part_size(c.requests_per_s)
    share = c.requests_per_s / math.fsum(c.weights)
    several = sum(1 for w in c.weights if w > 0) > 1
    total = min(MAX_STREAM_REQUESTS, math.ceil(want * OVERSAMPLE / share) + 64) if several else want
    arrivals = Arrivals(requests_per_s=c.demand_per_s, burstiness=workload.arrivals.burstiness)
    reqs = workload_requests(workload.model_copy(update={"arrivals": arrivals}), SEED, count=total)
    if not several:
        return reqs
    keep = np.flatnonzero(draw_parts(total, c.weights, GROUP_SPLIT_SEED) == c.group)[:want]
    return RequestArrays(reqs.arrival_s[keep], reqs.prompt_tokens[keep], reqs.output_tokens[keep])


def _simulate_colocated(ctx: SearchContext, s: Serving, reqs: RequestArrays, hit: float) -> SimResult:
    from planner.simulate.run import run

    cfg = s.point.config
    resolved = ctx.deployment(cfg, replicas=s.replicas).resolve(ctx.profile(cfg.gpu))
    return run(resolved, reqs, prefix_cache_hit_fraction=hit)


def _simulate_pools(
    ctx: SearchContext, members: Sequence[Serving], reqs: RequestArrays, hit: float
) -> SimResult:
    """The prefill and decode pools joined by the KV link; a pool of several configurations
    routes each request to one drawn by the plan's shares (`Assigned`), and each request's KV
    hand-off is its prefill configuration's."""
    from planner.deployment import ResolvedDeployment
    from planner.simulate.disagg import PoolPart, simulate_pools
    from planner.simulate.router import Assigned, Router, draw_parts
    from planner.simulate.run import engine_config, kv_transfer

    n = len(reqs)
    resolved: dict[str, list[tuple[ResolvedDeployment, Serving]]] = {"prefill": [], "decode": []}
    for s in members:
        cfg = s.point.config
        resolved[cfg.role].append((ctx.deployment(cfg).resolve(ctx.profile(cfg.gpu)), s))
    parts = {
        role: [PoolPart(r.replica, engine_config(r, hit), s.replicas) for r, s in pool]
        for role, pool in resolved.items()
    }
    routers: dict[str, str | Router] = {"prefill": "round_robin", "decode": "round_robin"}
    drawn: dict[str, npt.NDArray[np.int64]] = {}
    for role, seed in (("prefill", PREFILL_SPLIT_SEED), ("decode", DECODE_SPLIT_SEED)):
        if len(parts[role]) > 1:
            rates = [s.requests_per_s_per_replica * s.replicas for _, s in resolved[role]]
            drawn[role] = draw_parts(n, rates, seed)
            routers[role] = Assigned(drawn[role], [p.replicas for p in parts[role]])
    links = [kv_transfer(r) for r, _ in resolved["prefill"]]
    xfer: float | Callable[[int], float] | npt.NDArray[np.float64] = links[0]
    if "prefill" in drawn:
        prompts = reqs.prompt_tokens.tolist()
        xfer = np.asarray([links[k](p) for k, p in zip(drawn["prefill"].tolist(), prompts, strict=True)])
    # The front end the request enters (the prefill replica's, as the latency model's prefill
    # engine counts it); one value for the pools of one GPU type.
    front_end_s = max(r.replica.profile.request_overhead_s for r, _ in resolved["prefill"])
    return simulate_pools(
        reqs,
        parts["prefill"],
        parts["decode"],
        kv_transfer=xfer,
        prefill_router=routers["prefill"],
        decode_router=routers["decode"],
        request_overhead_s=front_end_s,
    )


def _finite_ms(x: float) -> float | None:
    return x * 1e3 if math.isfinite(x) else None


def _worst(points: Sequence[tuple[str, Point | None]], attr: str, roles: tuple[str, ...]) -> float | None:
    vals = [getattr(pt, attr) for role, pt in points if pt is not None and role in roles]
    vals = [v for v in vals if v is not None]
    return max(vals) if vals else None


def simulate_check(ctx: SearchContext, workload: Workload, j: Judged) -> SimulatedGroup:
    """One group at its bucket in the simulator, next to the latency model's figures there."""
    c = j.check
    reqs = stream(workload, c)
    hit = workload.prefix_cache_hit_fraction
    if c.members[0].point.config.role == "colocated":
        res = _simulate_colocated(ctx, c.members[0], reqs, hit)
    else:
        res = _simulate_pools(ctx, c.members, reqs, hit)
    ttft, itl, e2e = res.ttft, res.itl, res.e2el
    pts = [(s.point.config.role, pt) for s, pt in zip(c.members, j.points, strict=True)]
    t99 = _worst(pts, "ttft_p99_s", ("colocated", "prefill"))
    step = _worst(pts, "mean_step_s", ("colocated", "decode"))
    colocated = c.members[0].point.config.role == "colocated"
    row = {
        "ttft_p50_ms": _finite_ms(ttft.p50_s) if ttft.count else None,
        "ttft_p90_ms": _finite_ms(ttft.p90_s) if ttft.count else None,
        "ttft_p99_ms": _finite_ms(ttft.p99_s) if ttft.count else None,
        "itl_p50_ms": _finite_ms(itl.p50_s) if itl.count else None,
        "itl_p90_ms": _finite_ms(itl.p90_s) if itl.count else None,
        "itl_p99_ms": _finite_ms(itl.p99_s) if itl.count else None,
        "e2e_p99_ms": _finite_ms(e2e.p99_s) if e2e.count else None,
    }
    return SimulatedGroup(
        deployments=[s.point.config.id for s in c.members],
        replicas=[s.replicas for s in c.members],
        bucket=c.bucket,
        bucket_requests_per_s=c.demand_per_s,
        requests_per_s=c.requests_per_s,
        predicted_slo_fraction=j.fraction if math.isfinite(j.fraction) else None,
        requests=len(reqs),
        **row,
        predicted_ttft_p50_ms=ms(_worst(pts, "ttft_p50_s", ("colocated", "prefill"))),
        predicted_ttft_p99_ms=ms(t99),
        predicted_itl_p50_ms=ms(_worst(pts, "itl_p50_s", ("colocated", "decode"))),
        predicted_itl_p99_ms=ms(_worst(pts, "itl_p99_s", ("colocated", "decode"))),
        predicted_e2e_p99_ms=ms(e2e_estimate_s(ctx, t99, step)) if colocated and t99 is not None else None,
        slo_met=_met(ctx, row),
    )


def _met(ctx: SearchContext, row: Mapping[str, float | None]) -> bool:
    """TTFT must have been measured and meet its target; ITL and E2E meet theirs where measured
    (answers of one token have no ITL)."""
    t, i, e = ctx.ttft_p99_s, ctx.itl_p99_s, ctx.e2e_p99_s
    ttft, itl, e2e = row["ttft_p99_ms"], row["itl_p99_ms"], row["e2e_p99_ms"]
    return (
        (t is None or (ttft is not None and ttft <= t * 1e3))
        and (i is None or itl is None or itl <= i * 1e3)
        and (e is None or e2e is None or e2e <= e * 1e3)
    )


def verify(
    ctx: SearchContext,
    workload: Workload,
    chosen: Sequence[CapacityPoint],
    replicas: Mapping[str, Sequence[int]],
    rates_per_s: Sequence[float],
) -> Simulated:
    """Every group of the plan simulated at its hardest bucket (module docstring)."""
    rows = [simulate_check(ctx, workload, j) for j in hardest_checks(ctx, chosen, replicas, rates_per_s)]

    def worst(key: str) -> float | None:
        vals = [getattr(r, key) for r in rows if getattr(r, key) is not None]
        return max(vals) if vals else None

    return Simulated(
        requests=sum(r.requests for r in rows),
        seed=SEED,
        ttft_p99_ms=worst("ttft_p99_ms"),
        itl_p99_ms=worst("itl_p99_ms"),
        slo_met=bool(rows) and all(r.slo_met for r in rows),
        groups=rows,
    )
