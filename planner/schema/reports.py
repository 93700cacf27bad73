"""What `planner.api` answers: one pydantic report per use case. `report.model_dump(mode="json")`
is exactly what `capplan ... --json` prints, and the gRPC messages of planner.v1 mirror these
models field for field (units in names, enums as Literal strings, maps keyed by role or name).

Reports are built from the domain's results (latency, simulator, analyses, calibration) and
validated on the way in (`extra="forbid"`): a key the domain adds or drops fails loudly instead
of silently changing the contract.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import SerializerFunctionWrapHandler, model_serializer

from planner.catalog.models import Dtype
from planner.catalog.quantization import WeightDtype
from planner.deployment import Mode
from planner.schema.analysis_reports import (
    AnalyzeReport,
    CalibrateReport,
    CalibrationRow,
    Ceiling,
    ChunkedPrefillReport,
    ChunkedPrefillRow,
    ConcurrencyReport,
    ConcurrencyRow,
    FitParameter,
    KvCapacityReport,
    PrefillReport,
    ReplicaInfo,
    StaticBatchingReport,
    StaticBatchingRow,
    UtilizationReport,
)
from planner.schema.catalog_reports import CatalogReport, GpuCatalogReport, ModelCatalogReport, Report
from planner.schema.inputs import Replay, Router
from planner.schema.kinds import BindingLimit, Role, StabilityLimit
from planner.schema.plan_report import _OPTIONAL_BLOCKS, ExpertParallelSummary, LoraMemory, SpeculativeSummary

__all__ = [
    "AnalyzeReport",
    "BindingLimit",
    "CalibrateReport",
    "CalibrationRow",
    "CatalogReport",
    "Ceiling",
    "ChunkedPrefillReport",
    "ChunkedPrefillRow",
    "ConcurrencyReport",
    "ConcurrencyRow",
    "EvaluateReport",
    "FitParameter",
    "GpuCatalogReport",
    "KvCapacityReport",
    "ModelCatalogReport",
    "PrefillReport",
    "ReplicaInfo",
    "SimulateReport",
    "StaticBatchingReport",
    "StaticBatchingRow",
    "UtilizationReport",
]


_Report = Report  # every report's base (planner/schema/catalog_reports.py, which imports no latency model)


# --- shared pieces -------------------------------------------------------------------------------


class DeploymentSummary(_Report):
    """What was deployed, with vLLM's defaults filled in. `replicas` counts every replica (both
    pools when disaggregated); `prefill_replicas`/`decode_replicas` are null when colocated."""

    model: str
    gpu: str
    tp: int
    mode: Mode
    replicas: int
    prefill_replicas: int | None
    decode_replicas: int | None
    weight_dtype: WeightDtype
    kv_dtype: Dtype
    max_num_seqs: int
    max_num_batched_tokens: int
    long_prefill_token_threshold: int
    lora: LoraMemory | None = None  # absent without LoRA
    # Pipeline stages per replica (vLLM --pipeline-parallel-size); absent without PP
    pipeline_parallel_size: int | None = None
    # absent without EP; with data_parallel_size D, `replicas` counts DP ranks (instances x D)
    expert_parallel: ExpertParallelSummary | None = None
    speculative_decoding: SpeculativeSummary | None = None  # absent without speculative decoding

    @model_serializer(mode="wrap")
    def _drop_absent_lora(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Without LoRA (PP, EP, speculative decoding) the key is left out: reports read as they
        did before it existed."""
        out: dict[str, Any] = handler(self)
        return {k: v for k, v in out.items() if v is not None or k not in _OPTIONAL_BLOCKS}

    @property
    def gpus(self) -> int:
        """GPUs the deployment holds: every replica times its tensor-parallel group and stages."""
        return self.replicas * self.tp * (self.pipeline_parallel_size or 1)


class Floors(_Report):
    """p99s no load can beat (the rate going to 0); ITL null when no answer has a second token."""

    ttft_p99_ms: float | None
    itl_p99_ms: float | None
    itl_mixed_step_ms: float | None


# --- evaluate ------------------------------------------------------------------------------------


class EvaluatedDeployment(DeploymentSummary):
    gpu_memory_utilization: float
    usd_per_gpu_hour: float
    profile: str
    profile_warning: str | None  # set when the profile stands in for the GPU's own (transferred)


class WorkloadSummary(_Report):
    name: str | None
    mean_requests_per_s: float
    peak_requests_per_s: float
    burstiness: float
    mean_input_tokens: float
    p99_input_tokens: float
    mean_output_tokens: float
    p99_output_tokens: float
    prefix_cache_hit_fraction: float


