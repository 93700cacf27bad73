"""The full-step share of E[Δ] (`steady.merge_weight`): a prompt is prefilled in full-budget steps
when it arrives to a busy prefill queue, which happens with GI/M/1's chance of waiting for gamma
gaps, sigma (rho for Poisson arrivals, more under bursts). Pinned: sigma's slope by finite
differences, each state's fixed point by hand from its own fields, and the Poisson form's
closed-form root unchanged."""

from __future__ import annotations

import math

import numpy as np
import pytest

from planner.deployment import Deployment
from planner.latency import LatencyModel, WorkloadStats
from planner.latency.queueing import gamma_wait_probability, gamma_wait_probability_slope
from planner.latency.results import State
from planner.workload import Workload

SPREAD = {"percentiles": {"p10": 150, "p50": 800, "p90": 2000, "p99": 4000, "max": 8000}}
ANSWERS = {"pairs": [[100, 0.5], [300, 0.3], [800, 0.15], [2000, 0.05]]}


def _engine(burstiness: float, budget: int = 8192):  # type: ignore[no-untyped-def]
    w = Workload.from_mapping(
        {
            "arrivals": {"requests_per_s": 1.0, "burstiness": burstiness},
            "input_tokens": SPREAD,
            "output_tokens": ANSWERS,
        }
    )
    dep = Deployment(model="Qwen/Qwen3-8B", gpu="h100-sxm", max_num_batched_tokens=budget).resolve()
    return LatencyModel(dep, WorkloadStats.of(w)).engines["colocated"]


@pytest.mark.parametrize("k", [0.05, 0.25, 0.84, 1.0, 3.0])
def test_the_chance_of_waiting_slope_is_its_derivative(k: float) -> None:
    for rho in (0.05, 0.3, 0.6, 0.9, 0.99):
        h = 1e-6 * rho
        fd = (gamma_wait_probability(rho + h, k) - gamma_wait_probability(rho - h, k)) / (2.0 * h)
        got = gamma_wait_probability_slope(rho, k, gamma_wait_probability(rho, k))
        assert got == pytest.approx(fd, rel=1e-5)
    assert gamma_wait_probability_slope(0.0, k, 0.0) == gamma_wait_probability_slope(1.0, k, 1.0) == 0.0


def test_bursts_wait_at_least_as_often_as_the_queue_is_busy() -> None:
    """For gamma gaps with k < 1 (more variable than Poisson in the convex order) sigma >= rho, so
    Newton may start at rho (`steady.merge_weight`) and reach the same root as from 0."""
    for k in (0.0057, 0.05, 0.25, 0.84, 0.99):
        for rho in np.linspace(1e-4, 0.9999, 400).tolist():
            from_zero = gamma_wait_probability(rho, k)
            assert from_zero >= rho
            assert gamma_wait_probability(rho, k, rho) == pytest.approx(from_zero, rel=1e-12)


def _parts(e, s: State) -> tuple[float, float, float]:  # type: ignore[no-untyped-def]
    """A (a prompt's extra engine time alone), F (in full steps) and q, from the state's fields."""
    k = s.chunk_weight.sum(axis=1)  # chunks per prompt
    a = float((s.own_service - k * s.t_arr) @ e.replica.prompt_probs)
    s_f = max(s.share_full, 1.0)
    f = e.replica.mean_prefill_tokens * (s.t_full - s.t_arr) / s_f
    q = e.replica.mean_prefill_tokens * s.t_full / s_f
    return a, f, q


@pytest.mark.parametrize("burstiness", [0.05, 0.25, 0.84, 4.0])
def test_each_state_is_littles_fixed_point_with_the_chance_of_waiting(burstiness: float) -> None:
    """n = lam d t_step, t_step = t_dec / (1 - busy), busy = lam (A + sigma(lam q) (F - A)), at
    states across the stable branch, bursty (k < 1) and smooth (k > 1) gaps alike."""
    e = _engine(burstiness)
    k = 1.0 / e.replica.arrival_cv2
    assert k == pytest.approx(burstiness)
    for frac in (0.05, 0.3, 0.7, 0.95):
        s = e.state_at(frac * e.boundary().n_max)
        a, f, q = _parts(e, s)
        sigma = gamma_wait_probability(min(s.lam * q, 1.0), k)
        assert s.rho == pytest.approx(s.lam * q, rel=1e-12)
        assert s.busy == pytest.approx(s.lam * (a + sigma * (f - a)), rel=1e-12)
        assert s.t_step == pytest.approx(s.t_dec / (1.0 - s.busy), rel=1e-12)
        assert s.n == pytest.approx(s.lam * e.replica.decode_steps * s.t_step, rel=1e-11)
        if burstiness < 1.0:
            assert sigma > s.rho  # bursts land on a busy queue more often than its busy time
        else:
            assert sigma < s.rho


def test_poisson_arrivals_keep_the_closed_form_root() -> None:
    """k = 1: sigma = rho, and lam(n) is the quadratic's root, n q (F - A) lam^2 + (d t_dec + n A)
    lam - n = 0, computed here from the state's own fields."""
    e = _engine(1.0)
    for frac in (0.1, 0.5, 0.9):
        s = e.state_at(frac * e.boundary().n_max)
        a, f, q = _parts(e, s)
        n = s.n
        qa, qb, qc = n * q * (f - a), e.replica.decode_steps * s.t_dec + n * a, -n
        root = (-qb + math.sqrt(qb * qb - 4.0 * qa * qc)) / (2.0 * qa)
        assert s.lam == pytest.approx(root, rel=1e-12)
        assert s.busy == pytest.approx(s.lam * (a + s.rho * (f - a)), rel=1e-12)


def test_bursts_lower_the_rate_a_concurrency_serves() -> None:
    """At the same concurrency, bursty arrivals put more prompts in full steps (F > A here), so
    each prompt costs more engine time and the rate that concurrency serves is lower."""
    poisson, bursty = _engine(1.0), _engine(0.05)
    for n in (20.0, 80.0, 150.0):
        a, f, _ = _parts(poisson, poisson.state_n(n))
        assert f > a
        assert bursty.state_n(n).lam < poisson.state_n(n).lam
    assert np.isfinite(bursty.boundary().lam_max) and bursty.boundary().lam_max < poisson.boundary().lam_max
