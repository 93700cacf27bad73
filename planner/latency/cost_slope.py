"""E[Delta]', how a prompt's mean engine time moves with the decode count at a state
(docs/latency/decode-count.md: the count's feedback reads it as `prompt_cost_slope_s`).

Exact (`prompt_cost_slope_exact_s`: a one-decode difference of E[Delta]) or read off a line
through the stability scan's points (`slope_points`, `interpolated_slope_s`), which the scan
computes at every point in its one call per array. Functions of a replica and its states; the
engine keeps the line once per engine.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

from planner.costmodel.steptime import step_time_s
from planner.latency.arrivals import join_share
from planner.latency.queueing import gamma_wait_probability_slope
from planner.latency.replica import FloatArray, Replica, decode_step_s, full_service_s
from planner.latency.results import State
from planner.latency.stability import GRID_POINTS
from planner.latency.steady import join_cost_s, merge_weight, row_sums, stream_step_s

SLOPE_GRID_MIN = GRID_POINTS // 2  # stable scan points below which E[Delta]' is taken exactly


def prompt_cost_slope_exact_s(replica: Replica, s: State) -> float:
    """d E[Delta] / dn at the state's rate: E[Delta] = A + w(rho)(F - A) (`steady.build_state`)
    with one more decode beside every prompt step (the chunks as they are, one token less of
    budget for the full steps): A' from the chunks' steps and the decode step they ride, F'
    and q' from the full step, w' from GI/M/1's slope; a one-decode difference."""
    s_f = max(s.share_full, 1.0)
    if not s_f > 2.0:
        return 0.0
    coef, cbar, pe = replica.step_coefficients, replica.decode_context_tokens, replica.mean_prefill_tokens
    n1 = s.n_arr + 1.0
    t_arr1 = decode_step_s(replica, n1)
    tau1 = step_time_s(coef, s.chunk_tokens, s.chunk_offset, n1, n1 * cbar, empty_batches=False)
    pw = replica.prompt_probs
    a0 = float(s.own_service.dot(pw)) - s.mean_chunks * s.t_arr
    a1 = float(row_sums(s.chunk_weight * tau1).dot(pw)) - s.mean_chunks * t_arr1
    t_full1 = stream_step_s(replica, s_f - 1.0, n1, n1 * cbar)
    f0 = pe * (s.t_full - s.t_arr) / s_f
    f1 = pe * (t_full1 - t_arr1) / (s_f - 1.0)
    q0, q1 = full_service_s(replica, s), pe * t_full1 / (s_f - 1.0)
    rho = s.lam * q0
    w = merge_weight(replica, rho)
    dw = gamma_wait_probability_slope(rho, replica.gap_shape, w) if 0.0 < rho < 1.0 else 0.0
    slope = (a1 - a0) * (1.0 - w) + w * (f1 - f0) + dw * s.lam * (q1 - q0) * (f0 - a0)
    wj = s.join_weight
    if wj > 0.0:  # whole prompts sharing steps: A + j (Jc - A), the chain's steps one decode longer
        jc0 = s.join_cost
        jc1 = join_cost_s(replica, n1, n1 * cbar)
        t1 = decode_step_s(replica, s.n_dec + 1.0)
        j1, _ = join_share(s.lam, t1, a1, jc1, replica.count_dispersion)
        shared = a1 + j1 * (jc1 - a1) - (a0 + s.joined * (jc0 - a0))
        slope = wj * shared + (1.0 - wj) * slope
    return slope


def slope_points(
    replica: Replica, *, grid_n: FloatArray | None, grid_cost_slope: FloatArray | None, end_of: Callable[[], State]
) -> tuple[list[float], list[float]]:
    """The line `interpolated_slope_s` reads: the stability scan's points (`Boundary.grid_n`,
    `grid_cost_slope`, where the slope is `prompt_cost_slope_exact_s` term for term) and the
    boundary's end `end_of()` (exact there; asked only where the line is read); empty where the stable range spans fewer than
    SLOPE_GRID_MIN of the scan's points (budget 512: ~70 of 512 seats, two points, where a line
    read the slope 29% off at a kink of the step formula)."""
    if grid_n is None or grid_cost_slope is None or grid_n.size < SLOPE_GRID_MIN:
        return [], []
    end = end_of()
    xs, ys = grid_n.tolist(), grid_cost_slope.tolist()
    if end.n > xs[-1]:
        xs.append(end.n)
        ys.append(prompt_cost_slope_exact_s(replica, end))
    return xs, ys


def interpolated_slope_s(xs: list[float], ys: list[float], x: float) -> float:
    """The line through (xs, ys) at x, its first and last values beyond its ends (xs sorted,
    not empty)."""
    i = bisect.bisect_right(xs, x)
    if i == 0:
        return ys[0]
    if i == len(xs):
        return ys[-1]
    x0, y0 = xs[i - 1], ys[i - 1]
    return y0 + (ys[i] - y0) * (x - x0) / (xs[i] - x0)
