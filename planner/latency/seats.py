"""The wait for a sequence slot: vLLM V1 admits a waiting request only while fewer than
`max_num_seqs` requests run (prefilling or decoding), so when every seat is taken a new prompt
waits for one to free, and that wait is part of its TTFT (docs/latency/seats.md).

The seats are a many-server queue, S = max_num_seqs servers, each held for a request's residence
(its prefill and decode steps). At offered load a = lam E[R] (the mean running requests, Little)
and arrivals of gap CV^2 c_a^2:

* P(wait) = C(S / Z, a / Z): Erlang C (M/M/S) in Hayward's form for peaked traffic, Z the
  peakedness of the count of requests in flight (its variance over its mean: 1 for Poisson
  arrivals into an unlimited engine, more where arrivals come in bursts or the count's feedback
  makes it wander). S real: the continuous Erlang B of the incomplete gamma function,
  B(s, a) = a^s e^{-a} / Gamma(s + 1, a), C = B / (1 - rho + rho B), rho = a / S.
* Given a wait, it is exponential with mean ((c_a^2 + 1) / 2) / (theta - lam): while every seat
  is taken the seats free at theta = S / R_full, R_full the residence with all S running (each
  decode step carries the decodes the full seats add: longer than at the mean load, so theta ->
  lam as a -> S), and the queue in front of them drains at theta - lam. The departures of S busy
  seats are a superposition of S streams, close to Poisson over the waits that matter (shorter
  than a residence), so the residence's own CV^2 does not enter (M/M/S's 1 / (S mu - lam) with
  the arrivals' variability as Kingman's (c_a^2 + 1) / 2).

Poisson arrivals and a residence that does not lengthen (Z = c_a^2 = 1, R_full = E[R]) give
M/M/S exactly. Where S - a is many standard deviations of the count the probability is below
SEAT_WAIT_MIN and TTFT ignores it, so engines far from their seat limit read bit for bit as
without it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import numpy.typing as npt

from planner.costmodel.steptime import step_time_s
from planner.latency.queueing import Phases
from planner.latency.scipy_special import special

if TYPE_CHECKING:  # annotations only: results imports this module
    from planner.latency.replica import Replica
    from planner.latency.results import State

FloatArray = npt.NDArray[np.float64]

# Below this chance of finding every seat taken, TTFT ignores the seat queue (as `KV_FULL_MIN`
# for the KV cache): its tail mass is far inside p99, and the mixture is not doubled for it.
SEAT_WAIT_MIN = 1e-4
# The full seats' drain, theta - lam, is at least this share of M/M/S's (S - a) / E[R].
SEAT_DRAIN_FLOOR = 1e-3
# The seat queue's count peakedness Z is at least this (`seat_wait_at`; a tolerance: Z divides).
PEAKEDNESS_FLOOR = 1e-3
_LOG_HALF = math.log(0.5)


class SeatWait(NamedTuple):
    """P(an arrival finds every seat taken) and the mean of its wait for one, given that (the
    wait is exponential). `running` and `peakedness`: the offered load and Z it was read at."""

    probability: float
    mean_s: float
    running: float = 0.0
    peakedness: float = 1.0


NO_SEAT_WAIT = SeatWait(0.0, 0.0)


def erlang_c(servers: float, offered: float) -> float:
    """P(wait) of M/M/s at offered load a = lam / mu (Erlang C), s > 0 real: C = B / (1 - rho +
    rho B), rho = a / s, with the continuous Erlang B, B(s, a) = a^s e^{-a} / Gamma(s + 1, a)
    (the upper incomplete gamma function; equal to the classical recursion at integer s). 1 at
    rho >= 1, 0 at a = 0."""
    if not servers > 0.0:
        raise ValueError(f"servers must be > 0, got {servers}")
    if not offered >= 0.0:
        raise ValueError(f"offered load must be >= 0, got {offered}")
    if offered == 0.0:
        return 0.0
    rho = offered / servers
    if rho >= 1.0:
        return 1.0
    log_num = servers * math.log(offered) - offered - float(special.gammaln(servers + 1.0))
    # Gamma(s + 1, a) / Gamma(s + 1) >= 1/2 for a <= s (a Gamma(s + 1) variable's median exceeds
    # s), so B <= 2 e^{log_num} and C <= B / (1 - rho): below SEAT_WAIT_MIN / 1e6 it is not
    # worth the incomplete gamma function (and would underflow to 0 anyway).
    if log_num - _LOG_HALF - math.log1p(-rho) < math.log(SEAT_WAIT_MIN) - 6.0 * math.log(10.0):
        return 0.0
    upper = float(special.gammaincc(servers + 1.0, offered))
    b = min(math.exp(log_num) / upper, 1.0) if upper > 0.0 else 1.0
    return b / (1.0 - rho + rho * b)


def seat_wait(
    seats: float,
    running: float,
    peakedness: float,
    arrival_rate: float,
    full_residence_s: float,
    arrival_cv2: float,
) -> SeatWait:
    """The seat queue at a steady state (module docstring): `seats` = S, `running` = a (mean
    requests holding a seat), `peakedness` = Z of their count, `arrival_rate` = lam, and
    `full_residence_s` = R_full, a request's residence while every seat is taken (at least
    a / lam). Unstable (a >= S): certain and endless (mean inf). Where the full seats would
    free slower than requests arrive (a step time growing faster than its decode count), the
    drain is held at SEAT_DRAIN_FLOOR of M/M/S's, (S - a) / E[R]: a long but finite wait."""
    for name, v in (("seats", seats), ("peakedness", peakedness), ("arrival_rate", arrival_rate)):
        if not v > 0.0:
            raise ValueError(f"{name} must be > 0, got {v}")
    if not (running >= 0.0 and arrival_cv2 >= 0.0 and full_residence_s >= 0.0):
        raise ValueError(
            f"running, arrival_cv2 and full_residence_s must be >= 0, got {running}, {arrival_cv2}, "
            f"{full_residence_s}"
        )
    if running >= seats:
        return SeatWait(1.0, math.inf, running, peakedness)
    p = erlang_c(seats / peakedness, running / peakedness)
    if p < SEAT_WAIT_MIN:
        return SeatWait(0.0, 0.0, running, peakedness)
    residence = running / arrival_rate
    full = max(full_residence_s, residence)
    drain = max(seats / full - arrival_rate, SEAT_DRAIN_FLOOR * (seats - running) / residence)
    return SeatWait(p, 0.5 * (arrival_cv2 + 1.0) / drain, running, peakedness)


