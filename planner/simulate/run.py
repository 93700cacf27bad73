"""Glue between a resolved deployment and the simulator, shared by `capplan simulate`,
tools/accuracy.py and bench/bench_simulate.py: the engine configuration a deployment implies,
one call that runs it colocated or disaggregated, and the request streams (a workload sampled,
a trace replayed as recorded or time-scaled, tiled past its end).

    resolved = Deployment(model="Qwen/Qwen3-8B", gpu="h100-sxm").resolve()
    reqs = trace_requests(builtin_trace("azure-conv-2023"), requests_per_s=20.0)
    result = run(resolved, reqs, slo=Slo(ttft_p99_s=0.5))
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

import numpy as np

from planner.deployment import ResolvedDeployment
from planner.errors import InvalidInput
from planner.scheduler_config import SchedulerConfig
from planner.simulate.disagg import simulate_disaggregated
from planner.simulate.engine import simulate
from planner.simulate.metrics import SimResult
from planner.simulate.requests import RequestArrays, RequestsLike, as_request_arrays
from planner.simulate.router import Router
from planner.slo import Slo
from planner.traces import Trace
from planner.workload import Arrivals, RateBucket, Workload

Replay = Literal["recorded", "scaled"]
REPLAY_MODES: tuple[Replay, ...] = ("recorded", "scaled")


def engine_config(resolved: ResolvedDeployment, prefix_cache_hit_fraction: float = 0.0) -> SchedulerConfig:
    """The scheduler of one replica of the deployment (every pool of a disaggregated deployment
    uses the same replica shape), serving prompts that hit the prefix cache this much."""
    return resolved.scheduler.with_prefix_cache_hits(prefix_cache_hit_fraction)


def kv_transfer(resolved: ResolvedDeployment) -> Callable[[int], float]:
    """Seconds to ship a prompt's KV from a prefill to a decode replica: each GPU of the TP group
    sends its share over its own link, plus a fixed latency (as the analytic model)."""
    per_token = resolved.replica.kv_bytes_per_token / resolved.kv_transfer_bandwidth_bytes_per_s
    latency = resolved.kv_transfer_latency_s

    def seconds(prompt_tokens: int) -> float:
        return prompt_tokens * per_token + latency

    return seconds


def run(
    resolved: ResolvedDeployment,
    requests: RequestsLike,
    *,
    prefix_cache_hit_fraction: float = 0.0,
    router: str | Router = "round_robin",
    slo: Slo | None = None,
    fast_forward: bool = True,
) -> SimResult:
    """Simulate the deployment serving `requests`: colocated replicas behind `router`, or the
    prefill and decode pools (both routed by `router`) joined by the KV-transfer link. The
    replica's roofline (`resolved.replica`, with its profile) times every step."""
    cfg = engine_config(resolved, prefix_cache_hit_fraction)
    timer = resolved.replica
    if resolved.disaggregated:
        return simulate_disaggregated(
            requests,
            timer,
            timer,
            cfg,
            cfg,
            prefill_replicas=resolved.prefill_replicas,
            decode_replicas=resolved.decode_replicas,
            kv_transfer=kv_transfer(resolved),
            prefill_router=router,
            decode_router=router,
            slo=slo,
            fast_forward=fast_forward,
        )
    return simulate(
        requests, timer, cfg, replicas=resolved.replicas, router=router, slo=slo, fast_forward=fast_forward
    )


# --- request streams ---------------------------------------------------------------------------


def _window(reqs: RequestArrays, count: int | None, horizon_s: float | None) -> RequestArrays:
    """The first `count` requests, or those arriving before `horizon_s` (arrivals ascending)."""
    if count is not None:
        end = count
    elif horizon_s is not None:
        end = int(np.searchsorted(reqs.arrival_s, horizon_s, side="left"))
    else:
        return reqs
    return RequestArrays(reqs.arrival_s[:end], reqs.prompt_tokens[:end], reqs.output_tokens[:end])


