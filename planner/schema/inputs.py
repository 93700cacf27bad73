"""The requests of `planner.api`, and reading them from what users write (YAML/JSON files, trace
CSVs). One schema serves the CLI's files, `api.evaluate(yaml.safe_load(f))` and the gRPC
messages of planner.v1, which mirror these models field for field.

Every numeric field has a range (pydantic Field bounds, documented by the constants below); a
value outside it, a wrong type, NaN or infinity is an `InvalidInput` naming the dotted path the
user wrote (`workload.arrivals.requests_per_s`, `chunked_prefill.sizes_tokens[2]`). Paths inside a
request (trace CSVs, profile files, model config.json) are taken relative to the `base_dir` the
caller gives (the CLI: the file's folder), else to the working directory.

A workload is the schema of planner.workload, a trace reference, or a history to forecast
(`workload: {history: ..., forecast: {...}}`, planner/schema/history_workload.py):

    workload:
      trace: azure-conv-2023        # a built-in trace name, or a CSV path
      bucket_s: 60                  # per-bucket arrival rates (null: one constant mean rate)
      burstiness: rescaled          # rescaled (CV of gaps once bucket rates are taken out) | gaps | a number k (CV^2 = 1/k)
      bins: null                    # null: exact empirical lengths; N: N-bin histograms
      requests_per_s: null          # rescale the trace's time to this mean rate
      prefix_cache_hit_fraction: 0
      endpoint: chat                # chat (/v1/chat/completions) | completions (/v1/completions)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

from planner.catalog.models import Dtype
from planner.catalog.quantization import WeightDtype
from planner.costmodel import fit_data
from planner.costmodel.profiles import DEFAULT_PROFILE
from planner.deployment import MAX_TP, MAX_USD_PER_GPU_HOUR, Deployment
from planner.errors import InvalidInput, echo
from planner.schema.history_workload import HistoryWorkload
from planner.slo import MAX_SLO_S, Slo
from planner.validation import error_to_invalid_input, loc_to_path
from planner.vllm_defaults import GPU_MEMORY_UTILIZATION
from planner.workload import MAX_HORIZON_S, MAX_REQUESTS_PER_S, Arrivals, LengthDistribution, Workload

if TYPE_CHECKING:
    from planner.traces import Trace

# --- ranges --------------------------------------------------------------------------------------
# Generous for any real service, tight enough that no request can run for minutes or exhaust memory.
MAX_LATENCY_MS = MAX_SLO_S * 1e3  # an SLO target: one hour
# Requests one `simulate` request may generate (`requests`, or rate x `horizon_s`, or one pass
# over the buckets or the trace): about 2 minutes of one core at the worst measured cost
# (~130 us a request with the replicas overloaded, bench/bench_admission.py). The
# service admits fewer (planner/server/policy.py); the simulator itself streams up to
# planner.workload.MAX_SAMPLED_REQUESTS.
MAX_SIMULATED_REQUESTS = 1_000_000
MAX_SEED = 2**63 - 1
MAX_CONTEXT_TOKENS = 10_000_000  # beyond every model's context; each model's own limit also applies
MAX_CONCURRENCY = 1_000_000  # sequences, batch sizes, decodes
MAX_TOKEN_BUDGET = 10_000_000  # max_num_batched_tokens, chunk sizes
MAX_TOKENS_PER_DAY = 1e15
MAX_LIST_ITEMS = 1_000  # values in one sweep (concurrencies, batches, chunk sizes)
MAX_TRACE_BINS = 10_000
MAX_BUCKET_S = 31_622_400.0
MAX_MEASUREMENT_ROWS = fit_data.MAX_ROWS  # inline rows: as many as a measurements file takes

_CONFIG = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

# Keys users write for a concept this schema names differently: the error says where it lives.
MISNOMERS: dict[str, str] = {
    "chunk_size": "deployment.max_num_batched_tokens (vLLM's token budget)",
    "chunked_prefill_size": "deployment.max_num_batched_tokens (vLLM's token budget)",
    "max_batched_tokens": "deployment.max_num_batched_tokens (vLLM's token budget)",
    "batch_size": "deployment.max_num_seqs (vLLM's cap on running sequences)",
    "max_batch_size": "deployment.max_num_seqs (vLLM's cap on running sequences)",
    "tensor_parallel_size": "deployment.tp",
    "tensor_parallel": "deployment.tp",
    "num_replicas": "deployment.replicas",
    "dtype": "deployment.weight_dtype and deployment.kv_dtype",
}

Router = Literal["round_robin", "least_outstanding_tokens"]
Replay = Literal["recorded", "scaled"]


# --- shared pieces -------------------------------------------------------------------------------


class TraceWorkload(BaseModel):
    """`workload: {trace: ...}`: a workload derived from a request trace (see module docstring)."""

    model_config = _CONFIG
    trace: str = Field(min_length=1)
    bucket_s: float | None = Field(default=60.0, gt=0, le=MAX_BUCKET_S)
    burstiness: str | float = "rescaled"
    bins: int | None = Field(default=None, ge=1, le=MAX_TRACE_BINS)
    requests_per_s: float | None = Field(default=None, gt=0, le=MAX_REQUESTS_PER_S)
    prefix_cache_hit_fraction: float = Field(default=0.0, ge=0.0, lt=1.0)
    endpoint: Literal["chat", "completions"] = "chat"  # as Workload.endpoint
    name: str | None = None

    @field_validator("burstiness", mode="before")
    @classmethod
    def _burstiness(cls, v: Any) -> Any:
        if v in ("gaps", "rescaled"):
            return v
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v > 0:
            return float(v)
        raise ValueError(f"must be gaps, rescaled or a number k > 0 (CV^2 of the gaps = 1/k), got {echo(v)}")


def _workload_kind(v: Any) -> str:
    # Tags in brackets are dropped from error paths (planner.validation.loc_to_path).
    if isinstance(v, TraceWorkload) or (isinstance(v, Mapping) and "trace" in v):
        return "[trace]"
    if isinstance(v, HistoryWorkload) or (isinstance(v, Mapping) and "history" in v):
        return "[history]"
    return "[distributions]"


WorkloadInput = Annotated[
    Annotated[Workload, Tag("[distributions]")]
    | Annotated[TraceWorkload, Tag("[trace]")]
    | Annotated[HistoryWorkload, Tag("[history]")],
    Discriminator(_workload_kind),
]


class SloTargets(BaseModel):
    """p99 targets in milliseconds (null: none on that metric; give at least one). `evaluate`
    predicts TTFT and ITL; `simulate` also judges TPOT and end-to-end latency, per request
    (goodput, as `vllm bench serve --goodput`) and on the p99."""

    model_config = _CONFIG
    ttft_p99_ms: float | None = Field(default=None, gt=0, le=MAX_LATENCY_MS)
    itl_p99_ms: float | None = Field(default=None, gt=0, le=MAX_LATENCY_MS)
    tpot_p99_ms: float | None = Field(default=None, gt=0, le=MAX_LATENCY_MS)
    e2el_p99_ms: float | None = Field(default=None, gt=0, le=MAX_LATENCY_MS)

    @model_validator(mode="after")
    def _one_target(self) -> SloTargets:
        if all(v is None for v in (self.ttft_p99_ms, self.itl_p99_ms, self.tpot_p99_ms, self.e2el_p99_ms)):
            raise ValueError("give ttft_p99_ms, itl_p99_ms or both")
        return self

    def to_slo(self) -> Slo:
        """The domain's targets (planner.slo.Slo, seconds)."""

        def s(ms: float | None) -> float | None:
            return None if ms is None else ms / 1e3

        return Slo(
            ttft_p99_s=s(self.ttft_p99_ms),
            itl_p99_s=s(self.itl_p99_ms),
            tpot_p99_s=s(self.tpot_p99_ms),
            e2el_p99_s=s(self.e2el_p99_ms),
        )


