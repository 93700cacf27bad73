"""The capacity search's shortcut: where a bound on TTFT p99 (`Engine.ttft_p99_at_most_s`)
already sits below ITL p99's ratio to its target, the search reads f from ITL alone. It must
change no answer: the same root-find, point for point, as with TTFT's quantiles everywhere."""

from __future__ import annotations

import math

import pytest

from planner.deployment import Deployment
from planner.latency import LatencyModel, Slo, WorkloadStats
from planner.latency.engine import Engine
from planner.workload import Workload

SPREAD = {"percentiles": {"p10": 150, "p50": 800, "p90": 2000, "p99": 4000, "max": 8000}}
ANSWERS = {"pairs": [[100, 0.5], [300, 0.3], [800, 0.15], [2000, 0.05]]}


def _model(prompts: dict, burstiness: float, budget: int) -> LatencyModel:
    w = Workload.from_mapping(
        {
            "arrivals": {"requests_per_s": 1.0, "burstiness": burstiness},
            "input_tokens": prompts,
            "output_tokens": ANSWERS,
        }
    )
    dep = Deployment(model="Qwen/Qwen3-8B", gpu="h100-sxm", max_num_batched_tokens=budget).resolve()
    return LatencyModel(dep, WorkloadStats.of(w))


CASES = [
    (SPREAD, 1.0, 4096, Slo(ttft_p99_s=0.5, itl_p99_s=0.04)),  # bench_evaluate's: ITL binds
    (SPREAD, 0.25, 2048, Slo(ttft_p99_s=2.0, itl_p99_s=0.03)),
    ({"pairs": [[1155, 1.0]]}, 1.0, 8192, Slo(ttft_p99_s=1.0, itl_p99_s=0.05)),
    (SPREAD, 1.0, 2048, Slo(ttft_p99_s=0.2, itl_p99_s=0.1)),  # TTFT binds
]


