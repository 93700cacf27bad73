"""`capplan report FILE.yaml -o DIR`: a plan as pictures. Five figures (PNG and SVG each) and one
self-contained HTML page (the SVGs inline, a table of the plan's key numbers):

- `cost_vs_concurrency`: cost per 1M output tokens against decode concurrency and against the
  tokens/s each user sees (the seed article's first chart), for the plan's model on its GPU and
  TP (`api.analyze` concurrency), the plan's running requests at the peak marked;
- `chunked_prefill`: a long prompt's prefill time and the worst ITL the running decodes see,
  against the token budget (the seed's chunked-prefill chart; `api.analyze` chunked_prefill,
  vLLM V1's budget reading), the plan's budget marked;
- `capacity`: forecast demand, demand with headroom and provisioned capacity per bucket, and the
  GPUs held: reserved and on-demand per GPU type (`api.plan`);
- `cost_by_gpu`: the bill rate per bucket by GPU type, reserved and on-demand (`api.plan`);
- `latency_at_peak`: predicted (latency model) vs simulated (`api.simulate`, a few thousand
  requests at the peak rate) TTFT and ITL percentiles, with the SLOs.

Every number drawn comes from those api results; `build` returns them per figure (what the tests
compare with the api's answers). Output is byte-stable: fixed SVG hash salt, no dates.

    from planner import report
    result = report.write_report(yaml.safe_load(open("examples/chat.yaml")), "out", base_dir="examples")
    result.files, result.figures["chunked_prefill"]["worst_itl_ms"]
"""

from __future__ import annotations

import html
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from planner.errors import Infeasible

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from planner.plan import PlanReport, PlanRequest
    from planner.plan.report import PlanDeployment

__all__ = ["FIGURES", "ReportResult", "build", "render", "write_files", "write_report"]

FIGURES = ("cost_vs_concurrency", "chunked_prefill", "capacity", "cost_by_gpu", "latency_at_peak")
SIMULATED_REQUESTS = 3_000  # enough for a p99 (30 requests above it), a second or two of CPU
SIMULATION_SEED = 0
BUDGETS_TOKENS = (512, 1024, 2048, 4096, 8192, 16384)  # the plan's search grid
MAX_CONCURRENCY_SWEEP = 4096
SVG_HASH_SALT = "capplan"  # fixed ids in the SVGs: same plan, same bytes
DPI = 110
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2")


@dataclass(frozen=True)
class ReportResult:
    plan: PlanReport
    figures: dict[str, dict[str, Any]]
    files: list[Path]


# --- the data, from the api ----------------------------------------------------------------------


def _pick(plan: PlanReport, roles: tuple[str, ...]) -> PlanDeployment:
    """The plan's first deployment of the first role listed that it has."""
    for role in roles:
        for dep in plan.deployments:
            if dep.role == role:
                return dep
    return plan.deployments[0]


def decode_context_tokens(plan: PlanReport) -> int:
    """Mean context of a decoding sequence: its prompt and, on average, half its answer."""
    wl = plan.workload
    return max(1, round(wl.mean_input_tokens + wl.mean_output_tokens / 2))


def running_at_peak(dep: PlanDeployment) -> int:
    at = dep.at_peak
    return 1 if at is None or at.running_requests is None else max(1, round(at.running_requests))


def concurrency_sweep(dep: PlanDeployment) -> list[int]:
    """Powers of two up to twice `max_num_seqs`, with `max_num_seqs` and the plan's running
    requests at the peak."""
    top = min(MAX_CONCURRENCY_SWEEP, max(2 * dep.max_num_seqs, 2))
    out = {2**k for k in range(13) if 2**k <= top}
    return sorted(out | {dep.max_num_seqs, running_at_peak(dep)})


def budget_sweep(dep: PlanDeployment, decodes: int) -> list[int]:
    """The search's budgets and the plan's own, each with room for a prompt chunk beside the
    running decodes (vLLM V1's budget covers the decodes too)."""
    sizes = sorted({*BUDGETS_TOKENS, dep.max_num_batched_tokens})
    return [s for s in sizes if s > decodes]


def _analysis_base(plan: PlanReport, req: PlanRequest, dep: PlanDeployment) -> dict[str, Any]:
    return {
        "model": plan.model,
        "gpu": dep.gpu,
        "tp": dep.tensor_parallel_size,
        "weight_dtype": dep.weight_dtype,
        "kv_dtype": dep.kv_dtype,
        "profile": req.profile,
        "usd_per_gpu_hour": dep.usd_per_gpu_hour,
    }


