"""Metrics of a simulation: exact weighted percentiles, the aggregate ITL store, per-minute
series and the result dataclasses (each with `to_dict()` for JSON).

Percentiles follow `np.percentile` (linear interpolation), as `vllm bench serve` reports them.
ITL samples are kept in aggregate: a point (value, weight) stands for `weight` equal gaps (one
per decoding request of a step), and a fast-forwarded run of k decode-only steps is kept as one
record whose k step times are only computed when a percentile needs them (see `ItlRecorder`).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from planner.costmodel.timer import StepTimer
from planner.errors import InvalidInput

PERCENTILES = (50.0, 90.0, 99.0)
MINUTE_S = 60.0

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


# --- weighted order statistics ----------------------------------------------------------------
def _lerp(a: float, b: float, g: float) -> float:
    """numpy's interpolation (numpy/lib/_function_base_impl.py `_lerp`), for identical results."""
    diff = b - a
    if g >= 0.5:
        return float(b - diff * (1.0 - g))
    return float(a + diff * g)


def _ranks(total: int, p: float) -> tuple[int, int, float]:
    """0-based order statistics (lower, upper) and weight that np.percentile's linear method
    interpolates between, for `total` samples."""
    virtual = (total - 1) * (p / 100.0)
    lower = math.floor(virtual)
    g = virtual - lower
    upper = min(lower + 1, total - 1)
    return int(lower), int(upper), float(g)


def _order_stats(values: FloatArray, weights: IntArray, ranks: Sequence[int]) -> list[float]:
    order = np.argsort(values, kind="stable")
    v = values[order]
    cum = np.cumsum(weights[order])
    idx = np.searchsorted(cum, np.asarray(ranks, dtype=np.int64), side="right")
    return [float(v[i]) for i in idx]


def weighted_percentiles(
    values: npt.ArrayLike, weights: npt.ArrayLike, percentiles: Sequence[float] = PERCENTILES
) -> list[float]:
    """np.percentile(np.repeat(values, weights), p) without repeating; weights are counts."""
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    w = np.asarray(weights, dtype=np.int64).reshape(-1)
    keep = w > 0
    v, w = v[keep], w[keep]
    total = int(w.sum())
    if total == 0:
        return [math.nan for _ in percentiles]
    plan = [_ranks(total, p) for p in percentiles]
    stats = _order_stats(v, w, [r for lo, hi, _ in plan for r in (lo, hi)])
    return [_lerp(stats[2 * i], stats[2 * i + 1], g) for i, (_, _, g) in enumerate(plan)]


# --- ITL store -------------------------------------------------------------------------------
class ItlRecorder:
    """Inter-token gaps of one engine, in aggregate.

    `point(value, weight)`: `weight` gaps equal to `value`.
    `stretch(n, ctx, k, first, total)`: k decode-only steps of the same n sequences, the first
    at context sum `ctx` (each later one n tokens more), each step giving n gaps equal to its
    time; `first` is the first step's time and `total` the run's time (decode_run_time_s).
    Step j's time is `timer.step_time_s((), n, ctx + j*n)`, the value a step-by-step run records.

    Records are kept in typed arrays (16 bytes a point, 40 a stretch), not Python objects, so a
    long simulation's memory is its records' bytes. Percentiles stay exact without expanding
    every stretch (`itl_stats`).
    """

    def __init__(self, timer: StepTimer) -> None:
        self.timer = timer
        self.point_values = array("d")
        self.point_weights = array("q")
        self.s_n = array("q")
        self.s_ctx = array("q")
        self.s_k = array("q")
        self.s_first = array("d")
        self.s_total = array("d")

    def point(self, value: float, weight: int) -> None:
        self.point_values.append(value)
        self.point_weights.append(weight)

    def stretch(self, n: int, ctx: int, k: int, first: float, total: float) -> None:
        self.s_n.append(n)
        self.s_ctx.append(ctx)
        self.s_k.append(k)
        self.s_first.append(first)
        self.s_total.append(total)


def _f64(a: array[float]) -> FloatArray:
    return np.frombuffer(a, dtype=np.float64) if len(a) else np.empty(0, dtype=np.float64)


def _i64(a: array[int]) -> IntArray:
    return np.frombuffer(a, dtype=np.int64) if len(a) else np.empty(0, dtype=np.int64)


