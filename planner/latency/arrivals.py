"""How many other arrivals come close to an arrival: the company a prompt is scheduled with.

Arrivals are a renewal process with gamma gaps of shape k (c_a^2 = 1/k; Poisson at k = 1), the
workload's model everywhere in the latency model. A prompt that arrives during a step of length
L is scheduled at its end with every prompt that arrived during the same step, before it and
after it. Seen from an arrival (Palm), the gaps before and after it are independent gamma(k)
draws, so with the arrival at U L in the step (U uniform), the counts before (N_b, in a window
U L) and after (N_f, in (1 - U) L) are independent given U, and

    P(N(w) >= j) = P(j k, k lam w)        (P the regularized lower incomplete gamma)

(the j-th gap's end is a gamma(j k) sum). So, with K = N_b + N_f and x = k lam L,

    P(K = 0) = E_U[(1 - P(k, x U)) (1 - P(k, x (1 - U)))]
    E[K]     = 2 sum_j E_U[P(j k, x U)]            = 2 sum_j [P(j k, x) - (j k / x) P(j k + 1, x)]
    E[K^2]   = E_U[E N_b^2 + E N_f^2 + 2 E N_b E N_f],  E[N(w)^2] = sum_j (2 j - 1) P(j k, k lam w).

For Poisson this is K ~ Poisson(lam L) (closed form below). Under bursts it is much more than
the heuristic burst factor z(mu) = 1 + (c_a^2 - 1)/(1 + mu) gave: at CV^2 4 and lam L = 0.13,
P(K = 0) = 0.39 and E[K] = 1.16 (the heuristic: 0.62 and 0.48; the simulator, budget 8192 on
an H100 at 30% load: 39% of prompts scheduled alone, 1.34 others on average). And it is much
less spread than a compound count of that mean: Var K = 1.69 there, where z's compound form
(variance z E[K]) would read 11; that spread is what raised TTFT p99 by 35-75% when the exact
mean was tried with the compound form).

Over U, the single counts' moments are in closed form (E_U[P(a, x U)] = P(a, x) - (a/x) P(a + 1,
x)); the two products (P(K = 0) and E[N_b N_f]) are integrated by Gauss-Legendre (GL_NODES
nodes: their u^k edges cost ~1e-3 of the product). The sum over j is exact for the first
EXACT_TERMS terms and by the midpoint rule over at most SUM_GROUPS blocks beyond (P(j k, .) is
smooth and monotone in j): the work per call is bounded whatever k and lam L are.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from planner.latency.scipy_special import special

GL_NODES = 16
_GL_X, _GL_W = np.polynomial.legendre.leggauss(GL_NODES)
_U = 0.5 * (_GL_X + 1.0)  # nodes on (0, 1), symmetric: _U[::-1] = 1 - _U
_W = 0.5 * _GL_W
EXACT_TERMS = 64
SUM_GROUPS = 192
TAIL_SDS = 12.0  # terms past the count's mean by this many of its standard deviations (and gaps) are dropped
TAIL_LOG = 30.0  # for x < 1/2 terms with x^a < e^-TAIL_LOG are dropped
# Below this chance of any company an arrival has none (all moments 0). Near-regular arrivals
# (burstiness k ~ 1e6, under one gap per step) leave P(K >= 1) subnormal while the steps' own
# spread keeps E[K^2] ~ 1e-3: the company's moments given any (E[K^2] / P(K >= 1)) then overflow
# to inf and TTFT to NaN. At 1e-12 its weight is far below any percentile the model reads.
COMPANY_MIN = 1e-12


class CountMoments(NamedTuple):
    """K = N_b + N_f, the other arrivals within a step around an arrival, those before it (N_b)
    and after it (N_f, alike by symmetry): P(K >= 1), E[N_b], E[N_b^2] and E[N_b N_f]."""

    p_any: float
    p_one: float  # P(N_b >= 1) = P(N_f >= 1)
    one: float
    one_sq: float
    cross: float

    @property
    def m1(self) -> float:
        """E[K]."""
        return 2.0 * self.one

    @property
    def m2(self) -> float:
        """E[K^2]."""
        return 2.0 * (self.one_sq + self.cross)


def company_count(k: float, rate: float, mean_s: float, second_s2: float) -> CountMoments:
    """K for a step of mean length `mean_s` and second moment `second_s2` (length-biased: the
    step under way), gamma(k) gaps at `rate` per second (module docstring). The moments are
    taken at the mean step, plus, in the second moments, the steps' own spread as for Poisson
    (rate^2 Var L times E[U^2] = 1/3 and E[U (1 - U)] = 1/6), where all four match the closed
    form: N_b ~ Poisson(rate U L)."""
    mu = rate * mean_s
    var_l = rate * rate * max(second_s2 - mean_s * mean_s, 0.0)
    if not mu > 0.0:
        return CountMoments(0.0, 0.0, 0.0, 0.0, 0.0)
    if k == 1.0:
        p_any = -math.expm1(-mu)
        return CountMoments(
            p_any,
            1.0 - p_any / mu,  # E_U[1 - e^{-mu U}]
            0.5 * mu,
            (mu * mu + var_l) / 3.0 + 0.5 * mu,
            (mu * mu + var_l) / 6.0,
        )
    x = k * mu
    # Terms past which P(j k, x) < ~1e-13: P(a, x) <= x^a for x < 1 (a >= 1), else the gamma's
    # normal reach past its mean x.
    a_max = max(1.0, TAIL_LOG / -math.log(x)) if x < 0.5 else x + TAIL_SDS * math.sqrt(x + 1.0) + TAIL_SDS
    need = a_max / k
    n_exact = min(EXACT_TERMS, max(1, math.ceil(need)))
    j = np.arange(1.0, n_exact + 1.0)
    w = np.ones(n_exact)
    if need > n_exact:  # the rest by blocks of `stride` terms, each at its centre
        stride = max(1, math.ceil((need - n_exact) / SUM_GROUPS))
        blocks = math.ceil((need - n_exact) / stride)
        centres = n_exact + stride * np.arange(blocks) + 0.5 * (stride + 1.0)
        j = np.concatenate((j, centres))
        w = np.concatenate((w, np.full(blocks, float(stride))))
    a = j * k
    # E_U[P(a, x U)] = P(a, x) - (a / x) P(a + 1, x) (by parts): the single counts' moments in
    # closed form; the products of the two sides (P(K = 0), E[N_b N_f]) over the nodes.
    over_u = special.gammainc(a, x) - (a / x) * special.gammainc(a + 1.0, x)
    p = special.gammainc(a[:, None], x * _U[None, :])  # P(N_b >= j | U) by node
    e_b = w @ p  # E[N_b | U] at each node; E[N_f | U] is the mirrored node's
    alone = 1.0 - p[0]
    # P(K >= 1) <= E[K] (Markov): where the terms underflow to a zero mean, rounding must not
    # leave a positive chance of company with none expected.
    m1 = 2.0 * float(w @ over_u)
    p_any = min(1.0 - float(_W @ (alone * alone[::-1])), m1)
    if p_any < COMPANY_MIN:
        return CountMoments(0.0, 0.0, 0.0, 0.0, 0.0)
    return CountMoments(
        p_any,
        float(over_u[0]),
        float(w @ over_u),
        float((w * (2.0 * j - 1.0)) @ over_u) + var_l / 3.0,
        float(_W @ (e_b * e_b[::-1])) + var_l / 6.0,
    )


class Beside(NamedTuple):
    """How the company meets an arriving prompt's room in its last step (`beside`)."""

    fit: float  # E[min(A, room)] / E[A]: the after-company's share that rides in that step
    over: float  # P(B > room): the before-company pushes the prompt's last tokens a step later


