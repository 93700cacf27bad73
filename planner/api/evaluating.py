"""`evaluate`: the analytic latency model of a deployment under a workload."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from planner.api.resolving import BaseDir, base_folder, no_rate_override, resolve_deployment
from planner.errors import InvalidInput
from planner.schema.inputs import EvaluateRequest, SloTargets, build_workload, validate_request

if TYPE_CHECKING:
    from planner.schema.reports import EvaluateReport
    from planner.slo import Slo


def _latency_slo(targets: SloTargets | None) -> Slo | None:
    """The TTFT/ITL targets the latency model finds a capacity for."""
    if targets is None:
        return None
    for name in ("tpot_p99_ms", "e2el_p99_ms"):
        if getattr(targets, name) is not None:
            raise InvalidInput(
                f"slo.{name}",
                "evaluate predicts TTFT and ITL p99; TPOT and end-to-end targets are judged by simulate",
            )
    return targets.to_slo()


def _profile_warning(warning: str | None, weight_dtype: str, gpu_name: str) -> str | None:
    """The profile's warning, and that a quantized format's GEMMs are timed at the roofline
    (where no kernel table measures them on this GPU)."""
    from planner.catalog.quantization import rate_warning

    parts = [w for w in (warning, rate_warning(weight_dtype, (gpu_name,))) if w]
    return "; ".join(parts) or None


def evaluate(request: EvaluateRequest | Mapping[str, Any], *, base_dir: BaseDir = None) -> EvaluateReport:
    """Latency, KV use and cost of a deployment under a workload (the peak bucket's rate for
    bucketed arrivals, or `requests_per_s`); with an SLO, the most requests/s within it."""
    from planner.latency import LatencyModel, WorkloadStats
    from planner.schema.reports import EvaluateReport

    req = validate_request(EvaluateRequest, request)
    base = base_folder(base_dir)
    slo = _latency_slo(req.slo)
    workload = build_workload(req.workload, "workload", base, closed_loop=True)
    resolved, profile = resolve_deployment(req.deployment, req.profile, base, workload.endpoint)
    loop = None
    if workload.arrivals.closed_loop:
        from planner.closed_loop import solve_workload

        no_rate_override(req.requests_per_s)
        loop, model = solve_workload(resolved, workload)
        stats = model.stats
        pred = model.evaluate(loop.requests_per_s)
    else:
        stats = WorkloadStats.of(workload)
        model = LatencyModel(resolved, stats)
        pred = model.evaluate(req.requests_per_s)
    cap = model.capacity(slo) if slo is not None else None
    out: dict[str, Any] = {
        "deployment": {
            **resolved.summary(),
            "gpu_memory_utilization": resolved.spec.gpu_memory_utilization,
            "usd_per_gpu_hour": resolved.usd_per_gpu_hour,
            "profile": profile.name,
            "profile_warning": _profile_warning(
                profile.warning, resolved.spec.weight_dtype, resolved.replica.gpu.name
            ),
        },
        "workload": {
            "name": stats.name,
            "mean_requests_per_s": stats.mean_requests_per_s,
            "peak_requests_per_s": stats.peak_requests_per_s,
            "burstiness": 1.0 / stats.arrival_cv2,
            "mean_input_tokens": stats.mean_prompt_tokens,
            "p99_input_tokens": stats.prompt_p99_tokens,
            "mean_output_tokens": stats.mean_output_tokens,
            "p99_output_tokens": stats.output_p99_tokens,
            "prefix_cache_hit_fraction": stats.prefix_cache_hit_fraction,
        },
    }
    p = pred.to_dict()
    out.update(p)
    out["stability_binding_limit"] = p["binding_limit"]
    if cap is None:
        out.update(
            slo=None,
            slo_feasible=None,
            max_requests_per_s_within_slo=None,
            deployment_max_requests_per_s_within_slo=None,
            capacity=None,
        )
    else:
        cd = cap.to_dict()
        out.update(
            slo=cd["slo"],
            slo_feasible=cd["slo_feasible"],
            max_requests_per_s_within_slo=cd["max_requests_per_s_within_slo"],
            deployment_max_requests_per_s_within_slo=cd["deployment_max_requests_per_s_within_slo"],
            binding_limit=cd["binding_limit"],
            capacity=cd,
        )
    out["closed_loop"] = None if loop is None else loop.to_dict()
    return EvaluateReport.model_validate(out)
