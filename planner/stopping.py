"""Stopping a computation from outside it: the current job's deadline and stop request, and the
`check()` the long loops call (the plan's candidate search, the simulator's event loop).

A server worker runs each job inside `scope(deadline)`; a stop request (the caller cancelled,
the server drains, the job's CPU time ran out) arrives as a signal whose handler calls
`request_stop(reason)`. `check()` then raises `Stopped` at the next loop iteration, so the job
unwinds and the worker is free for the next one. Outside a scope (the CLI, planner.api used as a
library) there is nothing to stop: `check()` is one context-variable read and returns.

The state lives in a context variable, so jobs answered on the server's own threads (catalog
listings) each see their own scope, and a signal handler (which Python runs in the main thread,
in the context of the code it interrupted) reaches the job the worker's main thread is running.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["REASONS", "StopToken", "Stopped", "check", "request_stop", "scope"]

# Why a job stops: its deadline passed; its caller cancelled it; the server is draining; it ran
# past its CPU-time limit.
REASONS = ("deadline", "cancelled", "shutdown", "cpu")


class Stopped(Exception):
    """The job was told to stop (`reason` one of REASONS). Not a CapplanError: domain code that
    handles its own errors must not take a stop for one of them."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class StopToken:
    """One job's stop state: a wall-clock deadline (time.time() seconds; None: none) and the
    reason a stop was requested (None: not requested)."""

    __slots__ = ("deadline", "reason")

    def __init__(self, deadline: float | None) -> None:
        self.deadline = deadline
        self.reason: str | None = None

    def check(self) -> None:
        if self.reason is not None:
            raise Stopped(self.reason, f"the job was stopped ({self.reason})")
        if self.deadline is not None and time.time() >= self.deadline:
            self.reason = "deadline"
            raise Stopped("deadline", "the call's deadline passed while the job ran")


_current: ContextVar[StopToken | None] = ContextVar("capplan_stop_token", default=None)


def check() -> None:
    """Raise Stopped if the current job's deadline passed or a stop was requested; otherwise (and
    always outside a scope) return. Cheap: a context-variable read, and within a scope a clock
    read; call it once per unit of work that takes about a millisecond or more."""
    token = _current.get()
    if token is not None:
        token.check()


def request_stop(reason: str) -> bool:
    """Ask the current job to stop (a signal handler calls this); False when no job runs."""
    token = _current.get()
    if token is None:
        return False
    if token.reason is None:
        token.reason = reason
    return True


@contextmanager
def scope(deadline: float | None) -> Iterator[StopToken]:
    """Run a job under `deadline` (time.time() seconds, None: none) and a fresh stop request."""
    token = StopToken(deadline)
    reset = _current.set(token)
    try:
        yield token
    finally:
        _current.reset(reset)
