"""Disaggregated prefill/decode: a prefill pool, a KV transfer, a decode pool.

Each request is routed to a prefill replica, where the V1 scheduler prefills it as a request
with one output token (no decodes ever run there; prompts share steps and the budget like any
prefill). The step that completes the prompt produces its first token. Its KV then travels to a
decode replica: `kv_transfer` seconds per prompt token (a number: kv_bytes_per_token /
link_bytes_per_s), or a callable of the prompt length giving seconds. On arrival there it waits
in the decode replica's queue like any request, with its prompt already computed: admission
allocates blocks for the prompt plus the next token (head-of-line blocking and `max_num_seqs`
apply), and it decodes the rest of its output. A preempted request recomputes locally.

The first token reaches the client with the KV hand-off (as through vLLM's disaggregation proxy,
whose decode replica streams the answer): first-token time = prefill completion + transfer, so
TTFT includes the transfer. A one-token answer finishes then.

The prefill pool never depends on the decode pool, so the pools are simulated one after the
other: the prefill pool on the arrivals, then the decode pool on the hand-off times.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from planner.costmodel.timer import StepTimer
from planner.errors import InvalidInput
from planner.scheduler_config import SchedulerConfig
from planner.simulate.metrics import FloatArray, IntArray, MinuteAccumulator, MinuteTotals, SimResult
from planner.simulate.replica_pool import (
    Feed,
    build_result,
    check_fits,
    ordered_chunks,
    replica_stats,
    run_pool,
    times_of,
)
from planner.simulate.requests import RequestsLike, RequestStream, as_request_arrays, within_context
from planner.simulate.router import Router, make_router
from planner.simulate.scheduler import EventBudget, RequestTable, SimulatedEngine, StepTrace
from planner.slo import Slo


def transfer_s_per_token(kv_bytes_per_token: float, link_bytes_per_s: float) -> float:
    """Seconds to move one token's KV over the link."""
    if not link_bytes_per_s > 0:
        raise InvalidInput("link_bytes_per_s", f"must be > 0, got {link_bytes_per_s}")
    if not kv_bytes_per_token >= 0:
        raise InvalidInput("kv_bytes_per_token", f"must be >= 0, got {kv_bytes_per_token}")
    return kv_bytes_per_token / link_bytes_per_s


@dataclass(frozen=True)
class PoolPart:
    """Replicas of one configuration in a pool: a pool may hold several (two GPU types, say),
    routed by an `Assigned` router (planner/simulate/router.py)."""

    timer: StepTimer
    config: SchedulerConfig
    replicas: int


def simulate_disaggregated(
    requests: RequestsLike | RequestStream,
    prefill_timer: StepTimer,
    decode_timer: StepTimer,
    prefill_config: SchedulerConfig,
    decode_config: SchedulerConfig,
    *,
    prefill_replicas: int = 1,
    decode_replicas: int = 1,
    kv_transfer: float | Callable[[int], float] = 0.0,
    prefill_router: str | Router = "round_robin",
    decode_router: str | Router = "round_robin",
    slo: Slo | None = None,
    fast_forward: bool = True,
    step_trace: list[StepTrace] | None = None,
    request_overhead_s: float = 0.0,
) -> SimResult:
    """Simulate a prefill pool and a decode pool (see the module docstring). StepTrace replica
    numbers: prefill replicas 0..P-1, decode replicas P..P+D-1. `request_overhead_s`: the front
    end's constant added to every TTFT and end-to-end latency."""
    for name, v in (("prefill_replicas", prefill_replicas), ("decode_replicas", decode_replicas)):
        if v < 1:
            raise InvalidInput(name, f"must be >= 1, got {v}")
    return simulate_pools(
        requests,
        [PoolPart(prefill_timer, prefill_config, prefill_replicas)],
        [PoolPart(decode_timer, decode_config, decode_replicas)],
        kv_transfer=kv_transfer,
        prefill_router=prefill_router,
        decode_router=decode_router,
        slo=slo,
        fast_forward=fast_forward,
        step_trace=step_trace,
        request_overhead_s=request_overhead_s,
    )


