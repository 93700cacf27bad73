"""Input data of the sizing MILP (solvers.milp): validated, frozen, plain numbers and names.

Vocabulary (neutral on purpose, the caller maps its own words onto it):

- a *bucket* is a stretch of time with a constant demand (`demand_per_s`, units of work per
  second) lasting `hours` (its weight in the bill);
- a *resource* is a kind of billed unit (a GPU type): its on-demand price per unit-hour, an
  optional reserved price per unit-hour (a reserved unit is billed for every hour of the horizon,
  used or not) and an optional `inventory` cap on the units of that kind in use in any bucket;
- a *candidate* is a way to serve demand: a replica takes `units_per_replica` units of one
  resource and serves `capacity_per_s`; its `pool` is "colocated" (serves requests whole) or
  "prefill" / "decode" (serves one phase; both phases must each cover the demand), and its
  `group` says which prefill and decode candidates may be deployed together when only one
  configuration is allowed.

Every check raises ValueError naming the offending field (`candidates[3].capacity_per_s ...`) so a
caller can turn it into its own field-path error. Size limits are module constants: a caller
(e.g. a service) maps the "exceeds the limit" errors, which all start with `LIMIT_PREFIX`, to a
resource-exhausted answer.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = [
    "LIMIT_PREFIX",
    "MAX_BUCKETS",
    "MAX_CANDIDATES",
    "MAX_CELLS",
    "MAX_DEMAND_PER_S",
    "MAX_HEADROOM",
    "MAX_INVENTORY",
    "MAX_NAME_CHARS",
    "MAX_PRICE_USD_PER_HOUR",
    "MAX_REPLICAS_PER_BUCKET",
    "MAX_RESOURCES",
    "MAX_TIME_LIMIT_S",
    "MAX_UNITS_PER_REPLICA",
    "POOLS",
    "Bucket",
    "Candidate",
    "MilpData",
    "Resource",
    "peak_replicas",
    "prune_dominated",
]

POOLS = ("colocated", "prefill", "decode")

# Size limits. A leap year of hourly buckets; candidates x buckets bounds the input a caller can
# hand over (the model actually built is smaller: see solvers.milp's reductions and
# MAX_MODEL_VARIABLES there).
MAX_BUCKETS = 8784
MAX_CANDIDATES = 5000
MAX_RESOURCES = 256
MAX_CELLS = 2_000_000  # candidates x buckets
MAX_REPLICAS_PER_BUCKET = 100_000  # ceil(demand * (1 + headroom) / capacity) for any candidate
MAX_UNITS_PER_REPLICA = 1024
MAX_INVENTORY = 1_000_000
MAX_DEMAND_PER_S = 1e9
MAX_HEADROOM = 100.0
MAX_PRICE_USD_PER_HOUR = 1e6
MAX_HOURS_PER_BUCKET = 8784.0
MAX_TIME_LIMIT_S = 3600.0
MAX_NAME_CHARS = 128
LIMIT_PREFIX = "exceeds the limit"

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/+=,@-]*$")


def _finite(where: str, value: float, *, lo: float = 0.0, hi: float, lo_open: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{where} must be finite, got {value!r}")
    if (value <= lo) if lo_open else (value < lo):
        raise ValueError(f"{where} must be {'>' if lo_open else '>='} {lo:g}, got {value!r}")
    if value > hi:
        raise ValueError(f"{where} {LIMIT_PREFIX} {hi:g}, got {value!r}")


def _integer(where: str, value: int, *, lo: int, hi: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{where} must be an integer, got {value!r}")
    if value < lo:
        raise ValueError(f"{where} must be >= {lo}, got {value}")
    if value > hi:
        raise ValueError(f"{where} {LIMIT_PREFIX} {hi}, got {value}")


def _name(where: str, value: str) -> None:
    if not isinstance(value, str) or not _NAME.match(value):
        raise ValueError(
            f"{where} must be a non-empty name of letters, digits and _ . : / + = , @ - "
            f"(starting with a letter or digit), got {value!r}"
        )
    if len(value) > MAX_NAME_CHARS:
        raise ValueError(f"{where} length {LIMIT_PREFIX} {MAX_NAME_CHARS} characters, got {len(value)}")


def peak_replicas(peak_need_per_s: float, capacity_per_s: float) -> int:
    """Replicas of a candidate the peak bucket's need (headroom included) takes, as the size
    limit counts them (MAX_REPLICAS_PER_BUCKET): a caller can drop a candidate before the
    data refuses it."""
    return math.ceil(peak_need_per_s / capacity_per_s)


@dataclass(frozen=True)
class Bucket:
    demand_per_s: float
    hours: float

    def check(self, where: str) -> None:
        _finite(f"{where}.demand_per_s", self.demand_per_s, hi=MAX_DEMAND_PER_S)
        _finite(f"{where}.hours", self.hours, lo_open=True, hi=MAX_HOURS_PER_BUCKET)


@dataclass(frozen=True)
class Resource:
    name: str
    on_demand_usd_per_hour: float
    reserved_usd_per_hour: float | None = None
    inventory: int | None = None

    def check(self, where: str) -> None:
        _name(f"{where}.name", self.name)
        _finite(f"{where}.on_demand_usd_per_hour", self.on_demand_usd_per_hour, hi=MAX_PRICE_USD_PER_HOUR)
        if self.reserved_usd_per_hour is not None:
            _finite(f"{where}.reserved_usd_per_hour", self.reserved_usd_per_hour, hi=MAX_PRICE_USD_PER_HOUR)
        if self.inventory is not None:
            _integer(f"{where}.inventory", self.inventory, lo=0, hi=MAX_INVENTORY)


@dataclass(frozen=True)
class Candidate:
    id: str
    resource: str
    units_per_replica: int
    capacity_per_s: float
    pool: str = "colocated"
    group: str = "default"

    def check(self, where: str) -> None:
        _name(f"{where}.id", self.id)
        _name(f"{where}.resource", self.resource)
        _name(f"{where}.group", self.group)
        _integer(f"{where}.units_per_replica", self.units_per_replica, lo=1, hi=MAX_UNITS_PER_REPLICA)
        _finite(f"{where}.capacity_per_s", self.capacity_per_s, lo_open=True, hi=MAX_DEMAND_PER_S)
        if self.pool not in POOLS:
            raise ValueError(f"{where}.pool must be one of {', '.join(POOLS)}, got {self.pool!r}")


@dataclass(frozen=True)
class MilpData:
    """One sizing problem. `headroom`: capacity must reach demand * (1 + headroom) in every bucket.
    `single_config`: exactly one colocated candidate, or one prefill and one decode candidate of
    the same group, serves every bucket (replica counts still vary by bucket); False lets any mix
    of candidates serve (prefill and decode pools may then come from different groups and
    resources). `time_limit_s` bounds the whole solve; `gap_rel` lets the solver stop at that
    relative gap (None: prove optimality)."""

    buckets: tuple[Bucket, ...]
    resources: tuple[Resource, ...]
    candidates: tuple[Candidate, ...]
    headroom: float = 0.0
    single_config: bool = True
    time_limit_s: float = 10.0
    gap_rel: float | None = None
    _resource_index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("buckets", "resources", "candidates"):
            value = getattr(self, name)
            if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
                raise ValueError(f"{name} must be a sequence, got {type(value).__name__}")
            object.__setattr__(self, name, tuple(value))
        self._check_sizes()
        for i, b in enumerate(self.buckets):
            if not isinstance(b, Bucket):
                raise ValueError(f"buckets[{i}] must be a Bucket, got {type(b).__name__}")
            b.check(f"buckets[{i}]")
        index: dict[str, int] = {}
        for i, r in enumerate(self.resources):
            if not isinstance(r, Resource):
                raise ValueError(f"resources[{i}] must be a Resource, got {type(r).__name__}")
            r.check(f"resources[{i}]")
            if r.name in index:
                raise ValueError(f"resources[{i}].name {r.name!r} repeats resources[{index[r.name]}]")
            index[r.name] = i
        object.__setattr__(self, "_resource_index", index)
        _finite("headroom", self.headroom, hi=MAX_HEADROOM)
        if not isinstance(self.single_config, bool):
            raise ValueError(f"single_config must be a bool, got {self.single_config!r}")
        _finite("time_limit_s", self.time_limit_s, lo_open=True, hi=MAX_TIME_LIMIT_S)
        if self.gap_rel is not None:
            _finite("gap_rel", self.gap_rel, hi=1.0)
        self._check_candidates()

    def _check_sizes(self) -> None:
        if not self.buckets:
            raise ValueError("buckets must not be empty")
        if len(self.buckets) > MAX_BUCKETS:
            raise ValueError(f"buckets count {LIMIT_PREFIX} {MAX_BUCKETS}, got {len(self.buckets)}")
        if not self.resources:
            raise ValueError("resources must not be empty")
        if len(self.resources) > MAX_RESOURCES:
            raise ValueError(f"resources count {LIMIT_PREFIX} {MAX_RESOURCES}, got {len(self.resources)}")
        if not self.candidates:
            raise ValueError("candidates must not be empty")
        if len(self.candidates) > MAX_CANDIDATES:
            raise ValueError(f"candidates count {LIMIT_PREFIX} {MAX_CANDIDATES}, got {len(self.candidates)}")
        cells = len(self.candidates) * len(self.buckets)
        if cells > MAX_CELLS:
            raise ValueError(f"candidates x buckets {LIMIT_PREFIX} {MAX_CELLS}, got {cells}")

    def _check_candidates(self) -> None:
        seen: dict[str, int] = {}
        peak = self.peak_need_per_s
        for i, c in enumerate(self.candidates):
            if not isinstance(c, Candidate):
                raise ValueError(f"candidates[{i}] must be a Candidate, got {type(c).__name__}")
            c.check(f"candidates[{i}]")
            if c.id in seen:
                raise ValueError(f"candidates[{i}].id {c.id!r} repeats candidates[{seen[c.id]}]")
            seen[c.id] = i
            if c.resource not in self._resource_index:
                raise ValueError(f"candidates[{i}].resource {c.resource!r} is not among resources")
            replicas = peak_replicas(peak, c.capacity_per_s)
            if replicas > MAX_REPLICAS_PER_BUCKET:
                raise ValueError(
                    f"candidates[{i}] needs {replicas} replicas at the peak bucket: replicas per bucket "
                    f"{LIMIT_PREFIX} {MAX_REPLICAS_PER_BUCKET}"
                )

    # Derived quantities used by the model builders.

    @property
    def peak_need_per_s(self) -> float:
        return max(b.demand_per_s for b in self.buckets) * (1.0 + self.headroom)

    def need_per_s(self, b: int) -> float:
        return self.buckets[b].demand_per_s * (1.0 + self.headroom)

    @property
    def total_hours(self) -> float:
        return math.fsum(b.hours for b in self.buckets)

    def resource(self, name: str) -> Resource:
        return self.resources[self._resource_index[name]]

    def resource_index(self, name: str) -> int:
        return self._resource_index[name]


def prune_dominated(
    candidates: Sequence[Candidate], *, respect_groups: bool = True
) -> tuple[tuple[Candidate, ...], int]:
    """Drop candidates that another candidate beats on both counts: same resource and pool (and
    group, for prefill/decode when `respect_groups`, i.e. when pairs must come from one group),
    and some m >= 1 with m x its units per replica no more and m x its capacity no less than the
    dropped one's. Swapping every replica of the dropped one for m of the other covers as much on
    no more units, in every bucket (with one configuration too: ceil(need / c_i) <= m x
    ceil(need / c_j) replicas of u_i <= u_j / m units), so pruning never changes the optimum. A
    smaller replica that costs more per unit of capacity is kept: it can be the cheapest way to
    cover a small demand. The relation is transitive (m's multiply), so dropping every dominated
    one is safe; among identical candidates the first is kept. Returns (kept candidates in input
    order, number pruned)."""
    by_key: dict[tuple[str, str, str], list[int]] = {}
    for i, c in enumerate(candidates):
        group = c.group if respect_groups and c.pool != "colocated" else ""
        by_key.setdefault((c.resource, c.pool, group), []).append(i)
    pruned: set[int] = set()
    for members in by_key.values():
        # Sorted by (units asc, capacity desc, input order): a rival that dominates i with m = 1
        # comes earlier; with m >= 2 it has fewer units, so it comes earlier too.
        order = sorted(
            members, key=lambda i: (candidates[i].units_per_replica, -candidates[i].capacity_per_s, i)
        )
        kept_here: list[int] = []
        for i in order:
            c = candidates[i]
            for j in kept_here:  # bounded: at most len(members) rivals
                rival = candidates[j]
                m = c.units_per_replica // rival.units_per_replica
                if m >= 1 and m * rival.capacity_per_s >= c.capacity_per_s:
                    pruned.add(i)
                    break
            else:
                kept_here.append(i)
    kept = tuple(c for i, c in enumerate(candidates) if i not in pruned)
    return kept, len(pruned)
