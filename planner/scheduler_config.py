"""The vLLM V1 scheduler knobs and KV pool one engine (replica) runs with: the one configuration
the latency model and the simulator both read, built once per deployment by
`Deployment.resolve` (`ResolvedDeployment.scheduler`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict, dataclass
from typing import Any

from planner.errors import InvalidInput
from planner.vllm_defaults import BLOCK_SIZE_TOKENS, LARGE_GPU_MAX_NUM_BATCHED_TOKENS, LARGE_GPU_MAX_NUM_SEQS


@dataclass(frozen=True)
class SchedulerConfig:
    """`max_num_batched_tokens` is the V1 token budget: it covers the decodes too (a step's chunk
    is what the running requests leave of it). `long_prefill_token_threshold` caps any one
    request's tokens per step (0 = off, as in vLLM). `kv_cache_blocks` is the number of KV
    blocks of `block_size` tokens the replica holds. `prefix_cache_hit_fraction` h (a property
    of the workload, 0 as built from a deployment; `with_prefix_cache_hits`): a request admitted
    with nothing computed finds its first floor(h * prompt) tokens already cached (at most
    prompt - 1: vLLM always computes the last prompt token to get logits). `max_model_len`:
    a request's prompt and output together (vLLM's default, the model's context, as
    `Deployment.resolve` sets it; 0 = no limit): a prompt must leave room for one output token
    and generation stops there. Unset knobs default to vLLM's online-serving values on >= 70 GiB
    GPUs (planner.vllm_defaults)."""

    kv_cache_blocks: int
    max_num_seqs: int = LARGE_GPU_MAX_NUM_SEQS
    max_num_batched_tokens: int = LARGE_GPU_MAX_NUM_BATCHED_TOKENS
    long_prefill_token_threshold: int = 0
    block_size: int = BLOCK_SIZE_TOKENS
    prefix_cache_hit_fraction: float = 0.0
    max_model_len: int = 0

    def __post_init__(self) -> None:
        if self.kv_cache_blocks < 1:
            raise InvalidInput("kv_cache_blocks", f"must be >= 1, got {self.kv_cache_blocks}")
        if self.max_num_seqs < 1:
            raise InvalidInput("max_num_seqs", f"must be >= 1, got {self.max_num_seqs}")
        if self.max_num_batched_tokens < self.max_num_seqs:
            # vLLM refuses this too: every running decode must fit in one step's budget.
            raise InvalidInput(
                "max_num_batched_tokens",
                f"must be >= max_num_seqs ({self.max_num_seqs}), got {self.max_num_batched_tokens}",
            )
        if self.long_prefill_token_threshold < 0:
            raise InvalidInput(
                "long_prefill_token_threshold",
                f"must be >= 0 (0 = off), got {self.long_prefill_token_threshold}",
            )
        if self.block_size < 1:
            raise InvalidInput("block_size", f"must be >= 1, got {self.block_size}")
        if self.max_model_len < 0:
            raise InvalidInput("max_model_len", f"must be >= 0 (0 = no limit), got {self.max_model_len}")
        h = self.prefix_cache_hit_fraction
        if not (math.isfinite(h) and 0.0 <= h <= 1.0):
            raise InvalidInput("prefix_cache_hit_fraction", f"must be in [0, 1], got {h}")

    @property
    def kv_cache_tokens(self) -> int:
        return self.kv_cache_blocks * self.block_size

    def with_prefix_cache_hits(self, fraction: float) -> SchedulerConfig:
        """The same engine serving a workload whose prompts hit the prefix cache this much."""
        return dataclasses.replace(self, prefix_cache_hit_fraction=fraction)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
