"""Bounded nonlinear least squares with per-parameter identifiability diagnostics.

A thin wrapper over `scipy.optimize.least_squares` for small models (a handful of parameters,
tens of residuals): it runs a fixed list of starting points (so a non-smooth objective does not
leave the answer to one start's luck), keeps the best, and then asks of every parameter whether
the data pin it down:

- `binding_bound`: it sits on a bound that the data push against (pinned by the bound);
- `sensitivity`: the norm of its Jacobian column; zero means no residual depends on it;
- `independence`: the sine of the angle between its (normalized) Jacobian column and the span of
  the other free parameters' columns. 1 = the data see it on its own; 0 = its effect is a
  combination of the others' (collinear), so the data cannot separate it from them;
- `std_error`: the linearized 1-sigma error, from the covariance s^2 (J^T J)^-1 with
  s = max(rms residual, noise_floor), so a perfect fit of a few rows does not claim infinite
  precision.

No domain vocabulary here: parameters are names and numbers; what a name means and what to say
when it cannot be pinned is the caller's business.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

Residuals = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class ParameterDiagnostics:
    name: str
    value: float
    binding_bound: bool
    sensitivity: float
    independence: float
    std_error: float
    most_aligned: str | None  # the free parameter whose column is closest in direction
    alignment: float  # |cosine| with that parameter's column

    def identifiable(self, min_independence: float) -> bool:
        """Pinned by the data (or by a bound the data push against)."""
        return self.binding_bound or (self.sensitivity > 0.0 and self.independence >= min_independence)


@dataclass(frozen=True)
class FitResult:
    names: tuple[str, ...]
    x: np.ndarray
    residuals: np.ndarray
    success: bool
    message: str
    nfev: int
    diagnostics: tuple[ParameterDiagnostics, ...]

    @property
    def params(self) -> dict[str, float]:
        return {n: float(v) for n, v in zip(self.names, self.x, strict=True)}

    @property
    def rms(self) -> float:
        return float(np.sqrt(np.mean(self.residuals**2))) if self.residuals.size else 0.0

    def unidentifiable(self, min_independence: float) -> list[ParameterDiagnostics]:
        return [d for d in self.diagnostics if not d.identifiable(min_independence)]


def least_squares_fit(
    residuals: Residuals,
    names: Sequence[str],
    starts: Sequence[Sequence[float]],
    lower: Sequence[float],
    upper: Sequence[float],
    *,
    x_scale: Sequence[float] | None = None,
    noise_floor: float = 0.0,
    tol: float = 1e-12,
    max_nfev: int | None = None,
) -> FitResult:
    """Minimize 0.5 * sum(residuals(x)^2) within [lower, upper] from each start; keep the best.

    `x_scale`: typical magnitude of each parameter (scipy's x_scale); default: from the Jacobian.
    `noise_floor`: the smallest residual scale assumed when estimating standard errors."""
    n = len(names)
    lo = np.asarray(lower, dtype=float)
    hi = np.asarray(upper, dtype=float)
    if lo.shape != (n,) or hi.shape != (n,) or not np.all(lo < hi):
        raise ValueError("lower and upper need one value per parameter, lower < upper")
    if not starts:
        raise ValueError("at least one start is needed")
    scale: str | np.ndarray = "jac" if x_scale is None else np.asarray(x_scale, dtype=float)
    best = None
    for start in starts:
        x0 = np.clip(np.asarray(start, dtype=float), lo, hi)
        x0 = np.where(x0 <= lo, lo + 1e-9 * (hi - lo), np.where(x0 >= hi, hi - 1e-9 * (hi - lo), x0))
        res = least_squares(
            residuals,
            x0,
            bounds=(lo, hi),
            x_scale=scale,
            ftol=tol,
            xtol=tol,
            gtol=tol,
            max_nfev=max_nfev,
        )
        if best is None or res.cost < best.cost:
            best = res
    assert best is not None
    r = np.asarray(residuals(best.x), dtype=float)
    jac = _jacobian(residuals, best.x, r, lo, hi)
    diags = _diagnostics(list(names), best.x, r, jac, lo, hi, noise_floor)
    return FitResult(
        names=tuple(names),
        x=np.asarray(best.x, dtype=float),
        residuals=r,
        success=bool(best.success),
        message=str(best.message),
        nfev=int(best.nfev),
        diagnostics=diags,
    )


def _jacobian(f: Residuals, x: np.ndarray, r0: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Central differences where both sides fit in the bounds, one-sided at a bound."""
    jac = np.empty((r0.size, x.size))
    for i in range(x.size):
        h = 1e-6 * max(abs(x[i]), 1e-3 * (hi[i] - lo[i]) if math.isfinite(hi[i] - lo[i]) else 1.0)
        up, down = x.copy(), x.copy()
        up[i] = min(x[i] + h, hi[i])
        down[i] = max(x[i] - h, lo[i])
        step = up[i] - down[i]
        if step <= 0:
            jac[:, i] = 0.0
            continue
        f_up = r0 if up[i] == x[i] else np.asarray(f(up), dtype=float)
        f_down = r0 if down[i] == x[i] else np.asarray(f(down), dtype=float)
        jac[:, i] = (f_up - f_down) / step
    return jac


def _diagnostics(
    names: list[str],
    x: np.ndarray,
    r: np.ndarray,
    jac: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    noise_floor: float,
) -> tuple[ParameterDiagnostics, ...]:
    n = x.size
    grad = jac.T @ r  # gradient of 0.5 |r|^2
    norms = np.linalg.norm(jac, axis=0)
    biggest = float(norms.max()) if n else 0.0
    tiny = 1e-12 * max(biggest, 1e-300)
    span = hi - lo
    binding = np.zeros(n, dtype=bool)
    for i in range(n):
        near_lo = x[i] - lo[i] <= 1e-7 * max(span[i], abs(lo[i]), 1e-12)
        near_hi = hi[i] - x[i] <= 1e-7 * max(span[i], abs(hi[i]), 1e-12)
        g_tol = 1e-9 * max(norms[i] * float(np.linalg.norm(r)), 1e-300)
        # at a lower bound the data push down (gradient > 0); at an upper bound, up (< 0)
        binding[i] = norms[i] > tiny and ((near_lo and grad[i] > g_tol) or (near_hi and grad[i] < -g_tol))
    free = [i for i in range(n) if not binding[i] and norms[i] > tiny]
    unit = np.zeros_like(jac)
    for i in free:
        unit[:, i] = jac[:, i] / norms[i]
    independence = np.zeros(n)
    aligned: list[tuple[str | None, float]] = [(None, 0.0)] * n
    for i in free:
        others = [j for j in free if j != i]
        if others:
            a = unit[:, others]
            coef, *_ = np.linalg.lstsq(a, unit[:, i], rcond=None)
            independence[i] = float(np.linalg.norm(unit[:, i] - a @ coef))
            cosines = np.abs(a.T @ unit[:, i])
            k = int(np.argmax(cosines))
            aligned[i] = (names[others[k]], float(cosines[k]))
        else:
            independence[i] = 1.0
    for i in range(n):
        if binding[i]:
            independence[i] = 1.0
    dof = max(r.size - len(free), 1)
    s = max(math.sqrt(float(r @ r) / dof), noise_floor)
    std = np.full(n, math.inf)
    for i in range(n):
        if binding[i]:
            std[i] = 0.0
    ok = [i for i in free if independence[i] > 1e-9]
    if ok:
        jf = jac[:, ok]
        try:
            cov = s**2 * np.linalg.inv(jf.T @ jf)
            for k, i in enumerate(ok):
                std[i] = math.sqrt(max(float(cov[k, k]), 0.0))
        except np.linalg.LinAlgError:
            pass
    return tuple(
        ParameterDiagnostics(
            name=names[i],
            value=float(x[i]),
            binding_bound=bool(binding[i]),
            sensitivity=float(norms[i]),
            independence=float(independence[i]),
            std_error=float(std[i]),
            most_aligned=aligned[i][0],
            alignment=aligned[i][1],
        )
        for i in range(n)
    )
