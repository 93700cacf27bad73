"""Per-minute series of a simulation (arrivals, completions, queue areas, tokens), accumulated
step by step and merged across replicas."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from planner.errors import InvalidInput
from planner.simulate.itl_store import FloatArray

MINUTE_S = 60.0


# --- per-minute series -------------------------------------------------------------------------
# Simulated time is capped (first arrival to last event): past it the per-minute series alone
# would outgrow memory, and no capacity question needs more than ~116 days of traffic.
MAX_SIM_SPAN_S = 1e7


def span_error(t_s: float) -> InvalidInput:
    if math.isnan(t_s):
        return InvalidInput("timer", "a step time is not a number; step times must be finite seconds")
    return InvalidInput(
        "requests",
        f"the simulation reaches {t_s:.4g} s after the first arrival, past the {MAX_SIM_SPAN_S:g} s "
        "(~116 days) a simulation may cover: simulate fewer requests, a higher rate, or a "
        "deployment that keeps up",
    )


_COLUMNS = ("arrivals", "completions", "running_area", "waiting_area", "output_tokens", "prefill_tokens")


class MinuteAccumulator:
    """Per-minute sums of one engine, minute 0 starting at `origin_s` (the first arrival).

    Only a window of minutes is held: `bin` returns an index into the lists relative to `base`
    (the first minute still held), and `fold` moves finished minutes into the pool's
    `MinuteTotals`, so memory does not grow with replicas x simulated minutes."""

    def __init__(self, origin_s: float) -> None:
        self.origin_s = origin_s
        self.base = 0
        self._b = 0
        self._lo = 0.0
        self._hi = 0.0  # empty: the first call computes
        self.arrivals: list[int] = []
        self.completions: list[int] = []
        self.running_area: list[float] = []
        self.waiting_area: list[float] = []
        self.output_tokens: list[int] = []
        self.prefill_tokens: list[int] = []

    def _grow(self, b: int) -> None:
        short = b + 1 - len(self.arrivals)
        if short > 0:
            self.arrivals.extend([0] * short)
            self.completions.extend([0] * short)
            self.running_area.extend([0.0] * short)
            self.waiting_area.extend([0.0] * short)
            self.output_tokens.extend([0] * short)
            self.prefill_tokens.extend([0] * short)

    def minute(self, t: float) -> int:
        """Minute m with origin + 60 m <= t < origin + 60 (m + 1) (times before the origin: 0)."""
        o = self.origin_s
        d = t - o
        if not d < MAX_SIM_SPAN_S:  # also NaN and inf
            raise span_error(d)
        b = int(d // MINUTE_S) if d > 0 else 0
        while b > 0 and t < o + b * MINUTE_S:
            b -= 1
        while t >= o + (b + 1) * MINUTE_S:
            b += 1
        return b

    def bin(self, t: float) -> int:
        """The list index of the minute holding t (see `minute`)."""
        if self._lo <= t < self._hi:
            return self._b
        b = self.minute(t)
        i = b - self.base
        if i < 0:
            raise AssertionError(f"minute {b} was folded already (held from {self.base})")
        if i >= len(self.arrivals):
            self._grow(i)
        self._b = i
        self._lo = self.origin_s + b * MINUTE_S if b > 0 else -math.inf
        self._hi = self.origin_s + (b + 1) * MINUTE_S
        return i

    def end_of(self, i: int) -> float:
        """End time of the minute at list index i."""
        return self.origin_s + (self.base + i + 1) * MINUTE_S

    def interval(self, t0: float, t1: float, running: int, waiting: int) -> None:
        """Time-weighted running/waiting counts over [t0, t1)."""
        if t1 <= t0:
            return
        b0 = self.bin(t0)
        b1 = self.bin(t1)
        if b0 == b1:
            d = t1 - t0
            self.running_area[b0] += running * d
            self.waiting_area[b0] += waiting * d
            return
        o, base = self.origin_s, self.base
        for b in range(b0, b1 + 1):
            lo = max(t0, o + (base + b) * MINUTE_S)
            hi = min(t1, o + (base + b + 1) * MINUTE_S)
            if hi > lo:
                self.running_area[b] += running * (hi - lo)
                self.waiting_area[b] += waiting * (hi - lo)

    def fold(self, totals: MinuteTotals, upto_minute: int | None = None, completions: bool = True) -> None:
        """Add the minutes before `upto_minute` (None: all held) into `totals` and drop them.
        Minutes must be final: no step of this engine may touch them any more."""
        held = len(self.arrivals)
        n = held if upto_minute is None else min(held, upto_minute - self.base)
        if n <= 0:
            return
        totals.add(self, n, completions)
        for name in _COLUMNS:
            del getattr(self, name)[:n]
        self.base += n
        self._lo = self._hi = 0.0


class MinuteTotals:
    """A pool's (or a whole simulation's) per-minute sums: engines' minutes folded in as they
    finish. Each minute receives the engines' values in engine order, whenever folded, so the
    sums are the same floating-point numbers as adding the engines' full series in order."""

    def __init__(self, origin_s: float) -> None:
        self.origin_s = origin_s
        self.cols: dict[str, FloatArray] = {name: np.zeros(0) for name in _COLUMNS}
        self.size = 0

    def _ensure(self, size: int) -> None:
        if size > self.size:
            cap = max(size, 2 * self.size)
            for name in _COLUMNS:
                old = self.cols[name]
                if old.shape[0] < cap:
                    col = np.zeros(cap)
                    col[: self.size] = old[: self.size]
                    self.cols[name] = col
            self.size = size

    def add(self, acc: MinuteAccumulator, n: int, completions: bool = True) -> None:
        end = acc.base + n
        self._ensure(end)
        for name in _COLUMNS:
            if name == "completions" and not completions:
                continue
            self.cols[name][acc.base : end] += np.asarray(getattr(acc, name)[:n], dtype=np.float64)

    def count(self, name: str, t: float) -> None:
        """One more event of an integer column (e.g. a completion) at time t, into the totals."""
        m = MinuteAccumulator(self.origin_s).minute(t)
        self._ensure(m + 1)
        self.cols[name][m] += 1.0


