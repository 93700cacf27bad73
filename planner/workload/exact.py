"""The exact distributions behind a LengthDistribution (plain numpy, built once per distribution):
a finite discrete one and a piecewise-linear CDF, with the moments, quantiles and E[max] the
analytic code reads."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

import numpy as np
import numpy.typing as npt

from planner.workload.limits import FloatArray


class Dist(Protocol):
    def mean(self) -> float: ...
    def second_moment(self) -> float: ...
    def quantile(self, q: FloatArray) -> FloatArray: ...
    def cdf(self, x: FloatArray) -> FloatArray: ...
    def expected_max(self, n: int) -> float: ...
    def partial_mean(self, u: FloatArray) -> FloatArray: ...


@dataclass(frozen=True)
class Discrete:
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
class PiecewiseCdf:
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


def discrete_from_values(values: npt.ArrayLike, weights: npt.ArrayLike) -> Discrete:
    v = np.asarray(values, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    keep = w > 0
    uniq, inv = np.unique(v[keep], return_inverse=True)
    p = np.bincount(inv, weights=w[keep], minlength=uniq.size)
    return Discrete(uniq, p / p.sum())


def slice_levels(max_points: int) -> FloatArray:
    """Probability levels cutting [0, 1] into at most `max_points` slices: uniform over the body,
    log-spaced in (1 - u) over the top decile (down to 1e-4), so tails keep their resolution."""
    if max_points < 8:
        return np.linspace(0.0, 1.0, max_points + 1)
    n_tail = max_points // 3
    n_body = max_points - n_tail - 1
    body = np.linspace(0.0, 0.9, n_body + 1)
    tail = 1.0 - np.logspace(-1.0, -4.0, n_tail + 1)[1:]
    return np.concatenate((body, tail, [1.0]))
