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
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from planner.catalog.quantization import DEFAULT_GROUP_SIZE, WeightDtype, linear_bytes_per_weight
from planner.errors import InvalidInput, echo
from planner.validation import error_to_invalid_input

# KV-cache dtypes (and the weight formats whose accounting predates planner.catalog.quantization:
# bf16 and fp8, every parameter at these bytes).
Dtype = Literal["bf16", "fp8"]
DTYPE_BYTES: dict[str, int] = {"bf16": 2, "fp8": 1}
BF16_BYTES = 2


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
    def weight_bytes(self, weight_dtype: WeightDtype = "bf16", group_size: int = DEFAULT_GROUP_SIZE) -> float:
        """Whole-model weight bytes: bf16 and fp8 every parameter at 2 or 1 byte; the other
        formats per `weight_bytes_parts`."""
        if weight_dtype in DTYPE_BYTES:
            return self.total_params * DTYPE_BYTES[weight_dtype]
        dense, experts, _ = self.weight_bytes_parts(weight_dtype, group_size)
        return dense + experts

    def weight_bytes_parts(
        self, weight_dtype: WeightDtype = "bf16", group_size: int = DEFAULT_GROUP_SIZE
    ) -> tuple[float, float, float]:
        """(bytes every token reads, bytes of all experts, bytes of an untied lm_head), whole model.
        bf16/fp8: the parameter counts x 2 or 1. Quantized formats: each linear matrix (q, k, v, o;
        gate, up, down) at `linear_bytes_per_weight` for its input width, everything else
        (embeddings, lm_head, norms, biases, routers) in bf16, as AWQ/GPTQ/ModelOpt checkpoints
        keep them (docs/quantization.md)."""
        h = self.hidden_size
        lm_head = 0 if self.tie_word_embeddings else self.vocab_size * h
        moe = self.layers * self.num_experts * self.expert_params if self.is_moe else 0
        if weight_dtype in DTYPE_BYTES:
            b = DTYPE_BYTES[weight_dtype]
            return float(self.dense_params * b), float(moe * b), float(lm_head * b)
        q, kv = self.query_dim, self.kv_heads * self.head_dim

        def per_weight(in_features: int) -> float:
            return linear_bytes_per_weight(weight_dtype, in_features, group_size)

        attn_linear = h * (q + 2 * kv) + q * h
        attn = (h * (q + 2 * kv)) * per_weight(h) + q * h * per_weight(q)
        attn += (self.attention_params_per_layer - attn_linear) * BF16_BYTES  # biases, q/k norms
        i = self.intermediate_size
        mlp = 2 * h * i * per_weight(h) + i * h * per_weight(i)
        per_layer = attn + 2 * h * BF16_BYTES
        per_layer += h * self.num_experts * BF16_BYTES if self.is_moe else mlp
        non_linear = (self.vocab_size * h + lm_head + h) * BF16_BYTES
        experts = self.layers * self.num_experts * mlp if self.is_moe else 0.0
        return non_linear + self.layers * per_layer, experts, float(lm_head * BF16_BYTES)

    def kv_bytes_per_token(self, kv_dtype: Dtype = "bf16", tp: int = 1) -> int:
        """KV-cache bytes per token on one GPU of a tensor-parallel group of `tp`: KV heads are
        split across GPUs, and replicated when there are fewer KV heads than GPUs."""
        heads_per_gpu = math.ceil(self.kv_heads / tp)
        return 2 * self.layers * heads_per_gpu * self.head_dim * DTYPE_BYTES[kv_dtype]


# Ranges a config.json's shape values must fall in (far above any released model; they keep a
# typo such as an extra zero from reaching the cost model as an absurd number).
MAX_LAYERS = 1_000
MAX_HIDDEN_SIZE = 1_000_000
MAX_HEADS = 100_000
MAX_HEAD_DIM = 100_000
MAX_INTERMEDIATE_SIZE = 10_000_000
MAX_VOCAB_SIZE = 10_000_000
MAX_POSITION_EMBEDDINGS = 100_000_000
MAX_EXPERTS = 100_000


def _count(lo: int, hi: int) -> Any:
    """An integer in [lo, hi]: JSON strings, floats, booleans, null and NaN are refused (a
    config with "32" or 32.5 heads is broken, not a model to price)."""

    def check(v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int):
            what = "a positive integer" if lo == 1 else f"an integer >= {lo}"
            raise ValueError(f"must be {what}, got {echo(v)}")
        if v < lo:
            raise ValueError(f"must be {'a positive integer' if lo == 1 else f'>= {lo}'}, got {v}")
        if v > hi:
            raise ValueError(f"must be at most {hi:,}, got {v:,}")
        return v

    return Annotated[int, BeforeValidator(check)]


def _flag(v: Any) -> bool:
    if not isinstance(v, bool):
        raise ValueError(f"must be true or false, got {echo(v)}")
    return v


Flag = Annotated[bool, BeforeValidator(_flag)]


