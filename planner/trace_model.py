"""The Trace: a request trace's arrival times and token counts as arrays, its statistics
(rates per bucket, burstiness, length percentiles) and the workload it implies. Reading the CSV
format is planner/trace_csv.py; the format, the decisions and the ranges are documented in
planner/traces.py, which re-exports both."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from planner.errors import InvalidInput
from planner.validation import validate
from planner.workload import (
    MAX_BUCKET_DURATION_S,
    MAX_BUCKETS,
    MAX_BURSTINESS,
    MAX_DISTRIBUTION_POINTS,
    MAX_REQUESTS_PER_S,
    MAX_TOKENS,
    MIN_BUCKET_DURATION_S,
    MIN_BURSTINESS,
    MIN_REQUESTS_PER_S,
    Arrivals,
    LengthDistribution,
    RateBucket,
    Workload,
)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

# Caps (see planner/traces.py). k = 1/CV² is capped at MAX_BURSTINESS (a perfectly regular
# trace has CV 0).
MAX_TRACE_REQUESTS = 1_000_000
MAX_TRACE_SPAN_S = 1e7
MAX_BINS = MAX_DISTRIBUTION_POINTS


@dataclass(frozen=True)
class LengthStats:
    """Token-length statistics (percentiles by linear interpolation, numpy's default)."""

    mean: float
    std: float
    min: float
    p50: float
    p90: float
    p99: float
    max: float

    @classmethod
    def of(cls, x: IntArray) -> LengthStats:
        p50, p90, p99 = np.percentile(x, [50, 90, 99])
        return cls(
            mean=float(x.mean()),
            std=float(x.std()),
            min=float(x.min()),
            p50=float(p50),
            p90=float(p90),
            p99=float(p99),
            max=float(x.max()),
        )


@dataclass(frozen=True)
class TraceSummary:
    name: str
    num_requests: int
    duration_s: float  # first to last request
    mean_requests_per_s: float  # num_requests / duration_s
    interarrival_mean_s: float
    interarrival_p50_s: float
    interarrival_cv: float  # std / mean of the gaps (population std)
    bucket_s: float
    bucket_rate_min: float  # over full-length buckets (a partial last one is left out)
    bucket_rate_max: float
    peak_to_mean: float  # bucket_rate_max / mean_requests_per_s
    input_tokens: LengthStats
    output_tokens: LengthStats

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True, eq=False)
class Trace:
    """Requests of a trace as parallel arrays: arrival seconds (ascending, first at 0), prompt
    tokens and output tokens (int64, ≥ 1). Arrays are read-only."""

    arrival_s: FloatArray
    prompt_tokens: IntArray
    output_tokens: IntArray
    name: str = "trace"
    clamped_zero_tokens: int = 0

    @classmethod
    def from_arrays(
        cls,
        arrival_s: npt.ArrayLike,
        prompt_tokens: npt.ArrayLike,
        output_tokens: npt.ArrayLike,
        name: str = "trace",
    ) -> Trace:
        """A trace from arrays (arrival times in seconds, any origin, any order). Zero token
        counts are clamped to 1; negative ones are an error."""
        try:
            t = np.asarray(arrival_s, dtype=np.float64)
        except (TypeError, ValueError):
            raise InvalidInput("trace.arrival_s", "arrival times must be numbers of seconds") from None
        p = _whole(prompt_tokens, "trace.prompt_tokens")
        o = _whole(output_tokens, "trace.output_tokens")
        if t.ndim != 1 or t.shape != p.shape or t.shape != o.shape:
            raise InvalidInput("trace", "arrival, prompt and output arrays must be 1-D and the same length")
        if t.size == 0:
            raise InvalidInput("trace", "has no requests")
        if t.size > MAX_TRACE_REQUESTS:
            raise InvalidInput(
                "trace", f"has {t.size:,} requests, more than the {MAX_TRACE_REQUESTS:,} limit"
            )
        if not np.isfinite(t).all():
            raise InvalidInput("trace.arrival_s", "has a non-finite time")
        order = np.argsort(t, kind="stable")
        ts = t[order] - t[order][0]
        if not ts[-1] <= MAX_TRACE_SPAN_S:
            raise InvalidInput(
                "trace.arrival_s",
                f"spans {ts[-1]:.4g} s from the first to the last request, more than {MAX_TRACE_SPAN_S:g} s",
            )
        clamped = int((p == 0).sum() + (o == 0).sum())
        return cls._make(ts, np.maximum(p[order], 1), np.maximum(o[order], 1), name, clamped)

    @classmethod
    def _make(cls, t: FloatArray, p: IntArray, o: IntArray, name: str, clamped: int) -> Trace:
        for a in (t, p, o):
            a.flags.writeable = False
        return cls(t, p, o, name, clamped)

    # ---- basic statistics ------------------------------------------------------------------

    @property
    def num_requests(self) -> int:
        return int(self.arrival_s.size)

    def __len__(self) -> int:
        return self.num_requests

    @property
    def duration_s(self) -> float:
        """Time from the first to the last request."""
        return float(self.arrival_s[-1])

    def _need_span(self) -> None:
        if self.num_requests < 2 or self.duration_s <= 0:
            raise InvalidInput("trace", "needs at least two requests at distinct times to derive a rate")

    @property
    def mean_requests_per_s(self) -> float:
        """num_requests / duration_s (the published convention)."""
        self._need_span()
        return self.num_requests / self.duration_s

    @property
    def interarrival_s(self) -> FloatArray:
        return np.diff(self.arrival_s)

    @property
    def interarrival_cv(self) -> float:
        """Coefficient of variation of the inter-arrival gaps (population std / mean)."""
        self._need_span()
        g = self.interarrival_s
        return float(g.std() / g.mean())

    def buckets(self, bucket_s: float = 60.0) -> tuple[FloatArray, IntArray]:
        """(durations, request counts) of consecutive buckets of `bucket_s` from t = 0; the last
        bucket ends at the last request (merged into the previous one if shorter than a
        quarter bucket)."""
        if not (MIN_BUCKET_DURATION_S <= bucket_s <= MAX_BUCKET_DURATION_S):
            raise InvalidInput(
                "bucket_s",
                f"must be {MIN_BUCKET_DURATION_S:g} .. {MAX_BUCKET_DURATION_S:g} seconds, got {bucket_s}",
            )
        self._need_span()
        span = self.duration_s
        nb = max(1, math.ceil(span / bucket_s))
        if nb > MAX_BUCKETS:
            raise InvalidInput(
                "bucket_s",
                f"{bucket_s:g} s cuts the trace's {span:,.0f} s into {nb:,} buckets, more than "
                f"{MAX_BUCKETS:,}; use at least {span / MAX_BUCKETS:.3g} s",
            )
        idx = np.minimum((self.arrival_s // bucket_s).astype(np.int64), nb - 1)
        counts = np.bincount(idx, minlength=nb).astype(np.int64)
        durations = np.full(nb, bucket_s)
        durations[-1] = span - (nb - 1) * bucket_s
        if nb > 1 and durations[-1] < bucket_s / 4:
            durations[-2] += durations[-1]
            counts[-2] += counts[-1]
            durations, counts = durations[:-1], counts[:-1]
        return durations, counts

    def bucket_rates(self, bucket_s: float = 60.0) -> tuple[FloatArray, FloatArray]:
        """(durations, requests per second) per bucket; see `buckets`."""
        durations, counts = self.buckets(bucket_s)
        return durations, counts / durations

    def summary(self, bucket_s: float = 60.0) -> TraceSummary:
        durations, rates = self.bucket_rates(bucket_s)
        full = durations >= bucket_s * (1 - 1e-9)
        if full.any():
            rates = rates[full]  # min/max over full buckets (as published)
        g = self.interarrival_s
        mean_rate = self.mean_requests_per_s
        return TraceSummary(
            name=self.name,
            num_requests=self.num_requests,
            duration_s=self.duration_s,
            mean_requests_per_s=mean_rate,
            interarrival_mean_s=float(g.mean()),
            interarrival_p50_s=float(np.median(g)),
            interarrival_cv=self.interarrival_cv,
            bucket_s=bucket_s,
            bucket_rate_min=float(rates.min()),
            bucket_rate_max=float(rates.max()),
            peak_to_mean=float(rates.max() / mean_rate),
            input_tokens=LengthStats.of(self.prompt_tokens),
            output_tokens=LengthStats.of(self.output_tokens),
        )

    # ---- derived traces and workloads ------------------------------------------------------

    def time_scaled(self, target_requests_per_s: float) -> Trace:
        """The same requests with time stretched or squeezed so the mean rate is the target
        (burstiness, i.e. the CV of gaps, is unchanged)."""
        if not (MIN_REQUESTS_PER_S <= target_requests_per_s <= MAX_REQUESTS_PER_S):
            raise InvalidInput(
                "requests_per_s",
                f"must be {MIN_REQUESTS_PER_S:g} .. {MAX_REQUESTS_PER_S:g} requests/s, got {target_requests_per_s}",
            )
        factor = self.mean_requests_per_s / target_requests_per_s
        if not self.duration_s * factor <= MAX_TRACE_SPAN_S:
            raise InvalidInput(
                "requests_per_s",
                f"{target_requests_per_s:g}/s stretches the trace to {self.duration_s * factor:.4g} s, "
                f"more than {MAX_TRACE_SPAN_S:g} s",
            )
        return Trace._make(
            self.arrival_s * factor,
            self.prompt_tokens.copy(),
            self.output_tokens.copy(),
            f"{self.name}@{target_requests_per_s:g}rps",
            self.clamped_zero_tokens,
        )

    def operational_interarrival_cv(self, bucket_s: float = 60.0) -> float:
        """CV of the gaps after rescaling time by the per-bucket rates (gaps in units of expected
        arrivals): the burstiness left once the bucket rates explain the slow variation."""
        durations, counts = self.buckets(bucket_s)
        rates = counts / durations
        starts = np.concatenate(([0.0], np.cumsum(durations)[:-1]))
        lam = np.concatenate(([0.0], np.cumsum(counts)[:-1])).astype(np.float64)
        j = np.clip(np.searchsorted(starts, self.arrival_s, side="right") - 1, 0, rates.size - 1)
        s = lam[j] + (self.arrival_s - starts[j]) * rates[j]
        g = np.diff(s)
        return float(g.std() / g.mean())

    def to_workload(
        self,
        bucket_s: float | None = 60.0,
        bins: int | None = None,
        burstiness: Literal["gaps", "rescaled"] = "rescaled",
        name: str | None = None,
        prefix_cache_hit_fraction: float = 0.0,
    ) -> Workload:
        """The workload this trace implies.

        * Arrivals: per-bucket rates (`bucket_s`; None = one constant rate, the mean) and
          burstiness k = 1/CV² of the inter-arrival gaps. With buckets, the raw gaps' CV also
          contains the slow rate variation the buckets already reproduce, so the default
          (`burstiness="rescaled"`) takes the CV of gaps rescaled by the bucket rates, to not
          count it twice (conv: 1.03 vs 1.09 raw; code: 7.2 vs 13.2 raw); `"gaps"` uses the raw
          CV. Without buckets the raw CV is the only one. k is capped at 1e6.
        * Lengths: the empirical distributions of prompt and output tokens (`bins=None`: the
          samples themselves, exact; an int: quantile-binned histograms of that many bins).
        """
        if bins is not None and not (1 <= bins <= MAX_BINS):
            raise InvalidInput("bins", f"must be 1 .. {MAX_BINS:,}, got {bins}")
        if bucket_s is None:
            rate = self.mean_requests_per_s
            if rate > MAX_REQUESTS_PER_S:
                raise InvalidInput(
                    "trace",
                    f"its mean rate {rate:.4g} requests/s is above the {MAX_REQUESTS_PER_S:g} limit",
                )
            arrivals_rate: dict[str, object] = {"requests_per_s": rate}
            cv = self.interarrival_cv
        else:
            durations, rates = self.bucket_rates(bucket_s)
            if durations.min() < MIN_BUCKET_DURATION_S:
                raise InvalidInput(
                    "trace",
                    f"spans {self.duration_s:.3g} s; per-bucket rates need at least {MIN_BUCKET_DURATION_S:g} s",
                )
            if rates.max() > MAX_REQUESTS_PER_S:
                raise InvalidInput(
                    "bucket_s",
                    f"the busiest {bucket_s:g} s bucket has {rates.max():.4g} requests/s, above the "
                    f"{MAX_REQUESTS_PER_S:g} limit; use longer buckets",
                )
            arrivals_rate = {
                "buckets": tuple(
                    RateBucket(duration_s=float(d), requests_per_s=float(r))
                    for d, r in zip(durations, rates, strict=True)
                )
            }
            cv = (
                self.operational_interarrival_cv(bucket_s)
                if burstiness == "rescaled"
                else self.interarrival_cv
            )
        k = MAX_BURSTINESS if cv <= 0 else min(MAX_BURSTINESS, 1.0 / (cv * cv))
        arrivals = validate(Arrivals, {**arrivals_rate, "burstiness": max(k, MIN_BURSTINESS)}, "trace")
        return Workload(
            name=name or self.name,
            arrivals=arrivals,
            input_tokens=LengthDistribution.from_samples(self.prompt_tokens, bins=bins),
            output_tokens=LengthDistribution.from_samples(self.output_tokens, bins=bins),
            prefix_cache_hit_fraction=prefix_cache_hit_fraction,
        )


def _whole(values: npt.ArrayLike, field: str) -> IntArray:
    try:
        a = np.asarray(values)
    except (TypeError, ValueError):
        raise InvalidInput(field, "token counts must be numbers") from None
    if a.dtype.kind == "f":
        bad = ~(np.isfinite(a) & (a == np.round(a)))
        if bad.any():
            raise InvalidInput(field, f"not a whole number of tokens at index {int(np.flatnonzero(bad)[0])}")
    elif a.size and a.dtype.kind not in "iub":
        raise InvalidInput(field, "token counts must be numbers")
    big = np.flatnonzero(a > MAX_TOKENS) if a.size else np.empty(0, dtype=np.intp)
    if big.size:
        i = int(big[0])
        raise InvalidInput(field, f"{a.flat[i]:g} tokens at index {i}, more than {MAX_TOKENS:,}")
    return a.astype(np.int64)