def _cost_vs_concurrency(plan: PlanReport, req: PlanRequest, base: Path | None) -> dict[str, Any]:
    from planner import api
    from planner.reports import ConcurrencyReport

    dep = _pick(plan, ("colocated", "decode"))
    context = decode_context_tokens(plan)
    request = {
        **_analysis_base(plan, req, dep),
        "concurrency": {
            "context_tokens": context,
            "concurrency": concurrency_sweep(dep),
            "gpu_memory_utilization": dep.gpu_memory_utilization,
        },
    }
    rep = api.analyze(request, base_dir=base)
    assert isinstance(rep, ConcurrencyReport)
    rows = rep.rows
    return {
        "request": request,
        "deployment": dep.id,
        "gpu": dep.gpu,
        "tp": dep.tensor_parallel_size,
        "profile": rep.replica.profile,
        "context_tokens": context,
        "concurrency": [r.concurrency for r in rows],
        "usd_per_million_output_tokens": [r.usd_per_million_output_tokens for r in rows],
        "user_tokens_per_s": [r.user_tokens_per_s for r in rows],
        "fits_in_memory": [r.fits_in_memory for r in rows],
        "kv_max_concurrency": rep.kv_max_concurrency,
        "plan_concurrency": running_at_peak(dep),
        "max_num_seqs": dep.max_num_seqs,
    }


def _chunked_prefill(plan: PlanReport, req: PlanRequest, base: Path | None) -> dict[str, Any]:
    from planner import api
    from planner.reports import ChunkedPrefillReport

    dep = _pick(plan, ("colocated", "prefill"))
    decodes = running_at_peak(_pick(plan, ("colocated", "decode")))
    prompt = max(1, round(plan.workload.p99_input_tokens))
    context = decode_context_tokens(plan)
    sizes = budget_sweep(dep, decodes)
    request = {
        **_analysis_base(plan, req, dep),
        "chunked_prefill": {
            "prompt_tokens": prompt,
            "decodes": decodes,
            "context_tokens": context,
            "reading": "budget",
            "sizes_tokens": sizes,
        },
    }
    rows: list[Any] = []
    profile = None
    if sizes:
        rep = api.analyze(request, base_dir=base)
        assert isinstance(rep, ChunkedPrefillReport)
        rows, profile = rep.rows, rep.replica.profile
    return {
        "request": request,
        "deployment": dep.id,
        "role": dep.role,
        "gpu": dep.gpu,
        "tp": dep.tensor_parallel_size,
        "profile": profile,
        "prompt_tokens": prompt,
        "decodes": decodes,
        "context_tokens": context,
        "budget_tokens": sizes,
        "prompt_prefill_ms": [r.prompt_prefill_ms for r in rows],
        "worst_itl_ms": [r.worst_itl_ms for r in rows],
        "steps": [r.steps for r in rows],
        "plan_budget_tokens": dep.max_num_batched_tokens,
        "ttft_slo_ms": plan.slo.ttft_p99_ms,
        "itl_slo_ms": plan.slo.itl_p99_ms,
    }


def _edges_h(plan: PlanReport) -> list[float]:
    b = plan.buckets
    return [x.start_s / 3600 for x in b] + [(b[-1].start_s + b[-1].duration_s) / 3600]


def provisioned_requests_per_s(plan: PlanReport) -> list[float]:
    """Per bucket, what the replicas held serve within the SLOs: colocated replicas add up; a
    prefill/decode pair serves the smaller of its pools."""
    out = []
    for b in range(len(plan.buckets)):
        cap = {"colocated": 0.0, "prefill": 0.0, "decode": 0.0}
        for dep in plan.deployments:
            cap[dep.role] += dep.replicas_by_bucket[b] * dep.requests_per_s_per_replica
        out.append(cap["colocated"] + min(cap["prefill"], cap["decode"]))
    return out


def _capacity(plan: PlanReport, req: PlanRequest) -> dict[str, Any]:
    demand = [b.requests_per_s for b in plan.buckets]
    return {
        "edges_h": _edges_h(plan),
        "demand_requests_per_s": demand,
        "headroom": req.headroom,
        "target_requests_per_s": [d * (1 + req.headroom) for d in demand],
        "provisioned_requests_per_s": provisioned_requests_per_s(plan),
        "gpus": {
            g.gpu: {"reserved": [g.reserved] * len(demand), "on_demand": list(g.on_demand_by_bucket)}
            for g in plan.gpus
        },
        "gpus_total": [b.gpus for b in plan.buckets],
    }


