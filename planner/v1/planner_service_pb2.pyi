from google.protobuf import struct_pb2 as _struct_pb2
from google.rpc import status_pb2 as _status_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Dtype(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DTYPE_UNSPECIFIED: _ClassVar[Dtype]
    DTYPE_BF16: _ClassVar[Dtype]
    DTYPE_FP8: _ClassVar[Dtype]
    DTYPE_INT8: _ClassVar[Dtype]
    DTYPE_INT4_AWQ: _ClassVar[Dtype]
    DTYPE_INT4_GPTQ: _ClassVar[Dtype]
    DTYPE_NVFP4: _ClassVar[Dtype]

class Mode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MODE_UNSPECIFIED: _ClassVar[Mode]
    MODE_COLOCATED: _ClassVar[Mode]
    MODE_DISAGGREGATED: _ClassVar[Mode]

class Role(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROLE_UNSPECIFIED: _ClassVar[Role]
    ROLE_COLOCATED: _ClassVar[Role]
    ROLE_PREFILL: _ClassVar[Role]
    ROLE_DECODE: _ClassVar[Role]

class Router(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROUTER_UNSPECIFIED: _ClassVar[Router]
    ROUTER_ROUND_ROBIN: _ClassVar[Router]
    ROUTER_LEAST_OUTSTANDING_TOKENS: _ClassVar[Router]

class Endpoint(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ENDPOINT_UNSPECIFIED: _ClassVar[Endpoint]
    ENDPOINT_CHAT: _ClassVar[Endpoint]
    ENDPOINT_COMPLETIONS: _ClassVar[Endpoint]

class Replay(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REPLAY_UNSPECIFIED: _ClassVar[Replay]
    REPLAY_RECORDED: _ClassVar[Replay]
    REPLAY_SCALED: _ClassVar[Replay]

class SpeculativeMethod(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SPECULATIVE_METHOD_UNSPECIFIED: _ClassVar[SpeculativeMethod]
    SPECULATIVE_METHOD_DRAFT: _ClassVar[SpeculativeMethod]
    SPECULATIVE_METHOD_EAGLE: _ClassVar[SpeculativeMethod]
    SPECULATIVE_METHOD_EAGLE3: _ClassVar[SpeculativeMethod]
    SPECULATIVE_METHOD_MTP: _ClassVar[SpeculativeMethod]
    SPECULATIVE_METHOD_NGRAM: _ClassVar[SpeculativeMethod]

class ChunkedPrefillReading(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CHUNKED_PREFILL_READING_UNSPECIFIED: _ClassVar[ChunkedPrefillReading]
    CHUNKED_PREFILL_READING_CHUNK: _ClassVar[ChunkedPrefillReading]
    CHUNKED_PREFILL_READING_BUDGET: _ClassVar[ChunkedPrefillReading]

class MeasurementKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MEASUREMENT_KIND_UNSPECIFIED: _ClassVar[MeasurementKind]
    MEASUREMENT_KIND_INFO: _ClassVar[MeasurementKind]
    MEASUREMENT_KIND_CEILING: _ClassVar[MeasurementKind]
    MEASUREMENT_KIND_LINEAR: _ClassVar[MeasurementKind]
    MEASUREMENT_KIND_DECODE: _ClassVar[MeasurementKind]
    MEASUREMENT_KIND_PREFILL: _ClassVar[MeasurementKind]
    MEASUREMENT_KIND_CHUNKED_PREFILL: _ClassVar[MeasurementKind]

class CatalogKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CATALOG_KIND_UNSPECIFIED: _ClassVar[CatalogKind]
    CATALOG_KIND_GPUS: _ClassVar[CatalogKind]
    CATALOG_KIND_MODELS: _ClassVar[CatalogKind]

class StabilityLimit(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STABILITY_LIMIT_UNSPECIFIED: _ClassVar[StabilityLimit]
    STABILITY_LIMIT_COMPUTE: _ClassVar[StabilityLimit]
    STABILITY_LIMIT_KV_CAPACITY: _ClassVar[StabilityLimit]
    STABILITY_LIMIT_MAX_NUM_SEQS: _ClassVar[StabilityLimit]
    STABILITY_LIMIT_MAX_NUM_BATCHED_TOKENS: _ClassVar[StabilityLimit]

class BindingLimit(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BINDING_LIMIT_UNSPECIFIED: _ClassVar[BindingLimit]
    BINDING_LIMIT_TTFT: _ClassVar[BindingLimit]
    BINDING_LIMIT_ITL: _ClassVar[BindingLimit]
    BINDING_LIMIT_COMPUTE: _ClassVar[BindingLimit]
    BINDING_LIMIT_KV_CAPACITY: _ClassVar[BindingLimit]
    BINDING_LIMIT_MAX_NUM_SEQS: _ClassVar[BindingLimit]
    BINDING_LIMIT_MAX_NUM_BATCHED_TOKENS: _ClassVar[BindingLimit]

class ClosedLoopLimit(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CLOSED_LOOP_LIMIT_UNSPECIFIED: _ClassVar[ClosedLoopLimit]
    CLOSED_LOOP_LIMIT_CONCURRENCY: _ClassVar[ClosedLoopLimit]
    CLOSED_LOOP_LIMIT_RATE_CAP: _ClassVar[ClosedLoopLimit]
    CLOSED_LOOP_LIMIT_CAPACITY: _ClassVar[ClosedLoopLimit]

class SimulationSource(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SIMULATION_SOURCE_UNSPECIFIED: _ClassVar[SimulationSource]
    SIMULATION_SOURCE_WORKLOAD: _ClassVar[SimulationSource]
    SIMULATION_SOURCE_TRACE: _ClassVar[SimulationSource]

class BudgetReading(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BUDGET_READING_UNSPECIFIED: _ClassVar[BudgetReading]
    BUDGET_READING_V1: _ClassVar[BudgetReading]

class Bound(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BOUND_UNSPECIFIED: _ClassVar[Bound]
    BOUND_MEMORY: _ClassVar[Bound]
    BOUND_COMPUTE: _ClassVar[Bound]

class CalibrationKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CALIBRATION_KIND_UNSPECIFIED: _ClassVar[CalibrationKind]
    CALIBRATION_KIND_LINEAR: _ClassVar[CalibrationKind]
    CALIBRATION_KIND_DECODE: _ClassVar[CalibrationKind]
    CALIBRATION_KIND_PREFILL: _ClassVar[CalibrationKind]
    CALIBRATION_KIND_CHUNKED_PREFILL: _ClassVar[CalibrationKind]

class DisaggregationPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DISAGGREGATION_POLICY_UNSPECIFIED: _ClassVar[DisaggregationPolicy]
    DISAGGREGATION_POLICY_AUTO: _ClassVar[DisaggregationPolicy]
    DISAGGREGATION_POLICY_NEVER: _ClassVar[DisaggregationPolicy]
    DISAGGREGATION_POLICY_ALWAYS: _ClassVar[DisaggregationPolicy]

class PlanStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PLAN_STATUS_UNSPECIFIED: _ClassVar[PlanStatus]
    PLAN_STATUS_OPTIMAL: _ClassVar[PlanStatus]
    PLAN_STATUS_FEASIBLE: _ClassVar[PlanStatus]
    PLAN_STATUS_INFEASIBLE: _ClassVar[PlanStatus]
    PLAN_STATUS_NO_SOLUTION: _ClassVar[PlanStatus]

class AlternativeKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ALTERNATIVE_KIND_UNSPECIFIED: _ClassVar[AlternativeKind]
    ALTERNATIVE_KIND_GPU: _ClassVar[AlternativeKind]
    ALTERNATIVE_KIND_DISAGGREGATION: _ClassVar[AlternativeKind]
    ALTERNATIVE_KIND_VLLM_DEFAULTS: _ClassVar[AlternativeKind]
DTYPE_UNSPECIFIED: Dtype
DTYPE_BF16: Dtype
DTYPE_FP8: Dtype
DTYPE_INT8: Dtype
DTYPE_INT4_AWQ: Dtype
DTYPE_INT4_GPTQ: Dtype
DTYPE_NVFP4: Dtype
MODE_UNSPECIFIED: Mode
MODE_COLOCATED: Mode
MODE_DISAGGREGATED: Mode
ROLE_UNSPECIFIED: Role
ROLE_COLOCATED: Role
ROLE_PREFILL: Role
ROLE_DECODE: Role
ROUTER_UNSPECIFIED: Router
ROUTER_ROUND_ROBIN: Router
ROUTER_LEAST_OUTSTANDING_TOKENS: Router
ENDPOINT_UNSPECIFIED: Endpoint
ENDPOINT_CHAT: Endpoint
ENDPOINT_COMPLETIONS: Endpoint
REPLAY_UNSPECIFIED: Replay
REPLAY_RECORDED: Replay
REPLAY_SCALED: Replay
SPECULATIVE_METHOD_UNSPECIFIED: SpeculativeMethod
SPECULATIVE_METHOD_DRAFT: SpeculativeMethod
SPECULATIVE_METHOD_EAGLE: SpeculativeMethod
SPECULATIVE_METHOD_EAGLE3: SpeculativeMethod
SPECULATIVE_METHOD_MTP: SpeculativeMethod
SPECULATIVE_METHOD_NGRAM: SpeculativeMethod
CHUNKED_PREFILL_READING_UNSPECIFIED: ChunkedPrefillReading
CHUNKED_PREFILL_READING_CHUNK: ChunkedPrefillReading
CHUNKED_PREFILL_READING_BUDGET: ChunkedPrefillReading
MEASUREMENT_KIND_UNSPECIFIED: MeasurementKind
MEASUREMENT_KIND_INFO: MeasurementKind
MEASUREMENT_KIND_CEILING: MeasurementKind
MEASUREMENT_KIND_LINEAR: MeasurementKind
MEASUREMENT_KIND_DECODE: MeasurementKind
MEASUREMENT_KIND_PREFILL: MeasurementKind
MEASUREMENT_KIND_CHUNKED_PREFILL: MeasurementKind
CATALOG_KIND_UNSPECIFIED: CatalogKind
CATALOG_KIND_GPUS: CatalogKind
CATALOG_KIND_MODELS: CatalogKind
STABILITY_LIMIT_UNSPECIFIED: StabilityLimit
STABILITY_LIMIT_COMPUTE: StabilityLimit
STABILITY_LIMIT_KV_CAPACITY: StabilityLimit
STABILITY_LIMIT_MAX_NUM_SEQS: StabilityLimit
STABILITY_LIMIT_MAX_NUM_BATCHED_TOKENS: StabilityLimit
BINDING_LIMIT_UNSPECIFIED: BindingLimit
BINDING_LIMIT_TTFT: BindingLimit
BINDING_LIMIT_ITL: BindingLimit
BINDING_LIMIT_COMPUTE: BindingLimit
BINDING_LIMIT_KV_CAPACITY: BindingLimit
BINDING_LIMIT_MAX_NUM_SEQS: BindingLimit
BINDING_LIMIT_MAX_NUM_BATCHED_TOKENS: BindingLimit
CLOSED_LOOP_LIMIT_UNSPECIFIED: ClosedLoopLimit
CLOSED_LOOP_LIMIT_CONCURRENCY: ClosedLoopLimit
CLOSED_LOOP_LIMIT_RATE_CAP: ClosedLoopLimit
CLOSED_LOOP_LIMIT_CAPACITY: ClosedLoopLimit
SIMULATION_SOURCE_UNSPECIFIED: SimulationSource
SIMULATION_SOURCE_WORKLOAD: SimulationSource
SIMULATION_SOURCE_TRACE: SimulationSource
BUDGET_READING_UNSPECIFIED: BudgetReading
BUDGET_READING_V1: BudgetReading
BOUND_UNSPECIFIED: Bound
BOUND_MEMORY: Bound
BOUND_COMPUTE: Bound
CALIBRATION_KIND_UNSPECIFIED: CalibrationKind
CALIBRATION_KIND_LINEAR: CalibrationKind
CALIBRATION_KIND_DECODE: CalibrationKind
CALIBRATION_KIND_PREFILL: CalibrationKind
CALIBRATION_KIND_CHUNKED_PREFILL: CalibrationKind
DISAGGREGATION_POLICY_UNSPECIFIED: DisaggregationPolicy
DISAGGREGATION_POLICY_AUTO: DisaggregationPolicy
DISAGGREGATION_POLICY_NEVER: DisaggregationPolicy
DISAGGREGATION_POLICY_ALWAYS: DisaggregationPolicy
PLAN_STATUS_UNSPECIFIED: PlanStatus
PLAN_STATUS_OPTIMAL: PlanStatus
PLAN_STATUS_FEASIBLE: PlanStatus
PLAN_STATUS_INFEASIBLE: PlanStatus
PLAN_STATUS_NO_SOLUTION: PlanStatus
ALTERNATIVE_KIND_UNSPECIFIED: AlternativeKind
ALTERNATIVE_KIND_GPU: AlternativeKind
ALTERNATIVE_KIND_DISAGGREGATION: AlternativeKind
ALTERNATIVE_KIND_VLLM_DEFAULTS: AlternativeKind

class TokenProbability(_message.Message):
    __slots__ = ("tokens", "probability")
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    PROBABILITY_FIELD_NUMBER: _ClassVar[int]
    tokens: int
    probability: float
    def __init__(self, tokens: _Optional[int] = ..., probability: _Optional[float] = ...) -> None: ...

class Histogram(_message.Message):
    __slots__ = ("edges", "counts", "weights")
    EDGES_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    edges: _containers.RepeatedScalarFieldContainer[float]
    counts: _containers.RepeatedScalarFieldContainer[int]
    weights: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, edges: _Optional[_Iterable[float]] = ..., counts: _Optional[_Iterable[int]] = ..., weights: _Optional[_Iterable[float]] = ...) -> None: ...

class LengthDistribution(_message.Message):
    __slots__ = ("pairs", "histogram", "percentiles", "constant", "samples")
    class PercentilesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    PAIRS_FIELD_NUMBER: _ClassVar[int]
    HISTOGRAM_FIELD_NUMBER: _ClassVar[int]
    PERCENTILES_FIELD_NUMBER: _ClassVar[int]
    CONSTANT_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_FIELD_NUMBER: _ClassVar[int]
    pairs: _containers.RepeatedCompositeFieldContainer[TokenProbability]
    histogram: Histogram
    percentiles: _containers.ScalarMap[str, float]
    constant: int
    samples: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, pairs: _Optional[_Iterable[_Union[TokenProbability, _Mapping]]] = ..., histogram: _Optional[_Union[Histogram, _Mapping]] = ..., percentiles: _Optional[_Mapping[str, float]] = ..., constant: _Optional[int] = ..., samples: _Optional[_Iterable[int]] = ...) -> None: ...

class RateBucket(_message.Message):
    __slots__ = ("duration_s", "requests_per_s")
    DURATION_S_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_PER_S_FIELD_NUMBER: _ClassVar[int]
    duration_s: float
    requests_per_s: float
    def __init__(self, duration_s: _Optional[float] = ..., requests_per_s: _Optional[float] = ...) -> None: ...

class Arrivals(_message.Message):
    __slots__ = ("requests_per_s", "buckets", "burstiness", "concurrency")
    REQUESTS_PER_S_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    BURSTINESS_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    requests_per_s: float
    buckets: _containers.RepeatedCompositeFieldContainer[RateBucket]
    burstiness: float
    concurrency: int
    def __init__(self, requests_per_s: _Optional[float] = ..., buckets: _Optional[_Iterable[_Union[RateBucket, _Mapping]]] = ..., burstiness: _Optional[float] = ..., concurrency: _Optional[int] = ...) -> None: ...

class Workload(_message.Message):
    __slots__ = ("name", "arrivals", "input_tokens", "output_tokens", "prefix_cache_hit_fraction", "trace", "bucket_s", "burstiness", "bins", "requests_per_s", "endpoint", "history", "forecast")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARRIVALS_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PREFIX_CACHE_HIT_FRACTION_FIELD_NUMBER: _ClassVar[int]
    TRACE_FIELD_NUMBER: _ClassVar[int]
    BUCKET_S_FIELD_NUMBER: _ClassVar[int]
    BURSTINESS_FIELD_NUMBER: _ClassVar[int]
    BINS_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_PER_S_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    FORECAST_FIELD_NUMBER: _ClassVar[int]
    name: str
    arrivals: Arrivals
    input_tokens: LengthDistribution
    output_tokens: LengthDistribution
    prefix_cache_hit_fraction: float
    trace: str
    bucket_s: _struct_pb2.Value
    burstiness: _struct_pb2.Value
    bins: int
    requests_per_s: float
    endpoint: Endpoint
    history: HistorySource
    forecast: ForecastSpec
    def __init__(self, name: _Optional[str] = ..., arrivals: _Optional[_Union[Arrivals, _Mapping]] = ..., input_tokens: _Optional[_Union[LengthDistribution, _Mapping]] = ..., output_tokens: _Optional[_Union[LengthDistribution, _Mapping]] = ..., prefix_cache_hit_fraction: _Optional[float] = ..., trace: _Optional[str] = ..., bucket_s: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., burstiness: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., bins: _Optional[int] = ..., requests_per_s: _Optional[float] = ..., endpoint: _Optional[_Union[Endpoint, str]] = ..., history: _Optional[_Union[HistorySource, _Mapping]] = ..., forecast: _Optional[_Union[ForecastSpec, _Mapping]] = ...) -> None: ...

class HistoryPoint(_message.Message):
    __slots__ = ("timestamp", "requests_per_s", "prompt_tokens_mean", "output_tokens_mean")
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_PER_S_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_MEAN_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_MEAN_FIELD_NUMBER: _ClassVar[int]
    timestamp: float
    requests_per_s: float
    prompt_tokens_mean: float
    output_tokens_mean: float
    def __init__(self, timestamp: _Optional[float] = ..., requests_per_s: _Optional[float] = ..., prompt_tokens_mean: _Optional[float] = ..., output_tokens_mean: _Optional[float] = ...) -> None: ...

class HistorySource(_message.Message):
    __slots__ = ("path", "format", "points")
    PATH_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    POINTS_FIELD_NUMBER: _ClassVar[int]
    path: str
    format: str
    points: _containers.RepeatedCompositeFieldContainer[HistoryPoint]
    def __init__(self, path: _Optional[str] = ..., format: _Optional[str] = ..., points: _Optional[_Iterable[_Union[HistoryPoint, _Mapping]]] = ...) -> None: ...

class ForecastSpec(_message.Message):
    __slots__ = ("horizon", "bucket", "quantile", "method", "growth")
    HORIZON_FIELD_NUMBER: _ClassVar[int]
    BUCKET_FIELD_NUMBER: _ClassVar[int]
    QUANTILE_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    GROWTH_FIELD_NUMBER: _ClassVar[int]
    horizon: str
    bucket: str
    quantile: float
    method: str
    growth: str
    def __init__(self, horizon: _Optional[str] = ..., bucket: _Optional[str] = ..., quantile: _Optional[float] = ..., method: _Optional[str] = ..., growth: _Optional[str] = ...) -> None: ...

class Disaggregation(_message.Message):
    __slots__ = ("prefill_replicas", "decode_replicas", "kv_transfer_bandwidth_bytes_per_s", "kv_transfer_latency_s")
    PREFILL_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    DECODE_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    KV_TRANSFER_BANDWIDTH_BYTES_PER_S_FIELD_NUMBER: _ClassVar[int]
    KV_TRANSFER_LATENCY_S_FIELD_NUMBER: _ClassVar[int]
    prefill_replicas: int
    decode_replicas: int
    kv_transfer_bandwidth_bytes_per_s: float
    kv_transfer_latency_s: float
    def __init__(self, prefill_replicas: _Optional[int] = ..., decode_replicas: _Optional[int] = ..., kv_transfer_bandwidth_bytes_per_s: _Optional[float] = ..., kv_transfer_latency_s: _Optional[float] = ...) -> None: ...

class Deployment(_message.Message):
    __slots__ = ("model", "gpu", "tp", "replicas", "weight_dtype", "kv_dtype", "max_num_seqs", "max_num_batched_tokens", "long_prefill_token_threshold", "gpu_memory_utilization", "usd_per_gpu_hour", "disaggregated", "max_model_len", "lora", "weight_group_size", "pipeline_parallel_size", "expert_parallel", "data_parallel_size", "routing_skew", "speculative_decoding", "checkpoint")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    GPU_FIELD_NUMBER: _ClassVar[int]
    TP_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_DTYPE_FIELD_NUMBER: _ClassVar[int]
    KV_DTYPE_FIELD_NUMBER: _ClassVar[int]
    MAX_NUM_SEQS_FIELD_NUMBER: _ClassVar[int]
    MAX_NUM_BATCHED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    LONG_PREFILL_TOKEN_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    GPU_MEMORY_UTILIZATION_FIELD_NUMBER: _ClassVar[int]
    USD_PER_GPU_HOUR_FIELD_NUMBER: _ClassVar[int]
    DISAGGREGATED_FIELD_NUMBER: _ClassVar[int]
    MAX_MODEL_LEN_FIELD_NUMBER: _ClassVar[int]
    LORA_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_GROUP_SIZE_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_PARALLEL_SIZE_FIELD_NUMBER: _ClassVar[int]
    EXPERT_PARALLEL_FIELD_NUMBER: _ClassVar[int]
    DATA_PARALLEL_SIZE_FIELD_NUMBER: _ClassVar[int]
    ROUTING_SKEW_FIELD_NUMBER: _ClassVar[int]
    SPECULATIVE_DECODING_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    model: str
    gpu: str
    tp: int
    replicas: int
    weight_dtype: Dtype
    kv_dtype: Dtype
    max_num_seqs: int
    max_num_batched_tokens: int
    long_prefill_token_threshold: int
    gpu_memory_utilization: float
    usd_per_gpu_hour: float
    disaggregated: Disaggregation
    max_model_len: int
    lora: Lora
    weight_group_size: int
    pipeline_parallel_size: int
    expert_parallel: bool
    data_parallel_size: int
    routing_skew: float
    speculative_decoding: SpeculativeDecoding
    checkpoint: str
    def __init__(self, model: _Optional[str] = ..., gpu: _Optional[str] = ..., tp: _Optional[int] = ..., replicas: _Optional[int] = ..., weight_dtype: _Optional[_Union[Dtype, str]] = ..., kv_dtype: _Optional[_Union[Dtype, str]] = ..., max_num_seqs: _Optional[int] = ..., max_num_batched_tokens: _Optional[int] = ..., long_prefill_token_threshold: _Optional[int] = ..., gpu_memory_utilization: _Optional[float] = ..., usd_per_gpu_hour: _Optional[float] = ..., disaggregated: _Optional[_Union[Disaggregation, _Mapping]] = ..., max_model_len: _Optional[int] = ..., lora: _Optional[_Union[Lora, _Mapping]] = ..., weight_group_size: _Optional[int] = ..., pipeline_parallel_size: _Optional[int] = ..., expert_parallel: _Optional[bool] = ..., data_parallel_size: _Optional[int] = ..., routing_skew: _Optional[float] = ..., speculative_decoding: _Optional[_Union[SpeculativeDecoding, _Mapping]] = ..., checkpoint: _Optional[str] = ...) -> None: ...

class ExpertParallelSummary(_message.Message):
    __slots__ = ("data_parallel_size", "ep_size", "routing_skew", "experts_per_gpu", "expert_gib_per_gpu", "kv_cache_tokens_per_rank")
    DATA_PARALLEL_SIZE_FIELD_NUMBER: _ClassVar[int]
    EP_SIZE_FIELD_NUMBER: _ClassVar[int]
    ROUTING_SKEW_FIELD_NUMBER: _ClassVar[int]
    EXPERTS_PER_GPU_FIELD_NUMBER: _ClassVar[int]
    EXPERT_GIB_PER_GPU_FIELD_NUMBER: _ClassVar[int]
    KV_CACHE_TOKENS_PER_RANK_FIELD_NUMBER: _ClassVar[int]
    data_parallel_size: int
    ep_size: int
    routing_skew: float
    experts_per_gpu: int
    expert_gib_per_gpu: float
    kv_cache_tokens_per_rank: int
    def __init__(self, data_parallel_size: _Optional[int] = ..., ep_size: _Optional[int] = ..., routing_skew: _Optional[float] = ..., experts_per_gpu: _Optional[int] = ..., expert_gib_per_gpu: _Optional[float] = ..., kv_cache_tokens_per_rank: _Optional[int] = ...) -> None: ...

class SpeculativeDecoding(_message.Message):
    __slots__ = ("method", "num_speculative_tokens", "acceptance_rate", "acceptance_length", "draft_model", "draft_vocab_size", "acceptance_from")
    METHOD_FIELD_NUMBER: _ClassVar[int]
    NUM_SPECULATIVE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    ACCEPTANCE_RATE_FIELD_NUMBER: _ClassVar[int]
    ACCEPTANCE_LENGTH_FIELD_NUMBER: _ClassVar[int]
    DRAFT_MODEL_FIELD_NUMBER: _ClassVar[int]
    DRAFT_VOCAB_SIZE_FIELD_NUMBER: _ClassVar[int]
    ACCEPTANCE_FROM_FIELD_NUMBER: _ClassVar[int]
    method: SpeculativeMethod
    num_speculative_tokens: int
    acceptance_rate: float
    acceptance_length: float
    draft_model: str
    draft_vocab_size: int
    acceptance_from: str
    def __init__(self, method: _Optional[_Union[SpeculativeMethod, str]] = ..., num_speculative_tokens: _Optional[int] = ..., acceptance_rate: _Optional[float] = ..., acceptance_length: _Optional[float] = ..., draft_model: _Optional[str] = ..., draft_vocab_size: _Optional[int] = ..., acceptance_from: _Optional[str] = ...) -> None: ...

class SpeculativeSummary(_message.Message):
    __slots__ = ("method", "num_speculative_tokens", "acceptance_rate", "tokens_per_step", "proposer_gib", "kv_cache_tokens")
    METHOD_FIELD_NUMBER: _ClassVar[int]
    NUM_SPECULATIVE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    ACCEPTANCE_RATE_FIELD_NUMBER: _ClassVar[int]
    TOKENS_PER_STEP_FIELD_NUMBER: _ClassVar[int]
    PROPOSER_GIB_FIELD_NUMBER: _ClassVar[int]
    KV_CACHE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    method: str
    num_speculative_tokens: int
    acceptance_rate: float
    tokens_per_step: float
    proposer_gib: float
    kv_cache_tokens: int
    def __init__(self, method: _Optional[str] = ..., num_speculative_tokens: _Optional[int] = ..., acceptance_rate: _Optional[float] = ..., tokens_per_step: _Optional[float] = ..., proposer_gib: _Optional[float] = ..., kv_cache_tokens: _Optional[int] = ...) -> None: ...

class Lora(_message.Message):
    __slots__ = ("max_loras", "max_lora_rank", "max_cpu_loras")
    MAX_LORAS_FIELD_NUMBER: _ClassVar[int]
    MAX_LORA_RANK_FIELD_NUMBER: _ClassVar[int]
    MAX_CPU_LORAS_FIELD_NUMBER: _ClassVar[int]
    max_loras: int
    max_lora_rank: int
    max_cpu_loras: int
    def __init__(self, max_loras: _Optional[int] = ..., max_lora_rank: _Optional[int] = ..., max_cpu_loras: _Optional[int] = ...) -> None: ...

class LoraMemory(_message.Message):
    __slots__ = ("max_loras", "max_lora_rank", "adapter_gib", "kv_cache_gib", "kv_cache_tokens")
    MAX_LORAS_FIELD_NUMBER: _ClassVar[int]
    MAX_LORA_RANK_FIELD_NUMBER: _ClassVar[int]
    ADAPTER_GIB_FIELD_NUMBER: _ClassVar[int]
    KV_CACHE_GIB_FIELD_NUMBER: _ClassVar[int]
    KV_CACHE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    max_loras: int
    max_lora_rank: int
    adapter_gib: float
    kv_cache_gib: float
    kv_cache_tokens: int
    def __init__(self, max_loras: _Optional[int] = ..., max_lora_rank: _Optional[int] = ..., adapter_gib: _Optional[float] = ..., kv_cache_gib: _Optional[float] = ..., kv_cache_tokens: _Optional[int] = ...) -> None: ...

class SloTargets(_message.Message):
    __slots__ = ("ttft_p99_ms", "itl_p99_ms", "tpot_p99_ms", "e2el_p99_ms")
    TTFT_P99_MS_FIELD_NUMBER: _ClassVar[int]
    ITL_P99_MS_FIELD_NUMBER: _ClassVar[int]
    TPOT_P99_MS_FIELD_NUMBER: _ClassVar[int]
    E2EL_P99_MS_FIELD_NUMBER: _ClassVar[int]
    ttft_p99_ms: float
    itl_p99_ms: float
    tpot_p99_ms: float
    e2el_p99_ms: float
    def __init__(self, ttft_p99_ms: _Optional[float] = ..., itl_p99_ms: _Optional[float] = ..., tpot_p99_ms: _Optional[float] = ..., e2el_p99_ms: _Optional[float] = ...) -> None: ...

class EvaluateRequest(_message.Message):
    __slots__ = ("deployment", "workload", "slo", "profile", "requests_per_s")
    DEPLOYMENT_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    SLO_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_PER_S_FIELD_NUMBER: _ClassVar[int]
    deployment: Deployment
    workload: Workload
    slo: SloTargets
    profile: str
    requests_per_s: float
    def __init__(self, deployment: _Optional[_Union[Deployment, _Mapping]] = ..., workload: _Optional[_Union[Workload, _Mapping]] = ..., slo: _Optional[_Union[SloTargets, _Mapping]] = ..., profile: _Optional[str] = ..., requests_per_s: _Optional[float] = ...) -> None: ...

class EvaluateResponse(_message.Message):
    __slots__ = ("report",)
    REPORT_FIELD_NUMBER: _ClassVar[int]
    report: EvaluateReport
    def __init__(self, report: _Optional[_Union[EvaluateReport, _Mapping]] = ...) -> None: ...

class SimulateRequest(_message.Message):
    __slots__ = ("deployment", "workload", "slo", "profile", "requests_per_s", "seed", "requests", "horizon_s", "trace", "replay", "router", "series")
    DEPLOYMENT_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    SLO_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_PER_S_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    HORIZON_S_FIELD_NUMBER: _ClassVar[int]
    TRACE_FIELD_NUMBER: _ClassVar[int]
    REPLAY_FIELD_NUMBER: _ClassVar[int]
    ROUTER_FIELD_NUMBER: _ClassVar[int]
    SERIES_FIELD_NUMBER: _ClassVar[int]
    deployment: Deployment
    workload: Workload
    slo: SloTargets
    profile: str
    requests_per_s: float
    seed: int
    requests: int
    horizon_s: float
    trace: str
    replay: Replay
    router: Router
    series: bool
    def __init__(self, deployment: _Optional[_Union[Deployment, _Mapping]] = ..., workload: _Optional[_Union[Workload, _Mapping]] = ..., slo: _Optional[_Union[SloTargets, _Mapping]] = ..., profile: _Optional[str] = ..., requests_per_s: _Optional[float] = ..., seed: _Optional[int] = ..., requests: _Optional[int] = ..., horizon_s: _Optional[float] = ..., trace: _Optional[str] = ..., replay: _Optional[_Union[Replay, str]] = ..., router: _Optional[_Union[Router, str]] = ..., series: _Optional[bool] = ...) -> None: ...

class SimulateResponse(_message.Message):
    __slots__ = ("report",)
    REPORT_FIELD_NUMBER: _ClassVar[int]
    report: SimulateReport
    def __init__(self, report: _Optional[_Union[SimulateReport, _Mapping]] = ...) -> None: ...

class ConcurrencyAnalysis(_message.Message):
    __slots__ = ("context_tokens", "concurrency", "gpu_memory_utilization")
    CONTEXT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    GPU_MEMORY_UTILIZATION_FIELD_NUMBER: _ClassVar[int]
    context_tokens: int
    concurrency: _containers.RepeatedScalarFieldContainer[int]
    gpu_memory_utilization: float
    def __init__(self, context_tokens: _Optional[int] = ..., concurrency: _Optional[_Iterable[int]] = ..., gpu_memory_utilization: _Optional[float] = ...) -> None: ...

class StaticBatchingAnalysis(_message.Message):
    __slots__ = ("context_tokens", "batch", "output_lengths")
    CONTEXT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_LENGTHS_FIELD_NUMBER: _ClassVar[int]
    context_tokens: int
    batch: _containers.RepeatedScalarFieldContainer[int]
    output_lengths: LengthDistribution
    def __init__(self, context_tokens: _Optional[int] = ..., batch: _Optional[_Iterable[int]] = ..., output_lengths: _Optional[_Union[LengthDistribution, _Mapping]] = ...) -> None: ...

class ChunkedPrefillAnalysis(_message.Message):
    __slots__ = ("prompt_tokens", "decodes", "context_tokens", "reading", "sizes_tokens")
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    DECODES_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    READING_FIELD_NUMBER: _ClassVar[int]
    SIZES_TOKENS_FIELD_NUMBER: _ClassVar[int]
    prompt_tokens: int
    decodes: int
    context_tokens: int
    reading: ChunkedPrefillReading
    sizes_tokens: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, prompt_tokens: _Optional[int] = ..., decodes: _Optional[int] = ..., context_tokens: _Optional[int] = ..., reading: _Optional[_Union[ChunkedPrefillReading, str]] = ..., sizes_tokens: _Optional[_Iterable[int]] = ...) -> None: ...

class PrefillAnalysis(_message.Message):
    __slots__ = ("prompt_tokens",)
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    prompt_tokens: int
    def __init__(self, prompt_tokens: _Optional[int] = ...) -> None: ...

class UtilizationAnalysis(_message.Message):
    __slots__ = ("context_tokens", "output_tokens_per_day", "floor_concurrency")
    CONTEXT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_PER_DAY_FIELD_NUMBER: _ClassVar[int]
    FLOOR_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    context_tokens: int
    output_tokens_per_day: float
    floor_concurrency: int
    def __init__(self, context_tokens: _Optional[int] = ..., output_tokens_per_day: _Optional[float] = ..., floor_concurrency: _Optional[int] = ...) -> None: ...

class KvCapacityAnalysis(_message.Message):
    __slots__ = ("context_tokens", "gpu_memory_utilization", "max_num_batched_tokens", "max_num_seqs")
    CONTEXT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    GPU_MEMORY_UTILIZATION_FIELD_NUMBER: _ClassVar[int]
    MAX_NUM_BATCHED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MAX_NUM_SEQS_FIELD_NUMBER: _ClassVar[int]
    context_tokens: int
    gpu_memory_utilization: float
    max_num_batched_tokens: int
    max_num_seqs: int
    def __init__(self, context_tokens: _Optional[int] = ..., gpu_memory_utilization: _Optional[float] = ..., max_num_batched_tokens: _Optional[int] = ..., max_num_seqs: _Optional[int] = ...) -> None: ...

class AnalyzeRequest(_message.Message):
    __slots__ = ("model", "gpu", "tp", "weight_dtype", "kv_dtype", "profile", "usd_per_gpu_hour", "concurrency", "static_batching", "chunked_prefill", "prefill", "utilization", "kv_capacity")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    GPU_FIELD_NUMBER: _ClassVar[int]
    TP_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_DTYPE_FIELD_NUMBER: _ClassVar[int]
    KV_DTYPE_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    USD_PER_GPU_HOUR_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    STATIC_BATCHING_FIELD_NUMBER: _ClassVar[int]
    CHUNKED_PREFILL_FIELD_NUMBER: _ClassVar[int]
    PREFILL_FIELD_NUMBER: _ClassVar[int]
    UTILIZATION_FIELD_NUMBER: _ClassVar[int]
    KV_CAPACITY_FIELD_NUMBER: _ClassVar[int]
    model: str
    gpu: str
    tp: int
    weight_dtype: Dtype
    kv_dtype: Dtype
    profile: str
    usd_per_gpu_hour: float
    concurrency: ConcurrencyAnalysis
    static_batching: StaticBatchingAnalysis
    chunked_prefill: ChunkedPrefillAnalysis
    prefill: PrefillAnalysis
    utilization: UtilizationAnalysis
    kv_capacity: KvCapacityAnalysis
    def __init__(self, model: _Optional[str] = ..., gpu: _Optional[str] = ..., tp: _Optional[int] = ..., weight_dtype: _Optional[_Union[Dtype, str]] = ..., kv_dtype: _Optional[_Union[Dtype, str]] = ..., profile: _Optional[str] = ..., usd_per_gpu_hour: _Optional[float] = ..., concurrency: _Optional[_Union[ConcurrencyAnalysis, _Mapping]] = ..., static_batching: _Optional[_Union[StaticBatchingAnalysis, _Mapping]] = ..., chunked_prefill: _Optional[_Union[ChunkedPrefillAnalysis, _Mapping]] = ..., prefill: _Optional[_Union[PrefillAnalysis, _Mapping]] = ..., utilization: _Optional[_Union[UtilizationAnalysis, _Mapping]] = ..., kv_capacity: _Optional[_Union[KvCapacityAnalysis, _Mapping]] = ...) -> None: ...

class AnalyzeResponse(_message.Message):
    __slots__ = ("replica", "concurrency", "static_batching", "chunked_prefill", "prefill", "utilization", "kv_capacity")
    REPLICA_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    STATIC_BATCHING_FIELD_NUMBER: _ClassVar[int]
    CHUNKED_PREFILL_FIELD_NUMBER: _ClassVar[int]
    PREFILL_FIELD_NUMBER: _ClassVar[int]
    UTILIZATION_FIELD_NUMBER: _ClassVar[int]
    KV_CAPACITY_FIELD_NUMBER: _ClassVar[int]
    replica: ReplicaInfo
    concurrency: ConcurrencyReport
    static_batching: StaticBatchingReport
    chunked_prefill: ChunkedPrefillReport
    prefill: PrefillReport
    utilization: UtilizationReport
    kv_capacity: KvCapacityReport
    def __init__(self, replica: _Optional[_Union[ReplicaInfo, _Mapping]] = ..., concurrency: _Optional[_Union[ConcurrencyReport, _Mapping]] = ..., static_batching: _Optional[_Union[StaticBatchingReport, _Mapping]] = ..., chunked_prefill: _Optional[_Union[ChunkedPrefillReport, _Mapping]] = ..., prefill: _Optional[_Union[PrefillReport, _Mapping]] = ..., utilization: _Optional[_Union[UtilizationReport, _Mapping]] = ..., kv_capacity: _Optional[_Union[KvCapacityReport, _Mapping]] = ...) -> None: ...

class MeasurementRow(_message.Message):
    __slots__ = ("kind", "tokens", "batch", "ctx", "prompt", "chunk", "decodes", "steps", "ms", "prefill_ms", "worst_step_ms", "what", "value", "device", "torch", "model", "gpu", "dtype", "params", "kv_bytes_per_token", "weights_bytes")
    KIND_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    CTX_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    DECODES_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    MS_FIELD_NUMBER: _ClassVar[int]
    PREFILL_MS_FIELD_NUMBER: _ClassVar[int]
    WORST_STEP_MS_FIELD_NUMBER: _ClassVar[int]
    WHAT_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    TORCH_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    GPU_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    KV_BYTES_PER_TOKEN_FIELD_NUMBER: _ClassVar[int]
    WEIGHTS_BYTES_FIELD_NUMBER: _ClassVar[int]
    kind: MeasurementKind
    tokens: int
    batch: int
    ctx: int
    prompt: int
    chunk: int
    decodes: int
    steps: int
    ms: float
    prefill_ms: float
    worst_step_ms: float
    what: str
    value: float
    device: str
    torch: str
    model: str
    gpu: str
    dtype: str
    params: float
    kv_bytes_per_token: float
    weights_bytes: float
    def __init__(self, kind: _Optional[_Union[MeasurementKind, str]] = ..., tokens: _Optional[int] = ..., batch: _Optional[int] = ..., ctx: _Optional[int] = ..., prompt: _Optional[int] = ..., chunk: _Optional[int] = ..., decodes: _Optional[int] = ..., steps: _Optional[int] = ..., ms: _Optional[float] = ..., prefill_ms: _Optional[float] = ..., worst_step_ms: _Optional[float] = ..., what: _Optional[str] = ..., value: _Optional[float] = ..., device: _Optional[str] = ..., torch: _Optional[str] = ..., model: _Optional[str] = ..., gpu: _Optional[str] = ..., dtype: _Optional[str] = ..., params: _Optional[float] = ..., kv_bytes_per_token: _Optional[float] = ..., weights_bytes: _Optional[float] = ...) -> None: ...

class MeasurementsInput(_message.Message):
    __slots__ = ("path", "rows", "about")
    PATH_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    ABOUT_FIELD_NUMBER: _ClassVar[int]
    path: str
    rows: _containers.RepeatedCompositeFieldContainer[MeasurementRow]
    about: str
    def __init__(self, path: _Optional[str] = ..., rows: _Optional[_Iterable[_Union[MeasurementRow, _Mapping]]] = ..., about: _Optional[str] = ...) -> None: ...

class FixedParameters(_message.Message):
    __slots__ = ("eta_bandwidth", "eta_matmul", "eta_attention", "step_overhead_s", "prefix_kv_passes", "decode_attention_items_per_sm", "prefix_query_kv_passes", "matmul_phantom_tokens", "activation_passes")
    ETA_BANDWIDTH_FIELD_NUMBER: _ClassVar[int]
    ETA_MATMUL_FIELD_NUMBER: _ClassVar[int]
    ETA_ATTENTION_FIELD_NUMBER: _ClassVar[int]
    STEP_OVERHEAD_S_FIELD_NUMBER: _ClassVar[int]
    PREFIX_KV_PASSES_FIELD_NUMBER: _ClassVar[int]
    DECODE_ATTENTION_ITEMS_PER_SM_FIELD_NUMBER: _ClassVar[int]
    PREFIX_QUERY_KV_PASSES_FIELD_NUMBER: _ClassVar[int]
    MATMUL_PHANTOM_TOKENS_FIELD_NUMBER: _ClassVar[int]
    ACTIVATION_PASSES_FIELD_NUMBER: _ClassVar[int]
    eta_bandwidth: float
    eta_matmul: float
    eta_attention: float
    step_overhead_s: float
    prefix_kv_passes: float
    decode_attention_items_per_sm: float
    prefix_query_kv_passes: float
    matmul_phantom_tokens: float
    activation_passes: float
    def __init__(self, eta_bandwidth: _Optional[float] = ..., eta_matmul: _Optional[float] = ..., eta_attention: _Optional[float] = ..., step_overhead_s: _Optional[float] = ..., prefix_kv_passes: _Optional[float] = ..., decode_attention_items_per_sm: _Optional[float] = ..., prefix_query_kv_passes: _Optional[float] = ..., matmul_phantom_tokens: _Optional[float] = ..., activation_passes: _Optional[float] = ...) -> None: ...

class CalibrateRequest(_message.Message):
    __slots__ = ("measurements", "model", "gpu", "name", "fix", "force")
    MEASUREMENTS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    GPU_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    FIX_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    measurements: MeasurementsInput
    model: str
    gpu: str
    name: str
    fix: FixedParameters
    force: bool
    def __init__(self, measurements: _Optional[_Union[MeasurementsInput, _Mapping]] = ..., model: _Optional[str] = ..., gpu: _Optional[str] = ..., name: _Optional[str] = ..., fix: _Optional[_Union[FixedParameters, _Mapping]] = ..., force: _Optional[bool] = ...) -> None: ...

class CalibrateResponse(_message.Message):
    __slots__ = ("report",)
    REPORT_FIELD_NUMBER: _ClassVar[int]
    report: CalibrateReport
    def __init__(self, report: _Optional[_Union[CalibrateReport, _Mapping]] = ...) -> None: ...

class ListCatalogRequest(_message.Message):
    __slots__ = ("kind", "name", "batch_tokens")
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    BATCH_TOKENS_FIELD_NUMBER: _ClassVar[int]
    kind: CatalogKind
    name: str
    batch_tokens: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, kind: _Optional[_Union[CatalogKind, str]] = ..., name: _Optional[str] = ..., batch_tokens: _Optional[_Iterable[int]] = ...) -> None: ...

class ListCatalogResponse(_message.Message):
    __slots__ = ("gpus", "models")
    GPUS_FIELD_NUMBER: _ClassVar[int]
    MODELS_FIELD_NUMBER: _ClassVar[int]
    gpus: GpuCatalogReport
    models: ModelCatalogReport
    def __init__(self, gpus: _Optional[_Union[GpuCatalogReport, _Mapping]] = ..., models: _Optional[_Union[ModelCatalogReport, _Mapping]] = ...) -> None: ...

class Floors(_message.Message):
    __slots__ = ("ttft_p99_ms", "itl_p99_ms", "itl_mixed_step_ms")
    TTFT_P99_MS_FIELD_NUMBER: _ClassVar[int]
    ITL_P99_MS_FIELD_NUMBER: _ClassVar[int]
    ITL_MIXED_STEP_MS_FIELD_NUMBER: _ClassVar[int]
    ttft_p99_ms: float
    itl_p99_ms: float
    itl_mixed_step_ms: float
    def __init__(self, ttft_p99_ms: _Optional[float] = ..., itl_p99_ms: _Optional[float] = ..., itl_mixed_step_ms: _Optional[float] = ...) -> None: ...

class EvaluatedDeployment(_message.Message):
    __slots__ = ("model", "gpu", "tp", "mode", "replicas", "prefill_replicas", "decode_replicas", "weight_dtype", "kv_dtype", "max_num_seqs", "max_num_batched_tokens", "long_prefill_token_threshold", "gpu_memory_utilization", "usd_per_gpu_hour", "profile", "profile_warning", "lora", "pipeline_parallel_size", "expert_parallel", "speculative_decoding")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    GPU_FIELD_NUMBER: _ClassVar[int]
    TP_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    PREFILL_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    DECODE_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_DTYPE_FIELD_NUMBER: _ClassVar[int]
    KV_DTYPE_FIELD_NUMBER: _ClassVar[int]
    MAX_NUM_SEQS_FIELD_NUMBER: _ClassVar[int]
    MAX_NUM_BATCHED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    LONG_PREFILL_TOKEN_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    GPU_MEMORY_UTILIZATION_FIELD_NUMBER: _ClassVar[int]
    USD_PER_GPU_HOUR_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    PROFILE_WARNING_FIELD_NUMBER: _ClassVar[int]
    LORA_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_PARALLEL_SIZE_FIELD_NUMBER: _ClassVar[int]
    EXPERT_PARALLEL_FIELD_NUMBER: _ClassVar[int]
    SPECULATIVE_DECODING_FIELD_NUMBER: _ClassVar[int]
    model: str
    gpu: str
    tp: int
    mode: Mode
    replicas: int
    prefill_replicas: int
    decode_replicas: int
    weight_dtype: Dtype
    kv_dtype: Dtype
    max_num_seqs: int
    max_num_batched_tokens: int
    long_prefill_token_threshold: int
    gpu_memory_utilization: float
    usd_per_gpu_hour: float
    profile: str
    profile_warning: str
    lora: LoraMemory
    pipeline_parallel_size: int
    expert_parallel: ExpertParallelSummary
    speculative_decoding: SpeculativeSummary
    def __init__(self, model: _Optional[str] = ..., gpu: _Optional[str] = ..., tp: _Optional[int] = ..., mode: _Optional[_Union[Mode, str]] = ..., replicas: _Optional[int] = ..., prefill_replicas: _Optional[int] = ..., decode_replicas: _Optional[int] = ..., weight_dtype: _Optional[_Union[Dtype, str]] = ..., kv_dtype: _Optional[_Union[Dtype, str]] = ..., max_num_seqs: _Optional[int] = ..., max_num_batched_tokens: _Optional[int] = ..., long_prefill_token_threshold: _Optional[int] = ..., gpu_memory_utilization: _Optional[float] = ..., usd_per_gpu_hour: _Optional[float] = ..., profile: _Optional[str] = ..., profile_warning: _Optional[str] = ..., lora: _Optional[_Union[LoraMemory, _Mapping]] = ..., pipeline_parallel_size: _Optional[int] = ..., expert_parallel: _Optional[_Union[ExpertParallelSummary, _Mapping]] = ..., speculative_decoding: _Optional[_Union[SpeculativeSummary, _Mapping]] = ...) -> None: ...

class WorkloadSummary(_message.Message):
    __slots__ = ("name", "mean_requests_per_s", "peak_requests_per_s", "burstiness", "mean_input_tokens", "p99_input_tokens", "mean_output_tokens", "p99_output_tokens", "prefix_cache_hit_fraction")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MEAN_REQUESTS_PER_S_FIELD_NUMBER: _ClassVar[int]
    PEAK_REQUESTS_PER_S_FIELD_NUMBER: _ClassVar[int]
    BURSTINESS_FIELD_NUMBER: _ClassVar[int]
    MEAN_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    P99_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MEAN_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    P99_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PREFIX_CACHE_HIT_FRACTION_FIELD_NUMBER: _ClassVar[int]
    name: str
    mean_requests_per_s: float
    peak_requests_per_s: float
    burstiness: float
    mean_input_tokens: float
    p99_input_tokens: float
    mean_output_tokens: float
    p99_output_tokens: float
    prefix_cache_hit_fraction: float
    def __init__(self, name: _Optional[str] = ..., mean_requests_per_s: _Optional[float] = ..., peak_requests_per_s: _Optional[float] = ..., burstiness: _Optional[float] = ..., mean_input_tokens: _Optional[float] = ..., p99_input_tokens: _Optional[float] = ..., mean_output_tokens: _Optional[float] = ..., p99_output_tokens: _Optional[float] = ..., prefix_cache_hit_fraction: _Optional[float] = ...) -> None: ...

class PoolPrediction(_message.Message):
    __slots__ = ("replicas", "requests_per_s_per_replica", "stable", "max_stable_requests_per_s_per_replica", "binding_limit", "ttft_p99_ms", "itl_p99_ms", "decode_concurrency", "kv_cache_usage", "preemption_risk")
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_PER_S_PER_REPLICA_FIELD_NUMBER: _ClassVar[int]
    STABLE_FIELD_NUMBER: _ClassVar[int]
    MAX_STABLE_REQUESTS_PER_S_PER_REPLICA_FIELD_NUMBER: _ClassVar[int]
    BINDING_LIMIT_FIELD_NUMBER: _ClassVar[int]
    TTFT_P99_MS_FIELD_NUMBER: _ClassVar[int]
    ITL_P99_MS_FIELD_NUMBER: _ClassVar[int]
    DECODE_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    KV_CACHE_USAGE_FIELD_NUMBER: _ClassVar[int]
    PREEMPTION_RISK_FIELD_NUMBER: _ClassVar[int]
    replicas: int
    requests_per_s_per_replica: float
    stable: bool
    max_stable_requests_per_s_per_replica: float
    binding_limit: StabilityLimit
    ttft_p99_ms: float
    itl_p99_ms: float
    decode_concurrency: float
    kv_cache_usage: float
    preemption_risk: float
    def __init__(self, replicas: _Optional[int] = ..., requests_per_s_per_replica: _Optional[float] = ..., stable: _Optional[bool] = ..., max_stable_requests_per_s_per_replica: _Optional[float] = ..., binding_limit: _Optional[_Union[StabilityLimit, str]] = ..., ttft_p99_ms: _Optional[float] = ..., itl_p99_ms: _Optional[float] = ..., decode_concurrency: _Optional[float] = ..., kv_cache_usage: _Optional[float] = ..., preemption_risk: _Optional[float] = ...) -> None: ...

class PoolPredictions(_message.Message):
    __slots__ = ("colocated", "prefill", "decode")
    COLOCATED_FIELD_NUMBER: _ClassVar[int]
    PREFILL_FIELD_NUMBER: _ClassVar[int]
    DECODE_FIELD_NUMBER: _ClassVar[int]
    colocated: PoolPrediction
    prefill: PoolPrediction
    decode: PoolPrediction
    def __init__(self, colocated: _Optional[_Union[PoolPrediction, _Mapping]] = ..., prefill: _Optional[_Union[PoolPrediction, _Mapping]] = ..., decode: _Optional[_Union[PoolPrediction, _Mapping]] = ...) -> None: ...

class BucketPrediction(_message.Message):
    __slots__ = ("start_s", "duration_s", "requests_per_s", "stable", "ttft_p99_ms", "itl_p99_ms", "decode_concurrency", "kv_cache_usage")
    START_S_FIELD_NUMBER: _ClassVar[int]
    DURATION_S_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_PER_S_FIELD_NUMBER: _ClassVar[int]
    STABLE_FIELD_NUMBER: _ClassVar[int]
    TTFT_P99_MS_FIELD_NUMBER: _ClassVar[int]
    ITL_P99_MS_FIELD_NUMBER: _ClassVar[int]
    DECODE_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    KV_CACHE_USAGE_FIELD_NUMBER: _ClassVar[int]
    start_s: float
    duration_s: float
    requests_per_s: float
    stable: bool
    ttft_p99_ms: float
    itl_p99_ms: float
    decode_concurrency: float
    kv_cache_usage: float
    def __init__(self, start_s: _Optional[float] = ..., duration_s: _Optional[float] = ..., requests_per_s: _Optional[float] = ..., stable: _Optional[bool] = ..., ttft_p99_ms: _Optional[float] = ..., itl_p99_ms: _Optional[float] = ..., decode_concurrency: _Optional[float] = ..., kv_cache_usage: _Optional[float] = ...) -> None: ...

class LatencyTargets(_message.Message):
    __slots__ = ("ttft_p99_ms", "itl_p99_ms")
    TTFT_P99_MS_FIELD_NUMBER: _ClassVar[int]
    ITL_P99_MS_FIELD_NUMBER: _ClassVar[int]
    ttft_p99_ms: float
    itl_p99_ms: float
    def __init__(self, ttft_p99_ms: _Optional[float] = ..., itl_p99_ms: _Optional[float] = ...) -> None: ...

class RootFind(_message.Message):
    __slots__ = ("root", "converged", "bracket", "f_bracket", "final_bracket", "iterations", "function_calls", "expansions", "reason")
    ROOT_FIELD_NUMBER: _ClassVar[int]
    CONVERGED_FIELD_NUMBER: _ClassVar[int]
    BRACKET_FIELD_NUMBER: _ClassVar[int]
    F_BRACKET_FIELD_NUMBER: _ClassVar[int]
    FINAL_BRACKET_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_CALLS_FIELD_NUMBER: _ClassVar[int]
    EXPANSIONS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    root: float
    converged: bool
    bracket: _containers.RepeatedScalarFieldContainer[float]
    f_bracket: _containers.RepeatedScalarFieldContainer[float]
    final_bracket: _containers.RepeatedScalarFieldContainer[float]
    iterations: int
    function_calls: int
    expansions: int
    reason: str
    def __init__(self, root: _Optional[float] = ..., converged: _Optional[bool] = ..., bracket: _Optional[_Iterable[float]] = ..., f_bracket: _Optional[_Iterable[float]] = ..., final_bracket: _Optional[_Iterable[float]] = ..., iterations: _Optional[int] = ..., function_calls: _Optional[int] = ..., expansions: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class PoolCapacity(_message.Message):
    __slots__ = ("requests_per_s_per_replica", "feasible", "binding_limit", "reason", "ttft_p99_ms", "itl_p99_ms", "decode_concurrency", "root_find")
    REQUESTS_PER_S_PER_REPLICA_FIELD_NUMBER: _ClassVar[int]
    FEASIBLE_FIELD_NUMBER: _ClassVar[int]
    BINDING_LIMIT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    TTFT_P99_MS_FIELD_NUMBER: _ClassVar[int]
    ITL_P99_MS_FIELD_NUMBER: _ClassVar[int]
    DECODE_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    ROOT_FIND_FIELD_NUMBER: _ClassVar[int]
    requests_per_s_per_replica: float
    feasible: bool
    binding_limit: BindingLimit
    reason: str
    ttft_p99_ms: float
    itl_p99_ms: float
    decode_concurrency: float
    root_find: RootFind
    def __init__(self, requests_per_s_per_replica: _Optional[float] = ..., feasible: _Optional[bool] = ..., binding_limit: _Optional[_Union[BindingLimit, str]] = ..., reason: _Optional[str] = ..., ttft_p99_ms: _Optional[float] = ..., itl_p99_ms: _Optional[float] = ..., decode_concurrency: _Optional[float] = ..., root_find: _Optional[_Union[RootFind, _Mapping]] = ...) -> None: ...

class PoolCapacities(_message.Message):
    __slots__ = ("colocated", "prefill", "decode")
    COLOCATED_FIELD_NUMBER: _ClassVar[int]
    PREFILL_FIELD_NUMBER: _ClassVar[int]
    DECODE_FIELD_NUMBER: _ClassVar[int]
    colocated: PoolCapacity
    prefill: PoolCapacity
    decode: PoolCapacity
    def __init__(self, colocated: _Optional[_Union[PoolCapacity, _Mapping]] = ..., prefill: _Optional[_Union[PoolCapacity, _Mapping]] = ..., decode: _Optional[_Union[PoolCapacity, _Mapping]] = ...) -> None: ...

class Capacity(_message.Message):
    __slots__ = ("slo", "slo_feasible", "max_requests_per_s_within_slo", "deployment_max_requests_per_s_within_slo", "binding_limit", "reason", "floors", "pools")
    SLO_FIELD_NUMBER: _ClassVar[int]
    SLO_FEASIBLE_FIELD_NUMBER: _ClassVar[int]
    MAX_REQUESTS_PER_S_WITHIN_SLO_FIELD_NUMBER: _ClassVar[int]
    DEPLOYMENT_MAX_REQUESTS_PER_S_WITHIN_SLO_FIELD_NUMBER: _ClassVar[int]
    BINDING_LIMIT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    FLOORS_FIELD_NUMBER: _ClassVar[int]
    POOLS_FIELD_NUMBER: _ClassVar[int]
    slo: LatencyTargets
    slo_feasible: bool
    max_requests_per_s_within_slo: float
    deployment_max_requests_per_s_within_slo: float
    binding_limit: BindingLimit
    reason: str
    floors: Floors
    pools: PoolCapacities
    def __init__(self, slo: _Optional[_Union[LatencyTargets, _Mapping]] = ..., slo_feasible: _Optional[bool] = ..., max_requests_per_s_within_slo: _Optional[float] = ..., deployment_max_requests_per_s_within_slo: _Optional[float] = ..., binding_limit: _Optional[_Union[BindingLimit, str]] = ..., reason: _Optional[str] = ..., floors: _Optional[_Union[Floors, _Mapping]] = ..., pools: _Optional[_Union[PoolCapacities, _Mapping]] = ...) -> None: ...

class ClosedLoopEvaluation(_message.Message):
    __slots__ = ("concurrency", "rate_cap_requests_per_s", "requests_per_s", "limited_by", "saturated", "mean_time_in_system_ms", "in_flight")
    CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    RATE_CAP_REQUESTS_PER_S_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_PER_S_FIELD_NUMBER: _ClassVar[int]
    LIMITED_BY_FIELD_NUMBER: _ClassVar[int]
    SATURATED_FIELD_NUMBER: _ClassVar[int]
    MEAN_TIME_IN_SYSTEM_MS_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    concurrency: int
    rate_cap_requests_per_s: float
    requests_per_s: float
    limited_by: ClosedLoopLimit
    saturated: bool
    mean_time_in_system_ms: float
    in_flight: float
    def __init__(self, concurrency: _Optional[int] = ..., rate_cap_requests_per_s: _Optional[float] = ..., requests_per_s: _Optional[float] = ..., limited_by: _Optional[_Union[ClosedLoopLimit, str]] = ..., saturated: _Optional[bool] = ..., mean_time_in_system_ms: _Optional[float] = ..., in_flight: _Optional[float] = ...) -> None: ...

class EvaluateReport(_message.Message):
    __slots__ = ("deployment", "workload", "mode", "requests_per_s", "requests_per_s_per_replica", "stable", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "itl_worst_case_ms", "decode_concurrency", "mean_step_ms", "mixed_step_fraction", "prefill_chunk_tokens", "prefill_utilization", "queue_wait_mean_ms", "kv_cache_usage", "kv_cache_tokens", "preemption_risk", "running_requests", "gpu_utilization", "mfu", "max_stable_requests_per_s", "deployment_max_stable_requests_per_s", "usd_per_hour", "usd_per_million_output_tokens", "usd_per_million_input_tokens", "mean_load_usd_per_million_output_tokens", "binding_limit", "floors", "pools", "buckets", "notes", "stability_binding_limit", "slo", "slo_feasible", "max_requests_per_s_within_slo", "deployment_max_requests_per_s_within_slo", "capacity", "closed_loop")
    DEPLOYMENT_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_PER_S_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_PER_S_PER_REPLICA_FIELD_NUMBER: _ClassVar[int]
    STABLE_FIELD_NUMBER: _ClassVar[int]
    TTFT_P50_MS_FIELD_NUMBER: _ClassVar[int]
    TTFT_P99_MS_FIELD_NUMBER: _ClassVar[int]
    ITL_P50_MS_FIELD_NUMBER: _ClassVar[int]
    ITL_P99_MS_FIELD_NUMBER: _ClassVar[int]
    ITL_WORST_CASE_MS_FIELD_NUMBER: _ClassVar[int]
    DECODE_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    MEAN_STEP_MS_FIELD_NUMBER: _ClassVar[int]
    MIXED_STEP_FRACTION_FIELD_NUMBER: _ClassVar[int]
    PREFILL_CHUNK_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PREFILL_UTILIZATION_FIELD_NUMBER: _ClassVar[int]
    QUEUE_WAIT_MEAN_MS_FIELD_NUMBER: _ClassVar[int]
    KV_CACHE_USAGE_FIELD_NUMBER: _ClassVar[int]
    KV_CACHE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PREEMPTION_RISK_FIELD_NUMBER: _ClassVar[int]
    RUNNING_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    GPU_UTILIZATION_FIELD_NUMBER: _ClassVar[int]
    MFU_FIELD_NUMBER: _ClassVar[int]
    MAX_STABLE_REQUESTS_PER_S_FIELD_NUMBER: _ClassVar[int]
    DEPLOYMENT_MAX_STABLE_REQUESTS_PER_S_FIELD_NUMBER: _ClassVar[int]
    USD_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    USD_PER_MILLION_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    USD_PER_MILLION_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MEAN_LOAD_USD_PER_MILLION_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    BINDING_LIMIT_FIELD_NUMBER: _ClassVar[int]
    FLOORS_FIELD_NUMBER: _ClassVar[int]
    POOLS_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    NOTES_FIELD_NUMBER: _ClassVar[int]
    STABILITY_BINDING_LIMIT_FIELD_NUMBER: _ClassVar[int]
    SLO_FIELD_NUMBER: _ClassVar[int]
    SLO_FEASIBLE_FIELD_NUMBER: _ClassVar[int]
    MAX_REQUESTS_PER_S_WITHIN_SLO_FIELD_NUMBER: _ClassVar[int]
    DEPLOYMENT_MAX_REQUESTS_PER_S_WITHIN_SLO_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    CLOSED_LOOP_FIELD_NUMBER: _ClassVar[int]
    deployment: EvaluatedDeployment
    workload: WorkloadSummary
    mode: Mode
    requests_per_s: float
    requests_per_s_per_replica: float
    stable: bool
    ttft_p50_ms: float
    ttft_p99_ms: float
    itl_p50_ms: float
    itl_p99_ms: float
    itl_worst_case_ms: float
    decode_concurrency: float
    mean_step_ms: float
    mixed_step_fraction: float
    prefill_chunk_tokens: float
    prefill_utilization: float
    queue_wait_mean_ms: float
    kv_cache_usage: float
    kv_cache_tokens: int
    preemption_risk: float
    running_requests: float
    gpu_utilization: float
    mfu: float
    max_stable_requests_per_s: float
    deployment_max_stable_requests_per_s: float
    usd_per_hour: float
    usd_per_million_output_tokens: float
    usd_per_million_input_tokens: float
    mean_load_usd_per_million_output_tokens: float
    binding_limit: BindingLimit
    floors: Floors
    pools: PoolPredictions
    buckets: _containers.RepeatedCompositeFieldContainer[BucketPrediction]
    notes: _containers.RepeatedScalarFieldContainer[str]
    stability_binding_limit: StabilityLimit
    slo: LatencyTargets
    slo_feasible: bool
    max_requests_per_s_within_slo: float
    deployment_max_requests_per_s_within_slo: float
    capacity: Capacity
    closed_loop: ClosedLoopEvaluation
    def __init__(self, deployment: _Optional[_Union[EvaluatedDeployment, _Mapping]] = ..., workload: _Optional[_Union[WorkloadSummary, _Mapping]] = ..., mode: _Optional[_Union[Mode, str]] = ..., requests_per_s: _Optional[float] = ..., requests_per_s_per_replica: _Optional[float] = ..., stable: _Optional[bool] = ..., ttft_p50_ms: _Optional[float] = ..., ttft_p99_ms: _Optional[float] = ..., itl_p50_ms: _Optional[float] = ..., itl_p99_ms: _Optional[float] = ..., itl_worst_case_ms: _Optional[float] = ..., decode_concurrency: _Optional[float] = ..., mean_step_ms: _Optional[float] = ..., mixed_step_fraction: _Optional[float] = ..., prefill_chunk_tokens: _Optional[float] = ..., prefill_utilization: _Optional[float] = ..., queue_wait_mean_ms: _Optional[float] = ..., kv_cache_usage: _Optional[float] = ..., kv_cache_tokens: _Optional[int] = ..., preemption_risk: _Optional[float] = ..., running_requests: _Optional[float] = ..., gpu_utilization: _Optional[float] = ..., mfu: _Optional[float] = ..., max_stable_requests_per_s: _Optional[float] = ..., deployment_max_stable_requests_per_s: _Optional[float] = ..., usd_per_hour: _Optional[float] = ..., usd_per_million_output_tokens: _Optional[float] = ..., usd_per_million_input_tokens: _Optional[float] = ..., mean_load_usd_per_million_output_tokens: _Optional[float] = ..., binding_limit: _Optional[_Union[BindingLimit, str]] = ..., floors: _Optional[_Union[Floors, _Mapping]] = ..., pools: _Optional[_Union[PoolPredictions, _Mapping]] = ..., buckets: _Optional[_Iterable[_Union[BucketPrediction, _Mapping]]] = ..., notes: _Optional[_Iterable[str]] = ..., stability_binding_limit: _Optional[_Union[StabilityLimit, str]] = ..., slo: _Optional[_Union[LatencyTargets, _Mapping]] = ..., slo_feasible: _Optional[bool] = ..., max_requests_per_s_within_slo: _Optional[float] = ..., deployment_max_requests_per_s_within_slo: _Optional[float] = ..., capacity: _Optional[_Union[Capacity, _Mapping]] = ..., closed_loop: _Optional[_Union[ClosedLoopEvaluation, _Mapping]] = ...) -> None: ...

class SimulatedDeployment(_message.Message):
    __slots__ = ("model", "gpu", "tp", "mode", "replicas", "prefill_replicas", "decode_replicas", "weight_dtype", "kv_dtype", "max_num_seqs", "max_num_batched_tokens", "long_prefill_token_threshold", "kv_cache_blocks", "block_size", "kv_cache_tokens", "profile", "router", "profile_warning", "lora", "pipeline_parallel_size", "expert_parallel", "speculative_decoding")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    GPU_FIELD_NUMBER: _ClassVar[int]
    TP_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    PREFILL_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    DECODE_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_DTYPE_FIELD_NUMBER: _ClassVar[int]
    KV_DTYPE_FIELD_NUMBER: _ClassVar[int]
    MAX_NUM_SEQS_FIELD_NUMBER: _ClassVar[int]
    MAX_NUM_BATCHED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    LONG_PREFILL_TOKEN_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    KV_CACHE_BLOCKS_FIELD_NUMBER: _ClassVar[int]
    BLOCK_SIZE_FIELD_NUMBER: _ClassVar[int]
    KV_CACHE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    ROUTER_FIELD_NUMBER: _ClassVar[int]
    PROFILE_WARNING_FIELD_NUMBER: _ClassVar[int]
    LORA_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_PARALLEL_SIZE_FIELD_NUMBER: _ClassVar[int]
    EXPERT_PARALLEL_FIELD_NUMBER: _ClassVar[int]
    SPECULATIVE_DECODING_FIELD_NUMBER: _ClassVar[int]
    model: str
    gpu: str
    tp: int
    mode: Mode
    replicas: int
    prefill_replicas: int
    decode_replicas: int
    weight_dtype: Dtype
    kv_dtype: Dtype
    max_num_seqs: int
    max_num_batched_tokens: int
    long_prefill_token_threshold: int
    kv_cache_blocks: int
    block_size: int
    kv_cache_tokens: int
    profile: str
    router: Router
    profile_warning: str
    lora: LoraMemory
    pipeline_parallel_size: int
    expert_parallel: ExpertParallelSummary
    speculative_decoding: SpeculativeSummary
    def __init__(self, model: _Optional[str] = ..., gpu: _Optional[str] = ..., tp: _Optional[int] = ..., mode: _Optional[_Union[Mode, str]] = ..., replicas: _Optional[int] = ..., prefill_replicas: _Optional[int] = ..., decode_replicas: _Optional[int] = ..., weight_dtype: _Optional[_Union[Dtype, str]] = ..., kv_dtype: _Optional[_Union[Dtype, str]] = ..., max_num_seqs: _Optional[int] = ..., max_num_batched_tokens: _Optional[int] = ..., long_prefill_token_threshold: _Optional[int] = ..., kv_cache_blocks: _Optional[int] = ..., block_size: _Optional[int] = ..., kv_cache_tokens: _Optional[int] = ..., profile: _Optional[str] = ..., router: _Optional[_Union[Router, str]] = ..., profile_warning: _Optional[str] = ..., lora: _Optional[_Union[LoraMemory, _Mapping]] = ..., pipeline_parallel_size: _Optional[int] = ..., expert_parallel: _Optional[_Union[ExpertParallelSummary, _Mapping]] = ..., speculative_decoding: _Optional[_Union[SpeculativeSummary, _Mapping]] = ...) -> None: ...

class SimulationInput(_message.Message):
    __slots__ = ("source", "name", "replay", "seed", "mean_requests_per_s_target", "burstiness", "trace_requests", "trace_duration_s", "requests", "span_s", "mean_requests_per_s", "mean_input_tokens", "mean_output_tokens", "prefix_cache_hit_fraction", "outputs_cut_at_context")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REPLAY_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    MEAN_REQUESTS_PER_S_TARGET_FIELD_NUMBER: _ClassVar[int]
    BURSTINESS_FIELD_NUMBER: _ClassVar[int]
    TRACE_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    TRACE_DURATION_S_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    SPAN_S_FIELD_NUMBER: _ClassVar[int]
    MEAN_REQUESTS_PER_S_FIELD_NUMBER: _ClassVar[int]
    MEAN_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MEAN_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PREFIX_CACHE_HIT_FRACTION_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_CUT_AT_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    source: SimulationSource
    name: str
    replay: Replay
    seed: int
    mean_requests_per_s_target: float
    burstiness: float
    trace_requests: int
    trace_duration_s: float
    requests: int
    span_s: float
    mean_requests_per_s: float
    mean_input_tokens: float
    mean_output_tokens: float
    prefix_cache_hit_fraction: float
    outputs_cut_at_context: int
    def __init__(self, source: _Optional[_Union[SimulationSource, str]] = ..., name: _Optional[str] = ..., replay: _Optional[_Union[Replay, str]] = ..., seed: _Optional[int] = ..., mean_requests_per_s_target: _Optional[float] = ..., burstiness: _Optional[float] = ..., trace_requests: _Optional[int] = ..., trace_duration_s: _Optional[float] = ..., requests: _Optional[int] = ..., span_s: _Optional[float] = ..., mean_requests_per_s: _Optional[float] = ..., mean_input_tokens: _Optional[float] = ..., mean_output_tokens: _Optional[float] = ..., prefix_cache_hit_fraction: _Optional[float] = ..., outputs_cut_at_context: _Optional[int] = ...) -> None: ...

class SimulationTargets(_message.Message):
    __slots__ = ("ttft_p99_ms", "tpot_p99_ms", "e2el_p99_ms", "itl_p99_ms")
    TTFT_P99_MS_FIELD_NUMBER: _ClassVar[int]
    TPOT_P99_MS_FIELD_NUMBER: _ClassVar[int]
    E2EL_P99_MS_FIELD_NUMBER: _ClassVar[int]
    ITL_P99_MS_FIELD_NUMBER: _ClassVar[int]
    ttft_p99_ms: float
    tpot_p99_ms: float
    e2el_p99_ms: float
    itl_p99_ms: float
    def __init__(self, ttft_p99_ms: _Optional[float] = ..., tpot_p99_ms: _Optional[float] = ..., e2el_p99_ms: _Optional[float] = ..., itl_p99_ms: _Optional[float] = ...) -> None: ...

class TargetsMet(_message.Message):
    __slots__ = ("ttft_p99", "tpot_p99", "e2el_p99", "itl_p99")
    TTFT_P99_FIELD_NUMBER: _ClassVar[int]
    TPOT_P99_FIELD_NUMBER: _ClassVar[int]
    E2EL_P99_FIELD_NUMBER: _ClassVar[int]
    ITL_P99_FIELD_NUMBER: _ClassVar[int]
    ttft_p99: bool
    tpot_p99: bool
    e2el_p99: bool
    itl_p99: bool
    def __init__(self, ttft_p99: _Optional[bool] = ..., tpot_p99: _Optional[bool] = ..., e2el_p99: _Optional[bool] = ..., itl_p99: _Optional[bool] = ...) -> None: ...

class LatencySummary(_message.Message):
    __slots__ = ("count", "mean_s", "p50_s", "p90_s", "p99_s", "max_s")
    COUNT_FIELD_NUMBER: _ClassVar[int]
    MEAN_S_FIELD_NUMBER: _ClassVar[int]
    P50_S_FIELD_NUMBER: _ClassVar[int]
    P90_S_FIELD_NUMBER: _ClassVar[int]
    P99_S_FIELD_NUMBER: _ClassVar[int]
    MAX_S_FIELD_NUMBER: _ClassVar[int]
    count: int
    mean_s: float
    p50_s: float
    p90_s: float
    p99_s: float
    max_s: float
    def __init__(self, count: _Optional[int] = ..., mean_s: _Optional[float] = ..., p50_s: _Optional[float] = ..., p90_s: _Optional[float] = ..., p99_s: _Optional[float] = ..., max_s: _Optional[float] = ...) -> None: ...

class GoodputObjectives(_message.Message):
    __slots__ = ("ttft_s", "tpot_s", "e2el_s")
    TTFT_S_FIELD_NUMBER: _ClassVar[int]
    TPOT_S_FIELD_NUMBER: _ClassVar[int]
    E2EL_S_FIELD_NUMBER: _ClassVar[int]
    ttft_s: float
    tpot_s: float
    e2el_s: float
    def __init__(self, ttft_s: _Optional[float] = ..., tpot_s: _Optional[float] = ..., e2el_s: _Optional[float] = ...) -> None: ...

class Goodput(_message.Message):
    __slots__ = ("slo", "good_requests", "goodput_rps", "good_fraction")
    SLO_FIELD_NUMBER: _ClassVar[int]
    GOOD_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    GOODPUT_RPS_FIELD_NUMBER: _ClassVar[int]
    GOOD_FRACTION_FIELD_NUMBER: _ClassVar[int]
    slo: GoodputObjectives
    good_requests: int
    goodput_rps: float
    good_fraction: float
    def __init__(self, slo: _Optional[_Union[GoodputObjectives, _Mapping]] = ..., good_requests: _Optional[int] = ..., goodput_rps: _Optional[float] = ..., good_fraction: _Optional[float] = ...) -> None: ...

class SimulatedReplica(_message.Message):
    __slots__ = ("role", "index", "requests", "steps", "busy_fraction", "preemptions", "peak_kv_blocks", "peak_kv_fraction", "max_queue_length")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    BUSY_FRACTION_FIELD_NUMBER: _ClassVar[int]
    PREEMPTIONS_FIELD_NUMBER: _ClassVar[int]
    PEAK_KV_BLOCKS_FIELD_NUMBER: _ClassVar[int]
    PEAK_KV_FRACTION_FIELD_NUMBER: _ClassVar[int]
    MAX_QUEUE_LENGTH_FIELD_NUMBER: _ClassVar[int]
    role: Role
    index: int
    requests: int
    steps: int
    busy_fraction: float
    preemptions: int
    peak_kv_blocks: int
    peak_kv_fraction: float
    max_queue_length: int
    def __init__(self, role: _Optional[_Union[Role, str]] = ..., index: _Optional[int] = ..., requests: _Optional[int] = ..., steps: _Optional[int] = ..., busy_fraction: _Optional[float] = ..., preemptions: _Optional[int] = ..., peak_kv_blocks: _Optional[int] = ..., peak_kv_fraction: _Optional[float] = ..., max_queue_length: _Optional[int] = ...) -> None: ...

class MinuteSeries(_message.Message):
    __slots__ = ("minute_start_s", "arrivals", "completions", "mean_running", "mean_waiting", "output_tokens_per_s", "prefill_tokens_per_s")
    MINUTE_START_S_FIELD_NUMBER: _ClassVar[int]
    ARRIVALS_FIELD_NUMBER: _ClassVar[int]
    COMPLETIONS_FIELD_NUMBER: _ClassVar[int]
    MEAN_RUNNING_FIELD_NUMBER: _ClassVar[int]
    MEAN_WAITING_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_PER_S_FIELD_NUMBER: _ClassVar[int]
    PREFILL_TOKENS_PER_S_FIELD_NUMBER: _ClassVar[int]
    minute_start_s: _containers.RepeatedScalarFieldContainer[float]
    arrivals: _containers.RepeatedScalarFieldContainer[int]
    completions: _containers.RepeatedScalarFieldContainer[int]
    mean_running: _containers.RepeatedScalarFieldContainer[float]
    mean_waiting: _containers.RepeatedScalarFieldContainer[float]
    output_tokens_per_s: _containers.RepeatedScalarFieldContainer[float]
    prefill_tokens_per_s: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, minute_start_s: _Optional[_Iterable[float]] = ..., arrivals: _Optional[_Iterable[int]] = ..., completions: _Optional[_Iterable[int]] = ..., mean_running: _Optional[_Iterable[float]] = ..., mean_waiting: _Optional[_Iterable[float]] = ..., output_tokens_per_s: _Optional[_Iterable[float]] = ..., prefill_tokens_per_s: _Optional[_Iterable[float]] = ...) -> None: ...

class ClosedLoopRun(_message.Message):
    __slots__ = ("concurrency", "rate_cap_requests_per_s", "requests_per_s", "mean_time_in_system_ms", "in_flight")
    CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    RATE_CAP_REQUESTS_PER_S_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_PER_S_FIELD_NUMBER: _ClassVar[int]
    MEAN_TIME_IN_SYSTEM_MS_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    concurrency: int
    rate_cap_requests_per_s: float
    requests_per_s: float
    mean_time_in_system_ms: float
    in_flight: float
    def __init__(self, concurrency: _Optional[int] = ..., rate_cap_requests_per_s: _Optional[float] = ..., requests_per_s: _Optional[float] = ..., mean_time_in_system_ms: _Optional[float] = ..., in_flight: _Optional[float] = ...) -> None: ...

class SimulateReport(_message.Message):
    __slots__ = ("deployment", "input", "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p90_ms", "itl_p99_ms", "tpot_p50_ms", "tpot_p90_ms", "tpot_p99_ms", "e2el_p50_ms", "e2el_p90_ms", "e2el_p99_ms", "slo", "slo_met", "mode", "budget_reading", "requests", "completed", "duration_s", "request_throughput_rps", "output_tokens_per_s", "ttft", "itl", "tpot", "e2el", "goodput", "preemptions", "peak_kv_blocks", "peak_kv_fraction", "max_queue_length", "replicas", "series", "closed_loop")
    DEPLOYMENT_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    TTFT_P50_MS_FIELD_NUMBER: _ClassVar[int]
    TTFT_P90_MS_FIELD_NUMBER: _ClassVar[int]
    TTFT_P99_MS_FIELD_NUMBER: _ClassVar[int]
    ITL_P50_MS_FIELD_NUMBER: _ClassVar[int]
    ITL_P90_MS_FIELD_NUMBER: _ClassVar[int]
    ITL_P99_MS_FIELD_NUMBER: _ClassVar[int]
    TPOT_P50_MS_FIELD_NUMBER: _ClassVar[int]
    TPOT_P90_MS_FIELD_NUMBER: _ClassVar[int]
    TPOT_P99_MS_FIELD_NUMBER: _ClassVar[int]
    E2EL_P50_MS_FIELD_NUMBER: _ClassVar[int]
    E2EL_P90_MS_FIELD_NUMBER: _ClassVar[int]
    E2EL_P99_MS_FIELD_NUMBER: _ClassVar[int]
    SLO_FIELD_NUMBER: _ClassVar[int]
    SLO_MET_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    BUDGET_READING_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_FIELD_NUMBER: _ClassVar[int]
    DURATION_S_FIELD_NUMBER: _ClassVar[int]
    REQUEST_THROUGHPUT_RPS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_PER_S_FIELD_NUMBER: _ClassVar[int]
    TTFT_FIELD_NUMBER: _ClassVar[int]
    ITL_FIELD_NUMBER: _ClassVar[int]
    TPOT_FIELD_NUMBER: _ClassVar[int]
    E2EL_FIELD_NUMBER: _ClassVar[int]
    GOODPUT_FIELD_NUMBER: _ClassVar[int]
    PREEMPTIONS_FIELD_NUMBER: _ClassVar[int]
    PEAK_KV_BLOCKS_FIELD_NUMBER: _ClassVar[int]
    PEAK_KV_FRACTION_FIELD_NUMBER: _ClassVar[int]
    MAX_QUEUE_LENGTH_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    SERIES_FIELD_NUMBER: _ClassVar[int]
    CLOSED_LOOP_FIELD_NUMBER: _ClassVar[int]
    deployment: SimulatedDeployment
    input: SimulationInput
    ttft_p50_ms: float
    ttft_p90_ms: float
    ttft_p99_ms: float
    itl_p50_ms: float
    itl_p90_ms: float
    itl_p99_ms: float
    tpot_p50_ms: float
    tpot_p90_ms: float
    tpot_p99_ms: float
    e2el_p50_ms: float
    e2el_p90_ms: float
    e2el_p99_ms: float
    slo: SimulationTargets
    slo_met: TargetsMet
    mode: Mode
    budget_reading: BudgetReading
    requests: int
    completed: int
    duration_s: float
    request_throughput_rps: float
    output_tokens_per_s: float
    ttft: LatencySummary
    itl: LatencySummary
    tpot: LatencySummary
    e2el: LatencySummary
    goodput: Goodput
    preemptions: int
    peak_kv_blocks: int
    peak_kv_fraction: float
    max_queue_length: int
    replicas: _containers.RepeatedCompositeFieldContainer[SimulatedReplica]
    series: MinuteSeries
    closed_loop: ClosedLoopRun
    def __init__(self, deployment: _Optional[_Union[SimulatedDeployment, _Mapping]] = ..., input: _Optional[_Union[SimulationInput, _Mapping]] = ..., ttft_p50_ms: _Optional[float] = ..., ttft_p90_ms: _Optional[float] = ..., ttft_p99_ms: _Optional[float] = ..., itl_p50_ms: _Optional[float] = ..., itl_p90_ms: _Optional[float] = ..., itl_p99_ms: _Optional[float] = ..., tpot_p50_ms: _Optional[float] = ..., tpot_p90_ms: _Optional[float] = ..., tpot_p99_ms: _Optional[float] = ..., e2el_p50_ms: _Optional[float] = ..., e2el_p90_ms: _Optional[float] = ..., e2el_p99_ms: _Optional[float] = ..., slo: _Optional[_Union[SimulationTargets, _Mapping]] = ..., slo_met: _Optional[_Union[TargetsMet, _Mapping]] = ..., mode: _Optional[_Union[Mode, str]] = ..., budget_reading: _Optional[_Union[BudgetReading, str]] = ..., requests: _Optional[int] = ..., completed: _Optional[int] = ..., duration_s: _Optional[float] = ..., request_throughput_rps: _Optional[float] = ..., output_tokens_per_s: _Optional[float] = ..., ttft: _Optional[_Union[LatencySummary, _Mapping]] = ..., itl: _Optional[_Union[LatencySummary, _Mapping]] = ..., tpot: _Optional[_Union[LatencySummary, _Mapping]] = ..., e2el: _Optional[_Union[LatencySummary, _Mapping]] = ..., goodput: _Optional[_Union[Goodput, _Mapping]] = ..., preemptions: _Optional[int] = ..., peak_kv_blocks: _Optional[int] = ..., peak_kv_fraction: _Optional[float] = ..., max_queue_length: _Optional[int] = ..., replicas: _Optional[_Iterable[_Union[SimulatedReplica, _Mapping]]] = ..., series: _Optional[_Union[MinuteSeries, _Mapping]] = ..., closed_loop: _Optional[_Union[ClosedLoopRun, _Mapping]] = ...) -> None: ...

class ReplicaInfo(_message.Message):
    __slots__ = ("model", "gpu", "tp", "weight_dtype", "kv_dtype", "profile", "profile_warning")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    GPU_FIELD_NUMBER: _ClassVar[int]
    TP_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_DTYPE_FIELD_NUMBER: _ClassVar[int]
    KV_DTYPE_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    PROFILE_WARNING_FIELD_NUMBER: _ClassVar[int]
    model: str
    gpu: str
    tp: int
    weight_dtype: Dtype
    kv_dtype: Dtype
    profile: str
    profile_warning: str
    def __init__(self, model: _Optional[str] = ..., gpu: _Optional[str] = ..., tp: _Optional[int] = ..., weight_dtype: _Optional[_Union[Dtype, str]] = ..., kv_dtype: _Optional[_Union[Dtype, str]] = ..., profile: _Optional[str] = ..., profile_warning: _Optional[str] = ...) -> None: ...

class ConcurrencyRow(_message.Message):
    __slots__ = ("concurrency", "step_ms", "user_tokens_per_s", "gpu_tokens_per_s", "usd_per_million_output_tokens", "bound", "fits_in_memory")
    CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    STEP_MS_FIELD_NUMBER: _ClassVar[int]
    USER_TOKENS_PER_S_FIELD_NUMBER: _ClassVar[int]
    GPU_TOKENS_PER_S_FIELD_NUMBER: _ClassVar[int]
    USD_PER_MILLION_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    BOUND_FIELD_NUMBER: _ClassVar[int]
    FITS_IN_MEMORY_FIELD_NUMBER: _ClassVar[int]
    concurrency: int
    step_ms: float
    user_tokens_per_s: float
    gpu_tokens_per_s: float
    usd_per_million_output_tokens: float
    bound: Bound
    fits_in_memory: bool
    def __init__(self, concurrency: _Optional[int] = ..., step_ms: _Optional[float] = ..., user_tokens_per_s: _Optional[float] = ..., gpu_tokens_per_s: _Optional[float] = ..., usd_per_million_output_tokens: _Optional[float] = ..., bound: _Optional[_Union[Bound, str]] = ..., fits_in_memory: _Optional[bool] = ...) -> None: ...

class ConcurrencyReport(_message.Message):
    __slots__ = ("kv_max_concurrency", "compute_knee_tokens_per_step", "rows")
    KV_MAX_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    COMPUTE_KNEE_TOKENS_PER_STEP_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    kv_max_concurrency: int
    compute_knee_tokens_per_step: float
    rows: _containers.RepeatedCompositeFieldContainer[ConcurrencyRow]
    def __init__(self, kv_max_concurrency: _Optional[int] = ..., compute_knee_tokens_per_step: _Optional[float] = ..., rows: _Optional[_Iterable[_Union[ConcurrencyRow, _Mapping]]] = ...) -> None: ...

class StaticBatchingRow(_message.Message):
    __slots__ = ("batch", "expected_longest_tokens", "slot_utilization", "usd_per_million_output_tokens", "continuous_usd_per_million_output_tokens")
    BATCH_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_LONGEST_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SLOT_UTILIZATION_FIELD_NUMBER: _ClassVar[int]
    USD_PER_MILLION_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CONTINUOUS_USD_PER_MILLION_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    batch: int
    expected_longest_tokens: float
    slot_utilization: float
    usd_per_million_output_tokens: float
    continuous_usd_per_million_output_tokens: float
    def __init__(self, batch: _Optional[int] = ..., expected_longest_tokens: _Optional[float] = ..., slot_utilization: _Optional[float] = ..., usd_per_million_output_tokens: _Optional[float] = ..., continuous_usd_per_million_output_tokens: _Optional[float] = ...) -> None: ...

class StaticBatchingReport(_message.Message):
    __slots__ = ("mean_output_tokens", "rows")
    MEAN_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    mean_output_tokens: float
    rows: _containers.RepeatedCompositeFieldContainer[StaticBatchingRow]
    def __init__(self, mean_output_tokens: _Optional[float] = ..., rows: _Optional[_Iterable[_Union[StaticBatchingRow, _Mapping]]] = ...) -> None: ...

class ChunkedPrefillRow(_message.Message):
    __slots__ = ("chunk_tokens", "steps", "prompt_prefill_ms", "worst_itl_ms", "max_num_batched_tokens")
    CHUNK_TOKENS_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_PREFILL_MS_FIELD_NUMBER: _ClassVar[int]
    WORST_ITL_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_NUM_BATCHED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    chunk_tokens: int
    steps: int
    prompt_prefill_ms: float
    worst_itl_ms: float
    max_num_batched_tokens: int
    def __init__(self, chunk_tokens: _Optional[int] = ..., steps: _Optional[int] = ..., prompt_prefill_ms: _Optional[float] = ..., worst_itl_ms: _Optional[float] = ..., max_num_batched_tokens: _Optional[int] = ...) -> None: ...

class ChunkedPrefillReport(_message.Message):
    __slots__ = ("reading", "rows")
    READING_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    reading: ChunkedPrefillReading
    rows: _containers.RepeatedCompositeFieldContainer[ChunkedPrefillRow]
    def __init__(self, reading: _Optional[_Union[ChunkedPrefillReading, str]] = ..., rows: _Optional[_Iterable[_Union[ChunkedPrefillRow, _Mapping]]] = ...) -> None: ...

class PrefillReport(_message.Message):
    __slots__ = ("prompt_ms", "tokens_per_s", "usd_per_million_input_tokens", "bound")
    PROMPT_MS_FIELD_NUMBER: _ClassVar[int]
    TOKENS_PER_S_FIELD_NUMBER: _ClassVar[int]
    USD_PER_MILLION_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    BOUND_FIELD_NUMBER: _ClassVar[int]
    prompt_ms: float
    tokens_per_s: float
    usd_per_million_input_tokens: float
    bound: Bound
    def __init__(self, prompt_ms: _Optional[float] = ..., tokens_per_s: _Optional[float] = ..., usd_per_million_input_tokens: _Optional[float] = ..., bound: _Optional[_Union[Bound, str]] = ...) -> None: ...

class UtilizationReport(_message.Message):
    __slots__ = ("replicas", "usd_per_month", "output_tokens_per_month", "usd_per_million_output_tokens", "floor_usd_per_million_output_tokens", "times_floor", "gpu_busy_fraction")
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    USD_PER_MONTH_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_PER_MONTH_FIELD_NUMBER: _ClassVar[int]
    USD_PER_MILLION_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    FLOOR_USD_PER_MILLION_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TIMES_FLOOR_FIELD_NUMBER: _ClassVar[int]
    GPU_BUSY_FRACTION_FIELD_NUMBER: _ClassVar[int]
    replicas: int
    usd_per_month: float
    output_tokens_per_month: float
    usd_per_million_output_tokens: float
    floor_usd_per_million_output_tokens: float
    times_floor: float
    gpu_busy_fraction: float
    def __init__(self, replicas: _Optional[int] = ..., usd_per_month: _Optional[float] = ..., output_tokens_per_month: _Optional[float] = ..., usd_per_million_output_tokens: _Optional[float] = ..., floor_usd_per_million_output_tokens: _Optional[float] = ..., times_floor: _Optional[float] = ..., gpu_busy_fraction: _Optional[float] = ...) -> None: ...

class KvCapacityReport(_message.Message):
    __slots__ = ("kv_bytes_per_token", "kv_cache_tokens", "kv_cache_bytes", "max_concurrency", "weight_bytes", "activation_reserve_bytes")
    KV_BYTES_PER_TOKEN_FIELD_NUMBER: _ClassVar[int]
    KV_CACHE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    KV_CACHE_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_BYTES_FIELD_NUMBER: _ClassVar[int]
    ACTIVATION_RESERVE_BYTES_FIELD_NUMBER: _ClassVar[int]
    kv_bytes_per_token: int
    kv_cache_tokens: int
    kv_cache_bytes: float
    max_concurrency: int
    weight_bytes: float
    activation_reserve_bytes: float
    def __init__(self, kv_bytes_per_token: _Optional[int] = ..., kv_cache_tokens: _Optional[int] = ..., kv_cache_bytes: _Optional[float] = ..., max_concurrency: _Optional[int] = ..., weight_bytes: _Optional[float] = ..., activation_reserve_bytes: _Optional[float] = ...) -> None: ...

class CalibrationRow(_message.Message):
    __slots__ = ("kind", "line", "tokens", "batch", "prompt", "chunk", "decodes", "ctx", "quantity", "measured_ms", "fitted_ms", "theoretical_ms", "error_percent")
    KIND_FIELD_NUMBER: _ClassVar[int]
    LINE_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    DECODES_FIELD_NUMBER: _ClassVar[int]
    CTX_FIELD_NUMBER: _ClassVar[int]
    QUANTITY_FIELD_NUMBER: _ClassVar[int]
    MEASURED_MS_FIELD_NUMBER: _ClassVar[int]
    FITTED_MS_FIELD_NUMBER: _ClassVar[int]
    THEORETICAL_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_PERCENT_FIELD_NUMBER: _ClassVar[int]
    kind: CalibrationKind
    line: int
    tokens: int
    batch: int
    prompt: int
    chunk: int
    decodes: int
    ctx: int
    quantity: str
    measured_ms: float
    fitted_ms: float
    theoretical_ms: float
    error_percent: float
    def __init__(self, kind: _Optional[_Union[CalibrationKind, str]] = ..., line: _Optional[int] = ..., tokens: _Optional[int] = ..., batch: _Optional[int] = ..., prompt: _Optional[int] = ..., chunk: _Optional[int] = ..., decodes: _Optional[int] = ..., ctx: _Optional[int] = ..., quantity: _Optional[str] = ..., measured_ms: _Optional[float] = ..., fitted_ms: _Optional[float] = ..., theoretical_ms: _Optional[float] = ..., error_percent: _Optional[float] = ...) -> None: ...

class FitParameter(_message.Message):
    __slots__ = ("value", "std_error", "independence", "fixed", "at_bound")
    VALUE_FIELD_NUMBER: _ClassVar[int]
    STD_ERROR_FIELD_NUMBER: _ClassVar[int]
    INDEPENDENCE_FIELD_NUMBER: _ClassVar[int]
    FIXED_FIELD_NUMBER: _ClassVar[int]
    AT_BOUND_FIELD_NUMBER: _ClassVar[int]
    value: float
    std_error: float
    independence: float
    fixed: bool
    at_bound: bool
    def __init__(self, value: _Optional[float] = ..., std_error: _Optional[float] = ..., independence: _Optional[float] = ..., fixed: _Optional[bool] = ..., at_bound: _Optional[bool] = ...) -> None: ...

class Ceiling(_message.Message):
    __slots__ = ("value", "fraction_of_datasheet", "fitted_eta")
    VALUE_FIELD_NUMBER: _ClassVar[int]
    FRACTION_OF_DATASHEET_FIELD_NUMBER: _ClassVar[int]
    FITTED_ETA_FIELD_NUMBER: _ClassVar[int]
    value: float
    fraction_of_datasheet: float
    fitted_eta: float
    def __init__(self, value: _Optional[float] = ..., fraction_of_datasheet: _Optional[float] = ..., fitted_eta: _Optional[float] = ...) -> None: ...

class Profile(_message.Message):
    __slots__ = ("name", "gpu", "eta_bandwidth", "eta_matmul", "eta_attention", "step_overhead_s", "prefix_kv_passes", "source", "warning", "decode_attention_items_per_sm", "prefix_query_kv_passes", "matmul_phantom_tokens", "sampled_logits", "activation_passes", "request_overhead_s", "completions_overhead_s", "sequence_overhead_s")
    NAME_FIELD_NUMBER: _ClassVar[int]
    GPU_FIELD_NUMBER: _ClassVar[int]
    ETA_BANDWIDTH_FIELD_NUMBER: _ClassVar[int]
    ETA_MATMUL_FIELD_NUMBER: _ClassVar[int]
    ETA_ATTENTION_FIELD_NUMBER: _ClassVar[int]
    STEP_OVERHEAD_S_FIELD_NUMBER: _ClassVar[int]
    PREFIX_KV_PASSES_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    WARNING_FIELD_NUMBER: _ClassVar[int]
    DECODE_ATTENTION_ITEMS_PER_SM_FIELD_NUMBER: _ClassVar[int]
    PREFIX_QUERY_KV_PASSES_FIELD_NUMBER: _ClassVar[int]
    MATMUL_PHANTOM_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SAMPLED_LOGITS_FIELD_NUMBER: _ClassVar[int]
    ACTIVATION_PASSES_FIELD_NUMBER: _ClassVar[int]
    REQUEST_OVERHEAD_S_FIELD_NUMBER: _ClassVar[int]
    COMPLETIONS_OVERHEAD_S_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_OVERHEAD_S_FIELD_NUMBER: _ClassVar[int]
    name: str
    gpu: str
    eta_bandwidth: float
    eta_matmul: float
    eta_attention: float
    step_overhead_s: float
    prefix_kv_passes: float
    source: str
    warning: str
    decode_attention_items_per_sm: float
    prefix_query_kv_passes: float
    matmul_phantom_tokens: float
    sampled_logits: bool
    activation_passes: float
    request_overhead_s: float
    completions_overhead_s: float
    sequence_overhead_s: float
    def __init__(self, name: _Optional[str] = ..., gpu: _Optional[str] = ..., eta_bandwidth: _Optional[float] = ..., eta_matmul: _Optional[float] = ..., eta_attention: _Optional[float] = ..., step_overhead_s: _Optional[float] = ..., prefix_kv_passes: _Optional[float] = ..., source: _Optional[str] = ..., warning: _Optional[str] = ..., decode_attention_items_per_sm: _Optional[float] = ..., prefix_query_kv_passes: _Optional[float] = ..., matmul_phantom_tokens: _Optional[float] = ..., sampled_logits: _Optional[bool] = ..., activation_passes: _Optional[float] = ..., request_overhead_s: _Optional[float] = ..., completions_overhead_s: _Optional[float] = ..., sequence_overhead_s: _Optional[float] = ...) -> None: ...

class CalibrateReport(_message.Message):
    __slots__ = ("model", "gpu", "measurements", "rows", "mape_percent", "max_abs_error_percent", "theoretical_mape_percent", "parameters", "ceilings", "profile", "output")
    class ParametersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: FitParameter
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[FitParameter, _Mapping]] = ...) -> None: ...
    class CeilingsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Ceiling
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Ceiling, _Mapping]] = ...) -> None: ...
    MODEL_FIELD_NUMBER: _ClassVar[int]
    GPU_FIELD_NUMBER: _ClassVar[int]
    MEASUREMENTS_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    MAPE_PERCENT_FIELD_NUMBER: _ClassVar[int]
    MAX_ABS_ERROR_PERCENT_FIELD_NUMBER: _ClassVar[int]
    THEORETICAL_MAPE_PERCENT_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    CEILINGS_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    model: str
    gpu: str
    measurements: str
    rows: _containers.RepeatedCompositeFieldContainer[CalibrationRow]
    mape_percent: float
    max_abs_error_percent: float
    theoretical_mape_percent: float
    parameters: _containers.MessageMap[str, FitParameter]
    ceilings: _containers.MessageMap[str, Ceiling]
    profile: Profile
    output: str
    def __init__(self, model: _Optional[str] = ..., gpu: _Optional[str] = ..., measurements: _Optional[str] = ..., rows: _Optional[_Iterable[_Union[CalibrationRow, _Mapping]]] = ..., mape_percent: _Optional[float] = ..., max_abs_error_percent: _Optional[float] = ..., theoretical_mape_percent: _Optional[float] = ..., parameters: _Optional[_Mapping[str, FitParameter]] = ..., ceilings: _Optional[_Mapping[str, Ceiling]] = ..., profile: _Optional[_Union[Profile, _Mapping]] = ..., output: _Optional[str] = ...) -> None: ...

class Sourced(_message.Message):
    __slots__ = ("value", "source", "checked")
    VALUE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    CHECKED_FIELD_NUMBER: _ClassVar[int]
    value: float
    source: str
    checked: str
    def __init__(self, value: _Optional[float] = ..., source: _Optional[str] = ..., checked: _Optional[str] = ...) -> None: ...

class GpuSpec(_message.Message):
    __slots__ = ("name", "display_name", "vendor", "memory_bytes", "memory_bandwidth_bytes_per_s", "bf16_dense_flops_per_s", "fp8_dense_flops_per_s", "interconnect_bandwidth_bytes_per_s", "interconnect_latency_s", "max_gpus_per_node", "usd_per_gpu_hour", "memory_reported_bytes", "sm_count", "price_list", "int8_dense_ops_per_s", "fp4_dense_flops_per_s", "nvlink_domain_gpus", "inter_node_bandwidth_bytes_per_s", "inter_node_latency_s")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    VENDOR_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BANDWIDTH_BYTES_PER_S_FIELD_NUMBER: _ClassVar[int]
    BF16_DENSE_FLOPS_PER_S_FIELD_NUMBER: _ClassVar[int]
    FP8_DENSE_FLOPS_PER_S_FIELD_NUMBER: _ClassVar[int]
    INTERCONNECT_BANDWIDTH_BYTES_PER_S_FIELD_NUMBER: _ClassVar[int]
    INTERCONNECT_LATENCY_S_FIELD_NUMBER: _ClassVar[int]
    MAX_GPUS_PER_NODE_FIELD_NUMBER: _ClassVar[int]
    USD_PER_GPU_HOUR_FIELD_NUMBER: _ClassVar[int]
    MEMORY_REPORTED_BYTES_FIELD_NUMBER: _ClassVar[int]
    SM_COUNT_FIELD_NUMBER: _ClassVar[int]
    PRICE_LIST_FIELD_NUMBER: _ClassVar[int]
    INT8_DENSE_OPS_PER_S_FIELD_NUMBER: _ClassVar[int]
    FP4_DENSE_FLOPS_PER_S_FIELD_NUMBER: _ClassVar[int]
    NVLINK_DOMAIN_GPUS_FIELD_NUMBER: _ClassVar[int]
    INTER_NODE_BANDWIDTH_BYTES_PER_S_FIELD_NUMBER: _ClassVar[int]
    INTER_NODE_LATENCY_S_FIELD_NUMBER: _ClassVar[int]
    name: str
    display_name: str
    vendor: str
    memory_bytes: Sourced
    memory_bandwidth_bytes_per_s: Sourced
    bf16_dense_flops_per_s: Sourced
    fp8_dense_flops_per_s: Sourced
    interconnect_bandwidth_bytes_per_s: Sourced
    interconnect_latency_s: Sourced
    max_gpus_per_node: int
    usd_per_gpu_hour: Sourced
    memory_reported_bytes: Sourced
    sm_count: Sourced
    price_list: str
    int8_dense_ops_per_s: Sourced
    fp4_dense_flops_per_s: Sourced
    nvlink_domain_gpus: Sourced
    inter_node_bandwidth_bytes_per_s: Sourced
    inter_node_latency_s: Sourced
    def __init__(self, name: _Optional[str] = ..., display_name: _Optional[str] = ..., vendor: _Optional[str] = ..., memory_bytes: _Optional[_Union[Sourced, _Mapping]] = ..., memory_bandwidth_bytes_per_s: _Optional[_Union[Sourced, _Mapping]] = ..., bf16_dense_flops_per_s: _Optional[_Union[Sourced, _Mapping]] = ..., fp8_dense_flops_per_s: _Optional[_Union[Sourced, _Mapping]] = ..., interconnect_bandwidth_bytes_per_s: _Optional[_Union[Sourced, _Mapping]] = ..., interconnect_latency_s: _Optional[_Union[Sourced, _Mapping]] = ..., max_gpus_per_node: _Optional[int] = ..., usd_per_gpu_hour: _Optional[_Union[Sourced, _Mapping]] = ..., memory_reported_bytes: _Optional[_Union[Sourced, _Mapping]] = ..., sm_count: _Optional[_Union[Sourced, _Mapping]] = ..., price_list: _Optional[str] = ..., int8_dense_ops_per_s: _Optional[_Union[Sourced, _Mapping]] = ..., fp4_dense_flops_per_s: _Optional[_Union[Sourced, _Mapping]] = ..., nvlink_domain_gpus: _Optional[_Union[Sourced, _Mapping]] = ..., inter_node_bandwidth_bytes_per_s: _Optional[_Union[Sourced, _Mapping]] = ..., inter_node_latency_s: _Optional[_Union[Sourced, _Mapping]] = ...) -> None: ...

class GpuCatalogReport(_message.Message):
    __slots__ = ("gpus",)
    GPUS_FIELD_NUMBER: _ClassVar[int]
    gpus: _containers.RepeatedCompositeFieldContainer[GpuSpec]
    def __init__(self, gpus: _Optional[_Iterable[_Union[GpuSpec, _Mapping]]] = ...) -> None: ...

class ModelEntry(_message.Message):
    __slots__ = ("name", "layers", "hidden_size", "attention_heads", "kv_heads", "head_dim", "intermediate_size", "vocab_size", "tie_word_embeddings", "max_position_embeddings", "attention_bias", "qk_norm", "num_experts", "experts_per_token", "total_params", "active_params", "kv_bytes_per_token_bf16", "weight_bytes_bf16")
    NAME_FIELD_NUMBER: _ClassVar[int]
    LAYERS_FIELD_NUMBER: _ClassVar[int]
    HIDDEN_SIZE_FIELD_NUMBER: _ClassVar[int]
    ATTENTION_HEADS_FIELD_NUMBER: _ClassVar[int]
    KV_HEADS_FIELD_NUMBER: _ClassVar[int]
    HEAD_DIM_FIELD_NUMBER: _ClassVar[int]
    INTERMEDIATE_SIZE_FIELD_NUMBER: _ClassVar[int]
    VOCAB_SIZE_FIELD_NUMBER: _ClassVar[int]
    TIE_WORD_EMBEDDINGS_FIELD_NUMBER: _ClassVar[int]
    MAX_POSITION_EMBEDDINGS_FIELD_NUMBER: _ClassVar[int]
    ATTENTION_BIAS_FIELD_NUMBER: _ClassVar[int]
    QK_NORM_FIELD_NUMBER: _ClassVar[int]
    NUM_EXPERTS_FIELD_NUMBER: _ClassVar[int]
    EXPERTS_PER_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_PARAMS_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_PARAMS_FIELD_NUMBER: _ClassVar[int]
    KV_BYTES_PER_TOKEN_BF16_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_BYTES_BF16_FIELD_NUMBER: _ClassVar[int]
    name: str
    layers: int
    hidden_size: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool
    max_position_embeddings: int
    attention_bias: bool
    qk_norm: bool
    num_experts: int
    experts_per_token: int
    total_params: int
    active_params: int
    kv_bytes_per_token_bf16: int
    weight_bytes_bf16: int
    def __init__(self, name: _Optional[str] = ..., layers: _Optional[int] = ..., hidden_size: _Optional[int] = ..., attention_heads: _Optional[int] = ..., kv_heads: _Optional[int] = ..., head_dim: _Optional[int] = ..., intermediate_size: _Optional[int] = ..., vocab_size: _Optional[int] = ..., tie_word_embeddings: _Optional[bool] = ..., max_position_embeddings: _Optional[int] = ..., attention_bias: _Optional[bool] = ..., qk_norm: _Optional[bool] = ..., num_experts: _Optional[int] = ..., experts_per_token: _Optional[int] = ..., total_params: _Optional[int] = ..., active_params: _Optional[int] = ..., kv_bytes_per_token_bf16: _Optional[int] = ..., weight_bytes_bf16: _Optional[int] = ...) -> None: ...

class ExpertRead(_message.Message):
    __slots__ = ("tokens", "experts_touched_per_layer", "params_read")
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    EXPERTS_TOUCHED_PER_LAYER_FIELD_NUMBER: _ClassVar[int]
    PARAMS_READ_FIELD_NUMBER: _ClassVar[int]
    tokens: int
    experts_touched_per_layer: float
    params_read: float
    def __init__(self, tokens: _Optional[int] = ..., experts_touched_per_layer: _Optional[float] = ..., params_read: _Optional[float] = ...) -> None: ...

class ModelCatalogReport(_message.Message):
    __slots__ = ("models", "expert_reads")
    MODELS_FIELD_NUMBER: _ClassVar[int]
    EXPERT_READS_FIELD_NUMBER: _ClassVar[int]
    models: _containers.RepeatedCompositeFieldContainer[ModelEntry]
    expert_reads: _containers.RepeatedCompositeFieldContainer[ExpertRead]
    def __init__(self, models: _Optional[_Iterable[_Union[ModelEntry, _Mapping]]] = ..., expert_reads: _Optional[_Iterable[_Union[ExpertRead, _Mapping]]] = ...) -> None: ...

class PlanSlo(_message.Message):
    __slots__ = ("ttft_p99_ms", "itl_p99_ms", "e2e_p99_ms")
    TTFT_P99_MS_FIELD_NUMBER: _ClassVar[int]
    ITL_P99_MS_FIELD_NUMBER: _ClassVar[int]
    E2E_P99_MS_FIELD_NUMBER: _ClassVar[int]
    ttft_p99_ms: float
    itl_p99_ms: float
    e2e_p99_ms: float
    def __init__(self, ttft_p99_ms: _Optional[float] = ..., itl_p99_ms: _Optional[float] = ..., e2e_p99_ms: _Optional[float] = ...) -> None: ...

class CandidateSpace(_message.Message):
    __slots__ = ("gpus", "tensor_parallel_sizes", "disaggregation", "mixed_gpu_types", "max_num_batched_tokens", "max_num_seqs", "long_prefill_token_thresholds", "gpu_memory_utilization", "weight_dtype", "kv_dtype", "kv_transfer_bandwidth_bytes_per_s", "kv_transfer_latency_s", "allow_transferred_profiles", "weight_dtypes", "weight_group_size", "weight_checkpoints", "pipeline_parallel_sizes", "expert_parallel", "routing_skew", "num_speculative_tokens")
    class WeightCheckpointsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    GPUS_FIELD_NUMBER: _ClassVar[int]
    TENSOR_PARALLEL_SIZES_FIELD_NUMBER: _ClassVar[int]
    DISAGGREGATION_FIELD_NUMBER: _ClassVar[int]
    MIXED_GPU_TYPES_FIELD_NUMBER: _ClassVar[int]
    MAX_NUM_BATCHED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MAX_NUM_SEQS_FIELD_NUMBER: _ClassVar[int]
    LONG_PREFILL_TOKEN_THRESHOLDS_FIELD_NUMBER: _ClassVar[int]
    GPU_MEMORY_UTILIZATION_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_DTYPE_FIELD_NUMBER: _ClassVar[int]
    KV_DTYPE_FIELD_NUMBER: _ClassVar[int]
    KV_TRANSFER_BANDWIDTH_BYTES_PER_S_FIELD_NUMBER: _ClassVar[int]
    KV_TRANSFER_LATENCY_S_FIELD_NUMBER: _ClassVar[int]
    ALLOW_TRANSFERRED_PROFILES_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_DTYPES_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_GROUP_SIZE_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_CHECKPOINTS_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_PARALLEL_SIZES_FIELD_NUMBER: _ClassVar[int]
    EXPERT_PARALLEL_FIELD_NUMBER: _ClassVar[int]
    ROUTING_SKEW_FIELD_NUMBER: _ClassVar[int]
    NUM_SPECULATIVE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    gpus: _containers.RepeatedScalarFieldContainer[str]
    tensor_parallel_sizes: _containers.RepeatedScalarFieldContainer[int]
    disaggregation: DisaggregationPolicy
    mixed_gpu_types: bool
    max_num_batched_tokens: _containers.RepeatedScalarFieldContainer[int]
    max_num_seqs: _containers.RepeatedScalarFieldContainer[int]
    long_prefill_token_thresholds: _containers.RepeatedScalarFieldContainer[int]
    gpu_memory_utilization: float
    weight_dtype: Dtype
    kv_dtype: Dtype
    kv_transfer_bandwidth_bytes_per_s: float
    kv_transfer_latency_s: float
    allow_transferred_profiles: bool
    weight_dtypes: _containers.RepeatedScalarFieldContainer[Dtype]
    weight_group_size: int
    weight_checkpoints: _containers.ScalarMap[str, str]
    pipeline_parallel_sizes: _containers.RepeatedScalarFieldContainer[int]
    expert_parallel: bool
    routing_skew: float
    num_speculative_tokens: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, gpus: _Optional[_Iterable[str]] = ..., tensor_parallel_sizes: _Optional[_Iterable[int]] = ..., disaggregation: _Optional[_Union[DisaggregationPolicy, str]] = ..., mixed_gpu_types: _Optional[bool] = ..., max_num_batched_tokens: _Optional[_Iterable[int]] = ..., max_num_seqs: _Optional[_Iterable[int]] = ..., long_prefill_token_thresholds: _Optional[_Iterable[int]] = ..., gpu_memory_utilization: _Optional[float] = ..., weight_dtype: _Optional[_Union[Dtype, str]] = ..., kv_dtype: _Optional[_Union[Dtype, str]] = ..., kv_transfer_bandwidth_bytes_per_s: _Optional[float] = ..., kv_transfer_latency_s: _Optional[float] = ..., allow_transferred_profiles: _Optional[bool] = ..., weight_dtypes: _Optional[_Iterable[_Union[Dtype, str]]] = ..., weight_group_size: _Optional[int] = ..., weight_checkpoints: _Optional[_Mapping[str, str]] = ..., pipeline_parallel_sizes: _Optional[_Iterable[int]] = ..., expert_parallel: _Optional[bool] = ..., routing_skew: _Optional[float] = ..., num_speculative_tokens: _Optional[_Iterable[int]] = ...) -> None: ...

class GpuPrice(_message.Message):
    __slots__ = ("usd_per_gpu_hour", "reserved_usd_per_gpu_hour")
    USD_PER_GPU_HOUR_FIELD_NUMBER: _ClassVar[int]
    RESERVED_USD_PER_GPU_HOUR_FIELD_NUMBER: _ClassVar[int]
    usd_per_gpu_hour: float
    reserved_usd_per_gpu_hour: float
    def __init__(self, usd_per_gpu_hour: _Optional[float] = ..., reserved_usd_per_gpu_hour: _Optional[float] = ...) -> None: ...

class Availability(_message.Message):
    __slots__ = ("min_replicas", "spare_replicas")
    MIN_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    SPARE_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    min_replicas: int
    spare_replicas: int
    def __init__(self, min_replicas: _Optional[int] = ..., spare_replicas: _Optional[int] = ...) -> None: ...

class SolverOptions(_message.Message):
    __slots__ = ("time_limit_s", "relative_gap")
    TIME_LIMIT_S_FIELD_NUMBER: _ClassVar[int]
    RELATIVE_GAP_FIELD_NUMBER: _ClassVar[int]
    time_limit_s: float
    relative_gap: float
    def __init__(self, time_limit_s: _Optional[float] = ..., relative_gap: _Optional[float] = ...) -> None: ...

class PlanRequest(_message.Message):
    __slots__ = ("model", "slo", "workload", "candidates", "pricing", "inventory", "headroom", "solver", "profile", "verify", "max_model_len", "price_list", "availability", "lora", "speculative_decoding")
    class PricingEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: GpuPrice
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[GpuPrice, _Mapping]] = ...) -> None: ...
    class InventoryEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    MODEL_FIELD_NUMBER: _ClassVar[int]
    SLO_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    PRICING_FIELD_NUMBER: _ClassVar[int]
    INVENTORY_FIELD_NUMBER: _ClassVar[int]
    HEADROOM_FIELD_NUMBER: _ClassVar[int]
    SOLVER_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    VERIFY_FIELD_NUMBER: _ClassVar[int]
    MAX_MODEL_LEN_FIELD_NUMBER: _ClassVar[int]
    PRICE_LIST_FIELD_NUMBER: _ClassVar[int]
    AVAILABILITY_FIELD_NUMBER: _ClassVar[int]
    LORA_FIELD_NUMBER: _ClassVar[int]
    SPECULATIVE_DECODING_FIELD_NUMBER: _ClassVar[int]
    model: str
    slo: PlanSlo
    workload: Workload
    candidates: CandidateSpace
    pricing: _containers.MessageMap[str, GpuPrice]
    inventory: _containers.ScalarMap[str, int]
    headroom: float
    solver: SolverOptions
    profile: str
    verify: bool
    max_model_len: int
    price_list: str
    availability: Availability
    lora: Lora
    speculative_decoding: SpeculativeDecoding
    def __init__(self, model: _Optional[str] = ..., slo: _Optional[_Union[PlanSlo, _Mapping]] = ..., workload: _Optional[_Union[Workload, _Mapping]] = ..., candidates: _Optional[_Union[CandidateSpace, _Mapping]] = ..., pricing: _Optional[_Mapping[str, GpuPrice]] = ..., inventory: _Optional[_Mapping[str, int]] = ..., headroom: _Optional[float] = ..., solver: _Optional[_Union[SolverOptions, _Mapping]] = ..., profile: _Optional[str] = ..., verify: _Optional[bool] = ..., max_model_len: _Optional[int] = ..., price_list: _Optional[str] = ..., availability: _Optional[_Union[Availability, _Mapping]] = ..., lora: _Optional[_Union[Lora, _Mapping]] = ..., speculative_decoding: _Optional[_Union[SpeculativeDecoding, _Mapping]] = ...) -> None: ...

class PlanResponse(_message.Message):
    __slots__ = ("report",)
    REPORT_FIELD_NUMBER: _ClassVar[int]
    report: PlanReport
    def __init__(self, report: _Optional[_Union[PlanReport, _Mapping]] = ...) -> None: ...

class SweepScenario(_message.Message):
    __slots__ = ("name", "plan")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PLAN_FIELD_NUMBER: _ClassVar[int]
    name: str
    plan: PlanRequest
    def __init__(self, name: _Optional[str] = ..., plan: _Optional[_Union[PlanRequest, _Mapping]] = ...) -> None: ...

class SweepRequest(_message.Message):
    __slots__ = ("scenarios", "plan", "scenario_set")
    SCENARIOS_FIELD_NUMBER: _ClassVar[int]
    PLAN_FIELD_NUMBER: _ClassVar[int]
    SCENARIO_SET_FIELD_NUMBER: _ClassVar[int]
    scenarios: _containers.RepeatedCompositeFieldContainer[SweepScenario]
    plan: PlanRequest
    scenario_set: ScenarioSet
    def __init__(self, scenarios: _Optional[_Iterable[_Union[SweepScenario, _Mapping]]] = ..., plan: _Optional[_Union[PlanRequest, _Mapping]] = ..., scenario_set: _Optional[_Union[ScenarioSet, _Mapping]] = ...) -> None: ...

class ScenarioSet(_message.Message):
    __slots__ = ("quantiles", "growth")
    QUANTILES_FIELD_NUMBER: _ClassVar[int]
    GROWTH_FIELD_NUMBER: _ClassVar[int]
    quantiles: _containers.RepeatedScalarFieldContainer[float]
    growth: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, quantiles: _Optional[_Iterable[float]] = ..., growth: _Optional[_Iterable[str]] = ...) -> None: ...

