"""Queueing pieces of the latency model: the prefill queue's wait, its tail and its shape
beyond a shift. The percentiles of wait + service are in `planner/latency/quantiles.py`.

Wait (GI/G/1 with gamma-distributed arrival gaps of shape k, c_a^2 = 1/k): the probability of
waiting is GI/M/1's sigma, the root in (0, 1) of

    sigma = A*(mu (1 - sigma)) = (k rho / (k rho + 1 - sigma))^k

(A* the Laplace transform of the gaps; sigma = rho for Poisson, sigma > rho for bursty gaps);
given a wait it is exponential with mean f E[X] / (1 - sigma), where f carries the service
variability: f = (c_a^2 + c_s^2) / (1 + c_a^2), except (1 + c_s^2) / 2 when both c_a^2 > 1 and
c_s^2 > 1. So

    P(W > w) = sigma exp(-w (1 - sigma) / (f E[X]))

This is exact for M/G/1 (Pollaczek-Khinchine mean, k = 1: both forms of f agree) and for GI/M/1
(c_s^2 = 1), and has Kingman's heavy-traffic mean (c_a^2 + c_s^2) / (2 (1 - rho)) E[X] unless
both c_a^2 and c_s^2 exceed 1 (then more: conservative). As rho -> 1, 1 - sigma ->
2 (1 - rho) / (1 + c_a^2), so the limit is f (1 + c_a^2) / 2: the first form gives Kingman's
exactly, and (1 + c_s^2) / 2 exceeds it by (c_s^2 - 1)(c_a^2 - 1) / 4, >= 0 only when both are
above 1 or both below. The first form is therefore the larger of the two whenever c_s^2 > 1 >=
c_a^2 (a max of the two there reads the same). Allen–Cunneen/Kingman alone (P(W > 0) = rho)
badly underrates bursty arrivals at moderate load, where whole bursts queue. sigma and the mean
wait grow with rho, E[X] and burstiness. With c_s^2 > 1 and smooth arrivals f falls as arrivals
get burstier (from c_s^2 at k -> inf to (1 + c_s^2) / 2 at k = 1) while sigma grows: the mean
still grows, and so do the percentiles up to p99 for c_s^2 <= 20 at burstiness 50 -> 4 -> 1; far
tails of very spread service (p99.9, c_s^2 ~ 200) can dip a few percent on the way to Poisson.

The shape of the wait beyond a shift (the latency model's queue beyond the next step): given
W > 0, W keeps the mean above and takes M/G/1's second moment (`wait_phases`: two exponential
phases when it is more spread than an exponential, a gamma when less: `wait_beyond`), and
`quantiles.response_quantiles_phases` adds it to a discrete S, for some of S's points only. A gamma's
excess decays no faster than the exact GI/G/1 tail, e^{-theta w} with theta the Cramer-Lundberg
root for the gamma gaps and the service's own distribution (`wait_decay_s`; per engine
`WaitDecayTable`): the two-moment gamma thins too fast in light traffic with smooth service.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from planner.latency.scipy_special import special

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Wait:
    """P(W > w) = prob * exp(-w / mean_if_waiting) for w >= 0. `tail_s`, when known (> 0), is
    the exact GI/G/1 tail's decay scale 1 / theta (`wait_decay_s`): `wait_beyond` keeps the
    excess of a wait less spread than an exponential from thinning faster than that.

    `env`, when given, makes the wait a scale mixture: with probability p_i the whole wait
    (mean and tail scale) is f_i times as long, sum p_i f_i = 1 (the latency model's queue
    under a wandering decode count: docs/latency/prefill-queue.md)."""

    prob: float
    mean_if_waiting_s: float
    tail_s: float = 0.0
    env: tuple[tuple[float, float], ...] = ()

    @property
    def mean_s(self) -> float:
        return self.prob * self.mean_if_waiting_s

    def quantile(self, level: float) -> float:
        """The exponential reading's quantile: prob sum_i p_i exp(-w / (m f_i)) = 1 - level, the
        logarithm of the sum convex and decreasing in w, so Newton's method from w = 0 climbs
        monotonically onto the root (at most QUANTILE_STEPS steps)."""
        eps = 1.0 - level
        m = self.mean_if_waiting_s
        if self.prob <= eps or m <= 0:
            return 0.0
        target = math.log(self.prob / eps)
        if not self.env:
            return m * target
        means = [(p, m * f) for p, f in self.env if p > 0.0 and f > 0.0]
        w = 0.0
        for _ in range(QUANTILE_STEPS):
            terms = [(p * math.exp(-w / mi), mi) for p, mi in means]
            total = sum(t for t, _ in terms)
            g = -math.log(total) - target  # -ln P(W > w | W > 0) - ln(prob / eps): rises in w
            if g >= -1e-12 * max(target, 1.0):
                break
            w -= g * total / sum(t / mi for t, mi in terms)  # slope of -ln(sum) is the hazard
        return w


QUANTILE_STEPS = 60  # Newton steps of `Wait.quantile` over an environment (converges in a few)


NO_WAIT = Wait(0.0, 0.0)


def gamma_wait_probability(rho: float, k: float, start: float = 0.0) -> float:
    """GI/M/1 probability of waiting for gamma(k) gaps: the root in (0, 1) of
    sigma = (k rho / (k rho + 1 - sigma))^k. Newton from 0 climbs monotonically (the right-hand
    side is increasing and convex in sigma), and so from any `start` below the root (rho itself
    for k < 1: bursts wait more often than the queue is busy)."""
    if rho <= 0:
        return 0.0
    if rho >= 1:
        return 1.0
    if k == 1.0:
        return rho
    kr = k * rho
    s = start
    for _ in range(200):
        base = kr / (kr + 1.0 - s)
        h = base**k
        g = h - s
        dg = k * h / (kr + 1.0 - s) - 1.0
        if dg >= 0:  # cannot happen left of the root; stay safe
            break
        step = g / dg
        s -= step
        if abs(step) <= 1e-14 * max(s, 1e-300) or s >= 1.0:
            break
    return min(max(s, 0.0), 1.0 - 1e-15)


def gamma_wait_probability_slope(rho: float, k: float, sigma: float) -> float:
    """d sigma / d rho of `gamma_wait_probability` at its root sigma, by implicit
    differentiation of sigma = F(sigma, rho) = (k rho / (k rho + 1 - sigma))^k:
    F_rho / (1 - F_sigma), F_rho = k F (1/rho - k / (k rho + 1 - sigma)), F_sigma = k F / (k rho +
    1 - sigma). 1 for Poisson (k = 1, sigma = rho); 0 outside (0, 1)."""
    if not 0.0 < rho < 1.0:
        return 0.0
    if k == 1.0:
        return 1.0
    gap = k * rho + 1.0 - sigma
    f_rho = k * sigma * (1.0 / rho - k / gap)
    f_sigma = k * sigma / gap
    return f_rho / (1.0 - f_sigma) if f_sigma < 1.0 else 0.0


def gg1_wait(rho: float, mean_service_s: float, arrival_cv2: float, service_cv2: float) -> Wait:
    """The prefill queue's wait (module docstring). rho >= 1: unbounded."""
    if rho <= 0 or mean_service_s <= 0:
        return NO_WAIT
    if rho >= 1:
        return Wait(1.0, math.inf)
    sigma = gamma_wait_probability(rho, 1.0 / arrival_cv2)
    # Service-variability factor: exact for M/G/1 and GI/M/1, Kingman's heavy-traffic mean unless
    # both c^2 exceed 1, conservative there (module docstring).
    if min(arrival_cv2, service_cv2) <= 1.0:
        f = (arrival_cv2 + service_cv2) / (1.0 + arrival_cv2)
    else:
        f = (1.0 + service_cv2) / 2.0
    return Wait(sigma, f * mean_service_s / (1.0 - sigma))


