"""Percentiles of the latency model's step and response times: of a discrete distribution
(`weighted_quantiles`), of the steps a decoder sees with each value spread over a slice
(`tail_quantiles`, ITL), and of a wait + the request's own service S (`response_quantiles`,
`response_quantiles_phases`, TTFT). S is discrete: the percentiles are found in closed form (or
by a bounded Newton's method for a mixture of exponential waits), segment by segment of the
sorted support of S. The wait itself comes from `planner/latency/queueing.py`."""

from __future__ import annotations

import math

import numpy as np

from planner.latency.queueing import FloatArray, Phases, Wait

__all__ = [
    "NEWTON_STEPS",
    "SPREAD",
    "phase_excess",
    "response_quantiles",
    "response_quantiles_phases",
    "tail_quantiles",
    "weighted_quantiles",
]


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
    for i, eps in enumerate([1.0 - level for level in levels.tolist()]):  # numpy's 1.0 - levels, per item
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
