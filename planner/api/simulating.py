"""`simulate`: the discrete-event simulator on requests sampled from a workload or replayed
from a trace, or on a closed loop of clients."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from planner.api.resolving import BaseDir, base_folder, no_rate_override, resolve_deployment
from planner.errors import InvalidInput
from planner.schema.inputs import (
    MAX_SIMULATED_REQUESTS,
    SimulateRequest,
    SloTargets,
    build_workload,
    resolve_trace,
    validate_request,
)

if TYPE_CHECKING:
    from planner.deployment import ResolvedDeployment
    from planner.schema.reports import SimulateReport
    from planner.simulate.metrics import SimResult
    from planner.simulate.requests import RequestArrays
    from planner.slo import Slo
    from planner.workload import Workload

# Requests a simulation samples when the request names neither a count nor a horizon and the
# workload has no bucket series to run once.
DEFAULT_SIMULATED_REQUESTS = 10_000


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
    from planner.schema.reports import SimulateReport
    from planner.simulate.run import engine_config

    req = validate_request(SimulateRequest, request)
    req.check()
    base = base_folder(base_dir)
    workload = build_workload(req.workload, "workload", base, closed_loop=True)
    closed = workload.arrivals.closed_loop
    if closed:
        no_rate_override(req.requests_per_s)
        if req.trace is not None:
            raise InvalidInput(
                "trace", "a trace replays its own arrival times; a closed loop samples the workload"
            )
    resolved, profile = resolve_deployment(req.deployment, req.profile, base, workload.endpoint)
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
        result, reqs, cut, source = _open_loop(req, base, workload, resolved, goodput)
    cfg = engine_config(resolved, hit)
    source.update(_requests_figures(reqs), prefix_cache_hit_fraction=hit, outputs_cut_at_context=cut)
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
    out["slo_met"] = _slo_met(out, targets) if given else None
    out.update(result.to_dict())
    if not req.series:
        out["series"] = {k: [] for k in out["series"]}
    out["closed_loop"] = loop
    return SimulateReport.model_validate(out)


def _open_loop(
    req: SimulateRequest, base: Path | None, workload: Workload, resolved: ResolvedDeployment, goodput: Slo | None
) -> tuple[SimResult, RequestArrays, int, dict[str, Any]]:
    """Requests sampled from the workload or replayed from the trace, cut at the model's context
    as vLLM serves them, through the simulator: (result, requests, answers cut, source)."""
    from planner.simulate.requests import within_context
    from planner.simulate.run import run

    reqs, source = _replayed(req, base) if req.trace is not None else _sampled(req, workload)
    where = "trace" if req.trace is not None else "workload"  # what a refused request came from
    try:
        reqs, cut = within_context(reqs, resolved.scheduler.max_model_len)
    except InvalidInput as exc:
        raise InvalidInput(where, exc.reason) from None
    try:
        hit = workload.prefix_cache_hit_fraction
        result = run(resolved, reqs, prefix_cache_hit_fraction=hit, router=req.router, slo=goodput)
    except InvalidInput as exc:
        if exc.field == "requests":  # a request longer than a replica's KV cache
            raise InvalidInput(where, exc.reason) from None
        raise
    return result, reqs, cut, source


def _requests_figures(reqs: RequestArrays) -> dict[str, Any]:
    """What was simulated: requests, their span, rate and mean lengths."""
    import numpy as np

    arrival = reqs.arrival_s
    span = float(arrival.max() - arrival.min()) if len(reqs) > 1 else 0.0
    return {
        "requests": len(reqs),
        "span_s": span,
        "mean_requests_per_s": (len(reqs) - 1) / span if span > 0 else None,
        "mean_input_tokens": float(np.mean(reqs.prompt_tokens)),
        "mean_output_tokens": float(np.mean(reqs.output_tokens)),
    }


def _slo_met(out: dict[str, Any], targets: dict[str, float | None]) -> dict[str, bool | None]:
    """Each p99 target given: whether the simulated p99 met it (None: no target)."""

    def met(key: str) -> bool | None:
        target = targets[f"{key}_ms"]
        if target is None:
            return None
        v = out[f"{key}_ms"]
        return v is not None and v <= target

    return {k: met(k) for k in ("ttft_p99", "tpot_p99", "e2el_p99", "itl_p99")}
