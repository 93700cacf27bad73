"""GPU memory: what is left for the KV cache, and how many sequences it holds.

vLLM sizes its KV cache as gpu_memory_utilization x memory, minus the weights, minus the peak
activation memory of a profiling forward pass at max_num_batched_tokens, minus non-torch memory
(CUDA context, NCCL buffers, CUDA graphs). The activation estimate below is a documented
approximation of that profile run, not a measurement.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.costmodel.roofline import Replica
from planner.vllm_defaults import (
    BLOCK_SIZE_TOKENS,
    GPU_MEMORY_UTILIZATION,
    default_max_num_batched_tokens,
    default_max_num_seqs,
)

NON_TORCH_BYTES = 1.5 * 2**30  # CUDA context + NCCL + CUDA graphs, per GPU (typical vLLM log figure)


def activation_peak_bytes(replica: Replica, max_num_batched_tokens: int, max_num_seqs: int) -> float:
    """Per GPU: the widest per-token intermediates of one layer (gate+up MLP output, plus
    attention q/k/v and the residual) for a full token budget in bf16, plus fp32 logits for
    max_num_seqs sampled rows. vLLM reuses buffers layer to layer, so one layer's worth counts."""
    m = replica.model
    mlp_width = m.intermediate_size * (m.experts_per_token if m.is_moe else 1)
    per_token = (2 * mlp_width + m.query_dim + 2 * m.kv_heads * m.head_dim + 2 * m.hidden_size) / replica.tp
    logits = min(max_num_seqs, max_num_batched_tokens) * m.vocab_size * 4 / replica.tp
    return max_num_batched_tokens * per_token * 2 + logits


@dataclass(frozen=True)
class KvCapacity:
    kv_bytes_per_token: int
    kv_cache_bytes: float
    kv_cache_blocks: int
    weight_bytes: float
    activation_bytes: float

    @property
    def kv_cache_tokens(self) -> int:
        return self.kv_cache_blocks * BLOCK_SIZE_TOKENS

    def max_concurrency(self, context_tokens: int) -> int:
        """Sequences of `context_tokens` that fit at once (whole blocks per sequence)."""
        return self.kv_cache_blocks // math.ceil(context_tokens / BLOCK_SIZE_TOKENS)


def kv_capacity(
    replica: Replica,
    gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION,
    max_num_batched_tokens: int | None = None,
    max_num_seqs: int | None = None,
) -> KvCapacity:
    """KV capacity of one replica, counted per GPU (each GPU holds its share of every token).
    Unset scheduler limits take vLLM's defaults for the GPU."""
    g = replica.gpu
    budget = max_num_batched_tokens or default_max_num_batched_tokens(g.memory, g.name)
    seqs = max_num_seqs or default_max_num_seqs(g.memory, g.name)
    act = activation_peak_bytes(replica, budget, seqs) + NON_TORCH_BYTES
    free = replica.gpu.memory * gpu_memory_utilization - replica.weight_bytes_per_gpu - act
    per_block = replica.kv_bytes_per_token * BLOCK_SIZE_TOKENS
    blocks = max(0, int(free // per_block))
    return KvCapacity(
        kv_bytes_per_token=replica.kv_bytes_per_token,
        kv_cache_bytes=max(0.0, free),
        kv_cache_blocks=blocks,
        weight_bytes=replica.weight_bytes_per_gpu,
        activation_bytes=act,
    )
