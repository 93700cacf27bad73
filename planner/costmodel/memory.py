"""GPU memory as vLLM budgets it at startup: what is left for the KV cache, and how many
sequences it holds.

vLLM V1 (`Worker.determine_available_memory`) takes the total memory the driver reports for each
GPU, times `gpu_memory_utilization`, and subtracts what a profiling run measured: the weights as
loaded, the torch peak of one dummy forward pass of `max_num_batched_tokens` tokens plus the
sampler on `min(max_num_seqs, max_num_batched_tokens)` rows, and the memory allocated outside
torch since its start-up snapshot. What that snapshot leaves out, and whether CUDA graphs are
subtracted, changed between releases: `vllm_version` picks the regime. docs/kv-capacity.md gives
the sources, the two fitted constants and the check against published startup logs.

The `theoretical` profile keeps the seed article's idealized budget (datasheet memory, a rough
one-layer activation estimate, a flat 1.5 GiB reserve): theoretical mode reproduces the seed bit
for bit, and the seed's sweeps (256 sequences of 1,500 tokens on one H100) assume it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, get_args

from planner.catalog.gpus import GpuSpec
from planner.catalog.models import DTYPE_BYTES, ModelSpec
from planner.catalog.quantization import DEFAULT_GROUP_SIZE, WeightDtype, linear_bytes_per_weight
from planner.costmodel.expert_parallel import ExpertParallel, experts_per_gpu
from planner.costmodel.lora import LoraConfig, lora_buffer_bytes, lora_shrink_buffer_bytes
from planner.costmodel.multinode import stage_loaded_weight_bytes
from planner.costmodel.profile import THEORETICAL
from planner.costmodel.roofline import Replica
from planner.costmodel.unquantized import extra_weight_bytes
from planner.errors import InvalidInput, echo
from planner.vllm_defaults import (
    BLOCK_SIZE_TOKENS,
    GPU_MEMORY_UTILIZATION,
    default_max_num_batched_tokens,
    default_max_num_seqs,
)

GIB = 2**30

# Memory-accounting regimes of vLLM's V1 engine, named by the first release of each:
#   "0.8"  (0.8.x-0.9.x, before vLLM PR #19312): everything on the device outside torch counts, the
#          CUDA context included;
#   "0.10" (PR #19312, June 2025, to 0.10.x): a start-up snapshot taken before NCCL starts; what is
#          allocated after it counts;
#   "0.11" (0.11.0-0.20.x): the snapshot moves after NCCL initialization, so NCCL's communicator
#          buffers no longer count (PR #25359); CUDA graphs are captured after sizing, uncounted;
#   "0.21" (0.21.0 on): CUDA graph memory is estimated and subtracted by default (PR #30515 added
#          the estimate behind VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS; on by default since 0.21.0).
VllmVersion = Literal["0.8", "0.10", "0.11", "0.21"]
VLLM_VERSIONS: tuple[str, ...] = get_args(VllmVersion)
# The release plans deploy (planner.export pins vllm/vllm-openai:v0.11.0).
DEFAULT_VLLM_VERSION: VllmVersion = "0.11"

# The sampler's dummy run holds about this many fp32 [rows x vocabulary] tensors at its peak
# (logits, their fp32 copy, the top-k/top-p sort's values and int64 indices, softmax, cumulative
# sum, re-scattered logits, probabilities and exponential noise), beside this many bf16
# [tokens x hidden] tensors of the forward pass. Fitted to the activation peaks vLLM 0.11 logged
# on an H100 (llm-d-benchmark): Llama-3.1-8B 4.76, Llama-3.3-70B TP2 4.84, Qwen3-0.6B 5.56,
# Qwen3-32B 5.64 GiB, all at 8,192 tokens and 1,024 sequences; the fit reproduces each to 0.01 GiB
# and predicts gpt-oss-20b's 7.38 GiB (a 201k vocabulary) and the 1.26 GiB vLLM PR #10511 logged
# for Llama-3-8B at 256 sequences (tests/test_kv_capacity.py).
SAMPLER_FP32_COPIES = 9.56
SAMPLER_HIDDEN_COPIES = 1.31
VOCAB_PADDING = 64  # vLLM pads the vocabulary of embeddings and lm_head to a multiple of 64
BF16_BYTES = 2
FP32_BYTES = 4

# Allocated outside torch during load and profiling (cuBLAS and attention workspaces; at TP > 1
# the NCCL buffers a first large all-reduce connects), as vLLM 0.11 logged it on an H100
# (llm-d-benchmark): 0.13-0.14 GiB at TP 1, 0.54-0.55 GiB at TP 2. TP 4 and 8: assumed as TP 2.
NON_TORCH_PROFILE_TP1_BYTES = 0.13 * GIB
NON_TORCH_PROFILE_TP_BYTES = 0.55 * GIB
# What NCCL and the custom all-reduce allocate while the TP group starts (counted before 0.11):
# the free memory vLLM 0.11 found at start-up on an H100 fell from 78.57 GiB at TP 1 to
# 77.64 GiB at TP 2 (llm-d-benchmark).
NCCL_INIT_BYTES = 0.93 * GIB
# The CUDA context and torch's own start-up allocations (counted only in the "0.8" regime): the
# 79.18 - 78.57 GiB an H100 had in use at vLLM's start-up snapshot (llm-d-benchmark).
STARTUP_BASELINE_BYTES = 0.61 * GIB
# "0.21": the CUDA graph estimate vLLM subtracts, as logged for Qwen3-8B ("Estimated CUDA graph
# memory: 0.52 GiB total", LMCache issue #3430); one figure for every model.
CUDA_GRAPH_ESTIMATE_BYTES = 0.52 * GIB

# The seed's flat reserve for CUDA context, NCCL and graphs (theoretical profile; feasibility's
# screen also uses it).
NON_TORCH_BYTES = 1.5 * GIB


def reported_memory_bytes(gpu: GpuSpec) -> float:
    """Total memory the driver reports (torch.cuda.mem_get_info), what vLLM multiplies by
    gpu_memory_utilization; the datasheet figure where the catalog has no reading."""
    r = gpu.memory_reported_bytes.value
    return gpu.memory if r is None else float(r)


def padded_vocab(vocab_size: int) -> int:
    return -(-vocab_size // VOCAB_PADDING) * VOCAB_PADDING


def loaded_weight_bytes(
    model: ModelSpec,
    tp: int = 1,
    weight_dtype: WeightDtype = "bf16",
    group_size: int = DEFAULT_GROUP_SIZE,
    ep: ExpertParallel | None = None,
) -> float:
    """Per GPU, as vLLM loads them: linear layers in `weight_dtype` split over the TP group, KV
    projections replicated when there are fewer KV heads than GPUs; embeddings and lm_head in bf16
    split by vocabulary (vLLM quantizes neither); norms and MoE routers replicated in bf16; the
    rotary cos/sin cache (max_position_embeddings x head_dim, bf16). At TP 1 in bf16 this is the
    parameter count x 2 plus the rotary cache. Quantized formats: each linear matrix at
    `linear_bytes_per_weight` of its input width (packed values, group scales and zero points at
    `group_size`), biases and q/k norms in bf16 (docs/quantization.md). `ep` (expert
    parallelism): the MoE layers hold ceil(E / E_p) whole experts instead of 1/tp of each
    (planner.costmodel.expert_parallel)."""
    if ep is not None and model.is_moe:
        return _expert_parallel_weight_bytes(model, tp, weight_dtype, group_size, ep)
    m = model
    h = m.hidden_size
    embed = padded_vocab(m.vocab_size) * h * (1 if m.tie_word_embeddings else 2)
    kv_proj = 2 * h * m.kv_heads * m.head_dim
    kv_proj_per_gpu = 2 * h * math.ceil(m.kv_heads / tp) * m.head_dim
    attention = m.attention_params_per_layer - kv_proj
    mlp = m.num_experts * m.expert_params if m.is_moe else m.expert_params
    router = h * m.num_experts if m.is_moe else 0
    norms = m.layers * 2 * h + h
    bf16 = embed / tp + m.layers * router + norms + m.max_position_embeddings * m.head_dim
    if weight_dtype in DTYPE_BYTES:
        linear = m.layers * ((attention + mlp) / tp + kv_proj_per_gpu)
        return linear * DTYPE_BYTES[weight_dtype] + bf16 * BF16_BYTES
    return _quantized_linear_bytes(m, tp, weight_dtype, group_size) + bf16 * BF16_BYTES


def _quantized_linear_bytes(model: ModelSpec, tp: int, weight_dtype: WeightDtype, group_size: int) -> float:
    """One GPU's linear layers in a quantized format: q and o split over TP, k and v split or
    replicated, MLP (or every expert) split; each weight at its matrix's bytes per weight (the
    group scales split with the weights, so the per-weight figure holds on every shard); biases
    and q/k norms in bf16."""
    m = model
    h, q, i = m.hidden_size, m.query_dim, m.intermediate_size
    kv_per_gpu = math.ceil(m.kv_heads / tp) * m.head_dim

    def per_weight(in_features: int) -> float:
        return linear_bytes_per_weight(weight_dtype, in_features, group_size)

    attn_linear = 2 * h * q + 2 * h * m.kv_heads * m.head_dim
    attn_extra = (m.attention_params_per_layer - attn_linear) * BF16_BYTES / tp
    attn = h * q / tp * per_weight(h) + q * h / tp * per_weight(q) + 2 * h * kv_per_gpu * per_weight(h)
    one_mlp = (2 * h * i * per_weight(h) + i * h * per_weight(i)) / tp
    mlp = one_mlp * (m.num_experts if m.is_moe else 1)
    return m.layers * (attn + attn_extra + mlp)


def _expert_parallel_weight_bytes(
    model: ModelSpec, tp: int, weight_dtype: WeightDtype, group_size: int, ep: ExpertParallel
) -> float:
    """`loaded_weight_bytes` under EP: the TP layout's bytes with its experts (E slices of 1/tp)
    swapped for the ceil(E / E_p) whole experts the most loaded GPU holds."""
    m = model
    h, i = m.hidden_size, m.intermediate_size
    one_expert: float
    if weight_dtype in DTYPE_BYTES:
        one_expert = m.expert_params * DTYPE_BYTES[weight_dtype]
    else:
        one_expert = 2 * h * i * linear_bytes_per_weight(weight_dtype, h, group_size) + i * h * (
            linear_bytes_per_weight(weight_dtype, i, group_size)
        )
    tp_layout = loaded_weight_bytes(m, tp, weight_dtype, group_size)
    tp_experts = m.layers * m.num_experts * one_expert / tp
    return tp_layout - tp_experts + m.layers * experts_per_gpu(m, ep.ep_size(tp)) * one_expert


def sampler_peak_bytes(vocab_size: int, hidden_size: int, tokens: int, seqs: int) -> float:
    """Torch peak of the sampler's dummy run: logits of min(seqs, tokens) rows over the whole
    (padded) vocabulary, gathered on every GPU of the TP group, beside the forward pass's hidden
    states of `tokens` rows."""
    rows = min(seqs, tokens)
    logits = rows * padded_vocab(vocab_size) * FP32_BYTES
    return SAMPLER_FP32_COPIES * logits + SAMPLER_HIDDEN_COPIES * tokens * hidden_size * BF16_BYTES


def forward_peak_bytes(model: ModelSpec, tp: int, tokens: int) -> float:
    """Torch peak of the dummy forward pass, per GPU: residual and hidden states plus the widest
    one-layer transient in bf16 (dense MLP: gate-up output and its activation; MoE: the fused-MoE
    caches of every routed copy and fp32 router logits; attention: q/k/v and its output). Layers
    reuse buffers, so one layer's worth counts. Not pinned by a log: at vLLM's defaults the
    sampler is the larger term for every catalog model but Mixtral at TP 1."""
    m = model
    h = m.hidden_size
    kv = 2 * math.ceil(m.kv_heads / tp) * m.head_dim
    attention = 2 * m.query_dim / tp + kv
    if m.is_moe:
        mlp = m.experts_per_token * (3 * m.intermediate_size / tp + h) + 2 * m.num_experts
    else:
        mlp = 3 * m.intermediate_size / tp
    return tokens * (2 * h + max(attention, mlp)) * BF16_BYTES


def profile_activation_bytes(
    model: ModelSpec, tp: int, tokens: int, seqs: int, lora: LoraConfig | None = None
) -> float:
    """vLLM's "torch peak memory increase" of its profile run: the forward pass (with LoRA, the
    punica kernels' shrink buffer on top), then the sampler."""
    return max(
        forward_peak_bytes(model, tp, tokens) + lora_shrink_buffer_bytes(model, tokens, lora),
        sampler_peak_bytes(model.vocab_size, model.hidden_size, tokens, seqs),
    )


