"""Routing arrivals over the replicas of a pool."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Protocol

from planner.errors import InvalidInput
from planner.simulate.scheduler import Engine

ROUTER_POLICIES = ("round_robin", "least_outstanding_tokens")


class Router(Protocol):
    def pick(self, engines: Sequence[Engine], rid: int, t: float) -> int:
        """Index of the replica that gets request `rid`, arriving at time t. The engines have
        run every step that starts before t."""
        ...


class RoundRobin:
    def __init__(self) -> None:
        self._next = 0

    def pick(self, engines: Sequence[Engine], rid: int, t: float) -> int:
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

    def pick(self, engines: Sequence[Engine], rid: int, t: float) -> int:
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

    def _build(self, engines: Sequence[Engine]) -> None:
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
    raise InvalidInput(field, f"unknown policy {policy!r}; expected one of {', '.join(ROUTER_POLICIES)}")