def _cost_by_gpu(plan: PlanReport) -> dict[str, Any]:
    per_gpu = {}
    for g in plan.gpus:
        reserved_rate = g.reserved * (g.reserved_usd_per_gpu_hour or 0.0)
        per_gpu[g.gpu] = {
            "reserved_usd_per_hour": [reserved_rate] * len(plan.buckets),
            "on_demand_usd_per_hour": [n * g.usd_per_gpu_hour for n in g.on_demand_by_bucket],
        }
    return {
        "edges_h": _edges_h(plan),
        "gpus": per_gpu,
        "usd_per_hour": [b.usd_per_hour for b in plan.buckets],
        "usd_per_month": plan.usd_per_month,
    }


def _simulated_colocated(
    plan: PlanReport, req: PlanRequest, dep: PlanDeployment, base: Path | None, requests: int
) -> dict[str, Any]:
    """The deployment with the plan's flags and replicas, at its share of the peak rate."""
    from planner import api
    from planner.deployment import Deployment
    from planner.inputs import SimulateRequest, SloTargets, build_workload
    from planner.workload import Arrivals

    assert dep.at_peak is not None
    rate = dep.at_peak.requests_per_s_per_replica * dep.replicas_peak
    workload = build_workload(req.workload, "workload", base)
    at_peak = workload.model_copy(
        update={"arrivals": Arrivals(requests_per_s=rate, burstiness=workload.arrivals.burstiness)}
    )
    sim_req = SimulateRequest(
        deployment=Deployment(
            model=plan.model,
            gpu=dep.gpu,
            tp=dep.tensor_parallel_size,
            replicas=dep.replicas_peak,
            weight_dtype=dep.weight_dtype,  # type: ignore[arg-type]
            kv_dtype=dep.kv_dtype,  # type: ignore[arg-type]
            max_num_seqs=dep.max_num_seqs,
            max_num_batched_tokens=dep.max_num_batched_tokens,
            long_prefill_token_threshold=dep.long_prefill_token_threshold,
            gpu_memory_utilization=dep.gpu_memory_utilization,
            usd_per_gpu_hour=dep.usd_per_gpu_hour,
        ),
        workload=at_peak,
        slo=SloTargets(ttft_p99_ms=plan.slo.ttft_p99_ms, itl_p99_ms=plan.slo.itl_p99_ms),
        profile=req.profile,
        seed=SIMULATION_SEED,
        requests=requests,
        series=False,
    )
    sim = api.simulate(sim_req, base_dir=base)
    at = dep.at_peak
    return {
        "label": f"{dep.gpu} TP{dep.tensor_parallel_size} colocated x {dep.replicas_peak}",
        "requests_per_s": rate,
        "predicted": {
            "ttft_ms": {"p50": at.ttft_p50_ms, "p99": at.ttft_p99_ms},
            "itl_ms": {"p50": at.itl_p50_ms, "p99": at.itl_p99_ms},
        },
        "simulated": {
            "ttft_ms": {"p50": sim.ttft_p50_ms, "p90": sim.ttft_p90_ms, "p99": sim.ttft_p99_ms},
            "itl_ms": {"p50": sim.itl_p50_ms, "p90": sim.itl_p90_ms, "p99": sim.itl_p99_ms},
        },
        "simulated_requests": sim.requests,
        "source": "api.simulate",
    }