class SweepResponse(_message.Message):
    __slots__ = ("index", "name", "report", "error")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REPORT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    index: int
    name: str
    report: PlanReport
    error: _status_pb2.Status
    def __init__(self, index: _Optional[int] = ..., name: _Optional[str] = ..., report: _Optional[_Union[PlanReport, _Mapping]] = ..., error: _Optional[_Union[_status_pb2.Status, _Mapping]] = ...) -> None: ...

class PlanTargets(_message.Message):
    __slots__ = ("ttft_p99_ms", "itl_p99_ms", "e2e_p99_ms")
    TTFT_P99_MS_FIELD_NUMBER: _ClassVar[int]
    ITL_P99_MS_FIELD_NUMBER: _ClassVar[int]
    E2E_P99_MS_FIELD_NUMBER: _ClassVar[int]
    ttft_p99_ms: float
    itl_p99_ms: float
    e2e_p99_ms: float
    def __init__(self, ttft_p99_ms: _Optional[float] = ..., itl_p99_ms: _Optional[float] = ..., e2e_p99_ms: _Optional[float] = ...) -> None: ...

class PlanWorkload(_message.Message):
    __slots__ = ("name", "buckets", "horizon_hours", "mean_requests_per_s", "peak_requests_per_s", "peak_bucket", "burstiness", "mean_input_tokens", "p99_input_tokens", "mean_output_tokens", "p99_output_tokens", "prefix_cache_hit_fraction")
    NAME_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    HORIZON_HOURS_FIELD_NUMBER: _ClassVar[int]
    MEAN_REQUESTS_PER_S_FIELD_NUMBER: _ClassVar[int]
    PEAK_REQUESTS_PER_S_FIELD_NUMBER: _ClassVar[int]
    PEAK_BUCKET_FIELD_NUMBER: _ClassVar[int]
    BURSTINESS_FIELD_NUMBER: _ClassVar[int]
    MEAN_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    P99_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MEAN_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    P99_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PREFIX_CACHE_HIT_FRACTION_FIELD_NUMBER: _ClassVar[int]
    name: str
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
    def __init__(self, name: _Optional[str] = ..., buckets: _Optional[int] = ..., horizon_hours: _Optional[float] = ..., mean_requests_per_s: _Optional[float] = ..., peak_requests_per_s: _Optional[float] = ..., peak_bucket: _Optional[int] = ..., burstiness: _Optional[float] = ..., mean_input_tokens: _Optional[float] = ..., p99_input_tokens: _Optional[float] = ..., mean_output_tokens: _Optional[float] = ..., p99_output_tokens: _Optional[float] = ..., prefix_cache_hit_fraction: _Optional[float] = ...) -> None: ...

