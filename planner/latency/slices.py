"""The probability slices every quantile of the latency model is read over: a lognormal's
conditional means over SLICE_EDGES (optionally conditioned below a cap), the uniform's (the
rest of the step under way, U L), and the decode-only slices' spread. Scalar math on purpose:
these run on the root-finding hot path, where 8 values make numpy slower than `math`."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from planner.latency.quantiles import SPREAD
from planner.latency.scipy_special import special

FloatArray = npt.NDArray[np.float64]
MIN_SLICE_SPREAD = 1e-6  # `decode_slice_spread`'s floor: tail_quantiles needs a width

SLICE_EDGES = np.array([0.0, 0.25, 0.5, 0.75, 0.9, 0.95, 0.98, 0.99, 1.0])
SLICE_PROBS = np.diff(SLICE_EDGES)
# Phi^-1 at SLICE_EDGES, as scipy.special.ndtri gives them (tests/test_startup.py holds them to
# it): written out so that importing the engine imports no SciPy (planner/latency/scipy_special.py).
SLICE_NORMAL_QUANTILES = np.array(
    [
        -np.inf,
        -0.6744897501960817,
        0.0,
        0.6744897501960817,
        1.2815515655446004,
        1.6448536269514722,
        2.0537489106318225,
        2.3263478740408408,
        np.inf,
    ]
)
_SQRT_HALF = math.sqrt(0.5)
SIGMA_UNIFORM = math.sqrt(math.log(4.0 / 3.0))  # U L at a fixed L: E[D^2] / E[D]^2 = (1/3) / (1/4)


_SLICE_ZS = [float(z) * -_SQRT_HALF for z in SLICE_NORMAL_QUANTILES]  # -z / sqrt(2) at each edge
SLICE_PROB_LIST = SLICE_PROBS.tolist()
_SLICE_EDGE_LIST = SLICE_EDGES.tolist()
_SLICE_ZP = list(zip(_SLICE_ZS[1:], SLICE_PROB_LIST, strict=True))  # (upper edge, probability) per slice


def lognormal_slice_list(sigma: float, scale: float = 1.0) -> list[float]:
    """Conditional means of a lognormal of mean `scale` and log-sd sigma over the probability
    slices SLICE_EDGES: E[Y | slice j] = scale (Phi(z_b - sigma) - Phi(z_a - sigma)) / (b - a), z
    the edges' normal quantiles; Phi(x) = erfc(-x / sqrt 2) / 2 (scalar math: cheaper than numpy
    here; one pass, the same operations in the same order as the two-list form)."""
    h = sigma * _SQRT_HALF
    erfc = math.erfc
    prev = 0.5 * erfc(_SLICE_ZS[0] + h)
    out = []
    for z, p in _SLICE_ZP:
        cur = 0.5 * erfc(z + h)
        out.append(scale * ((cur - prev) / p))
        prev = cur
    return out


def lognormal_slice_list_below(sigma: float, scale: float, top: float) -> list[float]:
    """`lognormal_slice_list` of the lognormal conditioned to at most `top`: its probability
    slices rescaled to [0, F(top)], each slice's conditional mean (z the rescaled edges' normal
    quantiles: E[Y | z_a < Z < z_b] = scale (Phi(z_b - sigma) - Phi(z_a - sigma)) / (b - a));
    the top slice is `lognormal_top_slice_below`'s, the same arithmetic."""
    below = _below_share(sigma, scale, top)
    if below is None:
        return lognormal_slice_list(sigma, scale) if top > scale else [min(scale, top)] * len(SLICE_PROB_LIST)
    f_top = below[0]
    if f_top <= 1e-12:
        return [top] * len(SLICE_PROB_LIST)
    ndtri, erfc = special.ndtri, math.erfc  # scalar calls: cheaper than numpy on 8 values
    prev = 0.0  # Phi(z_0 - sigma), z_0 = -inf
    out = []
    for hi, p in zip(_SLICE_EDGE_LIST[1:-1], SLICE_PROB_LIST[:-1], strict=True):
        cur = 0.5 * erfc((sigma - float(ndtri(hi * f_top))) * _SQRT_HALF)
        out.append(min(scale * (cur - prev) / (p * f_top), top))
        prev = cur
    out.append(_top_below(sigma, scale, top, f_top, below[1]))
    return out


def lognormal_top_slice_below(sigma: float, scale: float, top: float) -> float:
    """`lognormal_slice_list_below(sigma, scale, top)[-1]` alone (one ndtri, where a caller
    needs only the largest slice)."""
    below = _below_share(sigma, scale, top)
    if below is None:
        return lognormal_top_slice(sigma, scale) if top > scale else min(scale, top)
    return top if below[0] <= 1e-12 else _top_below(sigma, scale, top, *below)


def _top_below(sigma: float, scale: float, top: float, f_top: float, u: float) -> float:
    """The conditioned lognormal's top slice, between the rescaled edge z and u (Phi(u) = f_top)."""
    z = float(special.ndtri(_SLICE_EDGE_LIST[-2] * f_top))
    mean = scale * 0.5 * (math.erfc((sigma - u) * _SQRT_HALF) - math.erfc((sigma - z) * _SQRT_HALF))
    return min(mean / (SLICE_PROB_LIST[-1] * f_top), top)


def _below_share(sigma: float, scale: float, top: float) -> tuple[float, float] | None:
    """(P(Y <= top), u) for the lognormal of mean `scale` and log-sd sigma, P(Y <= top) = Phi(u);
    None where conditioning changes nothing (Y below `top` but for 1e-12) or the lognormal is
    degenerate."""
    if not (sigma > 0.0 and scale > 0.0 and top > 0.0):
        return None
    u = (math.log(top / scale) + 0.5 * sigma * sigma) / sigma
    f_top = 0.5 * math.erfc(-u * _SQRT_HALF)
    return None if f_top >= 1.0 - 1e-12 else (f_top, u)


def decode_slice_spread(seen: list[float]) -> float:
    """How far each decode-only slice's step time is spread (relative half-width): SPREAD, but
    no wider than the slices' own range, (max - min) / (max + min). As the count stops
    wandering (a lone decoder at vanishing load) the slices close onto one step and so does
    their spread: ITL then meets the idle floor, one decode step, instead of sitting 5% above
    it at every positive rate (a target between the two read as no rate meeting the SLO)."""
    lo, hi = seen[0], seen[-1]
    return min(SPREAD, max((hi - lo) / (hi + lo), MIN_SLICE_SPREAD)) if hi + lo > 0 else SPREAD


def lognormal_top_slice(sigma: float, scale: float = 1.0) -> float:
    """`lognormal_slice_list(sigma, scale)[-1]` alone, the same arithmetic (the top slice's
    upper edge is Phi = 1 exactly): one erfc where a caller needs only the largest slice."""
    prev = 0.5 * math.erfc(_SLICE_ZS[-2] + sigma * _SQRT_HALF)
    return scale * ((1.0 - prev) / SLICE_PROB_LIST[-1])


def lognormal_slices(sigma: float) -> FloatArray:
    """`lognormal_slice_list` as an array."""
    return np.array(lognormal_slice_list(sigma))


UNIFORM_SLICES = lognormal_slices(SIGMA_UNIFORM)  # U L's shape (`Engine.delay`): fixed
UNIFORM_SLICE_LIST = UNIFORM_SLICES.tolist()
UNIFORM_SLICE_MEANS = 0.5 * (
    SLICE_EDGES[1:] + SLICE_EDGES[:-1]
)  # a uniform's slice means (`delay.delay_chain`)
