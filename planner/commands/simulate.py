"""`capplan simulate FILE.yaml`: the deployment of an evaluate file run through the discrete-event
simulator of vLLM V1's scheduler (planner/simulate), on requests sampled from the file's workload
or on a replayed trace: TTFT/ITL/TPOT/E2E percentiles, goodput, preemptions, KV and queue peaks,
per-minute series.

The file is the one `capplan evaluate` reads (planner/latency/inputs.py). Requests:

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
import math
from typing import Any

from planner.commands import common as c
from planner.errors import InvalidInput

DEFAULT_REQUESTS = 10_000
ROUTERS = ("round_robin", "least_outstanding_tokens")
REPLAYS = ("recorded", "scaled")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "simulate",
        help="discrete-event simulation of the deployment (vLLM V1 scheduler) on sampled or replayed requests",
    )
    p.add_argument(
        "file", metavar="FILE", help="YAML (or JSON) with deployment:, workload: and optional slo:"
    )
    p.add_argument("--seed", default="0", help="seed for sampling the workload (default 0)")
    p.add_argument(
        "--requests",
        help="number of requests (default: one pass over bucketed arrivals, else 10000; a trace: all of it)",
    )
    p.add_argument("--horizon-s", help="simulate the arrivals before this time instead of a count")
    p.add_argument("--trace", help="replay a trace: a built-in name (azure-conv-2023, ...) or a CSV path")
    p.add_argument("--replay", help="recorded (default: the trace's own timestamps) or scaled")
    p.add_argument(
        "--requests-per-s",
        help="mean arrival rate (whole deployment): scales the workload, or the trace with --replay scaled",
    )
    p.add_argument(
        "--router", default="round_robin", help="round_robin (default) or least_outstanding_tokens"
    )
    p.add_argument("--slo-ttft-p99-ms", help="TTFT objective per request (goodput) and for the p99")
    p.add_argument("--slo-tpot-p99-ms", help="TPOT objective per request (goodput) and for the p99")
    p.add_argument(
        "--slo-e2e-p99-ms", help="end-to-end latency objective per request (goodput) and for the p99"
    )
    c.add_profile_flag(p, "auto")
    p.add_argument("--series", action="store_true", help="print the per-minute series (always in --json)")
    c.add_json_flag(p)
    p.set_defaults(handler=_simulate)


def _seed(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise InvalidInput("--seed", f"must be a non-negative integer, got {text!r}") from None
    if v < 0:
        raise InvalidInput("--seed", f"must be a non-negative integer, got {v}")
    return v


def _choice(flag: str, text: str, choices: tuple[str, ...]) -> str:
    if text not in choices:
        raise InvalidInput(flag, f"must be one of {', '.join(choices)}, got {text!r}")
    return text


def _opt_ms(flag: str, text: str | None) -> float | None:
    return None if text is None else c.positive_float(flag, text)


def _requests(args: argparse.Namespace, inp: Any, seed: int) -> tuple[Any, dict[str, Any]]:
    """The request arrays and a description of where they come from."""
    from planner.latency.inputs import resolve_trace
    from planner.simulate.run import scale_workload, trace_requests, workload_requests

    count = None if args.requests is None else c.positive_int("--requests", args.requests)
    horizon = None if args.horizon_s is None else c.positive_float("--horizon-s", args.horizon_s)
    if count is not None and horizon is not None:
        raise InvalidInput("--horizon-s", "give --requests or --horizon-s, not both")
    rate = None if args.requests_per_s is None else c.positive_float("--requests-per-s", args.requests_per_s)
    replay = None if args.replay is None else _choice("--replay", args.replay, REPLAYS)

    if args.trace is None:
        if replay is not None:
            raise InvalidInput("--replay", "only with --trace (the workload is sampled otherwise)")
        wl = inp.workload if rate is None else scale_workload(inp.workload, rate)
        if count is None and horizon is None:
            period = wl.arrivals.period_s
            if period is not None:
                horizon = period
            else:
                count = DEFAULT_REQUESTS
        reqs = workload_requests(wl, seed, count=count, horizon_s=horizon)
        if len(reqs) == 0:
            raise InvalidInput(
                "--horizon-s",
                f"no request arrives before {horizon:g} s at {wl.arrivals.mean_requests_per_s:.4g}/s",
            )
        source: dict[str, Any] = {
            "source": "workload",
            "name": wl.name,
            "replay": None,
            "seed": seed,
            "mean_requests_per_s_target": wl.arrivals.mean_requests_per_s,
            "burstiness": wl.arrivals.burstiness,
            "trace_requests": None,
            "trace_duration_s": None,
        }
        return reqs, source

    if not args.trace.strip():
        raise InvalidInput("--trace", "must name a built-in trace or a CSV file")
    if replay is None:
        replay = "scaled" if rate is not None else "recorded"
    if replay == "scaled" and rate is None:
        raise InvalidInput("--requests-per-s", "required with --replay scaled (the target mean rate)")
    if replay == "recorded" and rate is not None:
        raise InvalidInput(
            "--requests-per-s", "a trace replayed as recorded keeps its rate; use --replay scaled"
        )
    trace = resolve_trace(args.trace, "--trace")
    if replay == "scaled" and trace.num_requests < 2:
        raise InvalidInput("--trace", "needs at least two requests at distinct times to be time-scaled")
    reqs = trace_requests(trace, replay, rate, count=count, horizon_s=horizon)  # type: ignore[arg-type]
    if len(reqs) == 0:
        raise InvalidInput("--horizon-s", f"no request of the trace arrives before {horizon:g} s")
    source = {
        "source": "trace",
        "name": trace.name,
        "replay": replay,
        "seed": None,
        "mean_requests_per_s_target": rate,
        "burstiness": None,
        "trace_requests": trace.num_requests,
        "trace_duration_s": trace.duration_s,
    }
    return reqs, source


def _simulate(args: argparse.Namespace) -> None:
    import numpy as np

    from planner.catalog.gpus import get_gpu
    from planner.costmodel.profile import resolve_profile
    from planner.latency.inputs import load_evaluate_file
    from planner.simulate import SLO
    from planner.simulate.run import engine_config, run

    seed = _seed(args.seed)
    router = _choice("--router", args.router, ROUTERS)
    ttft = _opt_ms("--slo-ttft-p99-ms", args.slo_ttft_p99_ms)
    tpot = _opt_ms("--slo-tpot-p99-ms", args.slo_tpot_p99_ms)
    e2e = _opt_ms("--slo-e2e-p99-ms", args.slo_e2e_p99_ms)
    inp = load_evaluate_file(args.file)
    itl_target = None
    if inp.slo is not None:
        if ttft is None and inp.slo.ttft_p99_s is not None:
            ttft = inp.slo.ttft_p99_s * 1e3
        if inp.slo.itl_p99_s is not None:
            itl_target = inp.slo.itl_p99_s * 1e3
    gpu = get_gpu(inp.deployment.gpu, "deployment.gpu")
    profile = resolve_profile(args.profile, gpu.name, "--profile")
    resolved = inp.deployment.resolve(profile)
    reqs, source = _requests(args, inp, seed)
    hit = inp.workload.prefix_cache_hit_fraction
    slo = None
    if ttft is not None or tpot is not None or e2e is not None:
        slo = SLO(
            ttft_s=None if ttft is None else ttft / 1e3,
            tpot_s=None if tpot is None else tpot / 1e3,
            e2el_s=None if e2e is None else e2e / 1e3,
        )
    try:
        result = run(resolved, reqs, prefix_cache_hit_fraction=hit, router=router, slo=slo)
    except InvalidInput as exc:
        if exc.field == "requests":  # a request longer than a replica's KV cache
            raise InvalidInput("--trace" if args.trace is not None else "workload", exc.reason) from None
        raise
    cfg = engine_config(resolved, hit)
    arrival = reqs.arrival_s
    span = float(arrival.max() - arrival.min()) if len(reqs) > 1 else 0.0
    source.update(
        {
            "requests": len(reqs),
            "span_s": span,
            "mean_requests_per_s": (len(reqs) - 1) / span if span > 0 else None,
            "mean_input_tokens": float(np.mean(reqs.prompt_tokens)),
            "mean_output_tokens": float(np.mean(reqs.output_tokens)),
            "prefix_cache_hit_fraction": hit,
        }
    )
    data = _to_json(inp, resolved, cfg, profile.name, router, source, result, (ttft, tpot, e2e, itl_target))
    c.emit(data, args.json, lambda d: _render(d, args.series))


def _ms(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else x * 1e3


def _to_json(
    inp: Any,
    r: Any,
    cfg: Any,
    profile: str,
    router: str,
    source: dict[str, Any],
    result: Any,
    targets: tuple[float | None, float | None, float | None, float | None],
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "deployment": {
            **r.summary(),
            "kv_cache_blocks": cfg.kv_cache_blocks,
            "block_size": cfg.block_size,
            "kv_cache_tokens": cfg.kv_cache_tokens,
            "profile": profile,
            "router": router,
        },
        "input": source,
    }
    res = result.to_dict()
    flat: dict[str, Any] = {}
    for metric in ("ttft", "itl", "tpot", "e2el"):
        stats = getattr(result, metric)
        for p in ("p50", "p90", "p99"):
            flat[f"{metric}_{p}_ms"] = _ms(getattr(stats, f"{p}_s"))
    ttft, tpot, e2e, itl = targets
    slo = None
    if any(v is not None for v in targets):
        slo = {"ttft_p99_ms": ttft, "tpot_p99_ms": tpot, "e2el_p99_ms": e2e, "itl_p99_ms": itl}

    def met(target: float | None, key: str) -> bool | None:
        if target is None:
            return None
        v = flat[key]
        return v is not None and v <= target

    out.update(flat)
    out["slo"] = slo
    out["slo_met"] = (
        None
        if slo is None
        else {
            "ttft_p99": met(ttft, "ttft_p99_ms"),
            "tpot_p99": met(tpot, "tpot_p99_ms"),
            "e2el_p99": met(e2e, "e2el_p99_ms"),
            "itl_p99": met(itl, "itl_p99_ms"),
        }
    )
    out.update(res)
    return out


def _f(x: float | None, digits: int = 1) -> str:
    return "n/a" if x is None else f"{x:,.{digits}f}"


def _render(d: dict[str, Any], series: bool) -> str:
    dep, src = d["deployment"], d["input"]
    tp = f" x TP{dep['tp']}" if dep["tp"] > 1 else ""
    if dep["mode"] == "disaggregated":
        shape = f"disaggregated: {dep['prefill_replicas']} prefill + {dep['decode_replicas']} decode replicas"
    else:
        shape = f"{dep['replicas']} replica{'s' if dep['replicas'] != 1 else ''}, colocated"
    if src["source"] == "trace":
        what = f"trace {src['name']} replayed {src['replay']}"
    else:
        what = f"workload{' ' + src['name'] if src['name'] else ''} sampled with seed {src['seed']}"
    rate = src["mean_requests_per_s"]
    lines = [
        f"{dep['model']} on {dep['gpu']}{tp}, {shape}; profile {dep['profile']}; router {dep['router']}",
        f"  max_num_batched_tokens {dep['max_num_batched_tokens']}, max_num_seqs {dep['max_num_seqs']}, "
        f"KV cache {dep['kv_cache_blocks']:,} blocks ({dep['kv_cache_tokens']:,} tokens) per replica",
        f"requests: {what}: {src['requests']:,} over {src['span_s']:,.1f} s"
        + (f" ({rate:.4g}/s)" if rate is not None else "")
        + f"; input mean {src['mean_input_tokens']:,.0f}, output mean {src['mean_output_tokens']:,.0f} tokens",
        f"simulated {d['duration_s'] or 0.0:,.1f} s: {d['completed']:,} completed, "
        f"{_f(d['request_throughput_rps'], 3)} req/s, {_f(d['output_tokens_per_s'], 0)} output tokens/s",
        "",
    ]
    rows = []
    for name, key in (("TTFT", "ttft"), ("ITL", "itl"), ("TPOT", "tpot"), ("E2E", "e2el")):
        s = d[key]
        digits = 1 if key in ("ttft", "e2el") else 2

        def ms(v: float | None, digits: int = digits) -> str:
            return "n/a" if v is None else f"{v * 1e3:,.{digits}f}"

        rows.append([name, ms(s["p50_s"]), ms(s["p90_s"]), ms(s["p99_s"]), ms(s["mean_s"]), ms(s["max_s"])])
    lines.append(c.table(["ms", "p50", "p90", "p99", "mean", "max"], rows))
    lines.append("")
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
    lines.append(
        f"preemptions {d['preemptions']:,}, peak KV use {_f((d['peak_kv_fraction'] or 0) * 100)}% "
        f"({d['peak_kv_blocks']:,} blocks), max queue {d['max_queue_length']:,}"
    )
    if len(d["replicas"]) > 1:
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
            for r in d["replicas"]
        ]
        lines += [
            "",
            c.table(["replica", "requests", "steps", "busy", "preemptions", "peak KV", "max queue"], rows),
        ]
    if series:
        s = d["series"]
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
        lines += [
            "",
            "per minute (from the first arrival):",
            c.table(
                ["minute", "arrivals", "completions", "running", "waiting", "output tok/s", "prefill tok/s"],
                rows,
            ),
        ]
    return "\n".join(lines)