class PoolAtPeak(_message.Message):
    __slots__ = ("requests_per_s_per_replica", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "kv_cache_usage", "preemption_risk", "running_requests")
    REQUESTS_PER_S_PER_REPLICA_FIELD_NUMBER: _ClassVar[int]
    TTFT_P50_MS_FIELD_NUMBER: _ClassVar[int]
    TTFT_P99_MS_FIELD_NUMBER: _ClassVar[int]
    ITL_P50_MS_FIELD_NUMBER: _ClassVar[int]
    ITL_P99_MS_FIELD_NUMBER: _ClassVar[int]
    KV_CACHE_USAGE_FIELD_NUMBER: _ClassVar[int]
    PREEMPTION_RISK_FIELD_NUMBER: _ClassVar[int]
    RUNNING_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    requests_per_s_per_replica: float
    ttft_p50_ms: float
    ttft_p99_ms: float
    itl_p50_ms: float
    itl_p99_ms: float
    kv_cache_usage: float
    preemption_risk: float
    running_requests: float
    def __init__(self, requests_per_s_per_replica: _Optional[float] = ..., ttft_p50_ms: _Optional[float] = ..., ttft_p99_ms: _Optional[float] = ..., itl_p50_ms: _Optional[float] = ..., itl_p99_ms: _Optional[float] = ..., kv_cache_usage: _Optional[float] = ..., preemption_risk: _Optional[float] = ..., running_requests: _Optional[float] = ...) -> None: ...