DECAY_STEPS = 100  # Newton steps of `wait_decay_s` (it converges in a handful)
DECAY_HEAVY = 1e-6  # 1 - rho below this: the heavy-traffic limit (the equation is below rounding)


def wait_decay_s(
    rho: float, arrival_cv2: float, mean_service_s: float, shape: FloatArray, probs: FloatArray
) -> float:
    """The decay scale 1 / theta of the GI/G/1 wait's tail, P(W > w) ~ C exp(-theta w)
    (Cramer-Lundberg): theta > 0 solves E[exp(theta X)] E[exp(-theta A)] = 1, which with gamma
    gaps of shape k = 1 / c_a^2 and u = theta E[X] reads

        k ln(1 + u / (k rho)) = ln E[exp(u xi)],    xi = X / E[X] (`shape`, weights `probs`).

    It is exact where the two-moment forms are not: a GI/D/1 at rho = 0.24 (the prefill queue of
    constant prompts) decays with scale 0.51 E[X] where the gamma fit of `wait_beyond` gives
    0.40 E[X], and a Lindley recursion over the same arrivals shows 0.51. Checks: M/M/1 u =
    1 - rho, M/D/1 e^u = 1 + u / rho, GI/M/1 u = 1 - sigma, and Kingman's 2 (1 - rho) /
    (c_a^2 + c_s^2) as rho -> 1. The right side is convex and the left concave, so f = left -
    right is concave with f(0) = 0 and f'(0) = 1 / rho - 1 > 0: Newton from a point past the root
    (found by doubling from the heavy-traffic guess) descends monotonically onto it."""
    if not 0.0 < rho < 1.0 or not mean_service_s > 0.0:
        return 0.0
    k = 1.0 / arrival_cv2
    kr = k * rho
    top = float(shape.max())
    m1 = float(probs @ shape)
    cs2 = max(float(probs @ (shape * shape)) / (m1 * m1) - 1.0, 0.0)
    if 1.0 - rho < DECAY_HEAVY:  # Kingman's heavy-traffic scale, exact in the limit
        return mean_service_s * (arrival_cv2 + cs2) / (2.0 * (1.0 - rho))

    def f(u: float) -> tuple[float, float]:
        e = probs * np.exp(u * (shape - top))  # scaled by e^{-u top}: no overflow
        mgf = float(np.add.reduce(e))
        slope = float(e @ shape) / mgf  # d/du ln E[exp(u xi)]
        return k * math.log1p(u / kr) - (u * top + math.log(mgf)), k / (kr + u) - slope

    u = 2.0 * (1.0 / rho - 1.0) / (arrival_cv2 / (rho * rho) + cs2)  # heavy traffic, E[A] = 1 / rho
    val, der = f(u)
    for _ in range(DECAY_STEPS):  # to the right of the root: f < 0
        if val < 0.0:
            break
        u *= 2.0
        val, der = f(u)
    for _ in range(DECAY_STEPS):
        if not (val < 0.0 and der < 0.0):
            break
        step = val / der
        u -= step
        if step <= 1e-13 * u:
            break
        val, der = f(u)
    return mean_service_s / u


