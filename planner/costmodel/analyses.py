"""The seed article's analyses, for any model, GPU, TP, dtype and profile.

Each function returns plain dicts whose keys are the public JSON contract of `capplan analyze`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal, Protocol

from planner.costmodel.memory import kv_capacity
from planner.costmodel.roofline import Replica, chunks
from planner.vllm_defaults import GPU_MEMORY_UTILIZATION

HOURS_PER_MONTH = 730.0  # 8,760 h / 12, the seed's month


class _Lengths(Protocol):
    def mean(self) -> float: ...
    def expected_max(self, n: int) -> float: ...


def usd_per_million(usd_per_hour: float, tokens_per_s: float) -> float:
    """USD per 1M tokens = hourly price / (tokens/s x 3600) x 1e6."""
    return usd_per_hour / (tokens_per_s * 3600.0) * 1e6


def concurrency_sweep(
    replica: Replica,
    context_tokens: int,
    concurrencies: Sequence[int],
    usd_per_gpu_hour: float,
    gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION,
) -> dict[str, Any]:
    """Decode steady state at n concurrent sequences of mean context c (continuous batching)."""
    cap = kv_capacity(replica, gpu_memory_utilization)
    limit = cap.max_concurrency(context_tokens)
    rows = []
    for n in concurrencies:
        step = replica.decode_step(n, context_tokens)
        gpu_tps = n / step.time_s
        rows.append(
            {
                "concurrency": n,
                "step_ms": step.time_s * 1e3,
                "user_tokens_per_s": 1.0 / step.time_s,
                "gpu_tokens_per_s": gpu_tps,
                "usd_per_million_output_tokens": usd_per_million(usd_per_gpu_hour * replica.gpus, gpu_tps),
                "bound": step.bound,
                "fits_in_memory": n <= limit,
            }
        )
    return {
        "kv_max_concurrency": limit,
        "compute_knee_tokens_per_step": replica.compute_knee_tokens,
        "rows": rows,
    }


def static_batching(
    replica: Replica,
    context_tokens: int,
    batches: Sequence[int],
    output_lengths: _Lengths,
    usd_per_gpu_hour: float,
) -> dict[str, Any]:
    """Static batching (transformers generate()): a batch finishes with its longest answer, so a
    slot is busy mean/E[longest] of the time; finished slots still pay the full step."""
    mean = output_lengths.mean()
    rows = []
    for b in batches:
        longest = output_lengths.expected_max(b)
        util = mean / longest
        step = replica.decode_step(b, context_tokens)
        continuous = usd_per_million(usd_per_gpu_hour * replica.gpus, b / step.time_s)
        rows.append(
            {
                "batch": b,
                "expected_longest_tokens": longest,
                "slot_utilization": util,
                "usd_per_million_output_tokens": continuous / util,
                "continuous_usd_per_million_output_tokens": continuous,
            }
        )
    return {"mean_output_tokens": mean, "rows": rows}


Reading = Literal["chunk", "budget"]


def chunked_prefill(
    replica: Replica,
    prompt_tokens: int,
    decodes: int,
    context_tokens: int,
    sizes: Sequence[int | None],
    reading: Reading = "chunk",
) -> dict[str, Any]:
    """A long prompt arrives while `decodes` sequences are decoding. Each step carries one chunk
    of the prompt and every decode. `reading`: "chunk" = each size is the prompt's chunk and
    the decodes ride on top (the seed article's reading); "budget" = each size is vLLM V1's
    max_num_batched_tokens, which covers the decodes too (chunk = budget - decodes).
    None = no chunking: the whole prompt in one step."""
    rows = []
    for size in sizes:
        if size is None:
            chunk = None
        elif reading == "budget":
            chunk = size - decodes
        else:
            chunk = size
        steps = chunks(prompt_tokens, chunk)
        times = [replica.step_time_s([c], decodes, decodes * context_tokens) for c in steps]
        effective_chunk = prompt_tokens if chunk is None else min(chunk, prompt_tokens)
        rows.append(
            {
                "chunk_tokens": chunk,
                "steps": len(steps),
                "prompt_prefill_ms": sum(times) * 1e3,
                "worst_itl_ms": max(times) * 1e3,
                "max_num_batched_tokens": effective_chunk + decodes,
            }
        )
    return {"reading": reading, "rows": rows}


def prefill(replica: Replica, prompt_tokens: int, usd_per_gpu_hour: float) -> dict[str, Any]:
    """Prefill alone, the prompt in one step: compute-bound, priced per input token."""
    step = replica.breakdown([(prompt_tokens, 0)], 0, 0)
    tps = prompt_tokens / step.time_s
    return {
        "prompt_ms": step.time_s * 1e3,
        "tokens_per_s": tps,
        "usd_per_million_input_tokens": usd_per_million(usd_per_gpu_hour * replica.gpus, tps),
        "bound": step.bound,
    }


def utilization(
    replica: Replica,
    context_tokens: int,
    output_tokens_per_day: float,
    usd_per_gpu_hour: float,
    floor_concurrency: int = 64,
) -> dict[str, Any]:
    """Idle capacity: GPUs are billed by the hour whether busy or not, so cost per token at a
    given volume is monthly GPU cost / monthly tokens. The floor is the same GPUs kept busy at
    `floor_concurrency` (the seed's 64: where KV reads start to rival weight reads)."""
    step = replica.decode_step(floor_concurrency, context_tokens)
    floor_tps = floor_concurrency / step.time_s
    floor = usd_per_million(usd_per_gpu_hour * replica.gpus, floor_tps)
    needed_tps = output_tokens_per_day / 86400.0
    replicas = max(1, math.ceil(needed_tps / floor_tps))
    usd_month = usd_per_gpu_hour * replica.gpus * replicas * HOURS_PER_MONTH
    tokens_month = output_tokens_per_day * HOURS_PER_MONTH / 24.0
    usd_per_m = usd_month / (tokens_month / 1e6)
    return {
        "replicas": replicas,
        "usd_per_month": usd_month,
        "output_tokens_per_month": tokens_month,
        "usd_per_million_output_tokens": usd_per_m,
        "floor_usd_per_million_output_tokens": floor,
        "times_floor": usd_per_m / floor,
        "gpu_busy_fraction": needed_tps / (floor_tps * replicas),
    }


def kv_report(
    replica: Replica,
    context_tokens: int,
    gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION,
    max_num_batched_tokens: int | None = None,
    max_num_seqs: int | None = None,
) -> dict[str, Any]:
    cap = kv_capacity(replica, gpu_memory_utilization, max_num_batched_tokens, max_num_seqs)
    return {
        "kv_bytes_per_token": cap.kv_bytes_per_token,
        "kv_cache_tokens": cap.kv_cache_tokens,
        "kv_cache_bytes": cap.kv_cache_bytes,
        "max_concurrency": cap.max_concurrency(context_tokens),
        "weight_bytes": cap.weight_bytes,
        "activation_reserve_bytes": cap.activation_bytes,
    }
