"""The requests about a model on a GPU that take no workload: `analyze` (the seed article's
roofline analyses), `calibrate` (a profile fitted to measured step times) and `catalog` (the GPUs
and models known). Their reports: planner/schema/analysis_reports.py, catalog_reports.py.
planner/schema/inputs.py re-exports every name here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from planner.catalog.models import Dtype
from planner.catalog.quantization import WeightDtype
from planner.costmodel import fit_data
from planner.deployment import MAX_TP, MAX_USD_PER_GPU_HOUR
from planner.errors import InvalidInput, echo
from planner.schema.request_common import (
    MAX_CONCURRENCY,
    MAX_CONTEXT_TOKENS,
    MAX_LATENCY_MS,
    MAX_LIST_ITEMS,
    MAX_MEASUREMENT_ROWS,
    MAX_TOKEN_BUDGET,
    MAX_TOKENS_PER_DAY,
)
from planner.vllm_defaults import GPU_MEMORY_UTILIZATION
from planner.workload import LengthDistribution

_CONFIG = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


# --- analyze -------------------------------------------------------------------------------------

ContextTokens = Annotated[int, Field(ge=1, le=MAX_CONTEXT_TOKENS)]
Concurrency = Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)]


class ConcurrencyAnalysis(BaseModel):
    """Decode step time, per-user and per-GPU tokens/s and cost per concurrency (continuous
    batching); rows whose KV cache does not fit are marked, not refused."""

    model_config = _CONFIG
    context_tokens: ContextTokens
    concurrency: list[Concurrency] = Field(min_length=1, max_length=MAX_LIST_ITEMS)
    gpu_memory_utilization: float = Field(default=GPU_MEMORY_UTILIZATION, gt=0, le=1)


class StaticBatchingAnalysis(BaseModel):
    """`generate()`-style batches wait for their longest answer: slot utilization and cost vs
    continuous batching. `output_lengths` is a workload length distribution."""

    model_config = _CONFIG
    context_tokens: ContextTokens
    batch: list[Concurrency] = Field(min_length=1, max_length=MAX_LIST_ITEMS)
    output_lengths: LengthDistribution


class ChunkedPrefillAnalysis(BaseModel):
    """A long prompt arriving among `decodes` running decodes: its prefill time vs the worst ITL
    the others see, per size. `reading: chunk` (the seed's): each size is the prompt's chunk and
    the decodes ride on top; `budget` (vLLM V1): each size is max_num_batched_tokens, decodes
    first. A size of 0 is the prompt unchunked, in one step."""

    model_config = _CONFIG
    prompt_tokens: ContextTokens
    decodes: Concurrency
    context_tokens: ContextTokens
    reading: Literal["chunk", "budget"] = "chunk"
    sizes_tokens: list[Annotated[int, Field(ge=0, le=MAX_TOKEN_BUDGET)]] = Field(
        min_length=1, max_length=MAX_LIST_ITEMS
    )


class PrefillAnalysis(BaseModel):
    """Prefill throughput and cost per input token, the prompt in one step."""

    model_config = _CONFIG
    prompt_tokens: ContextTokens


class UtilizationAnalysis(BaseModel):
    """What idle GPUs cost at a daily volume, vs the floor of GPUs kept busy at
    `floor_concurrency` (the seed's 64)."""

    model_config = _CONFIG
    context_tokens: ContextTokens
    output_tokens_per_day: float = Field(gt=0, le=MAX_TOKENS_PER_DAY)
    floor_concurrency: Concurrency = 64


class KvCapacityAnalysis(BaseModel):
    """KV bytes per token, cache size and the sequences of `context_tokens` that fit. Unset
    scheduler values take vLLM's defaults for the GPU (they size the activation reserve)."""

    model_config = _CONFIG
    context_tokens: ContextTokens
    gpu_memory_utilization: float = Field(default=GPU_MEMORY_UTILIZATION, gt=0, le=1)
    max_num_batched_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKEN_BUDGET)
    max_num_seqs: Concurrency | None = None


ANALYSES = ("concurrency", "static_batching", "chunked_prefill", "prefill", "utilization", "kv_capacity")
AnalysisName = Literal[
    "concurrency", "static_batching", "chunked_prefill", "prefill", "utilization", "kv_capacity"
]


class AnalyzeRequest(BaseModel):
    """One of the seed article's roofline analyses for a model on a GPU: exactly one of the
    analysis fields is set (a proto `oneof`); the rest are common. `profile` defaults to
    theoretical (the article's numbers); `usd_per_gpu_hour` to the catalog's on-demand price
    (used by the analyses that price: concurrency, static_batching, prefill, utilization)."""

    model_config = _CONFIG
    model: str = Field(min_length=1)
    gpu: str = Field(min_length=1)
    tp: int = Field(default=1, ge=1, le=MAX_TP)
    weight_dtype: WeightDtype = "bf16"
    kv_dtype: Dtype = "bf16"
    profile: str = Field(default="theoretical", min_length=1)
    usd_per_gpu_hour: float | None = Field(default=None, gt=0, le=MAX_USD_PER_GPU_HOUR)
    concurrency: ConcurrencyAnalysis | None = None
    static_batching: StaticBatchingAnalysis | None = None
    chunked_prefill: ChunkedPrefillAnalysis | None = None
    prefill: PrefillAnalysis | None = None
    utilization: UtilizationAnalysis | None = None
    kv_capacity: KvCapacityAnalysis | None = None

    @property
    def analysis(self) -> AnalysisName:
        """The analysis asked for; InvalidInput unless exactly one is set."""
        given = [name for name in ANALYSES if getattr(self, name) is not None]
        if len(given) != 1:
            field = given[1] if given else "analysis"
            got = f"; got {', '.join(given)}" if given else ""
            raise InvalidInput(field, f"give exactly one analysis: {', '.join(ANALYSES)}{got}")
        return given[0]  # type: ignore[return-value]


# --- calibrate -----------------------------------------------------------------------------------

_Count = Annotated[int, Field(ge=0, le=fit_data.MAX_COUNT)]
_Ms = Annotated[float, Field(gt=0, le=MAX_LATENCY_MS)]


class MeasurementRow(BaseModel):
    """One row of the measurements format (planner/costmodel/fit_data.py): a timing (`kind`
    linear | decode | prefill | chunked_prefill with its shape and times in ms), a measured
    ceiling (`what`, `value`) or facts about the run (`info`: device, model, params, ...)."""

    model_config = _CONFIG
    kind: Literal["info", "ceiling", "linear", "decode", "prefill", "chunked_prefill"]
    tokens: _Count | None = None
    batch: _Count | None = None
    ctx: _Count | None = None
    prompt: _Count | None = None
    chunk: _Count | None = None
    decodes: _Count | None = None
    steps: _Count | None = None
    ms: _Ms | None = None
    prefill_ms: _Ms | None = None
    worst_step_ms: _Ms | None = None
    what: str | None = None
    value: float | None = Field(default=None, gt=0, le=fit_data.MAX_CEILING)
    device: str | None = None
    torch: str | None = None
    model: str | None = None
    gpu: str | None = None
    dtype: str | None = None
    params: float | None = Field(default=None, gt=0, le=fit_data.INFO_MAX["params"])
    kv_bytes_per_token: float | None = Field(default=None, gt=0, le=fit_data.INFO_MAX["kv_bytes_per_token"])
    weights_bytes: float | None = Field(default=None, gt=0, le=fit_data.INFO_MAX["weights_bytes"])


class MeasurementsInput(BaseModel):
    """Measured step times: a file (`path`: the JSON `tools/measure_steps.py` writes, or CSV) or
    the rows inline. A bare string is taken as the path."""

    model_config = _CONFIG
    path: str | None = Field(default=None, min_length=1)
    rows: list[MeasurementRow] | None = Field(default=None, min_length=1, max_length=MAX_MEASUREMENT_ROWS)
    about: str = ""

    @model_validator(mode="before")
    @classmethod
    def _bare_path(cls, data: Any) -> Any:
        return {"path": data} if isinstance(data, str) else data

    @model_validator(mode="after")
    def _one_source(self) -> MeasurementsInput:
        if (self.path is None) == (self.rows is None):
            raise ValueError("give exactly one of path or rows")
        return self


class FixedParameters(BaseModel):
    """Profile parameters held at a value instead of fitted (null: fitted)."""

    model_config = _CONFIG
    eta_bandwidth: float | None = Field(default=None, gt=0, le=1)
    eta_matmul: float | None = Field(default=None, gt=0, le=1)
    eta_attention: float | None = Field(default=None, gt=0, le=1)
    step_overhead_s: float | None = Field(default=None, ge=0, le=1)
    prefix_query_kv_passes: float | None = Field(default=None, ge=0, le=1000)
    decode_attention_items_per_sm: float | None = Field(default=None, ge=0, le=64)
    matmul_phantom_tokens: float | None = Field(default=None, ge=0, le=1024)
    activation_passes: float | None = Field(default=None, ge=0, le=1000)
    # the older name: P passes over the KV bytes hold prefix_query_kv_passes at P / G (fitting.LEGACY_FIXED)
    prefix_kv_passes: float | None = Field(default=None, ge=0, le=1000)

    @model_validator(mode="before")
    @classmethod
    def _known(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            for k in data:
                if k not in cls.model_fields:
                    raise ValueError(f"unknown parameter {echo(k)}; valid: {', '.join(cls.model_fields)}")
        return data

    def given(self) -> dict[str, float]:
        return {k: v for k, v in self.model_dump().items() if v is not None}


class CalibrateRequest(BaseModel):
    """Fit a hardware profile (efficiencies, per-step overhead, prefix re-reads) to step times
    measured on `gpu` running `model`. A fit with MAPE over 25% or every parameter on its bounds
    is refused unless `force`."""

    model_config = _CONFIG
    measurements: MeasurementsInput
    model: str = Field(min_length=1)
    gpu: str = Field(min_length=1)
    name: str | None = Field(default=None, min_length=1, max_length=200)
    fix: FixedParameters = FixedParameters()
    force: bool = False

    @field_validator("name")
    @classmethod
    def _not_blank(cls, v: str | None) -> str | None:
        if v is not None and not v.strip():
            raise ValueError("must not be empty")
        return v


# --- catalog -------------------------------------------------------------------------------------


class CatalogRequest(BaseModel):
    """GPUs (specs and prices with sources) or models (shapes and computed sizes); `name` picks
    one. For one MoE model, `batch_tokens` are the step sizes of its expert-read table."""

    model_config = _CONFIG
    kind: Literal["gpus", "models"]
    name: str | None = Field(default=None, min_length=1)
    batch_tokens: list[Annotated[int, Field(ge=1, le=MAX_TOKEN_BUDGET)]] = Field(
        default=[1, 8, 32, 128, 512], min_length=1, max_length=MAX_LIST_ITEMS
    )
