"""`capplan simulate FILE.yaml`: the deployment of an evaluate file run through the discrete-event
simulator of vLLM V1's scheduler (planner/simulate), on requests sampled from the file's workload
or on a replayed trace: TTFT/ITL/TPOT/E2E percentiles, goodput, preemptions, KV and queue peaks,
per-minute series.

The file is a `SimulateRequest` (planner/schema/inputs.py): the evaluate file, plus optionally the
simulation's own keys; flags override it. Requests:

* default: sampled from `workload:` with `--seed` (arrivals from its rate or buckets and gamma
  gaps, lengths from its distributions); `--requests N` of them, or all arrivals before
  `--horizon-s S`; neither: one pass over the bucket series for bucketed arrivals, else 10,000
  requests. `--requests-per-s R` rescales the workload's mean rate (bucket shape kept).
* `--trace NAME_OR_CSV`: a trace replayed (`--replay recorded`, the default, keeps its
  timestamps; `--replay scaled` time-scales it to `--requests-per-s R`); the whole trace once,
  or `--requests N` / `--horizon-s S` of it, tiled end to end if longer than the trace.

Same file, flags and seed: byte-identical output. JSON keys: docs/simulate.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from planner.commands import common as c

# Request fields only a flag sets on the command line: errors about them name the flag.
_SIMULATION_FLAGS = ("seed", "requests", "horizon_s", "trace", "replay", "router", "requests_per_s")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "simulate",
        help="discrete-event simulation of the deployment (vLLM V1 scheduler) on sampled or replayed requests",
    )
    p.add_argument(
        "file", metavar="FILE", help="YAML (or JSON) with deployment:, workload: and optional slo:"
    )
    p.add_argument("--seed", help="seed for sampling the workload (default 0)")
    p.add_argument(
        "--requests",
        help="number of requests (default: one pass over bucketed arrivals, else 10000; a trace: all of it)",
    )
    p.add_argument("--horizon-s", help="simulate the arrivals before this time instead of a count")
    p.add_argument("--trace", help="replay a trace: a built-in name (azure-conv-2023, ...) or a CSV path")
    p.add_argument("--replay", help="recorded (default: the trace's own timestamps) or scaled")
    p.add_argument(
        "--requests-per-s",
        help="mean arrival rate (whole deployment): scales the workload, or the trace with --replay scaled; "
        "a workload without arrivals: Poisson at this rate",
    )
    c.add_concurrency_flag(p)
    p.add_argument("--router", help="round_robin (default) or least_outstanding_tokens")
    c.add_slo_flags(p, [flag for flag, _, _ in c.SLO_FLAGS])
    c.add_profile_flag(p, "auto")
    p.add_argument("--series", action="store_true", help="print the per-minute series (always in --json)")
    c.add_json_flag(p)
    p.set_defaults(handler=_simulate)


def request_from_args(args: argparse.Namespace) -> tuple[dict[str, Any], c.Flags]:
    """The file's mapping with the flags laid over it, and which fields the flags set."""
    from planner.schema.inputs import read_mapping_file
    from planner.traces import BUILTIN_TRACES

    data = read_mapping_file(args.file)
    flags = c.Flags()
    for key in _SIMULATION_FLAGS:
        if key not in data:
            flags.alias(key, c.flag_name(key))
    c.put_slo_flags(args, data, flags)
    flags.put(data, "seed", args.seed, "--seed")
    flags.put(data, "requests", args.requests, "--requests")
    flags.put(data, "horizon_s", args.horizon_s, "--horizon-s")
    flags.put(data, "trace", c.cwd_path(args.trace, tuple(BUILTIN_TRACES)), "--trace")
    flags.put(data, "replay", args.replay, "--replay")
    flags.put(data, "requests_per_s", args.requests_per_s, "--requests-per-s")
    flags.put(data, "workload.arrivals.concurrency", args.concurrency, "--concurrency")
    flags.put(data, "router", args.router, "--router")
    flags.put(data, "profile", c.cwd_path(args.profile, ("theoretical", "calibrated", "auto")), "--profile")
    return data, flags


def _simulate(args: argparse.Namespace) -> None:
    from planner import api

    data, flags = request_from_args(args)
    with flags.named(), c.computing():
        report = api.simulate(data, base_dir=Path(args.file).parent)
    c.emit(report, args.json, lambda d: render(d, args.series))


def _f(x: float | None, digits: int = 1) -> str:
    return "n/a" if x is None else f"{x:,.{digits}f}"


def _closed_loop_lines(loop: dict[str, Any] | None) -> list[str]:
    if loop is None:
        return []
    cap = loop["rate_cap_requests_per_s"]
    w = loop["mean_time_in_system_ms"]
    return [
        f"closed loop: {loop['concurrency']:,} clients"
        + (f", rate cap {cap:.4g} req/s" if cap is not None else "")
        + f": achieved {_f(loop['requests_per_s'], 3)} req/s, mean time in system {_f(w)} ms, "
        f"{_f(loop['in_flight'])} requests in flight"
    ]


def render(d: dict[str, Any], series: bool) -> str:
    lines = [*_header_lines(d), _latency_table(d), "", *_slo_lines(d)]
    lines.append(
        f"preemptions {d['preemptions']:,}, peak KV use {_f((d['peak_kv_fraction'] or 0) * 100)}% "
        f"({d['peak_kv_blocks']:,} blocks), max queue {d['max_queue_length']:,}"
    )
    if len(d["replicas"]) > 1:
        lines += ["", _replica_table(d["replicas"])]
    if series:
        lines += ["", "per minute (from the first arrival):", _series_table(d["series"])]
    return "\n".join(lines)


