"""TTFT (docs/latency/ttft.md): a prompt's own time, its wait and its company. This module
holds the parts of TTFT that are pure arithmetic on what the engine gathers:

* the company's cost given any, in the probability slices (`company_slices`, `company_top_s`):
  a lognormal conditioned below the step's room, or alike prompts' whole ones clipped at it;
* the bound on TTFT p99 the capacity search reads without the mixture's quantiles
  (`ttft_p99_bound_s`, `bound_past_waits`).

The delay chain, the delay classes and the mixture's assembly are still `Engine` methods
(`_delay`, `_delay_chain`, `_delay_classes`, `_ttft_mixture`)."""

from __future__ import annotations

import math

import numpy as np

from planner.latency.invariants import check_probability, check_time
from planner.latency.results import TtftMixture
from planner.latency.slices import (
    lognormal_slice_list,
    lognormal_slice_list_below,
    lognormal_top_slice,
    lognormal_top_slice_below,
)

# 1 / (1 - 0.99): the p99 level's tail mass, inverted (P(TTFT > v) <= 1% where mass e^{-y/m}
# reaches it: y = m ln(TAIL_INVERSE mass)).
TAIL_INVERSE = 100.0


def bound_past_waits(*, top_s: float, queued_s: float, slowest_phase_s: float, waiting_mass: float) -> float:
    """p99 of TTFT is at most the largest unwaiting time `top_s`, or the largest waiting one
    `queued_s` plus y: P(TTFT > queued + y) <= mass e^{-y / m_max} (the waiting probability
    `waiting_mass`, its slowest phase's mean m_max), at most 1% at y = m_max ln(100 mass).
    Infinite with m_max (the quantiles read inf there too)."""
    check_time("slowest_phase_s", slowest_phase_s)
    if not math.isfinite(slowest_phase_s):
        return math.inf
    scaled = TAIL_INVERSE * waiting_mass
    y = slowest_phase_s * math.log(scaled) if scaled > 1.0 else 0.0
    return max(top_s, queued_s + y)


def ttft_p99_bound_s(mixture: TtftMixture) -> float:
    """A bound TTFT p99 never exceeds, from its mixture without its quantiles: beyond the
    largest time that does not wait only the waiting points reach, P(TTFT > v_q + y) <= M
    e^{-y / m_max} (`bound_past_waits`), M the waiting mass: q sum_k a_k where every queued
    point waits the same phases, sum_i p_i sum_k w_ik a_k where each waits its own (the KV-full
    branch's 2-D `waiting`)."""
    values = mixture.values
    if mixture.waiting is None:
        return float(values.max())
    if mixture.waiting.ndim == 2:
        waits = mixture.waiting @ np.array([a for a, _ in mixture.phases])
        some = waits > 0.0
        top = float(values[~some].max()) if not some.all() else 0.0
        queued = float(values[some].max())
        slowest = max(m for a_k, m in mixture.phases if a_k > 0)
        return bound_past_waits(
            top_s=top, queued_s=queued, slowest_phase_s=slowest, waiting_mass=float(mixture.probs @ waits)
        )
    phases = [(a, m) for a, m in mixture.phases if a > 0 and m > 0]
    top = float(values[: mixture.unqueued].max()) if mixture.unqueued else 0.0
    queued = float(values[mixture.unqueued :].max())
    if not phases:
        return max(top, queued)
    check_probability("mixture.queued", mixture.queued)
    return bound_past_waits(
        top_s=top, queued_s=queued, slowest_phase_s=max(m for _, m in phases),
        waiting_mass=mixture.queued * sum(a for a, _ in phases),
    )  # fmt: skip


def company_slices(*, log_sd: float, mean_cost_s: float, cap_s: float, atom_weight: float) -> list[float]:
    """The company's cost given any, in the probability slices, for a prompt not queued beyond
    the next step: a company too large for that step is what queues a prompt, so its lognormal
    is conditioned to at most `cap_s` (`lognormal_slice_list_below`); alike prompts' company is
    whole prompts, of which a prompt not queued has at most what fits, so there the slices are
    clipped at `cap_s` instead (`atom_weight`, in [0, 1], blends the two)."""
    w = atom_weight
    below = lognormal_slice_list_below(log_sd, mean_cost_s, cap_s) if w < 1.0 else []
    if w <= 0.0:
        return below
    clipped = [min(x, cap_s) for x in lognormal_slice_list(log_sd, mean_cost_s)]
    if w >= 1.0:
        return clipped
    return [w * c + (1.0 - w) * b for c, b in zip(clipped, below, strict=True)]


def company_top_s(*, log_sd: float, mean_cost_s: float, cap_s: float, atom_weight: float) -> float:
    """`company_slices(...)[-1]` alone, the same arithmetic."""
    w = atom_weight
    below = lognormal_top_slice_below(log_sd, mean_cost_s, cap_s) if w < 1.0 else 0.0
    if w <= 0.0:
        return below
    clipped = min(lognormal_top_slice(log_sd, mean_cost_s), cap_s)
    if w >= 1.0:
        return clipped
    return w * clipped + (1.0 - w) * below
