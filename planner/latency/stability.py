"""The stability boundary (docs/latency/stability.md): how far a replica's stable branch reaches,
and the steady state at a rate on it.

A state is stable while prefill tokens arrive slower than full-budget steps deliver them (rho < 1),
the busy share lam E[Delta] < 1, running requests (decoding + prefilling) fit max_num_seqs, the
mean KV use fits the cache and a prompt's chunk share is at least one token (`margins`). The
largest rate on the stable branch is the max stable rate: a scan of GRID_POINTS concurrencies
(`grid`, numpy over all at once), then root-finding on the first margin to close
(`find_boundary`); if the rate peaks first (the engine saturates), the peak. The steady state at
a rate is the least root of lam(n) = rate on that branch (`stable_branch.solve`). Functions of a
`Replica` and a `StateOf` (the engine's cached `steady.build_state`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from planner.costmodel.steptime import step_time_s
from planner.latency.replica import CHUNK_GROUPS, CHUNK_ROUNDING, FloatArray, Replica
from planner.latency.results import Boundary, Grid, State
from planner.latency.stable_branch import SOLVE_TOL, StateOf
from planner.latency.steady import merge_weight, rate_with_merging, row_sums, stream_step_s
from planner.schema.kinds import StabilityLimit
from solvers.rootfind import RootResult, find_root

# A state's smallest stability margin (`slack_of`; a test may pass its own).
SlackOf = Callable[[Replica, State], float]

GRID_POINTS = 16  # concurrencies of the stability scan, evenly over (0, decode_cap]
BOUNDARY_BACKOFF_STEPS = 64  # steps of BOUNDARY_BACKOFF back inside after the root (1 or 2 suffice)
BOUNDARY_BACKOFF = 1e-6  # one such step, relative to n
BOUNDARY_XTOL = 1e-7  # the boundary's root, relative to decode_cap (and its rtol); the end then
# steps this far back inside (the end point itself is stable)
PEAK_LABEL_MARGIN = 1e-3  # a rate peak this far above the end's rate is "compute" (saturation)
PREFILL_EDGE = 1e-9  # a prefill pool's rate stays this far (relative) below rho = 1
PREFILL_BACKOFF = 1e-7  # and its boundary's root this far inside


# ---- margins at one state --------------------------------------------------------------------


def load_of(replica: Replica, s: State) -> tuple[float, float]:
    """Running requests (decoding + prefilling: Little, requests being prefilled hold seats
    too) and mean KV tokens in use at a state. Only the margins and the metrics read them, not
    the root-findings over rates, so they are computed on demand (the metrics' once per state,
    `at_state.StateResults.load`)."""
    n = s.n
    kv_dec = n * (replica.decode_context_tokens + replica.half_block_tokens)
    if not replica.has_prefill:
        return n, kv_dec
    own = s.own_service
    probs = replica.prompt_probs
    return (
        n + s.lam * float(own.dot(probs)),
        kv_dec + s.lam * float((own * replica.prompt_kv_tokens).dot(probs)),
    )


def margins(replica: Replica, s: State) -> list[tuple[StabilityLimit, float]]:
    """Each stability limit's relative margin at a state (< 0: violated)."""
    seats, kv_mean = load_of(replica, s)
    out: list[tuple[StabilityLimit, float]] = [
        ("max_num_seqs", 1.0 - seats / replica.seats),
        ("kv_capacity", 1.0 - kv_mean / replica.kv_cache_tokens),
    ]
    if replica.has_prefill:
        out += [
            ("compute", 1.0 - s.rho),
            ("compute", 1.0 - s.busy),
            ("max_num_batched_tokens", (s.share_full - 1.0) / replica.budget_tokens),
        ]
    else:
        out.append(
            ("max_num_batched_tokens", 1.0 - s.n * replica.decode_budget_tokens / replica.budget_tokens)
        )
    return out


def slack_of(replica: Replica, s: State) -> float:
    """Smallest relative margin of the stability constraints at a state (< 0: violated; -1 where
    the rate is not a finite, non-negative number)."""
    if not (math.isfinite(s.lam) and s.lam >= 0):
        return -1.0
    return min(v for _, v in margins(replica, s))


def binding(replica: Replica, s: State) -> StabilityLimit:
    """The limit with the smallest margin at a state."""
    return min(margins(replica, s), key=lambda kv: kv[1])[0]


# ---- many concurrencies at once (the scan) ----------------------------------------------------


