"""The one contract of capplan: each use case takes a pydantic request (or a plain mapping, such
as `yaml.safe_load` of a CLI file, validated into one) and returns a pydantic report whose
`model_dump(mode="json")` is exactly what `capplan ... --json` prints. The CLI and the gRPC
servicer are adapters over these functions: parse, call, render.

    import yaml
    from planner import api
    with open("examples/chat-qwen3-8b-h100.yaml") as f:
        report = api.evaluate(yaml.safe_load(f), base_dir="examples")
    report.ttft_p99_ms, report.usd_per_million_output_tokens

Bad input raises `planner.errors.InvalidInput(field, reason)` with the dotted path of the request
field at fault (`workload.arrivals.requests_per_s`, `concurrency.context_tokens`). Paths inside a
request (trace CSVs, profile files, model config.json) are taken relative to `base_dir` when
given. Requests and their ranges: planner/schema/inputs.py; reports: planner/schema/reports.py.
One module a use case: planner/api/evaluating.py, simulating.py, analyzing.py (analyze and
calibrate); `catalog` and `plan` are here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from planner.api.analyzing import analyze, calibrate
from planner.api.evaluating import evaluate
from planner.api.resolving import BaseDir, base_folder, bool_keyword, model_ref, workers_keyword
from planner.api.simulating import DEFAULT_SIMULATED_REQUESTS, simulate
from planner.schema.inputs import (
    AnalyzeRequest,
    CalibrateRequest,
    CatalogRequest,
    EvaluateRequest,
    SimulateRequest,
    validate_request,
)

if TYPE_CHECKING:
    # The reports are imported where they are built: a command imports only its own (and
    # `capplan catalog` no latency model).
    from planner.schema.catalog_reports import CatalogReport
    from planner.schema.plan_report import PlanReport
    from planner.schema.plan_request import PlanRequest

__all__ = [
    "DEFAULT_SIMULATED_REQUESTS",
    "AnalyzeRequest",
    "CalibrateRequest",
    "CatalogRequest",
    "EvaluateRequest",
    "SimulateRequest",
    "analyze",
    "calibrate",
    "catalog",
    "evaluate",
    "load_domain",
    "plan",
    "simulate",
]


def catalog(request: CatalogRequest | Mapping[str, Any], *, base_dir: BaseDir = None) -> CatalogReport:
    """What the cost model knows: GPU specs and prices with their sources, or model shapes with
    the sizes computed from config.json (and, for one MoE model, the experts a step reads)."""
    from planner.catalog.gpus import get_gpu, gpu_names
    from planner.catalog.models import get_model, model_names
    from planner.schema.catalog_reports import GpuCatalogReport, ModelCatalogReport

    req = validate_request(CatalogRequest, request)
    base = base_folder(base_dir)
    if req.kind == "gpus":
        names = [get_gpu(req.name, "name").name] if req.name else gpu_names()
        return GpuCatalogReport(gpus=[get_gpu(n) for n in names])
    if req.name:
        specs = [get_model(model_ref(req.name, base), "name")]
    else:
        specs = [get_model(n) for n in model_names()]
    models = [
        {
            **m.model_dump(),
            "total_params": m.total_params,
            "active_params": m.active_params,
            "kv_bytes_per_token_bf16": m.kv_bytes_per_token("bf16"),
            "weight_bytes_bf16": m.weight_bytes("bf16"),
        }
        for m in specs
    ]
    reads = None
    if req.name and specs[0].is_moe:
        m = specs[0]
        reads = [
            {
                "tokens": b,
                "experts_touched_per_layer": m.expected_experts_touched(b),
                "params_read": m.params_read(b),
            }
            for b in req.batch_tokens
        ]
    return ModelCatalogReport.model_validate({"models": models, "expert_reads": reads})


def plan(
    request: PlanRequest | Mapping[str, Any],
    *,
    base_dir: BaseDir = None,
    verify: bool = False,
    workers: int | None = None,
) -> PlanReport:
    """The cheapest deployment that meets the SLOs for a traffic forecast (planner/plan,
    docs/plan.md): GPU type and count, TP, vLLM flags, colocated or disaggregated, replicas per
    bucket, cost, reasons and alternatives; an SLO nothing meets is an INFEASIBLE report with
    the nearest relaxation. `verify`: simulate each part of the plan at its hardest bucket.
    `workers`: processes answering capacity questions (None: 2; 1: in this process)."""
    from planner.plan import plan as plan_

    base, check, n = base_folder(base_dir), bool_keyword(verify, "verify"), workers_keyword(workers)
    return plan_(request, base_dir=base, verify=check, workers=n)


def load_domain() -> None:
    """Import now every module the use cases run (the planner, the simulator, the calibrated cost
    model, traces), which they would otherwise import on first use: the gRPC service's
    forkserver calls this (planner/server/preload.py) so its workers fork warm and share the
    pages, and no worker's first request pays seconds of imports. The adapters name no domain
    module; this list is the API's to keep."""
    import planner.costmodel.calibrated
    import planner.plan.pipeline
    import planner.simulate.run
    import planner.traces  # noqa: F401