def beside(cnt: CountMoments, room_tokens: float, mean_tokens: float, size_cv2: float) -> Beside:
    """vLLM schedules FIFO: of the prompts that arrived during the same step, those before the
    arriving one (B tokens) go first, those after it (A) fill what the budget leaves,
    `room_tokens` beside its own last chunk. B beyond the room pushes the prompt's last tokens
    into a further step (P(B > room)); A beyond it waits and does not delay the prompt (theta
    = E[min(A, room)] / E[A]). A and B given any are sums of N prompts of `mean_tokens` (CV^2
    `size_cv2`), alike by symmetry, taken as a gamma of their two moments: for shape s and
    mean a, E[min(A, r)] = a P(s + 1, s r / a) + r Q(s, s r / a) and P(B > r) = Q(s, s r / a)
    (r / a and [a > r] for a constant one). Without company: theta 1, P 0."""
    if not (cnt.p_one > 0.0 and cnt.one > 0.0):
        return Beside(1.0, 0.0)
    if not room_tokens > 0.0:
        return Beside(0.0, cnt.p_one)
    a = mean_tokens * cnt.one / cnt.p_one
    a2 = mean_tokens * mean_tokens * (cnt.one_sq + size_cv2 * cnt.one) / cnt.p_one
    cv2 = a2 / (a * a) - 1.0
    if not cv2 > 1e-12:
        return Beside(min(1.0, room_tokens / a), cnt.p_one if a > room_tokens else 0.0)
    shape = 1.0 / cv2
    z = shape * room_tokens / a
    above = float(special.gammaincc(shape, z))
    fit = a * float(special.gammainc(shape + 1.0, z)) + room_tokens * above
    return Beside(min(fit / a, 1.0), cnt.p_one * above)


