"""What `capplan plan` answers: `PlanReport.model_dump(mode="json")` is exactly what `--json`
prints (docs/plan.md lists every key). Milliseconds for latencies, USD for money, requests/s for
rates; every list sorted, so the same request gives the same bytes.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from planner.schema.kinds import Role

Status = Literal["OPTIMAL", "FEASIBLE", "INFEASIBLE", "NO_SOLUTION"]


class _Report(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PlanTargets(_Report):
    ttft_p99_ms: float | None
    itl_p99_ms: float | None
    e2e_p99_ms: float | None


class PlanWorkload(_Report):
    """The traffic the plan serves: `buckets` forecast buckets over `horizon_hours` (a constant
    rate is one bucket of one hour; a month is 730 hours)."""

    name: str | None
    buckets: int
    horizon_hours: float
    mean_requests_per_s: float
    peak_requests_per_s: float
    peak_bucket: int
    burstiness: float
    mean_input_tokens: float
    p99_input_tokens: float
    mean_output_tokens: float
    p99_output_tokens: float
    prefix_cache_hit_fraction: float


class PoolAtPeak(_Report):
    """One deployment at the peak bucket, from the latency model (per replica of it)."""

    requests_per_s_per_replica: float
    ttft_p50_ms: float | None
    ttft_p99_ms: float | None
    itl_p50_ms: float | None
    itl_p99_ms: float | None
    kv_cache_usage: float | None
    preemption_risk: float | None
    running_requests: float | None


class LoraMemory(_Report):
    """LoRA on a replica (vLLM --enable-lora): the adapters' buffers per GPU and the KV cache
    left beside them (planner.costmodel.lora, docs/kv-capacity.md)."""

    max_loras: int
    max_lora_rank: int
    adapter_gib: float  # per GPU: max_loras adapters' stacked A/B buffers
    kv_cache_gib: float  # per GPU, what is left for the KV cache
    kv_cache_tokens: int  # per replica


class ExpertParallelSummary(_Report):
    """Expert parallelism on a replica (vLLM --enable-expert-parallel): the EP group and what one
    GPU holds (planner.costmodel.expert_parallel, docs/expert-parallel.md)."""

    data_parallel_size: int  # DP ranks per vLLM instance (1: EP over the TP group)
    ep_size: int  # GPUs the experts are split over: tp x data_parallel_size
    routing_skew: float  # the hottest EP rank's load over the mean (1: uniform)
    experts_per_gpu: int  # ceil(experts / ep_size): what the most loaded GPU holds
    expert_gib_per_gpu: float  # those experts' weights on one GPU
    kv_cache_tokens_per_rank: int  # the KV cache of one DP rank (its own sequences only)


class SpeculativeSummary(_Report):
    """Speculative decoding on a replica (vLLM --speculative-config): k guesses per step at the
    per-token acceptance rate alpha, the tokens a decode step yields (E), the proposer's own
    weights per GPU and the KV cache left (planner.costmodel.speculative, docs/speculative.md)."""

    method: str
    num_speculative_tokens: int
    acceptance_rate: float
    tokens_per_step: float  # E = (1 - alpha^(k+1)) / (1 - alpha)
    proposer_gib: float  # per GPU: weights the proposer does not share with the target
    kv_cache_tokens: int  # per replica, with the proposer's KV in every block


# Report blocks left out of a deployment's JSON when unset (features off): reports read as they
# did before each existed
_OPTIONAL_BLOCKS = ("lora", "pipeline_parallel_size", "expert_parallel", "speculative_decoding")


def _drop_absent(out: dict[str, Any], *keys: str) -> dict[str, Any]:
    """A report without the optional blocks `keys` reads as it did before they existed."""
    return {k: v for k, v in out.items() if not (k in keys and v is None)}


class PlanDeployment(_Report):
    """One configuration of the plan. `vllm_args` are the exact `vllm serve` flags of the operating
    point the capacity was modelled at; `requests_per_s_per_replica` is that capacity (within the
    SLOs of its role), `binding_limit` what caps it."""

    id: str
    gpu: str
    tensor_parallel_size: int
    role: Role
    replicas_peak: int
    replicas_by_bucket: list[int]
    max_num_batched_tokens: int
    max_num_seqs: int
    long_prefill_token_threshold: int
    gpu_memory_utilization: float
    weight_dtype: str
    kv_dtype: str
    vllm_args: list[str]
    vllm_command: str
    requests_per_s_per_replica: float
    binding_limit: str
    usd_per_gpu_hour: float
    profile: str
    at_peak: PoolAtPeak | None
    lora: LoraMemory | None = None  # absent without LoRA
    # Pipeline stages per replica (a replica is tensor_parallel_size x this many GPUs, over
    # several nodes when more than one node's GPUs); absent without PP
    pipeline_parallel_size: int | None = None
    expert_parallel: ExpertParallelSummary | None = None  # absent without EP
    speculative_decoding: SpeculativeSummary | None = None  # absent without speculative decoding

    @model_serializer(mode="wrap")
    def _drop_absent_lora(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Without LoRA (PP, EP, speculative decoding) the key is left out: reports read as they
        did before it existed."""
        return _drop_absent(handler(self), *_OPTIONAL_BLOCKS)


class GpuUse(_Report):
    """GPUs of one type: `reserved` are held (and billed) all horizon; on-demand per bucket."""

    gpu: str
    reserved: int
    on_demand_by_bucket: list[int]
    peak: int
    usd_per_gpu_hour: float
    reserved_usd_per_gpu_hour: float | None
    inventory: int | None


class BucketCost(_Report):
    start_s: float
    duration_s: float
    requests_per_s: float
    gpus: int
    usd_per_hour: float