@pytest.mark.parametrize(("prompts", "burstiness", "budget", "slo"), CASES)
def test_the_ttft_shortcut_changes_no_capacity(
    prompts: dict, burstiness: float, budget: int, slo: Slo, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = _model(prompts, burstiness, budget).capacity(slo)
    exact_calls: list[float] = []
    bound_calls: list[float] = []
    real = Engine.ttft_p99_s
    real_bound = Engine.ttft_p99_at_most_s

    def counted(self: Engine, s: object) -> float:
        exact_calls.append(1.0)
        return real(self, s)  # type: ignore[arg-type]

    def counted_bound(self: Engine, s: object) -> float:
        bound_calls.append(real_bound(self, s))  # type: ignore[arg-type]
        return math.inf

    monkeypatch.setattr(Engine, "ttft_p99_s", counted)
    monkeypatch.setattr(Engine, "ttft_p99_at_most_s", counted_bound)
    slow = _model(prompts, burstiness, budget).capacity(slo)
    assert repr(fast) == repr(slow)
    assert bound_calls and exact_calls


def test_the_shortcut_skips_ttft_where_itl_binds(monkeypatch: pytest.MonkeyPatch) -> None:
    """In bench_evaluate's case (ITL binds, TTFT p99 at ~37% of its target) the search asks TTFT's
    exact p99 at no point it visits (the bound answers there): only the answer's own point
    (`Engine.point`) computes TTFT's quantiles."""
    calls: list[float] = []
    real = Engine.ttft_p99_s

    def counted(self: Engine, s: object) -> float:
        calls.append(s.n)  # type: ignore[attr-defined]
        return real(self, s)  # type: ignore[arg-type]

    m = _model(SPREAD, 1.0, 4096)
    m.floors()  # the idle point's TTFT, read by every capacity answer
    monkeypatch.setattr(Engine, "ttft_p99_s", counted)
    cap = m.capacity(Slo(ttft_p99_s=0.5, itl_p99_s=0.04))
    assert cap.binding_limit == "itl"
    at = cap.pools["colocated"].at_capacity
    assert at is not None and at.ttft_p99_s is not None and calls == []


def test_the_bound_is_infinite_where_a_wait_phase_is() -> None:
    """A wait phase of infinite mean makes TTFT's quantiles infinite; the bound must be too."""
    import numpy as np

    from planner.latency.queueing import NO_WAIT
    from planner.latency.results import TtftMixture

    e = _model(SPREAD, 1.0, 4096).engines["colocated"]
    s = e.state_at(10.0)
    e.results_at(s).ttft_mixture = TtftMixture(  # in place of the stage's own
        np.array([0.1, 0.2, 0.3]),
        np.array([0.5, 0.495, 0.005]),  # so few queued that the 1% point needs no wait at all
        ((0.5, 0.01), (0.5, math.inf)),
        np.array([0.0, 0.0, 1.0]),
        2,
        0.005,
        NO_WAIT,
    )
    assert e.ttft_p99_at_most_s(s) == math.inf
    assert e.ttft_p99_s(s) == math.inf


@pytest.mark.parametrize(("prompts", "burstiness", "budget", "slo"), CASES)
def test_the_bound_below_one_percent_queued_is_the_mixtures_largest_unqueued_time(
    prompts: dict, burstiness: float, budget: int, slo: Slo
) -> None:
    """Where fewer than 1% of prompts queue beyond the next step, the bound is the largest time
    that does not wait, read without building TTFT's mixture (`delay.delay_top_s` on `delay.delay_classes`'
    classes): the same number as the mixture's largest unqueued value, which the exact p99
    never exceeds (the queued 1% or less are all that can lie above it). From 1% on, or where
    an arrival may find the KV cache full (`Engine.kv_full`), the mixture's bound (bursts of
    k = 0.25 queue more than 1% at every load here)."""
    e = _model(prompts, burstiness, budget).engines["colocated"]
    n_max = e.boundary().n_max
    cheap = 0
    for frac in (0.005, 0.02, 0.1, 0.3, 0.6, 0.9):
        s = e.state_at(frac * n_max)
        queued = e.steps(s).backlog
        bound = e.ttft_p99_at_most_s(s)
        if queued < 0.01 and e.kv_full(s)[0] == 0.0:
            assert not e.results_at(s).computed("ttft_mixture")  # not built
            mix = e.ttft_mixture(s)
            assert bound == float(mix.values[: mix.unqueued].max())
            cheap += 1
        else:
            assert e.results_at(s).computed("ttft_mixture")
        assert e.ttft_p99_s(s) <= bound
    assert cheap >= (0 if burstiness < 1.0 else 2)


def test_ttft_bound_invariants() -> None:
    """`ttft.bound_past_waits` by hand: 100 x mass 0.05 = 5 > 1, so p99 <= queued + m ln 5 (the
    waiting mass decays to 1% past it); a mass at most 1% adds nothing; an infinite slowest
    phase bounds nothing; a NaN phase is the model's defect (`ModelInvariantError`)."""
    from planner.latency.invariants import ModelInvariantError
    from planner.latency.ttft import bound_past_waits

    got = bound_past_waits(top_s=0.3, queued_s=0.2, slowest_phase_s=0.1, waiting_mass=0.05)
    assert got == pytest.approx(0.2 + 0.1 * math.log(5.0), rel=1e-15)
    assert bound_past_waits(top_s=0.3, queued_s=0.2, slowest_phase_s=0.1, waiting_mass=0.01) == 0.3
    assert bound_past_waits(top_s=0.3, queued_s=0.2, slowest_phase_s=math.inf, waiting_mass=0.5) == math.inf
    with pytest.raises(ModelInvariantError, match="slowest_phase_s"):
        bound_past_waits(top_s=0.3, queued_s=0.2, slowest_phase_s=math.nan, waiting_mass=0.5)


def test_a_states_stages_live_with_the_state_and_form_no_cycle() -> None:
    """What a stage computed stays with its state while the state lives, also once the engine's
    state cache (`engine.STATE_CACHE`) has been cleared: the capacity search holds states across
    that and `ttft_p99_at_most_s` reuses an exact p99 computed there. And the stages' store holds
    no state, engine or view, so the collector finds no cycle to free after an evaluation."""
    import gc

    from planner.latency.engine import STATE_CACHE

    e = _model(SPREAD, 1.0, 4096).engines["colocated"]
    n_max = e.boundary().n_max
    held = e.state_at(0.5 * n_max)
    exact = e.ttft_p99_s(held)
    for i in range(STATE_CACHE + 1):  # more states than the cache keeps: it is cleared
        e.state_at((i + 1) / (STATE_CACHE + 2) * 0.9 * n_max)
    assert e.state_at(0.5 * n_max) is not held  # the cache no longer has it
    assert e.results_at(held).computed("ttft") and e.ttft_p99_at_most_s(held) == exact
    assert not e.results_at(e.state_at(0.5 * n_max)).computed("ttft")  # a new state: its own stages

    gc.collect()
    gc.disable()
    try:
        _model(SPREAD, 1.0, 4096).evaluate()
        assert gc.collect() == 0
    finally:
        gc.enable()
