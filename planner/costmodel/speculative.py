"""Speculative decoding served by vLLM (`--speculative-config '{"method": ..., "num_speculative_tokens":
k, "model": ...}'`): what a verify step costs, what the proposer adds to it and to the GPU's
memory, and how many tokens a decode step yields (docs/speculative.md).

Tokens per step. Each decode step the proposer guesses k tokens; the target runs the last
accepted token and the k guesses (k + 1 tokens per decoding sequence) and keeps the guesses up
to the first rejection plus one token of its own. With each guess accepted independently with
probability alpha (the per-token acceptance rate), the tokens a step yields are a geometric
number truncated at k + 1, of mean (Leviathan, Kalman and Matias 2023, "Fast Inference from
Transformers via Speculative Decoding", eq. 1):

    E = (1 - alpha^(k+1)) / (1 - alpha)

vLLM's `spec_decode_acceptance_length` is this E (1 + accepted / drafts), and its
`spec_decode_acceptance_rate` the accepted share of the drafted tokens, E - 1 over k.

The verify step. Every decoding sequence runs k + 1 query tokens through the target: its linear
layers, all-reduces, sampled logits (the rejection sampler reads the target's probabilities at
every position) and attention pairs grow k + 1 fold, while its KV is read once
(`StepCoefficients.speculative_tokens`, k).

The proposer (vllm/v1/spec_decode/eagle.py, `EagleProposer.propose` and `load_model`, v0.10 and
v0.11): its first pass runs every token of the step (each prompt chunk, each decode's k + 1),
its k - 1 later passes one token per decode, and each of its k passes computes one row of
logits per decode. Per pass it reads its weights and its own KV of the context. How big it is:

* `eagle` (vllm/model_executor/models/llama_eagle.py): one decoder layer of the target's shape
  and the `fc` projection (2 h -> h); the embedding and the lm_head are the target's
  (`load_model` shares them; method != eagle3), so they add no memory, but each pass still
  reads the whole lm_head (V h) for its logits.
* `eagle3` (llama_eagle3.py): one decoder layer whose q/k/v projections take 2 h inputs (the
  token's embedding beside the hidden state), the `fc` fusing three target layers' hidden
  states (3 h -> h) and its own lm_head over a reduced draft vocabulary (`draft_vocab_size`,
  32,000 in the published EAGLE-3 heads, e.g. yuhuili/EAGLE3-LLaMA3.1-Instruct-8B), not shared.
* `mtp` (deepseek_mtp.py and kin): the checkpoint's own next-token layer, one decoder layer
  of the target's shape with its `eh_proj` (2 h -> h), lm_head shared; passes beyond the
  checkpoint's one layer reuse it.
* `draft` (vLLM's `draft_model`): a whole smaller model, its own weights and lm_head, every
  pass through all its layers (planner.catalog.models.get_model of `draft_model`).
* `ngram`: prompt lookup on the CPU, nothing on the GPU.

The proposer runs at the target's TP (vLLM's `draft_tensor_parallel_size` default), in bf16,
and its KV blocks come out of the same KV budget as the target's: a token of context costs the
target's KV plus the proposer's layers' (vLLM allocates the draft's attention layers in the same
KV cache groups), so the cache holds fewer tokens. Heads of MoE targets are taken as one dense
layer of the target's expert width (an EAGLE head is a dense layer).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from planner.catalog.gpus import GpuSpec
from planner.catalog.models import Dtype, ModelSpec
from planner.costmodel.coefficients import StepCoefficients
from planner.costmodel.profile import Profile
from planner.errors import InvalidInput

__all__ = [
    "DEFAULT_EAGLE3_DRAFT_VOCAB",
    "MAX_SPECULATIVE_TOKENS",
    "ProposerCost",
    "SpeculativeConfig",
    "SpeculativeMethod",
    "acceptance_rate_from_length",
    "draft_shape",
    "expected_tokens_per_step",
    "proposer_cost",
    "speculative_coefficients",
    "speculative_summary",
    "vllm_method",
    "with_measured_acceptance",
]

SpeculativeMethod = Literal["draft", "eagle", "eagle3", "mtp", "ngram"]
# A planning bound, not vLLM's (vLLM sets none): past 16 guesses per step E gains < 1% at any
# acceptance rate below 0.75, and vLLM's rejection sampler is tuned for small k.
MAX_SPECULATIVE_TOKENS = 16
DEFAULT_EAGLE3_DRAFT_VOCAB = 32_000  # draft_vocab_size of the published EAGLE-3 heads
ACTIVATION_BYTES = 2  # bf16 activations in the proposer's all-reduces (as steptime's)
PROPOSER_BYTES = 2  # the proposer loads in bf16 (speculative_config.quantization unset)
# vLLM's --speculative-config method names for the request's methods (serve-args-0.11.0.json)
_VLLM_METHOD: dict[str, str] = {
    "draft": "draft_model", "eagle": "eagle", "eagle3": "eagle3", "mtp": "mtp", "ngram": "ngram",
}  # fmt: skip
# bisection steps for alpha from an acceptance length: 2^-60 of (0, 1)
_BISECTION_STEPS = 60


class SpeculativeConfig(BaseModel):
    """`speculative_decoding:` of a deployment or plan request. `method`: draft | eagle | eagle3 |
    mtp | ngram; `num_speculative_tokens` k in 1..16 (a plan request may leave it out and list
    `candidates.num_speculative_tokens` instead); `acceptance_rate` alpha in (0, 1), the
    probability each guessed token is accepted (or `acceptance_length`, vLLM's mean tokens per
    step, in (1, k + 1), converted with k); `draft_model`: the draft's catalog name or config.json
    (method draft: required) or the head's Hugging Face id (eagle, eagle3: what vLLM loads);
    `draft_vocab_size` (eagle3 only, default 32,000)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
    method: SpeculativeMethod
    num_speculative_tokens: int | None = Field(default=None, ge=1, le=MAX_SPECULATIVE_TOKENS)
    acceptance_rate: float | None = Field(default=None, gt=0.0, lt=1.0)
    acceptance_length: float | None = Field(default=None, gt=1.0, le=MAX_SPECULATIVE_TOKENS + 1)
    acceptance_from: str | None = Field(default=None, min_length=1)
    draft_model: str | None = Field(default=None, min_length=1)
    draft_vocab_size: int | None = Field(default=None, ge=1, le=1_048_576)

    @model_validator(mode="after")
    def _consistent(self) -> SpeculativeConfig:
        given = [x is not None for x in (self.acceptance_rate, self.acceptance_length, self.acceptance_from)]
        if sum(given) != 1:
            raise ValueError(
                "give exactly one of acceptance_rate (0..1), acceptance_length (tokens per step) and "
                "acceptance_from (a vllm bench serve --save-result file)"
            )
        if self.acceptance_length is not None and self.num_speculative_tokens is None:
            raise ValueError("acceptance_length needs num_speculative_tokens (the k it was measured at)")
        k = self.num_speculative_tokens
        if self.acceptance_length is not None and k is not None and self.acceptance_length >= k + 1:
            raise ValueError(f"acceptance_length must be below k + 1 = {k + 1}")
        if self.method == "draft" and self.draft_model is None:
            raise ValueError("method draft needs draft_model (a catalog name or a config.json path)")
        if self.method in ("mtp", "ngram") and self.draft_model is not None:
            raise ValueError(f"method {self.method} takes no draft_model (vLLM uses the target's own)")
        if self.draft_vocab_size is not None and self.method != "eagle3":
            raise ValueError("draft_vocab_size applies to eagle3 heads only")
        return self

    @property
    def alpha(self) -> float:
        """The per-token acceptance probability (given, or from the acceptance length at k;
        `acceptance_from` is read first: `with_measured_acceptance`)."""
        if self.acceptance_rate is not None:
            return self.acceptance_rate
        if self.acceptance_from is not None:
            raise ValueError("acceptance_from is read by with_measured_acceptance before alpha")
        assert self.acceptance_length is not None and self.num_speculative_tokens is not None
        return acceptance_rate_from_length(self.acceptance_length, self.num_speculative_tokens)

    def at(self, k: int) -> SpeculativeConfig:
        """This configuration with k guesses per step (alpha kept)."""
        return self.model_copy(update={"num_speculative_tokens": k, "acceptance_rate": self.alpha,
                                       "acceptance_length": None})  # fmt: skip


