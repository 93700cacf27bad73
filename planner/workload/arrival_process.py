"""Request arrivals: a constant or piecewise rate with gamma gaps (`vllm bench serve
--request-rate R --burstiness k`), or a closed loop of clients."""

from __future__ import annotations

import math
from collections.abc import Iterator
from functools import cached_property

import numpy as np
from pydantic import BaseModel, Field, field_validator, model_validator

from planner.errors import InvalidInput
from planner.workload.limits import (
    MAX_BUCKET_DURATION_S,
    MAX_BUCKETS,
    MAX_BURSTINESS,
    MAX_CLIENT_CONCURRENCY,
    MAX_HORIZON_S,
    MAX_REQUESTS_PER_S,
    MAX_SAMPLED_REQUESTS,
    MIN_BUCKET_DURATION_S,
    MIN_BURSTINESS,
    MIN_REQUESTS_PER_S,
    MODEL_CONFIG,
    REQUEST_CHUNK,
    FloatArray,
)


class RateBucket(BaseModel):
    """A stretch of time with a constant mean arrival rate: `duration_s` in 0.001 .. 1e7 s,
    `requests_per_s` in 0 .. 1e6 (the series' mean must be at least 1e-7)."""

    model_config = MODEL_CONFIG
    duration_s: float = Field(ge=MIN_BUCKET_DURATION_S, le=MAX_BUCKET_DURATION_S)
    requests_per_s: float = Field(ge=0.0, le=MAX_REQUESTS_PER_S)


