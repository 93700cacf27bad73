"""`analyze` (the seed article's roofline analyses of one replica) and `calibrate` (a hardware
profile fitted to measured step times)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from planner.api.resolving import BaseDir, base_folder, model_ref, profile_for
from planner.errors import InvalidInput
from planner.schema.inputs import (
    AnalyzeRequest,
    CalibrateRequest,
    MeasurementsInput,
    local_path,
    validate_request,
)

if TYPE_CHECKING:
    from planner.costmodel.fit_data import Measurements
    from planner.costmodel.roofline import Replica
    from planner.schema.reports import AnalyzeReport, CalibrateReport


def _replica(req: AnalyzeRequest, base: Path | None) -> Replica:
    from planner.catalog.gpus import get_gpu
    from planner.catalog.models import get_model
    from planner.costmodel.roofline import Replica

    gpu = get_gpu(req.gpu, "gpu")
    model = get_model(model_ref(req.model, base), "model")
    return Replica(
        model=model,
        gpu=gpu,
        tp=req.tp,
        weight_dtype=req.weight_dtype,
        kv_dtype=req.kv_dtype,
        profile=profile_for(req.profile, gpu.name, base),
    )


def _check_fits(
    r: Replica,
    analysis: str,
    gpu_memory_utilization: float | None = None,
    budget: int | None = None,
    seqs: int | None = None,
) -> None:
    """Refuse what vLLM would refuse at startup (weights that do not fit the GPU at this TP, no
    room for a KV block): no number about such a replica means anything."""
    from planner.costmodel.feasibility import feasibility
    from planner.vllm_defaults import GPU_MEMORY_UTILIZATION

    util = GPU_MEMORY_UTILIZATION if gpu_memory_utilization is None else gpu_memory_utilization
    problems = feasibility(r.model, r.gpu, r.tp, r.weight_dtype, r.kv_dtype, budget, seqs, util, r.profile)
    if problems:
        p = problems[0]
        given = {"max_num_batched_tokens": budget, "max_num_seqs": seqs}
        raise InvalidInput(f"{analysis}.{p.field}" if given.get(p.field) is not None else p.field, p.reason)


def _context(field: str, value: int, replica: Replica) -> int:
    limit = replica.model.max_position_embeddings
    if value > limit:
        raise InvalidInput(field, f"{value} exceeds {replica.model.name}'s maximum context of {limit} tokens")
    return value


def analyze(request: AnalyzeRequest | Mapping[str, Any], *, base_dir: BaseDir = None) -> AnalyzeReport:
    """One of the seed article's roofline analyses (theoretical profile unless asked)."""
    from planner.costmodel import analyses as a
    from planner.schema.reports import (
        ChunkedPrefillReport,
        ConcurrencyReport,
        KvCapacityReport,
        PrefillReport,
        ReplicaInfo,
        StaticBatchingReport,
        UtilizationReport,
    )

    req = validate_request(AnalyzeRequest, request)
    which = req.analysis
    r = _replica(req, base_folder(base_dir))
    params = getattr(req, which)
    _check_fits(
        r,
        which,
        getattr(params, "gpu_memory_utilization", None),
        getattr(params, "max_num_batched_tokens", None),
        getattr(params, "max_num_seqs", None),
    )
    price = req.usd_per_gpu_hour if req.usd_per_gpu_hour is not None else float(r.gpu.price)
    info = ReplicaInfo(
        model=r.model.name,
        gpu=r.gpu.name,
        tp=r.tp,
        weight_dtype=req.weight_dtype,
        kv_dtype=req.kv_dtype,
        profile=r.profile.name,
        profile_warning=r.profile.warning,
    )
    report: AnalyzeReport
    if req.concurrency is not None:
        c = req.concurrency
        ctx = _context("concurrency.context_tokens", c.context_tokens, r)
        data = a.concurrency_sweep(r, ctx, c.concurrency, price, c.gpu_memory_utilization)
        report = ConcurrencyReport.model_validate({**data, "replica": info})
    elif req.static_batching is not None:
        s = req.static_batching
        ctx = _context("static_batching.context_tokens", s.context_tokens, r)
        data = a.static_batching(r, ctx, s.batch, s.output_lengths, price)
        report = StaticBatchingReport.model_validate({**data, "replica": info})
    elif req.chunked_prefill is not None:
        ch = req.chunked_prefill
        prompt = _context("chunked_prefill.prompt_tokens", ch.prompt_tokens, r)
        ctx = _context("chunked_prefill.context_tokens", ch.context_tokens, r)
        if ch.reading == "budget":
            for i, size in enumerate(ch.sizes_tokens):
                if 0 < size <= ch.decodes:
                    raise InvalidInput(
                        f"chunked_prefill.sizes_tokens[{i}]",
                        f"budget {size} leaves no room for a prefill chunk beside {ch.decodes} decodes",
                    )
        sizes = [None if size == 0 else size for size in ch.sizes_tokens]
        data = a.chunked_prefill(r, prompt, ch.decodes, ctx, sizes, ch.reading)
        report = ChunkedPrefillReport.model_validate({**data, "replica": info})
    elif req.prefill is not None:
        prompt = _context("prefill.prompt_tokens", req.prefill.prompt_tokens, r)
        report = PrefillReport.model_validate({**a.prefill(r, prompt, price), "replica": info})
    elif req.utilization is not None:
        u = req.utilization
        ctx = _context("utilization.context_tokens", u.context_tokens, r)
        data = a.utilization(r, ctx, u.output_tokens_per_day, price, u.floor_concurrency)
        report = UtilizationReport.model_validate({**data, "replica": info})
    else:
        k = req.kv_capacity
        assert k is not None and which == "kv_capacity"
        ctx = _context("kv_capacity.context_tokens", k.context_tokens, r)
        data = a.kv_report(r, ctx, k.gpu_memory_utilization, k.max_num_batched_tokens, k.max_num_seqs)
        report = KvCapacityReport.model_validate({**data, "replica": info})
    return report