# --- evaluate / simulate -------------------------------------------------------------------------


class _ServingRequest(BaseModel):
    """What `evaluate` and `simulate` share: the file a CLI user writes, plus overrides."""

    model_config = _CONFIG
    deployment: Deployment
    workload: WorkloadInput
    slo: SloTargets | None = None
    profile: str = Field(default=DEFAULT_PROFILE, min_length=1)
    requests_per_s: float | None = Field(default=None, gt=0, le=MAX_REQUESTS_PER_S)

    @model_validator(mode="before")
    @classmethod
    def _rate_without_arrivals(cls, data: Any) -> Any:
        """`requests_per_s` given and the workload has no `arrivals`: Poisson arrivals at it."""
        if not isinstance(data, Mapping) or data.get("requests_per_s") is None:
            return data
        wl = data.get("workload")
        if isinstance(wl, Mapping) and "trace" not in wl and "arrivals" not in wl:
            rate = data["requests_per_s"]
            try:
                ok = 0 < float(rate) <= MAX_REQUESTS_PER_S and not isinstance(rate, bool)
            except (TypeError, ValueError):
                ok = False
            # A bad rate is reported once, at requests_per_s: the placeholder never gets used.
            arrivals = {"requests_per_s": rate if ok else 1.0}
            return {**data, "workload": {**wl, "arrivals": arrivals}}
        return data


