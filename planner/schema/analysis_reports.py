"""The reports of `capplan analyze` (the seed article's roofline analyses of one replica) and
`capplan calibrate` (a profile fitted to measured step times), apart from planner/schema/reports.py
so that each use case's contract reads on its own; reports.py re-exports them."""

from __future__ import annotations

from typing import Any

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from planner.catalog.models import Dtype
from planner.catalog.quantization import WeightDtype
from planner.costmodel.analyses import Reading
from planner.costmodel.fit_data import StepKind
from planner.costmodel.profile import Profile
from planner.costmodel.roofline import Bound
from planner.schema.catalog_reports import Report

_Report = Report  # every report's base (planner/schema/catalog_reports.py)


# --- analyze -------------------------------------------------------------------------------------


class ReplicaInfo(_Report):
    """What an analysis ran on, as resolved (catalog names, the profile's name). Not part of the
    JSON: the request says it; kept for the text rendering."""

    model: str
    gpu: str
    tp: int
    weight_dtype: WeightDtype
    kv_dtype: Dtype
    profile: str
    profile_warning: str | None = None


class _Analysis(_Report):
    replica: ReplicaInfo = Field(exclude=True)


class ConcurrencyRow(_Report):
    concurrency: int
    step_ms: float
    user_tokens_per_s: float
    gpu_tokens_per_s: float
    usd_per_million_output_tokens: float
    bound: Bound
    fits_in_memory: bool


class ConcurrencyReport(_Analysis):
    kv_max_concurrency: int
    compute_knee_tokens_per_step: float
    rows: list[ConcurrencyRow]


class StaticBatchingRow(_Report):
    batch: int
    expected_longest_tokens: float
    slot_utilization: float
    usd_per_million_output_tokens: float
    continuous_usd_per_million_output_tokens: float


class StaticBatchingReport(_Analysis):
    mean_output_tokens: float
    rows: list[StaticBatchingRow]


class ChunkedPrefillRow(_Report):
    """`chunk_tokens` null: the prompt unchunked, in one step."""

    chunk_tokens: int | None
    steps: int
    prompt_prefill_ms: float
    worst_itl_ms: float
    max_num_batched_tokens: int


class ChunkedPrefillReport(_Analysis):
    reading: Reading
    rows: list[ChunkedPrefillRow]


class PrefillReport(_Analysis):
    prompt_ms: float
    tokens_per_s: float
    usd_per_million_input_tokens: float
    bound: Bound


class UtilizationReport(_Analysis):
    replicas: int
    usd_per_month: float
    output_tokens_per_month: float
    usd_per_million_output_tokens: float
    floor_usd_per_million_output_tokens: float
    times_floor: float
    gpu_busy_fraction: float


class KvCapacityReport(_Analysis):
    kv_bytes_per_token: int
    kv_cache_tokens: int
    kv_cache_bytes: float
    max_concurrency: int
    weight_bytes: float
    activation_reserve_bytes: float


AnalyzeReport = (
    ConcurrencyReport
    | StaticBatchingReport
    | ChunkedPrefillReport
    | PrefillReport
    | UtilizationReport
    | KvCapacityReport
)


# --- calibrate -----------------------------------------------------------------------------------


_SHAPE_KEYS = ("tokens", "batch", "prompt", "chunk", "decodes", "ctx")


class CalibrationRow(_Report):
    """One measured quantity beside its fit. Only the shape keys of the row's kind are present
    in the JSON (linear: tokens; decode: batch, ctx; prefill: prompt; chunked_prefill: prompt,
    chunk, decodes, ctx)."""

    kind: StepKind
    line: int | None
    tokens: int | None = None
    batch: int | None = None
    prompt: int | None = None
    chunk: int | None = None
    decodes: int | None = None
    ctx: int | None = None
    quantity: str
    measured_ms: float
    fitted_ms: float
    theoretical_ms: float
    error_percent: float

    @model_serializer(mode="wrap")
    def _drop_absent_shape(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        return {k: v for k, v in out.items() if not (k in _SHAPE_KEYS and v is None)}


class FitParameter(_Report):
    value: float
    std_error: float | None
    independence: float | None
    fixed: bool
    at_bound: bool


class Ceiling(_Report):
    value: float
    fraction_of_datasheet: float
    fitted_eta: float


class CalibrateReport(_Report):
    """`capplan calibrate`: every row measured vs fitted, the MAPE, the parameters with their
    uncertainty, and the fitted profile (`output`: where the CLI wrote it, else null)."""

    model: str
    gpu: str
    measurements: str
    rows: list[CalibrationRow]
    mape_percent: float
    max_abs_error_percent: float
    theoretical_mape_percent: float
    parameters: dict[str, FitParameter]
    ceilings: dict[str, Ceiling]
    profile: Profile
    output: str | None = None