def grid(replica: Replica, ns: FloatArray) -> Grid:
    """Rates and stability margins at concurrencies `ns` (decode roles); mirrors
    `steady.build_state` term for term (the unshared form): one step-time call for t_dec and
    t_arr (stacked on a leading axis), one for the full steps and one for the chunk steps."""
    assert bool(np.all(np.isfinite(ns))) and bool(np.all(np.asarray(ns) >= 0.0)), "ns finite, >= 0"
    coef = replica.step_coefficients
    context = replica.decode_context_tokens
    n = np.asarray(ns, dtype=np.float64)[:, None]
    z = 1.0 + (replica.arrival_cv2 - 1.0) * n / (1.0 + n)
    n_dec = n + z
    kv_dec = n * (context + replica.half_block_tokens)
    if not replica.has_prefill:
        t_dec = step_time_s(coef, 0.0, 0.0, n_dec, n_dec * context)
        lam = n / (replica.decode_steps * t_dec)
        slack = np.minimum(
            np.minimum(1.0 - n / replica.seats, 1.0 - kv_dec / replica.kv_cache_tokens),
            1.0 - n * replica.decode_budget_tokens / replica.budget_tokens,
        )
        return Grid(n[:, 0], lam[:, 0], slack[:, 0])
    counts = np.empty((2, *n.shape))  # n_dec, n_arr (np.stack's work, without its checks)
    counts[0] = n_dec
    n_arr = counts[1]
    np.maximum(0.0, n + z - 1.0, out=n_arr)
    both = step_time_s(coef, 0.0, 0.0, counts, counts * context)
    t_dec, t_arr = both[0], both[1]
    s_f = replica.budget_tokens - n_arr * replica.decode_budget_tokens
    threshold = replica.chunk_threshold_tokens
    s_own = np.minimum(s_f, threshold) if threshold > 0 else s_f
    s_f1 = np.maximum(s_f, 1.0)
    t_full = stream_step_s(replica, s_f1, n_arr, n_arr * context)
    mean_pe = replica.mean_prefill_tokens
    q = mean_pe * t_full / s_f1
    fluid = mean_pe * (t_full - t_arr) / s_f1
    k, toks, offs, wts = _grid_chunks(replica, np.maximum(s_own, 1.0))
    n_arr3 = n_arr[..., None]  # (N, 1, 1)
    taus = step_time_s(coef, toks, offs, n_arr3, n_arr3 * context, empty_batches=False)
    own = row_sums(wts * taus)  # (N, I)
    probs = replica.prompt_probs
    own_delta = ((own - k * t_arr) @ probs)[:, None]
    lam = _grid_rates(replica, n, q, fluid, own_delta, replica.decode_steps * t_dec)
    rho = lam * q
    rc = _grid_merge(replica, rho)
    busy = lam * (own_delta + rc * (fluid - own_delta))
    seats = n + lam * (own @ probs)[:, None]
    kv_mean = kv_dec + lam * ((own * replica.prompt_kv_tokens) @ probs)[:, None]
    slack = np.minimum(1.0 - seats / replica.seats, 1.0 - kv_mean / replica.kv_cache_tokens)
    slack = np.minimum(slack, np.minimum(1.0 - rho, 1.0 - busy))
    slack = np.minimum(slack, (s_f - 1.0) / replica.budget_tokens)
    slack = np.where(np.isfinite(lam) & (lam >= 0), slack, -1.0)
    return Grid(n[:, 0], lam[:, 0], slack[:, 0])


