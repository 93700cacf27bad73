"""Per-bucket sums of a request log (one arrival per row): count, mean lengths, a 1-2-5
length histogram and the gap CV², kept per bucket so memory grows with buckets, not rows.

A request log observes all of its span: a bucket between the first and the last arrival with
no request is 0, not None. Rows may come in any order (counts and lengths do not care); a
bucket whose arrivals come out of order gets no gap CV² (its gaps are unknown without sorting
it), and one with fewer than 3 arrivals none either (series.HistorySeries).

Histograms: cumulative counts at vLLM's 1-2-5 bucket bounds (1, 2, 5, 10, ..., the bounds its
`vllm:request_prompt_tokens` histogram uses, vllm/v1/metrics/loggers.py build_1_2_5_buckets),
up to the first bound at or above the bucket's longest request: the same shape the Prometheus
reader gets, so both read alike downstream.
"""

from __future__ import annotations

import bisect
import math

from planner.history.origin import Source
from planner.history.series import (
    MAX_HISTORY_BUCKETS,
    BucketLengths,
    HistorySeries,
    LengthHistogram,
)
from planner.workload import MAX_TOKENS

BOUNDS_125: tuple[float, ...] = tuple(
    float(m * 10**e) for e in range(8) for m in (1, 2, 5) if m * 10**e <= MAX_TOKENS
)


class _Bucket:
    """One bucket's running sums."""

    __slots__ = (
        "count",
        "gap_n",
        "gap_ok",
        "gap_sum",
        "gap_sumsq",
        "last_s",
        "out_hist",
        "out_sum",
        "prompt_hist",
        "prompt_sum",
    )

    def __init__(self) -> None:
        self.count = 0
        self.prompt_sum = 0.0
        self.out_sum = 0.0
        self.prompt_hist = [0] * len(BOUNDS_125)
        self.out_hist = [0] * len(BOUNDS_125)
        self.last_s = -math.inf
        self.gap_n = 0
        self.gap_sum = 0.0
        self.gap_sumsq = 0.0
        self.gap_ok = True

    def add(self, t_s: float, prompt: int, output: int) -> None:
        self.count += 1
        self.prompt_sum += prompt
        self.out_sum += output
        self.prompt_hist[bisect.bisect_left(BOUNDS_125, prompt)] += 1
        self.out_hist[bisect.bisect_left(BOUNDS_125, output)] += 1
        if t_s < self.last_s:
            self.gap_ok = False
        elif self.count > 1:
            gap = t_s - self.last_s
            self.gap_n += 1
            self.gap_sum += gap
            self.gap_sumsq += gap * gap
        self.last_s = max(self.last_s, t_s)

    def gap_cv2(self) -> float | None:
        if not self.gap_ok or self.gap_n < 2 or self.gap_sum <= 0.0:
            return None
        mean = self.gap_sum / self.gap_n
        return max(self.gap_sumsq / self.gap_n - mean * mean, 0.0) / (mean * mean)

    def lengths(self) -> BucketLengths:
        return BucketLengths(
            prompt_tokens_mean=self.prompt_sum / self.count,
            output_tokens_mean=self.out_sum / self.count,
            prompt_histogram=_histogram(self.prompt_hist),
            output_histogram=_histogram(self.out_hist),
        )


def _histogram(per_bound: list[int]) -> LengthHistogram:
    """Cumulative counts up to the first bound that holds every request."""
    top = max(i for i, c in enumerate(per_bound) if c > 0)
    counts, total = [], 0
    for c in per_bound[: top + 1]:
        total += c
        counts.append(float(total))
    return LengthHistogram(upper_tokens=BOUNDS_125[: top + 1], counts=tuple(counts))


class ArrivalBuckets:
    """Arrivals (unix seconds, prompt tokens, output tokens) summed into buckets of bucket_s
    aligned to multiples of bucket_s (an hourly series starts on the hour)."""

    def __init__(self, bucket_s: float, src: Source) -> None:
        self.bucket_s = bucket_s
        self.src = src
        self.buckets: dict[int, _Bucket] = {}
        self.dropped = 0  # rows the format says are not requests (BurstGPT's failures)

    def add(self, t_s: float, prompt: int, output: int, at: str) -> None:
        """One arrival; `at` names its row for an error (too many buckets)."""
        index = math.floor(t_s / self.bucket_s)
        bucket = self.buckets.get(index)
        if bucket is None:
            if len(self.buckets) >= MAX_HISTORY_BUCKETS:
                raise self.src.error(at, f"more than {MAX_HISTORY_BUCKETS:,} buckets of {self.bucket_s:g} s")
            bucket = self.buckets[index] = _Bucket()
        bucket.add(t_s, prompt, output)

    def series(self) -> HistorySeries:
        if not self.buckets:
            raise self.src.error("", "has no requests")
        first, last = min(self.buckets), max(self.buckets)
        if last - first + 1 > MAX_HISTORY_BUCKETS:
            raise self.src.error(
                "",
                f"spans {last - first + 1:,} buckets of {self.bucket_s:g} s; at most {MAX_HISTORY_BUCKETS:,}",
            )
        span = [self.buckets.get(i) for i in range(first, last + 1)]
        return HistorySeries(
            source=self.src.name,
            start_unix_s=first * self.bucket_s,
            bucket_s=self.bucket_s,
            requests=tuple(0.0 if b is None else float(b.count) for b in span),
            lengths=tuple(None if b is None else b.lengths() for b in span),
            gap_cv2=tuple(None if b is None else b.gap_cv2() for b in span),
            dropped_requests=self.dropped,
        )
