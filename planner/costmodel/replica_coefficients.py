"""A replica's step-time coefficients, computed once per (model, GPU, profile, TP, formats,
features): what planner/costmodel/steptime.py's one formula times batches from. The formula and
every term's meaning are documented there."""

from __future__ import annotations

import math

from planner.catalog.gpus import GpuSpec
from planner.catalog.models import DTYPE_BYTES, Dtype, ModelSpec
from planner.catalog.quantization import DEFAULT_GROUP_SIZE, WeightDtype, gemm_efficiency, marlin_rate_knots
from planner.costmodel.coefficients import GemmRateCurve, StepCoefficients
from planner.costmodel.ep_measured import EpMoeTerm, moe_term
from planner.costmodel.expert_parallel import (
    ExpertParallel,
    all_to_all_coefficients,
    expert_active_params,
    expert_fraction_per_gpu,
    untouched_ratio,
)
from planner.costmodel.lora import (
    LoraConfig,
    lora_logits_flops_per_row,
    lora_step_bytes,
    lora_step_flops_per_token,
)
from planner.costmodel.multinode import allreduce_link
from planner.costmodel.profile import Profile
from planner.costmodel.speculative import SpeculativeConfig, proposer_cost, speculative_coefficients

__all__ = [
    "ACTIVATION_BYTES",
    "decode_kv_full_decodes",
    "head_params",
    "kv_heads_per_gpu",
    "linear_layers_coefficients",
    "query_heads_per_kv_head",
    "step_coefficients",
]

ACTIVATION_BYTES = 2  # bf16 activations in the all-reduce


def head_params(model: ModelSpec) -> int:
    """Embedding, lm_head (one matrix if tied) and the final norm: what the layers leave out."""
    embed = model.vocab_size * model.hidden_size
    return embed * (1 if model.tie_word_embeddings else 2) + model.hidden_size


def kv_heads_per_gpu(model: ModelSpec, tp: int = 1) -> int:
    """KV heads one GPU of a TP group holds (split over the group, or replicated when fewer)."""
    return math.ceil(model.kv_heads / tp)


def query_heads_per_kv_head(model: ModelSpec, tp: int = 1) -> float:
    """G: query heads per KV head on one GPU (the GQA group; 1 for multi-head attention)."""
    return model.attention_heads / tp / kv_heads_per_gpu(model, tp)


def decode_kv_full_decodes(model: ModelSpec, gpu: GpuSpec, profile: Profile, tp: int = 1) -> float:
    """N0 = SMs x a / h: the decodes whose attention work items fill the GPU (0 when a = 0)."""
    a = profile.decode_attention_items_per_sm
    if a == 0.0:
        return 0.0
    return gpu.sms * a / kv_heads_per_gpu(model, tp)