class PoolPrediction(_Report):
    """One pool of a disaggregated deployment at the evaluated rate."""

    replicas: int
    requests_per_s_per_replica: float
    stable: bool
    max_stable_requests_per_s_per_replica: float
    binding_limit: StabilityLimit
    ttft_p99_ms: float | None
    itl_p99_ms: float | None
    decode_concurrency: float | None
    kv_cache_usage: float | None
    preemption_risk: float | None


class BucketPrediction(_Report):
    start_s: float
    duration_s: float
    requests_per_s: float
    stable: bool
    ttft_p99_ms: float | None
    itl_p99_ms: float | None
    decode_concurrency: float | None
    kv_cache_usage: float | None


class LatencyTargets(_Report):
    """The p99 targets a capacity was found for (null: no target on that metric)."""

    ttft_p99_ms: float | None
    itl_p99_ms: float | None


class RootFind(_Report):
    """Diagnostics of the bracketed root-finding behind a capacity (solvers.rootfind)."""

    root: float | None
    converged: bool
    bracket: list[float]
    f_bracket: list[float]
    final_bracket: list[float] | None
    iterations: int
    function_calls: int
    expansions: int
    reason: str


class PoolCapacity(_Report):
    requests_per_s_per_replica: float
    feasible: bool
    binding_limit: BindingLimit
    reason: str
    ttft_p99_ms: float | None
    itl_p99_ms: float | None
    decode_concurrency: float | None
    root_find: RootFind | None


class Capacity(_Report):
    """The highest rate within the SLO: per replica and for the deployment; infeasible with the
    reason when the SLO is below what an idle replica reaches."""

    slo: LatencyTargets
    slo_feasible: bool
    max_requests_per_s_within_slo: float
    deployment_max_requests_per_s_within_slo: float
    binding_limit: BindingLimit
    reason: str
    floors: Floors
    pools: dict[Role, PoolCapacity]


ClosedLoopLimit = Literal["concurrency", "rate_cap", "capacity"]


class ClosedLoopEvaluation(_Report):
    """A closed loop of `concurrency` clients (`workload.arrivals.concurrency`) solved by Little's
    law on the open-loop model (planner/closed_loop.py): the rate it runs at (whole deployment;
    the report's latencies are at it), what limits it (the clients, the rate cap, or the
    deployment's stable capacity, then `saturated`), the client's mean time in the system and the
    requests in flight it implies (rate x time; C unless limited otherwise)."""

    concurrency: int
    rate_cap_requests_per_s: float | None
    requests_per_s: float
    limited_by: ClosedLoopLimit
    saturated: bool
    mean_time_in_system_ms: float | None
    in_flight: float | None


class EvaluateReport(_Report):
    """`capplan evaluate`: predictions at the workload's rate (its peak bucket), and with an SLO
    the capacity within it. `binding_limit` is the SLO's when one was given, else the stability
    limit (`stability_binding_limit` always is). Latencies are null when the load is unstable."""

    deployment: EvaluatedDeployment
    workload: WorkloadSummary
    mode: Mode
    requests_per_s: float
    requests_per_s_per_replica: float
    stable: bool
    ttft_p50_ms: float | None
    ttft_p99_ms: float | None
    itl_p50_ms: float | None
    itl_p99_ms: float | None
    itl_worst_case_ms: float | None
    decode_concurrency: float | None
    mean_step_ms: float | None
    mixed_step_fraction: float | None
    prefill_chunk_tokens: float | None
    prefill_utilization: float | None
    queue_wait_mean_ms: float | None
    kv_cache_usage: float | None
    kv_cache_tokens: int
    preemption_risk: float | None
    running_requests: float | None
    gpu_utilization: float
    mfu: float
    max_stable_requests_per_s: float
    deployment_max_stable_requests_per_s: float
    usd_per_hour: float
    usd_per_million_output_tokens: float | None
    usd_per_million_input_tokens: float | None
    mean_load_usd_per_million_output_tokens: float | None
    binding_limit: BindingLimit
    floors: Floors
    pools: dict[Role, PoolPrediction]
    buckets: list[BucketPrediction] | None
    notes: list[str]
    stability_binding_limit: StabilityLimit
    slo: LatencyTargets | None
    slo_feasible: bool | None
    max_requests_per_s_within_slo: float | None
    deployment_max_requests_per_s_within_slo: float | None
    capacity: Capacity | None
    closed_loop: ClosedLoopEvaluation | None = None