def panjer_start(mu: np.ndarray, dispersion: float) -> tuple[float, np.ndarray | float, np.ndarray]:
    """Panjer's recursion for a count of mean mu and variance `dispersion` times that,
    P(k) = P(k - 1) (a + b / k): returns (a, b, P(0)). Poisson (dispersion <= 1): a = 0, b = mu;
    negative binomial of r = mu / (d - 1) trials and success chance p = 1 - 1 / d: a = p,
    b = (r - 1) p, P(0) = d^-r."""
    if dispersion > 1.0 + 1e-9:
        a = 1.0 - 1.0 / dispersion
        r = mu / (dispersion - 1.0)
        return a, (r - 1.0) * a, np.exp(-r * math.log(dispersion))
    return 0.0, mu, np.exp(-mu)


def steps_by_count(rate: float, lengths_s: np.ndarray, dispersion: float) -> np.ndarray:
    """The prompts a step admits, j = 0 .. J - 1 (J = len(lengths_s)), over steps: the stationary
    vector of the chain in which a step that admitted j prompts lasts lengths_s[j] and the next
    step admits the arrivals during it, of mean rate L and variance `dispersion` times that
    (negative binomial; Poisson at dispersion <= 1); counts of J - 1 and more are state J - 1.
    The steps' own feedback (a long step gathers many prompts, which make the next step long)
    is what spreads the count beyond a count over independent steps: for L(j) = a + b j and
    Poisson counts the mean is rate a / (1 - rate b) and the variance the mean over
    1 - (rate b)^2 (a branching process with immigration), times the dispersion for negative
    binomial counts. Gamma gaps' count over a window is taken at its long-window dispersion
    c_a^2 (the steps follow each other: the gaps' clumps run across them). The work is one J x J
    solve."""
    size = int(lengths_s.size)
    mu = rate * np.asarray(lengths_s, dtype=np.float64)
    if size < 2 or not float(mu.max()) > 0.0:
        out = np.zeros(max(size, 1))
        out[0] = 1.0
        return out
    a, b, pk = panjer_start(mu, dispersion)  # per row
    trans = np.empty((size, size))
    trans[:, 0] = pk
    for k in range(1, size - 1):
        pk = pk * (a + b / k)
        trans[:, k] = pk
    trans[:, -1] = np.maximum(1.0 - trans[:, :-1].sum(axis=1), 0.0)  # J - 1 and more
    # pi (T - I) = 0 with sum(pi) = 1: the last balance equation replaced by the sum
    system = trans.T - np.eye(size)
    system[-1, :] = 1.0
    rhs = np.zeros(size)
    rhs[-1] = 1.0
    dist = np.maximum(np.linalg.solve(system, rhs), 0.0)
    return dist / float(dist.sum())


JOIN_PASSES = 100  # Illinois steps of `join_share`'s fixed point (converges in ~10; bounded)
JOIN_HINT_WIDTH = 1e-3  # `join_share`'s first bracket around a hint, widened 16-fold ...
JOIN_HINT_WIDENINGS = 4  # ... at most this many times (then [0, 1])