def non_torch_bytes(tp: int, vllm_version: VllmVersion = DEFAULT_VLLM_VERSION) -> float:
    """Per GPU, what vLLM counts as allocated outside torch (regimes above)."""
    out = NON_TORCH_PROFILE_TP1_BYTES if tp == 1 else NON_TORCH_PROFILE_TP_BYTES
    if vllm_version in ("0.8", "0.10") and tp > 1:
        out += NCCL_INIT_BYTES
    if vllm_version == "0.8":
        out += STARTUP_BASELINE_BYTES
    return out


def cuda_graph_bytes(vllm_version: VllmVersion = DEFAULT_VLLM_VERSION) -> float:
    """CUDA graph memory vLLM subtracts before sizing the KV cache (0 before 0.21)."""
    return CUDA_GRAPH_ESTIMATE_BYTES if vllm_version == "0.21" else 0.0


def seed_activation_bytes(replica: Replica, max_num_batched_tokens: int, max_num_seqs: int) -> float:
    """The seed's activation estimate, per GPU: the widest per-token intermediates of one layer
    (gate+up MLP output, attention q/k/v, the residual) for a full token budget in bf16, plus fp32
    logits for max_num_seqs rows split over the TP group."""
    m = replica.model
    mlp_width = m.intermediate_size * (m.experts_per_token if m.is_moe else 1)
    per_token = (2 * mlp_width + m.query_dim + 2 * m.kv_heads * m.head_dim + 2 * m.hidden_size) / replica.tp
    logits = min(max_num_seqs, max_num_batched_tokens) * m.vocab_size * 4 / replica.tp
    return max_num_batched_tokens * per_token * 2 + logits


