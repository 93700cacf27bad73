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
from collections.abc import Callable

import numpy as np

from planner.costmodel.timer import StepTimer
from planner.errors import InvalidInput
from planner.simulate.config import SLO, EngineConfig
from planner.simulate.engine import (
    arrival_order,
    build_result,
    check_fits,
    replica_stats,
    run_pool,
)
from planner.simulate.metrics import MinuteAccumulator, SimResult
from planner.simulate.requests import RequestsLike, as_request_arrays
from planner.simulate.router import Router, make_router
from planner.simulate.scheduler import Engine, RequestTable, StepTrace


def transfer_s_per_token(kv_bytes_per_token: float, link_bytes_per_s: float) -> float:
    """Seconds to move one token's KV over the link."""
    if not link_bytes_per_s > 0:
        raise InvalidInput("link_bytes_per_s", f"must be > 0, got {link_bytes_per_s}")
    if not kv_bytes_per_token >= 0:
        raise InvalidInput("kv_bytes_per_token", f"must be >= 0, got {kv_bytes_per_token}")
    return kv_bytes_per_token / link_bytes_per_s


def simulate_disaggregated(
    requests: RequestsLike,
    prefill_timer: StepTimer,
    decode_timer: StepTimer,
    prefill_config: EngineConfig,
    decode_config: EngineConfig,
    *,
    prefill_replicas: int = 1,
    decode_replicas: int = 1,
    kv_transfer: float | Callable[[int], float] = 0.0,
    prefill_router: str | Router = "round_robin",
    decode_router: str | Router = "round_robin",
    slo: SLO | None = None,
    fast_forward: bool = True,
    step_trace: list[StepTrace] | None = None,
) -> SimResult:
    """Simulate a prefill pool and a decode pool (see the module docstring). StepTrace replica
    numbers: prefill replicas 0..P-1, decode replicas P..P+D-1."""
    for name, v in (("prefill_replicas", prefill_replicas), ("decode_replicas", decode_replicas)):
        if v < 1:
            raise InvalidInput(name, f"must be >= 1, got {v}")
    if not callable(kv_transfer) and not (math.isfinite(kv_transfer) and kv_transfer >= 0):
        raise InvalidInput("kv_transfer", f"must be >= 0 seconds per token, got {kv_transfer}")
    reqs = as_request_arrays(requests)
    n = len(reqs)
    prompt = [int(x) for x in reqs.prompt_tokens]
    target = [int(x) for x in reqs.output_tokens]
    check_fits(prompt, prompt, prefill_config, "requests")
    check_fits(prompt, [p + o - 1 for p, o in zip(prompt, target, strict=True)], decode_config, "requests")

    # Prefill pool.
    order = arrival_order(reqs.arrival_s)
    times = [float(reqs.arrival_s[i]) for i in order]
    origin = times[0] if times else 0.0
    p_table = RequestTable(prompt, [1] * n)
    p_accs = [MinuteAccumulator(origin) for _ in range(prefill_replicas)]
    p_engines = [
        Engine(prefill_config, prefill_timer, p_table, p_accs[i], fast_forward, i, step_trace)
        for i in range(prefill_replicas)
    ]
    for a in times:
        p_accs[0].arrivals[p_accs[0].bin(a)] += 1
    run_pool(p_engines, make_router(prefill_router, "prefill_router"), order, times)
    # A prefill replica's completion is the end of the prompt, not of the request.
    for acc in p_accs:
        acc.completions = [0] * len(acc.completions)

    # Hand-off.
    prefilled = np.asarray(p_table.finish, dtype=np.float64)
    if callable(kv_transfer):
        xfer = np.asarray([float(kv_transfer(p)) for p in prompt], dtype=np.float64)
        if n and not (np.all(np.isfinite(xfer)) and float(xfer.min()) >= 0.0):
            raise InvalidInput("kv_transfer", "the callable must return finite seconds >= 0")
    else:
        xfer = np.asarray(prompt, dtype=np.float64) * float(kv_transfer)
    handoff = prefilled + xfer
    first = handoff.copy()
    finish = np.full(n, math.nan)
    one = reqs.output_tokens <= 1
    finish[one] = handoff[one]

    # Decode pool.
    d_table = RequestTable(prompt, target)
    for i in range(n):
        d_table.comp[i] = prompt[i]
        d_table.out[i] = 1
        d_table.last_emit[i] = float(handoff[i])
        d_table.first_token[i] = float(handoff[i])
    d_order = [i for i in arrival_order(handoff) if not one[i]]
    d_times = [float(handoff[i]) for i in d_order]
    d_accs = [MinuteAccumulator(origin) for _ in range(decode_replicas)]
    d_engines = [
        Engine(
            decode_config, decode_timer, d_table, d_accs[i], fast_forward, prefill_replicas + i, step_trace
        )
        for i in range(decode_replicas)
    ]
    run_pool(d_engines, make_router(decode_router, "decode_router"), d_order, d_times)
    decoded = np.asarray(d_table.finish, dtype=np.float64)
    finish[~one] = decoded[~one]
    if one.any():
        for t_one in finish[one]:
            d_accs[0].completions[d_accs[0].bin(float(t_one))] += 1

    end = float(np.nanmax(finish)) - origin if n else 0.0
    stats = replica_stats("prefill", p_engines, end) + replica_stats("decode", d_engines, end)
    return build_result(
        "disaggregated", reqs, first, finish, p_engines + d_engines, stats, p_accs + d_accs, origin, slo
    )