def join_share(
    rate: float,
    decode_step_s: float,
    opener_s: float,
    joiner_s: float,
    dispersion: float,
    p0_hint: float | None = None,
) -> tuple[float, float]:
    """The share of prompts that join a step another prompt opened, j = 1 - P(J >= 1) / E[J],
    over the steps' chain where whole prompts share a step (alike prompts with room beside
    them): a step that admits no prompt lasts `decode_step_s` (t), one that admits J >= 1 lasts
    t + A + (J - 1) Jc (`opener_s` A: the first prompt's time beyond the decode step, which
    hides in its memory time; `joiner_s` Jc: each further prompt's, compute only), and the next
    step admits the arrivals during it (mean rate L, variance `dispersion` times that: negative
    binomial, Poisson at dispersion <= 1, as `steps_by_count`). Returns (j, P(J = 0)).

    In closed form up to one closure: E[J] = rate E[L] gives E[J] = rate (t + (1 - p0)(A - Jc))
    / (1 - rate Jc); the count's variance follows from Var J = d rate E[L] + rate^2 Var L (L
    affine in J and in the indicator J >= 1); and p0 = P(J = 0) = p0 e^{-kappa t} + (1 - p0) M,
    M the chance of no arrival during a step with prompts, e^{-kappa (t + A)} E[s^(J - 1) |
    J >= 1] at s = e^{-kappa Jc} (kappa = rate ln d / (d - 1): the count's P(0) is e^{-kappa L}),
    J - 1 given J >= 1 read as a negative binomial of its two moments. That p0 is the root of a
    falling map's fixed point in [0, 1] (regula falsi, Illinois). Against the chain's stationary
    vector (`steps_by_count`, no room cap) j is within 0.001 up to rate Jc = 0.6 and 0.004 up
    to 0.85 at dispersion 1-4 (tests/test_latency_shared.py). At rate Jc >= 1 the steps grow
    without bound and every prompt but the first joins: (1, 0). `p0_hint`: a nearby call's
    P(J = 0), to start from a narrow bracket around it (widened until it straddles the root;
    the same root)."""
    t, a, jc = decode_step_s, opener_s, joiner_s
    if not (rate > 0.0 and t >= 0.0 and jc > 0.0):
        return 0.0, 1.0
    c = rate * jc
    if c >= 1.0:
        return 1.0, 0.0
    d = max(dispersion, 1.0)
    kappa = rate * (math.log(d) / (d - 1.0) if d > 1.0 + 1e-9 else 1.0)
    idle = math.exp(-kappa * t)  # no arrival during a decode-only step
    lead = math.exp(-kappa * (t + a))  # nor during a step's decode part and opener
    th = -math.expm1(-kappa * jc)  # 1 - s
    grow = 1.0 / (1.0 - c)
    amp = 1.0 / (1.0 - c * c)
    rr = rate * rate
    ajc = a - jc

    def gap(p0: float) -> float:  # the map's image less p0: falls from >= 0 at 0 to <= 0 at 1
        busy = 1.0 - p0
        if not busy > 0.0:
            return lead / (1.0 - idle + lead) - p0
        ej = rate * (t + busy * ajc) * grow
        el = t + busy * ajc + jc * ej
        var_j = (d * rate * el + rr * (ajc * ajc * p0 * busy + 2.0 * ajc * jc * p0 * ej)) * amp
        m1 = max(ej / busy - 1.0, 0.0)
        v1 = (var_j + ej * ej - 2.0 * ej + busy) / busy - m1 * m1  # Var(J - 1 | J >= 1)
        if m1 > 0.0 and v1 > m1 * (1.0 + 1e-9):
            r = m1 * m1 / (v1 - m1)
            g = math.exp(-r * math.log1p(m1 * th / r))
        else:
            g = math.exp(-m1 * th)
        mixed = lead * g
        return mixed / (1.0 - idle + mixed) - p0

    lo, hi = 0.0, 1.0
    f_lo = f_hi = math.nan
    if p0_hint is not None and 0.0 < p0_hint < 1.0:  # a narrow bracket, widened until it straddles
        width = JOIN_HINT_WIDTH
        for _ in range(JOIN_HINT_WIDENINGS):
            lo, hi = max(p0_hint - width, 0.0), min(p0_hint + width, 1.0)
            f_lo, f_hi = gap(lo), gap(hi)
            if f_lo > 0.0 > f_hi:
                break
            width *= 16.0
    if not f_lo > 0.0 > f_hi:
        lo, hi = 0.0, 1.0
        f_lo, f_hi = gap(lo), gap(hi)
    p0 = hi if f_hi >= 0.0 else lo
    if f_lo > 0.0 > f_hi:
        side = 0
        for _ in range(JOIN_PASSES):
            p0 = (lo * f_hi - hi * f_lo) / (f_hi - f_lo)
            f = gap(p0)
            if f == 0.0 or hi - lo <= 1e-14:
                break
            if f > 0.0:
                lo, f_lo = p0, f
                if side == 1:
                    f_hi *= 0.5
                side = 1
            else:
                hi, f_hi = p0, f
                if side == -1:
                    f_lo *= 0.5
                side = -1
            if abs(f) <= 1e-15:
                break
    busy = 1.0 - p0
    ej = rate * (t + busy * ajc) * grow
    if not ej > 0.0:
        return 0.0, p0
    return min(max(1.0 - busy / ej, 0.0), 1.0), p0
