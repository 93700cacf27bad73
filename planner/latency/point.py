"""The figures `evaluate` reports at one steady state (`results.Point`), assembled from the
components' results the engine computed there (docs/latency.md indexes where each comes from)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from planner.latency.queueing import Wait
from planner.latency.replica import Replica
from planner.latency.results import Point, State
from planner.latency.seats import SeatWait


def point_of(
    replica: Replica,
    s: State,
    *,
    ttft: npt.NDArray[np.float64] | None,
    wait: Wait,
    load: tuple[float, float],
    itl: tuple[float, float] | None,
    itl_worst_s: float | None,
    mixed_share: float,
    preemption_risk: float,
    kv_full_wait_s: float,
    seat: SeatWait,
) -> Point:
    """The Point at state `s`: TTFT p50/p99 (`ttft`, None without a prefill) and the prefill
    queue's `wait`, ITL p50/p99 and its worst case (None without decodes), the share of steps
    that carry prompt tokens, the KV and seat figures; `load`: running requests and KV tokens in use (`stability.load_of`)."""
    seats, kv_mean = load
    return Point(
        lam=s.lam,
        n=s.n,
        ttft_p50_s=float(ttft[0]) if ttft is not None else None,
        ttft_p99_s=float(ttft[1]) if ttft is not None else None,
        itl_p50_s=itl[0] if itl is not None else None,
        itl_p99_s=itl[1] if itl is not None else None,
        itl_worst_case_s=itl_worst_s,
        mean_step_s=s.t_step if replica.has_decode else None,
        mixed_step_fraction=mixed_share,
        prefill_chunk_tokens=s.share_own if replica.has_prefill else None,
        prefill_utilization=min(1.0, s.rho) if replica.has_prefill else 0.0,
        queue_wait_mean_s=wait.mean_s,
        queue_wait_p99_s=wait.quantile(0.99),
        kv_cache_tokens_used=kv_mean,
        kv_cache_usage=kv_mean / replica.kv_cache_tokens,
        preemption_risk=preemption_risk,
        running_requests=seats,
        kv_full_wait_s=kv_full_wait_s,
        seat_wait_probability=seat.probability,
        seat_wait_s=seat.mean_s,
    )
