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
from collections.abc import Callable, Iterator
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from planner.deployment import ResolvedDeployment
from planner.errors import InvalidInput, echo
from planner.scheduler_config import SchedulerConfig
from planner.simulate.clients import simulate_closed_loop
from planner.simulate.colocated import simulate
from planner.simulate.disagg import simulate_disaggregated
from planner.simulate.metrics import SimResult
from planner.simulate.replica_pool import MAX_SIM_REQUESTS
from planner.simulate.requests import RequestArrays, RequestsLike, RequestStream, as_request_arrays
from planner.simulate.router import Router
from planner.slo import Slo
from planner.traces import Trace
from planner.validation import validate
from planner.workload import (
    MAX_HORIZON_S,
    MAX_REQUESTS_PER_S,
    MIN_REQUESTS_PER_S,
    REQUEST_CHUNK,
    Arrivals,
    Workload,
)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

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
    requests: RequestsLike | RequestStream,
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
    front_end_s = timer.profile.request_overhead_s  # vLLM's front end, per request (the profile's)
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
            request_overhead_s=front_end_s,
        )
    return simulate(
        requests,
        timer,
        cfg,
        replicas=resolved.replicas,
        router=router,
        slo=slo,
        fast_forward=fast_forward,
        request_overhead_s=front_end_s,
    )


def run_closed_loop(
    resolved: ResolvedDeployment,
    requests: Iterator[RequestArrays],
    *,
    concurrency: int,
    horizon_s: float | None = None,
    prefix_cache_hit_fraction: float = 0.0,
    router: str | Router = "round_robin",
    slo: Slo | None = None,
) -> tuple[SimResult, RequestArrays, int]:
    """`run` for a closed loop of `concurrency` clients (planner/simulate/clients.py), the
    requests' arrival times being when each comes due; colocated deployments. Returns the result,
    the requests as sent and how many outputs were cut at max_model_len."""
    if resolved.disaggregated:
        raise InvalidInput(
            "workload.arrivals.concurrency", "the closed-loop simulation runs colocated deployments"
        )
    timer = resolved.replica
    return simulate_closed_loop(
        requests,
        timer,
        engine_config(resolved, prefix_cache_hit_fraction),
        concurrency=concurrency,
        horizon_s=horizon_s,
        replicas=resolved.replicas,
        router=router,
        slo=slo,
        request_overhead_s=timer.profile.request_overhead_s,
    )


def closed_loop_requests(
    workload: Workload,
    seed: int,
    count: int | None = None,
    horizon_s: float | None = None,
    most: int = MAX_SIM_REQUESTS,
) -> Iterator[RequestArrays]:
    """A closed loop's requests in due order, deterministic for the seed: with a rate cap, the
    workload's open-loop sample at it (`workload_stream`: the cap's times, same lengths); without,
    all due at 0 with the lengths an open-loop sample of the seed draws, `count` of them or
    (`horizon_s`) as many as the loop sends before the horizon, at most `most`."""
    a = workload.arrivals
    if a.requests_per_s is not None:
        return iter(
            workload_stream(workload.model_copy(update={"arrivals": a.open_loop()}), seed, count, horizon_s)
        )
    _, in_ss, out_ss = np.random.SeedSequence(int(seed)).spawn(3)
    in_rng, out_rng = np.random.default_rng(in_ss), np.random.default_rng(out_ss)

    def chunks() -> Iterator[RequestArrays]:
        left = most if count is None else count
        while left > 0:
            n = min(REQUEST_CHUNK, left)
            left -= n
            prompts = workload.input_tokens.sample(in_rng, n)
            yield RequestArrays(np.zeros(n), prompts, workload.output_tokens.sample(out_rng, n))

    return chunks()


# --- request streams ---------------------------------------------------------------------------
# Each stream comes as arrays (`..._requests`, what a report summarizes) or lazily, a chunk at a
# time (`..._stream`, a RequestStream: what lets `run` simulate millions of requests in little
# memory). Both hold the same requests. Counts are at most MAX_SIM_REQUESTS (10,000,000) and
# horizons at most MAX_HORIZON_S (1e7 s), and may expect at most that many requests.


def _tile_plan(
    reqs: RequestArrays, count: int | None, horizon_s: float | None
) -> tuple[FloatArray, IntArray, IntArray, float, int]:
    n = len(reqs)
    if n == 0:
        raise InvalidInput("requests", "nothing to tile: no requests")
    if count is not None and not 0 <= count <= MAX_SIM_REQUESTS:
        raise InvalidInput("count", f"must be 0 .. {MAX_SIM_REQUESTS:,}, got {count:,}")
    if horizon_s is not None and not 0 <= horizon_s <= MAX_HORIZON_S:
        raise InvalidInput("horizon_s", f"must be 0 .. {MAX_HORIZON_S:g} s, got {horizon_s:g}")
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
        expected = horizon_s / period * n
        if expected > MAX_SIM_REQUESTS:
            raise InvalidInput(
                "horizon_s",
                f"{horizon_s:g} s of this trace holds ~{expected:,.0f} requests, more than the "
                f"{MAX_SIM_REQUESTS:,} a simulation takes",
            )
        copies = max(1, math.ceil(horizon_s / period) + 1)
    else:
        copies = 1
    return t, p, o, period, copies


