"""The workload model: who arrives when, and how long their prompts and answers are.

Both the analytic latency model and the discrete-event simulator consume it:

* `LengthDistribution` — a token-length distribution, written by the user in exactly one form
  (`pairs`, `histogram`, `percentiles`, `constant`, `samples`). It offers exact moments,
  quantiles, E[max of n iid draws], seeded sampling and a compact `support()` (≤ ~64 points)
  for analytic code.
* `Arrivals` — a request rate (constant or piecewise over time buckets) with gamma-distributed
  inter-arrival gaps of shape `burstiness` k (CV² = 1/k; k = 1 is Poisson), the process
  `vllm bench serve --request-rate R --burstiness k` generates.
* `Workload` — arrivals + input/output lengths + prefix-cache hit fraction; seeded request
  sampling for the simulator.

Load user input with `validate(Workload, mapping)` (or `Workload.from_mapping`): every error is an
`InvalidInput` whose field is the dotted path the user wrote.

Conventions: lengths are tokens (≥ 1), times seconds, rates requests per second.

Ranges (a value outside is refused with its field and the limit; the caps keep one request from
exhausting memory or time, and a server inherits them):

| input                                   | range                                        |
|-----------------------------------------|----------------------------------------------|
| a length (pairs, constant, samples,     | 1 .. 10,000,000 tokens (`MAX_TOKENS`)        |
| percentiles, histogram edges)           |                                              |
| probability                             | 0 .. 1                                       |
| percentile level                        | 0 .. 100; at most 1,000 keys                 |
| pairs / histogram bins                  | at most 100,000 (`MAX_DISTRIBUTION_POINTS`)  |
| histogram counts / weights              | 0 .. 1e15 each                               |
| samples                                 | at most 1,000,000 (`MAX_SAMPLES`)            |
| requests_per_s (constant)               | 1e-7 .. 1e6 /s                               |
| bucket requests_per_s                   | 0 .. 1e6 /s, the series' mean at least 1e-7  |
| bucket duration_s                       | 0.001 .. 1e7 s (~116 days)                   |
| buckets                                 | at most 100,000 (`MAX_BUCKETS`)              |
| burstiness k                            | 0.001 .. 1e6                                 |
| concurrency (closed loop)               | 1 .. 100,000 clients                         |
|                                         | (`MAX_CLIENT_CONCURRENCY`)                   |
| prefix_cache_hit_fraction               | 0 .. < 1                                     |
| sampled requests (count)                | 0 .. 10,000,000 (`MAX_SAMPLED_REQUESTS`)     |
| sampling horizon_s                      | 0 .. 1e7 s, expecting at most 10,000,000     |
|                                         | arrivals                                     |
Discrete forms (`pairs`, `constant`, `samples`) are exact distributions over integers. Continuous
forms (`histogram`: uniform within each bin; `percentiles`: piecewise-linear quantile function)
are treated as continuous by `mean`/`quantile`/`expected_max`/...; `sample` rounds their draws to
the nearest integer (≥ 1).

The parts: planner/workload/limits.py (the ranges), exact.py (exact distributions), lengths.py
(`LengthDistribution`), arrival_process.py (`Arrivals`); `Workload` and `RequestSample` live here.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field

from planner.errors import InvalidInput, echo
from planner.validation import validate
from planner.workload.arrival_process import Arrivals, RateBucket
from planner.workload.lengths import Histogram, LengthDistribution, TokenProbability
from planner.workload.limits import (
    MAX_BUCKET_DURATION_S,
    MAX_BUCKETS,
    MAX_BURSTINESS,
    MAX_CLIENT_CONCURRENCY,
    MAX_DISTRIBUTION_POINTS,
    MAX_HISTOGRAM_WEIGHT,
    MAX_HORIZON_S,
    MAX_PERCENTILE_KEYS,
    MAX_REQUESTS_PER_S,
    MAX_SAMPLED_REQUESTS,
    MAX_SAMPLES,
    MAX_TOKENS,
    MIN_BUCKET_DURATION_S,
    MIN_BURSTINESS,
    MIN_REQUESTS_PER_S,
    MODEL_CONFIG,
    REQUEST_CHUNK,
    FloatArray,
    IntArray,
)

__all__ = [
    "MAX_BUCKETS",
    "MAX_BUCKET_DURATION_S",
    "MAX_BURSTINESS",
    "MAX_CLIENT_CONCURRENCY",
    "MAX_DISTRIBUTION_POINTS",
    "MAX_HISTOGRAM_WEIGHT",
    "MAX_HORIZON_S",
    "MAX_PERCENTILE_KEYS",
    "MAX_REQUESTS_PER_S",
    "MAX_SAMPLED_REQUESTS",
    "MAX_SAMPLES",
    "MAX_TOKENS",
    "MIN_BUCKET_DURATION_S",
    "MIN_BURSTINESS",
    "MIN_REQUESTS_PER_S",
    "REQUEST_CHUNK",
    "Arrivals",
    "Histogram",
    "LengthDistribution",
    "RateBucket",
    "RequestSample",
    "TokenProbability",
    "Workload",
    "validate",
]


@dataclass(frozen=True)
class RequestSample:
    """Sampled requests as parallel arrays (arrival seconds ascending, token counts ≥ 1)."""

    arrival_s: FloatArray
    prompt_tokens: IntArray
    output_tokens: IntArray

    def __len__(self) -> int:
        return int(self.arrival_s.size)

    def __iter__(self) -> Iterator[tuple[float, int, int]]:
        return zip(
            self.arrival_s.tolist(), self.prompt_tokens.tolist(), self.output_tokens.tolist(), strict=True
        )


class Workload(BaseModel):
    """What the deployment must serve. `prefix_cache_hit_fraction` is the expected fraction of
    each prompt's tokens found in the prefix cache (their prefill is skipped). `endpoint`: the
    route the clients call (chat: /v1/chat/completions, completions: /v1/completions), which
    selects the profile's front-end cost per request (Profile.for_endpoint)."""

    model_config = MODEL_CONFIG
    name: str | None = None
    arrivals: Arrivals
    input_tokens: LengthDistribution
    output_tokens: LengthDistribution
    prefix_cache_hit_fraction: float = Field(default=0.0, ge=0.0, lt=1.0)
    endpoint: Literal["chat", "completions"] = "chat"

    @classmethod
    def from_mapping(cls, data: Any, root: str = "workload") -> Workload:
        """Validate a YAML/JSON mapping; errors are InvalidInput naming the dotted field."""
        return validate(cls, data, root)

    def sample_requests(
        self, seed: int, count: int | None = None, horizon_s: float | None = None
    ) -> RequestSample:
        """Requests for a simulation, deterministic for `seed`. Give exactly one of `count` or
        `horizon_s`. Arrivals, prompt lengths and output lengths use independent streams spawned
        from the seed; lengths are independent of each other and of arrival times."""
        parts = list(self.request_chunks(seed, count=count, horizon_s=horizon_s))
        if not parts:
            return RequestSample(np.empty(0), np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64))
        return RequestSample(
            np.concatenate([p.arrival_s for p in parts]),
            np.concatenate([p.prompt_tokens for p in parts]),
            np.concatenate([p.output_tokens for p in parts]),
        )

    def request_chunks(
        self,
        seed: int,
        count: int | None = None,
        horizon_s: float | None = None,
        chunk_size: int = REQUEST_CHUNK,
    ) -> Iterator[RequestSample]:
        """`sample_requests` lazily, in chunks of at most `chunk_size` requests (arrivals
        ascending across chunks): the same requests, a chunk's worth of memory at a time.
        Limits as `Arrivals.iter_times`; `seed` is a non-negative integer."""
        if (count is None) == (horizon_s is None):
            raise InvalidInput("count", "give exactly one of count or horizon_s")
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
            raise InvalidInput("seed", f"must be a non-negative integer, got {echo(seed)}")
        arr_ss, in_ss, out_ss = np.random.SeedSequence(int(seed)).spawn(3)
        times = self.arrivals.iter_times(
            np.random.default_rng(arr_ss), horizon_s=horizon_s, count=count, chunk_size=chunk_size
        )
        return self._chunks(times, np.random.default_rng(in_ss), np.random.default_rng(out_ss))

    def _chunks(
        self, times: Iterator[FloatArray], in_rng: np.random.Generator, out_rng: np.random.Generator
    ) -> Iterator[RequestSample]:
        for t in times:
            n = int(t.size)
            yield RequestSample(t, self.input_tokens.sample(in_rng, n), self.output_tokens.sample(out_rng, n))