def simulate_pools(
    requests: RequestsLike | RequestStream,
    prefill_pool: Sequence[PoolPart],
    decode_pool: Sequence[PoolPart],
    *,
    kv_transfer: float | Callable[[int], float] | FloatArray = 0.0,
    prefill_router: str | Router = "round_robin",
    decode_router: str | Router = "round_robin",
    slo: Slo | None = None,
    fast_forward: bool = True,
    step_trace: list[StepTrace] | None = None,
    request_overhead_s: float = 0.0,
) -> SimResult:
    """`simulate_disaggregated` with pools of one or more parts (engines: the parts' replicas
    in order). `kv_transfer` may also be an array: each request's hand-off seconds, by request
    id (where the transfer depends on the prefill part that served it)."""
    _check_pools(prefill_pool, decode_pool, kv_transfer)
    reqs = requests.collect() if isinstance(requests, RequestStream) else as_request_arrays(requests)
    # the decode pool's outputs too
    reqs, _ = within_context(reqs, min(p.config.max_model_len for p in decode_pool))
    n = len(reqs)
    prompt = reqs.prompt_tokens
    feed = Feed(reqs, prefill_pool[0].config, lambda p, o: p)
    for part in prefill_pool[1:]:
        check_fits(np.arange(n), prompt, part.config)
    for part in decode_pool:
        check_fits(np.arange(n), prompt + reqs.output_tokens - 1, part.config)
    origin = feed.origin_s
    budget = EventBudget()
    totals = MinuteTotals(origin)

    # Prefill pool. A prefill replica's completion is the end of the prompt, not of the request:
    # its completions are not counted.
    p_table = RequestTable(n)
    p_engines = _engines(prefill_pool, p_table, origin, fast_forward, 0, step_trace, budget)

    def prefill(rid: int, prompt: int, output: int, t: float) -> None:
        p_table.add(rid, prompt, 1)

    p_router = make_router(prefill_router, "prefill_router")
    run_pool(p_engines, p_router, feed.chunks(p_table.grow), prefill, totals, completions=False)

    # Hand-off.
    handoff = times_of(p_table.finish) + _transfer_s(kv_transfer, prompt)
    first = handoff.copy()
    finish = np.full(n, math.nan)
    one = reqs.output_tokens <= 1
    finish[one] = handoff[one]

    # Decode pool: requests arrive with their prompt computed and one token out.
    d_table = RequestTable(n)
    d_engines = _engines(decode_pool, d_table, origin, fast_forward, len(p_engines), step_trace, budget)

    def decode(rid: int, prompt: int, output: int, t: float) -> None:
        d_table.add(rid, prompt, output, prompt, 1, t)

    d_order = np.argsort(handoff, kind="stable")
    d_order = d_order[~one[d_order]]
    d_chunks = ordered_chunks(d_order, handoff, prompt, reqs.output_tokens)
    d_router = make_router(decode_router, "decode_router")
    run_pool(d_engines, d_router, d_chunks, decode, totals, count_arrivals=False)
    decoded = times_of(d_table.finish)
    finish[~one] = decoded[~one]
    for t_one in finish[one].tolist():
        totals.count("completions", t_one)

    end = float(np.nanmax(finish)) - origin if n else 0.0
    stats = replica_stats("prefill", p_engines, end) + replica_stats("decode", d_engines, end)
    return build_result(
        "disaggregated",
        reqs.arrival_s,
        reqs.output_tokens,
        first,
        finish,
        p_engines + d_engines,
        stats,
        totals,
        slo,
        request_overhead_s,
    )


def _check_pools(
    prefill_pool: Sequence[PoolPart],
    decode_pool: Sequence[PoolPart],
    kv_transfer: float | Callable[[int], float] | FloatArray,
) -> None:
    """Both pools hold a replica in every part; a fixed hand-off rate or array is finite, >= 0."""
    for name, parts in (("prefill_pool", prefill_pool), ("decode_pool", decode_pool)):
        if not parts or min(p.replicas for p in parts) < 1:
            raise InvalidInput(name, "every part needs at least one replica")
    if isinstance(kv_transfer, np.ndarray):
        if not (
            np.all(np.isfinite(kv_transfer)) and (kv_transfer.size == 0 or float(kv_transfer.min()) >= 0)
        ):
            raise InvalidInput("kv_transfer", "per-request seconds must be finite and >= 0")
    elif not callable(kv_transfer) and not (math.isfinite(kv_transfer) and kv_transfer >= 0):
        raise InvalidInput("kv_transfer", f"must be >= 0 seconds per token, got {kv_transfer}")


def _transfer_s(kv_transfer: float | Callable[[int], float] | FloatArray, prompt: IntArray) -> FloatArray:
    """Each request's KV hand-off seconds: given per request, by a callable of its prompt
    tokens, or seconds per prompt token."""
    n = len(prompt)
    if isinstance(kv_transfer, np.ndarray):
        if kv_transfer.shape != (n,):
            raise InvalidInput(
                "kv_transfer", f"give one hand-off time per request ({n}), got {kv_transfer.shape}"
            )
        return kv_transfer.astype(np.float64)
    if callable(kv_transfer):
        xfer = np.asarray([float(kv_transfer(p)) for p in prompt.tolist()], dtype=np.float64)
        if n and not (np.all(np.isfinite(xfer)) and float(xfer.min()) >= 0.0):
            raise InvalidInput("kv_transfer", "the callable must return finite seconds >= 0")
        return xfer
    return prompt.astype(np.float64) * float(kv_transfer)


def _engines(
    parts: Sequence[PoolPart],
    table: RequestTable,
    origin: float,
    fast_forward: bool,
    first: int,
    step_trace: list[StepTrace] | None,
    budget: EventBudget,
) -> list[SimulatedEngine]:
    """The pool's engines, the parts' replicas in order, numbered from `first`."""
    out: list[SimulatedEngine] = []
    for part in parts:
        for _ in range(part.replicas):
            out.append(
                SimulatedEngine(
                    part.config,
                    part.timer,
                    table,
                    MinuteAccumulator(origin),
                    fast_forward,
                    first + len(out),
                    step_trace,
                    budget,
                )
            )
    return out
