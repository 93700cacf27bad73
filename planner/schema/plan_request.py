"""What `capplan plan` is asked: one schema for the YAML file, `api.plan(...)` and the gRPC
`PlanRequest` (docs/plan.md). Every number has its range in the field's description; bad input
is an InvalidInput naming the dotted key the user wrote (`candidates.tensor_parallel_sizes[1]`).

    model: Qwen/Qwen3-8B
    slo: {ttft_p99_ms: 500, itl_p99_ms: 50}
    workload: {...}                         # exactly evaluate's workload (rates or buckets, or a trace)
    candidates: {gpus: [h100-sxm], tensor_parallel_sizes: [1, 2, 4, 8], disaggregation: auto}
    price_list: runpod-secure-2026-09-25     # the catalog's prices: one source, one date
    pricing: {h100-sxm: {usd_per_gpu_hour: 2.49, reserved_usd_per_gpu_hour: 1.85}}
    inventory: {h200-sxm: 16}
    headroom: 0.1
    availability: {min_replicas: 2, spare_replicas: 0}
    solver: {time_limit_s: 10}
    max_model_len: 16384                    # optional; default: the workload's longest request, rounded up
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from planner.catalog.models import Dtype
from planner.catalog.prices import DEFAULT_PRICE_LIST
from planner.catalog.quantization import DEFAULT_GROUP_SIZE, GroupSize, WeightDtype
from planner.costmodel.expert_parallel import MAX_ROUTING_SKEW
from planner.costmodel.lora import LoraConfig
from planner.costmodel.multinode import MAX_PIPELINE_PARALLEL
from planner.costmodel.profiles import DEFAULT_PROFILE
from planner.costmodel.speculative import SpeculativeConfig
from planner.deployment import (
    MAX_KV_TRANSFER_BANDWIDTH_BYTES_PER_S,
    MAX_KV_TRANSFER_LATENCY_S,
    MAX_MAX_MODEL_LEN,
    MIN_KV_TRANSFER_BANDWIDTH_BYTES_PER_S,
    MIN_MAX_MODEL_LEN,
)
from planner.errors import InvalidInput
from planner.schema.inputs import (
    MAX_LATENCY_MS,
    MAX_TP,
    MAX_USD_PER_GPU_HOUR,
    WorkloadInput,
    read_mapping_file,
    validate_request,
)
from planner.vllm_defaults import GPU_MEMORY_UTILIZATION
from planner.workload import Workload
from solvers.milp_data import MAX_BUCKETS, MAX_SPARE_REPLICAS, MAX_TIME_LIMIT_S

__all__ = [
    "BUDGET_MAX_TOKENS",
    "BUDGET_MIN_TOKENS",
    "COARSE_BUDGETS",
    "MAX_BUCKETS",
    "Availability",
    "CandidateSpace",
    "GpuPrice",
    "PlanRequest",
    "PlanSlo",
    "SolverOptions",
]

_CONFIG = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

# The token budgets (max_num_batched_tokens) the search covers by default: the coarse grid 512,
# 1024, ..., 16384, refined between its points (docs/plan.md). The service's admission bounds a
# plan's work by its size (planner/server/policy.py), so it stands here, with the request.
BUDGET_MIN_TOKENS = 512
BUDGET_MAX_TOKENS = 16384
COARSE_BUDGETS = tuple(BUDGET_MIN_TOKENS << i for i in range(6))
assert COARSE_BUDGETS[-1] == BUDGET_MAX_TOKENS
MAX_TENSOR_PARALLEL = MAX_TP
MAX_INVENTORY_GPUS = 1_000_000
MAX_HEADROOM = 10.0
MAX_BUDGET_TOKENS = 1_048_576
MAX_SEQS = 65_536
MAX_AVAILABILITY_REPLICAS = MAX_SPARE_REPLICAS  # what the MILP takes
# A plan's forecast has at most solvers.milp_data.MAX_BUCKETS buckets (a leap year of hours,
# what the MILP sizes): a written forecast over it is refused at validation (check_buckets), one
# derived from a trace when the plan reads it (planner/plan/pipeline.py).
# A plan whose demand needs one replica keeps a second: a restart, an upgrade or a lost node must
# not stop a production service (docs/plan.md, "Availability").
DEFAULT_MIN_REPLICAS = 2

TensorParallel = Annotated[int, Field(ge=1, le=MAX_TP)]
PipelineParallel = Annotated[int, Field(ge=1, le=MAX_PIPELINE_PARALLEL)]
BudgetTokens = Annotated[int, Field(ge=64, le=MAX_BUDGET_TOKENS)]
Seqs = Annotated[int, Field(ge=1, le=MAX_SEQS)]
Threshold = Annotated[int, Field(ge=0, le=MAX_BUDGET_TOKENS)]


# Speculative decoding's k a plan tries when the request gives speculative_decoding without a k
# or a candidates.num_speculative_tokens list (0 = off; planner.plan.speculative_k)
DEFAULT_SPECULATIVE_TOKENS: tuple[int, ...] = (0, 1, 2, 3, 4, 5)

class PlanSlo(BaseModel):
    """p99 targets in milliseconds; at least TTFT or ITL."""

    model_config = _CONFIG
    ttft_p99_ms: float | None = Field(
        default=None, gt=0, le=MAX_LATENCY_MS, description="time to first token, p99, ms; (0, 3.6e6]"
    )
    itl_p99_ms: float | None = Field(
        default=None, gt=0, le=MAX_LATENCY_MS, description="inter-token latency, p99, ms; (0, 3.6e6]"
    )
    e2e_p99_ms: float | None = Field(
        default=None,
        gt=0,
        le=MAX_LATENCY_MS,
        description="end-to-end latency, p99, ms; (0, 3.6e6]; estimated as TTFT p99 + (p99 answer - 1) x "
        "the mean decode step; colocated candidates only",
    )

    @model_validator(mode="after")
    def _one_target(self) -> PlanSlo:
        if self.ttft_p99_ms is None and self.itl_p99_ms is None:
            raise ValueError("give ttft_p99_ms, itl_p99_ms or both (e2e_p99_ms adds to them)")
        return self


class CandidateSpace(BaseModel):
    """The deployments the planner may choose from. Unset lists: the GPUs with their own measured
    profile that the price list prices (planner/plan/defaults.py), TP 1-8, the budget search
    512..16384 (coarse grid, refined near the best) and `max_num_seqs` from the concurrency the
    SLO allows, up to the KV-cache limit."""

    model_config = _CONFIG
    gpus: tuple[str, ...] | None = Field(
        default=None,
        min_length=1,
        description="GPU catalog names; default: the catalog GPUs with their own measured profile (every GPU "
        "with profile theoretical) that the price list prices",
    )
    allow_transferred_profiles: bool = Field(
        default=False,
        description="with profile auto, also plan on GPUs without a measured profile, timed by the nearest "
        "measured GPU's efficiencies (labelled transferred, with a warning); false: such a GPU is left out "
        "of the defaults and refused in gpus",
    )
    tensor_parallel_sizes: tuple[TensorParallel, ...] = Field(
        default=(1, 2, 4, 8),
        min_length=1,
        description=f"GPUs per replica, each in [1, {MAX_TENSOR_PARALLEL}]",
    )
    disaggregation: Literal["auto", "never", "always"] = Field(
        default="auto", description="auto: colocated and prefill/decode pools compete on cost"
    )
    mixed_gpu_types: bool = Field(
        default=False,
        description="true: several configurations and GPU types may serve together (Mélange-style), and "
        "prefill/decode pools may use different GPU types",
    )
    max_num_batched_tokens: tuple[BudgetTokens, ...] | None = Field(
        default=None,
        min_length=1,
        description="token budgets to consider, each in [64, 1048576]; default: a search "
        f"over [{BUDGET_MIN_TOKENS}, {BUDGET_MAX_TOKENS}]",
    )
    max_num_seqs: tuple[Seqs, ...] | None = Field(
        default=None,
        min_length=1,
        description="max_num_seqs values to consider, each in [1, 65536]; default: the smallest value that "
        "covers the concurrency at the SLO capacity, up to the KV-cache limit",
    )
    long_prefill_token_thresholds: tuple[Threshold, ...] = Field(
        default=(0,),
        min_length=1,
        description="long_prefill_token_threshold values for colocated replicas, each in [0, 1048576]; 0 = off",
    )
    gpu_memory_utilization: float = Field(
        default=GPU_MEMORY_UTILIZATION, gt=0, le=1, description="vLLM's flag; (0, 1]"
    )
    weight_dtype: WeightDtype = Field(
        default="bf16",
        description="weight format: bf16, fp8, int8 (W8A8), int4-awq, int4-gptq (Marlin) or nvfp4 (B200)",
    )
    weight_dtypes: tuple[WeightDtype, ...] | None = Field(
        default=None,
        min_length=1,
        description="weight formats the planner may choose from (a plan per format, the cheapest kept; "
        "overrides weight_dtype); a quantized choice warns that quality is the user's call",
    )
    weight_checkpoints: dict[str, str] = Field(
        default_factory=dict,
        description="per weight format, the pre-quantized checkpoint vLLM serves (a Hugging Face id or "
        "path, e.g. int4-awq: hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4); the model's own "
        "config gives the shapes",
    )
    weight_group_size: GroupSize = Field(
        default=DEFAULT_GROUP_SIZE,
        description="AWQ/GPTQ checkpoints' quantization group: -1 (per channel), 32, 64 or 128",
    )
    kv_dtype: Dtype = "bf16"
    # The ranges of a deployment's link (planner.deployment.Disaggregation), which each
    # disaggregated candidate becomes.
    kv_transfer_bandwidth_bytes_per_s: float = Field(
        default=50e9,
        ge=MIN_KV_TRANSFER_BANDWIDTH_BYTES_PER_S,
        le=MAX_KV_TRANSFER_BANDWIDTH_BYTES_PER_S,
        description="prefill -> decode link per GPU, bytes/s; [1e6, 1e13]",
    )
    kv_transfer_latency_s: float = Field(
        default=1e-3, ge=0, le=MAX_KV_TRANSFER_LATENCY_S, description="per-transfer setup latency, s; [0, 10]"
    )
    pipeline_parallel_sizes: tuple[PipelineParallel, ...] = Field(
        default=(1,),
        min_length=1,
        description=f"pipeline stages per replica (vLLM --pipeline-parallel-size), each in [1, "
        f"{MAX_PIPELINE_PARALLEL}]; a replica is TP x PP GPUs, over several nodes where more than one "
        "node's (docs/multi-node.md)",
    )
    expert_parallel: bool = Field(
        default=False,
        description="MoE models: vLLM --enable-expert-parallel on every candidate of TP > 1 (each GPU holds "
        "whole experts, EP size = TP; planner.costmodel.expert_parallel); the experts split over TP are planned "
        "too and their cost noted, with a warning where cheaper; dense models: ignored",
    )
    routing_skew: float = Field(
        default=1.0,
        ge=1.0,
        le=MAX_ROUTING_SKEW,
        description="with expert_parallel: the load of the most loaded EP rank over the mean, [1, 64] and at most "
        "the EP size; 1.0 = uniform routing. The expert GEMMs and reads of every MoE layer wait for that rank",
    )
    num_speculative_tokens: tuple[int, ...] | None = Field(
        default=None,
        min_length=1,
        description="speculative decoding's k the planner may choose from, each in [0, 16] (0 = off; a plan per "
        "k, the cheapest kept); needs speculative_decoding. Default: speculative_decoding's "
        "num_speculative_tokens if given, else 0..5",
    )

    @field_validator("num_speculative_tokens")
    @classmethod
    def _speculative_ks(cls, v: tuple[int, ...] | None) -> tuple[int, ...] | None:
        from planner.costmodel.speculative import MAX_SPECULATIVE_TOKENS

        if v is None:
            return v
        for i, k in enumerate(v):
            if not 0 <= k <= MAX_SPECULATIVE_TOKENS:
                raise ValueError(f"[{i}] {k}: must be in [0, {MAX_SPECULATIVE_TOKENS}] (0 = off)")
        return tuple(sorted(set(v)))

    @field_validator(
        "tensor_parallel_sizes",
        "max_num_batched_tokens",
        "max_num_seqs",
        "long_prefill_token_thresholds",
        "pipeline_parallel_sizes",
    )
    @classmethod
    def _sorted(cls, v: tuple[int, ...] | None) -> tuple[int, ...] | None:
        return None if v is None else tuple(sorted(set(v)))

    @field_validator("routing_skew")
    @classmethod
    def _skew_needs_ep(cls, v: float, info: ValidationInfo) -> float:
        if v != 1.0 and not info.data.get("expert_parallel", False):
            raise ValueError(
                f"{v:g} applies with expert_parallel: true only (routing skew is modelled for EP)"
            )
        return v

    @field_validator("weight_checkpoints")
    @classmethod
    def _checkpoints(cls, v: dict[str, str]) -> dict[str, str]:
        from planner.catalog.quantization import WEIGHT_DTYPES

        for k, name in sorted(v.items()):
            if k not in WEIGHT_DTYPES:
                raise ValueError(f"{k!r}: not a weight format; valid: {', '.join(WEIGHT_DTYPES)}")
            if not name.strip():
                raise ValueError(f"{k}: the checkpoint name is empty")
        return dict(sorted(v.items()))

    @field_validator("gpus")
    @classmethod
    def _gpus(cls, v: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if v is None:
            return v
        from planner.catalog.gpus import get_gpu

        names = []
        for i, name in enumerate(v):
            try:
                names.append(get_gpu(name).name)
            except InvalidInput as exc:
                raise ValueError(f"[{i}] {exc.reason}") from None
        return tuple(sorted(set(names)))


class GpuPrice(BaseModel):
    """Price overrides for one GPU type, USD per GPU-hour."""

    model_config = _CONFIG
    usd_per_gpu_hour: float | None = Field(
        default=None,
        gt=0,
        le=MAX_USD_PER_GPU_HOUR,
        description="on-demand, USD per GPU-hour; (0, 1000]; default: catalog",
    )
    reserved_usd_per_gpu_hour: float | None = Field(
        default=None,
        gt=0,
        le=MAX_USD_PER_GPU_HOUR,
        description="reserved (billed every hour of the horizon), USD per GPU-hour; (0, 1000]; unset: no "
        "reserved option",
    )


class Availability(BaseModel):
    """Replicas kept for failover, per deployment (each pool of a disaggregated one) in every
    bucket with demand: at least `min_replicas`, and `spare_replicas` beyond those whose capacity
    covers the demand (N+1 with 1)."""

    model_config = _CONFIG
    min_replicas: int = Field(
        default=DEFAULT_MIN_REPLICAS,
        ge=1,
        le=MAX_AVAILABILITY_REPLICAS,
        description=f"fewest replicas of a deployment in a bucket with demand, [1, {MAX_AVAILABILITY_REPLICAS}]; "
        "1: no floor (a single replica has no failover)",
    )
    spare_replicas: int = Field(
        default=0,
        ge=0,
        le=MAX_AVAILABILITY_REPLICAS,
        description=f"replicas beyond those the demand needs, [0, {MAX_AVAILABILITY_REPLICAS}]; 1: N+1",
    )


class SolverOptions(BaseModel):
    model_config = _CONFIG
    time_limit_s: float = Field(
        default=10.0, gt=0, le=MAX_TIME_LIMIT_S, description="MILP wall-clock limit, s; (0, 3600]"
    )
    relative_gap: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="stop once the MILP's relative gap is below this, [0, 1]; null: prove optimality",
    )


class PlanRequest(BaseModel):
    """A planning question. `workload` is evaluate's: planner.workload's schema or a `trace:`
    reference (read when the plan runs, relative paths from its `base_dir`)."""

    model_config = _CONFIG
    model: str = Field(min_length=1, description="catalog model name or a config.json path")
    slo: PlanSlo
    workload: WorkloadInput
    candidates: CandidateSpace = CandidateSpace()
    price_list: str = Field(
        default=DEFAULT_PRICE_LIST,
        min_length=1,
        description="the catalog price list the GPUs are priced from (capplan catalog gpus lists them)",
    )
    pricing: dict[str, GpuPrice] = Field(
        default_factory=dict, description="per GPU type; overrides the price list"
    )
    inventory: dict[str, int] = Field(
        default_factory=dict, description="most GPUs of a type in use at any time, each in [0, 1e6]"
    )
    headroom: float = Field(
        default=0.1,
        ge=0,
        le=MAX_HEADROOM,
        description="capacity kept free above each bucket's demand, a fraction; [0, 10]",
    )
    availability: Availability = Availability()
    solver: SolverOptions = SolverOptions()
    profile: str = Field(
        default=DEFAULT_PROFILE,
        min_length=1,
        description="auto (each GPU's own measured profile; the nearest measured GPU's, transferred, only "
        "with candidates.allow_transferred_profiles), theoretical (the roofline for every GPU), calibrated "
        "(measured only), or a profile file",
    )
    max_model_len: int | None = Field(
        default=None,
        ge=MIN_MAX_MODEL_LEN,
        le=MAX_MAX_MODEL_LEN,
        description=f"vLLM's --max-model-len, tokens (prompt + answer) of the longest request a replica "
        f"accepts; [{MIN_MAX_MODEL_LEN}, the model's max_position_embeddings]; every prompt of the workload "
        "must be shorter (answers are cut at it, as vLLM cuts them). Default: the workload's longest prompt "
        "plus its longest answer, rounded up to a multiple of 1,024, at most the model's context",
    )
    lora: LoraConfig | None = Field(
        default=None,
        description="vLLM --enable-lora on every replica: max_loras adapters (1..256) of max_lora_rank (one of "
        "1, 8, 16, 32, 64, 128, 256, 320, 512) resident per GPU; their buffers leave less KV cache and every "
        "step reads all of them (planner.costmodel.lora). Default: off",
    )
    speculative_decoding: SpeculativeConfig | None = Field(
        default=None,
        description="vLLM --speculative-config on every replica: method (draft, eagle, eagle3, mtp, ngram), "
        "acceptance_rate in (0, 1) (per guessed token) or acceptance_length (vLLM's tokens per step, with "
        "num_speculative_tokens), draft_model (draft: required; eagle/eagle3: the head vLLM loads); the "
        "planner chooses k among candidates.num_speculative_tokens, 0 = off (docs/speculative.md). Default: off",
    )

    @model_validator(mode="after")
    def _speculative_candidates(self) -> PlanRequest:
        if self.candidates.num_speculative_tokens is not None and self.speculative_decoding is None:
            raise ValueError("candidates.num_speculative_tokens needs speculative_decoding (method, acceptance_rate)")
        return self

    @field_validator("price_list")
    @classmethod
    def _price_list(cls, v: str) -> str:
        from planner.catalog.prices import get_price_list

        try:
            return get_price_list(v).name
        except InvalidInput as exc:
            raise ValueError(exc.reason) from None

    @field_validator("pricing")
    @classmethod
    def _pricing(cls, v: dict[str, GpuPrice]) -> dict[str, GpuPrice]:
        return _by_gpu(v)

    @field_validator("inventory")
    @classmethod
    def _inventory(cls, v: dict[str, int]) -> dict[str, int]:
        for k, n in sorted(v.items()):
            if not 0 <= n <= MAX_INVENTORY_GPUS:
                raise ValueError(f"{k}: must be in [0, {MAX_INVENTORY_GPUS}] GPUs, got {n}")
        return _by_gpu(v)


_V = TypeVar("_V")


def _by_gpu(values: dict[str, _V]) -> dict[str, _V]:
    """`values` keyed by catalog GPU names. Names differing only in case (or spelling) name one
    GPU: given both, one value would silently replace the other, so that is refused."""
    out: dict[str, _V] = {}
    written: dict[str, str] = {}
    for k, value in sorted(values.items()):
        name = _gpu_key(k)
        if name in written:
            raise ValueError(f"{written[name]!r} and {k!r} both name GPU {name}; give it once")
        out[name], written[name] = value, k
    return out


def _gpu_key(name: str) -> str:
    from planner.catalog.gpus import get_gpu

    try:
        return get_gpu(name).name
    except InvalidInput as exc:
        raise ValueError(f"{name}: {exc.reason}") from None


def check_buckets(n_buckets: int, span_s: float, field: str, fix: str) -> None:
    """InvalidInput at `field` for a forecast of more buckets than the MILP sizes (MAX_BUCKETS)."""
    if n_buckets > MAX_BUCKETS:
        raise InvalidInput(
            field, f"{n_buckets:,} buckets over {span_s:.4g} s; a plan sizes at most {MAX_BUCKETS:,} ({fix})"
        )


def parse_plan_request(data: PlanRequest | Mapping[str, Any]) -> PlanRequest:
    """A PlanRequest as is, or a mapping (YAML/JSON) validated into one; a written forecast of
    more buckets than the MILP sizes is refused here, before any search."""
    req = validate_request(PlanRequest, data)
    wl = req.workload
    if isinstance(wl, Workload) and wl.arrivals.buckets is not None:
        span_s = math.fsum(b.duration_s for b in wl.arrivals.buckets)
        check_buckets(len(wl.arrivals.buckets), span_s, "workload.arrivals.buckets", "merge buckets")
    return req


def load_plan_file(path: str | Path) -> PlanRequest:
    """Read and validate a plan file (YAML; JSON is YAML too)."""
    return parse_plan_request(read_mapping_file(path, "model:, slo: and workload:"))