def replica_loaded_weight_bytes(replica: Replica) -> float:
    """`loaded_weight_bytes` on one GPU of the replica's largest pipeline stage (the layers'
    share, one vocabulary matrix, the rotary cache: planner.costmodel.multinode), its experts as
    expert parallelism places them where it is on, plus the bytes the served checkpoint's
    unquantized modules hold beyond the format's (planner.costmodel.unquantized; 0 without)."""
    m = replica.model
    whole = loaded_weight_bytes(
        m, replica.tp, replica.weight_dtype, replica.weight_group_size, replica.expert_parallel
    )
    extra = extra_weight_bytes(
        m, replica.unquantized, replica.tp, replica.weight_dtype, replica.weight_group_size, replica.pp
    )
    if replica.pp == 1:
        return whole + extra
    vocab = padded_vocab(m.vocab_size) * m.hidden_size * BF16_BYTES / replica.tp
    rotary = m.max_position_embeddings * m.head_dim * BF16_BYTES
    return stage_loaded_weight_bytes(m, whole, vocab, rotary, replica.pp) + extra


@dataclass(frozen=True)
class MemoryBudget:
    """One GPU's startup budget, in bytes, term by term as vLLM logs it. `vllm_version` is None
    for the seed's idealized budget. `available_bytes` may be negative: vLLM then refuses to
    start ("No available memory for the cache blocks")."""

    vllm_version: VllmVersion | None
    total_bytes: float
    requested_bytes: float  # total x gpu_memory_utilization
    weight_bytes: float
    activation_bytes: float  # torch peak increase of the profile run
    non_torch_bytes: float
    cuda_graph_bytes: float
    # LoRA: the stacked adapter buffers allocated at load (planner.costmodel.lora; vLLM logs
    # them inside "Model loading took"); 0 without LoRA
    lora_bytes: float = 0.0
    # Speculative decoding: the proposer's weights not shared with the target
    # (planner.costmodel.speculative; in "Model loading took"); 0 without
    speculative_bytes: float = 0.0

    @property
    def available_bytes(self) -> float:
        """ "Available KV cache memory"."""
        return (
            self.requested_bytes
            - self.weight_bytes
            - self.activation_bytes
            - self.non_torch_bytes
            - self.cuda_graph_bytes
            - self.lora_bytes
            - self.speculative_bytes
        )


