"""The seat queue (`planner.latency.seats`, `Engine._seat_wait`): vLLM V1 admits a prompt only
while fewer than `max_num_seqs` requests run, so where the seats fill a prompt waits for one.
Pinned here: Erlang C and M/M/S by hand and by a direct simulation of the queue, the mixture's
construction, the engine's inputs by hand, that engines far from their seat limit read bit for
bit as without the queue, and that the capacity under a TTFT target stops short of the seat
limit (the simulator's seat-limit case is tests/test_latency_seats_sim.py)."""

from __future__ import annotations

import heapq
import math
from typing import Any

import numpy as np
import pytest
from ttft_helpers import ttft_p50_p99_with

from planner.costmodel.steptime import step_time_s
from planner.deployment import Deployment
from planner.latency import LatencyModel, Slo, WorkloadStats
from planner.latency.engine import Engine
from planner.latency.quantiles import response_quantiles_phases
from planner.latency.results import State
from planner.latency.seats import (
    NO_SEAT_WAIT,
    SEAT_WAIT_MIN,
    SeatWait,
    erlang_c,
    seat_wait,
    seat_wait_at,
    with_seat_wait,
)
from planner.workload import Workload

# Chat-like lengths (examples/chat-qwen3-8b-h100.yaml) on one H100 whose 32 seats bind first.
CHAT: dict[str, Any] = {
    "arrivals": {"requests_per_s": 5.0},
    "input_tokens": {"percentiles": {"p10": 150, "p50": 800, "p90": 2000, "p99": 4000, "max": 8000}},
    "output_tokens": {"pairs": [[100, 0.5], [300, 0.3], [800, 0.15], [2000, 0.05]]},
    "prefix_cache_hit_fraction": 0.2,
}
SEAT_BOUND = {"model": "Qwen/Qwen3-8B", "gpu": "h100-sxm", "max_num_seqs": 32, "max_num_batched_tokens": 8192}


def _model(seats: int = 32, burstiness: float = 1.0) -> LatencyModel:
    w = Workload.from_mapping({**CHAT, "arrivals": {"requests_per_s": 5.0, "burstiness": burstiness}})
    return LatencyModel(Deployment(**{**SEAT_BOUND, "max_num_seqs": seats}).resolve(), WorkloadStats.of(w))


def _erlang_c_by_hand(s: int, a: float) -> float:
    """M/M/s: C = (a^s / s!) (s / (s - a)) / (sum_{k<s} a^k / k! + (a^s / s!) (s / (s - a)))."""
    top = a**s / math.factorial(s) * s / (s - a)
    return top / (sum(a**k / math.factorial(k) for k in range(s)) + top)


def _ttft_quantiles(e: Engine, s: State) -> list[float | None]:
    """TTFT p50 and p99 at a state, as `Engine.point` reports them."""
    p = e.point(s)
    return [p.ttft_p50_s, p.ttft_p99_s]


def _seat_wait(e: Engine, s: State) -> SeatWait:
    """The seat queue at a state (`seats.seat_wait_at`) given what `Engine.point` reports
    running there and the decode count's variance (`Engine.decode_variance`)."""
    return seat_wait_at(
        e.replica, s, running_requests=e.point(s).running_requests, decode_count_variance=e.decode_variance(s)
    )


def test_erlang_c_by_hand() -> None:
    """Two servers at a = 1: C = (1/2 * 2) / (1 + 1 + 1) = 1/3; one server: C = rho (M/M/1);
    the continuous form (incomplete gamma function) equals the factorial sums at integer s; no
    load, none; at or past saturation, certain."""
    assert erlang_c(2.0, 1.0) == pytest.approx(1.0 / 3.0, rel=1e-12)
    assert erlang_c(1.0, 0.3) == pytest.approx(0.3, rel=1e-12)
    for s, a in ((4, 3.0), (16, 10.3), (32, 23.03), (64, 52.1)):
        assert erlang_c(float(s), a) == pytest.approx(_erlang_c_by_hand(s, a), rel=1e-10)
    assert erlang_c(32.0, 0.0) == 0.0
    assert erlang_c(32.0, 32.0) == 1.0 and erlang_c(32.0, 40.0) == 1.0
    # between integers it lies between its neighbours (fewer servers: more waiting)
    assert erlang_c(17.0, 10.0) < erlang_c(16.5, 10.0) < erlang_c(16.0, 10.0)
    # far below the seats: exactly 0 (the cheap bound), with the closed form far below the floor
    assert erlang_c(1024.0, 200.0) == 0.0
    assert _erlang_c_by_hand(128, 40.0) < SEAT_WAIT_MIN * 1e-6 and erlang_c(128.0, 40.0) == 0.0
    with pytest.raises(ValueError, match="servers"):
        erlang_c(0.0, 1.0)