def tile_stream(
    requests: RequestsLike, count: int | None = None, horizon_s: float | None = None
) -> RequestStream:
    """`tile` lazily: one copy of the requests at a time."""
    reqs = as_request_arrays(requests)
    t, p, o, period, copies = _tile_plan(reqs, count, horizon_s)

    def chunks() -> Iterator[RequestArrays]:
        left = count
        for i in range(copies):
            ti = t + np.float64(i) * period
            end = ti.size
            if left is not None:
                end = min(end, left)
                left -= end
            elif horizon_s is not None:
                end = int(np.searchsorted(ti, horizon_s, side="left"))
            if end:
                yield RequestArrays(ti[:end], p[:end], o[:end])
            if end < ti.size:
                return

    return RequestStream(chunks())


def tile(requests: RequestsLike, count: int | None = None, horizon_s: float | None = None) -> RequestArrays:
    """Copies of the requests end to end until `count` requests (or arrivals up to `horizon_s`)
    are covered: copy i is shifted by i x (span + mean gap), so the joins keep the mean rate.
    Arrivals are sorted (stably) first; a single copy is returned as is."""
    return tile_stream(requests, count, horizon_s).collect()


def trace_stream(
    trace: Trace,
    replay: Replay = "recorded",
    requests_per_s: float | None = None,
    *,
    count: int | None = None,
    horizon_s: float | None = None,
) -> RequestStream:
    """`trace_requests` lazily."""
    if replay == "scaled":
        if requests_per_s is None:
            raise InvalidInput("requests_per_s", "required to replay a trace time-scaled")
        trace = trace.time_scaled(requests_per_s)
    elif replay != "recorded":
        raise InvalidInput("replay", f"must be one of {', '.join(REPLAY_MODES)}, got {echo(replay)}")
    elif requests_per_s is not None:
        raise InvalidInput("requests_per_s", "a trace replayed as recorded keeps its own rate")
    base = RequestArrays(
        np.asarray(trace.arrival_s, dtype=np.float64),
        np.asarray(trace.prompt_tokens, dtype=np.int64),
        np.asarray(trace.output_tokens, dtype=np.int64),
    )
    if count is None and horizon_s is None:
        return RequestStream([base])
    return tile_stream(base, count, horizon_s)


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
    return trace_stream(trace, replay, requests_per_s, count=count, horizon_s=horizon_s).collect()


def scale_workload(workload: Workload, requests_per_s: float) -> Workload:
    """The workload with its arrival rate scaled to mean `requests_per_s` (bucket rates keep
    their shape; burstiness, lengths and prefix hits are unchanged)."""
    if not (MIN_REQUESTS_PER_S <= requests_per_s <= MAX_REQUESTS_PER_S):
        raise InvalidInput(
            "requests_per_s",
            f"must be {MIN_REQUESTS_PER_S:g} .. {MAX_REQUESTS_PER_S:g} requests/s, got {requests_per_s:g}",
        )
    a = workload.arrivals
    if a.buckets is None:
        data: dict[str, Any] = {"requests_per_s": requests_per_s, "burstiness": a.burstiness}
    else:
        f = requests_per_s / a.mean_requests_per_s
        if a.peak_requests_per_s * f > MAX_REQUESTS_PER_S:
            raise InvalidInput(
                "requests_per_s",
                f"{requests_per_s:g}/s on average puts the busiest bucket at "
                f"{a.peak_requests_per_s * f:.4g}/s, above the {MAX_REQUESTS_PER_S:g} limit",
            )
        data = {
            "buckets": [
                {"duration_s": b.duration_s, "requests_per_s": b.requests_per_s * f} for b in a.buckets
            ],
            "burstiness": a.burstiness,
        }
    arrivals = validate(Arrivals, data, "requests_per_s")
    return workload.model_copy(update={"arrivals": arrivals})


def workload_stream(
    workload: Workload, seed: int, count: int | None = None, horizon_s: float | None = None
) -> RequestStream:
    """`workload_requests` lazily (`Workload.request_chunks`): the same requests."""
    return RequestStream(
        RequestArrays(c.arrival_s, c.prompt_tokens, c.output_tokens)
        for c in workload.request_chunks(seed, count=count, horizon_s=horizon_s)
    )


def workload_requests(
    workload: Workload, seed: int, count: int | None = None, horizon_s: float | None = None
) -> RequestArrays:
    """Requests sampled from the workload (`Workload.sample_requests`), deterministic for the
    seed."""
    s = workload.sample_requests(seed, count=count, horizon_s=horizon_s)
    return RequestArrays(s.arrival_s, s.prompt_tokens, s.output_tokens)
