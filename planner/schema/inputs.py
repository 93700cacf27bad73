"""The requests of `planner.api`, and reading them from what users write (YAML/JSON files, trace
CSVs). One schema serves the CLI's files, `api.evaluate(yaml.safe_load(f))` and the gRPC
messages of planner.v1, which mirror these models field for field.

Every numeric field has a range (pydantic Field bounds, documented by the constants of
planner/schema/request_common.py); a value outside it, a wrong type, NaN or infinity is an
`InvalidInput` naming the dotted path the user wrote (`workload.arrivals.requests_per_s`,
`chunked_prefill.sizes_tokens[2]`). Paths inside a request (trace CSVs, profile files, model
config.json) are taken relative to the `base_dir` the caller gives (the CLI: the file's folder),
else to the working directory.

The requests live in one module a use case, this one re-exporting every name its callers use:
planner/schema/request_common.py (the ranges, the workload a request names, the SLO targets),
serving_requests.py (evaluate and simulate), analysis_requests.py (analyze, calibrate and
catalog), request_loading.py (validation, request files, paths, building the workload).
"""

from __future__ import annotations

from planner.deployment import MAX_TP, MAX_USD_PER_GPU_HOUR
from planner.schema.analysis_requests import (
    ANALYSES,
    AnalysisName,
    AnalyzeRequest,
    CalibrateRequest,
    CatalogRequest,
    ChunkedPrefillAnalysis,
    Concurrency,
    ConcurrencyAnalysis,
    ContextTokens,
    FixedParameters,
    KvCapacityAnalysis,
    MeasurementRow,
    MeasurementsInput,
    PrefillAnalysis,
    StaticBatchingAnalysis,
    UtilizationAnalysis,
)
from planner.schema.request_common import (
    MAX_BUCKET_S,
    MAX_CONCURRENCY,
    MAX_CONTEXT_TOKENS,
    MAX_LATENCY_MS,
    MAX_LIST_ITEMS,
    MAX_MEASUREMENT_ROWS,
    MAX_SEED,
    MAX_SIMULATED_REQUESTS,
    MAX_TOKEN_BUDGET,
    MAX_TOKENS_PER_DAY,
    MAX_TRACE_BINS,
    Replay,
    Router,
    SloTargets,
    TraceWorkload,
    WorkloadInput,
)
from planner.schema.request_loading import (
    MISNOMERS,
    build_workload,
    local_path,
    read_mapping_file,
    resolve_trace,
    validate_request,
)
from planner.schema.serving_requests import (
    EvaluateRequest,
    SimulateRequest,
)
from planner.workload import MAX_REQUESTS_PER_S

__all__ = [
    "ANALYSES",
    "MAX_BUCKET_S",
    "MAX_CONCURRENCY",
    "MAX_CONTEXT_TOKENS",
    "MAX_LATENCY_MS",
    "MAX_LIST_ITEMS",
    "MAX_MEASUREMENT_ROWS",
    "MAX_REQUESTS_PER_S",
    "MAX_SEED",
    "MAX_SIMULATED_REQUESTS",
    "MAX_TOKENS_PER_DAY",
    "MAX_TOKEN_BUDGET",
    "MAX_TP",
    "MAX_TRACE_BINS",
    "MAX_USD_PER_GPU_HOUR",
    "MISNOMERS",
    "AnalysisName",
    "AnalyzeRequest",
    "CalibrateRequest",
    "CatalogRequest",
    "ChunkedPrefillAnalysis",
    "Concurrency",
    "ConcurrencyAnalysis",
    "ContextTokens",
    "EvaluateRequest",
    "FixedParameters",
    "KvCapacityAnalysis",
    "MeasurementRow",
    "MeasurementsInput",
    "PrefillAnalysis",
    "Replay",
    "Router",
    "SimulateRequest",
    "SloTargets",
    "StaticBatchingAnalysis",
    "TraceWorkload",
    "UtilizationAnalysis",
    "WorkloadInput",
    "build_workload",
    "local_path",
    "read_mapping_file",
    "resolve_trace",
    "validate_request",
]