class Predicted(_Report):
    """At the peak bucket, the worst of the plan's deployments (the analytic model)."""

    requests_per_s: float
    ttft_p50_ms: float | None
    ttft_p99_ms: float | None
    itl_p50_ms: float | None
    itl_p99_ms: float | None
    e2e_p99_ms: float | None


class SimulatedGroup(_Report):
    """`--verify`: one part of the plan that serves its own share of the traffic (a colocated
    deployment, or the prefill and decode pools together) at the bucket it is checked at: the
    one where the latency model's p99s are worst against the targets (docs/plan.md). `requests`
    of that bucket's stream, split at random by the plan's shares, reach this part; the
    simulated latencies include vLLM's front end (the profile's `request_overhead_s`)."""

    deployments: list[str]
    replicas: list[int]
    bucket: int
    bucket_requests_per_s: float
    requests_per_s: float
    predicted_slo_fraction: float | None
    requests: int
    ttft_p50_ms: float | None
    ttft_p90_ms: float | None
    ttft_p99_ms: float | None
    itl_p50_ms: float | None
    itl_p90_ms: float | None
    itl_p99_ms: float | None
    e2e_p99_ms: float | None
    predicted_ttft_p50_ms: float | None
    predicted_ttft_p99_ms: float | None
    predicted_itl_p50_ms: float | None
    predicted_itl_p99_ms: float | None
    predicted_e2e_p99_ms: float | None
    slo_met: bool


class Simulated(_Report):
    """`--verify`: every part of the plan in the discrete-event simulator at its hardest bucket
    (`groups`); the plan-level p99s are the worst of the groups', `slo_met` that every group
    meets the targets, `requests` the requests simulated in all."""

    requests: int
    seed: int
    ttft_p99_ms: float | None
    itl_p99_ms: float | None
    slo_met: bool
    groups: list[SimulatedGroup]


class AlternativeDeployment(_Report):
    gpu: str
    tensor_parallel_size: int
    role: Role
    replicas_peak: int
    max_num_batched_tokens: int
    max_num_seqs: int
    pipeline_parallel_size: int | None = None  # absent without PP

    @model_serializer(mode="wrap")
    def _drop_absent_pp(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Without PP the key is left out: reports read as they did before PP existed."""
        out: dict[str, Any] = handler(self)
        return (
            out
            if out.get("pipeline_parallel_size") is not None
            else {k: v for k, v in out.items() if k != "pipeline_parallel_size"}
        )


class Alternative(_Report):
    """The best plan of another kind (another GPU type, the other disaggregation mode, vLLM's
    default flags), costed exactly as a single configuration; `delta_*` are its cost minus the
    plan's (positive: dearer). Infeasible: `reason` says why."""

    kind: Literal["gpu", "disaggregation", "vllm_defaults"]
    label: str
    feasible: bool
    usd_per_month: float | None
    usd_per_hour_peak: float | None
    delta_usd_per_month: float | None
    delta_fraction: float | None
    gpu_count_peak: int | None
    deployments: list[AlternativeDeployment]
    reason: str


class RelaxedPlan(_Report):
    """A relaxation of the request, re-planned before it is suggested: the request with `field`
    (a dotted key, e.g. `slo.itl_p99_ms`, `inventory.h100-sxm`) set to `value` (JSON) gives this
    plan: its status, bill, GPUs at the peak and shape."""

    field: str
    value: str
    status: Status
    usd_per_month: float | None
    usd_per_hour_peak: float | None
    gpu_count_peak: int
    deployments: list[AlternativeDeployment]


class Infeasibility(_Report):
    """Why no plan exists, and the nearest change that makes one: `relaxation` says it with the
    cost of the plan it gives; `relaxed` holds those plans (empty: no change tried gave one, or
    none was tried: a time limit)."""

    constraint: str
    reason: str
    relaxation: str
    relaxed: list[RelaxedPlan] = Field(default_factory=list)


class ProfileUsed(_Report):
    gpu: str
    name: str
    source: str


class SearchStats(_Report):
    """How the candidates came about: configurations asked of the latency model, the feasible
    best per GPU x TP x role, how many were dominated (same GPU type and role, no fewer GPUs
    and no more capacity) and how many reached the MILP."""

    configurations_evaluated: int
    candidates: int
    candidates_pruned_dominated: int
    candidates_in_milp: int
    milp_variables: int
    milp_constraints: int
    unfit: list[str]


class SolverSummary(_Report):
    status: Status
    objective_usd: float | None
    gap: float | None
    time_limit_s: float


class PlanReport(_Report):
    """The cheapest deployment that meets the SLOs for the forecast (docs/plan.md)."""

    status: Status
    model: str
    slo: PlanTargets
    workload: PlanWorkload
    deployments: list[PlanDeployment]
    gpus: list[GpuUse]
    gpu_count_peak: int
    usd_per_hour_peak: float | None
    usd_per_month: float | None
    usd_per_million_output_tokens: float | None
    usd_per_million_input_tokens: float | None
    predicted: Predicted | None
    simulated: Simulated | None
    disaggregated: bool
    disaggregation_reason: str
    binding_constraints: list[str]
    alternatives: list[Alternative]
    warnings: list[str]
    notes: list[str]
    infeasibility: Infeasibility | None
    profiles: list[ProfileUsed]
    buckets: list[BucketCost]
    search: SearchStats
    solver: SolverSummary
    # The checkpoint `vllm serve` loads when it is not `model` (a pre-quantized one,
    # candidates.weight_checkpoints); None: `model` itself.
    served_model: str | None = None