class EvaluateRequest(_ServingRequest):
    """A deployment under a workload: latency, KV use and cost; with `slo` (TTFT and ITL p99),
    the most requests/s per replica within it. `requests_per_s` evaluates at that rate (whole
    deployment) instead of the workload's, and stands in for a workload without `arrivals`.
    `profile`: theoretical, calibrated, auto (the default: calibrated where one ships for the
    GPU) or a profile file."""


class SimulateRequest(_ServingRequest):
    """The deployment run through the discrete-event simulator of vLLM V1's scheduler.

    Requests: sampled from `workload` with `seed` (`requests_per_s` rescales its mean rate,
    bucket shape kept), or `trace` replayed (`replay: recorded` keeps its timestamps, `scaled`
    time-scales it to `requests_per_s`; scaled is implied by a rate). `requests` of them, or all
    arrivals before `horizon_s`; neither: one pass over bucketed arrivals, else 10,000 requests,
    or the whole trace. `slo`: TTFT, TPOT and E2E targets judge each request (goodput) and the
    p99; ITL the p99. `series: false` leaves the per-minute series empty."""

    seed: int = Field(default=0, ge=0, le=MAX_SEED)
    requests: int | None = Field(default=None, ge=1, le=MAX_SIMULATED_REQUESTS)
    horizon_s: float | None = Field(default=None, gt=0, le=MAX_HORIZON_S)
    trace: str | None = Field(default=None, min_length=1)
    replay: Replay | None = None
    router: Router = "round_robin"
    series: bool = True

    def check(self) -> None:
        """Cross-field rules, each naming the field to change."""
        if self.requests is not None and self.horizon_s is not None:
            raise InvalidInput("horizon_s", "give requests or horizon_s, not both")
        if self.trace is None:
            if self.replay is not None:
                raise InvalidInput("replay", "only with trace (the workload is sampled otherwise)")
            return
        if not self.trace.strip():
            raise InvalidInput("trace", "must name a built-in trace or a CSV file")
        if self.replay == "scaled" and self.requests_per_s is None:
            raise InvalidInput("requests_per_s", "required with replay scaled (the target mean rate)")
        if self.replay == "recorded" and self.requests_per_s is not None:
            raise InvalidInput(
                "requests_per_s", "a trace replayed as recorded keeps its rate; use replay scaled"
            )


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


# --- validation ----------------------------------------------------------------------------------

R = TypeVar("R", bound=BaseModel)


def validate_request(cls: type[R], data: R | Mapping[str, Any]) -> R:
    """A request instance as is, or a mapping validated into one; errors are InvalidInput
    naming the dotted path, with a hint for keys users write for another concept."""
    if isinstance(data, cls):
        return data
    if not isinstance(data, Mapping):
        raise InvalidInput("(root)", f"expected a mapping or a {cls.__name__}, got {type(data).__name__}")
    try:
        return cls.model_validate(data)
    except ValidationError as err:
        raise _invalid(err, cls) from None