@dataclass(frozen=True)
class LatencyStats:
    count: int
    mean_s: float
    p50_s: float
    p90_s: float
    p99_s: float
    max_s: float

    @staticmethod
    def empty() -> LatencyStats:
        nan = math.nan
        return LatencyStats(0, nan, nan, nan, nan, nan)

    @staticmethod
    def of(samples: FloatArray) -> LatencyStats:
        x = np.asarray(samples, dtype=np.float64)
        if x.size == 0:
            return LatencyStats.empty()
        p = np.percentile(x, PERCENTILES)
        return LatencyStats(
            int(x.size), float(x.mean()), float(p[0]), float(p[1]), float(p[2]), float(x.max())
        )

    def to_dict(self) -> dict[str, Any]:
        return {k: _json_float(v) for k, v in self.__dict__.items()}


def itl_stats(recorders: Sequence[ItlRecorder]) -> LatencyStats:
    """Exact ITL statistics over the recorders (count, mean, p50/p90/p99, max)."""
    pv = np.concatenate([_f64(r.point_values) for r in recorders]) if recorders else np.empty(0)
    pw = (
        np.concatenate([_i64(r.point_weights) for r in recorders])
        if recorders
        else np.empty(0, dtype=np.int64)
    )
    groups = [r for r in recorders if len(r.s_k)]
    sn = [_i64(r.s_n) for r in groups]
    sk = [_i64(r.s_k) for r in groups]
    stot = [_f64(r.s_total) for r in groups]
    sw = [n * k for n, k in zip(sn, sk, strict=True)]
    total = int(pw.sum()) + sum(int(w.sum()) for w in sw)
    if total == 0:
        return LatencyStats.empty()
    weighted_sum = float(np.dot(pv, pw.astype(np.float64))) + sum(
        float(np.dot(n.astype(np.float64), t)) for n, t in zip(sn, stot, strict=True)
    )
    mean = weighted_sum / total
    plan = [_ranks(total, p) for p in PERCENTILES]
    ranks = sorted({r for lo, hi, _ in plan for r in (lo, hi)} | {total - 1})
    if not groups:
        by_rank = dict(zip(ranks, _order_stats(pv, pw, ranks), strict=True))
    else:
        by_rank = _StretchSelect(pv, pw, groups, ranks).order_stats(ranks)
    pct = [_lerp(by_rank[lo], by_rank[hi], g) for lo, hi, g in plan]
    return LatencyStats(total, mean, pct[0], pct[1], pct[2], by_rank[total - 1])