class PlanDeployment(_message.Message):
    __slots__ = ("id", "gpu", "tensor_parallel_size", "role", "replicas_peak", "replicas_by_bucket", "max_num_batched_tokens", "max_num_seqs", "long_prefill_token_threshold", "gpu_memory_utilization", "weight_dtype", "kv_dtype", "vllm_args", "vllm_command", "requests_per_s_per_replica", "binding_limit", "usd_per_gpu_hour", "profile", "at_peak", "lora", "pipeline_parallel_size", "expert_parallel", "speculative_decoding")
    ID_FIELD_NUMBER: _ClassVar[int]
    GPU_FIELD_NUMBER: _ClassVar[int]
    TENSOR_PARALLEL_SIZE_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_PEAK_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_BY_BUCKET_FIELD_NUMBER: _ClassVar[int]
    MAX_NUM_BATCHED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MAX_NUM_SEQS_FIELD_NUMBER: _ClassVar[int]
    LONG_PREFILL_TOKEN_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    GPU_MEMORY_UTILIZATION_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_DTYPE_FIELD_NUMBER: _ClassVar[int]
    KV_DTYPE_FIELD_NUMBER: _ClassVar[int]
    VLLM_ARGS_FIELD_NUMBER: _ClassVar[int]
    VLLM_COMMAND_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_PER_S_PER_REPLICA_FIELD_NUMBER: _ClassVar[int]
    BINDING_LIMIT_FIELD_NUMBER: _ClassVar[int]
    USD_PER_GPU_HOUR_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    AT_PEAK_FIELD_NUMBER: _ClassVar[int]
    LORA_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_PARALLEL_SIZE_FIELD_NUMBER: _ClassVar[int]
    EXPERT_PARALLEL_FIELD_NUMBER: _ClassVar[int]
    SPECULATIVE_DECODING_FIELD_NUMBER: _ClassVar[int]
    id: str
    gpu: str
    tensor_parallel_size: int
    role: Role
    replicas_peak: int
    replicas_by_bucket: _containers.RepeatedScalarFieldContainer[int]
    max_num_batched_tokens: int
    max_num_seqs: int
    long_prefill_token_threshold: int
    gpu_memory_utilization: float
    weight_dtype: str
    kv_dtype: str
    vllm_args: _containers.RepeatedScalarFieldContainer[str]
    vllm_command: str
    requests_per_s_per_replica: float
    binding_limit: str
    usd_per_gpu_hour: float
    profile: str
    at_peak: PoolAtPeak
    lora: LoraMemory
    pipeline_parallel_size: int
    expert_parallel: ExpertParallelSummary
    speculative_decoding: SpeculativeSummary
    def __init__(self, id: _Optional[str] = ..., gpu: _Optional[str] = ..., tensor_parallel_size: _Optional[int] = ..., role: _Optional[_Union[Role, str]] = ..., replicas_peak: _Optional[int] = ..., replicas_by_bucket: _Optional[_Iterable[int]] = ..., max_num_batched_tokens: _Optional[int] = ..., max_num_seqs: _Optional[int] = ..., long_prefill_token_threshold: _Optional[int] = ..., gpu_memory_utilization: _Optional[float] = ..., weight_dtype: _Optional[str] = ..., kv_dtype: _Optional[str] = ..., vllm_args: _Optional[_Iterable[str]] = ..., vllm_command: _Optional[str] = ..., requests_per_s_per_replica: _Optional[float] = ..., binding_limit: _Optional[str] = ..., usd_per_gpu_hour: _Optional[float] = ..., profile: _Optional[str] = ..., at_peak: _Optional[_Union[PoolAtPeak, _Mapping]] = ..., lora: _Optional[_Union[LoraMemory, _Mapping]] = ..., pipeline_parallel_size: _Optional[int] = ..., expert_parallel: _Optional[_Union[ExpertParallelSummary, _Mapping]] = ..., speculative_decoding: _Optional[_Union[SpeculativeSummary, _Mapping]] = ...) -> None: ...