def _invalid(err: ValidationError, cls: type[BaseModel]) -> InvalidInput:
    errors = err.errors(include_url=False)
    for e in errors:
        name = e["loc"][-1] if e["loc"] else None
        if e["type"] == "extra_forbidden" and isinstance(name, str) and name in MISNOMERS:
            return InvalidInput(
                loc_to_path("", e["loc"]), f"unknown field {name}; did you mean {MISNOMERS[name]}?"
            )
    first = errors[0]
    if first["type"] == "extra_forbidden" and len(first["loc"]) == 1:
        return InvalidInput(
            str(first["loc"][0]), f"unknown top-level key; expected {', '.join(cls.model_fields)}"
        )
    return error_to_invalid_input(err, "")


# --- files ---------------------------------------------------------------------------------------


def read_mapping_file(path: str | Path, expected: str = "deployment: and workload:") -> dict[str, Any]:
    """A YAML (or JSON) request file holding a mapping, its size, values and keys checked before
    anything is built (planner/yamlfile.py; every file's limits: planner/files.py)."""
    from planner.yamlfile import read_mapping_file as read

    return read(path, expected)


def local_path(text: str, base_dir: Path | None) -> str:
    """A path as written, taken from `base_dir` when relative and present there."""
    try:
        if base_dir is None or Path(text).is_absolute():
            return text
        candidate = base_dir / text
        return str(candidate) if candidate.exists() else text
    except (OSError, ValueError):  # a name no file can have (NUL byte, too long)
        return text


def resolve_trace(name_or_path: str, field: str, base_dir: Path | None = None) -> Trace:
    """A built-in trace by name, or a trace CSV (a relative path is taken from `base_dir` when
    given); errors name `field`."""
    from planner.traces import BUILTIN_TRACES, builtin_trace, load_trace

    if name_or_path in BUILTIN_TRACES:
        return builtin_trace(name_or_path)
    path = Path(local_path(name_or_path, base_dir))
    try:
        exists = path.exists()  # a FIFO or a device exists: load_trace refuses it by what it is
    except (OSError, ValueError):
        exists = False
    if not exists:
        raise InvalidInput(
            field,
            f"{echo(name_or_path)} is neither a built-in trace ({', '.join(sorted(BUILTIN_TRACES))}) nor an existing file",
        )
    return load_trace(path, field=field)


def build_workload(
    spec: Workload | TraceWorkload | HistoryWorkload,
    root: str = "workload",
    base_dir: Path | None = None,
    *,
    closed_loop: bool = False,
) -> Workload:
    """The workload itself, or the one a trace reference derives (bucket rates, burstiness and
    length distributions from the trace). A closed loop (`arrivals.concurrency`) only where the
    caller takes one (`closed_loop`: evaluate and simulate); elsewhere it is refused by name."""
    if isinstance(spec, Workload):
        if spec.arrivals.closed_loop and not closed_loop:
            raise InvalidInput(
                f"{root}.arrivals.concurrency",
                "a closed loop is for evaluate and simulate; give an open-loop requests_per_s or buckets",
            )
        return spec
    if isinstance(spec, HistoryWorkload):
        from planner.forecast.from_history import build_history_workload

        path = spec.history.path
        if path is not None:
            history = spec.history.model_copy(update={"path": local_path(path, base_dir)})
            spec = spec.model_copy(update={"history": history})
        return build_history_workload(spec, root)
    trace = resolve_trace(spec.trace, f"{root}.trace", base_dir)
    try:
        if spec.requests_per_s is not None:
            trace = trace.time_scaled(spec.requests_per_s)
        mode: Literal["gaps", "rescaled"] = "gaps" if spec.burstiness == "gaps" else "rescaled"
        w = trace.to_workload(
            bucket_s=spec.bucket_s,
            bins=spec.bins,
            burstiness=mode,
            name=spec.name,
            prefix_cache_hit_fraction=spec.prefix_cache_hit_fraction,
        )
    except InvalidInput as exc:
        f = exc.field if exc.field.startswith(root) else f"{root}.{exc.field}"
        raise InvalidInput(f, exc.reason) from None
    if spec.endpoint != w.endpoint:
        w = w.model_copy(update={"endpoint": spec.endpoint})
    if not isinstance(spec.burstiness, str):
        arr = w.arrivals.model_dump()
        arr["burstiness"] = spec.burstiness
        w = w.model_copy(update={"arrivals": Arrivals.model_validate(arr)})
    return w
