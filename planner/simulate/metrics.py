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
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from planner.costmodel.timer import StepTimer

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
        by_rank = _StretchSelect(pv, pw, groups).order_stats(ranks)
    pct = [_lerp(by_rank[lo], by_rank[hi], g) for lo, hi, g in plan]
    return LatencyStats(total, mean, pct[0], pct[1], pct[2], by_rank[total - 1])


class _StretchSelect:
    """Exact order statistics of points and stretches, evaluating few step times.

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
    """

    _SPLIT = 4
    _EXPAND = 8  # pieces this short are expanded step by step

    def __init__(self, pv: FloatArray, pw: IntArray, groups: Sequence[ItlRecorder]) -> None:
        self.timers = [g.timer for g in groups]
        gid = np.concatenate([np.full(len(g.s_k), i, dtype=np.int64) for i, g in enumerate(groups)])
        n = np.concatenate([_i64(g.s_n) for g in groups])
        ctx = np.concatenate([_i64(g.s_ctx) for g in groups])
        k = np.concatenate([_i64(g.s_k) for g in groups])
        first = np.concatenate([_f64(g.s_first) for g in groups])
        tot = np.concatenate([_f64(g.s_total) for g in groups])
        # Upper bound of each stretch's values (padded against rounding of the closed form).
        hi = np.maximum(first, tot - (k - 1) * first) * (1.0 + 1e-9) + 1e-15
        hi = np.where(k > 1, hi, first)
        keep = pw > 0
        m = int(keep.sum())
        # Pieces: lower/upper bound, weight of each element, first/end step, stretch (-1: a point).
        self.lo = np.concatenate([pv[keep], first])
        self.hi = np.concatenate([pv[keep], hi])
        self.w = np.concatenate([pw[keep], n])
        self.a = np.zeros(m + k.size, dtype=np.int64)
        self.b = np.concatenate([np.ones(m, dtype=np.int64), k])
        self.sid = np.concatenate([np.full(m, -1, dtype=np.int64), np.arange(k.size, dtype=np.int64)])
        self.s_gid, self.s_n, self.s_ctx = gid, n, ctx
        self._memo: dict[tuple[int, int, int], float] = {}

    def _f(self, s: int, j: int) -> float:
        g, n = int(self.s_gid[s]), int(self.s_n[s])
        key = (g, n, int(self.s_ctx[s]) + j * n)
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
            inside = np.zeros(self.lo.shape, dtype=bool)
            for lb, hb in zip(low, high, strict=True):
                inside |= (self.lo <= hb) & (self.hi >= lb)
            open_ = inside & (size > 1) & (self.lo < self.hi)
            if not open_.any():
                return dict(zip(ranks, _order_stats(self.lo, weight, ranks), strict=True))
            # Outside every bracket: a point (at its lower bound) of its whole weight.
            out = ~inside
            self.w = np.where(out, weight, self.w)
            self.b = np.where(out, self.a + 1, self.b)
            self.hi = np.where(out, self.lo, self.hi)
            self.sid = np.where(out, -1, self.sid)
            self._split(np.flatnonzero(open_))

    def _split(self, idx: IntArray) -> None:
        los: list[float] = []
        his: list[float] = []
        ws: list[int] = []
        as_: list[int] = []
        bs: list[int] = []
        sids: list[int] = []
        for i in idx.tolist():
            s, a, b, w = int(self.sid[i]), int(self.a[i]), int(self.b[i]), int(self.w[i])
            if b - a <= self._EXPAND:
                cuts = list(range(a, b + 1))
            else:
                step = (b - a) / self._SPLIT
                cuts = [a + int(step * q) for q in range(self._SPLIT)] + [b]
            vals = [float(self.lo[i])] + [self._f(s, c) for c in cuts[1:-1]]
            last_hi = self._f(s, b - 1)
            for q in range(len(cuts) - 1):
                c0, c1 = cuts[q], cuts[q + 1]
                lo_v = vals[q]
                hi_v = lo_v if c1 - c0 == 1 else (vals[q + 1] if q + 1 < len(vals) else last_hi)
                los.append(lo_v)
                his.append(hi_v)
                ws.append(w)
                as_.append(c0)
                bs.append(c1)
                sids.append(s)
        drop = np.ones(self.lo.shape, dtype=bool)
        drop[idx] = False
        self.lo = np.concatenate([self.lo[drop], np.asarray(los, dtype=np.float64)])
        self.hi = np.concatenate([self.hi[drop], np.asarray(his, dtype=np.float64)])
        self.w = np.concatenate([self.w[drop], np.asarray(ws, dtype=np.int64)])
        self.a = np.concatenate([self.a[drop], np.asarray(as_, dtype=np.int64)])
        self.b = np.concatenate([self.b[drop], np.asarray(bs, dtype=np.int64)])
        self.sid = np.concatenate([self.sid[drop], np.asarray(sids, dtype=np.int64)])


# --- per-minute series -------------------------------------------------------------------------
class MinuteAccumulator:
    """Per-minute sums of one engine, minute 0 starting at `origin_s` (the first arrival)."""

    def __init__(self, origin_s: float) -> None:
        self.origin_s = origin_s
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

    def bin(self, t: float) -> int:
        """Minute b with origin + 60 b <= t < origin + 60 (b + 1) (times before the origin: 0)."""
        if self._lo <= t < self._hi:
            return self._b
        o = self.origin_s
        b = int((t - o) // MINUTE_S)
        while b > 0 and t < o + b * MINUTE_S:
            b -= 1
        while t >= o + (b + 1) * MINUTE_S:
            b += 1
        b = max(b, 0)
        if b >= len(self.arrivals):
            self._grow(b)
        self._b = b
        self._lo = o + b * MINUTE_S if b > 0 else -math.inf
        self._hi = o + (b + 1) * MINUTE_S
        return b

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
        for b in range(b0, b1 + 1):
            lo = max(t0, self.origin_s + b * MINUTE_S)
            hi = min(t1, self.origin_s + (b + 1) * MINUTE_S)
            if hi > lo:
                self.running_area[b] += running * (hi - lo)
                self.waiting_area[b] += waiting * (hi - lo)


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
    def merge(parts: Sequence[MinuteAccumulator], origin_s: float, end_s: float) -> MinuteSeries:
        size = max([len(p.arrivals) for p in parts] + [int((end_s - origin_s) // MINUTE_S) + 1])

        def col(name: str) -> FloatArray:
            out = np.zeros(size, dtype=np.float64)
            for p in parts:
                arr = np.asarray(getattr(p, name), dtype=np.float64)
                out[: arr.shape[0]] += arr
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