class GpuUse(_message.Message):
    __slots__ = ("gpu", "reserved", "on_demand_by_bucket", "peak", "usd_per_gpu_hour", "reserved_usd_per_gpu_hour", "inventory")
    GPU_FIELD_NUMBER: _ClassVar[int]
    RESERVED_FIELD_NUMBER: _ClassVar[int]
    ON_DEMAND_BY_BUCKET_FIELD_NUMBER: _ClassVar[int]
    PEAK_FIELD_NUMBER: _ClassVar[int]
    USD_PER_GPU_HOUR_FIELD_NUMBER: _ClassVar[int]
    RESERVED_USD_PER_GPU_HOUR_FIELD_NUMBER: _ClassVar[int]
    INVENTORY_FIELD_NUMBER: _ClassVar[int]
    gpu: str
    reserved: int
    on_demand_by_bucket: _containers.RepeatedScalarFieldContainer[int]
    peak: int
    usd_per_gpu_hour: float
    reserved_usd_per_gpu_hour: float
    inventory: int
    def __init__(self, gpu: _Optional[str] = ..., reserved: _Optional[int] = ..., on_demand_by_bucket: _Optional[_Iterable[int]] = ..., peak: _Optional[int] = ..., usd_per_gpu_hour: _Optional[float] = ..., reserved_usd_per_gpu_hour: _Optional[float] = ..., inventory: _Optional[int] = ...) -> None: ...