def _simulated_pools(
    plan: PlanReport, req: PlanRequest, base: Path | None, workers: int | None
) -> dict[str, Any] | None:
    """Prefill/decode pools run their own flags, which a simulate request (one scheduler
    configuration per deployment) cannot say: the plan's own `--verify` simulates them (p99s)."""
    from planner import api

    pools = [d for d in plan.deployments if d.role != "colocated"]
    if not pools:
        return None
    pre = _pick(plan, ("prefill",))
    dec = _pick(plan, ("decode",))
    verified = api.plan(req, base_dir=base, verify=True, workers=workers)
    sim = verified.simulated

    def at(dep: PlanDeployment, key: str) -> float | None:
        return None if dep.at_peak is None else getattr(dep.at_peak, key)

    return {
        "label": f"{pre.gpu} TP{pre.tensor_parallel_size} prefill x {pre.replicas_peak} + "
        f"{dec.gpu} TP{dec.tensor_parallel_size} decode x {dec.replicas_peak}",
        "requests_per_s": plan.workload.peak_requests_per_s,
        "predicted": {
            "ttft_ms": {"p50": at(pre, "ttft_p50_ms"), "p99": at(pre, "ttft_p99_ms")},
            "itl_ms": {"p50": at(dec, "itl_p50_ms"), "p99": at(dec, "itl_p99_ms")},
        },
        "simulated": {
            "ttft_ms": {"p99": None if sim is None else sim.ttft_p99_ms},
            "itl_ms": {"p99": None if sim is None else sim.itl_p99_ms},
        },
        "simulated_requests": None if sim is None else sim.requests,
        "source": "api.plan(verify=True)",
    }


def _latency_at_peak(
    plan: PlanReport, req: PlanRequest, base: Path | None, requests: int, workers: int | None
) -> dict[str, Any]:
    groups = [
        _simulated_colocated(plan, req, d, base, requests)
        for d in plan.deployments
        if d.role == "colocated" and d.at_peak is not None and d.replicas_peak > 0
    ]
    pools = _simulated_pools(plan, req, base, workers)
    if pools is not None:
        groups.append(pools)
    return {"groups": groups, "ttft_slo_ms": plan.slo.ttft_p99_ms, "itl_slo_ms": plan.slo.itl_p99_ms}


def build(
    request: PlanRequest | Mapping[str, Any],
    *,
    base_dir: str | Path | None = None,
    workers: int | None = None,
    simulated_requests: int = SIMULATED_REQUESTS,
) -> tuple[PlanReport, dict[str, dict[str, Any]]]:
    """The plan and, per figure, the numbers it draws (all from api results). An infeasible plan
    has nothing to draw: Infeasible with its reason."""
    from planner import api
    from planner.plan.request import parse_plan_request

    req = parse_plan_request(request)
    base = None if base_dir is None else Path(base_dir)
    plan = api.plan(req, base_dir=base, workers=workers)
    if not plan.deployments:
        why = plan.infeasibility.reason if plan.infeasibility is not None else "no deployment"
        raise Infeasible(f"the plan is {plan.status}: {why}; nothing to draw")
    figures = {
        "cost_vs_concurrency": _cost_vs_concurrency(plan, req, base),
        "chunked_prefill": _chunked_prefill(plan, req, base),
        "capacity": _capacity(plan, req),
        "cost_by_gpu": _cost_by_gpu(plan),
        "latency_at_peak": _latency_at_peak(plan, req, base, simulated_requests, workers),
    }
    return plan, figures


# --- the pictures --------------------------------------------------------------------------------


def _figure(width_in: float = 11.0, height_in: float = 4.4, rows: int = 1, cols: int = 2) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width_in, height_in), dpi=DPI)
    FigureCanvasAgg(fig)  # Agg: files only, no display, no pyplot state
    axes = fig.subplots(rows, cols, squeeze=False)
    # Fixed margins (in inches, so every figure size gets the same): a constrained layout would
    # cost a second draw per save.
    fig.subplots_adjust(
        left=0.75 / width_in,
        right=1 - 0.2 / width_in,
        bottom=0.55 / height_in,
        top=1 - (0.75 if cols > 1 else 0.35) / height_in,
        wspace=0.2,
        hspace=0.45,
    )
    return fig, axes


