"""Capacity answers remembered across plans in one process (a server worker, a sweep, a CLI
batch): a bounded LRU memo of shape searches and single-configuration capacities.

A capacity depends on the model, the GPU (its catalog entry and its profile), TP, the dtypes,
the scheduler flags, the workload's length distributions, burstiness and prefix-cache hits, the
SLOs and the KV-transfer settings: never on the bucket rates, prices, inventory, headroom or the
solver's settings. The key is built from exactly those inputs as the plan resolved them
(`capacity_key`), so a traffic-growth or price scenario reuses every search of the one before,
and any change to a capacity input misses. Answers are immutable and computed by the same
deterministic code whoever asks first, so a hit is byte-for-byte what a cold plan computes.
The model and the GPU are keyed by name: their specs are read once per process (the catalogs'
caches, and `get_model`'s for a config.json path), so a name means one spec for the memo's life.

A bursty stream's capacities per replica count (planner/plan/split.py) read no rate either: each
is a root-find at one per-replica CV², stored under its configuration's key plus that CV²
(`split.line_memo_key`). What reads the rates (each bucket's replica count, and the counts made
exact at the MILP's answer, planner/plan/recheck.py) is recomputed by every plan from these.

Bounded: at most MEMO_ENTRIES answers, least recently used dropped first. A whole-catalog plan
leaves ~130 answers and ~7 KB per answer (measured with tracemalloc, keys included), so the cap
holds ~15 capacity-input sets of the whole catalog, or ~120 of one GPU type, in ~15 MB. `clear_memo()` empties it; `memo_info()` counts.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from planner.plan.capacity import SearchContext

MEMO_ENTRIES = 2048

# WorkloadStats fields left out of the key: the rates and the name, which the capacity never
# reads, and `prompt_moments`, derived from the prompt fields that are in the key. Every other
# field (including any added later) is part of the key, so a new capacity input misses, never
# aliases.
UNKEYED_STATS = frozenset(
    {"name", "mean_requests_per_s", "peak_requests_per_s", "bucket_durations_s", "bucket_rates", "prompt_moments"}
)
# SearchContext fields keyed separately: `stats` above; `profiles` by the one GPU's profile.
SEPARATE_CONTEXT = frozenset({"stats", "profiles"})


def _canonical(value: Any) -> Hashable:
    """A hashable, exact stand-in: arrays by dtype, shape and bytes; floats as they are (bitwise
    equal inputs give bitwise equal answers)."""
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, list | tuple):
        return tuple(_canonical(v) for v in value)
    return value


def context_key(ctx: SearchContext) -> tuple[Hashable, ...]:
    """The capacity inputs of `ctx` common to every GPU: everything but the rates and profiles."""
    stats = ctx.stats
    st = tuple(
        (f.name, _canonical(getattr(stats, f.name))) for f in fields(stats) if f.name not in UNKEYED_STATS
    )
    rest = tuple(
        (f.name, _canonical(getattr(ctx, f.name))) for f in fields(ctx) if f.name not in SEPARATE_CONTEXT
    )
    return (rest, st)


def capacity_key(ctx: SearchContext, gpu: str) -> tuple[Hashable, ...]:
    """The capacity inputs of questions about `gpu` under `ctx`: the common part and that GPU's
    profile, every field of it (as canonical JSON), so a catalog plan and a one-GPU plan share
    their answers for the GPUs they share."""
    return (context_key(ctx), gpu, ctx.profile(gpu).model_dump_json())


@dataclass(frozen=True)
class MemoInfo:
    entries: int
    max_entries: int
    hits: int
    misses: int


class Memo:
    """A thread-safe LRU map of at most `max_entries` entries."""

    def __init__(self, max_entries: int = MEMO_ENTRIES) -> None:
        self.max_entries = max(0, int(max_entries))
        self._data: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable) -> Any | None:
        with self._lock:
            value = self._data.get(key)
            if value is None:
                self.misses += 1
                return None
            self._data.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: Hashable, value: Any) -> None:
        if self.max_entries == 0:
            return
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.max_entries:
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self.hits = self.misses = 0

    def info(self) -> MemoInfo:
        with self._lock:
            return MemoInfo(len(self._data), self.max_entries, self.hits, self.misses)


CAPACITY_MEMO = Memo()


def clear_memo() -> None:
    """Forget every remembered capacity (the next plan computes all of them: a cold plan)."""
    CAPACITY_MEMO.clear()


def memo_info() -> MemoInfo:
    return CAPACITY_MEMO.info()
