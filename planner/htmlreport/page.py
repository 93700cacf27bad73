"""The HTML page of `capplan report`: the plan's key numbers, its warnings, the binding
constraints, the simulated check (`--verify`'s figures), the alternatives, the notes, and every
figure inline. Each section has an id (`summary`, `warnings`, `binding`, `simulated`,
`alternatives`, `notes`, and one per figure) and every value is escaped text, so the page is
what the plan says, verbatim."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from planner.schema.plan_report import PlanReport

TITLES = {
    "cost_vs_concurrency": "Cost per 1M output tokens vs concurrency",
    "chunked_prefill": "Chunked prefill: prefill time and worst ITL vs token budget",
    "capacity": "Forecast demand vs provisioned capacity",
    "cost_by_gpu": "Cost by GPU type and bucket",
    "latency_simulated": "Predicted vs simulated latency, each part at its hardest bucket",
    "forecast": "Backtest: forecast vs actual vs planned capacity",
}
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
    "latency_simulated": "TTFT and ITL percentiles of each part of the plan at the bucket it is checked "
    "at: the latency model's prediction (hatched) vs the discrete-event simulation of vLLM V1's "
    "scheduler with the plan's flags (solid), the figures `capplan plan --verify` gives.",
    "forecast": "Per method and quantile of the backtest (`--backtest`): the observed request rate over "
    "each fold's tested span (never part of that fold's fit), the forecast the fold's plan was sized "
    "for, and the requests/s its replicas serve within the SLOs (shaded). Where the actual line rises "
    "above the shaded capacity, the hour is at risk.",
}
STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:1250px;margin:2em auto;padding:0 1em;color:#222}"
    "table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ccc;padding:4px 8px;"
    "text-align:left;vertical-align:top}th{background:#f4f4f4}code{font-size:90%}"
    "figure{margin:0}.files{font-size:85%;color:#666}.warn li{color:#8a4b00}"
    ".met{color:#1a7f37}.missed{color:#c62828;font-weight:bold}"
)


def fmt(x: float | None, unit: str = "", digits: int = 1) -> str:
    if x is None or not math.isfinite(x):
        return "n/a"
    return f"{x:,.{digits}f}{unit}"


def usd(x: float | None, digits: int = 2) -> str:
    return "n/a" if x is None else f"{'-' if x < 0 else ''}${abs(x):,.{digits}f}"


def _rows(rows: Sequence[tuple[str, str]], code: bool = False) -> str:
    return "\n".join(
        f"<tr><th>{html.escape(k)}</th><td>{f'<code>{html.escape(v)}</code>' if code else html.escape(v)}</td></tr>"
        for k, v in rows
    )


def summary(plan: PlanReport) -> str:
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
        ("cost", f"{usd(plan.usd_per_hour_peak)}/h at the peak, {usd(plan.usd_per_month, 0)}/month"),
        (
            "per 1M tokens",
            f"{usd(plan.usd_per_million_output_tokens, 3)} output, "
            f"{usd(plan.usd_per_million_input_tokens, 3)} input (each the whole bill)",
        ),
    ]
    if p is not None:
        rows.append(
            (
                "predicted at the peak",
                f"TTFT p50 {fmt(p.ttft_p50_ms, ' ms')} / p99 {fmt(p.ttft_p99_ms, ' ms')}, "
                f"ITL p50 {fmt(p.itl_p50_ms, ' ms', 2)} / p99 {fmt(p.itl_p99_ms, ' ms', 2)}",
            )
        )
    sim = plan.simulated
    if sim is not None:
        rows.append(
            (
                "simulated (--verify)",
                f"TTFT p99 {fmt(sim.ttft_p99_ms, ' ms')}, ITL p99 {fmt(sim.itl_p99_ms, ' ms', 2)}: SLO "
                + ("met" if sim.slo_met else "MISSED"),
            )
        )
    deps = [
        (
            f"{d.role}: {d.replicas_peak} x {d.gpu} TP{d.tensor_parallel_size}"
            + (f" x PP{d.pipeline_parallel_size}" if d.pipeline_parallel_size else ""),
            d.vllm_command,
        )
        for d in plan.deployments
    ]
    return f'<table id="summary">\n{_rows(rows)}\n{_rows(deps, code=True)}\n</table>'


def _list(section: str, title: str, items: Sequence[str], empty: str, cls: str = "") -> str:
    body = (
        "<ul"
        + (f' class="{cls}"' if cls else "")
        + ">\n"
        + "\n".join(f"<li>{html.escape(x)}</li>" for x in items)
        + "\n</ul>"
        if items
        else f"<p>{html.escape(empty)}</p>"
    )
    return f'<section id="{section}"><h2>{html.escape(title)}</h2>\n{body}</section>'


def _table(section: str, title: str, intro: str, head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "\n".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return (
        f'<section id="{section}"><h2>{html.escape(title)}</h2><p>{html.escape(intro)}</p>\n'
        f"<table>\n<tr>{th}</tr>\n{body}\n</table></section>"
    )


def simulated(plan: PlanReport) -> str:
    sim = plan.simulated
    if sim is None:
        return _list("simulated", "Simulated check", [], "The plan was not simulated.")
    starts = [b.start_s / 3600 for b in plan.buckets]
    rows = []
    for g in sim.groups:
        met = '<span class="met">met</span>' if g.slo_met else '<span class="missed">missed</span>'
        rows.append(
            [
                "<br>".join(
                    f"<code>{html.escape(d)}</code> x {n}"
                    for d, n in zip(g.deployments, g.replicas, strict=True)
                ),
                html.escape(
                    f"b{g.bucket} (from {starts[g.bucket]:g} h), {g.bucket_requests_per_s:,.4g} req/s"
                ),
                html.escape(f"{g.requests_per_s:,.4g} req/s, {g.requests:,} requests"),
                html.escape(f"{fmt(g.predicted_ttft_p99_ms, ' ms')} / {fmt(g.ttft_p99_ms, ' ms')}"),
                html.escape(f"{fmt(g.predicted_itl_p99_ms, ' ms', 2)} / {fmt(g.itl_p99_ms, ' ms', 2)}"),
                html.escape(
                    fmt(g.predicted_slo_fraction, "", 2)
                    if g.predicted_slo_fraction is not None
                    else "unstable"
                ),
                met,
            ]
        )
    intro = (
        f"Each part of the plan at the bucket where the latency model's p99s are worst against the "
        f"targets, in the discrete-event simulator with the plan's flags, the bucket's requests split "
        f"by the plan's shares, vLLM's front-end cost included (seed {sim.seed}, {sim.requests:,} "
        f"requests in all): SLO {'met' if sim.slo_met else 'MISSED'}."
    )
    head = ["part (replicas)", "bucket", "its share", "TTFT p99 model / sim", "ITL p99 model / sim",
            "model p99 / target", "SLO"]  # fmt: skip
    return _table("simulated", "Simulated check (--verify)", intro, head, rows)


def alternatives(plan: PlanReport) -> str:
    rows = []
    for a in plan.alternatives:
        deps = ", ".join(
            f"{d.replicas_peak} x {d.gpu} TP{d.tensor_parallel_size} {d.role}" for d in a.deployments
        )
        delta = (
            ""
            if a.delta_usd_per_month is None
            else f"{'+' if a.delta_usd_per_month >= 0 else ''}{usd(a.delta_usd_per_month, 0)}"
            + ("" if a.delta_fraction is None else f" ({a.delta_fraction:+.1%})")
        )
        rows.append(
            [
                html.escape(a.label),
                "yes" if a.feasible else "no",
                html.escape(usd(a.usd_per_month, 0) if a.usd_per_month is not None else "n/a"),
                html.escape(delta or "n/a"),
                html.escape(deps or "n/a"),
                html.escape(a.reason),
            ]
        )
    if not rows:
        return _list("alternatives", "Alternatives", [], "No alternative of another kind was costed.")
    intro = "The best plan of another kind, costed exactly as a single configuration; the difference is its cost minus the plan's."
    head = ["alternative", "feasible", "$/month", "vs the plan", "deployments at the peak", "why"]
    return _table("alternatives", "Alternatives", intro, head, rows)


def _inline_svg(text: str) -> str:
    """The <svg> element alone (no XML declaration or DOCTYPE), scaled to the page's width."""
    start = text.index("<svg")
    svg = text[start:]
    return svg.replace("<svg ", '<svg style="max-width:100%;height:auto" ', 1)


def page(plan: PlanReport, svgs: Mapping[str, str], figures: Sequence[str]) -> str:
    sections = "\n".join(
        f'<section id="{name}"><h2>{TITLES[name]}</h2><p>{html.escape(CAPTIONS[name])}</p>\n'
        f"<figure>{_inline_svg(svgs[name])}</figure>\n"
        f'<p class="files"><a href="{name}.png">{name}.png</a> · <a href="{name}.svg">{name}.svg</a></p></section>'
        for name in figures
    )
    text = "\n".join(
        [
            summary(plan),
            _list("warnings", "Warnings", plan.warnings, "No warnings.", cls="warn"),
            _list("binding", "Binding constraints", plan.binding_constraints, "None reported."),
            simulated(plan),
            alternatives(plan),
            _list("notes", "Notes", plan.notes, "No notes."),
        ]
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>capplan report: {html.escape(plan.model)}</title><style>{STYLE}</style></head><body>\n"
        f"<h1>capplan plan: {html.escape(plan.model)}</h1>\n{text}\n{sections}\n</body></html>\n"
    )
