"""Observed traffic as a series of equal time buckets: what every history reader produces and
what the forecasters read (issue #36: `capplan forecast`).

A history is counted, not sampled: bucket i covers [start_unix_s + i bucket_s, start_unix_s +
(i + 1) bucket_s) and holds the requests that arrived in it. A reader that only sees rates
(a Prometheus counter's increase, a CSV of rates) stores rate x bucket_s. A bucket with no
observation at all (a scrape gap, a stale series) is `None`, not 0: zero traffic and an
unobserved hour are different facts, and a forecaster must not learn a dip from a gap.

Lengths and burstiness are per bucket where the source has them (a request log has every
request's lengths and timestamp; a Prometheus range query has the length histograms' increase
and no timestamps), else `None` for the whole series.
"""

from __future__ import annotations

import math
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

MAX_HISTORY_BUCKETS = 1_000_000  # a year of 30 s buckets; ~100 MB of floats at most per series
MIN_BUCKET_S = 1.0
MAX_BUCKET_S = 7 * 86_400.0
MAX_REQUESTS_PER_BUCKET = 1e12

Count = Annotated[float, Field(ge=0.0, le=MAX_REQUESTS_PER_BUCKET, allow_inf_nan=False)]


class LengthHistogram(BaseModel):
    """Request lengths in one bucket as cumulative counts at upper bounds (Prometheus `le`
    buckets: `counts[j]` requests had at most `upper_tokens[j]` tokens; the last bound may be
    inf), or, from a request log, exact quantiles written the same way."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    upper_tokens: tuple[float, ...] = Field(min_length=1, max_length=256)
    counts: tuple[Count, ...] = Field(min_length=1, max_length=256)

    @model_validator(mode="after")
    def _cumulative(self) -> LengthHistogram:
        if len(self.upper_tokens) != len(self.counts):
            raise ValueError("upper_tokens and counts differ in length")
        if any(b <= a for a, b in zip(self.upper_tokens, self.upper_tokens[1:], strict=False)):
            raise ValueError("upper_tokens must increase")
        if any(b < a for a, b in zip(self.counts, self.counts[1:], strict=False)):
            raise ValueError("counts must not decrease (they are cumulative)")
        return self


class BucketLengths(BaseModel):
    """Prompt and output lengths of one bucket's requests: means (tokens) and, where the source
    has them, distributions."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    prompt_tokens_mean: float = Field(ge=0.0, le=1e7, allow_inf_nan=False)
    output_tokens_mean: float = Field(ge=0.0, le=1e7, allow_inf_nan=False)
    prompt_histogram: LengthHistogram | None = None
    output_histogram: LengthHistogram | None = None


class HistorySeries(BaseModel):
    """One workload's observed traffic (module docstring). `source` names the file and format it
    was read from, for messages and reports."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    source: str = Field(min_length=1, max_length=4096)
    start_unix_s: float = Field(ge=0.0, le=1e11, allow_inf_nan=False)
    bucket_s: float = Field(ge=MIN_BUCKET_S, le=MAX_BUCKET_S, allow_inf_nan=False)
    requests: tuple[Count | None, ...] = Field(min_length=1, max_length=MAX_HISTORY_BUCKETS)
    # per bucket, None where the bucket saw no request or the source has no lengths
    lengths: tuple[BucketLengths | None, ...] | None = None
    # per bucket, the squared coefficient of variation of the gaps between arrivals (1 = Poisson),
    # None where fewer than 3 requests arrived or the source has no timestamps
    gap_cv2: tuple[float | None, ...] | None = None
    # rows of the source left out as not being requests the service served (BurstGPT's failed
    # requests, written with 0 response tokens): counted here so a report can say so
    dropped_requests: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _aligned(self) -> HistorySeries:
        n = len(self.requests)
        for name in ("lengths", "gap_cv2"):
            values = getattr(self, name)
            if values is not None and len(values) != n:
                raise ValueError(f"{name} has {len(values)} buckets, requests has {n}")
        if self.gap_cv2 is not None and any(
            v is not None and not (0.0 <= v < math.inf) for v in self.gap_cv2
        ):
            raise ValueError("gap_cv2 must be finite and >= 0")
        if all(r is None for r in self.requests):
            raise ValueError("no bucket was observed")
        return self

    @property
    def end_unix_s(self) -> float:
        return self.start_unix_s + len(self.requests) * self.bucket_s

    def rates_per_s(self) -> list[float | None]:
        """Each bucket's mean arrival rate (requests/s), None where unobserved."""
        return [None if r is None else r / self.bucket_s for r in self.requests]
