"""LoRA adapters served by vLLM (`--enable-lora --max-loras N --max-lora-rank R`): the GPU
memory vLLM 0.11 allocates for them and what they add to a step.

Memory. With LoRA on, vLLM's LoRA model manager wraps every module the model supports
(`get_supported_lora_modules`: every linear layer, and the model's `embedding_modules`,
embed_tokens and lm_head for the catalog's Llama, Qwen and Mistral classes) and each wrapper
allocates, at model load, stacked A and B buffers for `max_loras` adapters at `max_lora_rank`
(vllm/lora/layers/base_linear.py `create_lora_weights`; lora_dtype "auto" = the model's bf16).
Without `--fully-sharded-loras` (vLLM's default) the rank dimension is never split: a
column-parallel layer (qkv, gate_up) keeps A whole (rank x hidden per slice) and shards B
by output; a row-parallel layer (o_proj, down_proj) shards A by input and keeps B whole
(hidden x rank). Per layer and adapter, in elements, with h hidden, d_q query dim, d_kv the
KV heads on this GPU x head_dim, I the MLP width, t the TP size and r the rank:

    qkv      A 3 r h          B r (d_q/t + 2 d_kv)
    o_proj   A r d_q/t        B r h
    gate_up  A 2 r h          B r 2 I/t
    down     A r I/t          B r h
    sum      r (7 h + 2 d_q/t + 2 d_kv + 3 I/t)

The embedding wrapper holds A (vocab + 256 extra-vocab rows) x r and B h x r, the logits
wrapper A r x h and B (vocab padded to 256) x r, both whole on every GPU, and each an extra-
vocabulary table of 256 x h (vLLM 0.11's `lora_extra_vocab_size` default, deprecated there).
MoE models: vLLM 0.11 has no LoRA for fused-MoE experts, so only the attention projections and
the embeddings are wrapped. These buffers count in vLLM's "Model loading took" line.

vLLM's profile run (`maybe_dummy_run_with_lora`) activates `max_loras` dummy adapters built
on the CPU and copied into those same buffers (no new GPU memory); its punica kernels hold an
fp32 shrink buffer of slices x tokens x rank (6 MiB at 8,192 tokens and rank 64), counted in the
forward pass's peak. `max_cpu_loras` sizes a host-memory LRU cache only: nothing on the GPU.

Step cost (punica SGMV kernels): a token through an adapted module costs 2 r (d_in + d_out)
FLOPs, i.e. 2 x the adapter's per-GPU elements per token; each adapter active in the step is
read once. Every `max_loras` adapter is assumed active in every step (a loaded deployment whose
requests spread over the adapters; the workload does not say how many distinct adapters a
batch carries), so the bytes are a constant per step. Both are folded into the step's existing
linear FLOPs and weight bytes (planner.costmodel.steptime.step_coefficients): the roofline
then overlaps them with the base model's reads or GEMMs as it does every other kernel.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from planner.catalog.models import ModelSpec

__all__ = [
    "LORA_DTYPE_BYTES",
    "LORA_EXTRA_VOCAB",
    "MAX_CPU_LORAS",
    "MAX_LORAS",
    "MAX_LORA_RANKS",
    "LoraConfig",
    "lora_buffer_bytes",
    "lora_layer_elements",
    "lora_logits_flops_per_row",
    "lora_shrink_buffer_bytes",
    "lora_step_bytes",
    "lora_step_flops_per_token",
]

# vLLM 0.11's vllm/config/lora.py: MaxLoRARanks = Literal[1, 8, 16, 32, 64, 128, 256, 320, 512].
LoraRank = Literal[1, 8, 16, 32, 64, 128, 256, 320, 512]
MAX_LORA_RANKS: tuple[int, ...] = get_args(LoraRank)
# vLLM requires max_loras >= 1 and sets no upper bound; past 256 adapters resident on one GPU is
# no deployment a planner is asked about (256 rank-8 adapters of an 8B: 2.6 GiB).
MAX_LORAS = 256
MAX_CPU_LORAS = 100_000
LORA_DTYPE_BYTES = 2  # lora_dtype "auto": the model's dtype, bf16 for every catalog model
LORA_EXTRA_VOCAB = 256  # vLLM 0.11 lora_extra_vocab_size default (also the logits padding)
SHRINK_BYTES = 4  # punica's shrink output is fp32


class LoraConfig(BaseModel):
    """`lora:` of a deployment or plan request: vLLM's `--max-loras` (adapters resident on the
    GPU at once, 1..256), `--max-lora-rank` (one of vLLM 0.11's ranks 1, 8, 16, 32, 64, 128,
    256, 320, 512) and optionally `--max-cpu-loras` (host-memory cache, >= max_loras, up to
    100,000; it changes nothing on the GPU)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
    max_loras: int = Field(ge=1, le=MAX_LORAS)
    max_lora_rank: int
    max_cpu_loras: int | None = Field(default=None, ge=1, le=MAX_CPU_LORAS)

    @field_validator("max_lora_rank")
    @classmethod
    def _rank(cls, v: int) -> int:
        if v not in MAX_LORA_RANKS:
            raise ValueError(
                f"{v} is not a rank vLLM accepts; valid: {', '.join(str(r) for r in MAX_LORA_RANKS)}"
            )
        return v

    @model_validator(mode="after")
    def _cpu_cache(self) -> LoraConfig:
        if self.max_cpu_loras is not None and self.max_cpu_loras < self.max_loras:
            raise ValueError(
                f"max_cpu_loras ({self.max_cpu_loras}) must be >= max_loras ({self.max_loras}), as vLLM requires"
            )
        return self