def seat_wait_at(
    replica: Replica, state: State, *, running_requests: float, decode_count_variance: float | None
) -> SeatWait:
    """`seat_wait` at a steady state, for the engines whose prompts arrive (colocated, prefill
    pool): S = max_num_seqs seats, offered the running requests a (`stability.load_of`; 0 where
    no prompt arrives: no wait). The count's peakedness Z: the decode count's variance over its
    mean (`decode_count_variance`, given where decodes run: burstiness and the count's feedback),
    else the arrivals' burst factor 1 + (c_a^2 - 1) a / (1 + a) (as z). The residence with every
    seat taken, R_full: a / lam with each of its d decode steps carrying the S - a decodes more
    (the decode-only step timed at n_dec + S - a, over 1 - busy as t_step); a prefill pool's,
    a / lam."""
    running = running_requests
    if not running > 0.0:
        return NO_SEAT_WAIT
    s = state
    full = running / s.lam
    if decode_count_variance is not None:
        peak = decode_count_variance / s.n
        more = max(replica.seats - running, 0.0)
        count = s.n_dec + more
        longer = step_time_s(replica.step_coefficients, 0.0, 0.0, count, count * replica.decode_context_tokens) - s.t_dec
        full += replica.decode_steps * longer * s.t_step / s.t_dec  # t_step / t_dec = 1 / (1 - busy)
    else:
        peak = 1.0 + (replica.arrival_cv2 - 1.0) * running / (1.0 + running)
    return seat_wait(replica.seats, running, max(peak, PEAKEDNESS_FLOOR), s.lam, full, replica.arrival_cv2)


def with_seat_wait(
    values: FloatArray,
    probs: FloatArray,
    phases: Phases,
    waiting: FloatArray | None,
    wait: SeatWait,
) -> tuple[FloatArray, FloatArray, Phases, FloatArray]:
    """A response-time mixture (points `values` with `probs`, each waiting exponential `phases`
    in the shares `waiting`: None = every point waits every phase, 1-D per point, 2-D per point
    and phase, as `quantiles.response_quantiles_phases` reads them) with the seat queue: with
    probability P(wait) every point also waits for a seat, an exponential phase of mean m
    appended to `phases`. A copy that already waited keeps the shape of the wait of the larger
    conditional mean and adds the other's mean, so each copy's mean wait is exact and its tail
    is the longer wait's. Returns the points doubled (the first half as they were, scaled by
    1 - P(wait)), the phases, and the 2-D shares."""
    n = values.size
    k = len(phases)
    if waiting is None:
        old = np.ones((n, k))
    elif waiting.ndim == 1:
        old = np.repeat(waiting[:, None], k, axis=1)
    else:
        old = waiting
    a = np.array([ak for ak, _ in phases])
    m = np.array([mk for _, mk in phases])
    reach = old @ a if k else np.zeros(n)  # P(the point waits at all)
    mean_old = old @ (a * m) if k else np.zeros(n)  # its mean wait
    cond = np.divide(mean_old, reach, out=np.zeros(n), where=reach > 0.0)
    seat_shape = wait.mean_s >= cond  # the seat's wait keeps its shape, the old adds its mean
    w = np.zeros((2 * n, k + 1))
    w[:n, :k] = old
    w[n:, :k] = np.where(seat_shape[:, None], 0.0, old)
    w[n:, k] = seat_shape
    shifted = values + np.where(seat_shape, mean_old, wait.mean_s)
    f = wait.probability
    return (
        np.concatenate((values, shifted)),
        np.concatenate((probs * (1.0 - f), probs * f)),
        (*phases, (1.0, wait.mean_s)),
        w,
    )