class _StretchSelect:
    """Exact order statistics of points and stretches, evaluating few step times, in memory that
    does not grow with the number of records.

    A stretch's step times never fall as its context grows (true of the roofline and of any
    calibrated profile), so a run of its steps [a, b) lies in [f(a), f(b - 1)]. Every stretch
    starts as one such piece, bounded by its first step and an upper bound from its total.
    Bounding every piece by its lowest and highest value brackets each wanted order statistic
    in [L, U]. A piece entirely outside every bracket only matters by its count: it becomes one
    point (its values may move anywhere on the same side of every bracket without changing the
    statistics). Pieces straddling a bracket are cut in `_SPLIT` parts (`_SPLIT - 1` step times
    each), which narrows the brackets, until no piece straddles: then the order statistics of
    the pieces' lower bounds are exact. Step times are computed O(stretches near a statistic x
    log steps), never a stretch's every step.

    The first brackets come from histograms of the bounds (`_BINS` geometric bins), built over
    the records a chunk at a time; only pieces inside them are kept (the others are summed per
    gap between brackets), so memory follows the pieces near the statistics.
    """

    _SPLIT = 4
    _EXPAND = 8  # pieces this short are expanded step by step
    _BINS = 8192
    _CHUNK = 1 << 18

    def __init__(
        self, pv: FloatArray, pw: IntArray, groups: Sequence[ItlRecorder], ranks: Sequence[int]
    ) -> None:
        self.timers = [g.timer for g in groups]
        self._memo: dict[tuple[int, int, int], float] = {}
        # Sources of pieces: (lower bounds, upper bounds, weight per element, steps, group, ctx).

        def sources() -> Iterator[tuple[FloatArray, FloatArray, IntArray, IntArray, IntArray, IntArray]]:
            return self._sources(pv, pw, groups)

        vmin = min(float(lo.min()) for lo, *_ in sources())
        vmax = max(float(hi.max()) for _, hi, *_ in sources())
        if vmin > 0.0 and vmax > vmin:
            edges = np.geomspace(vmin, vmax, self._BINS + 1)
        else:
            edges = np.linspace(vmin, max(vmax, vmin + 1.0), self._BINS + 1)
        edges[0], edges[-1] = vmin, max(vmax, edges[-1])
        h_lo = np.zeros(self._BINS)
        h_hi = np.zeros(self._BINS)
        for lo, hi, w, k, _, _ in sources():
            weight = (w * k).astype(np.float64)
            h_lo += np.bincount(self._bin(edges, lo), weights=weight, minlength=self._BINS)
            h_hi += np.bincount(self._bin(edges, hi), weights=weight, minlength=self._BINS)
        r = np.asarray(ranks, dtype=np.float64)
        j_lo = np.searchsorted(np.cumsum(h_lo), r, side="right")
        j_hi = np.searchsorted(np.cumsum(h_hi), r, side="right")
        brackets = sorted(
            (float(edges[min(a, self._BINS - 1)]), float(edges[min(b, self._BINS - 1) + 1]))
            for a, b in zip(j_lo.tolist(), j_hi.tolist(), strict=True)
        )
        merged = _merge_intervals(brackets)
        # Keep the pieces inside the brackets; sum the rest per gap (at a value of the gap).
        keep: list[tuple[FloatArray, FloatArray, IntArray, IntArray, IntArray, IntArray]] = []
        gap_vs: list[FloatArray] = []
        gap_ws: list[IntArray] = []
        for lo, hi, w, k, gid, ctx in sources():
            inside = np.zeros(lo.shape, dtype=bool)
            for a, b in merged:
                inside |= (lo <= b) & (hi >= a)
            keep.append((lo[inside], hi[inside], w[inside], k[inside], gid[inside], ctx[inside]))
            if not inside.all():
                v, gw = _gap_points(lo[~inside], (w * k)[~inside], merged)
                gap_vs.append(v)
                gap_ws.append(gw)
        gap_v, gap_w = (
            _gap_points(np.concatenate(gap_vs), np.concatenate(gap_ws), merged)
            if gap_vs
            else (np.empty(0), np.empty(0, dtype=np.int64))
        )
        gaps = gap_v.size
        self.lo = np.concatenate([*(x[0] for x in keep), gap_v])
        self.hi = np.concatenate([*(x[1] for x in keep), gap_v])
        self.w = np.concatenate([*(x[2] for x in keep), gap_w])
        self.b = np.concatenate([*(x[3] for x in keep), np.ones(gaps, dtype=np.int64)])
        self.a = np.zeros(self.b.shape, dtype=np.int64)
        self.gid = np.concatenate([*(x[4] for x in keep), np.full(gaps, -1, dtype=np.int64)])
        self.ctx = np.concatenate([*(x[5] for x in keep), np.zeros(gaps, dtype=np.int64)])
        # Upper bounds still the crude one from a stretch's total (not a computed step time).
        self.crude = (self.gid >= 0) & (self.b > 1)

    @staticmethod
    def _bin(edges: FloatArray, v: FloatArray) -> npt.NDArray[np.intp]:
        return np.clip(np.searchsorted(edges, v, side="right") - 1, 0, edges.size - 2)

    def _sources(
        self, pv: FloatArray, pw: IntArray, groups: Sequence[ItlRecorder]
    ) -> Iterator[tuple[FloatArray, FloatArray, IntArray, IntArray, IntArray, IntArray]]:
        c = self._CHUNK
        keep = pw > 0
        v, w = pv[keep], pw[keep]
        for i in range(0, v.size, c):
            m = v[i : i + c].size
            one = np.ones(m, dtype=np.int64)
            yield v[i : i + c], v[i : i + c], w[i : i + c], one, np.full(m, -1, dtype=np.int64), 0 * one
        for g, rec in enumerate(groups):
            n_all, ctx_all, k_all = _i64(rec.s_n), _i64(rec.s_ctx), _i64(rec.s_k)
            first_all, tot_all = _f64(rec.s_first), _f64(rec.s_total)
            for i in range(0, n_all.size, c):
                n, k, first = n_all[i : i + c], k_all[i : i + c], first_all[i : i + c]
                # Upper bound of each stretch's values (padded against rounding of the closed form).
                hi = np.maximum(first, tot_all[i : i + c] - (k - 1) * first) * (1.0 + 1e-9) + 1e-15
                hi = np.where(k > 1, hi, first)
                yield first, hi, n, k, np.full(n.size, g, dtype=np.int64), ctx_all[i : i + c]

    def _f(self, s: int, j: int) -> float:
        """Step time of step j of the stretch that piece s belongs to."""
        g, n = int(self.gid[s]), int(self.w[s])
        key = (g, n, int(self.ctx[s]) + j * n)
        v = self._memo.get(key)
        if v is None:
            v = self.timers[g].step_time_s((), n, key[2])
            self._memo[key] = v
        return v

    def order_stats(self, ranks: Sequence[int]) -> dict[int, float]:
        while True:
            size = self.b - self.a
            weight = self.w * size
            low = _order_stats(self.lo, weight, ranks)
            high = _order_stats(self.hi, weight, ranks)
            merged = _merge_intervals(list(zip(low, high, strict=True)))
            inside = np.zeros(self.lo.shape, dtype=bool)
            for a, b in merged:
                inside |= (self.lo <= b) & (self.hi >= a)
            open_ = inside & (size > 1) & (self.lo < self.hi)
            if not open_.any():
                return dict(zip(ranks, _order_stats(self.lo, weight, ranks), strict=True))
            # Outside every bracket: summed into one point per gap between brackets.
            gap_v, gap_w = _gap_points(self.lo[~inside], weight[~inside], merged)
            n_gaps = gap_v.size
            self.lo = np.concatenate([self.lo[inside], gap_v])
            self.hi = np.concatenate([self.hi[inside], gap_v])
            self.w = np.concatenate([self.w[inside], gap_w])
            self.a = np.concatenate([self.a[inside], np.zeros(n_gaps, dtype=np.int64)])
            self.b = np.concatenate([self.b[inside], np.ones(n_gaps, dtype=np.int64)])
            self.gid = np.concatenate([self.gid[inside], np.full(n_gaps, -1, dtype=np.int64)])
            self.ctx = np.concatenate([self.ctx[inside], np.zeros(n_gaps, dtype=np.int64)])
            self.crude = np.concatenate([self.crude[inside], np.zeros(n_gaps, dtype=bool)])
            open_ = np.concatenate([open_[inside], np.zeros(n_gaps, dtype=bool)])
            crude = open_ & self.crude
            if crude.any():
                # A stretch's first upper bound comes from its total; its last step is exact.
                for i in np.flatnonzero(crude).tolist():
                    self.hi[i] = self._f(i, int(self.b[i]) - 1)
                self.crude[crude] = False
                continue
            self._split(np.flatnonzero(open_))

    def _split(self, idx: IntArray) -> None:
        los: list[float] = []
        his: list[float] = []
        as_: list[int] = []
        bs: list[int] = []
        parent: list[int] = []
        for i in idx.tolist():
            a, b = int(self.a[i]), int(self.b[i])
            if b - a <= self._EXPAND:
                cuts = list(range(a, b + 1))
            else:
                step = (b - a) / self._SPLIT
                cuts = [a + int(step * q) for q in range(self._SPLIT)] + [b]
            vals = [float(self.lo[i])] + [self._f(i, c) for c in cuts[1:-1]]
            last_hi = self._f(i, b - 1)
            for q in range(len(cuts) - 1):
                c0, c1 = cuts[q], cuts[q + 1]
                lo_v = vals[q]
                hi_v = lo_v if c1 - c0 == 1 else (vals[q + 1] if q + 1 < len(vals) else last_hi)
                los.append(lo_v)
                his.append(hi_v)
                as_.append(c0)
                bs.append(c1)
                parent.append(i)
        src = np.asarray(parent, dtype=np.int64)
        drop = np.ones(self.lo.shape, dtype=bool)
        drop[idx] = False
        self.lo = np.concatenate([self.lo[drop], np.asarray(los, dtype=np.float64)])
        self.hi = np.concatenate([self.hi[drop], np.asarray(his, dtype=np.float64)])
        self.a = np.concatenate([self.a[drop], np.asarray(as_, dtype=np.int64)])
        self.b = np.concatenate([self.b[drop], np.asarray(bs, dtype=np.int64)])
        self.w = np.concatenate([self.w[drop], self.w[src]])
        self.gid = np.concatenate([self.gid[drop], self.gid[src]])
        self.ctx = np.concatenate([self.ctx[drop], self.ctx[src]])
        self.crude = np.concatenate([self.crude[drop], np.zeros(src.size, dtype=bool)])


