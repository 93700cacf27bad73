"""`capplan plan FILE.yaml`: the cheapest deployment that meets TTFT/ITL p99 SLOs for a traffic
forecast: GPU type and count, TP, `max_num_seqs`, `max_num_batched_tokens`, colocated or
disaggregated, replicas per bucket, the exact `vllm serve` flags, the cost and the reasons.

The file is a PlanRequest (planner/schema/plan_request.py, docs/plan.md, examples/chat.yaml). Flags
override the file's SLOs; `planner.api.plan` answers. `--json` prints the PlanReport; `--verify`
adds a simulation of each part at its hardest bucket; `--emit vllm-args|k8s|bench` prints what a pipeline applies
or the benchmark that checks one replica
(planner/export.py, docs/report.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from planner.commands import common as c

# The exit status a pipeline reads (planner/commands/common.py, README.md, docs/plan.md).
NO_PLAN_STATUSES = ("INFEASIBLE", "NO_SOLUTION")
EXIT_CODES_HELP = """exit status:
  0  a plan (status OPTIMAL or FEASIBLE)
  3  no plan: status INFEASIBLE (no deployment within the candidates meets the SLOs; the
     report names the constraint and the nearest relaxation) or NO_SOLUTION (the time limit
     came before any plan; a longer --time-limit-s may find one). The report (--json or the
     summary) is printed all the same; --emit has nothing to emit and says so on stderr
  2  bad input (one line on stderr naming the flag or the file's field, and the reason)
  1  internal error (a bug: the traceback on stderr), or a --server that failed
stdout carries the answer alone: what solvers or libraries print while planning goes to stderr."""

PLAN_SLO_FLAGS = (
    ("--slo-ttft-p99-ms", "ttft_p99_ms", "TTFT p99 target (overrides the file's)"),
    ("--slo-itl-p99-ms", "itl_p99_ms", "ITL p99 target (overrides the file's)"),
    ("--slo-e2e-p99-ms", "e2e_p99_ms", "end-to-end p99 target (colocated candidates only)"),
)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "plan",
        help="the cheapest deployment (GPU, count, TP, vLLM flags, disaggregation) meeting TTFT/ITL p99 SLOs",
        description="The cheapest deployment (GPU type and count, TP, vLLM flags, colocated or "
        "disaggregated, replicas per bucket) that meets the TTFT/ITL p99 SLOs for a traffic forecast.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", metavar="FILE", help="YAML (or JSON) with model:, slo:, workload: and optional "
                   "candidates:, pricing:, inventory:, headroom:, solver:")  # fmt: skip
    for flag, _, help_ in PLAN_SLO_FLAGS:
        p.add_argument(flag, help=help_)
    p.add_argument("--verify", action="store_true", help="simulate each part at its hardest bucket")
    p.add_argument("--time-limit-s", help="MILP time limit in seconds (overrides solver.time_limit_s)")
    p.add_argument("--workers", help="processes answering capacity questions (default 2; 1: in-process)")
    p.add_argument(
        "--server",
        metavar="HOST:PORT",
        help="plan on a `capplan serve` instead (same output); comma-separated addresses are balanced; "
        "$CAPPLAN_AUTH_TOKEN: the bearer token of a server that wants one",
    )
    c.add_profile_flag(p, "auto")
    c.add_json_flag(p)
    p.add_argument(
        "--emit",
        choices=("vllm-args", "k8s", "bench"),
        help="instead of the summary: the `vllm serve` line per deployment, Kubernetes manifests "
        "(Deployment + Service each) for the vLLM servers, or the `vllm bench serve` line that checks one "
        "replica of each deployment at its peak load",
    )
    p.add_argument(
        "--scenarios",
        metavar="SET",
        help='a forecast scenario set, one plan each, printed as each finishes: "quantiles=0.5,0.9,0.99 '
        'growth=0%%,10%%/month" (the workload must be {history, forecast}; docs/forecast.md)',
    )
    p.set_defaults(handler=_plan)


def request_from_args(args: argparse.Namespace) -> tuple[dict[str, Any], c.Flags]:
    from planner.schema.inputs import read_mapping_file

    data = read_mapping_file(args.file, "model:, slo: and workload:")
    flags = c.Flags()
    for flag, key, _ in PLAN_SLO_FLAGS:
        flags.put(data, f"slo.{key}", getattr(args, flag[2:].replace("-", "_")), flag)
    flags.put(data, "solver.time_limit_s", args.time_limit_s, "--time-limit-s")
    flags.put(data, "profile", c.cwd_path(args.profile, ("theoretical", "calibrated", "auto")), "--profile")
    return data, flags


def _workers(text: str | None) -> int | None:
    from planner.errors import InvalidInput, echo

    if text is None:
        return None
    try:
        n = int(text)
    except ValueError:
        raise InvalidInput("--workers", f"must be an integer in [1, 64], got {echo(text)}") from None
    if not 1 <= n <= 64:
        raise InvalidInput("--workers", f"must be an integer in [1, 64], got {n}")
    return n


def _plan(args: argparse.Namespace) -> int:
    """Plan (here or on a `capplan serve`), print, and return the exit status (EXIT_CODES_HELP)."""
    data, flags = request_from_args(args)
    workers = _workers(args.workers)
    if args.emit is not None and args.json:
        from planner.errors import InvalidInput

        raise InvalidInput("--emit", "prints manifests or command lines, not JSON: drop --json")
    if args.scenarios is not None:
        from planner.commands import plan_scenarios

        return plan_scenarios.run(args, data, flags, workers, render, NO_PLAN_STATUSES)
    with flags.named(), c.computing():
        if args.server:
            report = _remote_plan(args.server, data, Path(args.file).parent, args.verify)
        else:
            from planner import api

            report = api.plan(data, base_dir=Path(args.file).parent, verify=args.verify, workers=workers)
    if args.emit is not None:
        from planner.export import emit

        sys.stdout.write(emit(report, args.emit))  # no plan: Infeasible, exit 3 (planner/cli.py)
        return c.EXIT_OK
    c.emit(report, args.json, render)
    return c.EXIT_NO_PLAN if report.status in NO_PLAN_STATUSES else c.EXIT_OK


def _remote_plan(server: str, data: dict[str, Any], base: Path, verify: bool) -> Any:
    """The same request answered by the service (docs/service.md). The service reads no files, so
    a trace CSV beside the plan file is read here and sent as the workload it makes. A server that
    wants a bearer token gets $CAPPLAN_AUTH_TOKEN."""
    import os

    from planner.client import PlannerClient
    from planner.schema.history_workload import HistoryWorkload
    from planner.schema.inputs import TraceWorkload, build_workload
    from planner.schema.plan_request import parse_plan_request
    from planner.traces import BUILTIN_TRACES

    request = parse_plan_request(data)
    wl = request.workload
    if (isinstance(wl, TraceWorkload) and wl.trace not in BUILTIN_TRACES) or (
        isinstance(wl, HistoryWorkload) and wl.history.path is not None
    ):  # a history file is read and forecast here, as a trace CSV is
        request = request.model_copy(update={"workload": build_workload(wl, "workload", base)})
    token = os.environ.get("CAPPLAN_AUTH_TOKEN")  # for a server started with --auth-token-file
    with PlannerClient([a.strip() for a in server.split(",")], timeout_s=None, auth_token=token) as client:
        return client.plan(request, verify=verify)


# --- the readable summary ------------------------------------------------------------------------


def _usd(x: float | None, digits: int = 2) -> str:
    return "n/a" if x is None else f"${x:,.{digits}f}"


def _ms(x: float | None, digits: int = 1) -> str:
    return "n/a" if x is None else f"{x:,.{digits}f} ms"


def _targets(slo: dict[str, Any]) -> str:
    parts = [
        f"{name} p99 <= {slo[key]:g} ms"
        for name, key in (("TTFT", "ttft_p99_ms"), ("ITL", "itl_p99_ms"), ("E2E", "e2e_p99_ms"))
        if slo[key] is not None
    ]
    return ", ".join(parts)


def _shape(d: dict[str, Any]) -> str:
    tp = f" TP{d['tensor_parallel_size']}" if d["tensor_parallel_size"] > 1 else ""
    pp = d.get("pipeline_parallel_size") or 1
    if pp > 1:  # a replica of TP x PP GPUs (planner.costmodel.multinode)
        tp += f" x PP{pp} ({d['tensor_parallel_size'] * pp} GPUs a replica)"
    return f"{d['gpu']}{tp} {d['role']}"


def _replicas(reps: list[int]) -> str:
    lo, hi = min(reps), max(reps)
    if len(reps) == 1 or lo == hi:
        return f"{hi}"
    return f"{lo}-{hi} over {len(reps)} buckets"


def render(d: dict[str, Any]) -> str:
    wl = d["workload"]
    lines = [
        f"{d['model']}: {_targets(d['slo'])}",
        f"workload{' ' + wl['name'] if wl['name'] else ''}: mean {wl['mean_requests_per_s']:.4g} req/s, peak "
        f"{wl['peak_requests_per_s']:.4g} (bucket {wl['peak_bucket']} of {wl['buckets']}, {wl['horizon_hours']:g} h), "
        f"burstiness k={wl['burstiness']:.3g}; input mean {wl['mean_input_tokens']:,.0f} / p99 "
        f"{wl['p99_input_tokens']:,.0f} tokens, output mean {wl['mean_output_tokens']:,.0f} / p99 "
        f"{wl['p99_output_tokens']:,.0f}",
        "",
    ]
    status = d["status"]
    if status in ("INFEASIBLE", "NO_SOLUTION"):
        inf = d["infeasibility"]
        lines += [f"status {status}: {inf['reason']}", f"  constraint: {inf['constraint']}"]
        if inf["relaxation"]:
            lines.append(f"  nearest feasible: {inf['relaxation']}")
        lines += _tail(d)
        return "\n".join(lines)
    gap = "" if d["solver"]["gap"] is None else f" (gap {d['solver']['gap']:.2%})"
    lines += [
        f"status {status}{gap}: {_usd(d['usd_per_month'], 0)}/month, {_usd(d['usd_per_hour_peak'])}/h at the peak, "
        f"{d['gpu_count_peak']} GPU{'s' if d['gpu_count_peak'] != 1 else ''} at the peak",
        f"  {_usd(d['usd_per_million_output_tokens'], 3)} per 1M output tokens, "
        f"{_usd(d['usd_per_million_input_tokens'], 3)} per 1M input tokens (each the whole bill)",
        "",
        "deployments:",
    ]
    for dep in d["deployments"]:
        lines += _deployment_lines(dep)
    for g in d["gpus"]:
        reserved = f"{g['reserved']} reserved + " if g["reserved"] else ""
        lines.append(
            f"  {g['gpu']}: {reserved}{_replicas(g['on_demand_by_bucket'])} on-demand "
            f"(${g['usd_per_gpu_hour']:g}/GPU-h"
            + (f", reserved ${g['reserved_usd_per_gpu_hour']:g}" if g["reserved_usd_per_gpu_hour"] else "")
            + (f", inventory {g['inventory']}" if g["inventory"] is not None else "")
            + ")"
        )
    lines += _checked_lines(d["predicted"], d["simulated"])
    lines += ["", d["disaggregation_reason"]]
    if d["binding_constraints"]:
        lines.append("binding:")
        lines += [f"  - {b}" for b in d["binding_constraints"]]
    lines += _alternative_lines(d["alternatives"])
    lines += _tail(d)
    return "\n".join(lines)


def _deployment_lines(dep: dict[str, Any]) -> list[str]:
    """One deployment: replicas and shape, its vLLM command, its figures at the peak."""
    lines = [
        f"  {_replicas(dep['replicas_by_bucket'])} x {_shape(dep)}: {dep['requests_per_s_per_replica']:.4g} req/s "
        f"per replica within the SLOs ({dep['binding_limit']} binds), profile {dep['profile']}",
        f"    {dep['vllm_command']}",
    ]
    at = dep["at_peak"]
    if at is not None:
        parts = [f"{at['requests_per_s_per_replica']:.4g} req/s per replica"]
        if at["ttft_p99_ms"] is not None:
            parts.append(f"TTFT p50 {_ms(at['ttft_p50_ms'])} / p99 {_ms(at['ttft_p99_ms'])}")
        if at["itl_p99_ms"] is not None:
            parts.append(f"ITL p50 {_ms(at['itl_p50_ms'], 2)} / p99 {_ms(at['itl_p99_ms'], 2)}")
        if at["kv_cache_usage"] is not None:
            parts.append(f"KV {at['kv_cache_usage']:.0%}")
        lines.append("    at the peak: " + ", ".join(parts))
    lines += c.lora_lines(dep.get("lora"), "    ")
    lines += c.expert_parallel_lines(dep.get("expert_parallel"), "    ")
    lines += c.speculative_lines(dep.get("speculative_decoding"), "    ")
    return lines


def _checked_lines(pr: dict[str, Any] | None, sim: dict[str, Any] | None) -> list[str]:
    """The latency model's figures at the peak, and the simulator's check (`--verify`)."""
    lines = []
    if pr is not None:
        lines += [
            "",
            f"predicted at the peak ({pr['requests_per_s']:.4g} req/s): TTFT p50 {_ms(pr['ttft_p50_ms'])} / p99 "
            f"{_ms(pr['ttft_p99_ms'])}, ITL p50 {_ms(pr['itl_p50_ms'], 2)} / p99 {_ms(pr['itl_p99_ms'], 2)}",
        ]
    if sim is not None:
        lines.append(
            f"simulated, each part at its hardest bucket ({sim['requests']:,} requests, seed {sim['seed']}): "
            f"TTFT p99 {_ms(sim['ttft_p99_ms'])}, ITL p99 {_ms(sim['itl_p99_ms'], 2)}: "
            + ("SLO met" if sim["slo_met"] else "SLO MISSED")
        )
        for g in sim["groups"]:
            lines.append(
                f"  {' + '.join(f'{n} x {i}' for i, n in zip(g['deployments'], g['replicas'], strict=True))} "
                f"at b{g['bucket']} ({g['requests_per_s']:.4g} of {g['bucket_requests_per_s']:.4g} req/s): "
                f"TTFT p99 {_ms(g['ttft_p99_ms'])}, ITL p99 {_ms(g['itl_p99_ms'], 2)}: "
                + ("met" if g["slo_met"] else "MISSED")
            )
    return lines


def _alternative_lines(alternatives: list[dict[str, Any]]) -> list[str]:
    """What the nearest other choices cost against the plan (or why each has no answer)."""
    if not alternatives:
        return []
    lines = ["alternatives:"]
    for a in alternatives:
        if not a["feasible"]:
            lines.append(f"  {'n/a':>16}  {a['label']}: {a['reason']}")
            continue
        frac = "" if a["delta_fraction"] is None else f" ({a['delta_fraction']:+.0%})"
        shape = " + ".join(
            f"{x['replicas_peak']} x {_shape(x)} (budget {x['max_num_batched_tokens']}, {x['max_num_seqs']} seqs)"
            for x in a["deployments"]
        )
        lines.append(f"  {a['delta_usd_per_month']:+,.0f} $/month{frac}  {a['label']}: {shape}")
    return lines


def _tail(d: dict[str, Any]) -> list[str]:
    lines = []
    if d["warnings"]:
        lines.append("warnings:")
        lines += [f"  - {w}" for w in d["warnings"]]
    s = d["search"]
    lines.append(
        f"search: {s['configurations_evaluated']} configurations evaluated, {s['candidates']} candidates, "
        f"{s['candidates_pruned_dominated']} dominated, {s['candidates_in_milp']} in the MILP"
        + ("" if not s["unfit"] else f"; {len(s['unfit'])} GPU x TP shapes do not fit")
    )
    profiles = ", ".join(f"{p['gpu']} {p['name']}" for p in d["profiles"])
    lines.append(f"profiles: {profiles}")
    # the defaults the request left unsaid (planner/plan/defaults.py): which GPUs, whose prices
    lines += [n for n in d["notes"] if n.startswith(("candidates: ", "prices: "))]
    return lines
