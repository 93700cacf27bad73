"""Model catalog: shapes from Hugging Face config.json, parameter counts computed from them.

Nothing here is typed in by hand: a model is whatever its config says, so a user's own
fine-tune or an unlisted model works by passing the path of its config.json.
"""

from __future__ import annotations

import json
import math
from functools import cache, cached_property
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from planner.errors import InvalidInput

Dtype = Literal["bf16", "fp8"]
DTYPE_BYTES: dict[str, int] = {"bf16": 2, "fp8": 1}


class ModelSpec(BaseModel):
    """A decoder-only transformer's shape. MoE when `num_experts` > 0."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    layers: int = Field(gt=0)
    hidden_size: int = Field(gt=0)
    attention_heads: int = Field(gt=0)
    kv_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    intermediate_size: int = Field(gt=0)  # dense MLP width (MoE: per expert)
    vocab_size: int = Field(gt=0)
    tie_word_embeddings: bool
    max_position_embeddings: int = Field(gt=0)
    attention_bias: bool = False
    qk_norm: bool = False
    num_experts: int = Field(default=0, ge=0)
    experts_per_token: int = Field(default=0, ge=0)

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def query_dim(self) -> int:
        """d_q = query heads x head_dim: the attention FLOPs per token per context token scale."""
        return self.attention_heads * self.head_dim

    # --- parameter counts -------------------------------------------------------------------
    @cached_property
    def attention_params_per_layer(self) -> int:
        q = self.query_dim
        kv = self.kv_heads * self.head_dim
        n = self.hidden_size * q + 2 * self.hidden_size * kv + q * self.hidden_size
        if self.attention_bias:
            n += q + 2 * kv + self.hidden_size
        if self.qk_norm:
            n += 2 * self.head_dim
        return n

    @cached_property
    def expert_params(self) -> int:
        """One gated MLP (gate, up, down) of `intermediate_size`: a dense layer's MLP or one expert."""
        return 3 * self.hidden_size * self.intermediate_size

    @cached_property
    def dense_params(self) -> int:
        """Parameters every token reads: embeddings, attention, norms, routers, and the MLP of a dense model."""
        embed = self.vocab_size * self.hidden_size
        lm_head = 0 if self.tie_word_embeddings else embed
        per_layer = self.attention_params_per_layer + 2 * self.hidden_size
        if self.is_moe:
            per_layer += self.hidden_size * self.num_experts  # router
        else:
            per_layer += self.expert_params
        return embed + lm_head + self.layers * per_layer + self.hidden_size

    @cached_property
    def total_params(self) -> int:
        moe = self.layers * self.num_experts * self.expert_params if self.is_moe else 0
        return self.dense_params + moe

    @cached_property
    def active_params(self) -> int:
        """Parameters one token multiplies through (MoE: only its routed experts)."""
        moe = self.layers * self.experts_per_token * self.expert_params if self.is_moe else 0
        return self.dense_params + moe

    def expected_experts_touched(self, tokens: float) -> float:
        """Experts per layer that at least one of `tokens` routes to, under uniform routing:
        E * (1 - (1 - k/E)^tokens). Decode steps of a small batch read only these experts."""
        if not self.is_moe:
            return 0.0
        e, k = self.num_experts, self.experts_per_token
        if tokens <= 0:
            return 0.0
        return e * (1.0 - (1.0 - k / e) ** tokens)

    def params_read(self, tokens: float) -> float:
        """Parameters a step of `tokens` tokens must read from memory (all, for a dense model)."""
        if not self.is_moe:
            return float(self.total_params)
        return self.dense_params + self.layers * self.expected_experts_touched(tokens) * self.expert_params

    def tp_error(self, tp: int) -> str | None:
        """Why vLLM cannot shard this model over `tp` GPUs (None when it can): query heads must
        split evenly, and KV heads must either split evenly or be replicated whole."""
        if self.attention_heads % tp:
            return f"{self.name}'s {self.attention_heads} attention heads do not split evenly over {tp} GPUs"
        if self.kv_heads % tp and tp % self.kv_heads:
            return f"{self.name}'s {self.kv_heads} KV heads neither split over nor replicate across {tp} GPUs"
        return None

    # --- bytes ------------------------------------------------------------------------------
    def weight_bytes(self, weight_dtype: Dtype = "bf16") -> int:
        return self.total_params * DTYPE_BYTES[weight_dtype]

    def kv_bytes_per_token(self, kv_dtype: Dtype = "bf16", tp: int = 1) -> int:
        """KV-cache bytes per token on one GPU of a tensor-parallel group of `tp`: KV heads are
        split across GPUs, and replicated when there are fewer KV heads than GPUs."""
        heads_per_gpu = math.ceil(self.kv_heads / tp)
        return 2 * self.layers * heads_per_gpu * self.head_dim * DTYPE_BYTES[kv_dtype]


