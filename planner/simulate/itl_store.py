"""Exact weighted percentiles and the aggregate ITL store of a simulation.

Percentiles follow `np.percentile` (linear interpolation), as `vllm bench serve` reports them.
ITL samples are kept in aggregate: a point (value, weight) stands for `weight` equal gaps (one
per decoding request of a step), and a fast-forwarded run of k decode-only steps is kept as one
record whose k step times are only computed when a percentile needs them (see `ItlRecorder`).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from planner.costmodel.timer import StepTimer

PERCENTILES = (50.0, 90.0, 99.0)

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
        return {k: json_float(v) for k, v in self.__dict__.items()}


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


def json_float(v: float | int) -> float | int | None:
    """A figure for JSON, which has no inf or nan: a non-finite float as null."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v
