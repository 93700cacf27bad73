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

`plan` (issue 10) joins these when planner/plan lands: `plan(PlanRequest | Mapping, *, base_dir)
-> PlanReport`, delegating to planner.plan.
"""

from __future__ import annotations

import json
import math
import numbers
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from planner.errors import InvalidInput, echo
from planner.schema.inputs import (
    MAX_SIMULATED_REQUESTS,
    AnalyzeRequest,
    CalibrateRequest,
    CatalogRequest,
    EvaluateRequest,
    MeasurementsInput,
    SimulateRequest,
    SloTargets,
    build_workload,
    local_path,
    resolve_trace,
    validate_request,
)

if TYPE_CHECKING:
    # The reports are imported where they are built: a command imports only its own (and
    # `capplan catalog` no latency model).
    from planner.costmodel.fit_data import Measurements
    from planner.costmodel.profile import Endpoint, Profile
    from planner.costmodel.roofline import Replica
    from planner.deployment import Deployment, ResolvedDeployment
    from planner.schema.catalog_reports import CatalogReport
    from planner.schema.plan_report import PlanReport
    from planner.schema.plan_request import PlanRequest
    from planner.schema.reports import (
        AnalyzeReport,
        CalibrateReport,
        EvaluateReport,
        SimulateReport,
    )
    from planner.simulate.requests import RequestArrays
    from planner.slo import Slo
    from planner.workload import Workload

__all__ = [
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

# Requests a simulation samples when the request names neither a count nor a horizon and the
# workload has no bucket series to run once.
DEFAULT_SIMULATED_REQUESTS = 10_000

BaseDir = str | Path | None


# Plan's worker processes: the CLI's --workers range.
MAX_PLAN_WORKERS = 64


def _dir(base_dir: BaseDir) -> Path | None:
    """The `base_dir` keyword as a folder path: None, a str or an os.PathLike, else InvalidInput."""
    if base_dir is None:
        return None
    if not isinstance(base_dir, str | os.PathLike):
        raise InvalidInput(
            "base_dir", f"expected a folder path (str or Path) or None, got {type(base_dir).__name__}"
        )
    try:
        return Path(base_dir)
    except TypeError as exc:  # an os.PathLike whose __fspath__ returns no str
        raise InvalidInput("base_dir", f"not a path: {exc}") from None


def _flag(value: object, name: str) -> bool:
    """A bool keyword: True or False only (a string "no" would read as true)."""
    if not isinstance(value, bool):
        raise InvalidInput(name, f"expected True or False, got {type(value).__name__} {echo(value)}")
    return value


def _workers(value: object) -> int | None:
    """Plan's `workers` keyword: None (the default) or an integer in [1, MAX_PLAN_WORKERS]."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidInput(
            "workers",
            f"expected an integer in [1, {MAX_PLAN_WORKERS}] or None, got {type(value).__name__} {echo(value)}",
        )
    n = int(value)
    if not 1 <= n <= MAX_PLAN_WORKERS:
        raise InvalidInput("workers", f"must be in [1, {MAX_PLAN_WORKERS}], got {n:,}")
    return n


def _model_ref(name: str, base: Path | None) -> str:
    """A catalog name as is; a config.json path taken from `base`."""
    from planner.catalog.models import model_names

    if name.lower() in {n.lower() for n in model_names()}:
        return name
    return local_path(name, base)


def _profile(
    spec: str, gpu_name: str, base: Path | None, field: str = "profile", endpoint: Endpoint = "chat"
) -> Profile:
    from planner.costmodel.profiles import BUILTIN_NAMES, resolve_profile

    if spec not in BUILTIN_NAMES:
        spec = local_path(spec, base)  # read within planner.files.PROFILE's bounds
    return resolve_profile(spec, gpu_name, field, endpoint)


def _resolve(
    deployment: Deployment, profile_spec: str, base: Path | None, endpoint: Endpoint = "chat"
) -> tuple[ResolvedDeployment, Profile]:
    """The deployment on its profile, the front end the workload's `endpoint`'s."""
    from planner.catalog.gpus import get_gpu
    from planner.costmodel.speculative import with_measured_acceptance

    gpu = get_gpu(deployment.gpu, "deployment.gpu")
    profile = _profile(profile_spec, gpu.name, base, endpoint=endpoint)
    model = _model_ref(deployment.model, base)
    if model != deployment.model:
        deployment = deployment.model_copy(update={"model": model})
    if deployment.speculative_decoding is not None:  # acceptance_from: a vllm bench result
        sd = with_measured_acceptance(deployment.speculative_decoding, base, "deployment.speculative_decoding")
        deployment = deployment.model_copy(update={"speculative_decoding": sd})
    return deployment.resolve(profile), profile


# --- evaluate ------------------------------------------------------------------------------------


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
    base = _dir(base_dir)
    slo = _latency_slo(req.slo)
    workload = build_workload(req.workload, "workload", base, closed_loop=True)
    resolved, profile = _resolve(req.deployment, req.profile, base, workload.endpoint)
    loop = None
    if workload.arrivals.closed_loop:
        from planner.closed_loop import solve_workload

        _no_rate_override(req.requests_per_s)
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


