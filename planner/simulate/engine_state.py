"""What the engines of one simulated pool share: the table of requests in flight, the budget of
engine events that bounds a simulation's time and memory, and the trace record of a step."""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass

from planner import stopping
from planner.errors import InvalidInput

# Engine events (steps, or fast-forwarded runs of decode steps) one simulation may take, over
# all its engines: with the request and span caps, what bounds its time and memory (an event
# costs a few microseconds and at most ~40 bytes of ITL records).
MAX_SIM_EVENTS = 50_000_000
# Events between two planner.stopping.check() calls: at a few microseconds an event, a check
# every few milliseconds (a stopped server job frees its worker that fast), costing nothing
# measurable.
STOP_CHECK_EVENTS = 1024

@dataclass(frozen=True)
class StepTrace:
    """One step of one replica (or a fast-forwarded run of `steps` identical decode steps):
    `scheduled` lists (request index, tokens) per step in scheduling order (running requests
    by admission, then the newly admitted); `preempted` the requests preempted, in order."""

    replica: int
    start_s: float
    duration_s: float
    steps: int
    scheduled: tuple[tuple[int, int], ...]
    preempted: tuple[int, ...]


class EventBudget:
    """Engine events (a step, or a fast-forwarded run of decode steps) a simulation may still
    take, shared by its engines: the bound on its time and on its ITL records' memory.

    The event loop compares `left` with `next_check` (one comparison per event, as a plain
    `left < 0` would cost); every STOP_CHECK_EVENTS events `tick()` runs planner.stopping.check()
    so a server job past its deadline or cancelled stops within milliseconds."""

    __slots__ = ("left", "limit", "next_check")

    def __init__(self, limit: int | None = None) -> None:
        self.limit = MAX_SIM_EVENTS if limit is None else limit
        self.left = self.limit
        self.next_check = max(0, self.left - STOP_CHECK_EVENTS)

    def tick(self) -> None:
        """`left` fell below `next_check`: out of events (InvalidInput), or time to check for a
        stop request (planner.stopping.Stopped)."""
        if self.left < 0:
            raise self.exhausted()
        stopping.check()
        self.next_check = max(0, self.left - STOP_CHECK_EVENTS)

    def exhausted(self) -> InvalidInput:
        return InvalidInput(
            "requests",
            f"the simulation needs more than {self.limit:,} engine steps (runs of identical decode "
            "steps count once); simulate fewer requests",
        )


class RequestTable:
    """Per-request state shared by the engines of one pool.

    The state of a request in flight lives in dicts keyed by its index, from `add` (its
    arrival at the pool) to `release` (its last token), so memory follows the requests in
    flight, not the requests simulated. `first_token` and `finish` times are kept for every
    request, in typed arrays (8 bytes each) indexed by request.

    `target` is the number of output tokens a request produces in this pool (1 in a prefill
    pool). `comp`/`out` are explicit only while a request is not in a decode set."""

    def __init__(self, n: int = 0) -> None:
        self.prompt: dict[int, int] = {}
        self.target: dict[int, int] = {}
        self.comp: dict[int, int] = {}
        self.out: dict[int, int] = {}
        self.last_emit: dict[int, float] = {}
        self.seq: dict[int, int] = {}
        self.vb: dict[int, int] = {}
        self.vo: dict[int, int] = {}
        self.first_token = array("d", [math.nan]) * n
        self.finish = array("d", [math.nan]) * n

    def grow(self, n: int) -> None:
        """Make room for the times of requests 0 .. n-1."""
        short = n - len(self.finish)
        if short > 0:
            self.first_token.extend(array("d", [math.nan]) * short)
            self.finish.extend(array("d", [math.nan]) * short)

    def add(
        self, rid: int, prompt: int, target: int, comp: int = 0, out: int = 0, last_emit: float = 0.0
    ) -> None:
        self.prompt[rid] = prompt
        self.target[rid] = target
        self.comp[rid] = comp
        self.out[rid] = out
        self.last_emit[rid] = last_emit
        self.seq[rid] = 0
        self.vb[rid] = 0
        self.vo[rid] = 0

    def release(self, rid: int) -> None:
        del self.prompt[rid], self.target[rid], self.comp[rid], self.out[rid]
        del self.last_emit[rid], self.seq[rid], self.vb[rid], self.vo[rid]

    @property
    def in_flight(self) -> int:
        return len(self.prompt)