class Arrivals(BaseModel):
    """Request arrivals: a mean rate, constant (`requests_per_s`) or piecewise over consecutive
    time `buckets` (the series repeats when sampled past its end), and gamma-distributed gaps
    of shape `burstiness` k: CV² of gaps = 1/k, k = 1 is Poisson, k < 1 burstier — the process
    of `vllm bench serve --burstiness k`.

    With buckets the process is a gamma renewal process in operational time Λ(t) = ∫ rate:
    each gap is drawn with unit mean and stretched by the rate of the bucket it runs through,
    so every bucket gets its own rate (and Poisson arrivals stay exactly Poisson).

    Closed loop (`concurrency`: C clients, `vllm bench serve --max-concurrency C`): at most C
    requests are in flight and a client sends its next request the moment its last one is
    answered (zero think time). Without `requests_per_s` the loop is all there is (`--request-rate
    inf`); with it, requests come due at that rate and burstiness (a constant rate, not buckets)
    and each waits for a free client, as vllm bench serve's semaphore does: both limits apply.
    Only `evaluate` and `simulate` take a closed loop (planner/closed_loop.py).

    Ranges: `requests_per_s` 1e-7 .. 1e6 (a bucket series: its mean at least 1e-7), at most
    100,000 buckets, `burstiness` 0.001 .. 1e6, `concurrency` 1 .. 100,000."""

    model_config = MODEL_CONFIG
    requests_per_s: float | None = Field(default=None, ge=MIN_REQUESTS_PER_S, le=MAX_REQUESTS_PER_S)
    buckets: tuple[RateBucket, ...] | None = Field(default=None, max_length=MAX_BUCKETS)
    burstiness: float = Field(default=1.0, ge=MIN_BURSTINESS, le=MAX_BURSTINESS)
    concurrency: int | None = Field(default=None, ge=1, le=MAX_CLIENT_CONCURRENCY)

    @field_validator("buckets")
    @classmethod
    def _buckets_ok(cls, v: tuple[RateBucket, ...] | None) -> tuple[RateBucket, ...] | None:
        if v is None:
            return v
        if not v:
            raise ValueError("is empty; give at least one {duration_s, requests_per_s}")
        if not any(b.requests_per_s > 0 for b in v):
            raise ValueError("every bucket has rate 0; at least one must be positive")
        total = math.fsum(b.requests_per_s * b.duration_s for b in v)
        mean = total / math.fsum(b.duration_s for b in v)
        if mean < MIN_REQUESTS_PER_S:
            raise ValueError(f"mean rate {mean:.3g} requests/s is below the {MIN_REQUESTS_PER_S:g} minimum")
        return v

    @model_validator(mode="after")
    def _one_rate(self) -> Arrivals:
        if self.concurrency is not None:
            if self.buckets is not None:
                raise ValueError(
                    "a closed loop (concurrency) takes a constant requests_per_s cap or none, not buckets"
                )
            return self
        if (self.requests_per_s is None) == (self.buckets is None):
            raise ValueError("give exactly one of requests_per_s or buckets")
        return self

    @property
    def closed_loop(self) -> bool:
        """True for C clients in a closed loop (`concurrency` given)."""
        return self.concurrency is not None

    def open_loop(self) -> Arrivals:
        """The open-loop part of a closed loop's arrivals: its rate cap at its burstiness (the
        times requests come due); InvalidInput when the loop has no rate cap."""
        if self.requests_per_s is None and self.buckets is None:
            raise InvalidInput(
                "arrivals.requests_per_s", "a closed loop without a rate cap has no open-loop rate"
            )
        return self.model_copy(update={"concurrency": None})

    @classmethod
    def poisson(cls, requests_per_s: float) -> Arrivals:
        return cls(requests_per_s=requests_per_s)

    @property
    def cv2(self) -> float:
        """Squared coefficient of variation of the inter-arrival gaps (1/k)."""
        return 1.0 / self.burstiness

    @property
    def period_s(self) -> float | None:
        """Total duration of the bucket series (None for a constant rate)."""
        return None if self.buckets is None else math.fsum(b.duration_s for b in self.buckets)

    @property
    def mean_requests_per_s(self) -> float:
        if self.requests_per_s is not None:
            return self.requests_per_s
        if self.buckets is None:
            raise InvalidInput(
                "arrivals.concurrency",
                "a closed loop's rate is an outcome (evaluate or simulate it), not an input",
            )
        total = math.fsum(b.requests_per_s * b.duration_s for b in self.buckets)
        return total / math.fsum(b.duration_s for b in self.buckets)

    @property
    def peak_requests_per_s(self) -> float:
        if self.requests_per_s is not None:
            return self.requests_per_s
        if self.buckets is None:
            return self.mean_requests_per_s  # refused there, with the reason
        return max(b.requests_per_s for b in self.buckets)

    def rate_at(self, t_s: float) -> float:
        """Mean arrival rate at time t (buckets repeat after `period_s`)."""
        if self.requests_per_s is not None:
            return self.requests_per_s
        t_knots, _, rates = self._knots
        period = float(t_knots[-1])
        j = int(np.searchsorted(t_knots, t_s % period, side="right")) - 1
        return float(rates[min(max(j, 0), rates.size - 1)])

    @cached_property
    def _knots(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        """(bucket start/end times, Λ at those times, bucket rates)."""
        assert self.buckets is not None
        dur = np.array([b.duration_s for b in self.buckets])
        rates = np.array([b.requests_per_s for b in self.buckets])
        t = np.concatenate(([0.0], np.cumsum(dur)))
        lam = np.concatenate(([0.0], np.cumsum(dur * rates)))
        return t, lam, rates

    def _operational(self, t_s: float) -> float:
        """Λ(t): expected arrivals in [0, t]."""
        if self.requests_per_s is not None:
            return t_s * self.requests_per_s
        t_knots, lam, _ = self._knots
        cycles = math.floor(t_s / t_knots[-1])
        rest = t_s - cycles * t_knots[-1]
        return cycles * float(lam[-1]) + float(np.interp(rest, t_knots, lam))

    def _to_time(self, s: FloatArray) -> FloatArray:
        """Λ⁻¹(s), vectorized; zero-rate buckets receive no arrivals."""
        if self.requests_per_s is not None:
            return s / self.requests_per_s
        t_knots, lam, rates = self._knots
        period, lam_total = t_knots[-1], lam[-1]
        cycles = np.floor(s / lam_total)
        rest = s - cycles * lam_total
        j = np.clip(np.searchsorted(lam, rest, side="right") - 1, 0, rates.size - 1)
        r = rates[j]
        off = np.divide(rest - lam[j], r, out=np.zeros_like(rest), where=r > 0)
        return cycles * period + t_knots[j] + np.clip(off, 0.0, t_knots[j + 1] - t_knots[j])

    def _gaps(self, rng: np.random.Generator, n: int) -> FloatArray:
        k = self.burstiness
        return rng.gamma(shape=k, scale=1.0 / k, size=n)

    def sample_times(
        self, rng: np.random.Generator, horizon_s: float | None = None, count: int | None = None
    ) -> FloatArray:
        """Arrival timestamps (seconds, ascending), deterministic for the generator's state.
        Give exactly one of `horizon_s` (all arrivals in [0, horizon_s)) or `count` (that many
        arrivals). The first arrival comes one gap after t = 0."""
        parts = list(self.iter_times(rng, horizon_s=horizon_s, count=count))
        return np.concatenate(parts) if parts else np.empty(0)

    def iter_times(
        self,
        rng: np.random.Generator,
        horizon_s: float | None = None,
        count: int | None = None,
        chunk_size: int = REQUEST_CHUNK,
    ) -> Iterator[FloatArray]:
        """`sample_times` lazily: ascending chunks of at most `chunk_size` timestamps whose
        concatenation is exactly what `sample_times` returns for the same generator state (gaps
        are drawn in the same order and summed in the same order), so memory stays per chunk.
        `count` is at most 10,000,000; `horizon_s` at most 1e7 s and may expect at most
        10,000,000 arrivals."""
        if (horizon_s is None) == (count is None):
            raise InvalidInput("horizon_s", "give exactly one of horizon_s or count")
        if self.requests_per_s is None and self.buckets is None:
            raise InvalidInput(
                "arrivals.concurrency", "a closed loop without a rate cap has no arrival times"
            )
        if chunk_size < 1:
            raise InvalidInput("chunk_size", f"must be at least 1, got {chunk_size}")
        if count is not None:
            if count < 0:
                raise InvalidInput("count", f"must be non-negative, got {count}")
            if count > MAX_SAMPLED_REQUESTS:
                raise InvalidInput("count", f"must be at most {MAX_SAMPLED_REQUESTS:,}, got {count:,}")
            return self._iter_count(rng, int(count), chunk_size)
        assert horizon_s is not None
        if not (horizon_s >= 0 and math.isfinite(horizon_s)):
            raise InvalidInput("horizon_s", f"must be a finite non-negative number, got {horizon_s}")
        if horizon_s > MAX_HORIZON_S:
            raise InvalidInput("horizon_s", f"must be at most {MAX_HORIZON_S:g} s, got {horizon_s:g}")
        target = self._operational(horizon_s)
        if target > MAX_SAMPLED_REQUESTS:
            raise InvalidInput(
                "horizon_s",
                f"{horizon_s:g} s at {self.mean_requests_per_s:.4g} requests/s expects {target:,.0f} "
                f"arrivals, more than the {MAX_SAMPLED_REQUESTS:,} a sample may hold",
            )
        return self._iter_horizon(rng, float(horizon_s), target, chunk_size)

    def _iter_count(self, rng: np.random.Generator, count: int, chunk_size: int) -> Iterator[FloatArray]:
        done, last = 0, 0.0
        while done < count:
            g = self._gaps(rng, min(chunk_size, count - done))
            if done:
                g[0] += last  # the running sum goes on exactly as one cumsum would
            np.cumsum(g, out=g)
            last = float(g[-1])
            done += g.size
            yield self._to_time(g)

    def _iter_horizon(
        self, rng: np.random.Generator, horizon_s: float, target: float, chunk_size: int
    ) -> Iterator[FloatArray]:
        # Operational times s are drawn in rounds of `chunk` gaps, each round's sums offset by
        # where the last one ended, until one passes `target` = Λ(horizon).
        chunk = int(target + 6.0 * math.sqrt(target * (1.0 + self.cv2)) + 64)
        base = 0.0
        while True:
            drawn, local = 0, 0.0
            while drawn < chunk:
                g = self._gaps(rng, min(chunk_size, chunk - drawn))
                if drawn:
                    g[0] += local
                np.cumsum(g, out=g)
                local = float(g[-1])
                drawn += g.size
                s = base + g
                below = s < target
                t = self._to_time(s[below])
                t = t[t < horizon_s]
                if t.size:
                    yield t
                if not below[-1]:
                    return
            base = base + local