def _measurements(m: MeasurementsInput, base: Path | None) -> Measurements:
    from planner.costmodel.fit_data import load_measurements, parse_json

    if m.path is not None:
        # Read within planner.files.MEASUREMENTS's bounds.
        return load_measurements(local_path(m.path, base), "measurements")
    assert m.rows is not None
    # The file format, one row per line, so errors can say which row.
    rows = ",\n".join(json.dumps(r.model_dump(exclude_none=True)) for r in m.rows)
    text = '{"about": ' + json.dumps(m.about) + ', "rows": [\n' + rows + "\n]}"
    return parse_json(text, "inline rows", "measurements")


def calibrate(request: CalibrateRequest | Mapping[str, Any], *, base_dir: BaseDir = None) -> CalibrateReport:
    """Fit a hardware profile to measured step times; the report holds every row's measured vs
    fitted time, the MAPE, the parameters with their uncertainty and the profile itself."""
    from planner.catalog.gpus import get_gpu
    from planner.catalog.models import get_model
    from planner.costmodel.fitting import fit_profile
    from planner.schema.reports import CalibrateReport

    req = validate_request(CalibrateRequest, request)
    base = base_folder(base_dir)
    gpu = get_gpu(req.gpu, "gpu")
    model = get_model(model_ref(req.model, base), "model")
    meas = _measurements(req.measurements, base)
    cal = fit_profile(
        meas, model, gpu, name=req.name, fixed=req.fix.given(), field="measurements", force=req.force
    )
    return CalibrateReport.model_validate(
        {
            "model": cal.model,
            "gpu": cal.gpu,
            "measurements": cal.source,
            "rows": [
                {
                    "kind": r["kind"],
                    "line": r["line"],
                    **r["shape"],
                    "quantity": r["quantity"],
                    "measured_ms": r["measured_ms"],
                    "fitted_ms": r["fitted_ms"],
                    "theoretical_ms": r["theoretical_ms"],
                    "error_percent": 100 * r["error"],
                }
                for r in cal.rows
            ],
            "mape_percent": 100 * cal.mape,
            "max_abs_error_percent": 100 * cal.max_abs_error,
            "theoretical_mape_percent": 100 * cal.theoretical_mape,
            "parameters": {
                p.name: {
                    "value": p.value,
                    "std_error": p.std_error
                    if p.std_error is not None and math.isfinite(p.std_error)
                    else None,
                    "independence": p.independence,
                    "fixed": p.fixed,
                    "at_bound": p.at_bound,
                }
                for p in cal.parameters
            },
            "ceilings": cal.ceilings,
            "profile": cal.profile,
            "output": None,
        }
    )