def _usd_axis(ax: Any) -> None:
    from matplotlib.ticker import FuncFormatter, NullFormatter

    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"${v:,.2f}" if v < 100 else f"${v:,.0f}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _log2_axis(ax: Any) -> None:
    """Powers of two written as plain numbers (1, 4, 16, ..., 2,048), no mathtext."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def _draw_cost_vs_concurrency(d: dict[str, Any], model: str) -> Figure:
    fig, ((left, right),) = _figure()
    n, usd, tps, fits = (
        d["concurrency"],
        d["usd_per_million_output_tokens"],
        d["user_tokens_per_s"],
        d["fits_in_memory"],
    )
    ok = [i for i, f in enumerate(fits) if f]
    over = [i for i, f in enumerate(fits) if not f]
    plan_i = n.index(d["plan_concurrency"])
    for ax, x, xlabel in (
        (left, n, "concurrent decoding sequences per replica"),
        (right, tps, "tokens/s each user sees (1 / step time)"),
    ):
        ax.plot(
            [x[i] for i in ok], [usd[i] for i in ok], "o-", color=COLORS[0], label="$ per 1M output tokens"
        )
        if over:
            ax.plot(
                [x[i] for i in over],
                [usd[i] for i in over],
                "o",
                color="0.6",
                mfc="none",
                label="KV cache does not fit",
            )
        ax.plot(
            [x[plan_i]],
            [usd[plan_i]],
            "*",
            ms=16,
            color=COLORS[3],
            label=f"plan at the peak: {n[plan_i]} running",
            zorder=5,
        )
        if ax is left:
            _log2_axis(ax)
        ax.set_yscale("log")
        _usd_axis(ax)
        ax.minorticks_off()  # a tick label's layout is the costliest part of a save
        ax.set_xlabel(xlabel)
        ax.set_ylabel("GPU cost per 1M output tokens (USD)")
        ax.grid(True, alpha=0.3)
    left.axvline(
        d["kv_max_concurrency"], ls=":", color="0.4", label=f"KV cache limit: {d['kv_max_concurrency']}"
    )
    left.set_title("Cost vs concurrency")
    right.set_title("Cost vs per-user speed")
    left.legend(fontsize=8)
    right.legend(fontsize=8)
    fig.suptitle(
        f"{model} on {d['gpu']} x TP{d['tp']}: decode-only roofline at {d['context_tokens']:,}-token mean "
        f"context (profile {d['profile']})",
        fontsize=11,
    )
    return fig


def _draw_chunked_prefill(d: dict[str, Any], model: str) -> Figure:
    fig, ((left, right),) = _figure()
    x = d["budget_tokens"]
    if not x:
        left.text(
            0.5,
            0.5,
            f"no budget leaves room beside {d['decodes']} decodes",
            ha="center",
            transform=left.transAxes,
        )
    left.plot(x, d["prompt_prefill_ms"], "o-", color=COLORS[0], label="prompt prefill time")
    right.plot(x, d["worst_itl_ms"], "s-", color=COLORS[1], label="worst ITL of the running decodes")
    if d["ttft_slo_ms"] is not None:
        left.axhline(
            d["ttft_slo_ms"], ls="--", color=COLORS[3], label=f"TTFT p99 SLO {d['ttft_slo_ms']:g} ms"
        )
    if d["itl_slo_ms"] is not None:
        right.axhline(d["itl_slo_ms"], ls="--", color=COLORS[3], label=f"ITL p99 SLO {d['itl_slo_ms']:g} ms")
    for ax in (left, right):
        ax.axvline(
            d["plan_budget_tokens"], ls=":", color="0.3", label=f"plan's budget {d['plan_budget_tokens']:,}"
        )
        _log2_axis(ax)
        ax.minorticks_off()
        ax.set_xlabel("token budget per step, max_num_batched_tokens (tokens)")
        ax.set_ylabel("milliseconds")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    left.set_title(f"Prefill time of a {d['prompt_tokens']:,}-token prompt (p99 input)")
    right.set_title(f"Worst inter-token latency of {d['decodes']} running decodes")
    pool = " (the prefill pool's GPU, as if it also decoded)" if d["role"] == "prefill" else ""
    fig.suptitle(
        f"{model} on {d['gpu']} x TP{d['tp']}{pool}: chunked prefill, vLLM V1 budget (decodes first), "
        f"profile {d['profile']}",
        fontsize=11,
    )
    return fig


Layer = tuple[str, Sequence[float], str, str | None]  # label, values per bucket, color, hatch


def _stairs_stack(ax: Any, edges: Sequence[float], layers: Sequence[Layer]) -> None:
    """Stacked step areas (one value per bucket), bottom to top."""
    bottom = [0.0] * (len(edges) - 1)
    for label, values, color, hatch in layers:
        top = [b + v for b, v in zip(bottom, values, strict=True)]
        ax.stairs(top, edges, baseline=bottom, fill=True, color=color, alpha=0.75, hatch=hatch, label=label)
        bottom = top


def _hours_axis(ax: Any, edges: list[float]) -> None:
    from matplotlib.ticker import MultipleLocator

    ax.set_xlim(edges[0], edges[-1])
    if edges[-1] - edges[0] >= 72:
        ax.xaxis.set_major_locator(MultipleLocator(24))  # days
    ax.set_xlabel("time from the forecast's start (hours)")
    ax.grid(True, alpha=0.3)


def _draw_capacity(d: dict[str, Any]) -> Figure:
    fig, ((top,), (bottom,)) = _figure(11.0, 6.4, rows=2, cols=1)
    edges = d["edges_h"]
    top.stairs(d["provisioned_requests_per_s"], edges, fill=True, color=COLORS[2], alpha=0.3,
               label="provisioned: replicas x capacity within the SLOs")  # fmt: skip
    top.stairs(d["target_requests_per_s"], edges, color=COLORS[1], ls="--", lw=1.5,
               label=f"demand + {d['headroom']:.0%} headroom (sized for)")  # fmt: skip
    top.stairs(d["demand_requests_per_s"], edges, color=COLORS[0], lw=2, label="forecast demand")
    top.set_ylabel("requests/s")
    top.set_ylim(0, 1.35 * max([*d["provisioned_requests_per_s"], *d["target_requests_per_s"], 1e-3]))
    top.set_title("Forecast demand vs provisioned capacity")
    _hours_axis(top, edges)
    top.legend(fontsize=8, loc="upper right")
    layers: list[Layer] = []
    for i, (gpu, g) in enumerate(d["gpus"].items()):
        color = COLORS[i % len(COLORS)]
        if any(g["reserved"]):
            layers.append((f"{gpu} reserved", [float(x) for x in g["reserved"]], color, "//"))
        layers.append((f"{gpu} on-demand", [float(x) for x in g["on_demand"]], color, None))
    _stairs_stack(bottom, edges, layers)
    bottom.set_ylabel("GPUs held")
    bottom.set_ylim(0, max(d["gpus_total"]) * 1.35 + 0.5)
    bottom.yaxis.get_major_locator().set_params(integer=True)
    bottom.set_title("GPUs per bucket: reserved (billed all horizon) and on-demand")
    _hours_axis(bottom, edges)
    bottom.legend(fontsize=8, loc="upper right")
    return fig


def _draw_cost_by_gpu(d: dict[str, Any]) -> Figure:
    fig, ((ax,),) = _figure(11.0, 4.4, rows=1, cols=1)
    edges = d["edges_h"]
    layers: list[Layer] = []
    for i, (gpu, g) in enumerate(d["gpus"].items()):
        color = COLORS[i % len(COLORS)]
        if any(g["reserved_usd_per_hour"]):
            layers.append((f"{gpu} reserved", g["reserved_usd_per_hour"], color, "//"))
        layers.append((f"{gpu} on-demand", g["on_demand_usd_per_hour"], color, None))
    _stairs_stack(ax, edges, layers)
    ax.stairs(d["usd_per_hour"], edges, color="black", lw=1, label="total")
    ax.set_ylabel("USD per hour")
    ax.set_ylim(0, max(d["usd_per_hour"]) * 1.35)
    _usd_axis(ax)
    month = "" if d["usd_per_month"] is None else f": ${d['usd_per_month']:,.0f} per month (730 h)"
    ax.set_title(f"Cost by GPU type and bucket{month}")
    _hours_axis(ax, edges)
    ax.legend(fontsize=8, loc="upper right")
    return fig


def _draw_latency_at_peak(d: dict[str, Any]) -> Figure:
    fig, ((left, right),) = _figure()
    pcts = ("p50", "p90", "p99")
    for ax, key, name, slo in (
        (left, "ttft_ms", "Time to first token", d["ttft_slo_ms"]),
        (right, "itl_ms", "Inter-token latency", d["itl_slo_ms"]),
    ):
        series = []
        several = len(d["groups"]) > 1
        for g in d["groups"]:
            n = g["simulated_requests"]
            tail = f": {g['label']}" if several else ""
            series.append((f"latency model{tail}", g["predicted"][key], "model"))
            series.append((f"simulation, {n:,} requests{tail}", g["simulated"][key], "sim"))
        width = 0.8 / max(len(series), 1)
        for j, (label, values, kind) in enumerate(series):
            xs = [
                i + (j - (len(series) - 1) / 2) * width
                for i, p in enumerate(pcts)
                if values.get(p) is not None
            ]
            ys = [values[p] for p in pcts if values.get(p) is not None]
            color = COLORS[(j // 2) % len(COLORS)]
            bars = ax.bar(xs, ys, width, color=color, alpha=0.45 if kind == "model" else 0.9,
                          hatch="//" if kind == "model" else None, edgecolor=color, label=label)  # fmt: skip
            ax.bar_label(bars, fmt="%.1f", fontsize=7, padding=2)
        if slo is not None:
            ax.axhline(slo, ls="--", color=COLORS[3], label=f"p99 SLO {slo:g} ms")
        drawn = [v for _, values, _ in series for v in values.values() if v is not None]
        ax.set_xticks(range(len(pcts)), [p.upper() for p in pcts])
        ax.set_xlabel("percentile (the latency model gives p50 and p99)")
        ax.set_ylabel("milliseconds")
        ax.set_ylim(0, 1.45 * max([*drawn, slo or 0.0, 1e-3]))  # room for the legend above the bars
        ax.set_title(name)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    what = d["groups"][0]["label"] if len(d["groups"]) == 1 else "the plan's deployments"
    fig.suptitle(f"At the peak bucket, {what}: latency model (hatched) vs simulation (solid)", fontsize=11)
    return fig


def render(figures: Mapping[str, dict[str, Any]], model: str) -> dict[str, Figure]:
    """One matplotlib Figure per figure's data (Agg: no display needed)."""
    import matplotlib

    with matplotlib.rc_context(_rc()):
        return _render(figures, model)


