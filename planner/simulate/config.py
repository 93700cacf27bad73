"""Engine configuration and SLOs for the simulator (small frozen dataclasses)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from planner.errors import InvalidInput


@dataclass(frozen=True)
class EngineConfig:
    """The vLLM V1 scheduler knobs one simulated engine (replica) runs with.

    `max_num_batched_tokens` is the V1 token budget: it covers the decodes too (a step's chunk
    is what the running requests leave of it). `long_prefill_token_threshold` caps any one
    request's tokens per step (0 = off, as in vLLM). `kv_cache_blocks` is the number of KV
    blocks of `block_size` tokens the replica holds. `prefix_cache_hit_fraction` h: a request
    admitted with nothing computed finds its first floor(h * prompt) tokens already cached
    (at most prompt - 1: vLLM always computes the last prompt token to get logits)."""

    kv_cache_blocks: int
    max_num_seqs: int = 1024  # vLLM's online-serving defaults on >= 70 GiB GPUs (not A100)
    max_num_batched_tokens: int = 8192
    long_prefill_token_threshold: int = 0
    block_size: int = 16
    prefix_cache_hit_fraction: float = 0.0

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
        h = self.prefix_cache_hit_fraction
        if not (math.isfinite(h) and 0.0 <= h <= 1.0):
            raise InvalidInput("prefix_cache_hit_fraction", f"must be in [0, 1], got {h}")

    @property
    def kv_cache_tokens(self) -> int:
        return self.kv_cache_blocks * self.block_size

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class SLO:
    """Per-request latency objectives, judged like `vllm bench serve --goodput`: a request is
    good when every given objective holds (value <= objective). TPOT of a one-token answer is
    0, as there. None = not judged."""

    ttft_s: float | None = None
    tpot_s: float | None = None
    e2el_s: float | None = None

    def __post_init__(self) -> None:
        for name in ("ttft_s", "tpot_s", "e2el_s"):
            v = getattr(self, name)
            if v is not None and not (math.isfinite(v) and v > 0):
                raise InvalidInput(f"slo.{name}", f"must be a positive number of seconds, got {v}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