def test_mm_s_by_hand() -> None:
    """Poisson arrivals, a residence that does not lengthen, peakedness 1: M/M/S. S = 4 seats,
    lam = 3/s, E[R] = 1 s (a = 3): C = (81/24 * 4) / (1 + 3 + 9/2 + 9/2 + 27/2) = 13.5 / 26.5,
    and the wait given one is exponential with mean 1 / (S mu - lam) = 1 s."""
    w = seat_wait(4.0, 3.0, 1.0, 3.0, 1.0, 1.0)
    assert w.probability == pytest.approx(13.5 / 26.5, rel=1e-12)
    assert w.mean_s == pytest.approx(1.0, rel=1e-12)
    # bursty arrivals wait (c_a^2 + 1) / 2 as long (Kingman's factor); a longer residence with
    # every seat taken, S / R_full - lam: 4 / 1.25 - 3 = 0.2/s drains, 5 s
    assert seat_wait(4.0, 3.0, 1.0, 3.0, 1.0, 4.0).mean_s == pytest.approx(2.5, rel=1e-12)
    assert seat_wait(4.0, 3.0, 1.0, 3.0, 1.25, 1.0).mean_s == pytest.approx(5.0, rel=1e-12)
    # Hayward: peaked traffic (Z = 2) as Poisson traffic of a / Z on S / Z seats
    assert seat_wait(4.0, 3.0, 2.0, 3.0, 1.0, 1.0).probability == pytest.approx(erlang_c(2.0, 1.5), rel=1e-12)
    # at or past the seats: certain and endless; far below them: nothing
    assert seat_wait(4.0, 4.0, 1.0, 4.0, 1.0, 1.0) == SeatWait(1.0, math.inf, 4.0, 1.0)
    assert seat_wait(256.0, 100.0, 1.0, 30.0, 4.0, 1.0).probability == 0.0
    with pytest.raises(ValueError, match="arrival_rate"):
        seat_wait(4.0, 3.0, 1.0, 0.0, 1.0, 1.0)


def _fcfs_waits(gaps: np.ndarray, services: np.ndarray, servers: int) -> np.ndarray:
    """Each customer's wait in a FCFS queue of `servers` identical servers (the next free server
    takes the head of the line: the earliest free time on a heap)."""
    free = [0.0] * servers
    t = 0.0
    waits = np.empty(gaps.size)
    for i, (gap, service) in enumerate(zip(gaps.tolist(), services.tolist(), strict=True)):
        t += gap
        start = max(heapq.heappop(free), t)
        waits[i] = start - t
        heapq.heappush(free, start + service)
    return waits