def _header_lines(d: dict[str, Any]) -> list[str]:
    """The deployment, the requests simulated and the run's totals."""
    dep, src = d["deployment"], d["input"]
    if src["source"] == "trace":
        what = f"trace {src['name']} replayed {src['replay']}"
    else:
        what = f"workload{' ' + src['name'] if src['name'] else ''} sampled with seed {src['seed']}"
    rate = src["mean_requests_per_s"]
    cut = src["outputs_cut_at_context"]
    return [
        f"{c.deployment_line(dep)}; profile {dep['profile']}; router {dep['router']}",
        *c.lora_lines(dep.get("lora")),
        *c.expert_parallel_lines(dep.get("expert_parallel")),
        *c.speculative_lines(dep.get("speculative_decoding")),
        *c.warning_lines(dep["profile_warning"]),
        f"  max_num_batched_tokens {dep['max_num_batched_tokens']}, max_num_seqs {dep['max_num_seqs']}, "
        f"KV cache {dep['kv_cache_blocks']:,} blocks ({dep['kv_cache_tokens']:,} tokens) per replica",
        f"requests: {what}: {src['requests']:,} over {src['span_s']:,.1f} s"
        + (f" ({rate:.4g}/s)" if rate is not None else "")
        + f"; input mean {src['mean_input_tokens']:,.0f}, output mean {src['mean_output_tokens']:,.0f} tokens",
        *([f"  {cut:,} answers stop at the model's context (vLLM's max_model_len)"] if cut else []),
        *_closed_loop_lines(d["closed_loop"]),
        f"simulated {d['duration_s'] or 0.0:,.1f} s: {d['completed']:,} completed, "
        f"{_f(d['request_throughput_rps'], 3)} req/s, {_f(d['output_tokens_per_s'], 0)} output tokens/s",
        "",
    ]


def _latency_table(d: dict[str, Any]) -> str:
    rows = []
    for name, key in (("TTFT", "ttft"), ("ITL", "itl"), ("TPOT", "tpot"), ("E2E", "e2el")):
        s = d[key]
        digits = 1 if key in ("ttft", "e2el") else 2

        def ms(v: float | None, digits: int = digits) -> str:
            return "n/a" if v is None else f"{v * 1e3:,.{digits}f}"

        rows.append([name, ms(s["p50_s"]), ms(s["p90_s"]), ms(s["p99_s"]), ms(s["mean_s"]), ms(s["max_s"])])
    return c.table(["ms", "p50", "p90", "p99", "mean", "max"], rows)


def _slo_lines(d: dict[str, Any]) -> list[str]:
    """Goodput against the per-request objectives, and each p99 target met or missed."""
    lines = []
    gp = d["goodput"]
    if gp is not None:
        objs = ", ".join(
            f"{name} <= {v * 1e3:g} ms"
            for name, v in (
                ("TTFT", gp["slo"]["ttft_s"]),
                ("TPOT", gp["slo"]["tpot_s"]),
                ("E2E", gp["slo"]["e2el_s"]),
            )
            if v is not None
        )
        lines.append(
            f"goodput ({objs}): {gp['good_requests']:,} requests ({_f((gp['good_fraction'] or 0) * 100)}%), "
            f"{_f(gp['goodput_rps'], 3)} req/s"
        )
    if d["slo_met"] is not None:
        slo, met = d["slo"], d["slo_met"]
        parts = []
        for name, key, t in (
            ("TTFT", "ttft_p99", slo["ttft_p99_ms"]),
            ("TPOT", "tpot_p99", slo["tpot_p99_ms"]),
            ("E2E", "e2el_p99", slo["e2el_p99_ms"]),
            ("ITL", "itl_p99", slo["itl_p99_ms"]),
        ):
            if t is not None:
                v = d[f"{key}_ms"]
                parts.append(f"{name} p99 {_f(v)} ms vs {t:g}: {'met' if met[key] else 'MISSED'}")
        lines.append("SLO: " + "; ".join(parts))
    return lines


def _replica_table(replicas: list[dict[str, Any]]) -> str:
    rows = [
        [
            f"{r['role']} {r['index']}",
            f"{r['requests']:,}",
            f"{r['steps']:,}",
            f"{(r['busy_fraction'] or 0) * 100:.1f}%",
            f"{r['preemptions']:,}",
            f"{r['peak_kv_fraction'] * 100:.1f}%",
            f"{r['max_queue_length']:,}",
        ]
        for r in replicas
    ]
    return c.table(["replica", "requests", "steps", "busy", "preemptions", "peak KV", "max queue"], rows)


def _series_table(s: dict[str, Any]) -> str:
    rows = [
        [
            str(i),
            f"{s['arrivals'][i]:,}",
            f"{s['completions'][i]:,}",
            f"{s['mean_running'][i]:.1f}",
            f"{s['mean_waiting'][i]:.1f}",
            f"{s['output_tokens_per_s'][i]:,.0f}",
            f"{s['prefill_tokens_per_s'][i]:,.0f}",
        ]
        for i in range(len(s["arrivals"]))
    ]
    return c.table(["minute", "arrivals", "completions", "running", "waiting", "output tok/s", "prefill tok/s"], rows)