def _render(figures: Mapping[str, dict[str, Any]], model: str) -> dict[str, Figure]:
    return {
        "cost_vs_concurrency": _draw_cost_vs_concurrency(figures["cost_vs_concurrency"], model),
        "chunked_prefill": _draw_chunked_prefill(figures["chunked_prefill"], model),
        "capacity": _draw_capacity(figures["capacity"]),
        "cost_by_gpu": _draw_cost_by_gpu(figures["cost_by_gpu"]),
        "latency_at_peak": _draw_latency_at_peak(figures["latency_at_peak"]),
    }


# --- the files -----------------------------------------------------------------------------------

CAPTIONS = {
    "cost_vs_concurrency": "GPU cost per 1M output tokens of one replica decoding at each concurrency "
    "(roofline with the plan's profile; no prefill), against concurrency and against the speed each "
    "user sees. The star is the plan's running requests per replica at the peak.",
    "chunked_prefill": "A p99-long prompt arriving while the plan's peak number of sequences decode: "
    "its prefill time and the worst step (ITL) the others see, per token budget. The dotted line is "
    "the plan's max_num_batched_tokens.",
    "capacity": "Per forecast bucket: demand, demand with headroom (what the plan sizes for) and "
    "the requests/s the held replicas serve within the SLOs; below, the GPUs held, reserved (hatched) "
    "and on-demand.",
    "cost_by_gpu": "The bill rate per bucket, stacked by GPU type: reserved GPUs (hatched, billed all "
    "horizon) and on-demand GPUs.",
    "latency_at_peak": "TTFT and ITL percentiles at the peak bucket: the latency model's prediction "
    "(hatched) vs the discrete-event simulation of vLLM V1's scheduler with the plan's flags (solid).",
}


