"""`capplan report FILE.yaml -o DIR`: a plan as pictures. Five figures (PNG and SVG each) and one
self-contained HTML page (the SVGs inline; the plan's key numbers, warnings, binding constraints,
simulated check and alternatives: planner/htmlreport/page.py):

- `cost_vs_concurrency`: cost per 1M output tokens against decode concurrency and against the
  tokens/s each user sees (the seed article's first chart), for the plan's model on its GPU and
  TP (`api.analyze` concurrency), the plan's running requests at the peak marked;
- `chunked_prefill`: a long prompt's prefill time and the worst ITL the running decodes see,
  against the token budget (the seed's chunked-prefill chart; `api.analyze` chunked_prefill,
  vLLM V1's budget reading), the plan's budget marked;
- `capacity`: forecast demand, demand with headroom and provisioned capacity per bucket, and the
  GPUs held: reserved and on-demand per GPU type (`api.plan`);
- `cost_by_gpu`: the bill rate per bucket by GPU type, reserved and on-demand (`api.plan`);
- `latency_simulated`: predicted (latency model) vs simulated TTFT and ITL percentiles of each
  part of the plan at its hardest bucket: the plan's own `simulated` (`api.plan(verify=True)`,
  the figures `capplan plan --verify` prints), not a simulation of the report's own.

Every number drawn comes from those api results; `build` returns them per figure (what the tests
compare with the api's answers). Output is byte-stable: fixed SVG hash salt, no dates. The
drawing is planner/htmlreport/draw.py.

    from planner.htmlreport import figures
    result = figures.write_report(yaml.safe_load(open("examples/chat.yaml")), "out", base_dir="examples")
    result.files, result.figures["chunked_prefill"]["worst_itl_ms"]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from planner.errors import Infeasible
from planner.htmlreport.draw import DPI, rc, render, save_figure

if TYPE_CHECKING:
    from planner.schema.plan_report import PlanDeployment, PlanReport
    from planner.schema.plan_request import PlanRequest

__all__ = ["DPI", "FIGURES", "ReportResult", "build", "render", "write_files", "write_report"]

FIGURES = ("cost_vs_concurrency", "chunked_prefill", "capacity", "cost_by_gpu", "latency_simulated")
BUDGETS_TOKENS = (512, 1024, 2048, 4096, 8192, 16384)  # the plan's search grid
MAX_CONCURRENCY_SWEEP = 4096


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
    from planner.schema.reports import ConcurrencyReport

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
    from planner.schema.reports import ChunkedPrefillReport

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


def _group_label(plan: PlanReport, deployments: list[str], replicas: list[int]) -> str:
    by_id = {d.id: d for d in plan.deployments}
    parts = [
        f"{by_id[i].gpu} TP{by_id[i].tensor_parallel_size}"
        + (f" x PP{by_id[i].pipeline_parallel_size}" if by_id[i].pipeline_parallel_size else "")
        + f" {by_id[i].role} x {n}"
        for i, n in zip(deployments, replicas, strict=True)
    ]
    return " + ".join(parts)


def _latency_simulated(plan: PlanReport) -> dict[str, Any]:
    """The plan's own `simulated` groups (`--verify`): each part at its hardest bucket, the
    latency model's p50/p99 there beside the simulated p50/p90/p99."""
    sim = plan.simulated
    assert sim is not None
    groups = []
    for g in sim.groups:
        label = _group_label(plan, g.deployments, g.replicas)
        groups.append(
            {
                "label": f"{label}, bucket {g.bucket} ({g.requests_per_s:,.4g} req/s)",
                "deployments": list(g.deployments),
                "bucket": g.bucket,
                "requests_per_s": g.requests_per_s,
                "predicted": {
                    "ttft_ms": {"p50": g.predicted_ttft_p50_ms, "p99": g.predicted_ttft_p99_ms},
                    "itl_ms": {"p50": g.predicted_itl_p50_ms, "p99": g.predicted_itl_p99_ms},
                },
                "simulated": {
                    "ttft_ms": {"p50": g.ttft_p50_ms, "p90": g.ttft_p90_ms, "p99": g.ttft_p99_ms},
                    "itl_ms": {"p50": g.itl_p50_ms, "p90": g.itl_p90_ms, "p99": g.itl_p99_ms},
                },
                "simulated_requests": g.requests,
                "slo_met": g.slo_met,
                "source": "api.plan(verify=True)",
            }
        )
    return {"groups": groups, "ttft_slo_ms": plan.slo.ttft_p99_ms, "itl_slo_ms": plan.slo.itl_p99_ms}


def build(
    request: PlanRequest | Mapping[str, Any],
    *,
    base_dir: str | Path | None = None,
    workers: int | None = None,
) -> tuple[PlanReport, dict[str, dict[str, Any]]]:
    """The plan (with `verify`: its simulated check) and, per figure, the numbers it draws (all
    from api results). An infeasible plan has nothing to draw: Infeasible with its reason."""
    from planner import api
    from planner.schema.plan_request import parse_plan_request

    req = parse_plan_request(request)
    base = None if base_dir is None else Path(base_dir)
    plan = api.plan(req, base_dir=base, workers=workers, verify=True)
    if not plan.deployments:
        why = plan.infeasibility.reason if plan.infeasibility is not None else "no deployment"
        raise Infeasible(f"the plan is {plan.status}: {why}; nothing to draw")
    figures = {
        "cost_vs_concurrency": _cost_vs_concurrency(plan, req, base),
        "chunked_prefill": _chunked_prefill(plan, req, base),
        "capacity": _capacity(plan, req),
        "cost_by_gpu": _cost_by_gpu(plan),
        "latency_simulated": _latency_simulated(plan),
    }
    return plan, figures


# --- the files -----------------------------------------------------------------------------------


def write_files(
    plan: PlanReport,
    figures: Mapping[str, dict[str, Any]],
    out_dir: str | Path,
    forecast: Mapping[str, Any] | None = None,
) -> list[Path]:
    """Draw `figures` (from `build`) and write `<figure>.png`, `<figure>.svg` and `index.html`;
    with `forecast` (planner/htmlreport/forecast_figure.py's `figure_data`) its figure too."""
    import matplotlib

    from planner.htmlreport import forecast_figure
    from planner.htmlreport.page import page as html_page

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    svgs = {}
    with matplotlib.rc_context(rc()):
        for name, fig in render(figures, plan.model).items():
            png, svg, text = save_figure(fig, out, name)
            files += [png, svg]
            svgs[name] = text
    names: tuple[str, ...] = FIGURES
    if forecast is not None:
        written, svgs[forecast_figure.NAME] = forecast_figure.write(dict(forecast), out)
        files += written
        names = (*FIGURES, forecast_figure.NAME)
    page = out / "index.html"
    page.write_text(html_page(plan, svgs, names), encoding="utf-8")
    files.append(page)
    return files


def write_report(
    request: PlanRequest | Mapping[str, Any],
    out_dir: str | Path,
    *,
    base_dir: str | Path | None = None,
    workers: int | None = None,
) -> ReportResult:
    """Plan, draw and write `<figure>.png`, `<figure>.svg` and `index.html` into `out_dir`
    (checked to be a folder that can be written, or created, before planning: InvalidInput
    naming out_dir)."""
    from planner.files import check_output_dir

    check_output_dir(out_dir, "out_dir")
    plan, data = build(request, base_dir=base_dir, workers=workers)
    return ReportResult(plan=plan, figures=data, files=write_files(plan, data, out_dir))