@dataclass(frozen=True)
class MinuteSeries:
    """Per-minute series over the whole simulation (all replicas summed). Minute m covers
    [first arrival + 60 m, + 60 (m+1)); the last minute ends at the last completion, and its
    means and rates are over the part it covers."""

    minute_start_s: list[float]
    arrivals: list[int]
    completions: list[int]
    mean_running: list[float]
    mean_waiting: list[float]
    output_tokens_per_s: list[float]
    prefill_tokens_per_s: list[float]

    @staticmethod
    def of(totals: MinuteTotals, end_s: float) -> MinuteSeries:
        origin_s = totals.origin_s
        size = max(totals.size, int((end_s - origin_s) // MINUTE_S) + 1)

        def col(name: str) -> FloatArray:
            out = np.zeros(size, dtype=np.float64)
            out[: totals.size] = totals.cols[name][: totals.size]
            return out

        starts = origin_s + MINUTE_S * np.arange(size, dtype=np.float64)
        covered = np.clip(end_s - starts, 0.0, MINUTE_S)
        covered[covered <= 0.0] = MINUTE_S  # an empty tail minute (cannot happen; be safe)
        return MinuteSeries(
            minute_start_s=[float(x) for x in starts],
            arrivals=[int(x) for x in col("arrivals")],
            completions=[int(x) for x in col("completions")],
            mean_running=[float(x) for x in col("running_area") / covered],
            mean_waiting=[float(x) for x in col("waiting_area") / covered],
            output_tokens_per_s=[float(x) for x in col("output_tokens") / covered],
            prefill_tokens_per_s=[float(x) for x in col("prefill_tokens") / covered],
        )

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) for k, v in self.__dict__.items()}
