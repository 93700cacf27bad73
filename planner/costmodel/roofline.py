"""Roofline step times for one replica (a tensor-parallel group of `tp` GPUs, or `pp` pipeline
stages of such groups: planner.costmodel.multinode).

`Replica` is the unit the cost model times. Its step-time coefficients are computed once
(`coefficients`) and every time it reports comes from the one formula in `steptime.py`; the
breakdown adds the parts a report explains a step by (memory- or compute-bound, all-reduce,
overhead). Formulas: ../shared/DESIGN.md, "The roofline cost model".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from planner.catalog.checkpoints import UnquantizedLayers, get_checkpoint, unquantized_layers
from planner.catalog.gpus import GpuSpec
from planner.catalog.models import Dtype, ModelSpec
from planner.catalog.quantization import DEFAULT_GROUP_SIZE, WeightDtype
from planner.costmodel.expert_parallel import ExpertParallel, expert_fraction_per_gpu
from planner.costmodel.lora import LoraConfig
from planner.costmodel.multinode import pipeline_coefficients, stage_fraction, stage_kv_bytes_per_token
from planner.costmodel.profile import THEORETICAL, Profile
from planner.costmodel.speculative import ProposerCost, SpeculativeConfig, proposer_cost
from planner.costmodel.steptime import (
    ACTIVATION_BYTES,
    StepCoefficients,
    batch_time_s,
    chunks_time_s,
    decode_run_time_s,
    step_coefficients,
    step_time_s,
)
from planner.costmodel.unquantized import extra_weight_bytes, unquantized_coefficients
from planner.errors import InvalidInput

__all__ = ["ACTIVATION_BYTES", "Bound", "Replica", "StepBreakdown", "chunks"]

Bound = Literal["memory", "compute"]  # what limits a step: bytes moved or FLOPs


@dataclass(frozen=True)
class StepBreakdown:
    """What one step costs and why, per GPU of the TP group. `time_s` is the formula's value
    (`steptime.batch_time_s`); the parts explain it: time = max(memory, compute) + comm +
    elementwise + overhead + prefix re-read."""

    bytes_moved: float
    linear_flops: float
    attention_flops: float
    comm_s: float
    memory_s: float
    compute_s: float
    overhead_s: float
    # Calibrated profiles only (0 in theoretical mode): extra passes over prefill chunks' prefix
    # KV, at the achieved bandwidth and not overlapped with compute (Profile.prefix_kv_passes,
    # Profile.prefix_query_kv_passes).
    prefix_reread_s: float
    time_s: float
    # Calibrated profiles only: the kernels between the GEMMs, per token (Profile.activation_passes).
    elementwise_s: float = 0.0

    @property
    def bound(self) -> Bound:
        return "memory" if self.memory_s >= self.compute_s else "compute"


@dataclass(frozen=True)
class Replica:
    """Model x GPU x TP x dtypes x profile: the unit the cost model times. Implements StepTimer."""

    model: ModelSpec
    gpu: GpuSpec
    tp: int = 1
    weight_dtype: WeightDtype = "bf16"
    kv_dtype: Dtype = "bf16"
    profile: Profile = THEORETICAL
    lora: LoraConfig | None = None  # vLLM --enable-lora (planner.costmodel.lora); None: off
    weight_group_size: int = DEFAULT_GROUP_SIZE  # AWQ/GPTQ checkpoints' quantization group
    # Pipeline stages (vLLM --pipeline-parallel-size): the replica is tp x pp GPUs and its "step"
    # is one pipeline cycle (planner.costmodel.multinode); 1 = no PP, exactly the TP-only step.
    pp: int = 1
    # vLLM --enable-expert-parallel (planner.costmodel.expert_parallel): this replica is then one
    # DP rank of `tp` GPUs; None: experts split over TP
    expert_parallel: ExpertParallel | None = None
    # vLLM --speculative-config (planner.costmodel.speculative; None: off) and, for method
    # draft, the draft model's shape
    speculative: SpeculativeConfig | None = None
    draft: ModelSpec | None = None
    # The pre-quantized checkpoint vLLM serves (a Hugging Face id): where the catalog lists its
    # unquantized modules (planner.catalog.checkpoints), those matrices count at bf16; None, or
    # a checkpoint the catalog does not list: every linear matrix in `weight_dtype`
    checkpoint: str | None = None

    @cached_property
    def unquantized(self) -> UnquantizedLayers | None:
        """The layers where the checkpoint keeps each linear matrix in bf16 (None: no catalog
        data for it). A listed checkpoint of another format than `weight_dtype` is refused."""
        c = get_checkpoint(self.checkpoint)
        if c is None:
            return None
        if c.weight_dtype != self.weight_dtype:
            raise InvalidInput(
                "weight_dtype", f"{c.name} is a {c.weight_dtype} checkpoint, not {self.weight_dtype}"
            )
        return unquantized_layers(c, self.model)

    @cached_property
    def coefficients(self) -> StepCoefficients:
        k = step_coefficients(
            self.model, self.gpu, self.profile, self.tp, self.weight_dtype, self.kv_dtype,
            weight_group_size=self.weight_group_size, lora=self.lora, ep=self.expert_parallel,
            speculative=self.speculative, draft=self.draft,
        )
        k = unquantized_coefficients(
            k, self.model, self.gpu, self.profile, self.tp, self.weight_dtype, self.weight_group_size,
            self.unquantized,
        )
        return pipeline_coefficients(k, self.model, self.gpu, self.tp, self.pp)

    @cached_property
    def proposer(self) -> ProposerCost | None:
        """The speculative proposer's per-pass cost and memory (None without speculative decoding)."""
        if self.speculative is None:
            return None
        return proposer_cost(self.model, self.speculative, self.tp, self.kv_dtype, self.draft)

    # --- per-GPU constants (the largest pipeline stage's GPU) --------------------------------
    @cached_property
    def kv_bytes_per_token(self) -> int:
        """The target's KV per token on one GPU of the largest stage, plus the proposer's layers'
        (speculative decoding: vLLM keeps the draft's KV in the same blocks)."""
        own = stage_kv_bytes_per_token(self.model, self.model.kv_bytes_per_token(self.kv_dtype, self.tp), self.pp)
        return own if self.proposer is None else own + round(self.proposer.kv_bytes_per_token)

    @cached_property
    def weight_bytes_per_gpu(self) -> float:
        ep, m = self.expert_parallel, self.model
        if ep is not None and m.is_moe:  # dense part over TP, whole experts over the EP group
            dense, experts, _ = m.weight_bytes_parts(self.weight_dtype, self.weight_group_size)
            w = dense / self.tp + experts * expert_fraction_per_gpu(m, ep.ep_size(self.tp))
        else:
            w = m.weight_bytes(self.weight_dtype, self.weight_group_size) / self.tp
        w = w if self.pp == 1 else w * stage_fraction(m, self.pp)
        return w + extra_weight_bytes(m, self.unquantized, self.tp, self.weight_dtype, self.weight_group_size, self.pp)

    @property
    def gpus(self) -> int:
        return self.tp * self.pp

    @property
    def usd_per_hour(self) -> float:
        return self.gpu.price * self.gpus

    def weight_bytes_read(self, tokens: float) -> float:
        """Per GPU. Dense: all weights. MoE: dense part + the experts this many tokens touch."""
        return self.coefficients.weight_bytes_read(tokens)

    def allreduce_s(self, tokens: float) -> float:
        """Two ring all-reduces per layer of `tokens` x hidden activations (0 at TP 1)."""
        k = self.coefficients
        return k.allreduce_s_per_token * tokens + k.allreduce_s if tokens > 0 else 0.0

    # --- steps ------------------------------------------------------------------------------
    def breakdown(
        self,
        prefill_chunks: Sequence[tuple[float, float]],
        decode_count: int,
        decode_context_tokens_sum: float,
    ) -> StepBreakdown:
        """A mixed step: chunks of C tokens at offset p, plus n decodes over a total context S,
        with its parts (see StepBreakdown)."""
        k = self.coefficients
        c_sum = pairs = kv = prefix = 0.0
        for c, p in prefill_chunks:
            c_sum += c
            pairs += c * (p + 0.5 * c)
            kv += p + c
            prefix += max(p, 0)
        s = decode_context_tokens_sum
        q = 1.0 + k.speculative_tokens  # speculative decoding: a decode's k + 1 query tokens (else 1)
        tokens = c_sum + decode_count * q
        if tokens <= 0:
            return StepBreakdown(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
        bytes_moved = k.weight_bytes_read(tokens) + (s + kv) * k.kv_bytes_per_token
        rate = k.linear_rate  # a measured kernel's rate at these tokens (steptime)
        kernel_s = 0.0 if rate is None else rate.excess_s(k.linear_s_per_token, k.linear_phantom_s, tokens)
        return StepBreakdown(
            bytes_moved=bytes_moved,
            linear_flops=k.linear_flops_per_token * tokens + k.sampled_flops_per_decode * decode_count * q,
            attention_flops=k.attention_flops_per_pair * (pairs + s * q),
            comm_s=k.allreduce_s_per_token * tokens + k.allreduce_s,
            # the decodes' KV at the bandwidth their attention parallelism reaches (steptime)
            memory_s=(bytes_moved + s * (k.decode_kv_factor(decode_count) - 1.0) * k.kv_bytes_per_token)
            * k.s_per_byte,
            # small GEMMs' phantom tokens and the sampled rows' logits (calibrated profiles; steptime)
            compute_s=k.linear_s_per_token * tokens
            + k.attention_s_per_pair * (pairs + s * q)
            + (k.linear_phantom_s + k.sampled_s_per_decode * decode_count * q)
            + kernel_s,
            # the fixed per-step cost and the per-decode one (Profile.sequence_overhead_s)
            overhead_s=k.overhead_s + k.sequence_s * decode_count,
            prefix_reread_s=k.prefix_reread_s_per_token * prefix,
            time_s=batch_time_s(k, decode_count, s, c_sum, pairs, kv, prefix),
            elementwise_s=k.elementwise_s_per_token * tokens,
        )

    def step_time_s(
        self,
        prefill_chunks: Sequence[tuple[float, float]],
        decode_count: int,
        decode_context_tokens_sum: float,
    ) -> float:
        return chunks_time_s(self.coefficients, prefill_chunks, decode_count, decode_context_tokens_sum)

    def decode_step(self, concurrency: int, context_tokens: float) -> StepBreakdown:
        """n sequences at mean context c: the seed's decode table."""
        return self.breakdown((), concurrency, concurrency * context_tokens)

    def decode_run_time_s(self, decode_count: int, decode_context_tokens_sum: float, steps: int) -> float:
        """Sum of `steps` decode-only steps, context sum growing by `decode_count` each step
        (closed form: steptime.decode_run_time_s)."""
        return decode_run_time_s(self.coefficients, decode_count, decode_context_tokens_sum, steps)

    def prefill_time_s(self, prompt_tokens: int, chunk_tokens: int | None = None) -> float:
        """A prompt prefilled alone, in one step or in chunks."""
        k = self.coefficients
        return sum(step_time_s(k, c, p, 0, 0.0) for c, p in chunks(prompt_tokens, chunk_tokens))

    @property
    def compute_knee_tokens(self) -> float:
        """Tokens per step at which matmul time catches up with reading the weights (F / BW for bf16)."""
        k = self.coefficients
        return self.weight_bytes_per_gpu * k.s_per_byte / k.linear_s_per_token


def chunks(prompt_tokens: int, chunk_tokens: int | None) -> list[tuple[int, int]]:
    """(chunk, offset) pairs a prompt is split into; None = one chunk."""
    if chunk_tokens is None or chunk_tokens >= prompt_tokens:
        return [(prompt_tokens, 0)]
    return [(min(chunk_tokens, prompt_tokens - p), p) for p in range(0, prompt_tokens, chunk_tokens)]
