"""The company of an arriving prompt: how many other prompts arrive during the step under way
(as count atoms mixed over the steps' lengths, or a Poisson / negative binomial), how far a step's
room holds more whole prompts, the rank coupling of two discrete distributions, and the moments
of the step under way (length-biased) over a mix of steps."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from planner.latency.arrivals import CountMoments, panjer_start
from planner.latency.scipy_special import special

FloatArray = npt.NDArray[np.float64]
COUNT_ATOMS = 8  # a company's prompt count as atoms (`count_given_any`), for prompts of alike lengths


def count_given_any(
    rate: float, dispersion: float, lengths: FloatArray, weights: FloatArray
) -> tuple[list[float], list[float]]:
    """The count K of arrivals during the step under way, given K >= 1, as COUNT_ATOMS atoms
    (counts 1 .. COUNT_ATOMS - 1 exact, the last one the rest at its conditional mean): mixed
    over the steps under way, length L with length-biased weight, K given L of mean rate L and
    variance `dispersion` times that (Poisson for 1, else negative binomial). A moment fit misses
    the mixture's shape: mostly short steps with little company and a few long ones with much.
    Returns (counts, probabilities)."""
    mu = rate * lengths
    w = weights / float(np.add.reduce(weights))
    a, b, pk = panjer_start(mu, dispersion)  # P(k) = P(k - 1) (a + b / k)
    w_any = float(w @ (1.0 - pk))
    if w_any <= 1e-300:
        return [1.0], [1.0]
    counts: list[float] = []
    probs: list[float] = []
    seen = first = 0.0
    for k in range(1, COUNT_ATOMS):
        pk = pk * (a + b / k)
        pr = float(w @ pk) / w_any
        counts.append(float(k))
        probs.append(pr)
        seen += pr
        first += k * pr
    rest = 1.0 - seen
    if rest > 1e-12:
        mean = float(w @ mu) / w_any
        counts.append(max((mean - first) / rest, float(COUNT_ATOMS)))
        probs.append(rest)
    return counts, probs


def others_in_step(cm: CountMoments, fit: int, poisson: bool) -> FloatArray:
    """P(K = k), k = 0 .. fit (the last: fit or more), K the other arrivals during a step around
    an arrival (`arrivals.company_count`): Poisson of mean E[K] for Poisson arrivals; for gamma
    gaps P(K >= 1) and, given K >= 1, 1 + a negative binomial of K - 1's two moments (Poisson
    where they are not over-dispersed)."""
    out = np.zeros(fit + 1)
    if poisson:
        mu = cm.m1
        if not mu > 0.0:
            out[0] = 1.0
            return out
        k = np.arange(fit + 1, dtype=np.float64)
        out = np.exp(k * math.log(mu) - mu - special.gammaln(k + 1.0))
        out[-1] = max(1.0 - float(out[:-1].sum()), 0.0)  # fit or more
        return out
    p_any = cm.p_any
    out[0] = 1.0 - p_any
    if not (p_any > 0.0 and fit > 0):
        out[-1] += p_any
        return out
    a = max(cm.m1 / p_any - 1.0, 0.0)  # K - 1 given K >= 1: mean, variance
    v = max(cm.m2 / p_any - (cm.m1 / p_any) ** 2, 0.0)
    k = np.arange(fit, dtype=np.float64)
    if a > 0.0 and v > a * (1.0 + 1e-9):
        r = a * a / (v - a)
        logp = special.gammaln(r + k) - special.gammaln(r) - special.gammaln(k + 1.0)
        logp += r * math.log(r / (r + a)) + k * math.log(a / (r + a))
    elif a > 0.0:
        logp = k * math.log(a) - a - special.gammaln(k + 1.0)
    else:
        logp = np.where(k == 0.0, 0.0, -np.inf)
    out[1:] = p_any * np.exp(logp)
    out[-1] = max(p_any - float(out[1:-1].sum()), 0.0)  # fit or more
    return out


def room_for_more(room: float, prompt: float) -> float:
    """How far a step's room beside one prompt holds more whole prompts of `prompt` tokens:
    room / prompt - 1 in [0, 1] (none below one prompt's room, fully from two). Where it holds
    under one the company overflows the step (FIFO: those before it push the prompt's last
    tokens a step later) or fits in part, and whole-prompt counts misread it; the steps' chain
    (`steps.chain_company`) and D's company in whole prompts (`delay.company_atoms`) fade
    in by it."""
    return min(max(room / prompt - 1.0, 0.0), 1.0)


def couple_by_rank(
    a: list[float], pa: list[float], b: list[float], pb: list[float]
) -> tuple[tuple[list[float], list[float]], list[float]]:
    """Two discrete distributions, each sorted ascending, paired by rank (the comonotone
    coupling: the j-th least of one with the j-th least of the other, in probability): the
    pieces where both CDFs are constant, as ((a's values, b's values), probabilities). Each
    distribution's probabilities sum to 1 (to rounding: the last piece takes what is left)."""
    va: list[float] = []
    vb: list[float] = []
    pr: list[float] = []
    i = j = 0
    ra, rb = pa[0], pb[0]
    last_a, last_b = len(a) - 1, len(b) - 1
    for _ in range(last_a + last_b + 1):  # each pass but the last moves one of them on
        done = i == last_a and j == last_b
        a_ends = not done and (j == last_b or (i < last_a and ra <= rb))
        step = max(ra, rb) if done else ra if a_ends else rb
        if step > 0.0:
            va.append(a[i])
            vb.append(b[j])
            pr.append(step)
        if done:
            break
        if a_ends:
            rb -= step
            i += 1
            ra = pa[i]
        else:
            ra -= step
            j += 1
            rb = pb[j]
    return (va, vb), pr


def under_way(atom: float, values: FloatArray, rates: FloatArray) -> tuple[FloatArray, FloatArray]:
    """The step under way over a mix (steps of `values` with shares `rates`, capped at 1 in
    all, `atom` otherwise, as `length_biased`): (lengths, length-biased weights, unnormalized)."""
    total = float(np.add.reduce(rates))
    lengths = np.concatenate(([atom], values))
    shares = np.concatenate(([max(0.0, 1.0 - total)], rates / max(1.0, total)))
    return lengths, shares * lengths


Sums = tuple[float, float, float, float]  # sum r, sum r v, sum r v^2, sum r v^3 of a step mix
NO_SUMS: Sums = (0.0, 0.0, 0.0, 0.0)


def add_sums(a: Sums, wa: float, b: Sums, wb: float) -> Sums:
    return (a[0] * wa + b[0] * wb, a[1] * wa + b[1] * wb, a[2] * wa + b[2] * wb, a[3] * wa + b[3] * wb)


def length_biased(atom: float, sums: Sums) -> tuple[float, float]:
    """Steps take values with shares r (the `sums` of the mix, shares capped at 1 in all) and
    `atom` otherwise: E[T^2] / E[T] and E[T^3] / E[T], the mean and second moment of the step
    under way (length-biased: a long step is more likely under way)."""
    total = sums[0]
    scale = 1.0 / max(1.0, total)
    w0 = max(0.0, 1.0 - total)
    m1 = w0 * atom + scale * sums[1]
    if m1 <= 0:
        return 0.0, 0.0
    m2 = w0 * atom * atom + scale * sums[2]
    m3 = w0 * atom**3 + scale * sums[3]
    return m2 / m1, m3 / m1