def _version(v: str) -> VllmVersion:
    if v not in VLLM_VERSIONS:
        raise InvalidInput(
            "vllm_version", f"unknown vLLM version {echo(v)}; valid: {', '.join(VLLM_VERSIONS)}"
        )
    return v  # type: ignore[return-value]


def memory_budget(
    replica: Replica,
    gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION,
    max_num_batched_tokens: int | None = None,
    max_num_seqs: int | None = None,
    vllm_version: str | None = None,
) -> MemoryBudget:
    """The budget of one GPU of `replica`. Unset scheduler limits take vLLM's defaults for the GPU.
    `vllm_version` None: the seed's budget for the theoretical profile, DEFAULT_VLLM_VERSION else."""
    g = replica.gpu
    tokens = max_num_batched_tokens or default_max_num_batched_tokens(g.memory, g.name)
    seqs = max_num_seqs or default_max_num_seqs(g.memory, g.name)
    if vllm_version is None and replica.profile == THEORETICAL:
        return MemoryBudget(
            vllm_version=None,
            total_bytes=g.memory,
            requested_bytes=g.memory * gpu_memory_utilization,
            weight_bytes=replica.weight_bytes_per_gpu,
            activation_bytes=seed_activation_bytes(replica, tokens, seqs),
            non_torch_bytes=NON_TORCH_BYTES,
            cuda_graph_bytes=0.0,
            lora_bytes=lora_buffer_bytes(replica.model, replica.tp, replica.lora),
            speculative_bytes=_proposer_bytes(replica),
        )
    v = _version(DEFAULT_VLLM_VERSION if vllm_version is None else vllm_version)
    total = reported_memory_bytes(g)
    return MemoryBudget(
        vllm_version=v,
        total_bytes=total,
        requested_bytes=total * gpu_memory_utilization,
        weight_bytes=replica_loaded_weight_bytes(replica),
        activation_bytes=profile_activation_bytes(replica.model, replica.tp, tokens, seqs, replica.lora),
        non_torch_bytes=non_torch_bytes(replica.gpus, v),
        cuda_graph_bytes=cuda_graph_bytes(v),
        lora_bytes=lora_buffer_bytes(replica.model, replica.tp, replica.lora),
        speculative_bytes=_proposer_bytes(replica),
    )