def step_coefficients(
    model: ModelSpec,
    gpu: GpuSpec,
    profile: Profile,
    tp: int = 1,
    weight_dtype: WeightDtype = "bf16",
    kv_dtype: Dtype = "bf16",
    *,
    weight_group_size: int = DEFAULT_GROUP_SIZE,
    lora: LoraConfig | None = None,
    ep: ExpertParallel | None = None,
    speculative: SpeculativeConfig | None = None,
    draft: ModelSpec | None = None,
) -> StepCoefficients:
    """Coefficients of a whole step of `model` on `tp` x `gpu` under `profile`. Quantized weights
    shrink the bytes a step reads (`ModelSpec.weight_bytes_parts`: packed values, group scales,
    bf16 embeddings and norms) and set the GEMM rate (`GpuSpec.matmul_flops`: int4
    weight-only at the bf16 rate, int8 and NVFP4 at their tensor-core rates, times the measured
    `gemm_efficiency` where aiconfigurator's tables have one); `lora`: the batched adapters'
    FLOPs and bytes folded into the linear and weight terms (None: off); `ep`: expert
    parallelism (planner.costmodel.expert_parallel: the hottest GPU's experts, the all-to-all;
    None: experts split over TP as before); `speculative` (with `draft`, the draft model's shape
    for method draft): the verify step and the proposer's passes
    (planner.costmodel.speculative.speculative_coefficients; None: off)."""
    bw = gpu.bandwidth * profile.eta_bandwidth
    matmul = gpu.matmul_flops(weight_dtype) * gemm_efficiency(weight_dtype, gpu.name) * profile.eta_matmul
    # Attention runs in bf16 (fp8 KV is dequantized in the kernel).
    attention = gpu.matmul_flops("bf16") * profile.eta_attention
    kv = float(model.kv_bytes_per_token(kv_dtype, tp))
    dense_bytes, expert_bytes, lm_head_bytes = model.weight_bytes_parts(weight_dtype, weight_group_size)
    if model.is_moe:
        w0 = dense_bytes / tp
        w1 = expert_bytes / tp
        r = 1.0 - model.experts_per_token / model.num_experts
    else:
        w0, w1, r = model.weight_bytes(weight_dtype, weight_group_size) / tp, 0.0, 0.0
    linear_flops = 2.0 * model.active_params / tp
    sampled_flops = 0.0
    if profile.sampled_logits:
        # vLLM: logits for sampled rows only, the input embedding a gather of the step's rows
        # (d x 2 bytes a token, 8 KB for Qwen3-8B beside its 144 KB of KV: left out).
        lm_head = model.vocab_size * model.hidden_size
        linear_flops = 2.0 * (model.active_params - head_params(model)) / tp
        sampled_flops = 2.0 * lm_head / tp
        w0 -= lm_head_bytes / tp  # 0 when tied
    if lora is not None:  # planner.costmodel.lora: the adapters' FLOPs and bytes
        linear_flops, sampled_flops, w0 = _with_lora(model, tp, lora, profile.sampled_logits, linear_flops, sampled_flops, w0)
    ar_slope, ar_fixed = _allreduce_terms(model, gpu, tp)
    ep_moe: EpMoeTerm | None = None
    if ep is not None and model.is_moe:  # planner.costmodel.expert_parallel; None: as before
        w1, r, linear_flops, a2a_slope, a2a_fixed, ep_moe = _expert_parallel_terms(
            model, gpu, tp, weight_dtype, ep, expert_bytes, linear_flops
        )
        ar_slope, ar_fixed = ar_slope + a2a_slope, ar_fixed + a2a_fixed
    attn_flops = 4.0 * model.layers * model.query_dim / tp
    passes = profile.prefix_kv_passes + profile.prefix_query_kv_passes * query_heads_per_kv_head(model, tp)
    out = StepCoefficients(
        s_per_byte=1.0 / bw,
        kv_bytes_per_token=kv,
        weight_bytes=w0,
        moe_weight_bytes=w1,
        moe_untouched_ratio=r,
        linear_s_per_token=linear_flops / matmul,
        attention_s_per_pair=attn_flops / attention,
        allreduce_s_per_token=ar_slope,
        allreduce_s=ar_fixed,
        elementwise_s_per_token=profile.activation_passes
        * model.layers
        * model.hidden_size
        * ACTIVATION_BYTES
        / bw,
        overhead_s=profile.step_overhead_s,
        sequence_s=profile.sequence_overhead_s,
        prefix_reread_s_per_token=passes * kv / bw,
        decode_kv_full_decodes=decode_kv_full_decodes(model, gpu, profile, tp),
        linear_phantom_s=profile.matmul_phantom_tokens * (linear_flops / matmul),
        sampled_s_per_decode=sampled_flops / matmul,
        linear_flops_per_token=linear_flops,
        attention_flops_per_pair=attn_flops,
        sampled_flops_per_decode=sampled_flops,
        ep_moe=ep_moe,
        linear_rate=_linear_rate(weight_dtype, gpu.name),
    )
    if speculative is None:
        return out
    proposer = proposer_cost(model, speculative, tp, kv_dtype, draft)
    return speculative_coefficients(out, speculative, proposer, gpu, profile, tp)


def _with_lora(
    model: ModelSpec,
    tp: int,
    lora: LoraConfig,
    sampled_logits: bool,
    linear_flops: float,
    sampled_flops: float,
    weight_bytes: float,
) -> tuple[float, float, float]:
    """The linear FLOPs per token, FLOPs per sampled row and weight bytes per step with the
    batched adapters' added: their GEMMs per token (the lm_head's adapter per logits row where
    the lm_head is charged per row, else per token) and every resident adapter read per step."""
    linear_flops += lora_step_flops_per_token(model, tp, lora)
    if sampled_logits:
        sampled_flops += lora_logits_flops_per_row(model, lora)
    else:
        linear_flops += lora_logits_flops_per_row(model, lora)
    return linear_flops, sampled_flops, weight_bytes + lora_step_bytes(model, tp, lora)


