"""The KV-full wait (docs/latency/kv-full.md): where the requests in flight
may need more KV blocks than the cache holds, an arriving prompt waits for blocks to free, and
that wait is a branch of TTFT's mixture.

* The chance the cache is full: KV in use is the running requests' contexts, mean from the
  load (`stability.load_of`) and variance E[n] Var(context) + Var(n) cbar^2 (the decode count
  wanders, `decode_count`), read as a normal (`kv_overflow_probability`).
* The wait, given a full cache: the mean rest of the cache's busy period, the cache read as an
  M/G/1 server whose service is a request's KV token-seconds over its size (`kv_full_wait`).
* TTFT's mixture with that branch (`with_kv_full`).

Pure functions of named inputs; the engine gathers them from its state."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from planner.latency.invariants import check_positive, check_probability, check_rate, check_time
from planner.latency.queueing import Phases, phases_mean_s

FloatArray = npt.NDArray[np.float64]

# Below this chance of finding the KV cache full, TTFT ignores it (a tolerance: engines far from
# the cache's limit read bit for bit as without the branch; docs/latency/kv-full.md).
KV_FULL_MIN = 1e-4


class KvFull(NamedTuple):
    """The KV-full branch at one state: the chance an arrival finds the cache full (0 below
    KV_FULL_MIN) and the mean rest of that episode, which it waits (inf where the cache's
    utilization reaches 1)."""

    probability: float
    rest_s: float


NO_KV_FULL = KvFull(probability=0.0, rest_s=0.0)


class TtftBranches(NamedTuple):
    """TTFT's mixture points after a branch is added: values, probabilities, the phases waited
    and each point's share of each phase (2-D: points x phases)."""

    values: FloatArray
    probs: FloatArray
    phases: Phases
    waiting: FloatArray


def kv_tokens_variance(
    *, decodes: float, context_mean: float, context_sq_mean: float, decode_count_variance: float
) -> float:
    """Var(KV tokens in use) = E[n] Var(context) + Var(n) cbar^2: each sequence's context
    spreads, and the count itself wanders (`decode_count.decode_count_variance`)."""
    check_rate("decodes", decodes)
    check_rate("decode_count_variance", decode_count_variance)
    cbar = context_mean
    return decodes * (context_sq_mean - cbar * cbar) + decode_count_variance * cbar * cbar


def kv_overflow_probability(
    *, kv_tokens_mean: float, kv_tokens_var: float, kv_capacity_tokens: float
) -> float:
    """P(the requests in flight need more KV than the cache holds), KV in use read as a normal
    of its mean and variance (a step at the capacity where it does not spread)."""
    check_positive("kv_capacity_tokens", kv_capacity_tokens)
    sd = math.sqrt(max(kv_tokens_var, 0.0))
    if sd > 0:
        p = 0.5 * math.erfc((kv_capacity_tokens - kv_tokens_mean) / (sd * math.sqrt(2.0)))
    else:
        p = 1.0 if kv_tokens_mean > kv_capacity_tokens else 0.0
    return check_probability("kv overflow probability", p)


def kv_full_wait(
    *,
    overflow_probability: float,
    kv_tokens_mean: float,
    kv_capacity_tokens: float,
    mean_step_s: float,
    kv_token_s: tuple[float, float],
) -> KvFull:
    """(f, R): the chance f an arrival finds the cache full (0 below KV_FULL_MIN) and the mean
    rest R of that episode, which it waits before vLLM admits it (blocks for its prompt free
    only as requests finish). R is the residual of a busy period of the cache read as an M/G/1
    server whose service is a request's KV token-seconds over the cache's size, S = t_step (d P
    + d (d + 1)/2) / cache (`kv_token_s`: its per-step mean and second moment,
    `WorkloadStats.kv_token_s`), at its utilization rho_kv = mean KV use / cache:
    R = E[S^2] / (2 E[S] (1 - rho_kv)^2)."""
    f = check_probability("overflow_probability", overflow_probability)
    if f < KV_FULL_MIN:
        return NO_KV_FULL
    check_positive("kv_capacity_tokens", kv_capacity_tokens)
    kv1, kv2 = kv_token_s
    check_positive("kv_token_s mean", kv1)
    rho_kv = kv_tokens_mean / kv_capacity_tokens
    rest = (
        mean_step_s * kv2 / (2.0 * kv1 * kv_capacity_tokens * (1.0 - rho_kv) ** 2)
        if rho_kv < 1.0
        else math.inf
    )
    return KvFull(f, check_time("kv-full rest", rest))  # (probability, rest_s)


def with_kv_full(
    *,
    values: FloatArray,
    probs: FloatArray,
    phases: Phases,
    waiting: FloatArray | None,
    unqueued: int,
    kv_full: KvFull,
) -> TtftBranches:
    """TTFT's mixture with the KV-full branch: with probability f an arrival waits the episode's
    rest, exponential of mean R, on top of what it would wait otherwise. The unqueued points (the
    first `unqueued`) wait that phase; a queued point waits its queue's phases too, and of the
    two waits the one of larger mean keeps its shape, the other adds its mean (the sum's tail is
    the larger one's). Returns the points doubled, the phases with the episode's last, and the
    shares each point waits each phase (2-D `waiting`)."""
    f = check_probability("kv_full.probability", kv_full.probability)
    rest = check_time("kv_full.rest_s", kv_full.rest_s)
    n_points = values.size
    n_phases = len(phases)
    shares = np.zeros((2 * n_points, n_phases + 1))
    shifted = values.copy()
    shares[n_points : n_points + unqueued, n_phases] = 1.0
    if waiting is not None:
        shares[:n_points, :n_phases] = waiting[:, None]
        queue_mean = phases_mean_s(phases) / max(sum(a for a, _ in phases), 1e-300)
        if rest >= queue_mean:
            shifted[unqueued:] += queue_mean
            shares[n_points + unqueued :, n_phases] = waiting[unqueued:]
        else:
            shifted[unqueued:] += rest
            shares[n_points + unqueued :, :n_phases] = waiting[unqueued:, None]
    return TtftBranches(
        values=np.concatenate((values, shifted)),
        probs=np.concatenate((probs * (1.0 - f), probs * f)),
        phases=(*phases, (1.0, rest)),
        waiting=shares,
    )
