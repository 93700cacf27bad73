"""`capplan evaluate FILE.yaml`: latency, KV use and cost of a deployment under a workload, and
with an SLO the highest arrival rate that meets it.

The file is an `EvaluateRequest` (planner/schema/inputs.py; examples/): `deployment:`, `workload:`, and
optionally `slo:`, `profile:`, `requests_per_s:`. Flags override the file; `planner.api.evaluate`
answers; JSON keys are a public contract (docs/latency.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path
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
    c.add_slo_flags(p, [flag for flag, _, _ in c.SLO_FLAGS])
    p.add_argument(
        "--requests-per-s",
        help="evaluate at this arrival rate (whole deployment) instead of the workload's; "
        "a workload without arrivals: Poisson at this rate",
    )
    c.add_concurrency_flag(p)
    c.add_price_flag(p)
    c.add_profile_flag(p, "auto")
    c.add_json_flag(p)
    p.set_defaults(handler=_evaluate)


def request_from_args(args: argparse.Namespace) -> tuple[dict[str, Any], c.Flags]:
    """The file's mapping with the flags laid over it, and which fields the flags set."""
    from planner.schema.inputs import read_mapping_file

    data = read_mapping_file(args.file)
    flags = c.Flags()
    c.put_slo_flags(args, data, flags)
    flags.put(data, "requests_per_s", args.requests_per_s, "--requests-per-s")
    flags.put(data, "workload.arrivals.concurrency", args.concurrency, "--concurrency")
    flags.put(data, "deployment.usd_per_gpu_hour", args.usd_per_gpu_hour, "--usd-per-gpu-hour")
    flags.put(data, "profile", c.cwd_path(args.profile, ("theoretical", "calibrated", "auto")), "--profile")
    return data, flags


def _evaluate(args: argparse.Namespace) -> None:
    from planner import api

    data, flags = request_from_args(args)
    with flags.named(), c.computing():
        report = api.evaluate(data, base_dir=Path(args.file).parent)
    c.emit(report, args.json, render)


def _f(x: float | None, digits: int = 1, unit: str = "") -> str:
    return "n/a" if x is None else f"{x:,.{digits}f}{unit}"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 100:.1f}%"


def _closed_loop_lines(loop: dict[str, Any] | None) -> list[str]:
    """What a closed loop runs at and why (planner/closed_loop.py)."""
    if loop is None:
        return []
    cap = loop["rate_cap_requests_per_s"]
    why = {
        "concurrency": "the clients keep it there (Little's law on the open-loop model)",
        "rate_cap": "requests come due no faster than the rate cap",
        "capacity": "SATURATED: the clients want more than the stable capacity, which it runs at",
    }[loop["limited_by"]]
    w = loop["mean_time_in_system_ms"]
    return [
        f"closed loop: {loop['concurrency']:,} clients"
        + (f", rate cap {cap:.4g} req/s" if cap is not None else "")
        + f": {loop['requests_per_s']:.4g} req/s; {why}",
        f"  mean time in system {_f(w)} ms, {_f(loop['in_flight'])} requests in flight",
    ]


def render(d: dict[str, Any]) -> str:
    dep, wl = d["deployment"], d["workload"]
    lines = [
        f"{c.deployment_line(dep)}; profile {dep['profile']}",
        *c.warning_lines(dep["profile_warning"]),
        f"  max_num_batched_tokens {dep['max_num_batched_tokens']}, max_num_seqs {dep['max_num_seqs']}, "
        f"KV cache {d['kv_cache_tokens']:,} tokens per replica",
        *c.lora_lines(dep.get("lora")),
        *c.expert_parallel_lines(dep.get("expert_parallel")),
        *c.speculative_lines(dep.get("speculative_decoding")),
        f"workload{' ' + wl['name'] if wl['name'] else ''}: mean {wl['mean_requests_per_s']:.3g} req/s "
        f"(peak {wl['peak_requests_per_s']:.3g}), burstiness k={wl['burstiness']:.3g}; "
        f"input mean {wl['mean_input_tokens']:,.0f} / p99 {wl['p99_input_tokens']:,.0f} tokens, "
        f"output mean {wl['mean_output_tokens']:,.0f} / p99 {wl['p99_output_tokens']:,.0f}",
        *_closed_loop_lines(d["closed_loop"]),
        "",
        f"at {d['requests_per_s']:.4g} req/s ({d['requests_per_s_per_replica']:.4g} per replica): "
        + ("stable" if d["stable"] else "UNSTABLE"),
    ]
    if d["stable"]:
        lines += _latency_lines(d)
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
    if d["capacity"] is not None:
        lines += ["", _capacity_line(d["capacity"])]
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


def _latency_lines(d: dict[str, Any]) -> list[str]:
    """TTFT, ITL and the decode batch at the evaluated rate (a stable one)."""
    lines = [
        f"  TTFT p50 {_f(d['ttft_p50_ms'])} ms   p99 {_f(d['ttft_p99_ms'])} ms   "
        f"(queue wait mean {_f(d['queue_wait_mean_ms'], 2)} ms, prefill chunk {_f(d['prefill_chunk_tokens'], 0)} tokens)",
    ]
    if d["itl_p50_ms"] is None:
        lines.append("  no decode steps: every answer is one token")
    else:
        lines.append(
            f"  ITL  p50 {_f(d['itl_p50_ms'], 2)} ms   p99 {_f(d['itl_p99_ms'], 2)} ms   "
            f"({_pct(d['mixed_step_fraction'])} of steps carry prompt tokens; "
            f"worst case {_f(d['itl_worst_case_ms'])} ms)"
        )
    lines.append(
        f"  decode concurrency {_f(d['decode_concurrency'])} per replica, KV cache {_pct(d['kv_cache_usage'])} used, "
        f"preemption risk {_pct(d['preemption_risk'])}"
    )
    return lines


def _capacity_line(cap: dict[str, Any]) -> str:
    """The most requests/s within the SLO's targets, or why none."""
    slo = cap["slo"]
    targets = ", ".join(
        f"{name} p99 {v:g} ms"
        for name, v in (("TTFT", slo["ttft_p99_ms"]), ("ITL", slo["itl_p99_ms"]))
        if v is not None
    )
    if not cap["slo_feasible"]:
        return f"SLO {targets}: not achievable: {cap['reason']}"
    return (
        f"SLO {targets}: at most {cap['max_requests_per_s_within_slo']:.4g} req/s per replica "
        f"({cap['deployment_max_requests_per_s_within_slo']:.4g} for the deployment); binding: {cap['binding_limit']}"
    )