def _kv_dim_per_gpu(model: ModelSpec, tp: int) -> int:
    return -(-model.kv_heads // tp) * model.head_dim


def lora_layer_elements(model: ModelSpec, tp: int, rank: int) -> float:
    """One adapter's A and B elements in one decoder layer on one GPU (module docstring)."""
    h, dq, dkv = model.hidden_size, model.query_dim, _kv_dim_per_gpu(model, tp)
    attention = 3 * h + dq / tp + 2 * dkv + dq / tp + h
    mlp = 0.0 if model.is_moe else 2 * h + 2 * model.intermediate_size / tp + model.intermediate_size / tp + h
    return rank * (attention + mlp)


def _embedding_elements(model: ModelSpec, rank: int) -> float:
    """One adapter's embedding and logits buffers (whole on every GPU)."""
    v, h = model.vocab_size, model.hidden_size
    padded = -(-v // LORA_EXTRA_VOCAB) * LORA_EXTRA_VOCAB
    embed = (v + LORA_EXTRA_VOCAB) * rank + h * rank + LORA_EXTRA_VOCAB * h
    logits = rank * h + padded * rank + LORA_EXTRA_VOCAB * h
    return embed + logits


def lora_buffer_bytes(model: ModelSpec, tp: int, lora: LoraConfig | None) -> float:
    """Per GPU: the stacked buffers vLLM allocates at load for `max_loras` adapters (0 without
    LoRA)."""
    if lora is None:
        return 0.0
    r = lora.max_lora_rank
    per_adapter = model.layers * lora_layer_elements(model, tp, r) + _embedding_elements(model, r)
    return lora.max_loras * per_adapter * LORA_DTYPE_BYTES


def lora_shrink_buffer_bytes(model: ModelSpec, tokens: int, lora: LoraConfig | None) -> float:
    """The punica shrink output of the widest module (qkv: 3 slices) in the profile run."""
    if lora is None:
        return 0.0
    return 3 * tokens * lora.max_lora_rank * SHRINK_BYTES


def lora_step_flops_per_token(model: ModelSpec, tp: int, lora: LoraConfig | None) -> float:
    """Per GPU and token: 2 r (d_in + d_out) over every adapted linear module (the lm_head's
    adapter, charged where the lm_head is: `lora_logits_flops_per_row`)."""
    if lora is None:
        return 0.0
    return 2.0 * model.layers * lora_layer_elements(model, tp, lora.max_lora_rank)


def lora_logits_flops_per_row(model: ModelSpec, lora: LoraConfig | None) -> float:
    """Per logits row: the lm_head adapter's 2 r (h + vocab) FLOPs (whole on every GPU)."""
    if lora is None:
        return 0.0
    return 2.0 * lora.max_lora_rank * (model.hidden_size + model.vocab_size)


def lora_step_bytes(model: ModelSpec, tp: int, lora: LoraConfig | None) -> float:
    """Per GPU and step: every resident adapter's linear and logits buffers read once (all
    `max_loras` active; the embedding adapter is a gather of the step's rows, left out)."""
    if lora is None:
        return 0.0
    r = lora.max_lora_rank
    padded = -(-model.vocab_size // LORA_EXTRA_VOCAB) * LORA_EXTRA_VOCAB
    per_adapter = model.layers * lora_layer_elements(model, tp, r) + r * model.hidden_size + padded * r
    return lora.max_loras * per_adapter * LORA_DTYPE_BYTES
