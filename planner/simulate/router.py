"""Routing arrivals over the replicas of a pool."""

from __future__ import annotations

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
    lowest index."""

    def pick(self, engines: Sequence[Engine], rid: int, t: float) -> int:
        best = 0
        best_v = engines[0].outstanding_tokens
        for i in range(1, len(engines)):
            v = engines[i].outstanding_tokens
            if v < best_v:
                best, best_v = i, v
        return best


def make_router(policy: str | Router, field: str = "router") -> Router:
    if not isinstance(policy, str):
        return policy
    if policy == "round_robin":
        return RoundRobin()
    if policy == "least_outstanding_tokens":
        return LeastOutstandingTokens()
    raise InvalidInput(field, f"unknown policy {policy!r}; expected one of {', '.join(ROUTER_POLICIES)}")
