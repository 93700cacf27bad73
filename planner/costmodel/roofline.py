"""Roofline step times for one replica (a tensor-parallel group of `tp` GPUs).

A step moves bytes (weights, KV of every context token touched) and does FLOPs (linear layers,
attention); it takes the longer of the two, plus all-reduces under tensor parallelism and the
profile's fixed per-step overhead. Formulas: ../shared/DESIGN.md, "The roofline cost model".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from planner.catalog.gpus import GpuSpec
from planner.catalog.models import DTYPE_BYTES, Dtype, ModelSpec
from planner.costmodel.profile import THEORETICAL, Profile

ACTIVATION_BYTES = 2  # bf16 activations in the all-reduce


@dataclass(frozen=True)
class StepBreakdown:
    """What one step costs, before it becomes a time. Per GPU of the TP group."""

    bytes_moved: float
    linear_flops: float
    attention_flops: float
    comm_s: float
    memory_s: float
    compute_s: float
    overhead_s: float
    # Calibrated profiles only (0 in theoretical mode): extra passes over prefill chunks' prefix
    # KV, at the achieved bandwidth and not overlapped with compute (Profile.prefix_kv_passes).
    prefix_reread_s: float = 0.0

    @property
    def time_s(self) -> float:
        return max(self.memory_s, self.compute_s) + self.comm_s + self.overhead_s + self.prefix_reread_s

    @property
    def bound(self) -> str:
        return "memory" if self.memory_s >= self.compute_s else "compute"


@dataclass(frozen=True)
class Replica:
    """Model x GPU x TP x dtypes x profile: the unit the cost model times. Implements StepTimer."""

    model: ModelSpec
    gpu: GpuSpec
    tp: int = 1
    weight_dtype: Dtype = "bf16"
    kv_dtype: Dtype = "bf16"
    profile: Profile = THEORETICAL

    # --- per-GPU constants ------------------------------------------------------------------
    @cached_property
    def kv_bytes_per_token(self) -> int:
        return self.model.kv_bytes_per_token(self.kv_dtype, self.tp)

    @cached_property
    def weight_bytes_per_gpu(self) -> float:
        return self.model.weight_bytes(self.weight_dtype) / self.tp

    @cached_property
    def _bw(self) -> float:
        return self.gpu.bandwidth * self.profile.eta_bandwidth

    @cached_property
    def _matmul_rate(self) -> float:
        return self.gpu.matmul_flops(self.weight_dtype) * self.profile.eta_matmul

    @cached_property
    def _attention_rate(self) -> float:
        # Attention runs in bf16 (fp8 KV is dequantized in the kernel).
        return self.gpu.matmul_flops("bf16") * self.profile.eta_attention

    @cached_property
    def _attn_flops_per_ctx_token(self) -> float:
        """4 * L * d_q per (query token x context token): QK^T and PV, split over TP."""
        return 4.0 * self.model.layers * self.model.query_dim / self.tp

    @property
    def gpus(self) -> int:
        return self.tp

    @property
    def usd_per_hour(self) -> float:
        return self.gpu.price * self.tp

    def weight_bytes_read(self, tokens: float) -> float:
        """Per GPU. Dense: all weights. MoE: dense part + the experts this many tokens touch."""
        if not self.model.is_moe:
            return self.weight_bytes_per_gpu
        return self.model.params_read(tokens) * DTYPE_BYTES[self.weight_dtype] / self.tp

    def allreduce_s(self, tokens: float) -> float:
        """Two ring all-reduces per layer of tokens x hidden activations: 2(t-1)/t of the data
        crosses each GPU's link, plus a latency floor per call."""
        if self.tp == 1 or tokens <= 0:
            return 0.0
        t = self.tp
        per_call = (2 * (t - 1) / t) * tokens * self.model.hidden_size * ACTIVATION_BYTES
        per_call_s = per_call / self.gpu.interconnect_bandwidth + self.gpu.interconnect_latency
        return 2 * self.model.layers * per_call_s

    # --- steps ------------------------------------------------------------------------------
    def breakdown(
        self,
        prefill_chunks: Sequence[tuple[int, int]],
        decode_count: int,
        decode_context_tokens_sum: float,
    ) -> StepBreakdown:
        """A mixed step: chunks of C tokens at offset p, plus n decodes over a total context S.
        FLOPs = 2 P_active (sum C + n) + 4 L d_q (sum C (p + C/2) + S)
        bytes = W_read + S KV + sum (p + C) KV.
        A calibrated profile may add prefix re-reads: passes x sum p x KV / achieved bandwidth."""
        chunk_tokens = 0.0
        chunk_attn = 0.0
        chunk_kv = 0.0
        prefix_tokens = 0.0
        for c, p in prefill_chunks:
            chunk_tokens += c
            chunk_attn += c * (p + c / 2.0)
            chunk_kv += p + c
            prefix_tokens += p
        tokens = chunk_tokens + decode_count
        if tokens <= 0:
            return StepBreakdown(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
        kv = self.kv_bytes_per_token
        bytes_moved = self.weight_bytes_read(tokens) + (decode_context_tokens_sum + chunk_kv) * kv
        linear = 2.0 * self.model.active_params * tokens / self.tp
        attention = self._attn_flops_per_ctx_token * (chunk_attn + decode_context_tokens_sum)
        return StepBreakdown(
            bytes_moved=bytes_moved,
            linear_flops=linear,
            attention_flops=attention,
            comm_s=self.allreduce_s(tokens),
            memory_s=bytes_moved / self._bw,
            compute_s=linear / self._matmul_rate + attention / self._attention_rate,
            overhead_s=self.profile.step_overhead_s,
            prefix_reread_s=self.profile.prefix_kv_passes * prefix_tokens * kv / self._bw,
        )

    def step_time_s(
        self,
        prefill_chunks: Sequence[tuple[int, int]],
        decode_count: int,
        decode_context_tokens_sum: float,
    ) -> float:
        return self.breakdown(prefill_chunks, decode_count, decode_context_tokens_sum).time_s

    def decode_step(self, concurrency: int, context_tokens: float) -> StepBreakdown:
        """n sequences at mean context c: the seed's decode table."""
        return self.breakdown((), concurrency, concurrency * context_tokens)

    def decode_run_time_s(self, decode_count: int, decode_context_tokens_sum: float, steps: int) -> float:
        """Sum of `steps` decode-only steps, context sum growing by `decode_count` each step.
        Memory and compute time are both affine in the context sum S, so the max of the two
        switches side at most once: split the arithmetic series there and sum each part.
        (Decode-only steps carry no prefill chunk, so no prefix re-read term.)"""
        if steps <= 0 or decode_count <= 0:
            return 0.0
        n = decode_count
        kv = self.kv_bytes_per_token
        a_mem = self.weight_bytes_read(n) / self._bw
        b_mem = kv / self._bw
        a_cmp = 2.0 * self.model.active_params * n / self.tp / self._matmul_rate
        b_cmp = self._attn_flops_per_ctx_token / self._attention_rate
        fixed = self.allreduce_s(n) + self.profile.step_overhead_s
        s0 = float(decode_context_tokens_sum)

        def series(a: float, b: float, j0: int, j1: int) -> float:
            """sum over j in [j0, j1) of a + b (s0 + j n)."""
            k = j1 - j0
            if k <= 0:
                return 0.0
            return k * (a + b * s0) + b * n * (j0 + j1 - 1) * k / 2.0

        mem, cmp = (a_mem, b_mem), (a_cmp, b_cmp)
        d0 = (a_cmp - a_mem) + (b_cmp - b_mem) * s0  # compute minus memory at step 0
        dj = (b_cmp - b_mem) * n  # ... and its change per step
        if dj == 0:
            return series(*(cmp if d0 >= 0 else mem), 0, steps) + steps * fixed
        split = min(steps, max(0, math.ceil(-d0 / dj)))  # first step past the crossing
        before, after = (mem, cmp) if dj > 0 else (cmp, mem)
        return series(*before, 0, split) + series(*after, split, steps) + steps * fixed

    def prefill_time_s(self, prompt_tokens: int, chunk_tokens: int | None = None) -> float:
        """A prompt prefilled alone, in one step or in chunks."""
        return sum(self.step_time_s([(c, p)], 0, 0) for c, p in chunks(prompt_tokens, chunk_tokens))

    @property
    def compute_knee_tokens(self) -> float:
        """Tokens per step at which matmul time catches up with reading the weights (F / BW for bf16)."""
        return (
            self._matmul_rate
            / self._bw
            * self.weight_bytes_per_gpu
            / (2.0 * self.model.active_params / self.tp)
        )


def chunks(prompt_tokens: int, chunk_tokens: int | None) -> list[tuple[int, int]]:
    """(chunk, offset) pairs a prompt is split into; None = one chunk."""
    if chunk_tokens is None or chunk_tokens >= prompt_tokens:
        return [(prompt_tokens, 0)]
    return [(min(chunk_tokens, prompt_tokens - p), p) for p in range(0, prompt_tokens, chunk_tokens)]