def _merge_intervals(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Overlapping [a, b] intervals joined; sorted."""
    out: list[tuple[float, float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _gap_points(
    lo: FloatArray, weight: IntArray, merged: list[tuple[float, float]]
) -> tuple[FloatArray, IntArray]:
    """Pieces lying between brackets as one point per gap: the gap's total weight at the lowest
    value in it (a value of that gap, so every bracketed statistic keeps its rank)."""
    starts = np.asarray([a for a, _ in merged])
    gap = np.searchsorted(starts, lo, side="right")
    w = np.bincount(gap, weights=weight.astype(np.float64), minlength=starts.size + 1)
    v = np.full(starts.size + 1, np.inf)
    np.minimum.at(v, gap, lo)
    keep = w > 0
    return v[keep], np.rint(w[keep]).astype(np.int64)


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


# --- results -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ReplicaStats:
    """One replica. KV use is measured after each step's scheduling, like
    `vllm:kv_cache_usage_perc`; the queue length counts waiting requests (incl. preempted)."""

    role: str  # "colocated" | "prefill" | "decode"
    index: int
    requests: int
    steps: int
    busy_fraction: float
    preemptions: int
    peak_kv_blocks: int
    peak_kv_fraction: float
    max_queue_length: int

    def to_dict(self) -> dict[str, Any]:
        return {k: _json_float(v) if isinstance(v, float) else v for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class Goodput:
    slo: dict[str, float | None]
    good_requests: int
    goodput_rps: float
    good_fraction: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "slo": dict(self.slo),
            "good_requests": self.good_requests,
            "goodput_rps": _json_float(self.goodput_rps),
            "good_fraction": _json_float(self.good_fraction),
        }


@dataclass(frozen=True)
class SimResult:
    """What one simulation measured. Per-request arrays (aligned with the input order) are kept
    as numpy arrays; `to_dict(include_requests=True)` adds them as lists."""

    mode: str  # "colocated" | "disaggregated"
    budget_reading: str  # "v1": max_num_batched_tokens covers decodes and prefill chunks
    requests: int
    completed: int
    duration_s: float
    request_throughput_rps: float
    output_tokens_per_s: float
    ttft: LatencyStats
    itl: LatencyStats
    tpot: LatencyStats
    e2el: LatencyStats
    goodput: Goodput | None
    preemptions: int
    peak_kv_blocks: int
    peak_kv_fraction: float
    max_queue_length: int
    replicas: list[ReplicaStats]
    series: MinuteSeries
    ttft_s: FloatArray = field(repr=False)
    e2el_s: FloatArray = field(repr=False)
    tpot_s: FloatArray = field(repr=False)
    first_token_s: FloatArray = field(repr=False)
    finish_s: FloatArray = field(repr=False)

    def to_dict(self, include_requests: bool = False) -> dict[str, Any]:
        d: dict[str, Any] = {
            "mode": self.mode,
            "budget_reading": self.budget_reading,
            "requests": self.requests,
            "completed": self.completed,
            "duration_s": _json_float(self.duration_s),
            "request_throughput_rps": _json_float(self.request_throughput_rps),
            "output_tokens_per_s": _json_float(self.output_tokens_per_s),
            "ttft": self.ttft.to_dict(),
            "itl": self.itl.to_dict(),
            "tpot": self.tpot.to_dict(),
            "e2el": self.e2el.to_dict(),
            "goodput": None if self.goodput is None else self.goodput.to_dict(),
            "preemptions": self.preemptions,
            "peak_kv_blocks": self.peak_kv_blocks,
            "peak_kv_fraction": _json_float(self.peak_kv_fraction),
            "max_queue_length": self.max_queue_length,
            "replicas": [r.to_dict() for r in self.replicas],
            "series": self.series.to_dict(),
        }
        if include_requests:
            d["per_request"] = {
                "ttft_s": [_json_float(float(x)) for x in self.ttft_s],
                "e2el_s": [_json_float(float(x)) for x in self.e2el_s],
                "tpot_s": [_json_float(float(x)) for x in self.tpot_s],
                "first_token_s": [_json_float(float(x)) for x in self.first_token_s],
                "finish_s": [_json_float(float(x)) for x in self.finish_s],
            }
        return d


def _json_float(v: float | int) -> float | int | None:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def goodput(
    ttft_s: FloatArray, tpot_s: FloatArray, e2el_s: FloatArray, slo: Any, duration_s: float
) -> Goodput:
    """Requests meeting every given objective (as `vllm bench serve --goodput`)."""
    good = np.ones(ttft_s.shape, dtype=bool)
    limits = slo.goodput_limits_s()  # planner.slo.Slo: per-request thresholds, vLLM's names
    for name, arr in (("ttft_s", ttft_s), ("tpot_s", tpot_s), ("e2el_s", e2el_s)):
        limit = limits[name]
        if limit is not None:
            good &= arr <= limit
    count = int(good.sum())
    return Goodput(
        slo=limits,
        good_requests=count,
        goodput_rps=count / duration_s if duration_s > 0 else math.nan,
        good_fraction=count / ttft_s.size if ttft_s.size else math.nan,
    )