def _no_rate_override(requests_per_s: float | None) -> None:
    if requests_per_s is not None:
        raise InvalidInput(
            "requests_per_s",
            "the workload is a closed loop (arrivals.concurrency); give its rate cap as workload.arrivals.requests_per_s",
        )


# --- simulate ------------------------------------------------------------------------------------


def _expected_requests(rate_per_s: float, horizon_s: float, field: str, why: str) -> None:
    """Refuse a horizon whose arrivals would exceed the simulation cap, before sampling them."""
    n = rate_per_s * horizon_s
    if n > MAX_SIMULATED_REQUESTS:
        raise InvalidInput(
            field,
            f"{why} about {n:.3g} requests arrive at {rate_per_s:.4g}/s over {horizon_s:.4g} s; "
            f"a simulation takes at most {MAX_SIMULATED_REQUESTS:,} (give fewer requests or a shorter horizon)",
        )


def _sampled(req: SimulateRequest, workload: Workload) -> tuple[RequestArrays, dict[str, Any]]:
    from planner.simulate.run import scale_workload, workload_requests

    wl = workload if req.requests_per_s is None else scale_workload(workload, req.requests_per_s)
    count, horizon = req.requests, req.horizon_s
    horizon_field = "horizon_s"
    if count is None and horizon is None:
        period = wl.arrivals.period_s
        if period is not None:
            horizon, horizon_field = period, "requests"
        else:
            count = DEFAULT_SIMULATED_REQUESTS
    if horizon is not None:
        why = "one pass over the workload's buckets:" if horizon_field == "requests" else ""
        _expected_requests(wl.arrivals.mean_requests_per_s, horizon, horizon_field, why)
    reqs = workload_requests(wl, req.seed, count=count, horizon_s=horizon)
    if len(reqs) == 0:
        rate = wl.arrivals.mean_requests_per_s
        raise InvalidInput(
            horizon_field,
            f"no request arrives before {horizon:g} s at {rate:.4g}/s"
            + ("; give a number of requests" if horizon_field == "requests" else ""),
        )
    return reqs, {
        "source": "workload",
        "name": wl.name,
        "replay": None,
        "seed": req.seed,
        "mean_requests_per_s_target": wl.arrivals.mean_requests_per_s,
        "burstiness": wl.arrivals.burstiness,
        "trace_requests": None,
        "trace_duration_s": None,
    }


def _replayed(req: SimulateRequest, base: Path | None) -> tuple[RequestArrays, dict[str, Any]]:
    from planner.simulate.run import trace_requests

    assert req.trace is not None
    rate = req.requests_per_s
    replay = req.replay or ("scaled" if rate is not None else "recorded")
    trace = resolve_trace(req.trace, "trace", base)
    if replay == "scaled" and trace.num_requests < 2:
        raise InvalidInput("trace", "needs at least two requests at distinct times to be time-scaled")
    if req.horizon_s is not None:
        mean_rate = rate if rate is not None else trace.num_requests / max(trace.duration_s, 1e-9)
        _expected_requests(mean_rate, req.horizon_s, "horizon_s", "")
    reqs = trace_requests(trace, replay, rate, count=req.requests, horizon_s=req.horizon_s)
    if len(reqs) == 0:
        raise InvalidInput("horizon_s", f"no request of the trace arrives before {req.horizon_s:g} s")
    return reqs, {
        "source": "trace",
        "name": trace.name,
        "replay": replay,
        "seed": None,
        "mean_requests_per_s_target": rate,
        "burstiness": None,
        "trace_requests": trace.num_requests,
        "trace_duration_s": trace.duration_s,
    }