# The u grid of `WaitDecayTable` (u = theta E[X]): sparse where ln u is linear in x (rho within
# ~1e-6 of 1 up to u = 0.01), dense above, to u = 64 (below any rho a queue shows).
DECAY_U = np.concatenate([np.geomspace(1e-6, 1e-2, 6, endpoint=False), np.geomspace(1e-2, 64.0, 26)])


@dataclass(frozen=True)
class WaitDecayTable:
    """`wait_decay_s` for one arrival process and service shape at any rho: the fast path (the
    latency model asks at every state of an engine, whose shape is fixed). The equation gives
    rho explicitly for each u, rho = u / (k (exp(a) - 1)) with a = ln E[exp(u xi)] / k, so a
    geometric grid of u maps to rho once, with the slope d ln u / dx in x = ln((1 - rho) / rho)
    (near rho = 1, u is proportional to 1 - rho: nearly linear in those coordinates), and a
    state reads ln u off a cubic Hermite interpolation (tests hold it to the reference within
    0.1% for rho >= 0.1, 0.5% below)."""

    x: tuple[float, ...]  # ascending
    ln_u: tuple[float, ...]
    slope: tuple[float, ...]  # d ln u / dx

    @classmethod
    def build(cls, arrival_cv2: float, shape: FloatArray, probs: FloatArray) -> WaitDecayTable:
        k = 1.0 / arrival_cv2
        u = DECAY_U
        top = float(shape.max())
        e = np.exp(np.outer(u, shape - top))
        e *= probs
        mgf = np.add.reduce(e, axis=1)  # E[exp(u xi)] e^{-u top}
        a = (u * top + np.log(mgf)) / k
        da = (e @ shape) / mgf / k  # a'(u)
        tail = -np.expm1(-a)  # 1 - e^{-a}
        ln_rho = np.log(u) - math.log(k) - a - np.log(tail)
        one_minus = -np.expm1(ln_rho)
        x = np.maximum.accumulate(np.log(one_minus) - ln_rho)  # rho falls as u grows: keep it so
        dln_rho = 1.0 / u - da / tail  # d ln rho / du
        dx = -dln_rho / one_minus  # dx/du = -(d ln rho / du) / (1 - rho)
        return cls(tuple(x.tolist()), tuple(np.log(u).tolist()), tuple((1.0 / (u * dx)).tolist()))

    def scale_s(self, rho: float, mean_service_s: float) -> float:
        """`wait_decay_s(rho, ...)` of the table's arrivals and shape."""
        if not 0.0 < rho < 1.0 or not mean_service_s > 0.0:
            return 0.0
        x, y, d = self.x, self.ln_u, self.slope
        v = math.log((1.0 - rho) / rho)
        i = bisect.bisect_left(x, v)
        if i == 0:  # closer to 1 than the grid: u proportional to 1 - rho, ln u linear in x
            return mean_service_s * math.exp(-(y[0] + (v - x[0])))
        if i == len(x):  # below the grid's least rho: along the last slope (ln u grows slower)
            return mean_service_s * math.exp(-(y[-1] + d[-1] * (v - x[-1])))
        x0 = x[i - 1]
        h = x[i] - x0
        t = (v - x0) / h if h > 0.0 else 0.0
        t2 = t * t
        t3 = t2 * t
        ln_u = (
            (2.0 * t3 - 3.0 * t2 + 1.0) * y[i - 1]
            + (t3 - 2.0 * t2 + t) * h * d[i - 1]
            + (-2.0 * t3 + 3.0 * t2) * y[i]
            + (t3 - t2) * h * d[i]
        )
        return mean_service_s * math.exp(-ln_u)


