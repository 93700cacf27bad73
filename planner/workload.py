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
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any, Literal, Protocol

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from planner.errors import InvalidInput, echo
from planner.validation import validate

__all__ = [
    "MAX_CLIENT_CONCURRENCY",
    "MAX_SAMPLED_REQUESTS",
    "Arrivals",
    "Histogram",
    "LengthDistribution",
    "RateBucket",
    "RequestSample",
    "TokenProbability",
    "Workload",
    "validate",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

PAIRS_SUM_TOLERANCE = 1e-6
DEFAULT_SUPPORT_POINTS = 64

# Input ranges (see the module docstring).
MAX_TOKENS = 10_000_000  # the longest context windows shipped (Llama 4 Scout: 10M)
MAX_DISTRIBUTION_POINTS = 100_000
MAX_PERCENTILE_KEYS = 1_000
MAX_SAMPLES = 1_000_000
MAX_HISTOGRAM_WEIGHT = 1e15
MIN_REQUESTS_PER_S = 1e-7  # one request per ~116 days
MAX_REQUESTS_PER_S = 1e6
MIN_BUCKET_DURATION_S = 1e-3
MAX_BUCKET_DURATION_S = 1e7  # ~116 days
MAX_BUCKETS = 100_000
MIN_BURSTINESS = 1e-3
MAX_BURSTINESS = 1e6
# Clients of a closed loop (`vllm bench serve --max-concurrency`): beyond any replica set's
# max_num_seqs x replicas a planner would consider; the simulator holds a few dict entries each.
MAX_CLIENT_CONCURRENCY = 100_000
MAX_SAMPLED_REQUESTS = 10_000_000
MAX_HORIZON_S = 1e7
# Requests are generated lazily in chunks of this many (memory: ~24 bytes a request a chunk).
REQUEST_CHUNK = 65_536

Tokens = Annotated[int, Field(ge=1, le=MAX_TOKENS)]

_MODEL_CONFIG = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


# --------------------------------------------------------------------------------------------
# Internal exact representations (plain numpy; built once per distribution and cached)
# --------------------------------------------------------------------------------------------


class _Dist(Protocol):
    def mean(self) -> float: ...
    def second_moment(self) -> float: ...
    def quantile(self, q: FloatArray) -> FloatArray: ...
    def cdf(self, x: FloatArray) -> FloatArray: ...
    def expected_max(self, n: int) -> float: ...
    def partial_mean(self, u: FloatArray) -> FloatArray: ...


@dataclass(frozen=True)
class _Discrete:
    """Finite distribution: sorted distinct `values` with positive `probs` summing to 1."""

    values: FloatArray
    probs: FloatArray

    @cached_property
    def cum(self) -> FloatArray:
        c = np.cumsum(self.probs)
        c[-1] = 1.0
        return c

    def mean(self) -> float:
        return float(np.dot(self.values, self.probs))

    def second_moment(self) -> float:
        return float(np.dot(self.values * self.values, self.probs))

    def quantile(self, q: FloatArray) -> FloatArray:
        # inf{x : F(x) >= q}
        idx = np.searchsorted(self.cum, q, side="left")
        return self.values[np.minimum(idx, self.values.size - 1)]

    def cdf(self, x: FloatArray) -> FloatArray:
        idx = np.searchsorted(self.values, x, side="right")
        return np.where(idx > 0, self.cum[np.maximum(idx - 1, 0)], 0.0)

    def expected_max(self, n: int) -> float:
        # Exact: sum_i x_i (F(x_i)^n - F(x_{i-1})^n).
        fn = self.cum**n
        prev = np.concatenate(([0.0], fn[:-1]))
        return float(np.dot(self.values, fn - prev))

    def partial_mean(self, u: FloatArray) -> FloatArray:
        # G(u) = integral_0^u Q(s) ds; Q is a step function, so G is piecewise linear.
        knots_u = np.concatenate(([0.0], self.cum))
        knots_g = np.concatenate(([0.0], np.cumsum(self.values * self.probs)))
        return np.interp(u, knots_u, knots_g)


@dataclass(frozen=True)
class _PiecewiseCdf:
    """Continuous distribution with a piecewise-linear CDF through (xs[i], fs[i]): uniform
    density within each segment. xs non-decreasing (equal neighbours = an atom), fs
    non-decreasing from 0 to 1."""

    xs: FloatArray
    fs: FloatArray

    @cached_property
    def _df(self) -> FloatArray:
        return np.diff(self.fs)

    def mean(self) -> float:
        a, b = self.xs[:-1], self.xs[1:]
        return float(np.dot(self._df, (a + b) / 2.0))

    def second_moment(self) -> float:
        a, b = self.xs[:-1], self.xs[1:]
        return float(np.dot(self._df, (a * a + a * b + b * b) / 3.0))

    def _segment(self, q: FloatArray) -> tuple[npt.NDArray[np.intp], FloatArray]:
        """For each q: index j of the knot ending its segment (0 when q <= fs[0]) and Q(q)."""
        m = self.xs.size - 1
        j = np.minimum(np.searchsorted(self.fs, q, side="left"), m)
        jm = np.maximum(j - 1, 0)
        f0, f1 = self.fs[jm], self.fs[j]
        x0, x1 = self.xs[jm], self.xs[j]
        width = f1 - f0
        frac = np.divide(q - f0, width, out=np.zeros_like(width), where=width > 0)
        x = np.where(j == 0, self.xs[0], x0 + np.clip(frac, 0.0, 1.0) * (x1 - x0))
        return j, x

    def quantile(self, q: FloatArray) -> FloatArray:
        return self._segment(q)[1]

    def cdf(self, x: FloatArray) -> FloatArray:
        m = self.xs.size - 1
        j = np.searchsorted(self.xs, x, side="right")  # number of knots <= x
        jl = np.clip(j - 1, 0, m)
        jr = np.clip(j, 0, m)
        x0, x1 = self.xs[jl], self.xs[jr]
        w = x1 - x0
        frac = np.divide(x - x0, w, out=np.zeros_like(w), where=w > 0)
        inner = self.fs[jl] + np.clip(frac, 0.0, 1.0) * (self.fs[jr] - self.fs[jl])
        return np.where(j == 0, 0.0, np.where(j > m, 1.0, inner))

    def expected_max(self, n: int) -> float:
        # E[max] = x_max - integral F(x)^n dx; on a segment F is linear, so
        # integral_a^b F^n = w (F_b^{n+1} - F_a^{n+1}) / ((n+1)(F_b - F_a)).
        fa, fb = self.fs[:-1], self.fs[1:]
        w = np.diff(self.xs)
        d = fb - fa
        steep = d > 1e-12
        num = fb ** (n + 1) - fa ** (n + 1)
        integral = np.where(
            steep, w * np.divide(num, (n + 1) * d, out=np.zeros_like(d), where=steep), w * fa**n
        )
        return float(self.xs[-1] - integral.sum())

    def partial_mean(self, u: FloatArray) -> FloatArray:
        a, b = self.xs[:-1], self.xs[1:]
        knots_g = np.concatenate(([0.0], np.cumsum(self._df * (a + b) / 2.0)))
        j, x = self._segment(u)
        jm = np.maximum(j - 1, 0)
        g = knots_g[jm] + (u - self.fs[jm]) * (self.xs[jm] + x) / 2.0
        return np.where(j == 0, 0.0, g)


def _discrete_from_values(values: npt.ArrayLike, weights: npt.ArrayLike) -> _Discrete:
    v = np.asarray(values, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    keep = w > 0
    uniq, inv = np.unique(v[keep], return_inverse=True)
    p = np.bincount(inv, weights=w[keep], minlength=uniq.size)
    return _Discrete(uniq, p / p.sum())


def _slice_levels(max_points: int) -> FloatArray:
    """Probability levels cutting [0, 1] into at most `max_points` slices: uniform over the body,
    log-spaced in (1 - u) over the top decile (down to 1e-4), so tails keep their resolution."""
    if max_points < 8:
        return np.linspace(0.0, 1.0, max_points + 1)
    n_tail = max_points // 3
    n_body = max_points - n_tail - 1
    body = np.linspace(0.0, 0.9, n_body + 1)
    tail = 1.0 - np.logspace(-1.0, -4.0, n_tail + 1)[1:]
    return np.concatenate((body, tail, [1.0]))


# --------------------------------------------------------------------------------------------
# User-facing models
# --------------------------------------------------------------------------------------------


class TokenProbability(BaseModel):
    """One point of a `pairs` distribution. YAML may write it as [tokens, probability]."""

    model_config = _MODEL_CONFIG
    tokens: int = Field(ge=1, le=MAX_TOKENS, description="length in tokens")
    probability: float = Field(ge=0.0, le=1.0)

    @model_validator(mode="before")
    @classmethod
    def _from_sequence(cls, data: Any) -> Any:
        if isinstance(data, Sequence) and not isinstance(data, str | bytes):
            if len(data) != 2:
                raise ValueError(f"give [tokens, probability], got {len(data)} items")
            return {"tokens": data[0], "probability": data[1]}
        return data


class Histogram(BaseModel):
    """Bins [edges[i], edges[i+1]) in tokens, uniform density within each bin; give `counts`
    (e.g. from a trace) or `weights` (any non-negative scale; normalised)."""

    model_config = _MODEL_CONFIG
    edges: tuple[Annotated[float, Field(le=MAX_TOKENS)], ...] = Field(max_length=MAX_DISTRIBUTION_POINTS + 1)
    counts: tuple[Annotated[int, Field(ge=0, le=int(MAX_HISTOGRAM_WEIGHT))], ...] | None = Field(
        default=None, max_length=MAX_DISTRIBUTION_POINTS
    )
    weights: tuple[Annotated[float, Field(ge=0.0, le=MAX_HISTOGRAM_WEIGHT)], ...] | None = Field(
        default=None, max_length=MAX_DISTRIBUTION_POINTS
    )

    @field_validator("edges")
    @classmethod
    def _edges_ok(cls, v: tuple[float, ...]) -> tuple[float, ...]:
        if len(v) < 2:
            raise ValueError(f"need at least 2 bin edges, got {len(v)}")
        if not v[0] > 0:
            raise ValueError(f"lengths are positive; the first edge is {v[0]:g}")
        for i in range(1, len(v)):
            if not v[i] > v[i - 1]:
                raise ValueError(f"edges must increase strictly; edges[{i}] = {v[i]:g} <= {v[i - 1]:g}")
        return v

    @field_validator("counts", "weights")
    @classmethod
    def _nonneg(cls, v: tuple[float, ...] | None) -> tuple[float, ...] | None:
        if v is not None:
            for i, x in enumerate(v):
                if x < 0:
                    raise ValueError(f"item [{i}] is negative ({x:g})")
            if sum(v) <= 0:
                raise ValueError("all bins are empty")
        return v

    @model_validator(mode="after")
    def _one_weighting(self) -> Histogram:
        given = [n for n in ("counts", "weights") if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of counts or weights")
        w = getattr(self, given[0])
        if len(w) != len(self.edges) - 1:
            raise ValueError(
                f"{len(self.edges)} edges make {len(self.edges) - 1} bins, but {given[0]} has {len(w)}"
            )
        return self

    @property
    def bin_weights(self) -> FloatArray:
        w = self.counts if self.counts is not None else self.weights
        arr = np.asarray(w, dtype=np.float64)
        return arr / arr.sum()


_PCT_KEY = re.compile(r"^[pP](\d+(?:\.\d+)?)$")
_PCT_ALIASES = {"min": 0.0, "median": 50.0, "max": 100.0}


def _percentile_level(key: str) -> float:
    if key in _PCT_ALIASES:
        return _PCT_ALIASES[key]
    m = _PCT_KEY.match(key)
    if not m:
        raise ValueError(f"key {echo(key)} is not a percentile; write p50, p99.9, min, median or max")
    level = float(m.group(1))
    if level > 100:
        raise ValueError(f"key {echo(key)}: percentile above 100")
    return level


_FORMS = ("pairs", "histogram", "percentiles", "constant", "samples")


class LengthDistribution(BaseModel):
    """A token-length distribution in exactly one form:

    * `pairs`: [[tokens, probability], ...] (or {tokens, probability} items); probabilities sum
      to 1 within 1e-6. Exact discrete distribution.
    * `histogram`: {edges, counts | weights}; uniform within bins.
    * `percentiles`: {p50: 800, p90: 2000, p99: 4000} (also min/median/max); the quantile
      function is piecewise linear through the points. Below the lowest given level it is
      extrapolated linearly (floored at 1 token) down to p0, above the highest linearly up to
      p100 (capped at `MAX_TOKENS`) — give p99.9 or max for a heavy tail.
    * `constant`: every request has this many tokens. A bare integer is read as a constant.
    * `samples`: observed lengths (e.g. a trace); the empirical distribution, exact.

    Lengths are 1 .. `MAX_TOKENS` (10M) tokens; at most 100,000 pairs or bins, 1,000
    percentiles, 1,000,000 samples (the caps bound memory and the cost of every method).

    Methods work on the exact distribution; `support()` is the compact form for analytic code.
    """

    model_config = _MODEL_CONFIG
    pairs: tuple[TokenProbability, ...] | None = Field(default=None, max_length=MAX_DISTRIBUTION_POINTS)
    histogram: Histogram | None = None
    percentiles: dict[str, Annotated[float, Field(ge=1.0, le=MAX_TOKENS)]] | None = Field(
        default=None, max_length=MAX_PERCENTILE_KEYS
    )
    constant: Tokens | None = None
    samples: tuple[Tokens, ...] | None = Field(default=None, max_length=MAX_SAMPLES)

    # ---- validation ------------------------------------------------------------------------

    @model_validator(mode="before")
    @classmethod
    def _bare_int(cls, data: Any) -> Any:
        if isinstance(data, int) and not isinstance(data, bool):
            return {"constant": data}
        return data

    @field_validator("pairs")
    @classmethod
    def _pairs_ok(cls, v: tuple[TokenProbability, ...] | None) -> tuple[TokenProbability, ...] | None:
        if v is None:
            return v
        if not v:
            raise ValueError("is empty; give at least one [tokens, probability] pair")
        total = math.fsum(p.probability for p in v)
        if abs(total - 1.0) > PAIRS_SUM_TOLERANCE:
            raise ValueError(f"probabilities sum to {total:.9g}, not 1 (tolerance {PAIRS_SUM_TOLERANCE:g})")
        return v

    @field_validator("percentiles", mode="before")
    @classmethod
    def _percentile_keys_to_str(cls, v: Any) -> Any:
        # YAML {50: 800} gives int keys; read them as p50.
        if isinstance(v, Mapping):
            return {
                (f"p{k:g}" if isinstance(k, int | float) and not isinstance(k, bool) else k): x
                for k, x in v.items()
            }
        return v

    @field_validator("percentiles")
    @classmethod
    def _percentiles_ok(cls, v: dict[str, float] | None) -> dict[str, float] | None:
        if v is None:
            return v
        if len(v) < 2:
            raise ValueError(f"give at least two percentiles (got {len(v)}), e.g. {{p50: 800, p99: 4000}}")
        points: list[tuple[float, str, float]] = []
        for key, tokens in v.items():
            level = _percentile_level(key)
            if tokens < 1:
                raise ValueError(f"{key} = {tokens:g}; lengths are at least 1 token")
            points.append((level, key, tokens))
        points.sort()
        for (l0, k0, t0), (l1, k1, t1) in itertools.pairwise(points):
            if l1 == l0:
                raise ValueError(f"{k0} and {k1} are the same percentile")
            if t1 < t0:
                raise ValueError(f"not monotone: {k1} = {t1:g} is below {k0} = {t0:g}")
        return v

    @field_validator("samples")
    @classmethod
    def _samples_ok(cls, v: tuple[int, ...] | None) -> tuple[int, ...] | None:
        if v is None:
            return v
        if not v:
            raise ValueError("is empty; give at least one observed length")
        arr = np.asarray(v)
        bad = np.flatnonzero(arr <= 0)
        if bad.size:
            i = int(bad[0])
            raise ValueError(f"samples[{i}] = {v[i]}; lengths are at least 1 token")
        return v

    @model_validator(mode="after")
    def _exactly_one(self) -> LengthDistribution:
        given = [f for f in _FORMS if getattr(self, f) is not None]
        if len(given) != 1:
            what = "none" if not given else ", ".join(given)
            raise ValueError(f"give exactly one of {', '.join(_FORMS)} (got {what})")
        return self

    # ---- constructors ----------------------------------------------------------------------

    @classmethod
    def fixed(cls, tokens: int) -> LengthDistribution:
        """Every request has `tokens` tokens. Bad input raises InvalidInput (as do the other
        constructors below; field names are relative, e.g. "pairs[2].probability")."""
        return validate(cls, {"constant": tokens}, root="")

    @classmethod
    def from_pairs(cls, pairs: Sequence[tuple[int, float]]) -> LengthDistribution:
        return validate(cls, {"pairs": [list(p) for p in pairs]}, root="")

    @classmethod
    def from_percentiles(cls, percentiles: Mapping[str, float]) -> LengthDistribution:
        return validate(cls, {"percentiles": dict(percentiles)}, root="")

    @classmethod
    def from_samples(cls, samples: npt.ArrayLike, bins: int | None = None) -> LengthDistribution:
        """Empirical distribution of observed lengths (whole numbers ≥ 1). `bins=None` keeps
        the samples (exact); an int makes a histogram of at most that many bins with edges at
        sample quantiles (uniform levels over the body, log-spaced over the top decile as in
        `support`), each integer k standing for [k - 0.5, k + 0.5)."""
        arr = np.asarray(samples)
        exact = validate(cls, {"samples": arr.ravel().tolist()}, root="")
        if bins is None:
            return exact
        if bins < 1:
            raise InvalidInput("bins", f"must be at least 1, got {bins}")
        ints = np.asarray(exact.samples, dtype=np.int64)
        cuts = np.unique(np.quantile(ints, _slice_levels(bins), method="inverted_cdf"))
        upper = cuts[1:] if cuts.size > 1 else cuts
        edges = np.concatenate((cuts[:1] - 0.5, upper + 0.5))  # bins of whole integers
        # A sample at the longest length a workload takes ends its bin there, not half a token past
        # the range (MAX_TOKENS samples, from a trace, made edges the Histogram refuses).
        edges[-1] = min(edges[-1], MAX_TOKENS)
        counts, _ = np.histogram(ints, bins=edges)
        return cls(histogram=Histogram(edges=tuple(edges.tolist()), counts=tuple(int(c) for c in counts)))

    # ---- the exact distribution ------------------------------------------------------------

    @property
    def kind(self) -> str:
        """Which form this distribution was given in."""
        return next(f for f in _FORMS if getattr(self, f) is not None)

    @cached_property
    def _dist(self) -> _Dist:
        if self.constant is not None:
            return _Discrete(np.array([float(self.constant)]), np.array([1.0]))
        if self.pairs is not None:
            return _discrete_from_values([p.tokens for p in self.pairs], [p.probability for p in self.pairs])
        if self.samples is not None:
            uniq, counts = np.unique(np.asarray(self.samples, dtype=np.int64), return_counts=True)
            return _Discrete(uniq.astype(np.float64), counts / counts.sum())
        if self.histogram is not None:
            w = self.histogram.bin_weights
            fs = np.concatenate(([0.0], np.cumsum(w)))
            fs[-1] = 1.0
            return _PiecewiseCdf(np.asarray(self.histogram.edges, dtype=np.float64), fs)
        assert self.percentiles is not None
        pts = sorted((_percentile_level(k) / 100.0, float(v)) for k, v in self.percentiles.items())
        lv = [p[0] for p in pts]
        xv = [p[1] for p in pts]
        if lv[0] > 0.0:
            slope = (xv[1] - xv[0]) / (lv[1] - lv[0])
            lv.insert(0, 0.0)
            xv.insert(0, max(1.0, xv[0] - slope * lv[1]))
        if lv[-1] < 1.0:
            slope = (xv[-1] - xv[-2]) / (lv[-1] - lv[-2])
            xv.append(min(float(MAX_TOKENS), xv[-1] + slope * (1.0 - lv[-1])))
            lv.append(1.0)
        return _PiecewiseCdf(np.asarray(xv), np.asarray(lv))

    def mean(self) -> float:
        """E[tokens]."""
        return self._dist.mean()

    def second_moment(self) -> float:
        """E[tokens²]."""
        return self._dist.second_moment()

    def variance(self) -> float:
        m = self.mean()
        return max(0.0, self.second_moment() - m * m)

    def std(self) -> float:
        return math.sqrt(self.variance())

    def quantile(self, q: float) -> float:
        """The q-quantile (q in [0, 1]): inf{x : F(x) ≥ q}; exact for every form."""
        if not 0.0 <= q <= 1.0:
            raise InvalidInput("q", f"quantile level must be in [0, 1], got {q}")
        return float(self._dist.quantile(np.array([q], dtype=np.float64))[0])

    def quantiles(self, qs: npt.ArrayLike) -> FloatArray:
        """Vectorized `quantile`."""
        q = np.asarray(qs, dtype=np.float64)
        if q.size and (np.isnan(q).any() or q.min() < 0.0 or q.max() > 1.0):
            raise InvalidInput("q", "quantile levels must be in [0, 1]")
        return self._dist.quantile(q)

    def cdf(self, tokens: float) -> float:
        """P(length ≤ tokens)."""
        return float(self._dist.cdf(np.array([tokens], dtype=np.float64))[0])

    def expected_max(self, n: int) -> float:
        """E[max of n iid draws] (n ≥ 1). Exact for discrete forms
        (Σ x_i (F(x_i)^n − F(x_{i−1})^n)) and, by integrating the piecewise-linear CDF in
        closed form, for histograms and percentiles too."""
        if n < 1:
            raise InvalidInput("n", f"must be at least 1, got {n}")
        return self._dist.expected_max(int(n))

    @property
    def min_tokens(self) -> float:
        return self.quantile(0.0)

    @property
    def max_tokens(self) -> float:
        return self.quantile(1.0)

    def sample(self, rng: np.random.Generator, size: int) -> IntArray:
        """`size` iid lengths (int64, ≥ 1) by inverse transform of rng.random(size)."""
        if size < 0:
            raise InvalidInput("size", f"must be non-negative, got {size}")
        x = self._dist.quantile(rng.random(size))
        return np.maximum(np.rint(x), 1.0).astype(np.int64)

    def support(self, max_points: int = DEFAULT_SUPPORT_POINTS) -> tuple[FloatArray, FloatArray]:
        """Compact discrete form (values ascending, probabilities summing to 1), at most
        `max_points` points. Exact when the distribution has that few atoms; otherwise the
        probability axis is cut into slices (uniform over the body, log-spaced over the top
        decile down to 1e-4) and each slice is represented by its conditional mean, so the
        mean is preserved exactly and tails keep their resolution. Values are floats."""
        if max_points < 1:
            raise InvalidInput("max_points", f"must be at least 1, got {max_points}")
        cache = self._support_cache
        if max_points not in cache:
            cache[max_points] = self._compute_support(max_points)
        v, p = cache[max_points]
        return v.copy(), p.copy()

    @cached_property
    def _support_cache(self) -> dict[int, tuple[FloatArray, FloatArray]]:
        return {}

    def _compute_support(self, max_points: int) -> tuple[FloatArray, FloatArray]:
        d = self._dist
        if isinstance(d, _Discrete) and d.values.size <= max_points:
            return d.values.copy(), d.probs.copy()
        u = _slice_levels(max_points)
        g = d.partial_mean(u)
        width = np.diff(u)
        values = np.diff(g) / width
        # Slices inside one atom get the atom's value: merge equal neighbours.
        keep = np.concatenate(([True], ~np.isclose(values[1:], values[:-1], rtol=1e-9, atol=0.0)))
        group = np.cumsum(keep) - 1
        probs = np.bincount(group, weights=width)
        sums = np.bincount(group, weights=values * width)
        vals = sums / probs
        return vals, probs / probs.sum()


class RateBucket(BaseModel):
    """A stretch of time with a constant mean arrival rate: `duration_s` in 0.001 .. 1e7 s,
    `requests_per_s` in 0 .. 1e6 (the series' mean must be at least 1e-7)."""

    model_config = _MODEL_CONFIG
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

    model_config = _MODEL_CONFIG
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

    model_config = _MODEL_CONFIG
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