def vllm_method(method: SpeculativeMethod) -> str:
    """vLLM 0.11's `method` value for the request's method name."""
    return _VLLM_METHOD[method]


def expected_tokens_per_step(alpha: float, k: int) -> float:
    """E = (1 - alpha^(k+1)) / (1 - alpha): the mean tokens a decode step yields (k = 0: 1)."""
    if not 0.0 <= alpha < 1.0 or k < 0:
        raise ValueError(f"alpha {alpha} outside [0, 1) or k {k} < 0")
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def acceptance_rate_from_length(length: float, k: int) -> float:
    """alpha with E(alpha, k) = `length` (E rises from 1 at alpha 0 to k + 1 at alpha 1), by
    bisection (60 halvings: exact to double precision)."""
    if not 1.0 < length < k + 1:
        raise ValueError(f"acceptance length {length} outside (1, {k + 1})")
    lo, hi = 0.0, 1.0
    for _ in range(_BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        if expected_tokens_per_step(mid, k) < length:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


@dataclass(frozen=True)
class ProposerCost:
    """One proposer pass on one GPU of the TP group: the weights it reads, its FLOPs per token
    and per logits row, its KV per context token (per pass), the all-reduces of its layers, and
    the memory it adds to the target's (its weights not shared)."""

    weight_bytes_per_pass: float
    flops_per_token: float
    logits_flops_per_row: float
    kv_bytes_per_token: float
    layers: int
    hidden_size: int
    resident_bytes: float


def _head_layer_params(model: ModelSpec, qkv_inputs: int) -> float:
    """One dense decoder layer of the target's shape (q/k/v taking `qkv_inputs` x h inputs)."""
    h = model.hidden_size
    qkv_extra = (qkv_inputs - 1) * h * (model.query_dim + 2 * model.kv_heads * model.head_dim)
    return model.attention_params_per_layer + qkv_extra + 3 * h * model.intermediate_size + 2 * h


def proposer_cost(
    model: ModelSpec, spec: SpeculativeConfig, tp: int, kv_dtype: Dtype, draft: ModelSpec | None = None
) -> ProposerCost:
    """The proposer of `spec` beside `model` at TP `tp` (module docstring); `draft`: the draft
    model's shape (method draft)."""
    h, v = model.hidden_size, model.vocab_size
    kv_layer = model.kv_bytes_per_token(kv_dtype, tp) / model.layers
    if spec.method == "ngram":
        return ProposerCost(0.0, 0.0, 0.0, 0.0, 0, h, 0.0)
    if spec.method == "draft":
        assert draft is not None, "method draft needs the draft model's shape"
        lm_head = draft.vocab_size * draft.hidden_size
        body = draft.active_params - lm_head * (1 if draft.tie_word_embeddings else 2)
        return ProposerCost(
            weight_bytes_per_pass=(draft.total_params - (0 if draft.tie_word_embeddings else lm_head))
            * PROPOSER_BYTES
            / tp,
            flops_per_token=2.0 * body / tp,
            logits_flops_per_row=2.0 * lm_head / tp,
            kv_bytes_per_token=float(draft.kv_bytes_per_token(kv_dtype, tp)),
            layers=draft.layers,
            hidden_size=draft.hidden_size,
            resident_bytes=draft.total_params * PROPOSER_BYTES / tp,
        )
    if spec.method == "eagle3":
        vocab = spec.draft_vocab_size or DEFAULT_EAGLE3_DRAFT_VOCAB
        own = _head_layer_params(model, 2) + 3 * h * h + h  # layer, fc, final norm
        lm_head, shared_head = vocab * h, 0.0
    else:  # eagle, mtp: fc / eh_proj 2h -> h, lm_head shared with the target
        own = _head_layer_params(model, 1) + 2 * h * h + h
        lm_head, shared_head = v * h, float(v * h)
    return ProposerCost(
        weight_bytes_per_pass=(own + lm_head) * PROPOSER_BYTES / tp,
        flops_per_token=2.0 * own / tp,
        logits_flops_per_row=2.0 * lm_head / tp,
        kv_bytes_per_token=kv_layer,
        layers=1,
        hidden_size=h,
        resident_bytes=(own + lm_head - shared_head) * PROPOSER_BYTES / tp,
    )


def speculative_coefficients(
    k: StepCoefficients,
    spec: SpeculativeConfig,
    proposer: ProposerCost,
    gpu: GpuSpec,
    profile: Profile,
    tp: int,
) -> StepCoefficients:
    """The target's step coefficients `k` with speculative decoding at `spec`'s k: the verify step
    (k + 1 query tokens per decode, `speculative_tokens` k), the tokens a step yields
    (`accepted_tokens_per_step`, E - 1) and the proposer's passes folded into the existing terms:

        overhead_s              + k (W_p / BW + all-reduce latency of its layers)
        elementwise_s_per_token + (2 P_p / F + all-reduce per token): its first pass, every token
        sequence_s              + (k - 1) (2 P_p / F + all-reduce) + k 2 V_p h / F per decode
        kv_bytes_per_token      + k KV_p: its KV read once a pass (beside the target's, in the
                                  memory side of the step's max: decode steps are memory-bound)

    (W_p, P_p, KV_p, V_p: `proposer`'s weight bytes, FLOPs per token, KV per token and logits
    FLOPs per row; F the bf16 matmul rate, BW the achieved bandwidth). Its compute and weight
    reads are added, not overlapped with the target's: the proposer runs after the verify pass.
    The prefix re-read and the decode KV parallelism stay the target's."""
    n_spec = spec.num_speculative_tokens
    if n_spec is None:
        raise ValueError("speculative_coefficients needs num_speculative_tokens")
    e = expected_tokens_per_step(spec.alpha, n_spec)
    matmul = gpu.matmul_flops("bf16") * profile.eta_matmul
    if tp > 1 and proposer.layers:
        per_token = (2 * (tp - 1) / tp) * ACTIVATION_BYTES * proposer.hidden_size / gpu.interconnect_bandwidth
        ar_token = 2 * proposer.layers * per_token
        ar_fixed = 2 * proposer.layers * gpu.interconnect_latency
    else:
        ar_token = ar_fixed = 0.0
    token_s = proposer.flops_per_token / matmul + ar_token
    return dataclasses.replace(
        k,
        overhead_s=k.overhead_s + n_spec * (proposer.weight_bytes_per_pass * k.s_per_byte + ar_fixed),
        elementwise_s_per_token=k.elementwise_s_per_token + token_s,
        sequence_s=k.sequence_s + (n_spec - 1) * token_s + n_spec * proposer.logits_flops_per_row / matmul,
        kv_bytes_per_token=k.kv_bytes_per_token + n_spec * proposer.kv_bytes_per_token,
        speculative_tokens=float(n_spec),
        accepted_tokens_per_step=e - 1.0,
    )


def draft_shape(spec: SpeculativeConfig | None, field: str) -> ModelSpec | None:
    """The draft model's shape for method draft (a catalog name or a config.json path; errors
    name `field`); None for the other methods and without speculative decoding."""
    if spec is None or spec.method != "draft" or spec.draft_model is None:
        return None
    from planner.catalog.models import get_model

    return get_model(spec.draft_model, field)


def speculative_summary(
    spec: SpeculativeConfig, proposer_bytes: float, kv_cache_tokens: int
) -> dict[str, object]:
    """A report's `speculative_decoding` block (schema SpeculativeSummary)."""
    k = spec.num_speculative_tokens
    assert k is not None, "a deployment's speculative_decoding has its k"
    return {
        "method": spec.method,
        "num_speculative_tokens": k,
        "acceptance_rate": spec.alpha,
        "tokens_per_step": expected_tokens_per_step(spec.alpha, k),
        "proposer_gib": proposer_bytes / 2.0**30,
        "kv_cache_tokens": kv_cache_tokens,
    }


def with_measured_acceptance(
    spec: SpeculativeConfig | None, base: Path | None, field: str
) -> SpeculativeConfig | None:
    """`spec` with `acceptance_from` read (relative paths from `base`): alpha from the run's
    acceptance length at the k it ran with (planner.measurements.vllm_bench), k that one unless
    given. Unchanged without `acceptance_from`."""
    if spec is None or spec.acceptance_from is None:
        return spec
    from planner.measurements.vllm_bench import spec_decode_acceptance

    path = Path(spec.acceptance_from)
    if base is not None and not path.is_absolute():
        path = base / path
    length, k_run = spec_decode_acceptance(path, f"{field}.acceptance_from")
    if not 1.0 < length < k_run + 1:
        raise InvalidInput(
            f"{field}.acceptance_from", f"{path}: acceptance length {length:g} outside (1, {k_run + 1})"
        )
    return spec.model_copy(
        update={
            "acceptance_rate": acceptance_rate_from_length(length, k_run),
            "acceptance_from": None,
            "num_speculative_tokens": spec.num_speculative_tokens or k_run,
        }
    )