def _ms(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else x * 1e3


def simulate(request: SimulateRequest | Mapping[str, Any], *, base_dir: BaseDir = None) -> SimulateReport:
    """The deployment run through the discrete-event simulator of vLLM V1's scheduler on
    requests sampled from the workload or replayed from a trace. Same request, same report."""
    import numpy as np

    from planner.schema.reports import SimulateReport
    from planner.simulate.requests import within_context
    from planner.simulate.run import engine_config, run

    req = validate_request(SimulateRequest, request)
    req.check()
    base = _dir(base_dir)
    workload = build_workload(req.workload, "workload", base, closed_loop=True)
    closed = workload.arrivals.closed_loop
    if closed:
        _no_rate_override(req.requests_per_s)
        if req.trace is not None:
            raise InvalidInput(
                "trace", "a trace replays its own arrival times; a closed loop samples the workload"
            )
    resolved, profile = _resolve(req.deployment, req.profile, base, workload.endpoint)
    hit = workload.prefix_cache_hit_fraction
    t = req.slo or SloTargets.model_construct()
    targets = {
        "ttft_p99_ms": t.ttft_p99_ms,
        "tpot_p99_ms": t.tpot_p99_ms,
        "e2el_p99_ms": t.e2el_p99_ms,
        "itl_p99_ms": t.itl_p99_ms,
    }
    # The simulator judges goodput per request on TTFT, TPOT and E2E; ITL only on the p99.
    goodput = None
    if t.ttft_p99_ms is not None or t.tpot_p99_ms is not None or t.e2el_p99_ms is not None:
        goodput = t.to_slo()
    loop: dict[str, Any] | None = None
    if closed:
        from planner.closed_loop import simulate_workload

        result, reqs, cut, source, loop = simulate_workload(
            resolved, workload, req.seed, req.requests, req.horizon_s, req.router, goodput
        )
    else:
        reqs, source = _replayed(req, base) if req.trace is not None else _sampled(req, workload)
        where = "trace" if req.trace is not None else "workload"  # what a refused request came from
        # As vLLM serves them: outputs stop at the model's context (the simulator cuts them too).
        try:
            reqs, cut = within_context(reqs, resolved.scheduler.max_model_len)
        except InvalidInput as exc:
            raise InvalidInput(where, exc.reason) from None
        try:
            result = run(resolved, reqs, prefix_cache_hit_fraction=hit, router=req.router, slo=goodput)
        except InvalidInput as exc:
            if exc.field == "requests":  # a request longer than a replica's KV cache
                raise InvalidInput(where, exc.reason) from None
            raise
    cfg = engine_config(resolved, hit)
    arrival = reqs.arrival_s
    span = float(arrival.max() - arrival.min()) if len(reqs) > 1 else 0.0
    source.update(
        requests=len(reqs),
        span_s=span,
        mean_requests_per_s=(len(reqs) - 1) / span if span > 0 else None,
        mean_input_tokens=float(np.mean(reqs.prompt_tokens)),
        mean_output_tokens=float(np.mean(reqs.output_tokens)),
        prefix_cache_hit_fraction=hit,
        outputs_cut_at_context=cut,
    )
    out: dict[str, Any] = {
        "deployment": {
            **resolved.summary(),
            "kv_cache_blocks": cfg.kv_cache_blocks,
            "block_size": cfg.block_size,
            "kv_cache_tokens": cfg.kv_cache_tokens,
            "profile": profile.name,
            "profile_warning": profile.warning,
            "router": req.router,
        },
        "input": source,
    }
    for metric in ("ttft", "itl", "tpot", "e2el"):
        stats = getattr(result, metric)
        for p in ("p50", "p90", "p99"):
            out[f"{metric}_{p}_ms"] = _ms(getattr(stats, f"{p}_s"))
    given = any(v is not None for v in targets.values())
    out["slo"] = targets if given else None

    def met(key: str) -> bool | None:
        target = targets[f"{key}_ms"]
        if target is None:
            return None
        v = out[f"{key}_ms"]
        return v is not None and v <= target

    out["slo_met"] = {k: met(k) for k in ("ttft_p99", "tpot_p99", "e2el_p99", "itl_p99")} if given else None
    out.update(result.to_dict())
    if not req.series:
        out["series"] = {k: [] for k in out["series"]}
    out["closed_loop"] = loop
    return SimulateReport.model_validate(out)


# --- analyze -------------------------------------------------------------------------------------


def _replica(req: AnalyzeRequest, base: Path | None) -> Replica:
    from planner.catalog.gpus import get_gpu
    from planner.catalog.models import get_model
    from planner.costmodel.roofline import Replica

    gpu = get_gpu(req.gpu, "gpu")
    model = get_model(_model_ref(req.model, base), "model")
    return Replica(
        model=model,
        gpu=gpu,
        tp=req.tp,
        weight_dtype=req.weight_dtype,
        kv_dtype=req.kv_dtype,
        profile=_profile(req.profile, gpu.name, base),
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
    r = _replica(req, _dir(base_dir))
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


# --- calibrate -----------------------------------------------------------------------------------


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
    base = _dir(base_dir)
    gpu = get_gpu(req.gpu, "gpu")
    model = get_model(_model_ref(req.model, base), "model")
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


# --- catalog -------------------------------------------------------------------------------------


def catalog(request: CatalogRequest | Mapping[str, Any], *, base_dir: BaseDir = None) -> CatalogReport:
    """What the cost model knows: GPU specs and prices with their sources, or model shapes with
    the sizes computed from config.json (and, for one MoE model, the experts a step reads)."""
    from planner.catalog.gpus import get_gpu, gpu_names
    from planner.catalog.models import get_model, model_names
    from planner.schema.catalog_reports import GpuCatalogReport, ModelCatalogReport

    req = validate_request(CatalogRequest, request)
    base = _dir(base_dir)
    if req.kind == "gpus":
        names = [get_gpu(req.name, "name").name] if req.name else gpu_names()
        return GpuCatalogReport(gpus=[get_gpu(n) for n in names])
    if req.name:
        specs = [get_model(_model_ref(req.name, base), "name")]
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


# --- plan ----------------------------------------------------------------------------------------


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

    base, check, n = _dir(base_dir), _flag(verify, "verify"), _workers(workers)
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