Phases = tuple[tuple[float, float], ...]  # (P(W > 0) share, mean) of each exponential phase


def wait_spread(prob: float, kappa: float) -> float:
    """r = E[W^2 | W > 0] / E[W | W > 0]^2 = 2 sigma + (4/3)(1 - sigma) kappa (`wait_phases`):
    linear in sigma, from (4/3) kappa to 2, so a wait with kappa > 3/2 is more spread than an
    exponential at every load, and never takes `wait_beyond`'s gamma (nor `Wait.tail_s`)."""
    return 2.0 * prob + (4.0 / 3.0) * (1.0 - prob) * kappa


def wait_phases(wait: Wait, kappa: float) -> Phases:
    """The wait given that it is positive as a mixture of exponentials: P(W > w) =
    sum_k a_k exp(-w / m_k), of the same mean as `wait` and the second moment M/G/1 gives it,

        E[W^2 | W > 0] / E[W | W > 0]^2 = r = 2 sigma + (4/3) (1 - sigma) kappa,

    kappa = E[X] E[X^3] / E[X^2]^2 of the service X (sigma = rho for M/G/1, where this is exact:
    E[W^2] = 2 E[W]^2 + lam E[X^3] / (3 (1 - rho)) with E[W] = lam E[X^2] / (2 (1 - rho))). It
    goes from the residual life of the service in light traffic (r -> (4/3) kappa: a long
    service ahead leaves a long wait) to exponential in heavy traffic (r -> 2). With r > 2, two
    phases with balanced means (a_k m_k equal), the usual two-moment hyperexponential; else one
    (exponential service: kappa = 3/2, r = 2)."""
    prob, m = wait.prob, wait.mean_if_waiting_s
    if prob <= 0 or m <= 0:
        return ()
    if not math.isfinite(m):
        return ((prob, m),)
    r = wait_spread(prob, kappa)
    c2 = r - 1.0
    if c2 <= 1.0:
        return ((prob, m),)
    p1 = 0.5 * (1.0 + math.sqrt((c2 - 1.0) / (c2 + 1.0)))
    p2 = 1.0 - p1
    return ((prob * p1, m / (2.0 * p1)), (prob * p2, m / (2.0 * p2)))