class HfConfig(BaseModel):
    """The keys of a Hugging Face config.json the catalog reads, validated (other keys are
    ignored). Counts are JSON integers in the ranges above; optional ones may be null/absent."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    num_attention_heads: _count(1, MAX_HEADS)  # type: ignore[valid-type]
    hidden_size: _count(1, MAX_HIDDEN_SIZE)  # type: ignore[valid-type]
    num_hidden_layers: _count(1, MAX_LAYERS)  # type: ignore[valid-type]
    vocab_size: _count(1, MAX_VOCAB_SIZE)  # type: ignore[valid-type]
    max_position_embeddings: _count(1, MAX_POSITION_EMBEDDINGS)  # type: ignore[valid-type]
    intermediate_size: _count(1, MAX_INTERMEDIATE_SIZE) | None = None  # type: ignore[valid-type]
    head_dim: _count(1, MAX_HEAD_DIM) | None = None  # type: ignore[valid-type]
    num_key_value_heads: _count(1, MAX_HEADS) | None = None  # type: ignore[valid-type]
    num_experts: _count(0, MAX_EXPERTS) | None = None  # type: ignore[valid-type]
    num_local_experts: _count(0, MAX_EXPERTS) | None = None  # type: ignore[valid-type]
    moe_intermediate_size: _count(1, MAX_INTERMEDIATE_SIZE) | None = None  # type: ignore[valid-type]
    num_experts_per_tok: _count(0, MAX_EXPERTS) | None = None  # type: ignore[valid-type]
    experts_per_token: _count(0, MAX_EXPERTS) | None = None  # type: ignore[valid-type]
    decoder_sparse_step: _count(0, MAX_LAYERS) | None = None  # type: ignore[valid-type]
    tie_word_embeddings: Flag | None = None
    attention_bias: Flag | None = None
    model_type: str | None = None
    quantization_config: Any = None
    layer_types: list[str] | None = None
    mlp_only_layers: list[Any] | None = None


def spec_from_config(name: str, config: dict[str, Any], field: str = "model") -> ModelSpec:
    """Build a ModelSpec from config.json content (Llama, Qwen2/3, Mistral, Mixtral, Qwen3-MoE).
    Errors are one InvalidInput on `field` naming the key: `config.json: num_attention_heads:
    must be a positive integer, got 'abc'`."""
    if not isinstance(config, dict):
        raise InvalidInput(field, f"{name}: not a config.json object")
    try:
        c = HfConfig.model_validate(config)
    except ValidationError as exc:
        e = error_to_invalid_input(exc, "")
        reason = "is missing" if exc.errors()[0]["type"] == "missing" else e.reason
        raise InvalidInput(field, f"{name}: {e.field}: {reason}") from None

    def bad(key: str, reason: str) -> InvalidInput:
        return InvalidInput(field, f"{name}: {key}: {reason}")

    heads, hidden = c.num_attention_heads, c.hidden_size
    if c.head_dim is not None:
        head_dim = c.head_dim
    elif hidden % heads:
        raise bad("head_dim", f"absent, and hidden_size {hidden} is not a multiple of {heads} heads")
    else:
        head_dim = hidden // heads
    kv = c.num_key_value_heads if c.num_key_value_heads is not None else heads
    if heads % kv:
        raise bad("num_key_value_heads", f"must divide num_attention_heads ({heads}), got {kv}")
    experts = c.num_experts or c.num_local_experts or 0
    model_type = c.model_type or ""
    if experts:
        per_expert = c.moe_intermediate_size or c.intermediate_size
        if per_expert is None:
            raise bad("moe_intermediate_size", "is missing (nor is there an intermediate_size)")
        active = c.num_experts_per_tok or c.experts_per_token or 0
        if not 0 < active <= experts:
            raise bad("num_experts_per_tok", f"a MoE config needs 1 .. {experts} (num_experts), got {active}")
        if c.mlp_only_layers or (c.decoder_sparse_step if c.decoder_sparse_step is not None else 1) != 1:
            raise InvalidInput(
                field, f"{echo(name)}: MoE models with dense layers interleaved are not supported"
            )
    else:
        if c.intermediate_size is None:
            raise bad("intermediate_size", "is missing")
        per_expert = c.intermediate_size
        active = 0
    if c.quantization_config:
        raise InvalidInput(
            field, f"{echo(name)} ships pre-quantized weights; pass its bf16 config and --weight-dtype"
        )
    if c.layer_types and any(t != "full_attention" for t in c.layer_types):
        raise InvalidInput(
            field, f"{echo(name)} uses sliding-window layers, which the KV model does not cover yet"
        )
    return ModelSpec(
        name=name,
        layers=c.num_hidden_layers,
        hidden_size=hidden,
        attention_heads=heads,
        kv_heads=kv,
        head_dim=head_dim,
        intermediate_size=per_expert,
        vocab_size=c.vocab_size,
        tie_word_embeddings=bool(c.tie_word_embeddings),
        max_position_embeddings=c.max_position_embeddings,
        attention_bias=bool(c.attention_bias) or model_type == "qwen2",
        qk_norm=model_type.startswith("qwen3"),
        num_experts=experts,
        experts_per_token=active,
    )


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
    try:
        exists = path.exists()
    except (OSError, ValueError):
        exists = False
    if name.endswith(".json") or exists:
        from planner.files import CONFIG_JSON, read_text

        text = read_text(path, field, CONFIG_JSON, missing=f"no such config file: {echo(name)}")
        try:
            config = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as exc:
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise InvalidInput(field, f"cannot read {name} as config.json: {why}") from None
        if not isinstance(config, dict):
            raise InvalidInput(field, f"{name} is not a config.json object")
        return spec_from_config(path.name, config, field)
    raise InvalidInput(
        field, f"unknown model {echo(name)}; valid: {', '.join(model_names())} (or a config.json path)"
    )