def test_mm_s_against_a_direct_simulation() -> None:
    """The formulas against the queue itself: 400,000 Poisson arrivals at 5/s, exponential
    residences of mean 1 s, 7 seats (a = 5, rho 0.71; seed 0; the first 5% dropped). P(wait) and
    the mean wait given one are M/M/S's (0.3313, 0.5 s) within 4 standard errors of the run
    (batch means over 20 batches: waits are correlated; each error under 2% of its value), and
    the wait's p99 is the exponential's, 0.5 ln(100 C) = 1.75 s, within 5%."""
    rng = np.random.default_rng(0)
    n = 400_000
    waits = _fcfs_waits(rng.exponential(0.2, n), rng.exponential(1.0, n), 7)[n // 20 :]
    w = seat_wait(7.0, 5.0, 1.0, 5.0, 1.0, 1.0)
    assert w.probability == pytest.approx(_erlang_c_by_hand(7, 5.0), rel=1e-12)
    batches = waits.reshape(20, -1)
    p_b = (batches > 0).mean(axis=1)
    m_b = np.array([b[b > 0].mean() for b in batches])
    for got, want in ((p_b, w.probability), (m_b, w.mean_s)):
        se = float(got.std(ddof=1)) / math.sqrt(got.size)
        assert se < 0.02 * want
        assert abs(float(got.mean()) - want) < 4.0 * se
    p99 = w.mean_s * math.log(w.probability / 0.01)
    assert float(np.percentile(waits, 99)) == pytest.approx(p99, rel=0.05)


def test_the_branch_doubles_the_mixture() -> None:
    """With probability f every point also waits for a seat (a phase of mean m appended); a copy
    that already waited keeps the shape of the wait of larger conditional mean and adds the
    other's mean, so each copy's mean wait is exact. None, 1-D and 2-D shares alike."""
    values = np.array([0.1, 0.2, 0.5, 0.7])
    probs = np.array([0.4, 0.3, 0.2, 0.1])
    phases = ((0.25, 0.2), (0.75, 0.6))  # a wait of conditional mean 0.5
    waiting = np.array([0.0, 0.0, 1.0, 1.0])
    for m, shifted, seat_col in (
        (0.8, [0.1, 0.2, 1.0, 1.2], [0, 0, 0, 0, 1, 1, 1, 1]),  # the seat's shape; + the queue's 0.5
        (0.3, [0.1, 0.2, 0.8, 1.0], [0, 0, 0, 0, 1, 1, 0, 0]),  # the queued keep their shape; + 0.3
    ):
        v, p, ph, w = with_seat_wait(values, probs, phases, waiting, SeatWait(0.1, m))
        assert v.tolist() == pytest.approx([*values.tolist(), *shifted], rel=1e-15)
        assert p.tolist() == pytest.approx([*(0.9 * probs).tolist(), *(0.1 * probs).tolist()], rel=1e-15)
        assert ph == (*phases, (1.0, m))
        assert w[:, 2].tolist() == seat_col
        queue = np.array([0, 0, 1, 1, 0, 0, 0 if m >= 0.5 else 1, 0 if m >= 0.5 else 1], dtype=float)
        assert w[:, 0].tolist() == queue.tolist() and w[:, 1].tolist() == queue.tolist()
        # every copy's mean wait: its old mean + m
        mean_wait = v + w @ np.array([a * mm for a, mm in ph])
        assert mean_wait[4:].tolist() == pytest.approx((values + waiting * 0.5 + m).tolist(), rel=1e-12)
    # without a queue: one phase, the seat's, for every copy
    v, p, ph, w = with_seat_wait(values, probs, (), None, SeatWait(0.2, 0.8))
    assert ph == ((1.0, 0.8),) and w[:, 0].tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert v.tolist() == [*values.tolist(), *values.tolist()]
    # 2-D shares (the KV-full branch before it: a row waits the queue's phases or the KV's):
    # each point's own old wait decides
    w2 = np.array([[0.0, 0.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
    ph3 = (*phases, (1.0, 2.0))
    v, p, ph, w = with_seat_wait(values, probs, ph3, w2, SeatWait(0.5, 1.0))
    # point 1 waited the queue (0.5 < 1: the seat's shape), point 2 the KV episode (2 > 1: kept)
    assert v[4:].tolist() == pytest.approx([0.1, 0.7, 1.5, 0.7], rel=1e-12)
    assert w[4:].tolist() == [[0, 0, 0, 1], [0, 0, 0, 1], [0, 0, 1, 0], [0, 0, 0, 1]]
    assert w[:4, :3].tolist() == w2.tolist() and not w[:4, 3].any()


def test_the_engines_inputs_by_hand() -> None:
    """At a state of the seat-bound engine: the offered load is the running requests `evaluate`
    reports, Z the decode count's variance over its mean, and R_full the residence a / lam with
    each of its d decode steps carrying the S - a decodes more (over 1 - busy)."""
    m = _model()
    e = m.engines["colocated"]
    s = e.state_at(0.8 * e.boundary().n_max)
    w = _seat_wait(e, s)
    point = e.point(s)
    a = point.running_requests
    assert w.running == a and point.seat_wait_probability == w.probability > 0.0
    assert w.peakedness == pytest.approx(e.decode_variance(s) / s.n, rel=1e-12)
    more = 32.0 - a
    t_more = step_time_s(
        e.replica.step_coefficients,
        0.0,
        0.0,
        s.n_dec + more,
        (s.n_dec + more) * e.replica.decode_context_tokens,
    )
    full = (
        a / s.lam + e.replica.decode_steps * (t_more - s.t_dec) * s.t_step / s.t_dec
    )  # t_step = t_dec / (1 - busy)
    assert w == seat_wait(32.0, a, w.peakedness, s.lam, full, 1.0)
    assert w.mean_s == pytest.approx(1.0 / (32.0 / full - s.lam), rel=1e-12)


def test_far_from_the_seats_ttft_is_unchanged() -> None:
    """vLLM's 1024 seats on the same replica: the seats never fill (P(wait) below SEAT_WAIT_MIN
    up to the stability limit), and TTFT is bit for bit what it is with the seat queue off
    (the mixture given NO_SEAT_WAIT, tests/ttft_helpers.py)."""
    w = Workload.from_mapping(CHAT)
    r = Deployment(**{**SEAT_BOUND, "max_num_seqs": 1024}).resolve()
    on = LatencyModel(r, WorkloadStats.of(w))
    e = on.engines["colocated"]
    states = [e.state_at(f * e.boundary().n_max) for f in (0.3, 0.6, 0.9, 0.99)]
    assert all(_seat_wait(e, s).probability == 0.0 for s in states)
    got = [_ttft_quantiles(e, s) for s in states]
    assert [ttft_p50_p99_with(e, s, seat=NO_SEAT_WAIT) for s in states] == got


def test_ttft_capacity_is_never_the_seat_limit() -> None:
    """Where max_num_seqs ends the stable range, TTFT p99 grows without bound towards it (the
    seats' wait diverges as a -> S), so a TTFT target, however loose, binds below the limit:
    16, 32 and 64 seats, Poisson and bursty arrivals, targets 0.5 s to 60 s."""
    for seats in (16, 32, 64):
        for burstiness in (1.0, 0.25):
            m = _model(seats, burstiness)
            limit = m.max_stable_requests_per_s()
            assert m.boundaries()["colocated"].binding == "max_num_seqs"
            near = m.evaluate(0.999 * limit)
            assert near.ttft_p99_s is not None and near.ttft_p99_s > 60.0
            caps = [m.capacity(Slo(ttft_p99_s=t)) for t in (0.5, 2.0, 60.0)]
            assert all(c.binding_limit == "ttft" for c in caps)
            rates = [c.max_requests_per_s_within_slo for c in caps]
            assert rates == sorted(rates) and rates[-1] < limit
            assert rates[0] < 0.9 * limit


def test_the_bound_the_capacity_search_trusts_holds() -> None:
    """`ttft_p99_at_most_s` stays an upper bound of TTFT p99 with the seat branch (the mixture's
    2-D shares), from where the seats start to fill to near the limit."""
    e = _model().engines["colocated"]
    for f in (0.6, 0.75, 0.9, 0.98):
        s = e.state_at(f * e.boundary().n_max)
        bound = e.ttft_p99_at_most_s(s)
        p99 = e.ttft_p99_s(s)
        assert p99 <= bound < math.inf
    s = e.state_at(0.9 * e.boundary().n_max)
    mix = e.ttft_mixture(s)
    assert mix.waiting is not None and mix.waiting.ndim == 2
    q = response_quantiles_phases(mix.values, mix.probs, mix.phases, np.array([0.99]), mix.waiting)
    assert float(q[0]) == e.ttft_p99_s(s)


def test_the_note_says_how_long_a_prompt_waits_for_a_seat() -> None:
    """Over 1% of arrivals finding every seat taken, `evaluate` says so with the mean wait."""
    m = _model()
    limit = m.max_stable_requests_per_s()
    pred = m.evaluate(0.85 * limit)
    e = m.engines["colocated"]
    solved = e.solve(0.85 * limit)
    assert solved is not None
    w = _seat_wait(e, solved[0])
    (note,) = [n for n in pred.notes if n.startswith("seats:")]
    assert f"{w.probability:.0%} of prompts find all 32" in note and f"~{w.mean_s * 1e3:,.0f} ms" in note
    assert not [n for n in m.evaluate(0.5 * limit).notes if n.startswith("seats:")]