def _proposer_bytes(replica: Replica) -> float:
    """The speculative proposer's own weights per GPU (0 without speculative decoding)."""
    return 0.0 if replica.proposer is None else replica.proposer.resident_bytes


@dataclass(frozen=True)
class KvCapacity:
    kv_bytes_per_token: int
    kv_cache_bytes: float
    kv_cache_blocks: int
    weight_bytes: float
    activation_bytes: float  # everything else vLLM reserves: activation peak, non-torch, CUDA graphs
    budget: MemoryBudget | None = None

    @property
    def lora_bytes(self) -> float:
        """The LoRA adapter buffers (0 without LoRA)."""
        return 0.0 if self.budget is None else self.budget.lora_bytes

    @property
    def speculative_bytes(self) -> float:
        """The speculative proposer's own weights (0 without speculative decoding)."""
        return 0.0 if self.budget is None else self.budget.speculative_bytes

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
    vllm_version: str | None = None,
) -> KvCapacity:
    """KV capacity of one replica, counted per GPU (each GPU holds its share of every token):
    whole blocks of BLOCK_SIZE_TOKENS in the memory_budget's available bytes."""
    b = memory_budget(replica, gpu_memory_utilization, max_num_batched_tokens, max_num_seqs, vllm_version)
    free = b.available_bytes
    per_block = replica.kv_bytes_per_token * BLOCK_SIZE_TOKENS
    return KvCapacity(
        kv_bytes_per_token=replica.kv_bytes_per_token,
        kv_cache_bytes=max(0.0, free),
        kv_cache_blocks=max(0, int(free // per_block)),
        weight_bytes=b.weight_bytes,
        activation_bytes=b.activation_bytes + b.non_torch_bytes + b.cuda_graph_bytes,
        budget=b,
    )
