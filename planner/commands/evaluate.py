"""`capplan evaluate FILE.yaml`: latency, KV use and cost of a deployment under a workload, and
with SLO flags the highest arrival rate that meets them.

The file holds `deployment:`, `workload:` (and optionally `slo:`); see planner/latency/inputs.py
and examples/. JSON keys are a public contract (docs/latency.md).
"""

from __future__ import annotations

import argparse
from typing import Any

from planner.commands import common as c


def register(sub: Any) -> None:
    p = sub.add_parser(
        "evaluate",
        help="p50/p99 TTFT and ITL, KV use and cost under load; with SLOs, the max rate within them",
    )
    p.add_argument(
        "file", metavar="FILE", help="YAML (or JSON) with deployment:, workload: and optional slo:"
    )
    p.add_argument("--slo-ttft-p99-ms", help="TTFT p99 target: adds the capacity answer")
    p.add_argument("--slo-itl-p99-ms", help="ITL p99 target: adds the capacity answer")
    p.add_argument(
        "--requests-per-s",
        help="evaluate at this arrival rate (whole deployment) instead of the workload's",
    )
    c.add_profile_flag(p, "auto")
    c.add_json_flag(p)
    p.set_defaults(handler=_evaluate)


def _slo(args: argparse.Namespace, from_file: Any) -> Any:
    from planner.latency import Slo

    ttft = (
        None if args.slo_ttft_p99_ms is None else c.positive_float("--slo-ttft-p99-ms", args.slo_ttft_p99_ms)
    )
    itl = None if args.slo_itl_p99_ms is None else c.positive_float("--slo-itl-p99-ms", args.slo_itl_p99_ms)
    if ttft is None and itl is None:
        return from_file
    base_ttft = None if from_file is None else from_file.ttft_p99_s
    base_itl = None if from_file is None else from_file.itl_p99_s
    return Slo(
        ttft_p99_s=base_ttft if ttft is None else ttft / 1e3,
        itl_p99_s=base_itl if itl is None else itl / 1e3,
    )


def _evaluate(args: argparse.Namespace) -> None:
    from planner.costmodel.profile import resolve_profile
    from planner.latency import LatencyModel, WorkloadStats
    from planner.latency.inputs import load_evaluate_file

    inp = load_evaluate_file(args.file)
    slo = _slo(args, inp.slo)
    rate = None if args.requests_per_s is None else c.positive_float("--requests-per-s", args.requests_per_s)
    from planner.catalog.gpus import get_gpu

    gpu = get_gpu(inp.deployment.gpu, "deployment.gpu")
    profile = resolve_profile(args.profile, gpu.name, "--profile")
    resolved = inp.deployment.resolve(profile)
    stats = WorkloadStats.of(inp.workload)
    model = LatencyModel(resolved, stats)
    pred = model.evaluate(rate)
    cap = model.capacity(slo) if slo is not None else None
    data = _to_json(inp, resolved, stats, profile.name, pred, cap)
    c.emit(data, args.json, _render)


def _to_json(inp: Any, r: Any, st: Any, profile: str, pred: Any, cap: Any) -> dict[str, Any]:
    d = inp.deployment
    out: dict[str, Any] = {
        "deployment": {
            **r.summary(),
            "gpu_memory_utilization": d.gpu_memory_utilization,
            "usd_per_gpu_hour": r.usd_per_gpu_hour,
            "profile": profile,
        },
        "workload": {
            "name": st.name,
            "mean_requests_per_s": st.mean_requests_per_s,
            "peak_requests_per_s": st.peak_requests_per_s,
            "burstiness": 1.0 / st.arrival_cv2,
            "mean_input_tokens": st.mean_prompt_tokens,
            "p99_input_tokens": st.prompt_p99_tokens,
            "mean_output_tokens": st.mean_output_tokens,
            "p99_output_tokens": st.output_p99_tokens,
            "prefix_cache_hit_fraction": st.prefix_cache_hit_fraction,
        },
    }
    p = pred.to_dict()
    out.update(p)
    out["stability_binding_limit"] = p["binding_limit"]
    if cap is None:
        out.update(
            {
                "slo": None,
                "slo_feasible": None,
                "max_requests_per_s_within_slo": None,
                "deployment_max_requests_per_s_within_slo": None,
                "capacity": None,
            }
        )
    else:
        cd = cap.to_dict()
        out.update(
            {
                "slo": cd["slo"],
                "slo_feasible": cd["slo_feasible"],
                "max_requests_per_s_within_slo": cd["max_requests_per_s_within_slo"],
                "deployment_max_requests_per_s_within_slo": cd["deployment_max_requests_per_s_within_slo"],
                "binding_limit": cd["binding_limit"],
                "capacity": cd,
            }
        )
    return out


def _f(x: float | None, digits: int = 1, unit: str = "") -> str:
    return "n/a" if x is None else f"{x:,.{digits}f}{unit}"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 100:.1f}%"


