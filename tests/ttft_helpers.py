"""TTFT at a colocated state with one of its branches given: `Engine.ttft_mixture`'s own
composition, from the component functions (`ttft.ttft_mixture` on the engine's step mix, D,
queued share, own service and full steps), with the KV-full branch (`kv_full.KvFull`) or the seat
queue (`seats.SeatWait`) passed in; `NO_KV_FULL` / `NO_SEAT_WAIT` take a branch out. The tests
that compare TTFT with and without a branch use it instead of patching the branch's threshold;
`test_the_helper_is_the_engines_composition` (test_latency_kv_full.py) pins it to the engine."""

from __future__ import annotations

from planner.latency import delay, ttft
from planner.latency.engine import Engine
from planner.latency.kv_full import KvFull
from planner.latency.results import State, TtftMixture
from planner.latency.seats import SeatWait, seat_wait_at
from planner.latency.stability import load_of


def seat_wait_of(e: Engine, s: State) -> SeatWait:
    """`seats.seat_wait_at` with what the engine gathers for it (a colocated engine)."""
    running = load_of(e.replica, s)[0] if s.lam > 0.0 else 0.0
    var = e.decode_variance(s) if running > 0.0 and s.n > 0.0 else None
    return seat_wait_at(e.replica, s, running_requests=running, decode_count_variance=var)


def ttft_mixture_with(
    e: Engine, s: State, *, kv_full: KvFull | None = None, seat: SeatWait | None = None
) -> TtftMixture:
    """TTFT's mixture at `s` (a colocated engine), the KV-full branch and the seat queue the
    engine's where not given."""
    assert e.has_prefill and e.has_decode, "a colocated engine"
    st = e.steps(s)
    d, chain_push = e.results_at(s).delay  # D, and the chain's pushed share
    w_chain = delay.chain_delay_weight(join_weight=s.join_weight, arrival_cv2=e.replica.arrival_cv2)
    q = ttft.queued_share(st, chain_push=chain_push, chain_weight=w_chain)
    return ttft.ttft_mixture(
        e.replica, s, st, delay=d, queued=q,
        own_s=ttft.own_ttft_s(s, ttft_extra_s=e.ttft_extra_s),
        full_time=ttft.full_time_s(e.replica, s) if q > 0 else None,
        kv_full=e.kv_full(s) if kv_full is None else kv_full,
        seat=seat_wait_of(e, s) if seat is None else seat,
    )  # fmt: skip


def ttft_p50_p99_with(
    e: Engine, s: State, *, kv_full: KvFull | None = None, seat: SeatWait | None = None
) -> list[float]:
    """TTFT p50 and p99 of `ttft_mixture_with`, as `Engine.point` reports them."""
    got, _ = ttft.ttft_quantiles(ttft_mixture_with(e, s, kv_full=kv_full, seat=seat))
    return [float(got[0]), float(got[1])]
