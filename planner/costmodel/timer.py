"""The step-time interface the latency model and the simulator consume.

A batch is described by what the roofline needs and nothing else: the prefill chunks it carries
(each as chunk tokens and the tokens of that prompt already computed), and the decodes (how many,
and the sum of their context lengths). Keeping it this small lets the simulator fast-forward runs
of decode-only steps in closed form.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class StepTimer(Protocol):
    def step_time_s(
        self,
        prefill_chunks: Sequence[tuple[int, int]],
        decode_count: int,
        decode_context_tokens_sum: int,
    ) -> float:
        """Wall time of one engine step. prefill_chunks: (chunk_tokens, offset_tokens) pairs."""
        ...

    def decode_run_time_s(self, decode_count: int, decode_context_tokens_sum: int, steps: int) -> float:
        """Total time of `steps` consecutive decode-only steps of the same `decode_count`
        sequences, the first at `decode_context_tokens_sum`, each later one at `decode_count`
        more context tokens (every sequence grew by one). Closed form, O(1)."""
        ...
