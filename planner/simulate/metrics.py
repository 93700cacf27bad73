"""Metrics of a simulation: exact weighted percentiles, the aggregate ITL store, per-minute
series and the result dataclasses (each with `to_dict()` for JSON).

Percentiles follow `np.percentile` (linear interpolation), as `vllm bench serve` reports them.
ITL samples are kept in aggregate: a point (value, weight) stands for `weight` equal gaps (one
per decoding request of a step), and a fast-forwarded run of k decode-only steps is kept as one
record whose k step times are only computed when a percentile needs them (see `ItlRecorder`).
"""

from __future__ import annotations

import math
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

    Percentiles stay exact without expanding every stretch. A decode step's time does not fall
    as its context grows (true of the roofline and of any calibrated profile), so a stretch's
    values lie in [first, total - (k-1)*first]. Bounding every stretch by its lowest and by its
    highest possible value brackets each order statistic in [L, U]; a stretch entirely below L
    or above U only matters by its count, and only the few straddling [L, U] are expanded.
    """

    def __init__(self, timer: StepTimer) -> None:
        self.timer = timer
        self.point_values: list[float] = []
        self.point_weights: list[int] = []
        self.s_n: list[int] = []
        self.s_ctx: list[int] = []
        self.s_k: list[int] = []
        self.s_first: list[float] = []
        self.s_total: list[float] = []

    def point(self, value: float, weight: int) -> None:
        self.point_values.append(value)
        self.point_weights.append(weight)

    def stretch(self, n: int, ctx: int, k: int, first: float, total: float) -> None:
        self.s_n.append(n)
        self.s_ctx.append(ctx)
        self.s_k.append(k)
        self.s_first.append(first)
        self.s_total.append(total)


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
    pv = np.asarray([v for r in recorders for v in r.point_values], dtype=np.float64)
    pw = np.asarray([w for r in recorders for w in r.point_weights], dtype=np.int64)
    groups = [r for r in recorders if r.s_k]
    sn = [np.asarray(r.s_n, dtype=np.int64) for r in groups]
    sk = [np.asarray(r.s_k, dtype=np.int64) for r in groups]
    sfirst = [np.asarray(r.s_first, dtype=np.float64) for r in groups]
    stot = [np.asarray(r.s_total, dtype=np.float64) for r in groups]
    sw = [n * k for n, k in zip(sn, sk, strict=True)]
    total = int(pw.sum()) + sum(int(w.sum()) for w in sw)
    if total == 0:
        return LatencyStats.empty()
    weighted_sum = float(np.dot(pv, pw.astype(np.float64))) + sum(
        float(np.dot(n.astype(np.float64), t)) for n, t in zip(sn, stot, strict=True)
    )
    mean = weighted_sum / total
    # Upper bound of each stretch's values (padded against rounding of the closed form).
    shi = [
        np.maximum(f, t - (k - 1) * f) * (1.0 + 1e-9) + 1e-15
        for f, t, k in zip(sfirst, stot, sk, strict=True)
    ]
    plan = [_ranks(total, p) for p in PERCENTILES]
    ranks = sorted({r for lo, hi, _ in plan for r in (lo, hi)} | {total - 1})

    if not groups:
        stats = _order_stats(pv, pw, ranks)
        by_rank = dict(zip(ranks, stats, strict=True))
    else:
        lo_all = np.concatenate([pv, *sfirst])
        hi_all = np.concatenate([pv, *shi])
        w_all = np.concatenate([pw, *sw])
        low = _order_stats(lo_all, w_all, ranks)
        high = _order_stats(hi_all, w_all, ranks)
        vals: list[FloatArray] = [pv]
        wts: list[IntArray] = [pw]
        for g, r in enumerate(groups):
            first, hi, n, k = sfirst[g], shi[g], sn[g], sk[g]
            straddle = np.zeros(first.shape, dtype=bool)
            for lo_b, hi_b in zip(low, high, strict=True):
                straddle |= (first <= hi_b) & (hi >= lo_b)
            straddle &= k > 1
            keep = ~straddle
            vals.append(first[keep])
            wts.append((n * k)[keep])
            ctx = np.asarray(r.s_ctx, dtype=np.int64)
            ev, ew = _expand(r.timer, n[straddle], ctx[straddle], k[straddle], first[straddle], low, high)
            vals.append(ev)
            wts.append(ew)
        stats = _order_stats(np.concatenate(vals), np.concatenate(wts), ranks)
        by_rank = dict(zip(ranks, stats, strict=True))
    pct = [_lerp(by_rank[lo], by_rank[hi], g) for lo, hi, g in plan]
    return LatencyStats(total, mean, pct[0], pct[1], pct[2], by_rank[total - 1])


def _expand(
    timer: StepTimer,
    n: IntArray,
    ctx: IntArray,
    k: IntArray,
    first: FloatArray,
    low: Sequence[float],
    high: Sequence[float],
) -> tuple[FloatArray, IntArray]:
    """Step times of the straddling stretches. The last step's exact time is computed first:
    a stretch that turns out flat, or whose exact range misses every bracket, stays one point."""
    values: list[float] = []
    weights: list[int] = []
    for i in range(int(n.shape[0])):
        ni, ci, ki, fi = int(n[i]), int(ctx[i]), int(k[i]), float(first[i])
        last = timer.step_time_s((), ni, ci + (ki - 1) * ni)
        lo_v, hi_v = min(fi, last), max(fi, last)
        hit = any(lo_v <= hb and hi_v >= lb for lb, hb in zip(low, high, strict=True))
        if last == fi or not hit:
            values.append(fi)
            weights.append(ni * ki)
            continue
        values.append(fi)
        weights.append(ni)
        for j in range(1, ki - 1):
            values.append(timer.step_time_s((), ni, ci + j * ni))
            weights.append(ni)
        values.append(last)
        weights.append(ni)
    return np.asarray(values, dtype=np.float64), np.asarray(weights, dtype=np.int64)


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
    for name, arr in (("ttft_s", ttft_s), ("tpot_s", tpot_s), ("e2el_s", e2el_s)):
        limit = getattr(slo, name)
        if limit is not None:
            good &= arr <= limit
    count = int(good.sum())
    return Goodput(
        slo={"ttft_s": slo.ttft_s, "tpot_s": slo.tpot_s, "e2el_s": slo.e2el_s},
        good_requests=count,
        goodput_rps=count / duration_s if duration_s > 0 else math.nan,
        good_fraction=count / ttft_s.size if ttft_s.size else math.nan,
    )