class BucketCost(_message.Message):
    __slots__ = ("start_s", "duration_s", "requests_per_s", "gpus", "usd_per_hour")
    START_S_FIELD_NUMBER: _ClassVar[int]
    DURATION_S_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_PER_S_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    USD_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    start_s: float
    duration_s: float
    requests_per_s: float
    gpus: int
    usd_per_hour: float
    def __init__(self, start_s: _Optional[float] = ..., duration_s: _Optional[float] = ..., requests_per_s: _Optional[float] = ..., gpus: _Optional[int] = ..., usd_per_hour: _Optional[float] = ...) -> None: ...

class Predicted(_message.Message):
    __slots__ = ("requests_per_s", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "e2e_p99_ms")
    REQUESTS_PER_S_FIELD_NUMBER: _ClassVar[int]
    TTFT_P50_MS_FIELD_NUMBER: _ClassVar[int]
    TTFT_P99_MS_FIELD_NUMBER: _ClassVar[int]
    ITL_P50_MS_FIELD_NUMBER: _ClassVar[int]
    ITL_P99_MS_FIELD_NUMBER: _ClassVar[int]
    E2E_P99_MS_FIELD_NUMBER: _ClassVar[int]
    requests_per_s: float
    ttft_p50_ms: float
    ttft_p99_ms: float
    itl_p50_ms: float
    itl_p99_ms: float
    e2e_p99_ms: float
    def __init__(self, requests_per_s: _Optional[float] = ..., ttft_p50_ms: _Optional[float] = ..., ttft_p99_ms: _Optional[float] = ..., itl_p50_ms: _Optional[float] = ..., itl_p99_ms: _Optional[float] = ..., e2e_p99_ms: _Optional[float] = ...) -> None: ...