def _rc() -> Any:
    """SVG ids from a fixed salt and text kept as text (smaller, searchable pages)."""
    return {"svg.hashsalt": SVG_HASH_SALT, "svg.fonttype": "none", "font.size": 9}


def _save(fig: Figure, out: Path, name: str) -> tuple[Path, Path, str]:
    png, svg = out / f"{name}.png", out / f"{name}.svg"
    fig.savefig(png, format="png", metadata={"Software": None})
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    svg.write_text(text, encoding="utf-8")
    return png, svg, text


def _fmt(x: float | None, unit: str = "", digits: int = 1) -> str:
    if x is None or not math.isfinite(x):
        return "n/a"
    return f"{x:,.{digits}f}{unit}"


def _usd(x: float | None, digits: int = 2) -> str:
    return "n/a" if x is None else f"${x:,.{digits}f}"


def _table(plan: PlanReport) -> str:
    s, p = plan.slo, plan.predicted
    rows = [
        ("status", plan.status),
        ("model", plan.model),
        (
            "SLO",
            ", ".join(
                f"{n} p99 ≤ {v:g} ms"
                for n, v in (("TTFT", s.ttft_p99_ms), ("ITL", s.itl_p99_ms), ("E2E", s.e2e_p99_ms))
                if v is not None
            ),
        ),
        (
            "peak demand",
            f"{plan.workload.peak_requests_per_s:,.4g} req/s over {plan.workload.buckets} bucket(s), "
            f"{plan.workload.horizon_hours:g} h",
        ),
        ("GPUs at the peak", str(plan.gpu_count_peak)),
        ("cost", f"{_usd(plan.usd_per_hour_peak)}/h at the peak, {_usd(plan.usd_per_month, 0)}/month"),
        (
            "per 1M tokens",
            f"{_usd(plan.usd_per_million_output_tokens, 3)} output, "
            f"{_usd(plan.usd_per_million_input_tokens, 3)} input (each the whole bill)",
        ),
    ]
    if p is not None:
        rows.append(
            (
                "predicted at the peak",
                f"TTFT p50 {_fmt(p.ttft_p50_ms, ' ms')} / p99 {_fmt(p.ttft_p99_ms, ' ms')}, "
                f"ITL p50 {_fmt(p.itl_p50_ms, ' ms', 2)} / p99 {_fmt(p.itl_p99_ms, ' ms', 2)}",
            )
        )
    for d in plan.deployments:
        rows.append(
            (
                f"{d.role}: {d.replicas_peak} x {d.gpu} TP{d.tensor_parallel_size}",
                f"<code>{html.escape(d.vllm_command)}</code>",
            )
        )
    body = "\n".join(
        f"<tr><th>{html.escape(k)}</th><td>{v if v.startswith('<code>') else html.escape(v)}</td></tr>"
        for k, v in rows
    )
    return f"<table>\n{body}\n</table>"


