"""Routing arrivals over the replicas of a pool."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from planner.errors import InvalidInput, echo
from planner.simulate.scheduler import SimulatedEngine

ROUTER_POLICIES = ("round_robin", "least_outstanding_tokens")


class Router(Protocol):
    def pick(self, engines: Sequence[SimulatedEngine], rid: int, t: float) -> int:
        """Index of the replica that gets request `rid`, arriving at time t. The engines have
        run every step that starts before t."""
        ...


class RoundRobin:
    def __init__(self) -> None:
        self._next = 0

    def pick(self, engines: Sequence[SimulatedEngine], rid: int, t: float) -> int:
        i = self._next % len(engines)
        self._next = i + 1
        return i


class LeastOutstandingTokens:
    """The replica with the fewest remaining tokens (prompt tokens not yet computed, counting
    recomputation after a preemption, plus output tokens not yet generated); ties go to the
    lowest index.

    Many replicas are kept in a tournament tree of (tokens, index), updated for the replicas the
    pool reports `changed` (those that ran or received a request), so a pick costs O(log
    replicas), not a scan of all of them."""

    SCAN = 16  # up to this many replicas a scan is cheaper than the tree

    def __init__(self) -> None:
        self._tree: list[tuple[int, int]] = []
        self._leaves = 0
        self._dirty: set[int] = set()
        self._of: object = None  # the engines the tree is of

    def changed(self, i: int) -> None:
        if self._tree:
            self._dirty.add(i)

    def pick(self, engines: Sequence[SimulatedEngine], rid: int, t: float) -> int:
        count = len(engines)
        if count <= self.SCAN:
            best = 0
            best_v = engines[0].outstanding_tokens
            for i in range(1, count):
                v = engines[i].outstanding_tokens
                if v < best_v:
                    best, best_v = i, v
            return best
        if self._of is not engines or self._leaves < count:
            self._build(engines)
        else:
            tree, size = self._tree, self._leaves
            for i in sorted(self._dirty):
                j = size + i
                tree[j] = (engines[i].outstanding_tokens, i)
                j //= 2
                while j:
                    a, b = tree[2 * j], tree[2 * j + 1]
                    tree[j] = a if a <= b else b
                    j //= 2
        self._dirty.clear()
        return self._tree[1][1]

    def _build(self, engines: Sequence[SimulatedEngine]) -> None:
        size = 1
        while size < len(engines):
            size *= 2
        pad = (sys.maxsize, sys.maxsize)
        tree = [pad] * (2 * size)
        for i, e in enumerate(engines):
            tree[size + i] = (e.outstanding_tokens, i)
        for j in range(size - 1, 0, -1):
            a, b = tree[2 * j], tree[2 * j + 1]
            tree[j] = a if a <= b else b
        self._tree, self._leaves, self._of = tree, size, engines


def make_router(policy: str | Router, field: str = "router") -> Router:
    if not isinstance(policy, str):
        return policy
    if policy == "round_robin":
        return RoundRobin()
    if policy == "least_outstanding_tokens":
        return LeastOutstandingTokens()
    raise InvalidInput(field, f"unknown policy {echo(policy)}; expected one of {', '.join(ROUTER_POLICIES)}")


# --- weighted routing: a gateway's weighted backends, a proxy's pick among configurations --------

MAX_PARTS = 1_000  # parts one draw may split a stream over


def draw_parts(count: int, weights: Sequence[float], seed: Sequence[int]) -> npt.NDArray[np.int64]:
    """The part each of `count` requests goes to: part k with probability weights[k] / sum, drawn
    independently per request (a gateway's weighted backends, Gateway API HTTPRoute `weight`,
    pick at random per request), from a generator seeded with `seed`. Same arguments, same
    draw. A part of weight 0 gets nothing."""
    w = np.asarray(weights, dtype=np.float64)
    if not 1 <= w.size <= MAX_PARTS:
        raise InvalidInput("weights", f"give 1 .. {MAX_PARTS} parts, got {w.size}")
    if not (np.all(np.isfinite(w)) and float(w.min()) >= 0.0 and float(w.sum()) > 0.0):
        raise InvalidInput("weights", "must be finite, >= 0, and not all 0")
    if count < 0:
        raise InvalidInput("count", f"must be >= 0, got {count}")
    edges = np.cumsum(w / w.sum())
    u = np.random.default_rng(list(seed)).random(count)
    # u < edges[k] first at part k; the last edge may round below 1: clip into range, onto the
    # last part of positive weight.
    last = int(np.flatnonzero(w > 0)[-1])
    return np.minimum(np.searchsorted(edges, u, side="right"), last).astype(np.int64)


class Assigned:
    """Each request to the part drawn for it beforehand (`draw_parts`), round robin over that
    part's replicas: a pool made of several configurations (e.g. two GPU types) behind a router
    that splits by weight. The pool's engines are the parts' replicas in order."""

    def __init__(self, part_of_request: npt.NDArray[np.int64], replicas: Sequence[int]) -> None:
        if not replicas or min(replicas) < 1:
            raise InvalidInput("replicas", "every part needs at least one replica")
        self._part = part_of_request
        self._replicas = list(replicas)
        self._first = [0, *np.cumsum(self._replicas)[:-1].tolist()]
        self._next = [0] * len(self._replicas)

    def pick(self, engines: Sequence[SimulatedEngine], rid: int, t: float) -> int:
        k = int(self._part[rid])
        i = self._next[k]
        self._next[k] = (i + 1) % self._replicas[k]
        return self._first[k] + i