class SimulatedGroup(_message.Message):
    __slots__ = ("deployments", "replicas", "bucket", "bucket_requests_per_s", "requests_per_s", "predicted_slo_fraction", "requests", "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p90_ms", "itl_p99_ms", "e2e_p99_ms", "predicted_ttft_p50_ms", "predicted_ttft_p99_ms", "predicted_itl_p50_ms", "predicted_itl_p99_ms", "predicted_e2e_p99_ms", "slo_met")
    DEPLOYMENTS_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    BUCKET_FIELD_NUMBER: _ClassVar[int]
    BUCKET_REQUESTS_PER_S_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_PER_S_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_SLO_FRACTION_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    TTFT_P50_MS_FIELD_NUMBER: _ClassVar[int]
    TTFT_P90_MS_FIELD_NUMBER: _ClassVar[int]
    TTFT_P99_MS_FIELD_NUMBER: _ClassVar[int]
    ITL_P50_MS_FIELD_NUMBER: _ClassVar[int]
    ITL_P90_MS_FIELD_NUMBER: _ClassVar[int]
    ITL_P99_MS_FIELD_NUMBER: _ClassVar[int]
    E2E_P99_MS_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_TTFT_P50_MS_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_TTFT_P99_MS_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_ITL_P50_MS_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_ITL_P99_MS_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_E2E_P99_MS_FIELD_NUMBER: _ClassVar[int]
    SLO_MET_FIELD_NUMBER: _ClassVar[int]
    deployments: _containers.RepeatedScalarFieldContainer[str]
    replicas: _containers.RepeatedScalarFieldContainer[int]
    bucket: int
    bucket_requests_per_s: float
    requests_per_s: float
    predicted_slo_fraction: float
    requests: int
    ttft_p50_ms: float
    ttft_p90_ms: float
    ttft_p99_ms: float
    itl_p50_ms: float
    itl_p90_ms: float
    itl_p99_ms: float
    e2e_p99_ms: float
    predicted_ttft_p50_ms: float
    predicted_ttft_p99_ms: float
    predicted_itl_p50_ms: float
    predicted_itl_p99_ms: float
    predicted_e2e_p99_ms: float
    slo_met: bool
    def __init__(self, deployments: _Optional[_Iterable[str]] = ..., replicas: _Optional[_Iterable[int]] = ..., bucket: _Optional[int] = ..., bucket_requests_per_s: _Optional[float] = ..., requests_per_s: _Optional[float] = ..., predicted_slo_fraction: _Optional[float] = ..., requests: _Optional[int] = ..., ttft_p50_ms: _Optional[float] = ..., ttft_p90_ms: _Optional[float] = ..., ttft_p99_ms: _Optional[float] = ..., itl_p50_ms: _Optional[float] = ..., itl_p90_ms: _Optional[float] = ..., itl_p99_ms: _Optional[float] = ..., e2e_p99_ms: _Optional[float] = ..., predicted_ttft_p50_ms: _Optional[float] = ..., predicted_ttft_p99_ms: _Optional[float] = ..., predicted_itl_p50_ms: _Optional[float] = ..., predicted_itl_p99_ms: _Optional[float] = ..., predicted_e2e_p99_ms: _Optional[float] = ..., slo_met: _Optional[bool] = ...) -> None: ...