def spec_from_config(name: str, config: dict[str, Any], field: str = "model") -> ModelSpec:
    """Build a ModelSpec from config.json content (Llama, Qwen2/3, Mistral, Mixtral, Qwen3-MoE)."""

    def need(key: str) -> Any:
        if key not in config:
            raise InvalidInput(field, f"config.json of {name!r} lacks {key!r}")
        return config[key]

    heads = int(need("num_attention_heads"))
    hidden = int(need("hidden_size"))
    head_dim = int(config.get("head_dim") or hidden // heads)
    experts = int(config.get("num_experts") or config.get("num_local_experts") or 0)
    model_type = str(config.get("model_type", ""))
    if experts:
        per_expert = config.get("moe_intermediate_size") or need("intermediate_size")
        active = int(config.get("num_experts_per_tok") or config.get("experts_per_token") or 0)
        if not 0 < active <= experts:
            raise InvalidInput(field, f"MoE config of {name!r} needs 0 < num_experts_per_tok <= {experts}")
        if config.get("mlp_only_layers") or int(config.get("decoder_sparse_step", 1)) != 1:
            raise InvalidInput(field, f"{name!r}: MoE models with dense layers interleaved are not supported")
    else:
        per_expert = need("intermediate_size")
        active = 0
    if config.get("quantization_config"):
        raise InvalidInput(
            field, f"{name!r} ships pre-quantized weights; pass its bf16 config and --weight-dtype"
        )
    layer_types = config.get("layer_types")
    if layer_types and any(t != "full_attention" for t in layer_types):
        raise InvalidInput(
            field, f"{name!r} uses sliding-window layers, which the KV model does not cover yet"
        )
    kv = int(config.get("num_key_value_heads") or heads)
    try:
        return ModelSpec(
            name=name,
            layers=int(need("num_hidden_layers")),
            hidden_size=hidden,
            attention_heads=heads,
            kv_heads=kv,
            head_dim=head_dim,
            intermediate_size=int(per_expert),
            vocab_size=int(need("vocab_size")),
            tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
            max_position_embeddings=int(need("max_position_embeddings")),
            attention_bias=bool(config.get("attention_bias", False)) or model_type == "qwen2",
            qk_norm=model_type.startswith("qwen3"),
            num_experts=experts,
            experts_per_token=active,
        )
    except (ValueError, TypeError) as exc:
        if isinstance(exc, InvalidInput):
            raise
        raise InvalidInput(field, f"config.json of {name!r} has invalid shape values: {exc}") from None


def _data_dir() -> Any:
    return resources.files("planner.catalog") / "data" / "models"


@cache
def _catalog() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for entry in sorted(_data_dir().iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".config.json"):
            out[entry.name[: -len(".config.json")].replace("--", "/")] = json.loads(entry.read_text())
    return out


def model_names() -> list[str]:
    return sorted(_catalog())


@cache
def get_model(name: str, field: str = "model") -> ModelSpec:
    """A catalog name (Hugging Face id, case-insensitive) or a path to any local config.json."""
    by_lower = {k.lower(): k for k in _catalog()}
    key = by_lower.get(name.lower())
    if key is not None:
        return spec_from_config(key, _catalog()[key], field)
    path = Path(name)
    if name.endswith(".json") or path.exists():
        if not path.is_file():
            raise InvalidInput(field, f"no such config file: {name}")
        try:
            config = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InvalidInput(field, f"cannot read {name} as config.json: {exc}") from None
        if not isinstance(config, dict):
            raise InvalidInput(field, f"{name} is not a config.json object")
        return spec_from_config(path.name, config, field)
    raise InvalidInput(
        field, f"unknown model {name!r}; valid: {', '.join(model_names())} (or a config.json path)"
    )