def _allreduce_terms(model: ModelSpec, gpu: GpuSpec, tp: int) -> tuple[float, float]:
    """Two ring all-reduces per layer of tokens x hidden activations: 2(t-1)/t of the data
    crosses each GPU's link, plus a latency floor per call. The link: the node's, or the
    inter-node fabric for a TP group beyond one node (planner.costmodel.multinode). Returns
    (seconds per token, seconds per step); (0, 0) without TP."""
    if tp <= 1:
        return 0.0, 0.0
    link_bw, link_s = allreduce_link(gpu, tp)
    per_token = (2 * (tp - 1) / tp) * model.hidden_size * ACTIVATION_BYTES / link_bw
    return 2 * model.layers * per_token, 2 * model.layers * link_s


def _expert_parallel_terms(
    model: ModelSpec,
    gpu: GpuSpec,
    tp: int,
    weight_dtype: WeightDtype,
    ep: ExpertParallel,
    expert_bytes: float,
    linear_flops: float,
) -> tuple[float, float, float, float, float, EpMoeTerm | None]:
    """Under expert parallelism: the hottest GPU's expert bytes, the untouched-expert ratio, the
    linear FLOPs with its share of the skew, the all-to-all's seconds per token and per step,
    and the measured MoE-layer term where the GPU, expert shape and EP size were timed."""
    w1 = expert_bytes * expert_fraction_per_gpu(model, ep.ep_size(tp))
    r = untouched_ratio(model, ep)
    experts = expert_active_params(model)
    linear_flops += 2.0 * experts * (ep.routing_skew - 1.0) / tp  # the hottest GPU's share
    a2a_slope, a2a_fixed = all_to_all_coefficients(model, gpu, tp, ep)
    expert_share = 2.0 * experts * ep.routing_skew / tp / linear_flops
    ep_moe = moe_term(model, gpu.name, weight_dtype, ep.ep_size(tp), ep.data_parallel_size, expert_share)
    return w1, r, linear_flops, a2a_slope, a2a_fixed, ep_moe


def _linear_rate(weight_dtype: str, gpu_name: str) -> GemmRateCurve | None:
    """Marlin's measured rate by tokens where its table times the format on this GPU (None:
    the format's rate at every step)."""
    knots = marlin_rate_knots(weight_dtype, gpu_name)
    return None if knots is None else GemmRateCurve(*knots)


def linear_layers_coefficients(
    model: ModelSpec, gpu: GpuSpec, profile: Profile, tp: int = 1, weight_dtype: Dtype = "bf16"
) -> StepCoefficients:
    """Every layer's projections and MLP and nothing else (no attention, embedding, lm_head,
    all-reduce or per-step overhead; the phantom tokens, a property of the GEMMs, stay): what a
    measured `linear` row times. Time it as `tokens` decodes at zero context."""
    full = step_coefficients(
        model, gpu, profile.model_copy(update={"sampled_logits": False}), tp, weight_dtype
    )
    head = head_params(model)
    b = DTYPE_BYTES[weight_dtype]
    matmul = gpu.matmul_flops(weight_dtype) * profile.eta_matmul
    linear_flops = 2.0 * (model.active_params - head) / tp
    return StepCoefficients(
        s_per_byte=full.s_per_byte,
        kv_bytes_per_token=0.0,
        weight_bytes=full.weight_bytes - head * b / tp,
        moe_weight_bytes=full.moe_weight_bytes,
        moe_untouched_ratio=full.moe_untouched_ratio,
        linear_s_per_token=linear_flops / matmul,
        attention_s_per_pair=0.0,
        allreduce_s_per_token=0.0,
        allreduce_s=0.0,
        elementwise_s_per_token=0.0,
        overhead_s=0.0,
        sequence_s=0.0,
        prefix_reread_s_per_token=0.0,
        decode_kv_full_decodes=0.0,
        linear_phantom_s=profile.matmul_phantom_tokens * (linear_flops / matmul),
        sampled_s_per_decode=0.0,
        linear_flops_per_token=linear_flops,
        attention_flops_per_pair=0.0,
        sampled_flops_per_decode=0.0,
    )