def _inline_svg(text: str) -> str:
    """The <svg> element alone (no XML declaration or DOCTYPE), scaled to the page's width."""
    start = text.index("<svg")
    svg = text[start:]
    return svg.replace("<svg ", '<svg style="max-width:100%;height:auto" ', 1)


def _page(plan: PlanReport, svgs: Mapping[str, str]) -> str:
    titles = {
        "cost_vs_concurrency": "Cost per 1M output tokens vs concurrency",
        "chunked_prefill": "Chunked prefill: prefill time and worst ITL vs token budget",
        "capacity": "Forecast demand vs provisioned capacity",
        "cost_by_gpu": "Cost by GPU type and bucket",
        "latency_at_peak": "Predicted vs simulated latency at the peak",
    }
    sections = "\n".join(
        f'<section id="{name}"><h2>{titles[name]}</h2><p>{html.escape(CAPTIONS[name])}</p>\n'
        f"<figure>{_inline_svg(svgs[name])}</figure>\n"
        f'<p class="files"><a href="{name}.png">{name}.png</a> · <a href="{name}.svg">{name}.svg</a></p></section>'
        for name in FIGURES
    )
    style = (
        "body{font-family:system-ui,sans-serif;max-width:1250px;margin:2em auto;padding:0 1em;color:#222}"
        "table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ccc;padding:4px 8px;"
        "text-align:left;vertical-align:top}th{background:#f4f4f4}code{font-size:90%}"
        "figure{margin:0}.files{font-size:85%;color:#666}"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>capplan report: {html.escape(plan.model)}</title><style>{style}</style></head><body>\n"
        f"<h1>capplan plan: {html.escape(plan.model)}</h1>\n{_table(plan)}\n{sections}\n</body></html>\n"
    )


def write_files(plan: PlanReport, figures: Mapping[str, dict[str, Any]], out_dir: str | Path) -> list[Path]:
    """Draw `figures` (from `build`) and write `<figure>.png`, `<figure>.svg` and `index.html`."""
    import matplotlib

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    svgs = {}
    with matplotlib.rc_context(_rc()):
        for name, fig in render(figures, plan.model).items():
            png, svg, text = _save(fig, out, name)
            files += [png, svg]
            svgs[name] = text
    page = out / "index.html"
    page.write_text(_page(plan, svgs), encoding="utf-8")
    files.append(page)
    return files


def write_report(
    request: PlanRequest | Mapping[str, Any],
    out_dir: str | Path,
    *,
    base_dir: str | Path | None = None,
    workers: int | None = None,
    simulated_requests: int = SIMULATED_REQUESTS,
) -> ReportResult:
    """Plan, draw and write `<figure>.png`, `<figure>.svg` and `index.html` into `out_dir`."""
    plan, data = build(request, base_dir=base_dir, workers=workers, simulated_requests=simulated_requests)
    return ReportResult(plan=plan, figures=data, files=write_files(plan, data, out_dir))