def _render(d: dict[str, Any]) -> str:
    dep, wl = d["deployment"], d["workload"]
    tp = f" x TP{dep['tp']}" if dep["tp"] > 1 else ""
    if dep["mode"] == "disaggregated":
        shape = f"disaggregated: {dep['prefill_replicas']} prefill + {dep['decode_replicas']} decode replicas"
    else:
        shape = f"{dep['replicas']} replica{'s' if dep['replicas'] != 1 else ''}, colocated"
    lines = [
        f"{dep['model']} on {dep['gpu']}{tp}, {shape}; profile {dep['profile']}",
        f"  max_num_batched_tokens {dep['max_num_batched_tokens']}, max_num_seqs {dep['max_num_seqs']}, "
        f"KV cache {d['kv_cache_tokens']:,} tokens per replica",
        f"workload{' ' + wl['name'] if wl['name'] else ''}: mean {wl['mean_requests_per_s']:.3g} req/s "
        f"(peak {wl['peak_requests_per_s']:.3g}), burstiness k={wl['burstiness']:.3g}; "
        f"input mean {wl['mean_input_tokens']:,.0f} / p99 {wl['p99_input_tokens']:,.0f} tokens, "
        f"output mean {wl['mean_output_tokens']:,.0f} / p99 {wl['p99_output_tokens']:,.0f}",
        "",
        f"at {d['requests_per_s']:.4g} req/s ({d['requests_per_s_per_replica']:.4g} per replica): "
        + ("stable" if d["stable"] else "UNSTABLE"),
    ]
    if d["stable"]:
        lines += [
            f"  TTFT p50 {_f(d['ttft_p50_ms'])} ms   p99 {_f(d['ttft_p99_ms'])} ms   "
            f"(queue wait mean {_f(d['queue_wait_mean_ms'], 2)} ms, prefill chunk {_f(d['prefill_chunk_tokens'], 0)} tokens)",
        ]
        if d["itl_p50_ms"] is None:
            lines.append("  no decode steps: every answer is one token")
        else:
            lines.append(
                f"  ITL  p50 {_f(d['itl_p50_ms'], 2)} ms   p99 {_f(d['itl_p99_ms'], 2)} ms   "
                f"({_pct(d['mixed_step_fraction'])} of steps carry a prefill chunk; "
                f"worst case {_f(d['itl_worst_case_ms'])} ms)"
            )
        lines.append(
            f"  decode concurrency {_f(d['decode_concurrency'])} per replica, KV cache {_pct(d['kv_cache_usage'])} used, "
            f"preemption risk {_pct(d['preemption_risk'])}"
        )
    lines += [
        f"  utilization {_pct(d['gpu_utilization'])} of the max stable rate "
        f"({d['deployment_max_stable_requests_per_s']:.4g} req/s, {d['max_stable_requests_per_s']:.4g} per replica; "
        f"limit {d['stability_binding_limit']}), MFU {_pct(d['mfu'])}",
        f"  cost ${_f(d['usd_per_hour'], 2)}/h: ${_f(d['usd_per_million_output_tokens'], 3)} per 1M output tokens, "
        f"${_f(d['usd_per_million_input_tokens'], 3)} per 1M input tokens"
        + (
            f" (mean load: ${d['mean_load_usd_per_million_output_tokens']:,.3f} per 1M output)"
            if d["mean_load_usd_per_million_output_tokens"] is not None
            else ""
        ),
    ]
    fl = d["floors"]
    lines.append(
        f"  floors (idle): TTFT p99 {_f(fl['ttft_p99_ms'])} ms"
        + (f", ITL p99 {_f(fl['itl_p99_ms'], 2)} ms" if fl["itl_p99_ms"] is not None else "")
        + (
            f", a step with a full chunk {_f(fl['itl_mixed_step_ms'])} ms"
            if fl["itl_mixed_step_ms"] is not None
            else ""
        )
    )
    cap = d["capacity"]
    if cap is not None:
        slo = cap["slo"]
        targets = ", ".join(
            f"{name} p99 {v:g} ms"
            for name, v in (("TTFT", slo["ttft_p99_ms"]), ("ITL", slo["itl_p99_ms"]))
            if v is not None
        )
        lines.append("")
        if cap["slo_feasible"]:
            lines.append(
                f"SLO {targets}: at most {cap['max_requests_per_s_within_slo']:.4g} req/s per replica "
                f"({cap['deployment_max_requests_per_s_within_slo']:.4g} for the deployment); binding: {cap['binding_limit']}"
            )
        else:
            lines.append(f"SLO {targets}: not achievable: {cap['reason']}")
    if d["buckets"]:
        unstable = [b for b in d["buckets"] if not b["stable"]]
        worst = max((b["ttft_p99_ms"] or 0.0 for b in d["buckets"]), default=0.0)
        lines.append(
            f"buckets: {len(d['buckets'])}, {len(unstable)} unstable; worst stable-bucket TTFT p99 {worst:,.1f} ms"
        )
    if d["notes"]:
        lines.append("notes:")
        lines += [f"  - {n}" for n in d["notes"]]
    return "\n".join(lines)