def tile(requests: RequestsLike, count: int | None = None, horizon_s: float | None = None) -> RequestArrays:
    """Copies of the requests end to end until `count` requests (or arrivals up to `horizon_s`)
    are covered: copy i is shifted by i x (span + mean gap), so the joins keep the mean rate.
    Arrivals are sorted (stably) first; a single copy is returned as is."""
    reqs = as_request_arrays(requests)
    n = len(reqs)
    if n == 0:
        raise InvalidInput("requests", "nothing to tile: no requests")
    order = np.argsort(reqs.arrival_s, kind="stable")
    t = reqs.arrival_s[order] - reqs.arrival_s[order[0]]
    p, o = reqs.prompt_tokens[order], reqs.output_tokens[order]
    span = float(t[-1])
    period = span + (span / (n - 1) if n > 1 else 1.0)
    if period <= 0:
        period = 1.0  # every request at one instant: copies one second apart
    if count is not None:
        copies = max(1, math.ceil(count / n))
    elif horizon_s is not None:
        copies = max(1, math.ceil(horizon_s / period) + 1)
    else:
        copies = 1
    shift = np.repeat(np.arange(copies, dtype=np.float64) * period, n)
    tiled = RequestArrays(np.tile(t, copies) + shift, np.tile(p, copies), np.tile(o, copies))
    return _window(tiled, count, horizon_s)


def trace_requests(
    trace: Trace,
    replay: Replay = "recorded",
    requests_per_s: float | None = None,
    *,
    count: int | None = None,
    horizon_s: float | None = None,
) -> RequestArrays:
    """A trace replayed: its timestamps as recorded, or time-scaled so its mean rate is
    `requests_per_s` (same gaps' shape, same lengths, same order). With `count` / `horizon_s`
    the first requests (or those arriving before the horizon), tiling the trace if it is
    shorter."""
    if replay == "scaled":
        if requests_per_s is None:
            raise InvalidInput("requests_per_s", "required to replay a trace time-scaled")
        trace = trace.time_scaled(requests_per_s)
    elif replay != "recorded":
        raise InvalidInput("replay", f"must be one of {', '.join(REPLAY_MODES)}, got {replay!r}")
    elif requests_per_s is not None:
        raise InvalidInput("requests_per_s", "a trace replayed as recorded keeps its own rate")
    base = RequestArrays(
        np.asarray(trace.arrival_s, dtype=np.float64),
        np.asarray(trace.prompt_tokens, dtype=np.int64),
        np.asarray(trace.output_tokens, dtype=np.int64),
    )
    if count is None and horizon_s is None:
        return base
    return tile(base, count, horizon_s)


def scale_workload(workload: Workload, requests_per_s: float) -> Workload:
    """The workload with its arrival rate scaled to mean `requests_per_s` (bucket rates keep
    their shape; burstiness, lengths and prefix hits are unchanged)."""
    if not (math.isfinite(requests_per_s) and requests_per_s > 0):
        raise InvalidInput("requests_per_s", f"must be a positive number, got {requests_per_s}")
    a = workload.arrivals
    if a.buckets is None:
        arrivals = Arrivals(requests_per_s=requests_per_s, burstiness=a.burstiness)
    else:
        f = requests_per_s / a.mean_requests_per_s
        arrivals = Arrivals(
            buckets=tuple(
                RateBucket(duration_s=b.duration_s, requests_per_s=b.requests_per_s * f) for b in a.buckets
            ),
            burstiness=a.burstiness,
        )
    return workload.model_copy(update={"arrivals": arrivals})


def workload_requests(
    workload: Workload, seed: int, count: int | None = None, horizon_s: float | None = None
) -> RequestArrays:
    """Requests sampled from the workload (`Workload.sample_requests`), deterministic for the
    seed."""
    s = workload.sample_requests(seed, count=count, horizon_s=horizon_s)
    return RequestArrays(s.arrival_s, s.prompt_tokens, s.output_tokens)
