"""Token-length distributions as the user writes them (`pairs`, `histogram`, `percentiles`,
`constant`, `samples`): validated, then answered exactly through planner.workload.exact."""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import Annotated, Any

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, Field, field_validator, model_validator

from planner.errors import InvalidInput, echo
from planner.validation import validate
from planner.workload.exact import Discrete, Dist, PiecewiseCdf, discrete_from_values, slice_levels
from planner.workload.limits import (
    DEFAULT_SUPPORT_POINTS,
    MAX_DISTRIBUTION_POINTS,
    MAX_HISTOGRAM_WEIGHT,
    MAX_PERCENTILE_KEYS,
    MAX_SAMPLES,
    MAX_TOKENS,
    MODEL_CONFIG,
    PAIRS_SUM_TOLERANCE,
    FloatArray,
    IntArray,
    Tokens,
)


class TokenProbability(BaseModel):
    """One point of a `pairs` distribution. YAML may write it as [tokens, probability]."""

    model_config = MODEL_CONFIG
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

    model_config = MODEL_CONFIG
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

    model_config = MODEL_CONFIG
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
        cuts = np.unique(np.quantile(ints, slice_levels(bins), method="inverted_cdf"))
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
    def _dist(self) -> Dist:
        if self.constant is not None:
            return Discrete(np.array([float(self.constant)]), np.array([1.0]))
        if self.pairs is not None:
            return discrete_from_values([p.tokens for p in self.pairs], [p.probability for p in self.pairs])
        if self.samples is not None:
            uniq, counts = np.unique(np.asarray(self.samples, dtype=np.int64), return_counts=True)
            return Discrete(uniq.astype(np.float64), counts / counts.sum())
        if self.histogram is not None:
            w = self.histogram.bin_weights
            fs = np.concatenate(([0.0], np.cumsum(w)))
            fs[-1] = 1.0
            return PiecewiseCdf(np.asarray(self.histogram.edges, dtype=np.float64), fs)
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
        return PiecewiseCdf(np.asarray(xv), np.asarray(lv))

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
        if isinstance(d, Discrete) and d.values.size <= max_points:
            return d.values.copy(), d.probs.copy()
        u = slice_levels(max_points)
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