class Simulated(_message.Message):
    __slots__ = ("requests", "seed", "ttft_p99_ms", "itl_p99_ms", "slo_met", "groups")
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    TTFT_P99_MS_FIELD_NUMBER: _ClassVar[int]
    ITL_P99_MS_FIELD_NUMBER: _ClassVar[int]
    SLO_MET_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    requests: int
    seed: int
    ttft_p99_ms: float
    itl_p99_ms: float
    slo_met: bool
    groups: _containers.RepeatedCompositeFieldContainer[SimulatedGroup]
    def __init__(self, requests: _Optional[int] = ..., seed: _Optional[int] = ..., ttft_p99_ms: _Optional[float] = ..., itl_p99_ms: _Optional[float] = ..., slo_met: _Optional[bool] = ..., groups: _Optional[_Iterable[_Union[SimulatedGroup, _Mapping]]] = ...) -> None: ...

class AlternativeDeployment(_message.Message):
    __slots__ = ("gpu", "tensor_parallel_size", "role", "replicas_peak", "max_num_batched_tokens", "max_num_seqs", "pipeline_parallel_size")
    GPU_FIELD_NUMBER: _ClassVar[int]
    TENSOR_PARALLEL_SIZE_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_PEAK_FIELD_NUMBER: _ClassVar[int]
    MAX_NUM_BATCHED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MAX_NUM_SEQS_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_PARALLEL_SIZE_FIELD_NUMBER: _ClassVar[int]
    gpu: str
    tensor_parallel_size: int
    role: Role
    replicas_peak: int
    max_num_batched_tokens: int
    max_num_seqs: int
    pipeline_parallel_size: int
    def __init__(self, gpu: _Optional[str] = ..., tensor_parallel_size: _Optional[int] = ..., role: _Optional[_Union[Role, str]] = ..., replicas_peak: _Optional[int] = ..., max_num_batched_tokens: _Optional[int] = ..., max_num_seqs: _Optional[int] = ..., pipeline_parallel_size: _Optional[int] = ...) -> None: ...

class Alternative(_message.Message):
    __slots__ = ("kind", "label", "feasible", "usd_per_month", "usd_per_hour_peak", "delta_usd_per_month", "delta_fraction", "gpu_count_peak", "deployments", "reason")
    KIND_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    FEASIBLE_FIELD_NUMBER: _ClassVar[int]
    USD_PER_MONTH_FIELD_NUMBER: _ClassVar[int]
    USD_PER_HOUR_PEAK_FIELD_NUMBER: _ClassVar[int]
    DELTA_USD_PER_MONTH_FIELD_NUMBER: _ClassVar[int]
    DELTA_FRACTION_FIELD_NUMBER: _ClassVar[int]
    GPU_COUNT_PEAK_FIELD_NUMBER: _ClassVar[int]
    DEPLOYMENTS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    kind: AlternativeKind
    label: str
    feasible: bool
    usd_per_month: float
    usd_per_hour_peak: float
    delta_usd_per_month: float
    delta_fraction: float
    gpu_count_peak: int
    deployments: _containers.RepeatedCompositeFieldContainer[AlternativeDeployment]
    reason: str
    def __init__(self, kind: _Optional[_Union[AlternativeKind, str]] = ..., label: _Optional[str] = ..., feasible: _Optional[bool] = ..., usd_per_month: _Optional[float] = ..., usd_per_hour_peak: _Optional[float] = ..., delta_usd_per_month: _Optional[float] = ..., delta_fraction: _Optional[float] = ..., gpu_count_peak: _Optional[int] = ..., deployments: _Optional[_Iterable[_Union[AlternativeDeployment, _Mapping]]] = ..., reason: _Optional[str] = ...) -> None: ...

class RelaxedPlan(_message.Message):
    __slots__ = ("field", "value", "status", "usd_per_month", "usd_per_hour_peak", "gpu_count_peak", "deployments")
    FIELD_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    USD_PER_MONTH_FIELD_NUMBER: _ClassVar[int]
    USD_PER_HOUR_PEAK_FIELD_NUMBER: _ClassVar[int]
    GPU_COUNT_PEAK_FIELD_NUMBER: _ClassVar[int]
    DEPLOYMENTS_FIELD_NUMBER: _ClassVar[int]
    field: str
    value: str
    status: PlanStatus
    usd_per_month: float
    usd_per_hour_peak: float
    gpu_count_peak: int
    deployments: _containers.RepeatedCompositeFieldContainer[AlternativeDeployment]
    def __init__(self, field: _Optional[str] = ..., value: _Optional[str] = ..., status: _Optional[_Union[PlanStatus, str]] = ..., usd_per_month: _Optional[float] = ..., usd_per_hour_peak: _Optional[float] = ..., gpu_count_peak: _Optional[int] = ..., deployments: _Optional[_Iterable[_Union[AlternativeDeployment, _Mapping]]] = ...) -> None: ...

class Infeasibility(_message.Message):
    __slots__ = ("constraint", "reason", "relaxation", "relaxed")
    CONSTRAINT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RELAXATION_FIELD_NUMBER: _ClassVar[int]
    RELAXED_FIELD_NUMBER: _ClassVar[int]
    constraint: str
    reason: str
    relaxation: str
    relaxed: _containers.RepeatedCompositeFieldContainer[RelaxedPlan]
    def __init__(self, constraint: _Optional[str] = ..., reason: _Optional[str] = ..., relaxation: _Optional[str] = ..., relaxed: _Optional[_Iterable[_Union[RelaxedPlan, _Mapping]]] = ...) -> None: ...

class ProfileUsed(_message.Message):
    __slots__ = ("gpu", "name", "source")
    GPU_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    gpu: str
    name: str
    source: str
    def __init__(self, gpu: _Optional[str] = ..., name: _Optional[str] = ..., source: _Optional[str] = ...) -> None: ...

class SearchStats(_message.Message):
    __slots__ = ("configurations_evaluated", "candidates", "candidates_pruned_dominated", "candidates_in_milp", "milp_variables", "milp_constraints", "unfit")
    CONFIGURATIONS_EVALUATED_FIELD_NUMBER: _ClassVar[int]
    CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    CANDIDATES_PRUNED_DOMINATED_FIELD_NUMBER: _ClassVar[int]
    CANDIDATES_IN_MILP_FIELD_NUMBER: _ClassVar[int]
    MILP_VARIABLES_FIELD_NUMBER: _ClassVar[int]
    MILP_CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    UNFIT_FIELD_NUMBER: _ClassVar[int]
    configurations_evaluated: int
    candidates: int
    candidates_pruned_dominated: int
    candidates_in_milp: int
    milp_variables: int
    milp_constraints: int
    unfit: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, configurations_evaluated: _Optional[int] = ..., candidates: _Optional[int] = ..., candidates_pruned_dominated: _Optional[int] = ..., candidates_in_milp: _Optional[int] = ..., milp_variables: _Optional[int] = ..., milp_constraints: _Optional[int] = ..., unfit: _Optional[_Iterable[str]] = ...) -> None: ...

class SolverSummary(_message.Message):
    __slots__ = ("status", "objective_usd", "gap", "time_limit_s")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    OBJECTIVE_USD_FIELD_NUMBER: _ClassVar[int]
    GAP_FIELD_NUMBER: _ClassVar[int]
    TIME_LIMIT_S_FIELD_NUMBER: _ClassVar[int]
    status: PlanStatus
    objective_usd: float
    gap: float
    time_limit_s: float
    def __init__(self, status: _Optional[_Union[PlanStatus, str]] = ..., objective_usd: _Optional[float] = ..., gap: _Optional[float] = ..., time_limit_s: _Optional[float] = ...) -> None: ...

class PlanReport(_message.Message):
    __slots__ = ("status", "model", "slo", "workload", "deployments", "gpus", "gpu_count_peak", "usd_per_hour_peak", "usd_per_month", "usd_per_million_output_tokens", "usd_per_million_input_tokens", "predicted", "simulated", "disaggregated", "disaggregation_reason", "binding_constraints", "alternatives", "warnings", "notes", "infeasibility", "profiles", "buckets", "search", "solver", "served_model")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    SLO_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    DEPLOYMENTS_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    GPU_COUNT_PEAK_FIELD_NUMBER: _ClassVar[int]
    USD_PER_HOUR_PEAK_FIELD_NUMBER: _ClassVar[int]
    USD_PER_MONTH_FIELD_NUMBER: _ClassVar[int]
    USD_PER_MILLION_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    USD_PER_MILLION_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_FIELD_NUMBER: _ClassVar[int]
    SIMULATED_FIELD_NUMBER: _ClassVar[int]
    DISAGGREGATED_FIELD_NUMBER: _ClassVar[int]
    DISAGGREGATION_REASON_FIELD_NUMBER: _ClassVar[int]
    BINDING_CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    ALTERNATIVES_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    NOTES_FIELD_NUMBER: _ClassVar[int]
    INFEASIBILITY_FIELD_NUMBER: _ClassVar[int]
    PROFILES_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    SEARCH_FIELD_NUMBER: _ClassVar[int]
    SOLVER_FIELD_NUMBER: _ClassVar[int]
    SERVED_MODEL_FIELD_NUMBER: _ClassVar[int]
    status: PlanStatus
    model: str
    slo: PlanTargets
    workload: PlanWorkload
    deployments: _containers.RepeatedCompositeFieldContainer[PlanDeployment]
    gpus: _containers.RepeatedCompositeFieldContainer[GpuUse]
    gpu_count_peak: int
    usd_per_hour_peak: float
    usd_per_month: float
    usd_per_million_output_tokens: float
    usd_per_million_input_tokens: float
    predicted: Predicted
    simulated: Simulated
    disaggregated: bool
    disaggregation_reason: str
    binding_constraints: _containers.RepeatedScalarFieldContainer[str]
    alternatives: _containers.RepeatedCompositeFieldContainer[Alternative]
    warnings: _containers.RepeatedScalarFieldContainer[str]
    notes: _containers.RepeatedScalarFieldContainer[str]
    infeasibility: Infeasibility
    profiles: _containers.RepeatedCompositeFieldContainer[ProfileUsed]
    buckets: _containers.RepeatedCompositeFieldContainer[BucketCost]
    search: SearchStats
    solver: SolverSummary
    served_model: str
    def __init__(self, status: _Optional[_Union[PlanStatus, str]] = ..., model: _Optional[str] = ..., slo: _Optional[_Union[PlanTargets, _Mapping]] = ..., workload: _Optional[_Union[PlanWorkload, _Mapping]] = ..., deployments: _Optional[_Iterable[_Union[PlanDeployment, _Mapping]]] = ..., gpus: _Optional[_Iterable[_Union[GpuUse, _Mapping]]] = ..., gpu_count_peak: _Optional[int] = ..., usd_per_hour_peak: _Optional[float] = ..., usd_per_month: _Optional[float] = ..., usd_per_million_output_tokens: _Optional[float] = ..., usd_per_million_input_tokens: _Optional[float] = ..., predicted: _Optional[_Union[Predicted, _Mapping]] = ..., simulated: _Optional[_Union[Simulated, _Mapping]] = ..., disaggregated: _Optional[bool] = ..., disaggregation_reason: _Optional[str] = ..., binding_constraints: _Optional[_Iterable[str]] = ..., alternatives: _Optional[_Iterable[_Union[Alternative, _Mapping]]] = ..., warnings: _Optional[_Iterable[str]] = ..., notes: _Optional[_Iterable[str]] = ..., infeasibility: _Optional[_Union[Infeasibility, _Mapping]] = ..., profiles: _Optional[_Iterable[_Union[ProfileUsed, _Mapping]]] = ..., buckets: _Optional[_Iterable[_Union[BucketCost, _Mapping]]] = ..., search: _Optional[_Union[SearchStats, _Mapping]] = ..., solver: _Optional[_Union[SolverSummary, _Mapping]] = ..., served_model: _Optional[str] = ...) -> None: ...