def wait_beyond(wait: Wait, kappa: float, shift_s: float) -> tuple[float, Phases]:
    """P(W > shift) and the distribution of W - shift given that, as exponential phases (given
    W > 0, W has the mean of `wait` and the second moment of `wait_phases`). Spread (r > 2):
    the two phases, each memoryless. Less spread (r <= 2): a gamma of shape 1 / (r - 1) and
    scale m (r - 1), so P(W > shift) = sigma Q(shape, shift / scale) (Q the regularized upper
    incomplete gamma function) and the excess is exponential with the gamma's scale (its
    asymptotic hazard), or the exact tail's `Wait.tail_s` where that is longer (light traffic
    with smooth service: the gamma's hazard is too fast there); r = 2 is the exponential
    either way."""
    prob, m = wait.prob, wait.mean_if_waiting_s
    if prob <= 0 or m <= 0:
        return 0.0, ()
    if not math.isfinite(m):
        return 1.0, ((1.0, m),)
    r = wait_spread(prob, kappa)
    env = wait.env or _ONE_PART  # a scale mixture: each part's own shape, beyond the same shift
    parts: list[tuple[float, float]] = []
    total = 0.0
    if r > 2.0:
        # `shift_phases(wait_phases(wait, kappa), shift_s)` written out (r > 2: two phases per
        # part); the latency model calls this twice per state.
        c2 = r - 1.0
        p1 = 0.5 * (1.0 + math.sqrt((c2 - 1.0) / (c2 + 1.0)))
        p2 = 1.0 - p1
        for p, f in env:
            m1, m2 = m * f / (2.0 * p1), m * f / (2.0 * p2)
            a1 = prob * p * p1 * math.exp(-shift_s / m1)
            a2 = prob * p * p2 * math.exp(-shift_s / m2)
            parts += ((a1, m1), (a2, m2))
            total += a1 + a2
        return total, tuple((a / total, mean) for a, mean in parts) if total > 0 else ()
    c2 = max(r - 1.0, 1e-6)
    shape = 1.0 / c2
    x = max(shift_s, 0.0)
    for p, f in env:
        scale = m * f * c2
        q = prob * p * float(special.gammaincc(shape, x / scale))
        parts.append((q, max(scale, wait.tail_s * f)))
        total += q
    if len(parts) == 1:
        return total, ((1.0, parts[0][1]),)
    return total, tuple(
        (q / total if total > 0 else p, mean) for (q, mean), (p, _) in zip(parts, env, strict=True)
    )


_ONE_PART = ((1.0, 1.0),)


def shift_phases(phases: Phases, shift_s: float) -> Phases:
    """The wait beyond `shift_s`, max(W - shift, 0): each phase is memoryless, so its weight
    shrinks by e^{-shift / m} and its mean stays."""
    return tuple((a * math.exp(-shift_s / m), m) for a, m in phases)


def phases_mean_s(phases: Phases) -> float:
    return sum(a * m for a, m in phases)