# --- simulate ------------------------------------------------------------------------------------


class SimulatedDeployment(DeploymentSummary):
    kv_cache_blocks: int
    block_size: int
    kv_cache_tokens: int
    profile: str
    profile_warning: str | None  # set when the profile stands in for the GPU's own (transferred)
    router: Router


class SimulationInput(_Report):
    """Where the simulated requests came from: the workload sampled with `seed`, or a trace
    replayed (`replay`), and what they turned out to be."""

    source: Literal["workload", "trace"]
    name: str | None
    replay: Replay | None
    seed: int | None
    mean_requests_per_s_target: float | None
    burstiness: float | None
    trace_requests: int | None
    trace_duration_s: float | None
    requests: int
    span_s: float
    mean_requests_per_s: float | None
    mean_input_tokens: float
    mean_output_tokens: float
    prefix_cache_hit_fraction: float
    outputs_cut_at_context: int  # answers vLLM stops at max_model_len (the model's context)


class SimulationTargets(_Report):
    """Objectives a simulation is judged against: TTFT, TPOT and E2E per request (goodput) and
    on the p99; ITL on the p99 only."""

    ttft_p99_ms: float | None
    tpot_p99_ms: float | None
    e2el_p99_ms: float | None
    itl_p99_ms: float | None


class TargetsMet(_Report):
    ttft_p99: bool | None
    tpot_p99: bool | None
    e2el_p99: bool | None
    itl_p99: bool | None


class LatencySummary(_Report):
    """Seconds; null where there is no sample (e.g. ITL when every answer is one token)."""

    count: int
    mean_s: float | None
    p50_s: float | None
    p90_s: float | None
    p99_s: float | None
    max_s: float | None


class GoodputObjectives(_Report):
    ttft_s: float | None
    tpot_s: float | None
    e2el_s: float | None


class Goodput(_Report):
    slo: GoodputObjectives
    good_requests: int
    goodput_rps: float | None
    good_fraction: float | None


class SimulatedReplica(_Report):
    role: Role
    index: int
    requests: int
    steps: int
    busy_fraction: float | None
    preemptions: int
    peak_kv_blocks: int
    peak_kv_fraction: float | None
    max_queue_length: int


class MinuteSeries(_Report):
    """Per minute from the first arrival, all replicas summed."""

    minute_start_s: list[float]
    arrivals: list[int]
    completions: list[int]
    mean_running: list[float]
    mean_waiting: list[float]
    output_tokens_per_s: list[float]
    prefill_tokens_per_s: list[float]


class ClosedLoopRun(_Report):
    """A simulated closed loop of `concurrency` clients: the rate it achieved (completed requests
    over the run), the mean time a request spent in the system as its client saw it, and the
    requests in flight that implies (rate x time, Little's law; C while the clients are all
    busy)."""

    concurrency: int
    rate_cap_requests_per_s: float | None
    requests_per_s: float | None
    mean_time_in_system_ms: float | None
    in_flight: float | None


class SimulateReport(_Report):
    """`capplan simulate`: the discrete-event simulator's measurements. The flat `*_ms`
    percentiles repeat the `ttft`/`itl`/`tpot`/`e2el` summaries in milliseconds."""

    deployment: SimulatedDeployment
    input: SimulationInput
    ttft_p50_ms: float | None
    ttft_p90_ms: float | None
    ttft_p99_ms: float | None
    itl_p50_ms: float | None
    itl_p90_ms: float | None
    itl_p99_ms: float | None
    tpot_p50_ms: float | None
    tpot_p90_ms: float | None
    tpot_p99_ms: float | None
    e2el_p50_ms: float | None
    e2el_p90_ms: float | None
    e2el_p99_ms: float | None
    slo: SimulationTargets | None
    slo_met: TargetsMet | None
    mode: Mode
    budget_reading: Literal["v1"]
    requests: int
    completed: int
    duration_s: float | None
    request_throughput_rps: float | None
    output_tokens_per_s: float | None
    ttft: LatencySummary
    itl: LatencySummary
    tpot: LatencySummary
    e2el: LatencySummary
    goodput: Goodput | None
    preemptions: int
    peak_kv_blocks: int
    peak_kv_fraction: float | None
    max_queue_length: int
    replicas: list[SimulatedReplica]
    series: MinuteSeries
    closed_loop: ClosedLoopRun | None = None


# --- catalog: planner/schema/catalog_reports.py (`capplan catalog` imports no latency model) -----------
