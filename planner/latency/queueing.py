"""Queueing pieces of the latency model: the prefill queue's wait and percentiles of wait +
service.

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

The response time adds the request's own service S (a discrete distribution): its percentiles
are found in closed form, segment by segment of the sorted support of S.

The shape of the wait beyond a shift (the latency model's queue beyond the next step): given
W > 0, W keeps the mean above and takes M/G/1's second moment (`wait_phases`: two exponential
phases when it is more spread than an exponential, a gamma when less: `wait_beyond`), and
`response_quantiles_phases` adds it to a discrete S, for some of S's points only. A gamma's
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


def weighted_quantiles(values: FloatArray, weights: FloatArray, levels: FloatArray) -> FloatArray:
    """inf{x : F(x) >= level} of the discrete distribution (values, weights >= 0)."""
    order = values.argsort(kind="stable")
    v = values[order]
    cum = weights[order].cumsum()
    idx = np.searchsorted(cum, levels * cum[-1] * (1.0 - 1e-12), side="left")
    return v[np.minimum(idx, v.size - 1)]


SPREAD = 0.05  # each mixed-step value stands for step times within +-5% of it


def tail_quantiles(
    atom: float,
    values: FloatArray,
    rates: FloatArray,
    levels: FloatArray,
    spread: float | FloatArray = SPREAD,
    total: float | None = None,
) -> FloatArray:
    """Quantiles of the steps a decoder sees: the share r_j of steps takes about v_j (>= atom),
    the rest take `atom`. Each v_j stands for a slice of a continuous length distribution, so it
    is spread uniformly over v_j (1 +- spread): P(X > x) = min(1, sum_j r_j G_j(x)), G_j falling
    linearly from 1 to 0 across the spread. When the r_j sum past 1 (every step carries
    something) the tail is capped at 1 rather than the shares normalized. P(X > x) rises with
    every r_j and v_j, so no quantile falls when a share or a step time grows, and quantiles
    move continuously with them. `spread`: one relative half-width, or one per value (> 0).
    `total`: float(rates.sum()) when the caller has it."""
    if total is None:
        total = float(rates.sum())
    if total <= 0:
        return np.full(levels.shape, atom)
    if not math.isfinite(total):
        # Steps of unbounded rate (a queue past its stable range: its full steps take every
        # step) leave the others no share: the limit of their rates growing alike.
        endless = ~np.isfinite(rates)
        n_endless = int(endless.sum())
        each = np.full(n_endless, 1.0 / n_endless)
        part = spread if np.ndim(spread) == 0 else np.asarray(spread)[endless]
        return tail_quantiles(atom, values[endless], each, levels, part, 1.0)
    # Same arithmetic as the textbook form (edges, slopes by edge, P at each edge by cumulative
    # sums), written into preallocated arrays: these arrays are small and numpy's per-call
    # overhead dominates.
    nv = values.size
    half = spread * values
    slope = rates / (2.0 * half)
    edges = np.empty(2 * nv)
    np.subtract(values, half, out=edges[:nv])
    np.add(values, half, out=edges[nv:])
    steps = np.empty(2 * nv)
    np.negative(slope, out=steps[:nv])
    steps[nv:] = slope
    order = edges.argsort(kind="stable")
    e = edges[order]
    running = np.add.accumulate(steps[order])  # slope of P right after each edge (cumsum)
    d = e[1:] - e[:-1]
    d *= running[:-1]
    p = np.empty(2 * nv)  # P(X > e_k), decreasing from `total` to 0
    p[0] = total
    tail = p[1:]
    np.add.accumulate(d, out=tail)
    tail += total
    top = min(1.0, total)
    out = [atom] * levels.size
    for i, eps in enumerate((1.0 - levels).tolist()):
        if top <= eps:
            continue
        k = max(int((p <= eps).argmax()), 1)  # first edge at or below eps
        p0, p1 = p.item(k - 1), p.item(k)
        frac = (p0 - eps) / (p0 - p1) if p0 > p1 else 0.0
        e0 = e.item(k - 1)
        x = e0 + min(max(frac, 0.0), 1.0) * (e.item(k) - e0)
        out[i] = max(x, atom)
    return np.array(out)


def response_quantiles(
    service_s: FloatArray, probs: FloatArray, wait: Wait, levels: FloatArray
) -> FloatArray:
    """Percentiles of W + S, W independent of S (a discrete distribution over `service_s`).

    P(W + S > x) = sum_i p_i G(x - s_i), G(y) = 1 for y < 0 and prob e^{-y/m} for y >= 0. On a
    segment s_j <= x < s_{j+1} of the sorted support this is A_j + prob C_j e^{-(x - s_j)/m},
    A_j = sum_{i>j} p_i, C_j = sum_{i<=j} p_i e^{-(s_j - s_i)/m}: solved in closed form."""
    m = wait.mean_if_waiting_s
    if wait.prob <= 0 or m <= 0:
        return weighted_quantiles(service_s, probs, levels)
    if not math.isfinite(m):
        return np.full(levels.shape, math.inf)
    order = service_s.argsort(kind="stable")
    s = service_s[order]
    p = probs[order]
    tail = 1.0 - p.cumsum()  # A_j
    # C_j = e^{-s_j/m} sum_{i<=j} p_i e^{s_i/m}, accumulated in log space (no overflow).
    x = s * (1.0 / m)
    with np.errstate(divide="ignore"):
        log_c = np.logaddexp.accumulate(np.log(p) + x) - x
    rc = wait.prob * np.exp(log_c)
    at_start = tail + rc  # P(W + S > s_j), non-increasing in j
    # The quantile lies in the first segment whose right end has fallen to eps: at s_j itself if
    # P(W + S > s_j) <= eps already, else inside [s_j, s_{j+1}) where the wait's tail crosses
    # eps, else at s_{j+1} (the atom there takes P below eps). j is the last point above eps.
    out = np.empty(levels.shape, dtype=np.float64)
    n = s.size
    for i, eps in enumerate((1.0 - levels).tolist()):
        j = int((-at_start).searchsorted(-eps, side="left")) - 1  # last j with at_start[j] > eps
        if j < 0:
            out[i] = s[0]
            continue
        gap = eps - float(tail[j])
        q = float(s[j]) + m * math.log(float(rc[j]) / gap) if gap > 0 else math.inf
        out[i] = min(q, float(s[j + 1])) if j + 1 < n else q
    result: FloatArray = out
    return result


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


NEWTON_STEPS = 60


def phase_excess(c: list[float], inv: list[float], log_gap: float, limit: float) -> float:
    """The y >= 0 where sum_k c_k e^{-y inv_k} falls to e^{log_gap}, by Newton's method on the
    logarithm of the sum (convex and decreasing: from y = 0 it climbs monotonically onto the
    root); stops at `limit` (the segment's end) or after NEWTON_STEPS steps."""
    y = 0.0
    for _ in range(NEWTON_STEPS):
        terms = [ck * math.exp(-y * ik) for ck, ik in zip(c, inv, strict=True)]
        f = sum(terms)
        h = math.log(f) - log_gap
        if h <= 0 or y >= limit:
            break
        dh = -sum(t * ik for t, ik in zip(terms, inv, strict=True)) / f
        step = -h / dh
        y += step
        if step <= 1e-12 * max(y, 1e-300):
            break
    return y


def response_quantiles_phases(
    service_s: FloatArray,
    probs: FloatArray,
    phases: Phases,
    levels: FloatArray,
    waiting: FloatArray | None = None,
) -> FloatArray:
    """Percentiles of W + S as `response_quantiles`, the wait a mixture of exponential phases:
    P(W > y) = sum_k a_k e^{-y/m_k}. On a segment s_j <= x < s_{j+1} of S's sorted support,
    P(W + S > x) = A_j + sum_k a_k C_jk e^{-(x - s_j)/m_k}; the level is met where the sum falls
    to eps - A_j, found by Newton's method on its logarithm (convex and decreasing in x, so
    Newton from the segment's start climbs monotonically onto the root). One phase: the closed
    form of `response_quantiles`. `waiting` (per support point, 0..1): only that share of the
    point's probability waits (the rest has W = 0); default all. A 2-D `waiting` (points x
    phases) gives each phase its own shares: point i then waits phase k with probability
    waiting[i, k] a_k (points that wait differently, e.g. TTFT's KV-full branch)."""
    keep = [k for k, (a, m) in enumerate(phases) if a > 0 and m > 0]
    ph = [phases[k] for k in keep]
    if not ph:
        return weighted_quantiles(service_s, probs, levels)
    if any(not math.isfinite(m) for _, m in ph):
        return np.full(levels.shape, math.inf)
    if len(ph) == 1 and waiting is None:
        return response_quantiles(service_s, probs, Wait(ph[0][0], ph[0][1]), levels)
    order = service_s.argsort(kind="stable")
    s = service_s[order]
    p = probs[order]
    tail = 1.0 - np.add.accumulate(p)  # 1 - cumsum
    n = s.size
    if waiting is not None and waiting.ndim == 2:
        w2 = waiting[order]
        rcs2 = [a * _waiting_sums(s, p * w2[:, k], m) for k, (a, m) in zip(keep, ph, strict=True)]
        return _phase_quantiles(s, tail, rcs2, 0, ph, levels)
    if waiting is None:
        with np.errstate(divide="ignore"):
            log_p = np.log(p)
        start = 0
    else:
        # Points that do not wait (p w = 0, log = -inf) leave the running log-sum as it is
        # (logaddexp(c, -inf) = c exactly): accumulate over the waiting points only and carry
        # each sum forward. Before the first waiting point the sum is empty: C = 0 exactly there
        # (e^{-inf}), so the arrays start at that point (finite times only: -inf - x = -inf).
        pw = p * waiting[order]
        live = pw != 0.0
        live_at = live.nonzero()[0]
        start = int(live_at[0]) if live_at.size else n
        if start > 0 and not (math.isfinite(float(s[0])) and math.isfinite(float(s[start - 1]))):
            start = 0
        log_live = np.log(pw[live_at])
        if start:
            live = live[start:]
            live_at -= start
        carry = live.cumsum()  # 1 + the index of the last waiting point at or before each j
        sums = np.empty(live_at.size + 1)
        sums[0] = -math.inf
    rcs = []  # a_k C_jk for j >= start, by phase (0 before start)
    tail_s = s[start:] if start else s
    for a, m in ph:
        x = tail_s * (1.0 / m)
        if waiting is None:
            acc = np.logaddexp.accumulate(log_p + x)
        else:
            np.logaddexp.accumulate(log_live + x[live_at], out=sums[1:])
            acc = sums[carry]
        acc -= x
        np.exp(acc, out=acc)
        acc *= a
        rcs.append(acc)
    return _phase_quantiles(s, tail, rcs, start, ph, levels)


def _waiting_sums(s: FloatArray, pw: FloatArray, m: float) -> FloatArray:
    """sum_{i <= j} pw_i e^{-(s_j - s_i)/m} at every point j of the sorted support s, pw the
    probability that waits this phase (0 before the first waiting point), in log space as
    `response_quantiles_phases` does for one shared mask."""
    out = np.zeros(s.size)
    live = pw != 0.0
    live_at = live.nonzero()[0]
    if not live_at.size:
        return out
    start = int(live_at[0])
    if start > 0 and not (math.isfinite(float(s[0])) and math.isfinite(float(s[start - 1]))):
        start = 0
    x = s[start:] * (1.0 / m)
    sums = np.empty(live_at.size + 1)
    sums[0] = -math.inf
    np.logaddexp.accumulate(np.log(pw[live_at]) + x[live_at - start], out=sums[1:])
    acc = sums[live[start:].cumsum()]
    acc -= x
    np.exp(acc, out=acc)
    out[start:] = acc
    return out


def _phase_quantiles(
    s: FloatArray,
    tail: FloatArray,
    rcs: list[FloatArray],
    start: int,
    ph: list[tuple[float, float]],
    levels: FloatArray,
) -> FloatArray:
    """`response_quantiles_phases`'s search over the sorted support: `tail` P(S > s_j), `rcs` a_k
    C_jk by phase from point `start` on (0 before)."""
    n = s.size
    waits = rcs[0]
    for rc in rcs[1:]:
        waits = waits + rc
    neg_start = -tail  # -P(W + S > s_j) = -(tail + waits): ascending, for searchsorted
    if start < n:
        neg_start[start:] -= waits
    inv = [1.0 / m for _, m in ph]
    out = np.empty(levels.shape, dtype=np.float64)
    for i, eps in enumerate((1.0 - levels).tolist()):
        j = int(neg_start.searchsorted(-eps, side="left")) - 1
        if j < 0:
            out[i] = s[0]
            continue
        gap = eps - float(tail[j])
        if gap <= 0:
            out[i] = float(s[j + 1]) if j + 1 < n else math.inf
            continue
        c = [float(rc[j - start]) if j >= start else 0.0 for rc in rcs]
        limit = float(s[j + 1] - s[j]) if j + 1 < n else math.inf
        log_gap = math.log(gap)
        if len(c) == 1:  # closed form
            out[i] = float(s[j]) + min(max(ph[0][1] * (math.log(c[0]) - log_gap), 0.0), limit)
            continue
        out[i] = float(s[j]) + min(phase_excess(c, inv, log_gap, limit), limit)
    result: FloatArray = out
    return result
