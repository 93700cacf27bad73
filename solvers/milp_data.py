"""Input data of the sizing MILP (solvers.milp): validated, frozen, plain numbers and names.

Vocabulary (neutral on purpose, the caller maps its own words onto it):

- a *bucket* is a stretch of time with a constant demand (`demand_per_s`, units of work per
  second) lasting `hours` (its weight in the bill);
- a *resource* is a kind of billed unit (a GPU type): its on-demand price per unit-hour, an
  optional reserved price per unit-hour (a reserved unit is billed for every hour of the horizon,
  used or not) and an optional `inventory` cap on the units of that kind in use in any bucket;
- a *candidate* is a way to serve demand: a replica takes `units_per_replica` units of one
  resource and serves `capacity_per_s` (or, with `capacity_by_bucket_per_s`, its own capacity
  in each bucket: e.g. bursty traffic, where what a replica serves depends on how many share the
  bucket's load); its `pool` is "colocated" (serves requests whole) or "prefill" / "decode"
  (serves one phase; both phases must each cover the demand), and its `group` says which prefill
  and decode candidates may be deployed together when only one configuration is allowed;
- availability: in every bucket with demand, each *deployment* in use (one candidate's replicas)
  has at least `min_replicas` replicas, and `spare_replicas` beyond those whose capacity covers
  its part of the demand (1: N+1, the bucket stays covered with any one replica of each
  deployment down);
- `incompatible_pairs`: candidate ids that must never be deployed together (typically a prefill
  and a decode candidate whose KV transfer cannot work, e.g. vLLM's NIXL connector wants the
  decode TP to be a multiple of the prefill TP).

Every check raises ValueError naming the offending field (`candidates[3].capacity_per_s ...`) so a
caller can turn it into its own field-path error. Size limits are module constants: a caller
(e.g. a service) maps the "exceeds the limit" errors (SizeLimitError, their message has `LIMIT_PREFIX`) to a
resource-exhausted answer.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

__all__ = [
    "LIMIT_PREFIX",
    "MAX_BUCKETS",
    "MAX_CANDIDATES",
    "MAX_CELLS",
    "MAX_DEMAND_PER_S",
    "MAX_HEADROOM",
    "MAX_INCOMPATIBLE_PAIRS",
    "MAX_INVENTORY",
    "MAX_NAME_CHARS",
    "MAX_PRICE_USD_PER_HOUR",
    "MAX_REPLICAS_PER_BUCKET",
    "MAX_RESOURCES",
    "MAX_SPARE_REPLICAS",
    "MAX_TIME_LIMIT_S",
    "MAX_UNITS_PER_REPLICA",
    "POOLS",
    "Bucket",
    "Candidate",
    "MilpData",
    "Resource",
    "SizeLimitError",
    "capacity_matrix",
    "derive",
    "peak_replicas",
    "prune_dominated",
    "select_buckets",
]

POOLS = ("colocated", "prefill", "decode")

# Size limits. A leap year of hourly buckets; candidates x buckets bounds the input a caller can
# hand over (the model actually built is smaller: see solvers.milp's reductions and
# MAX_MODEL_VARIABLES there).
MAX_BUCKETS = 8784
MAX_CANDIDATES = 5000
MAX_RESOURCES = 256
MAX_CELLS = 2_000_000  # candidates x buckets
MAX_REPLICAS_PER_BUCKET = 100_000  # ceil(demand * (1 + headroom) / capacity) for any candidate, any bucket
MAX_SPARE_REPLICAS = 1000  # min_replicas and spare_replicas each
MAX_INCOMPATIBLE_PAIRS = 100_000
MAX_UNITS_PER_REPLICA = 1024
MAX_INVENTORY = 1_000_000
MAX_DEMAND_PER_S = 1e9
MAX_HEADROOM = 100.0
MAX_PRICE_USD_PER_HOUR = 1e6
MAX_HOURS_PER_BUCKET = 8784.0
MAX_TIME_LIMIT_S = 3600.0
MAX_NAME_CHARS = 128
LIMIT_PREFIX = "exceeds the limit"


class SizeLimitError(ValueError):
    """A problem larger than the solver takes (its message contains LIMIT_PREFIX): a caller's
    request too big for the model, not a wrong value; a service answers it as resource
    exhaustion, not as an internal error."""

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/+=,@-]*$")


def _finite(where: str, value: float, *, lo: float = 0.0, hi: float, lo_open: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{where} must be finite, got {value!r}")
    if (value <= lo) if lo_open else (value < lo):
        raise ValueError(f"{where} must be {'>' if lo_open else '>='} {lo:g}, got {value!r}")
    if value > hi:
        raise SizeLimitError(f"{where} {LIMIT_PREFIX} {hi:g}, got {value!r}")


def _integer(where: str, value: int, *, lo: int, hi: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{where} must be an integer, got {value!r}")
    if value < lo:
        raise ValueError(f"{where} must be >= {lo}, got {value}")
    if value > hi:
        raise SizeLimitError(f"{where} {LIMIT_PREFIX} {hi}, got {value}")


def _name(where: str, value: str) -> None:
    if not isinstance(value, str) or not _NAME.match(value):
        raise ValueError(
            f"{where} must be a non-empty name of letters, digits and _ . : / + = , @ - "
            f"(starting with a letter or digit), got {value!r}"
        )
    if len(value) > MAX_NAME_CHARS:
        raise SizeLimitError(f"{where} length {LIMIT_PREFIX} {MAX_NAME_CHARS} characters, got {len(value)}")


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
    """`capacity_by_bucket_per_s`: None, `capacity_per_s` in every bucket; else one capacity per
    bucket of the data (each > 0, finite), and `capacity_per_s` is not used."""

    id: str
    resource: str
    units_per_replica: int
    capacity_per_s: float
    pool: str = "colocated"
    group: str = "default"
    capacity_by_bucket_per_s: tuple[float, ...] | None = None

    def check(self, where: str) -> None:
        _name(f"{where}.id", self.id)
        _name(f"{where}.resource", self.resource)
        _name(f"{where}.group", self.group)
        _integer(f"{where}.units_per_replica", self.units_per_replica, lo=1, hi=MAX_UNITS_PER_REPLICA)
        _finite(f"{where}.capacity_per_s", self.capacity_per_s, lo_open=True, hi=MAX_DEMAND_PER_S)
        if self.pool not in POOLS:
            raise ValueError(f"{where}.pool must be one of {', '.join(POOLS)}, got {self.pool!r}")
        by_bucket = self.capacity_by_bucket_per_s
        if by_bucket is not None:
            if isinstance(by_bucket, (str, bytes)) or not isinstance(by_bucket, Sequence):
                raise ValueError(
                    f"{where}.capacity_by_bucket_per_s must be a sequence or None, got {type(by_bucket).__name__}"
                )
            numbers = np.fromiter(
                (
                    float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan
                    for v in by_bucket
                ),
                float,
                len(by_bucket),
            )
            good = np.isfinite(numbers) & (numbers > 0) & (numbers <= MAX_DEMAND_PER_S)
            if not good.all():  # the first bad one, with the usual message
                b = int(np.flatnonzero(~good)[0])
                _finite(
                    f"{where}.capacity_by_bucket_per_s[{b}]", by_bucket[b], lo_open=True, hi=MAX_DEMAND_PER_S
                )

    def capacity_in(self, b: int) -> float:
        """Capacity (per second) of one replica in bucket b."""
        by_bucket = self.capacity_by_bucket_per_s
        return self.capacity_per_s if by_bucket is None else by_bucket[b]


@dataclass(frozen=True)
class MilpData:
    """One sizing problem. `headroom`: capacity must reach demand * (1 + headroom) in every bucket.
    `single_config`: exactly one colocated candidate, or one prefill and one decode candidate of
    the same group, serves every bucket (replica counts still vary by bucket); False lets any mix
    of candidates serve (prefill and decode pools may then come from different groups and
    resources). `min_replicas`, `spare_replicas` (each 0..MAX_SPARE_REPLICAS; 0 and 0: no
    availability rule): in every bucket with demand, each candidate with replicas has at least
    `min_replicas` of them, and its replicas less `spare_replicas` cover its part of the demand.
    `incompatible_pairs`: (id, id) of candidates never both deployed (in any buckets).
    `time_limit_s` bounds the whole solve; `gap_rel` lets the solver stop at that relative gap
    (None: prove optimality)."""

    buckets: tuple[Bucket, ...]
    resources: tuple[Resource, ...]
    candidates: tuple[Candidate, ...]
    headroom: float = 0.0
    single_config: bool = True
    time_limit_s: float = 10.0
    gap_rel: float | None = None
    min_replicas: int = 0
    spare_replicas: int = 0
    incompatible_pairs: tuple[tuple[str, str], ...] = ()
    _resource_index: dict[str, int] = field(init=False, repr=False, compare=False)
    _cache: dict[str, Any] = field(init=False, repr=False, compare=False)  # derived arrays (read-only)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_cache", {})
        for name in ("buckets", "resources", "candidates", "incompatible_pairs"):
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
        _integer("min_replicas", self.min_replicas, lo=0, hi=MAX_SPARE_REPLICAS)
        _integer("spare_replicas", self.spare_replicas, lo=0, hi=MAX_SPARE_REPLICAS)
        self._check_candidates()
        self._check_pairs()

    def _check_sizes(self) -> None:
        if not self.buckets:
            raise ValueError("buckets must not be empty")
        if len(self.buckets) > MAX_BUCKETS:
            raise SizeLimitError(f"buckets count {LIMIT_PREFIX} {MAX_BUCKETS}, got {len(self.buckets)}")
        if not self.resources:
            raise ValueError("resources must not be empty")
        if len(self.resources) > MAX_RESOURCES:
            raise SizeLimitError(f"resources count {LIMIT_PREFIX} {MAX_RESOURCES}, got {len(self.resources)}")
        if not self.candidates:
            raise ValueError("candidates must not be empty")
        if len(self.candidates) > MAX_CANDIDATES:
            raise SizeLimitError(f"candidates count {LIMIT_PREFIX} {MAX_CANDIDATES}, got {len(self.candidates)}")
        cells = len(self.candidates) * len(self.buckets)
        if cells > MAX_CELLS:
            raise SizeLimitError(f"candidates x buckets {LIMIT_PREFIX} {MAX_CELLS}, got {cells}")
        if len(self.incompatible_pairs) > MAX_INCOMPATIBLE_PAIRS:
            raise SizeLimitError(
                f"incompatible_pairs count {LIMIT_PREFIX} {MAX_INCOMPATIBLE_PAIRS}, got {len(self.incompatible_pairs)}"
            )

    def _check_candidates(self) -> None:
        seen: dict[str, int] = {}
        need = np.array([b.demand_per_s for b in self.buckets]) * (1.0 + self.headroom)
        for i, c in enumerate(self.candidates):
            if not isinstance(c, Candidate):
                raise ValueError(f"candidates[{i}] must be a Candidate, got {type(c).__name__}")
            c.check(f"candidates[{i}]")
            if c.capacity_by_bucket_per_s is not None:
                if len(c.capacity_by_bucket_per_s) != len(self.buckets):
                    raise ValueError(
                        f"candidates[{i}].capacity_by_bucket_per_s has {len(c.capacity_by_bucket_per_s)} "
                        f"values, one per bucket wanted ({len(self.buckets)})"
                    )
                if not isinstance(c.capacity_by_bucket_per_s, tuple):
                    c = replace(c, capacity_by_bucket_per_s=tuple(c.capacity_by_bucket_per_s))
                    object.__setattr__(
                        self, "candidates", (*self.candidates[:i], c, *self.candidates[i + 1 :])
                    )
            if c.id in seen:
                raise ValueError(f"candidates[{i}].id {c.id!r} repeats candidates[{seen[c.id]}]")
            seen[c.id] = i
            if c.resource not in self._resource_index:
                raise ValueError(f"candidates[{i}].resource {c.resource!r} is not among resources")
            capacity = np.array(c.capacity_by_bucket_per_s or (c.capacity_per_s,), dtype=float)
            replicas = int(np.ceil(need / capacity).max())
            if replicas > MAX_REPLICAS_PER_BUCKET:
                raise SizeLimitError(
                    f"candidates[{i}] needs {replicas} replicas in one bucket: replicas per bucket "
                    f"{LIMIT_PREFIX} {MAX_REPLICAS_PER_BUCKET}"
                )

    def _check_pairs(self) -> None:
        ids = {c.id for c in self.candidates}
        pairs = []
        for i, pair in enumerate(self.incompatible_pairs):
            if isinstance(pair, (str, bytes)) or not isinstance(pair, Sequence) or len(pair) != 2:
                raise ValueError(f"incompatible_pairs[{i}] must be a pair of candidate ids, got {pair!r}")
            for j, cid in enumerate(pair):
                if not isinstance(cid, str) or cid not in ids:
                    raise ValueError(f"incompatible_pairs[{i}][{j}] {cid!r} is not a candidate id")
            if pair[0] == pair[1]:
                raise ValueError(f"incompatible_pairs[{i}] pairs {pair[0]!r} with itself")
            pairs.append((pair[0], pair[1]))
        object.__setattr__(self, "incompatible_pairs", tuple(pairs))

    # Derived quantities used by the model builders.

    @property
    def peak_need_per_s(self) -> float:
        return max(b.demand_per_s for b in self.buckets) * (1.0 + self.headroom)

    def need_per_s(self, b: int) -> float:
        return self.buckets[b].demand_per_s * (1.0 + self.headroom)

    @property
    def total_hours(self) -> float:
        return math.fsum(b.hours for b in self.buckets)

    @property
    def availability(self) -> bool:
        """Whether the availability rule changes anything (min_replicas > 1 or spare_replicas > 0:
        a deployment in use has at least one replica anyway)."""
        return self.min_replicas > 1 or self.spare_replicas > 0

    def resource(self, name: str) -> Resource:
        return self.resources[self._resource_index[name]]

    def resource_index(self, name: str) -> int:
        return self._resource_index[name]

    def conflicts(self) -> dict[str, frozenset[str]]:
        """Candidate id -> the ids it must never be deployed with (present ids only)."""
        out: dict[str, set[str]] = {}
        for a, b in self.incompatible_pairs:
            out.setdefault(a, set()).add(b)
            out.setdefault(b, set()).add(a)
        return {k: frozenset(v) for k, v in out.items()}


def derive(data: MilpData, **changes: Any) -> MilpData:
    """`data` with `changes` (fields), unchecked: for the solver's own reductions of checked data
    (subsets of the candidates with the pairs among them, merged buckets, other prices), which
    keep every check true but would pay for them again (a second on 8,760 buckets of per-bucket
    capacities). Merged buckets may sum to more hours than one bucket may have as input."""
    new = object.__new__(MilpData)
    for f in fields(MilpData):
        if f.init:
            object.__setattr__(new, f.name, changes.pop(f.name, getattr(data, f.name)))
    if changes:
        raise TypeError(f"not MilpData fields: {sorted(changes)}")
    object.__setattr__(new, "_resource_index", {r.name: i for i, r in enumerate(new.resources)})
    object.__setattr__(new, "_cache", {})
    return new


def capacity_matrix(data: MilpData) -> np.ndarray:
    """Capacity per replica of each candidate in each bucket (candidates x buckets; cached on the
    data, read-only)."""
    out = data._cache.get("capacity")
    if out is None:
        out = np.empty((len(data.candidates), len(data.buckets)))
        for k, c in enumerate(data.candidates):
            out[k] = c.capacity_per_s if c.capacity_by_bucket_per_s is None else c.capacity_by_bucket_per_s
        out.setflags(write=False)
        data._cache["capacity"] = out
    return out


def select_buckets(data: MilpData, members: Sequence[Sequence[int]]) -> MilpData:
    """`data` over new buckets, each standing for the original buckets `members[j]` (equal in
    demand and in every candidate's capacity: see solvers.milp's merging), their hours summed;
    candidates' per-bucket capacities follow their first member."""
    first = [m[0] for m in members]
    buckets = tuple(
        Bucket(data.buckets[m[0]].demand_per_s, math.fsum(data.buckets[b].hours for b in m)) for m in members
    )
    cands = tuple(
        c
        if c.capacity_by_bucket_per_s is None
        else replace(c, capacity_by_bucket_per_s=tuple(c.capacity_by_bucket_per_s[b] for b in first))
        for c in data.candidates
    )
    return derive(data, buckets=buckets, candidates=cands)


