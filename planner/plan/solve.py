"""From candidates to replica counts: the sizing problem in solvers.milp's vocabulary (buckets,
resources, candidates), its solution read back, and single-configuration plans costed exactly
(solvers.milp_fastpath) for the alternatives a plan reports.

Mapping: a forecast bucket is a bucket (demand = its arrival rate, weight = its hours); a GPU
type is a resource (prices per GPU-hour, inventory cap); a candidate is one replica
configuration (units = its TP, capacity = requests/s per replica within the SLOs, pool = its
role, group = its GPU type, so a single-configuration plan pairs prefill and decode pools on one
GPU type).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from planner.plan.capacity import CapacityPoint
from solvers.milp import Bucket, Candidate, MilpData, MilpResult, Resource, solve
from solvers.milp_fastpath import Option, enumerate_options, evaluate_options

HOURS_PER_MONTH = 730.0


@dataclass(frozen=True)
class Prices:
    """One GPU type's bill: on-demand and (optional) reserved USD per GPU-hour, optional cap."""

    gpu: str
    usd_per_gpu_hour: float
    reserved_usd_per_gpu_hour: float | None
    inventory: int | None


@dataclass(frozen=True)
class Forecast:
    """The buckets the plan sizes: arrival rate (requests/s) and duration (s) of each."""

    rates_per_s: tuple[float, ...]
    durations_s: tuple[float, ...]

    @property
    def hours(self) -> tuple[float, ...]:
        return tuple(d / 3600.0 for d in self.durations_s)

    @property
    def horizon_hours(self) -> float:
        return math.fsum(self.hours)

    @property
    def peak(self) -> int:
        """The first bucket with the highest rate."""
        return int(np.argmax(np.asarray(self.rates_per_s)))

    @property
    def starts_s(self) -> tuple[float, ...]:
        out, t = [], 0.0
        for d in self.durations_s:
            out.append(t)
            t += d
        return tuple(out)


def milp_data(
    points: Sequence[CapacityPoint],
    forecast: Forecast,
    prices: Sequence[Prices],
    headroom: float,
    single_config: bool,
    time_limit_s: float,
    gap_rel: float | None,
    *,
    min_replicas: int = 0,
    spare_replicas: int = 0,
    incompatible_pairs: Sequence[tuple[str, str]] = (),
) -> MilpData:
    """The sizing problem of `points` (one candidate each) over `forecast`: a point's capacity per
    replica in each bucket is its `capacity_by_bucket_per_s` when it has one (bursty traffic,
    planner/plan/split.py), else its `requests_per_s` everywhere. Optional, each off by default:
    `min_replicas` / `spare_replicas` (0..1000: each deployment in use holds at
    least that many replicas / that many beyond those that cover its load, N+1 with 1), and
    `incompatible_pairs` (config ids never deployed together, e.g. a prefill and a decode pool
    whose KV transfer cannot work). solvers.milp_data validates them (ValueError naming the
    field)."""
    used = {p.config.gpu for p in points}
    return MilpData(
        buckets=tuple(
            Bucket(demand_per_s=r, hours=h) for r, h in zip(forecast.rates_per_s, forecast.hours, strict=True)
        ),
        resources=tuple(
            Resource(
                name=pr.gpu,
                on_demand_usd_per_hour=pr.usd_per_gpu_hour,
                reserved_usd_per_hour=pr.reserved_usd_per_gpu_hour,
                inventory=pr.inventory,
            )
            for pr in prices
            if pr.gpu in used
        ),
        candidates=tuple(
            Candidate(
                id=p.config.id,
                resource=p.config.gpu,
                units_per_replica=p.config.gpus,
                capacity_per_s=p.requests_per_s,
                pool=p.config.role,
                group=p.config.gpu,
                capacity_by_bucket_per_s=p.capacity_by_bucket_per_s,
            )
            for p in points
        ),
        headroom=headroom,
        single_config=single_config,
        time_limit_s=time_limit_s,
        gap_rel=gap_rel,
        min_replicas=min_replicas,
        spare_replicas=spare_replicas,
        incompatible_pairs=tuple(incompatible_pairs),
    )


def size(data: MilpData) -> MilpResult:
    return solve(data)


@dataclass(frozen=True)
class Costed:
    """One single-configuration plan, exactly costed: its members (candidate ids), replicas per
    bucket of each, reserved GPUs per type, the bill over the horizon and per bucket-hour."""

    members: tuple[str, ...]
    replicas: tuple[tuple[int, ...], ...]
    reserved: dict[str, int]
    cost_usd: float
    usd_per_hour: tuple[float, ...]
    gpus: tuple[int, ...]  # held per bucket (reserved + on-demand)

    @property
    def feasible(self) -> bool:
        return math.isfinite(self.cost_usd)


def single_configurations(data: MilpData) -> list[Costed]:
    """Every single configuration of `data` (each colocated candidate; each prefill and decode
    pair of one GPU type) with its exact cost; infinite where an inventory cap is broken."""
    options = evaluate_options(data, enumerate_options(data, range(len(data.candidates))))
    return [_costed(data, o) for o in options]


def _costed(data: MilpData, option: Option) -> Costed:
    cands = data.candidates
    n_b = len(data.buckets)
    units: dict[int, np.ndarray] = {}
    for k, reps in zip(option.members, option.replicas, strict=True):
        t = data.resource_index(cands[k].resource)
        units.setdefault(t, np.zeros(n_b, dtype=np.int64))
        units[t] = units[t] + np.asarray(reps, dtype=np.int64) * cands[k].units_per_replica
    reserved = dict(option.reserved)
    rate = np.zeros(n_b)
    held = np.zeros(n_b, dtype=np.int64)
    for t, u in units.items():
        res = data.resources[t]
        r = reserved.get(t, 0)
        rate += (res.reserved_usd_per_hour or 0.0) * r + res.on_demand_usd_per_hour * np.maximum(u - r, 0)
        held += np.maximum(u, r)
    return Costed(
        members=tuple(cands[k].id for k in option.members),
        replicas=option.replicas,
        reserved={data.resources[t].name: r for t, r in sorted(reserved.items())},
        cost_usd=option.cost_usd,
        usd_per_hour=tuple(float(v) for v in rate),
        gpus=tuple(int(v) for v in held),
    )