def _grid_chunks(replica: Replica, s_o1: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """`steady.chunks` at every point's share (N, 1): chunk counts (N, I) and the chunks'
    tokens, offsets and weights (N, I, columns)."""
    pe = replica.prefill_tokens[None, :]
    k = np.maximum(1.0, np.ceil(pe / s_o1 - CHUNK_ROUNDING))  # (N, I)
    m = k - 1.0
    m_top = float(m.max())
    cols = int(min(CHUNK_GROUPS, max(0.0, m_top)))
    g = replica.chunk_group_index[:cols]
    s3 = s_o1[..., None]
    p0 = replica.cached_tokens[None, :, None]
    shape = (*m.shape, cols + 1)
    offs = np.empty(shape)
    toks = np.empty(shape)
    wts = np.empty(shape)
    if m_top <= CHUNK_GROUPS:  # every chunk listed (`steady.chunks`)
        np.add(p0, g * s3, out=offs[..., :cols])
        np.less(g, m[..., None], out=wts[..., :cols])
    else:
        few = (m <= CHUNK_GROUPS)[..., None]
        j = np.where(few, g, (g + 0.5) * m[..., None] / CHUNK_GROUPS - 0.5)
        np.add(p0, j * s3, out=offs[..., :cols])
        wts[..., :cols] = np.where(few, (g < m[..., None]).astype(np.float64), m[..., None] / CHUNK_GROUPS)
    done = m * s_o1
    np.add(replica.cached_tokens[None, :], done, out=offs[..., cols])
    toks[..., :cols] = s3
    np.subtract(pe, done, out=toks[..., cols])
    wts[..., cols] = 1.0
    return k, toks, offs, wts


def _grid_rates(
    replica: Replica, n: FloatArray, q: FloatArray, fluid: FloatArray, own_delta: FloatArray, d_t: FloatArray
) -> FloatArray:
    """lam per point: the quadratic's root (NaN where none exists), then each point's root with
    the gamma gaps' full-step share (`steady.rate_with_merging`)."""
    a2 = n * q * (fluid - own_delta)
    b = d_t + n * own_delta
    disc = b * b + 4.0 * a2 * n
    den = b + np.sqrt(np.maximum(disc, 0.0))
    ok = (disc >= 0) & (den > 0)
    lam = np.full(n.shape, math.nan)
    np.divide(2.0 * n, den, out=lam, where=ok)  # 2 n / den where the root exists, else NaN
    if replica.gap_shape != 1.0:
        for i, lam_i in enumerate(lam[:, 0].tolist()):
            if lam_i > 0.0 and math.isfinite(lam_i):
                lam[i, 0] = rate_with_merging(
                    replica, float(n[i, 0]), float(q[i, 0]), float(own_delta[i, 0]),
                    float(fluid[i, 0] - own_delta[i, 0]), float(d_t[i, 0]), lam_i,
                )  # fmt: skip
    return lam


def _grid_merge(replica: Replica, rho: FloatArray) -> FloatArray:
    """The full-step share w(rho) per point (`steady.merge_weight`)."""
    if replica.gap_shape != 1.0:
        return np.array([[merge_weight(replica, r)] for r in rho[:, 0].tolist()])
    return np.minimum(np.maximum(rho, 0.0), 1.0)  # np.clip's result, without its overhead


# ---- the boundary ------------------------------------------------------------------------------


def boundary(replica: Replica, *, state_of: StateOf, unshared_state_of: StateOf) -> Boundary:
    """The stable branch: a prefill pool's (`prefill_boundary`), the shared form's
    (`shared_boundary`) or the scan's (`find_boundary`)."""
    if not replica.has_decode:
        b = prefill_boundary(replica, state_of)
    elif replica.shares_steps:
        b = shared_boundary(replica, state_of=state_of, unshared_state_of=unshared_state_of)
    else:
        b = find_boundary(replica, state_of)
    assert math.isfinite(b.lam_max) and b.lam_max >= 0.0, f"max stable rate {b.lam_max}"
    assert math.isfinite(b.n_max) and b.n_max >= 0.0, f"max stable concurrency {b.n_max}"
    return b


def shared_boundary(replica: Replica, *, state_of: StateOf, unshared_state_of: StateOf) -> Boundary:
    """Where whole prompts share steps: the stable branch ends at the unshared form's max
    stable rate (`find_boundary` over unshared states, its limit's label), reached on
    the shared branch at n_max <= the unshared end. Sharing lowers E[Delta] and would raise
    the max stable rate where the KV cache binds by 3.5-5.6% (constant 1,155-token prompts
    at budget 8192: H100 35.46 -> 37.45 req/s, H200 27.66 -> 28.63), above the rates at
    which the simulated replica runs away (34.0-34.5 and 26.5-27.0: the count's excursions
    fill the cache first, docs/latency/limits.md, "What still misses", item 4); the unshared form
    stays within 3-4% of those edges. The scan's points are the unshared branch's, so they
    are not kept (the solve and the capacity search bracket on the branch itself)."""
    b = find_boundary(replica, unshared_state_of)
    if not b.n_max > 0.0:
        return Boundary(b.n_max, b.lam_max, b.binding, b.root)
    end = state_of(b.n_max, None)
    if not end.lam > b.lam_max:
        return Boundary(b.n_max, end.lam, b.binding, b.root)
    res = find_root(
        lambda x: state_of(x, None).lam - b.lam_max,
        0.0,
        b.n_max,
        f_lo=-b.lam_max,
        f_hi=end.lam - b.lam_max,
        xtol=SOLVE_TOL * max(b.n_max, 1.0),
        rtol=SOLVE_TOL,
    )
    # the root's side where the rate reaches lam_max: the solve brackets every lower rate
    n_cut = res.final_bracket[1] if res.final_bracket is not None else b.n_max
    return Boundary(n_cut, b.lam_max, b.binding, b.root)


def find_boundary(replica: Replica, state_of: StateOf, slack: SlackOf = slack_of) -> Boundary:
    """The scan's boundary (decode roles): GRID_POINTS concurrencies up to `decode_cap`, the
    first unstable one's margin root-found, the end stepped back inside (at most
    BOUNDARY_BACKOFF_STEPS times; where the states' `slack` disagrees with the grid's, the last
    stable grid point), or the rate's peak where it comes first."""
    cap = replica.decode_cap
    points = cap * np.arange(1, GRID_POINTS + 1, dtype=np.float64) / GRID_POINTS
    gr = grid(replica, points)
    lam, margin = gr.lam, gr.slack
    bad = (margin < 0).nonzero()[0]
    root: RootResult | None = None
    inside = 0.0  # the last point known stable
    if bad.size == 0:
        n_end = float(points[-1])
    else:
        i = int(bad[0])
        lo = 0.0 if i == 0 else float(points[i - 1])
        root = find_root(
            lambda x: slack(replica, state_of(x, None)),
            lo,
            float(points[i]),
            f_lo=1.0 if i == 0 else float(margin[i - 1]),
            f_hi=float(margin[i]),
            xtol=BOUNDARY_XTOL * cap,
            rtol=BOUNDARY_XTOL,
        )
        n_end = root.root if root.root is not None else lo
        n_end = max(0.0, n_end - BOUNDARY_XTOL * cap)  # just inside: the end point itself is stable
        points, lam = points[:i], lam[:i]
        inside = lo
    end = state_of(n_end, None)
    for _ in range(BOUNDARY_BACKOFF_STEPS):  # the root's tolerance overshot: step back in
        if not (n_end > 0 and slack(replica, end) < 0):
            break
        n_end *= 1.0 - BOUNDARY_BACKOFF
        end = state_of(n_end, None)
    else:
        if n_end > 0 and slack(replica, end) < 0:  # the states disagree with the grid's slack
            n_end = inside
            end = state_of(n_end, None)
    lam_end = end.lam if n_end > 0 else 0.0
    limit = binding(replica, end)
    best = int(lam.argmax()) if lam.size else -1
    if best >= 0 and float(lam[best]) > lam_end:
        # The rate peaks inside the stable range: past the peak more concurrency serves fewer
        # requests (the engine saturates). Tiny peaks from the ceil() of chunk counts keep
        # the end point's label.
        n_peak, lam_peak = refine_peak(points, lam, best, n_end, state_of)
        label = "compute" if lam_peak > lam_end * (1.0 + PEAK_LABEL_MARGIN) else limit
        keep = points < n_peak
        return Boundary(n_peak, lam_peak, label, root, points[keep], lam[keep])
    return Boundary(n_end, lam_end, limit, root, points, lam)


def refine_peak(
    points: FloatArray, lam: FloatArray, i: int, n_end: float, state_of: StateOf
) -> tuple[float, float]:
    """The rate's peak: one parabola step through the scan's best point and its neighbours,
    kept where the state there runs a higher rate."""
    n_peak, lam_peak = float(points[i]), float(lam[i])
    if 0 < i < points.size - 1:
        x0, x1, x2 = (float(v) for v in points[i - 1 : i + 2])
        y0, y1, y2 = (float(v) for v in lam[i - 1 : i + 2])
        den = (x0 - x1) * (x0 - x2) * (x1 - x2)
        a = (x2 * (y1 - y0) + x1 * (y0 - y2) + x0 * (y2 - y1)) / den
        b = (x2 * x2 * (y0 - y1) + x1 * x1 * (y2 - y0) + x0 * x0 * (y1 - y2)) / den
        if a < 0:
            xv = min(max(-b / (2 * a), x0), min(x2, n_end))
            lv = state_of(xv, None).lam
            if lv > lam_peak:
                n_peak, lam_peak = xv, lv
    return n_peak, lam_peak


def prefill_boundary(replica: Replica, state_of: StateOf) -> Boundary:
    """Prefill-only engine: rho = lam q < 1, plus seats and KV held by prompts in prefill."""
    s0 = state_of(0.0, 0.0)
    full_service_s = s0.t_full * replica.mean_prefill_tokens / max(s0.share_full, 1.0)
    assert full_service_s > 0.0, "a prompt's full-step service takes time"
    hi = (1.0 / full_service_s) * (1.0 - PREFILL_EDGE)
    s_hi = slack_of(replica, state_of(0.0, hi))
    if s_hi >= 0:
        return Boundary(0.0, hi, "compute", None)
    root = find_root(
        lambda x: slack_of(replica, state_of(0.0, x)), 0.0, hi, f_lo=1.0, f_hi=s_hi, rtol=SOLVE_TOL
    )
    lam_end = max(0.0, (root.root if root.root is not None else 0.0) * (1.0 - PREFILL_BACKOFF))
    return Boundary(0.0, lam_end, binding(replica, state_of(0.0, lam_end)), root)