def prune_dominated(
    candidates: Sequence[Candidate],
    *,
    respect_groups: bool = True,
    incompatible_pairs: Sequence[tuple[str, str]] = (),
) -> tuple[tuple[Candidate, ...], int]:
    """Drop candidates that another candidate beats on both counts: same resource and pool (and
    group, for prefill/decode when `respect_groups`, i.e. when pairs must come from one group),
    no incompatibility the dropped one does not have too, and some m >= 1 with m x its units per
    replica no more and m x its capacity no less than the dropped one's in every bucket.
    Swapping every replica of the dropped one for m of the other covers as much on no more units,
    in every bucket (with one configuration too: ceil(need / c_i) <= m x ceil(need / c_j)
    replicas of u_i <= u_j / m units; with spare replicas s as well: c_i (m x - s) >= c_j (x - s)
    for x >= s, and a deployment of x <= s replicas covers nothing; min_replicas holds as m x >=
    x), so pruning never changes the optimum. A smaller replica that costs more per unit of
    capacity is kept: it can be the cheapest way to cover a small demand; so is a larger one that
    serves more than m times as much (a TP size that scales better than linearly). The relation
    is transitive (m's multiply, incompatibilities nest), so dropping every dominated one is
    safe; among identical candidates the first is kept. Returns (kept candidates in input order,
    number pruned)."""
    conflicts: dict[str, set[str]] = {}
    for a, b in incompatible_pairs:
        conflicts.setdefault(a, set()).add(b)
        conflicts.setdefault(b, set()).add(a)
    none: set[str] = set()
    width = max((len(c.capacity_by_bucket_per_s or ()) for c in candidates), default=0) or 1
    capacity = [
        np.asarray(c.capacity_by_bucket_per_s or (c.capacity_per_s,) * width, dtype=float) for c in candidates
    ]
    total = [float(v.sum()) for v in capacity]
    by_key: dict[tuple[str, str, str], list[int]] = {}
    for i, c in enumerate(candidates):
        group = c.group if respect_groups and c.pool != "colocated" else ""
        by_key.setdefault((c.resource, c.pool, group), []).append(i)
    pruned: set[int] = set()
    for members in by_key.values():
        # Sorted by (units asc, total capacity desc, input order): a rival that dominates i with
        # m = 1 comes earlier (no more units, no less capacity in any bucket); with m >= 2 it has
        # fewer units, so it comes earlier too.
        order = sorted(members, key=lambda i: (candidates[i].units_per_replica, -total[i], i))
        kept_here: list[int] = []
        for i in order:
            c = candidates[i]
            mine = conflicts.get(c.id, none)
            for j in kept_here:  # bounded: at most len(members) rivals
                rival = candidates[j]
                m = c.units_per_replica // rival.units_per_replica
                if (
                    m >= 1
                    and bool(np.all(m * capacity[j] >= capacity[i]))
                    and conflicts.get(rival.id, none) <= mine
                ):
                    pruned.add(i)
                    break
            else:
                kept_here.append(i)
    kept = tuple(c for i, c in enumerate(candidates) if i not in pruned)
    return kept, len(pruned)
