"""The queueing pieces of the latency model (planner/latency/queueing.py, planner/latency/quantiles.py) against known results,
each derived below from its textbook source, and one engine state worked out by hand.

Sources (standard results; no equation numbers are relied on):
* [K] L. Kleinrock, Queueing Systems, Vol. I: Theory (Wiley, 1975): M/M/1, M/G/1
  (Pollaczek-Khinchine) and G/M/1 waiting times.
* [GH] D. Gross, J. Shortle, J. Thompson, C. Harris, Fundamentals of Queueing Theory (4th ed.,
  Wiley, 2008): the same, and GI/M/1 with Erlang arrivals.
* [Ki] J. F. C. Kingman, "On queues in heavy traffic", J. R. Stat. Soc. B 24 (1962): the GI/G/1
  mean wait (c_a^2 + c_s^2) / (2 (1 - rho)) E[S], exact as rho -> 1.

Notation: E[S] the mean service, rho = lambda E[S], mu = 1 / E[S], c_a^2 and c_s^2 the squared
coefficients of variation of the arrival gaps and of the service; gamma gaps of shape k have
c_a^2 = 1 / k. W is the wait in queue, T = W + S the response time.

Tolerances. Exact closed forms are compared at ~1e-12 relative (the code evaluates the same
formula in another order: a few ulps). Where the code finds a root (GI/M/1's sigma), the float
sigma is off by the rounding of the equation's right-hand side over the root's conditioning
(`sigma_room`: ~1e-14 absolute, more as rho -> 1 or for large k), and 1 / (1 - sigma) by that
over 1 - sigma. Approximations are tested only where they are exact: at their exact special
cases and in their limits, with the limit's error order stated.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np
import pytest
from scipy import special

from planner.costmodel.steptime import StepCoefficients
from planner.latency.engine import Engine
from planner.latency.quantiles import (
    SPREAD,
    phase_excess,
    response_quantiles,
    response_quantiles_phases,
    tail_quantiles,
)
from planner.latency.queueing import (
    Wait,
    WaitDecayTable,
    gamma_wait_probability,
    gg1_wait,
    shift_phases,
    wait_beyond,
    wait_decay_s,
    wait_phases,
)
from planner.latency.slices import SLICE_EDGES, SLICE_PROBS, lognormal_slices
from planner.latency.stats import WorkloadStats
from planner.scheduler_config import SchedulerConfig
from planner.workload import Workload

EXACT = 1e-12  # relative: the same closed form evaluated in another order
SIGMA_ABS = 1e-14  # absolute on sigma: a few ulps of 1 (the root is a float in (0, 1))


# ---- a literal reference for GI/M/1's sigma --------------------------------------------------


def gim1_sigma_reference(rho: float, k: float) -> float:
    """GI/M/1 [K, GH]: an arrival waits with probability sigma, the root in (0, 1) of
    sigma = A*(mu (1 - sigma)), A* the Laplace-Stieltjes transform of the gap distribution.
    Gamma gaps of shape k and mean 1/lambda have A*(s) = (k lambda / (k lambda + s))^k, so with
    mu (1 - sigma) / (k lambda) = (1 - sigma) / (k rho):

        sigma = (k rho / (k rho + 1 - sigma))^k.

    Solved by plain bisection on u = 1 - sigma (so that a sigma near 1 keeps its digits), in
    logs: g(u) = -k log1p(u / (k rho)) - log1p(-u) = log(rhs) - log(sigma). g < 0 for small
    u > 0 (g ~ -u (1/rho - 1): the trivial root sigma = 1 is left downwards when rho < 1) and
    g -> +inf as u -> 1, and g is convex in u, so it has one root in (0, 1). Halving until the
    midpoint equals an end (adjacent floats) takes at most ~1100 halvings."""
    lo, hi = 0.0, 1.0  # g(lo) < 0 <= g(hi) (g(1) = +inf)
    for _ in range(2000):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        g = -k * math.log1p(mid / (k * rho)) - math.log1p(-mid)
        if g < 0:
            lo = mid
        else:
            hi = mid
    return 1.0 - 0.5 * (lo + hi)


def sigma_room(rho: float, k: float, sigma: float) -> float:
    """Absolute room for a float evaluation of sigma: the right-hand side h(sigma) =
    (k rho / (k rho + 1 - sigma))^k is computed to a few ulps, times k for k > 1 (the base's ulp
    raised to the k-th power), and a root of h(sigma) - sigma moves by that error over
    |1 - h'(sigma)|, h'(sigma) = k sigma / (k rho + 1 - sigma): the root's condition number, which
    grows as rho -> 1 (the root nears the trivial one at 1)."""
    slope = 1.0 - k * sigma / (k * rho + 1.0 - sigma)
    return SIGMA_ABS * max(1.0, k) / abs(slope)


def test_reference_bisection_reproduces_the_poisson_root() -> None:
    """k = 1 (Poisson): sigma = rho / (rho + 1 - sigma) <=> sigma^2 - (1 + rho) sigma + rho = 0
    <=> (sigma - 1)(sigma - rho) = 0, so sigma = rho: the reference itself is checked."""
    for rho in (0.05, 0.5, 0.95):
        assert gim1_sigma_reference(rho, 1.0) == pytest.approx(rho, abs=sigma_room(rho, 1.0, rho))


# ---- M/M/1: everything exact ------------------------------------------------------------------

RHOS = (0.01, 0.2, 0.5, 0.9, 0.99)


@pytest.mark.parametrize("rho", RHOS)
def test_mm1_wait(rho: float) -> None:
    """M/M/1 [K]: P(W > 0) = rho, and P(W > t) = rho exp(-mu (1 - rho) t), so the wait is
    exponential with mean E[S] / (1 - rho) given that it is positive; E[W] = rho E[S] / (1 - rho);
    the wait's q-quantile (q > 1 - rho) solves rho exp(-(1 - rho) t / E[S]) = 1 - q:
    t_q = E[S] / (1 - rho) ln(rho / (1 - q)); 0 when rho <= 1 - q (no wait is that likely)."""
    es = 0.037
    w = gg1_wait(rho, es, 1.0, 1.0)
    assert w.prob == pytest.approx(rho, rel=EXACT)
    assert w.mean_if_waiting_s == pytest.approx(es / (1.0 - rho), rel=EXACT)
    assert w.mean_s == pytest.approx(rho * es / (1.0 - rho), rel=EXACT)
    for t in (0.0, es, 10.0 * es):
        tail = w.prob * math.exp(-t / w.mean_if_waiting_s)
        assert tail == pytest.approx(rho * math.exp(-(1.0 - rho) * t / es), rel=EXACT)
    for q in (0.5, 0.9, 0.99):
        expected = es / (1.0 - rho) * math.log(rho / (1.0 - q)) if rho > 1.0 - q else 0.0
        assert w.quantile(q) == pytest.approx(expected, rel=EXACT, abs=1e-300)


@pytest.mark.parametrize("rho", (0.2, 0.5, 0.9))
def test_mm1_response_time_is_exponential(rho: float) -> None:
    """M/M/1 [K]: T = W + S is exponential with rate mu (1 - rho), so its q-quantile is
    t_q = -E[S] ln(1 - q) / (1 - rho) (p50: E[S] ln 2 / (1 - rho); p99: E[S] ln 100 / (1 - rho)).
    Under FCFS an arrival's wait does not depend on its own service, which is what
    `response_quantiles` assumes.

    `response_quantiles` takes a discrete S, so S ~ Exp(mean E[S]) is given as N equally likely
    points at its quantiles (i - 1/2)/N, i = 1..N. That discrete CDF F_N is within
    delta = 1/(2N) of the exponential's F everywhere (at each point it jumps from F - delta to
    F + delta). Convolving with W keeps the bound: |P(W + S_N <= x) - P(W + S <= x)| =
    |E_W[F_N(x - W) - F(x - W)]| <= delta. So the discrete answer at level q lies between the
    exact quantiles at q - delta and q + delta: no tolerance to choose."""
    es, n = 0.25, 100_000
    w = gg1_wait(rho, es, 1.0, 1.0)
    u = (np.arange(n) + 0.5) / n
    service = -es * np.log1p(-u)
    probs = np.full(n, 1.0 / n)
    levels = np.array([0.5, 0.9, 0.99])
    got = response_quantiles(service, probs, w, levels)
    delta = 0.5 / n
    for g, q in zip(got.tolist(), levels.tolist(), strict=True):
        lo = -es * math.log(1.0 - (q - delta)) / (1.0 - rho)
        hi = -es * math.log(1.0 - (q + delta)) / (1.0 - rho)
        assert lo * (1.0 - 1e-12) <= g <= hi * (1.0 + 1e-12), (q, lo, g, hi)
    # For scale: the exact p99 (E[S] ln 100 / (1 - rho)); the bracket above is ~0.03% wide there.
    assert got[2] == pytest.approx(es * math.log(100.0) / (1.0 - rho), rel=1e-3)


# ---- M/G/1 (Pollaczek-Khinchine): P(W > 0) and the mean exact ------------------------------


@pytest.mark.parametrize("cs2", (0.0, 0.25, 1.0, 4.0))
@pytest.mark.parametrize("rho", RHOS)
def test_mg1_mean_wait_is_pollaczek_khinchine(rho: float, cs2: float) -> None:
    """M/G/1 [K, GH]: by PASTA an arrival waits with probability rho (the server's busy share),
    and the Pollaczek-Khinchine mean wait is E[W] = rho (1 + c_s^2) / (2 (1 - rho)) E[S]. M/D/1
    (c_s^2 = 0): E[W] = rho / (2 (1 - rho)) E[S], half the M/M/1 wait; M/M/1 (c_s^2 = 1):
    rho / (1 - rho) E[S]. (Only these two moments are exact: the M/G/1 wait is not exponential
    in general, so no percentile is tested here.)"""
    es = 0.8
    w = gg1_wait(rho, es, 1.0, cs2)
    assert w.prob == pytest.approx(rho, rel=EXACT)
    assert w.mean_s == pytest.approx(rho * (1.0 + cs2) / (2.0 * (1.0 - rho)) * es, rel=EXACT)
    if cs2 == 0.0:
        assert w.mean_s == pytest.approx(rho / (2.0 * (1.0 - rho)) * es, rel=EXACT)


# ---- GI/M/1 with gamma gaps ---------------------------------------------------------------------

# k = 0.0057 is examples/bursty-code.yaml (gap CV 13.2); its prefill queue runs at rho ~ 0.13.
SHAPES = (0.001, 0.0057, 0.05, 0.5, 1.0 - 1e-6, 1.0, 1.0 + 1e-6, 2.0, 10.0, 1000.0)
GIM1_RHOS = (0.01, 0.13, 0.5, 0.9, 0.99)


@pytest.mark.parametrize("k", SHAPES)
@pytest.mark.parametrize("rho", GIM1_RHOS)
def test_gamma_wait_probability_solves_gim1(rho: float, k: float) -> None:
    """sigma of `gamma_wait_probability` = the bisection root of sigma = (k rho/(k rho + 1 - sigma))^k
    (see `gim1_sigma_reference`), within the rounding `sigma_room` allows."""
    ref = gim1_sigma_reference(rho, k)
    got = gamma_wait_probability(rho, k)
    assert got == pytest.approx(ref, abs=sigma_room(rho, k, ref))
    # Burstier gaps queue more: sigma > rho for k < 1, sigma < rho for k > 1 ([K], G/M/1).
    if k < 1.0 - 1e-3:
        assert got > rho
    elif k > 1.0 + 1e-3:
        assert got < rho


@pytest.mark.parametrize("k", SHAPES)
@pytest.mark.parametrize("rho", GIM1_RHOS)
def test_gim1_wait(rho: float, k: float) -> None:
    """GI/M/1 [K, GH] (exponential service, c_s^2 = 1): P(W > t) = sigma exp(-mu (1 - sigma) t):
    positive with probability sigma, then exponential with mean E[S] / (1 - sigma); so
    E[W] = sigma E[S] / (1 - sigma). 1/(1 - sigma) is compared with the room the rounding of
    sigma (`sigma_room`) leaves it: relative room / (1 - sigma)."""
    es = 0.05
    ref = gim1_sigma_reference(rho, k)
    w = gg1_wait(rho, es, 1.0 / k, 1.0)
    abs_room = sigma_room(rho, k, ref)
    room = abs_room / (1.0 - ref) + EXACT
    assert w.prob == pytest.approx(ref, abs=abs_room)
    assert w.mean_if_waiting_s == pytest.approx(es / (1.0 - ref), rel=room)
    assert w.mean_s == pytest.approx(ref * es / (1.0 - ref), rel=room)
    t = 3.0 * es
    tail = w.prob * math.exp(-t / w.mean_if_waiting_s)
    assert tail == pytest.approx(ref * math.exp(-(1.0 - ref) * t / es), rel=room)


@pytest.mark.parametrize("rho", (0.01, 0.3, 0.5, 0.75, 0.9, 0.99))
def test_erlang2_arrivals_closed_form(rho: float) -> None:
    """E2/M/1 (gamma gaps of shape k = 2, Erlang-2) [GH]: with u = 1 - sigma,
    sigma = (2 rho / (2 rho + u))^2 <=> (1 - u)(2 rho + u)^2 = 4 rho^2. Expanding,
    4 rho u + u^2 - 4 rho^2 u - 4 rho u^2 - u^3 = 0; dividing by u (u = 0 is the trivial root),
    u^2 + (4 rho - 1) u - 4 rho (1 - rho) = 0, whose positive root gives

        sigma = (1 + 4 rho - sqrt(1 + 8 rho)) / 2

    (rho = 0.5: (3 - sqrt 5)/2 = 0.381966...; rho -> 1: (5 - 3)/2 = 1)."""
    expected = (1.0 + 4.0 * rho - math.sqrt(1.0 + 8.0 * rho)) / 2.0
    room = sigma_room(rho, 2.0, expected)
    assert gamma_wait_probability(rho, 2.0) == pytest.approx(expected, abs=room)
    assert gg1_wait(rho, 1.0, 0.5, 1.0).prob == pytest.approx(expected, abs=room)


def test_deterministic_arrivals_limit() -> None:
    """D/M/1 [K] is the k -> inf limit: A*(s) = exp(-s / lambda), so sigma = exp(-(1 - sigma)/rho).
    With x = (1 - sigma)/rho, (1 + x/k)^(-k) = exp(-x + x^2/(2k) - ...): at k = 1e6 and rho = 0.5
    (sigma ~ 0.2032, x ~ 1.59) the right-hand sides differ by ~x^2/(2k) ~ 1.3e-6 relative, and
    the root moves by that over 1 - d(rhs)/d(sigma) = 1 - sigma/rho ~ 0.59: ~2e-6. Tolerance 1e-5.
    (The D/M/1 root is found here by the same plain bisection, on sigma.)"""
    rho = 0.5
    lo, hi = 0.0, 1.0 - 1e-9  # f(sigma) = exp(-(1 - sigma)/rho) - sigma: > 0 at 0, < 0 just below 1
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if math.exp(-(1.0 - mid) / rho) - mid > 0:
            lo = mid
        else:
            hi = mid
    assert gamma_wait_probability(rho, 1e6) == pytest.approx(0.5 * (lo + hi), rel=1e-5)


def test_bursty_code_example_regime() -> None:
    """The regime of examples/bursty-code.yaml (k = 0.0057, rho ~ 0.13): with gaps of CV 13.2
    requests come in bursts of ~1/k, so almost every arrival finds a queue (sigma ~ 0.98 at
    rho = 0.13) and the mean wait given a wait is E[S] / (1 - sigma) ~ 55 E[S]. Pinned to the
    bisection root; a 10% change of the wait's conditional mean (the bursty wait factor) fails."""
    rho, k, es = 0.1317, 0.0057, 0.3
    ref = gim1_sigma_reference(rho, k)
    assert 0.98 < ref < 0.99  # what the docstring above says, from the reference alone
    w = gg1_wait(rho, es, 1.0 / k, 1.0)
    room = sigma_room(rho, k, ref)
    assert w.prob == pytest.approx(ref, abs=room)
    assert w.mean_if_waiting_s == pytest.approx(es / (1.0 - ref), rel=room / (1.0 - ref) + EXACT)


# ---- Kingman's GI/G/1 mean, where it is exact ---------------------------------------------------


def kingman_mean_wait(rho: float, es: float, ca2: float, cs2: float) -> float:
    """[Ki]: E[W] ~ rho / (1 - rho) (c_a^2 + c_s^2) / 2 E[S]."""
    return rho / (1.0 - rho) * (ca2 + cs2) / 2.0 * es


@pytest.mark.parametrize("cs2", (0.0, 0.3, 1.0, 2.5))
@pytest.mark.parametrize("rho", RHOS)
def test_kingman_exact_for_poisson_arrivals(rho: float, cs2: float) -> None:
    """With c_a^2 = 1 Kingman's formula is the Pollaczek-Khinchine mean (exact at every rho; M/M/1
    when also c_s^2 = 1)."""
    assert gg1_wait(rho, 2.0, 1.0, cs2).mean_s == pytest.approx(
        kingman_mean_wait(rho, 2.0, 1.0, cs2), rel=EXACT
    )


# (c_a^2, c_s^2) with c_s^2 <= 1, where the module claims Kingman's heavy-traffic mean exactly:
# smooth and bursty arrivals, deterministic to exponential service, and the bursty-code example.
HEAVY_TRAFFIC = ((0.5, 0.5), (0.001, 1.0), (2.0, 0.5), (10.0, 0.0), (100.0, 1.0), (175.4, 0.6))


@pytest.mark.parametrize(("ca2", "cs2"), HEAVY_TRAFFIC)
def test_kingman_heavy_traffic_limit(ca2: float, cs2: float) -> None:
    """[Ki]: (1 - rho) E[W] / E[S] -> (c_a^2 + c_s^2)/2 as rho -> 1, for any GI/G/1.

    Why the module's form reaches it (c_s^2 <= 1): its E[W] = sigma f E[S] / (1 - sigma) with
    f = (c_a^2 + c_s^2)/(1 + c_a^2). Near rho = 1, sigma -> 1; with s = mu (1 - sigma) and
    A*(s) = 1 - s/lambda + s^2 E[A^2]/2 + O(s^3), E[A^2] = (1 + c_a^2)/lambda^2, the fixed point
    1 - s/mu = A*(s) gives s (1/lambda - 1/mu) = s^2 (1 + c_a^2)/(2 lambda^2) + O(s^3), i.e.
    1 - sigma = 2 rho (1 - rho)/(1 + c_a^2) (1 + O(1 - rho)). So (1 - rho) E[W]/E[S] ->
    f (1 + c_a^2)/2 = (c_a^2 + c_s^2)/2.

    The ratio to Kingman's mean therefore tends to 1 with an O(1 - rho) error: checked as
    |ratio - 1| <= (1 - rho) at 1 - rho = 1e-2, 1e-3, 1e-4 (the coefficient is below 1 for these
    cases: ~0.2 to ~0.7), and shrinking tenfold per decade (so it tends to 1, not to 1 + c)."""
    errors = []
    for eps in (1e-2, 1e-3, 1e-4):
        rho = 1.0 - eps
        ratio = gg1_wait(rho, 1.0, ca2, cs2).mean_s / kingman_mean_wait(rho, 1.0, ca2, cs2)
        assert abs(ratio - 1.0) <= eps, (rho, ratio)
        errors.append(abs(ratio - 1.0))
    assert errors[2] <= errors[0] / 50.0


@pytest.mark.parametrize(("ca2", "cs2"), ((2.0, 3.0), (175.4, 2.5)))
def test_heavy_traffic_above_unit_service_variability_is_conservative(ca2: float, cs2: float) -> None:
    """c_s^2 > 1 with bursty arrivals (c_a^2 >= 1): the module uses f = (1 + c_s^2)/2 and claims
    a mean at or above Kingman's exact heavy-traffic limit. Its limit is
    (1 + c_s^2)(1 + c_a^2)/4, and (1 + c_s^2)(1 + c_a^2) - 2(c_a^2 + c_s^2) = (c_s^2 - 1)(c_a^2 - 1)
    >= 0 here."""
    rho = 1.0 - 1e-4
    ratio = gg1_wait(rho, 1.0, ca2, cs2).mean_s / kingman_mean_wait(rho, 1.0, ca2, cs2)
    limit = (1.0 + cs2) * (1.0 + ca2) / (2.0 * (ca2 + cs2))
    assert ratio >= 1.0
    assert ratio == pytest.approx(limit, rel=1e-3)  # O(1 - rho) from the limit, as above


@pytest.mark.parametrize(("ca2", "cs2"), ((0.5, 3.0), (1e-3, 3.0)))
def test_heavy_traffic_smooth_arrivals_spread_service(ca2: float, cs2: float) -> None:
    """Kingman's limit is exact for every GI/G/1, so the mean must not fall below it as rho -> 1.
    With c_a^2 < 1 < c_s^2, f = (1 + c_s^2)/2 would give the limit (1 + c_s^2)(1 + c_a^2)/4, below
    (c_a^2 + c_s^2)/2 by (c_s^2 - 1)(1 - c_a^2)/4: at c_a^2 = 0.5 (burstiness 2), c_s^2 = 3, 1.5
    vs 1.75 (-14%); at c_a^2 -> 0, 1.0 vs 1.5 (-33%). Reachable: burstiness goes up to 1e6, and
    spread prompt lengths have c_s^2 > 1. f = (c_a^2 + c_s^2)/(1 + c_a^2) reaches the limit
    exactly (test_kingman_heavy_traffic_limit's derivation), O(1 - rho) from it."""
    for eps in (1e-2, 1e-4):
        rho = 1.0 - eps
        ratio = gg1_wait(rho, 1.0, ca2, cs2).mean_s / kingman_mean_wait(rho, 1.0, ca2, cs2)
        assert abs(ratio - 1.0) <= eps, (rho, ratio)


@pytest.mark.parametrize("cs2", (1.5, 3.0, 20.0))
def test_service_factor_is_continuous_where_its_forms_meet(cs2: float) -> None:
    """The two forms of f agree at c_a^2 = 1 (M/G/1, (1 + c_s^2)/2 either way), so the wait moves
    continuously as burstiness crosses Poisson: within 1e-6 across c_a^2 = 1 -+ 1e-9."""
    rho = 0.7
    below = gg1_wait(rho, 1.0, 1.0 - 1e-9, cs2).mean_s
    above = gg1_wait(rho, 1.0, 1.0 + 1e-9, cs2).mean_s
    assert below == pytest.approx(above, rel=1e-6)
    assert gg1_wait(rho, 1.0, 1.0, cs2).mean_s == pytest.approx(rho * (1 + cs2) / 2 / (1 - rho), rel=EXACT)


def test_gg1_wait_edges() -> None:
    """No load, no wait; at rho >= 1 the queue grows without bound (every arrival waits forever)."""
    assert gg1_wait(0.0, 1.0, 1.0, 1.0).mean_s == 0.0
    assert gg1_wait(0.5, 0.0, 1.0, 1.0).mean_s == 0.0
    w = gg1_wait(1.0, 1.0, 2.0, 0.5)
    assert w.prob == 1.0 and w.mean_if_waiting_s == math.inf
    assert gamma_wait_probability(0.0, 0.5) == 0.0
    assert gamma_wait_probability(1.0, 0.5) == 1.0


# ---- response_quantiles: percentiles of W + S for a discrete S ----------------------------------


def test_response_quantiles_deterministic_service() -> None:
    """S = s always (M/D/1-like): P(W + s > x) = prob exp(-(x - s)/m) for x >= s, 1 below, so the
    q-quantile is s + m ln(prob/(1 - q)) when prob > 1 - q, else s. prob 0.5, m 2, s 1:
    p50 = 1 (prob <= 0.5), p90 = 1 + 2 ln 5, p99 = 1 + 2 ln 50."""
    got = response_quantiles(np.array([1.0]), np.array([1.0]), Wait(0.5, 2.0), np.array([0.5, 0.9, 0.99]))
    np.testing.assert_allclose(got, [1.0, 1.0 + 2.0 * math.log(5.0), 1.0 + 2.0 * math.log(50.0)], rtol=EXACT)


def test_response_quantiles_two_point_service() -> None:
    """S = 1 or 3 with probability 1/2 each, W: prob 0.5, mean given a wait m = 1. By cases of x:

    x < 1:      P(T > x) = 1.
    1 <= x < 3: the S = 3 half is surely above x; the S = 1 half exceeds x when W > x - 1:
                P = 0.5 + 0.5 * 0.5 e^-(x-1) = 0.5 + 0.25 e^-(x-1), from 0.75 at x = 1 down to
                0.5 + 0.25 e^-2 = 0.5338 just below 3.
    x >= 3:     P = 0.25 e^-(x-1) + 0.25 e^-(x-3) = 0.25 (1 + e^-2) e^-(x-3), 0.2838 at x = 3.

    Quantile q = inf{x : P(T > x) <= 1 - q}:
    q = 0.2  (1-q 0.8):  P(1) = 0.75 <= 0.8, P < 1 nowhere below 1  -> 1
    q = 0.3  (0.7):      0.5 + 0.25 e^-(x-1) = 0.7                 -> 1 + ln 1.25
    q = 0.5  (0.5):      P > 0.5 on [1, 3), P(3) = 0.2838           -> 3 (the jump at S = 3)
    q = 0.7  (0.3):      P(3) = 0.2838 <= 0.3                       -> 3
    q = 0.99 (0.01):     0.25 (1 + e^-2) e^-(x-3) = 0.01            -> 3 + ln(25 (1 + e^-2))
    The support is passed unsorted (the function sorts it)."""
    levels = np.array([0.2, 0.3, 0.5, 0.7, 0.99])
    got = response_quantiles(np.array([3.0, 1.0]), np.array([0.5, 0.5]), Wait(0.5, 1.0), levels)
    e2 = math.exp(-2.0)
    expected = [1.0, 1.0 + math.log(1.25), 3.0, 3.0, 3.0 + math.log(25.0 * (1.0 + e2))]
    np.testing.assert_allclose(got, expected, rtol=EXACT)


def test_response_quantiles_without_wait_and_unbounded() -> None:
    """No wait: the quantiles of S itself, inf{x : F(x) >= q}: S = 1, 2, 3 w.p. 0.2, 0.5, 0.3 has
    F = 0.2, 0.7, 1, so p20 = 1, p50 = 2, p70 = 2, p99 = 3. An infinite wait: infinite quantiles."""
    s, p = np.array([2.0, 1.0, 3.0]), np.array([0.5, 0.2, 0.3])
    got = response_quantiles(s, p, Wait(0.0, 0.0), np.array([0.2, 0.5, 0.7, 0.99]))
    np.testing.assert_array_equal(got, [1.0, 2.0, 2.0, 3.0])
    inf = response_quantiles(s, p, Wait(1.0, math.inf), np.array([0.5, 0.99]))
    assert np.all(np.isinf(inf))


# ---- tail_quantiles: the step times a decoder sees ----------------------------------------------


def test_tail_quantiles_default_spread_one_value() -> None:
    """A share r = 0.3 of steps takes about v = 10 (spread +-5%: uniform on [9.5, 10.5]), the rest
    the atom 1. P(X > x) = 0.3 (10.5 - x)/1.0 on [9.5, 10.5]. p99: 0.3 (10.5 - x) = 0.01 ->
    x = 10.5 - 1/30; p80: 0.2 -> x = 10.5 - 2/3; p50: 0.3 < 0.5 -> the atom, 1."""
    assert SPREAD == 0.05
    got = tail_quantiles(1.0, np.array([10.0]), np.array([0.3]), np.array([0.5, 0.8, 0.99]))
    np.testing.assert_allclose(got, [1.0, 10.5 - 2.0 / 3.0, 10.5 - 1.0 / 30.0], rtol=EXACT)


def test_tail_quantiles_unbounded_rates_take_every_step() -> None:
    """A queue past its stable range gives its full steps an unbounded rate (the capacity search
    probes such rates to bracket its answer): they take every step. v = 2 with rate inf beside
    v = 1 with 0.5: all mass on [1.9, 2.1], P(X > x) = (2.1 - x) / 0.2 -> p50 2.0, p99 2.098;
    no NaN, no RuntimeWarning."""
    with np.errstate(all="raise"):
        got = tail_quantiles(0.5, np.array([1.0, 2.0]), np.array([0.5, math.inf]), np.array([0.5, 0.99]))
    np.testing.assert_allclose(got, [2.0, 2.1 - 0.2 * 0.01], rtol=EXACT)


def test_tail_quantiles_two_overlapping_values() -> None:
    """Spread 0.25: v1 = 4 on [3, 5] with share 0.4, v2 = 6 on [4.5, 7.5] with share 0.3, atom 1.
    P(X > x) = 0.4 (5 - x)/2 + 0.3 (7.5 - x)/3 where each term is inside its range:
    [3, 4.5]:   0.2 (5 - x) + 0.3        (0.7 at 3, 0.4 at 4.5)
    [4.5, 5]:   0.2 (5 - x) + 0.1 (7.5 - x) = 1.75 - 0.3 x   (0.4 .. 0.25)
    [5, 7.5]:   0.1 (7.5 - x)            (0.25 .. 0)
    q = 0.2  (1-q 0.8 > 0.7 = every share): the atom 1
    q = 0.5  (0.5):  0.2 (5 - x) + 0.3 = 0.5  -> 4
    q = 0.65 (0.35): 1.75 - 0.3 x = 0.35      -> 14/3
    q = 0.69 (0.31): 1.75 - 0.3 x = 0.31      -> 4.8
    q = 0.99 (0.01): 0.1 (7.5 - x) = 0.01     -> 7.4"""
    levels = np.array([0.2, 0.5, 0.65, 0.69, 0.99])
    got = tail_quantiles(1.0, np.array([4.0, 6.0]), np.array([0.4, 0.3]), levels, spread=0.25)
    np.testing.assert_allclose(got, [1.0, 4.0, 14.0 / 3.0, 4.8, 7.4], rtol=EXACT)


def test_tail_quantiles_spread_per_value() -> None:
    """A spread per value: v1 = 4 with 0.25 (on [3, 5], share 0.4), v2 = 6 with 0.05 (on
    [5.7, 6.3], share 0.3), atom 1. P(X > x) = 0.3 + 0.2 (5 - x) on [3, 5], 0.3 on [5, 5.7],
    0.5 (6.3 - x) on [5.7, 6.3]:
    q = 0.5  (0.5):  0.3 + 0.2 (5 - x) = 0.5 -> 4
    q = 0.8  (0.2):  0.5 (6.3 - x) = 0.2    -> 5.9
    q = 0.99 (0.01): 0.5 (6.3 - x) = 0.01   -> 6.28
    The same spread for every value gives what the scalar gives."""
    levels = np.array([0.5, 0.8, 0.99])
    values, rates = np.array([4.0, 6.0]), np.array([0.4, 0.3])
    got = tail_quantiles(1.0, values, rates, levels, spread=np.array([0.25, 0.05]))
    np.testing.assert_allclose(got, [4.0, 5.9, 6.28], rtol=EXACT)
    same = tail_quantiles(1.0, values, rates, levels, spread=np.array([0.25, 0.25]))
    np.testing.assert_array_equal(same, tail_quantiles(1.0, values, rates, levels, spread=0.25))


def test_tail_quantiles_cap_not_normalize() -> None:
    """Shares summing past 1 (0.8 + 0.6; every step carries something): P(X > x) is
    min(1, 0.4 (5 - x) + 0.2 (7.5 - x)) over the same ranges, capped, not divided by 1.4:
    q = 0.01 (0.99): [3, 4.5]: 0.4 (5 - x) + 0.6 = 0.99  -> 4.025
    q = 0.5  (0.5):  [4.5, 5]: 3.5 - 0.6 x = 0.5         -> 5
    q = 0.99 (0.01): [5, 7.5]: 0.2 (7.5 - x) = 0.01      -> 7.45
    (Normalized shares, 4/7 and 3/7, would put p50 at 14/3 and p99 at 7.43.)"""
    levels = np.array([0.01, 0.5, 0.99])
    got = tail_quantiles(1.0, np.array([4.0, 6.0]), np.array([0.8, 0.6]), levels, spread=0.25)
    np.testing.assert_allclose(got, [4.025, 5.0, 7.45], rtol=EXACT)


def test_tail_quantiles_rare_or_no_mixed_steps() -> None:
    """Shares at or below 1 - q leave the q-quantile on the atom; no shares at all: the atom."""
    levels = np.array([0.5, 0.99])
    np.testing.assert_array_equal(tail_quantiles(2.0, np.array([9.0]), np.array([0.005]), levels), [2.0, 2.0])
    np.testing.assert_array_equal(tail_quantiles(2.0, np.array([9.0]), np.array([0.0]), levels), [2.0, 2.0])


# ---- one engine state by hand: running requests and the mixed-step share ------------------------

T0_S = 0.00995  # per-step overhead
A_S = 1e-5  # per token (decode or prefill) of a step's linear layers
BUDGET = 2048


def toy_engine(threshold: int) -> Engine:
    """Step time T(c prefill tokens, n decodes) = A (c + n) + T0: only the linear term and the
    overhead (every other coefficient 0: no bytes, no attention, no all-reduce, no re-read).
    Workload: prompts of exactly 1,000 tokens, answers of exactly 17 (d = 16 decode steps),
    Poisson arrivals; budget 2,048, `long_prefill_token_threshold` as given, room for
    everything else (seats, KV)."""
    off = ("ep_moe", "linear_rate")  # off (None)
    zero = {f.name: 0.0 for f in dataclasses.fields(StepCoefficients) if f.name not in off}
    coef = StepCoefficients(**(zero | {"linear_s_per_token": A_S, "overhead_s": T0_S}))
    wl = Workload.from_mapping(
        {
            "arrivals": {"requests_per_s": 1.0},
            "input_tokens": {"constant": 1000},
            "output_tokens": {"constant": 17},
        }
    )
    config = SchedulerConfig(
        kv_cache_blocks=1_000_000,
        max_num_seqs=256,
        max_num_batched_tokens=BUDGET,
        long_prefill_token_threshold=threshold,
    )
    return Engine(coef, WorkloadStats.of(wl), config, "colocated")


# The engine at n = 4 decoding sequences (Poisson: size bias z = 1):
#   decoder's decode-only step  t_dec = T(0, n + 1) = 5e-5 + 0.00995       = 0.01 s
#   prompt's view (n decodes)   t_arr = T(0, 4)     = 4e-5 + 0.00995       = 0.00999 s
#   budget left for a prompt: 2048 - 4 = 2044 tokens a step.
#   (a) no threshold: the 1,000-token prompt is one chunk (k = 1), its step
#       T(1000, 4) = 1004e-5 + 0.00995 = 0.01999 s: time in prefill 0.01999 s.
#   (b) threshold 500: two chunks of 500 (k = 2), each T(500, 4) = 504e-5 + 0.00995 = 0.01499 s:
#       time in prefill 0.02998 s.
#   Either way the prompt adds A = (its steps) - k t_arr = 1000 A_S = 0.01 s of engine time over
#   the decode steps, and a full-budget step adds the same per prompt token
#   (F = 1000 (T(2044, 4) - t_arr) / 2044 = 0.01 s), so the light/heavy blend is moot and the
#   fixed point is linear: n = lam d t_step with t_step = t_dec / (1 - lam A)
#   <=> lam = n / (d t_dec + n A) = 4 / (0.16 + 0.04) = 20 /s; busy share lam A = 0.2;
#   mean step t_step = 0.01 / 0.8 = 0.0125 s (Little: 20 x 16 x 0.0125 = 4).
#   mixed_step_fraction: at most 20 prompts/s x k chunk steps each, among 1/0.0125 = 80 steps/s,
#       (a) 20/80 = 0.25, (b) 40/80 = 0.5: that many if no two prompts ever shared a step. They
#       do (a prompt arriving while another waits for the next step joins it), so the share is
#       below that; how far below is the company's count, which has no closed form here: the
#       share is pinned to the simulator in tests/test_accuracy_tool.py.
#   running_requests: 4 decoding + (Little) 20/s x the time in prefill:
#       (a) 4 + 20 x 0.01999 = 4.3998, (b) 4 + 20 x 0.02998 = 4.5996.
HAND_N, HAND_LAM, HAND_STEP_S = 4.0, 20.0, 0.0125
HAND_CASES = [(0, 0.25, 4.3998), (500, 0.5, 4.5996)]  # (threshold, mixed share unshared, running)


@pytest.mark.parametrize(("threshold", "unshared", "running"), HAND_CASES)
def test_running_requests_and_mixed_step_fraction_by_hand(
    threshold: int, unshared: float, running: float
) -> None:
    e = toy_engine(threshold)
    s = e.state_n(HAND_N)
    assert s.lam == pytest.approx(HAND_LAM, rel=EXACT)
    assert s.t_step == pytest.approx(HAND_STEP_S, rel=EXACT)
    p = e.point(s)
    assert p.running_requests == pytest.approx(running, rel=EXACT)
    assert p.mean_step_s == pytest.approx(HAND_STEP_S, rel=EXACT)
    # the mixed steps are the ITL mix's own (Poisson: each step's share is its decodes' share)
    steps = e.steps(s)
    assert p.mixed_step_fraction == pytest.approx(math.fsum(steps.rates.tolist()), rel=1e-12)
    assert 0.5 * unshared < p.mixed_step_fraction < unshared


@pytest.mark.parametrize(("threshold", "unshared", "running"), HAND_CASES)
def test_hand_case_as_the_steady_state_at_20_per_s(threshold: int, unshared: float, running: float) -> None:
    """The same states reached the way `evaluate` does: root-finding n at lam = 20/s (Brent,
    rtol 1e-9 on n: the figures agree to ~1e-8)."""
    e = toy_engine(threshold)
    solved = e.solve(HAND_LAM)
    assert solved is not None
    s, _ = solved
    assert s.n == pytest.approx(HAND_N, rel=1e-8)
    p = e.point(s)
    assert p.mixed_step_fraction == pytest.approx(e.point(e.state_n(HAND_N)).mixed_step_fraction, rel=1e-6)
    assert p.running_requests == pytest.approx(running, rel=1e-8)


# ---- the wait's shape: M/G/1's second moment, phases, the wait beyond a shift ------------------


@pytest.mark.parametrize("rho", [0.1, 0.5, 0.9])
def test_wait_phases_have_mg1_second_moment(rho: float) -> None:
    """M/G/1 [K]: E[W] = lam E[X^2] / (2 (1 - rho)) (Pollaczek-Khinchine) and
    E[W^2] = 2 E[W]^2 + lam E[X^3] / (3 (1 - rho)) (Takacs). Service X = 1 or 5 s, 1/2 each:
    E[X] = 3, E[X^2] = 13, E[X^3] = 63, c_s^2 = 13/9 - 1 = 4/9, kappa = E[X] E[X^3] / E[X^2]^2
    = 189 / 169. Given W > 0 (probability rho): E[W | +] = E[W] / rho, E[W^2 | +] = E[W^2] / rho.
    The phases must have that mean and second moment (r > 2 here only if kappa is large: at
    kappa = 189/169 r = 2 rho + (4/3)(1 - rho) 189/169 < 2, one phase with the mean)."""
    lam = rho / 3.0
    ew = lam * 13.0 / (2.0 * (1.0 - rho))
    ew2 = 2.0 * ew * ew + lam * 63.0 / (3.0 * (1.0 - rho))
    w = gg1_wait(rho, 3.0, 1.0, 4.0 / 9.0)
    assert w.prob == pytest.approx(rho, rel=EXACT)
    assert w.mean_if_waiting_s == pytest.approx(ew / rho, rel=EXACT)
    r = 2.0 * rho + (4.0 / 3.0) * (1.0 - rho) * 189.0 / 169.0
    assert r == pytest.approx(ew2 / rho / (ew / rho) ** 2, rel=1e-12)  # the formula is M/G/1's
    assert wait_phases(w, 189.0 / 169.0) == ((w.prob, w.mean_if_waiting_s),)


def test_wait_phases_hyperexponential_moments() -> None:
    """Spread service (X = 1 w.p. 0.99, 100 w.p. 0.01: E[X] = 1.99, E[X^2] = 100.99, E[X^3] =
    10,000.99, kappa = 1.951 > 3/2) at rho = 0.3, Poisson: r = 0.6 + 0.7 (4/3) kappa = 2.42 > 2,
    two balanced phases carrying E[W | +] and E[W^2 | +] of M/G/1, with a_1 m_1 = a_2 m_2."""
    rho, ex, ex2, ex3 = 0.3, 1.99, 100.99, 10_000.99
    kappa = ex * ex3 / ex2**2
    lam = rho / ex
    ew = lam * ex2 / (2.0 * (1.0 - rho))
    ew2 = 2.0 * ew * ew + lam * ex3 / (3.0 * (1.0 - rho))
    w = gg1_wait(rho, ex, 1.0, ex2 / ex**2 - 1.0)
    ph = wait_phases(w, kappa)
    assert len(ph) == 2
    assert sum(a for a, _ in ph) == pytest.approx(rho, rel=EXACT)
    assert sum(a * m for a, m in ph) == pytest.approx(ew, rel=1e-12)
    assert sum(2.0 * a * m * m for a, m in ph) == pytest.approx(ew2, rel=1e-12)
    assert ph[0][0] * ph[0][1] == pytest.approx(ph[1][0] * ph[1][1], rel=1e-12)


def test_wait_beyond_exponential_and_gamma() -> None:
    """Exponential service (kappa = 3/2): r = 2 at any sigma, the wait given positive is
    exponential: P(W > x) = sigma e^{-x/m}, the excess Exp(m) (memoryless). Deterministic service
    (kappa = 1) at rho = 0.5: r = 2 (0.5) + (4/3)(0.5) = 5/3, a gamma of shape
    1 / (r - 1) = 3/2 and scale m (r - 1): P(W > x) = sigma Q(3/2, x / scale), Q(3/2, y) =
    erfc(sqrt y) + 2 sqrt(y / pi) e^{-y} (the upper incomplete gamma at 3/2, by parts)."""
    w = gg1_wait(0.5, 2.0, 1.0, 1.0)
    q, ph = wait_beyond(w, 1.5, 0.7)
    assert q == pytest.approx(w.prob * math.exp(-0.7 / w.mean_if_waiting_s), rel=1e-12)
    assert len(ph) == 1 and ph[0] == pytest.approx((1.0, w.mean_if_waiting_s), rel=1e-12)
    d = gg1_wait(0.5, 2.0, 1.0, 0.0)
    scale = d.mean_if_waiting_s * (5.0 / 3.0 - 1.0)
    y = 0.7 / scale
    q_hand = d.prob * (math.erfc(math.sqrt(y)) + 2.0 * math.sqrt(y / math.pi) * math.exp(-y))
    q, ph = wait_beyond(d, 1.0, 0.7)
    assert q == pytest.approx(q_hand, rel=1e-12)
    assert len(ph) == 1 and ph[0] == pytest.approx((1.0, scale), rel=1e-12)
    assert wait_beyond(d, 1.0, 0.0)[0] == pytest.approx(d.prob, rel=1e-12)  # nothing shifted


def test_wait_beyond_gamma_excess_keeps_the_exact_tail() -> None:
    """Less spread than an exponential (r <= 2), the excess beyond the shift decays no faster
    than the exact tail (`Wait.tail_s`): the longer of the gamma's scale and tail_s; P(W >
    shift) stays the gamma's. Spread waits (r > 2) keep their two phases."""
    d = gg1_wait(0.5, 2.0, 1.0, 0.0)
    scale = d.mean_if_waiting_s * (5.0 / 3.0 - 1.0)
    q0, _ = wait_beyond(d, 1.0, 0.7)
    for tail, want in ((0.5 * scale, scale), (1.5 * scale, 1.5 * scale)):
        q, ph = wait_beyond(dataclasses.replace(d, tail_s=tail), 1.0, 0.7)
        assert q == q0 and len(ph) == 1 and ph[0] == pytest.approx((1.0, want), rel=1e-12)
    w = gg1_wait(0.4, 2.0, 3.0, 4.0)
    assert wait_beyond(dataclasses.replace(w, tail_s=1e3), 5.0, 0.9) == wait_beyond(w, 5.0, 0.9)


def _exponential_support(width: float = 0.005, top: float = 80.0) -> tuple[np.ndarray, np.ndarray]:
    """Exp(1) in slices [a, a + width) up to `top` (e^{-80}: nothing left), each at its
    conditional mean: E[X; a < X < b] = (a + 1) e^{-a} - (b + 1) e^{-b}."""
    lo = np.arange(0.0, top, width)
    hi = lo + width
    p = np.exp(-lo) - np.exp(-hi)
    xi = ((lo + 1.0) * np.exp(-lo) - (hi + 1.0) * np.exp(-hi)) / p
    return xi / float(p @ xi), p / p.sum()


@pytest.mark.parametrize("rho", [0.1, 0.5, 0.9])
def test_wait_decay_md1_is_the_lambert_w_root(rho: float) -> None:
    """M/D/1: E[e^{theta D}] E[e^{-theta A}] = 1 is e^u = 1 + u / rho (u = theta D), whose
    positive root is u = rho (y - 1), y = -W_{-1}(-rho e^{-rho}) / rho (y e^{-rho y} =
    e^{-rho}: the other branch is the trivial root y = 1)."""
    y = -float(special.lambertw(-rho * math.exp(-rho), k=-1).real) / rho
    u = rho * (y - 1.0)
    got = wait_decay_s(rho, 1.0, 2.0, np.ones(1), np.ones(1))
    assert got == pytest.approx(2.0 / u, rel=1e-10)
    assert math.exp(2.0 / got) == pytest.approx(1.0 + (2.0 / got) / rho, rel=1e-10)


@pytest.mark.parametrize(("rho", "k"), [(0.3, 1.0), (0.7, 1.0), (0.3, 0.25), (0.8, 0.25), (0.5, 4.0)])
def test_wait_decay_exponential_service_is_gim1(rho: float, k: float) -> None:
    """GI/M/1 with gamma(k) gaps: the wait's tail is sigma e^{-mu (1 - sigma) w}, so the decay
    scale is E[X] / (1 - sigma) (M/M/1: E[X] / (1 - rho)). The exponential service is a fine
    discretization here (its MGF is finite everywhere), within 0.1%."""
    xi, p = _exponential_support()
    sigma = gamma_wait_probability(rho, k)
    got = wait_decay_s(rho, 1.0 / k, 1.5, xi, p)
    assert got == pytest.approx(1.5 / (1.0 - sigma), rel=1e-3)


@pytest.mark.parametrize(("ca2", "cs2"), [(1.0, 0.0), (1.19, 0.0), (4.0, 1.0), (0.5, 2.0)])
def test_wait_decay_heavy_traffic_is_kingman(ca2: float, cs2: float) -> None:
    """As rho -> 1 the decay scale tends to Kingman's E[X] (c_a^2 + c_s^2) / (2 (1 - rho)):
    two-point service of spread cs2 (values 1 +- sqrt(cs2), equally likely)."""
    xi = np.array([1.0 - math.sqrt(cs2), 1.0 + math.sqrt(cs2)]) if cs2 > 0 else np.ones(1)
    p = np.full(xi.size, 1.0 / xi.size)
    rho = 0.999
    got = wait_decay_s(rho, ca2, 1.0, xi, p)
    assert got == pytest.approx((ca2 + cs2) / (2.0 * (1.0 - rho)), rel=5e-3)


def test_wait_decay_matches_a_lindley_recursion() -> None:
    """The case it was added for: constant service (a prefill queue of equal prompts) behind
    gamma gaps of the trace's c_a^2 = 1.19 at rho = 0.24. A Lindley recursion over 400,000
    arrivals: between its wait's p99 and p99.9 the tail falls by 10 at a pace of 1 / theta
    within 5%, where the two-moment gamma of `wait_beyond` (scale m (r - 1)) is 20% short."""
    rho, ca2 = 0.24, 1.19
    rng = np.random.default_rng(7)
    gaps = rng.gamma(1.0 / ca2, ca2 / rho, 400_000)  # mean 1 / rho: service 1
    w = np.empty(gaps.size)
    cur = 0.0
    for i, a in enumerate(gaps.tolist()):
        w[i] = cur
        cur = max(0.0, cur + 1.0 - a)
    p99, p999 = np.percentile(w, [99.0, 99.9])
    pace = (p999 - p99) / math.log(10.0)
    got = wait_decay_s(rho, ca2, 1.0, np.ones(1), np.ones(1))
    assert got == pytest.approx(pace, rel=0.05)
    g = gg1_wait(rho, 1.0, ca2, 0.0)
    r = 2.0 * g.prob + (4.0 / 3.0) * (1.0 - g.prob)
    assert g.mean_if_waiting_s * (r - 1.0) < 0.85 * pace


@pytest.mark.parametrize("ca2", [0.2, 1.0, 1.19, 4.0, 20.0])
def test_wait_decay_table_reads_the_reference(ca2: float) -> None:
    """The fast path against the literal root-finding: constant, two-point and lognormal
    service shapes (spread up to sigma 1.5) over rho in [0.01, 1 - 1e-5]: within 0.1% from rho
    = 0.1 up, 0.5% below; beyond the reference's rounding limit (1 - rho < DECAY_HEAVY) both
    follow u proportional to 1 - rho."""
    rng = np.random.default_rng(11)
    shapes = [(np.ones(1), np.ones(1)), (np.array([0.5, 1.5]), np.array([0.5, 0.5]))]
    for sigma in (0.3, 0.8, 1.5):
        xi = rng.lognormal(0.0, sigma, 32)
        p = rng.dirichlet(np.ones(32))
        shapes.append((xi / float(p @ xi), p))
    rhos = np.concatenate([np.linspace(0.01, 0.1, 10), np.linspace(0.1, 1.0 - 1e-5, 60)])
    for xi, p in shapes:
        table = WaitDecayTable.build(ca2, xi, p)
        for rho in rhos.tolist():
            want = wait_decay_s(rho, ca2, 2.0, xi, p)
            assert table.scale_s(rho, 2.0) == pytest.approx(want, rel=1e-3 if rho >= 0.1 else 5e-3)
        near = table.scale_s(1.0 - 1e-8, 1.0)
        assert near == pytest.approx(100.0 * table.scale_s(1.0 - 1e-6, 1.0), rel=1e-3)
        assert table.scale_s(1e-4, 1.0) < table.scale_s(0.01, 1.0)  # shorter, never longer
        assert table.scale_s(0.0, 1.0) == table.scale_s(1.0, 1.0) == table.scale_s(0.5, 0.0) == 0.0


def test_wait_decay_edges() -> None:
    """No wait below rho = 0 or at rho >= 1 (unbounded), nor without service: 0, "unknown"."""
    one = np.ones(1)
    assert wait_decay_s(0.0, 1.0, 1.0, one, one) == 0.0
    assert wait_decay_s(1.0, 1.0, 1.0, one, one) == 0.0
    assert wait_decay_s(0.5, 1.0, 0.0, one, one) == 0.0
    # light load and a far-spread support: no overflow (the MGF is taken relative to its top)
    xi = np.array([0.01, 0.02, 60.0])
    p = np.array([0.5, 0.49, 0.01])
    xi = xi / float(p @ xi)
    got = wait_decay_s(0.01, 1.0, 1.0, xi, p)
    assert math.isfinite(got) and got > 0.0


@pytest.mark.parametrize("kappa", [2.0, 5.0, 40.0])
def test_wait_beyond_two_phases_is_the_shifted_phases(kappa: float) -> None:
    """Spread service (r > 2): the fast path equals its literal reference, the phases of
    `wait_phases` shifted by `shift_phases`, renormalized by their total weight."""
    w = gg1_wait(0.4, 2.0, 3.0, 4.0)
    ref = shift_phases(wait_phases(w, kappa), 0.9)
    q_ref = sum(a for a, _ in ref)
    q, ph = wait_beyond(w, kappa, 0.9)
    assert len(ph) == len(ref) == 2 and q == pytest.approx(q_ref, rel=EXACT)
    for (a, m), (a_ref, m_ref) in zip(ph, ref, strict=True):
        assert a == pytest.approx(a_ref / q_ref, rel=EXACT) and m == pytest.approx(m_ref, rel=EXACT)


def _tail(service: np.ndarray, probs: np.ndarray, phases, waiting, x: float) -> float:
    """P(W + S > x) summed term by term (the definition), one waiting share for every phase."""
    return _tail_2d(service, probs, phases, np.repeat(np.asarray(waiting)[:, None], len(phases), axis=1), x)


def _level_by_bisection(tail: Callable[[float], float], level: float, hi: float) -> float:
    """The x in [0, hi] where a falling tail P(X > x) crosses 1 - level, by 200 halvings."""
    lo = 0.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if tail(mid) > 1.0 - level:
            lo = mid
        else:
            hi = mid
    return hi


def test_response_quantiles_phases_against_the_definition() -> None:
    """Two phases and a partial `waiting` mask: each returned quantile x has P(W + S > x) =
    1 - level (found here by bisection on the definition, an independent computation)."""
    service = np.array([0.01, 0.02, 0.05, 0.3])
    probs = np.array([0.4, 0.3, 0.2, 0.1])
    waiting = np.array([0.0, 1.0, 0.5, 1.0])
    phases = ((0.3, 0.01), (0.2, 0.2))
    levels = np.array([0.5, 0.9, 0.99])
    got = response_quantiles_phases(service, probs, phases, levels, waiting)
    for level, x in zip(levels, got, strict=True):
        want = _level_by_bisection(lambda y: _tail(service, probs, phases, waiting, y), level, 10.0)
        assert x == pytest.approx(want, rel=1e-9, abs=1e-12)
    # One phase, everyone waiting: the closed form of response_quantiles.
    one = ((0.4, 0.05),)
    assert response_quantiles_phases(service, probs, one, levels) == pytest.approx(
        response_quantiles(service, probs, Wait(0.4, 0.05), levels), rel=1e-12
    )


def _phases_quantiles_reference(
    service: np.ndarray, probs: np.ndarray, phases, levels: np.ndarray, waiting: np.ndarray
) -> list[tuple[int, float, list[float]]]:
    """The search inputs of `response_quantiles_phases`, computed literally over every sorted
    point: the log-sum of each phase accumulated from the first point on (-inf where nothing
    waits yet), then for each level the segment j, P(S > s_j) and a_k C_jk there."""
    order = service.argsort(kind="stable")
    s, p = service[order], probs[order]
    tail = 1.0 - p.cumsum()
    with np.errstate(divide="ignore"):
        log_p = np.log(p * waiting[order])
    sums = np.full(s.size + 1, -math.inf)
    rcs = []
    for a, m in phases:
        x = s * (1.0 / m)
        live = log_p != -math.inf
        np.logaddexp.accumulate((log_p + x)[live], out=sums[1 : 1 + int(live.sum())])
        acc = sums[live.cumsum()] - x
        rcs.append(a * np.exp(acc))
    neg_start = -tail - sum(rcs)
    out = []
    for eps in (1.0 - levels).tolist():
        j = int(neg_start.searchsorted(-eps, side="left")) - 1
        out.append((j, float(tail[j]), [float(rc[j]) for rc in rcs]))
    return out


def _tail_2d(service: np.ndarray, probs: np.ndarray, phases, waiting: np.ndarray, x: float) -> float:
    """P(W + S > x) summed term by term, point i waiting phase k with share waiting[i, k]."""
    total = 0.0
    for s_i, p_i, w_i in zip(service, probs, waiting, strict=True):
        if x < s_i:
            total += p_i
        else:
            total += p_i * sum(
                w * a * math.exp(-(x - s_i) / m) for w, (a, m) in zip(w_i, phases, strict=True)
            )
    return total


def test_response_quantiles_phases_with_a_share_per_phase() -> None:
    """A 2-D `waiting` (points x phases: TTFT's KV-full branch waits a phase the queued points
    do not): each returned quantile meets the definition, found here by bisection; equal
    columns give the 1-D mask's quantiles."""
    rng = np.random.default_rng(11)
    service = rng.uniform(0.01, 0.4, 40)
    probs = rng.uniform(0.5, 1.5, 40)
    probs /= probs.sum()
    phases = ((0.7, 0.02), (0.3, 0.3), (1.0, 0.8))
    waiting = np.zeros((40, 3))
    waiting[25:, :2] = 1.0  # the queued ones: the queue's two phases
    waiting[5:15, 2] = 1.0  # some others: the third phase alone
    waiting[30:33, 2] = 0.5  # and a few both, in part
    levels = np.array([0.5, 0.9, 0.99, 0.999])
    got = response_quantiles_phases(service, probs, phases, levels, waiting)
    for level, x in zip(levels, got, strict=True):
        want = _level_by_bisection(lambda y: _tail_2d(service, probs, phases, waiting, y), level, 50.0)
        assert x == pytest.approx(want, rel=1e-9, abs=1e-12)
    mask = np.where(np.arange(40) >= 25, 1.0, 0.0)
    mask[rng.integers(25, 40, 3)] = 0.5
    two = phases[:2]
    assert response_quantiles_phases(service, probs, two, levels, np.repeat(mask[:, None], 2, axis=1)) == (
        pytest.approx(response_quantiles_phases(service, probs, two, levels, mask), rel=1e-12)
    )


def test_response_quantiles_phases_skips_the_points_before_the_first_waiting_one() -> None:
    """The fast path starts its arrays at the first point that waits (TTFT's queued branch sorts
    last): its quantiles equal, bit for bit, Newton's step on the reference's search inputs
    (computed over every point), and they meet the definition."""
    rng = np.random.default_rng(7)
    service = np.concatenate([rng.uniform(0.01, 0.2, 60), rng.uniform(0.15, 0.6, 12)])
    probs = rng.uniform(0.5, 1.5, service.size)
    probs[60:] *= 4.0
    probs /= probs.sum()
    waiting = np.concatenate([np.zeros(60), np.ones(12)])
    waiting[rng.integers(60, 72, 3)] = 0.0  # non-waiting points among the waiting ones too
    phases = ((0.6, 0.03), (0.3, 0.4))
    levels = np.array([0.5, 0.9, 0.99])
    got = response_quantiles_phases(service, probs, phases, levels, waiting)
    s = np.sort(service)
    inv = [1.0 / m for _, m in phases]
    newton = 0
    for x, eps, (j, tail_j, c) in zip(
        got.tolist(),
        (1.0 - levels).tolist(),
        _phases_quantiles_reference(service, probs, phases, levels, waiting),
        strict=True,
    ):
        gap = eps - tail_j
        if gap <= 0:
            assert x == float(s[j + 1])
            continue
        limit = float(s[j + 1] - s[j]) if j + 1 < s.size else math.inf
        y = phase_excess(c, inv, math.log(gap), limit)  # the module's Newton step, on the reference's inputs
        assert x == float(s[j]) + min(y, limit)
        if y < limit:  # inside the segment: the level itself
            assert _tail(service, probs, phases, waiting, x) == pytest.approx(eps, rel=1e-9)
        else:  # at the next point, whose atom takes P below the level
            assert (
                _tail(service, probs, phases, waiting, x)
                <= eps
                < _tail(service, probs, phases, waiting, x - 1e-9)
            )
        newton += 1
    assert newton >= 2  # the levels fall inside segments, past the first waiting point


@pytest.mark.parametrize("sigma", [0.1, 0.6, 1.2])
def test_lognormal_slices_are_conditional_means(sigma: float) -> None:
    """A lognormal of mean 1 (mu = -sigma^2 / 2): over probability slice [a, b], E[Y | slice] =
    (Phi(z_b - sigma) - Phi(z_a - sigma)) / (b - a), z = Phi^-1; checked against the midpoint rule
    of the quantile function over the slice (Y(u) = exp(mu + sigma Phi^-1(u))), and the slices'
    mean is exactly 1."""
    from statistics import NormalDist

    nd = NormalDist()
    got = lognormal_slices(sigma)
    assert float(got @ SLICE_PROBS) == pytest.approx(1.0, rel=1e-12)
    mu = -0.5 * sigma * sigma
    for j in range(SLICE_PROBS.size):
        a, b = float(SLICE_EDGES[j]), float(SLICE_EDGES[j + 1])
        n = 20_000
        us = a + (b - a) * (np.arange(n) + 0.5) / n
        ref = float(np.mean([math.exp(mu + sigma * nd.inv_cdf(u)) for u in us]))
        assert got[j] == pytest.approx(ref, rel=2e-3 if j == SLICE_PROBS.size - 1 else 1e-4)


def test_wait_over_an_environment_is_the_mixture_of_its_parts() -> None:
    """`Wait.env` (the queue under a wandering decode count, `prefill_queue.wait_environment`): with
    probability p_i the wait is f_i times as long. Exponential service (one phase per part): P(W >
    x) = sigma sum p_i e^{-x / (m f_i)}; beyond a shift each part keeps its own memoryless phase,
    weighted by its share of P(W > shift). Parts of one scale are the plain wait."""
    sigma, m = 0.8, 0.2
    env = ((0.5, 0.6), (0.5, 1.4))
    w = Wait(sigma, m, 0.0, env)
    q, ph = wait_beyond(w, 1.5, 0.3)
    parts = [0.5 * sigma * math.exp(-0.3 / (m * f)) for _, f in env]
    assert q == pytest.approx(sum(parts), rel=1e-12)
    flat = [v for a, (_, f) in zip(parts, env, strict=True) for v in (a / sum(parts), m * f)]
    assert [v for phase in ph for v in phase] == pytest.approx(flat, rel=1e-12)
    plain = Wait(sigma, m)
    same = Wait(sigma, m, 0.0, ((0.3, 1.0), (0.7, 1.0)))
    assert wait_beyond(same, 1.0, 0.3)[0] == pytest.approx(wait_beyond(plain, 1.0, 0.3)[0], rel=1e-12)
    assert same.quantile(0.99) == pytest.approx(plain.quantile(0.99), rel=1e-12)
    # the quantile solves sigma sum p_i e^{-w / (m f_i)} = 1 - level, and the spread lengthens it
    for level in (0.5, 0.9, 0.99, 0.999):
        x = w.quantile(level)
        tail = sigma * sum(p * math.exp(-x / (m * f)) for p, f in env)
        assert tail == pytest.approx(1.0 - level, rel=1e-9)
    assert w.quantile(0.99) > plain.quantile(0.99)
    assert w.quantile(0.1) == 0.0  # no wait at all below 1 - sigma
