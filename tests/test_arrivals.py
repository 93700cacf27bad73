"""planner.latency.arrivals: the other arrivals within a step around an arrival (its company),
against closed forms, an independent series, and a Monte Carlo gamma renewal process."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special

from planner.latency.arrivals import EXACT_TERMS, CountMoments, beside, company_count, steps_by_count


def test_poisson_closed_form() -> None:
    """k = 1: N_b ~ Poisson(lam U L), U uniform. With L fixed (mu = lam L = 0.5): P(K >= 1) =
    1 - e^{-mu}; P(N_b >= 1) = E_U[1 - e^{-mu U}] = 1 - (1 - e^{-mu}) / mu; E[N_b] = mu / 2;
    E[N_b^2] = E[(mu U)^2 + mu U] = mu^2 / 3 + mu / 2; E[N_b N_f] = mu^2 E[U (1 - U)] = mu^2 / 6.
    With L spread (E[L^2] = 0.3 at E[L] = 0.5, lam = 1): E[K^2] = lam^2 E[L^2] + lam E[L] = 0.8."""
    mu = 0.5
    got = company_count(1.0, 1.0, mu, mu * mu)
    assert got.p_any == pytest.approx(1.0 - math.exp(-mu), rel=1e-15)
    assert got.p_one == pytest.approx(1.0 - (1.0 - math.exp(-mu)) / mu, rel=1e-14)
    assert got.one == pytest.approx(mu / 2.0, rel=1e-15)
    assert got.one_sq == pytest.approx(mu * mu / 3.0 + mu / 2.0, rel=1e-15)
    assert got.cross == pytest.approx(mu * mu / 6.0, rel=1e-15)
    spread = company_count(1.0, 1.0, 0.5, 0.3)
    assert spread.m1 == pytest.approx(0.5, rel=1e-15)
    assert spread.m2 == pytest.approx(0.8, rel=1e-15)


@pytest.mark.parametrize("mu", [0.05, 0.5, 3.0])
def test_gamma_form_is_poisson_at_k_one(mu: float) -> None:
    """The quadrature over U reproduces Poisson at k -> 1 (continuity: the Poisson branch is a
    closed form of the same quantities; P(K = 0) = e^{-mu} exactly for any nodes, the moments
    are polynomials of degree <= 2 in U)."""
    exact = company_count(1.0, 2.0, mu / 2.0, (mu / 2.0) ** 2 * 1.2)
    near = company_count(1.0 + 1e-9, 2.0, mu / 2.0, (mu / 2.0) ** 2 * 1.2)
    for a, b in zip(exact, near, strict=True):
        assert b == pytest.approx(a, rel=1e-6)


@pytest.mark.parametrize(("k", "mu"), [(0.25, 0.13), (0.25, 2.0), (0.05, 0.13), (0.84, 0.5), (3.0, 1.0)])
def test_mean_against_the_series(k: float, mu: float) -> None:
    """E[K] = 2 sum_j [P(j k, x) - (j k / x) P(j k + 1, x)], x = k mu: the integral over U of
    P(j k, x U) in closed form (integration by parts), summed over j to where it vanishes."""
    x = k * mu
    j = np.arange(1, 20000)
    series = 2.0 * float(np.sum(special.gammainc(j * k, x) - (j * k / x) * special.gammainc(j * k + 1.0, x)))
    got = company_count(k, 1.0, mu, mu * mu)
    assert got.m1 == pytest.approx(series, rel=1e-9)  # blocks past EXACT_TERMS at k = 0.05


def test_blocks_beyond_the_exact_terms() -> None:
    """Very bursty gaps (k = 0.004, CV^2 250: E[K] = 68 at lam L = 0.3) need far more than
    EXACT_TERMS terms (the term at EXACT_TERMS is still 0.2): the midpoint blocks keep E[K]
    within 1e-3 of the whole series."""
    k, mu = 0.004, 0.3
    x = k * mu
    got = company_count(k, 1.0, mu, mu * mu)
    j = np.arange(1, 200_000)
    series = 2.0 * float(np.sum(special.gammainc(j * k, x) - (j * k / x) * special.gammainc(j * k + 1.0, x)))
    assert special.gammainc(EXACT_TERMS * k, x) > 0.1
    assert got.m1 == pytest.approx(series, rel=1e-3)


def _monte_carlo(k: float, mu: float, n: int, seed: int) -> tuple[float, float, float, float, float]:
    """Gamma(k) gaps of mean 1 (rate 1); each arrival tagged in turn, a window of length mu
    around it at a uniform offset: (P(K >= 1), P(N_b >= 1), E[N_b], E[N_b^2], E[N_b N_f])."""
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.gamma(k, 1.0 / k, size=n))
    tags = t[1000:-1000]
    u = rng.random(tags.size)
    lo, hi = tags - u * mu, tags + (1.0 - u) * mu
    nb = np.searchsorted(t, tags, side="left") - np.searchsorted(t, lo, side="left")
    nf = np.searchsorted(t, hi, side="right") - np.searchsorted(t, tags, side="right")
    return (
        float(np.mean(nb + nf > 0)),
        float(np.mean(nb > 0)),
        float(nb.mean()),
        float(np.mean(nb * nb)),
        float(np.mean(nb * nf)),
    )


@pytest.mark.parametrize(("k", "mu"), [(0.25, 0.13), (0.25, 1.0), (0.84, 0.5), (3.0, 1.5)])
def test_against_a_simulated_renewal_process(k: float, mu: float) -> None:
    """A million gamma gaps counted around each arrival: the four moments within 2% (1% for the
    probabilities). At CV^2 4 and lam L = 0.13 (budget 8192 on an H100, 30% load): P(K = 0) =
    0.39, where the simulator scheduled 39% of prompts alone (docs/latency/ttft.md)."""
    got = company_count(k, 1.0, mu, mu * mu)
    p_any, p_one, one, one_sq, cross = _monte_carlo(k, mu, 1_000_000, 7)
    assert got.p_any == pytest.approx(p_any, rel=0.01)
    assert got.p_one == pytest.approx(p_one, rel=0.01)
    assert got.one == pytest.approx(one, rel=0.02)
    assert got.one_sq == pytest.approx(one_sq, rel=0.02)
    assert got.cross == pytest.approx(cross, rel=0.03, abs=1e-3)
    if (k, mu) == (0.25, 0.13):
        assert 1.0 - got.p_any == pytest.approx(0.39, abs=0.01)


def test_beside_by_hand() -> None:
    """theta = E[min(A, room)] / E[A] and P(B > room). Exactly one prompt on a side whenever
    there is one (E[N^2] = E[N] = P(N >= 1) = 0.3) of constant size 1,155 (CV^2 0): A = B =
    1,155, so 800 tokens of room fit 800/1,155 of A and B overflows whenever it exists (0.3);
    2,000 tokens fit all and nothing overflows. With the count's spread making the sizes' CV^2
    exactly 1 (an exponential of mean a = 1,000): E[min(A, r)] = a (1 - e^{-r/a}), P(B > r) =
    0.3 e^{-r/a}. No room: theta 0, every B over; no company: theta 1, none over."""
    one = CountMoments(p_any=0.5, p_one=0.3, one=0.3, one_sq=0.3, cross=0.0)
    got = beside(one, 800.0, 1155.0, 0.0)
    assert got.fit == pytest.approx(800.0 / 1155.0, rel=1e-15)
    assert got.over == 0.3
    assert beside(one, 2000.0, 1155.0, 0.0) == (1.0, 0.0)
    # E[A | any] = 1000 * 0.3 / 0.3 = 1000; E[A^2 | any] = 1000^2 (one_sq + cv2 one) / p_one = 2e6
    expo = beside(one, 700.0, 1000.0, 1.0)
    assert expo.fit == pytest.approx(1.0 - math.exp(-0.7), rel=1e-12)
    assert expo.over == pytest.approx(0.3 * math.exp(-0.7), rel=1e-12)
    assert beside(one, 0.0, 1000.0, 1.0) == (0.0, 0.3)
    assert beside(CountMoments(0.0, 0.0, 0.0, 0.0, 0.0), 10.0, 1000.0, 1.0) == (1.0, 0.0)


# ---- the steps' prompt-count chain (`steps_by_count`) ----------------------------------------


@pytest.mark.parametrize("dispersion", [1.0, 1.19, 4.0])
def test_step_count_chain_is_a_branching_process_with_immigration(dispersion: float) -> None:
    """Steps of L(j) = a + b j: the next count given j has mean lam (a + b j) and variance d times
    that. Then E[X] = lam a + lam b E[X], so E[X] = lam a / (1 - lam b), and Var X = E[Var(X' | X)]
    + Var(E[X' | X]) = d E[X] + (lam b)^2 Var X, so Var X = d E[X] / (1 - (lam b)^2). Here lam = 20
    /s, a = 10 ms, b = 25 ms: E[X] = 0.2 / 0.5 = 0.4, Var X = d 0.4 / 0.75 (the states reach far
    enough that the folded tail is below 1e-12)."""
    lam, a, b = 20.0, 0.010, 0.025
    j = np.arange(96, dtype=np.float64)
    dist = steps_by_count(lam, a + b * j, dispersion)
    assert dist.sum() == pytest.approx(1.0, abs=1e-12) and dist.min() >= 0.0
    mean = float(dist @ j)
    var = float(dist @ (j * j)) - mean * mean
    assert mean == pytest.approx(0.4, rel=1e-9)
    assert var == pytest.approx(dispersion * 0.4 / 0.75, rel=1e-7)


def test_step_count_chain_against_its_own_steps() -> None:
    """A literal run of the chain (Poisson counts, steps capped as the budget caps them: L(j) =
    20 ms + 15 ms per further prompt up to 4 more) against the stationary vector: every state's
    share within 4 standard errors of 200,000 steps' (batch means over 100 batches)."""
    lam = 25.0
    j = np.arange(24, dtype=np.float64)
    lengths = 0.020 + 0.015 * np.minimum(np.maximum(j - 1.0, 0.0), 4.0)
    lengths[0] = 0.012
    dist = steps_by_count(lam, lengths, 1.0)
    rng = np.random.default_rng(7)
    steps, batches = 200_000, 100
    counts = np.empty(steps, dtype=np.int64)
    x = 0
    for i in range(steps):
        x = min(int(rng.poisson(lam * lengths[x])), j.size - 1)
        counts[i] = x
    per_batch = np.array([np.bincount(c, minlength=j.size) / c.size for c in np.split(counts, batches)])
    mean = per_batch.mean(axis=0)
    se = per_batch.std(axis=0, ddof=1) / math.sqrt(batches)
    for k in range(6):
        assert abs(mean[k] - dist[k]) <= 4.0 * se[k] + 1e-4, (k, mean[k], dist[k], se[k])


def test_step_count_chain_without_arrivals() -> None:
    assert steps_by_count(0.0, np.array([0.01, 0.02, 0.03]), 1.0).tolist() == [1.0, 0.0, 0.0]
    assert steps_by_count(5.0, np.array([0.01]), 2.0).tolist() == [1.0]
