"""`capplan analyze ...`: the seed article's analyses for any model and GPU.

Flag names and JSON keys are a public contract (programs read them). Each subcommand builds an
`AnalyzeRequest` (planner/schema/inputs.py) from its flags, taken as text so the request's ranges judge
them, and `planner.api.analyze` answers; an error about a field names its flag.
"""

from __future__ import annotations

import argparse
from typing import Any

from planner.commands import common as c
from planner.vllm_defaults import GPU_MEMORY_UTILIZATION


def register(sub: Any) -> None:
    p = sub.add_parser("analyze", help="roofline analyses: concurrency, batching, chunked prefill, cost")
    kinds = p.add_subparsers(dest="analysis", required=True, parser_class=type(p))

    def base(name: str, help_: str) -> argparse.ArgumentParser:
        q: argparse.ArgumentParser = kinds.add_parser(name, help=help_)
        q.add_argument(
            "--model", required=True, help="catalog name (e.g. Qwen/Qwen3-8B) or a config.json path"
        )
        q.add_argument("--gpu", required=True, help="catalog GPU (e.g. h100-sxm)")
        q.add_argument("--tp", help="tensor parallelism (GPUs per replica; default 1)")
        q.add_argument(
            "--weight-dtype", help="bf16 (default), fp8, int8, int4-awq, int4-gptq or nvfp4 (B200)"
        )
        q.add_argument("--kv-dtype", help="bf16 (default) or fp8")
        c.add_profile_flag(q, "theoretical")
        c.add_json_flag(q)
        return q

    q = base("concurrency", "decode step time, speed and cost per concurrency (continuous batching)")
    q.add_argument("--context-tokens", required=True, help="mean context per sequence (prompt + generated)")
    q.add_argument("--concurrency", required=True, help="comma-separated concurrencies, e.g. 1,8,32,64")
    q.add_argument(
        "--gpu-memory-utilization",
        help=f"fraction of GPU memory vLLM may use (default {GPU_MEMORY_UTILIZATION})",
    )
    c.add_price_flag(q)
    q.set_defaults(handler=_run, params=_concurrency, render=_render_concurrency)

    q = base(
        "static-batching", "static batching (generate()) vs continuous, from an output-length distribution"
    )
    q.add_argument("--context-tokens", required=True, help="mean context per sequence")
    q.add_argument("--batch", required=True, help="comma-separated batch sizes")
    q.add_argument("--output-lengths", required=True, help="TOKENS:PROBABILITY,... e.g. 100:0.5,300:0.3,...")
    c.add_price_flag(q)
    q.set_defaults(handler=_run, params=_static, render=_render_static)

    q = base("chunked-prefill", "a long prompt arriving among running decodes: prefill time vs worst ITL")
    q.add_argument("--prompt-tokens", required=True)
    q.add_argument("--decodes", required=True, help="running decode sequences")
    q.add_argument("--context-tokens", required=True, help="context of each running decode")
    sizes = q.add_mutually_exclusive_group(required=True)
    sizes.add_argument(
        "--chunk", help="prefill chunk sizes, decodes ride on top (the seed's reading); 'none' = unchunked"
    )
    sizes.add_argument(
        "--budget", help="vLLM V1 max_num_batched_tokens values: decodes first, chunk = budget - decodes"
    )
    q.set_defaults(handler=_run, params=_chunked, render=_render_chunked)

    q = base("prefill", "prefill throughput and cost per input token")
    q.add_argument("--prompt-tokens", required=True)
    c.add_price_flag(q)
    q.set_defaults(handler=_run, params=_prefill, render=_render_prefill)

    q = base("utilization", "cost per token at a given daily volume (idle capacity)")
    q.add_argument("--context-tokens", required=True)
    q.add_argument("--output-tokens-per-day", required=True)
    q.add_argument(
        "--floor-concurrency", help="concurrency the floor cost is taken at (default 64, the seed's)"
    )
    c.add_price_flag(q)
    q.set_defaults(handler=_run, params=_utilization, render=_render_utilization)

    q = base("kv-capacity", "KV-cache capacity and the concurrency that fits")
    q.add_argument("--context-tokens", required=True)
    q.add_argument(
        "--gpu-memory-utilization",
        help=f"fraction of GPU memory vLLM may use (default {GPU_MEMORY_UTILIZATION})",
    )
    q.add_argument("--max-num-batched-tokens", help="token budget (default: vLLM's for this GPU)")
    q.add_argument("--max-num-seqs", help="(default: vLLM's for this GPU)")
    q.set_defaults(handler=_run, params=_kv, render=_render_kv)


# --- flags -> request ----------------------------------------------------------------------------

_COMMON = ("model", "gpu", "tp", "weight_dtype", "kv_dtype", "profile", "usd_per_gpu_hour")


def _given(args: argparse.Namespace, *names: str) -> dict[str, Any]:
    return {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}


def request_from_args(args: argparse.Namespace) -> tuple[dict[str, Any], c.Flags]:
    """The AnalyzeRequest mapping of the flags, and which flag each field came from."""
    name, params = args.params(args)
    flags = c.Flags()
    for key in _COMMON:
        flags.alias(key, c.flag_name(key))
    for key in params:
        flags.alias(f"{name}.{key}", c.flag_name(key))
    if name == "chunked_prefill":
        flags.alias("chunked_prefill.sizes_tokens", "--budget" if args.budget is not None else "--chunk")
    return {**_given(args, *_COMMON), name: params}, flags


def _concurrency(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    return "concurrency", {
        **_given(args, "context_tokens", "gpu_memory_utilization"),
        "concurrency": c.split_list(args.concurrency),
    }


def _static(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    return "static_batching", {
        **_given(args, "context_tokens"),
        "batch": c.split_list(args.batch),
        "output_lengths": {"pairs": c.pairs("--output-lengths", args.output_lengths)},
    }


def _chunked(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    reading = "budget" if args.budget is not None else "chunk"
    return "chunked_prefill", {
        **_given(args, "prompt_tokens", "decodes", "context_tokens"),
        "reading": reading,
        "sizes_tokens": c.split_list(args.budget if reading == "budget" else args.chunk, none_as="0"),
    }


def _prefill(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    return "prefill", _given(args, "prompt_tokens")


def _utilization(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    return "utilization", _given(args, "context_tokens", "output_tokens_per_day", "floor_concurrency")


def _kv(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    return "kv_capacity", _given(
        args, "context_tokens", "gpu_memory_utilization", "max_num_batched_tokens", "max_num_seqs"
    )


def _run(args: argparse.Namespace) -> None:
    from planner import api
    from planner.schema.inputs import AnalyzeRequest, validate_request

    data, flags = request_from_args(args)
    with flags.named(), c.computing():
        req = validate_request(AnalyzeRequest, data)
        report = api.analyze(req)
    params = getattr(req, req.analysis)
    c.emit(report, args.json, lambda d: args.render(d, report.replica, params))


# --- rendering -----------------------------------------------------------------------------------


def _header(r: Any) -> str:
    tp = f" x TP{r.tp}" if r.tp > 1 else ""
    head = f"{r.model} on {r.gpu}{tp}  weights {r.weight_dtype}, KV {r.kv_dtype}, profile {r.profile}"
    return "\n".join([head, *c.warning_lines(r.profile_warning)])


def _f(x: float, digits: int = 2) -> str:
    return f"{x:,.{digits}f}"


def _render_concurrency(d: dict[str, Any], r: Any, p: Any) -> str:
    rows = [
        [
            str(x["concurrency"]),
            _f(x["step_ms"]),
            _f(x["user_tokens_per_s"], 0),
            _f(x["gpu_tokens_per_s"], 0),
            _f(x["usd_per_million_output_tokens"]),
            x["bound"],
            "yes" if x["fits_in_memory"] else "NO",
        ]
        for x in d["rows"]
    ]
    out = [
        _header(r),
        f"mean context {p.context_tokens} tokens; KV cache holds {d['kv_max_concurrency']} such sequences",
        c.table(["concurrency", "step ms", "user tok/s", "GPU tok/s", "$/1M out", "bound", "fits KV"], rows),
    ]
    if any(not x["fits_in_memory"] for x in d["rows"]):
        out.append(
            f"NO = KV cache does not fit (limit {d['kv_max_concurrency']} sequences): "
            "vLLM would preempt; cost shown as if it fit."
        )
    return "\n".join(out)


def _render_static(d: dict[str, Any], r: Any, p: Any) -> str:
    rows = [
        [
            str(x["batch"]),
            _f(x["expected_longest_tokens"], 0),
            f"{x['slot_utilization'] * 100:.1f}%",
            _f(x["usd_per_million_output_tokens"]),
            _f(x["continuous_usd_per_million_output_tokens"]),
        ]
        for x in d["rows"]
    ]
    return "\n".join(
        [
            _header(r),
            f"mean output {d['mean_output_tokens']:.0f} tokens",
            c.table(["batch", "E[longest]", "slot util", "static $/1M", "continuous $/1M"], rows),
        ]
    )


def _render_chunked(d: dict[str, Any], r: Any, p: Any) -> str:
    rows = [
        [
            "none" if x["chunk_tokens"] is None else str(x["chunk_tokens"]),
            str(x["max_num_batched_tokens"]),
            str(x["steps"]),
            _f(x["prompt_prefill_ms"], 1),
            _f(x["worst_itl_ms"], 1),
        ]
        for x in d["rows"]
    ]
    note = (
        "chunk = the prompt's share of a step; decodes ride on top (the seed's reading)"
        if d["reading"] == "chunk"
        else "budget = vLLM V1 max_num_batched_tokens; decodes are scheduled first, chunk = budget - decodes"
    )
    return "\n".join(
        [
            _header(r),
            f"{p.prompt_tokens}-token prompt among {p.decodes} decodes at {p.context_tokens} context; {note}",
            c.table(["chunk", "max_num_batched_tokens", "steps", "prefill ms", "worst ITL ms"], rows),
        ]
    )


def _render_prefill(d: dict[str, Any], r: Any, p: Any) -> str:
    return "\n".join(
        [
            _header(r),
            f"{p.prompt_tokens}-token prompt in one step: {_f(d['prompt_ms'])} ms ({d['bound']}-bound)",
            f"{_f(d['tokens_per_s'], 0)} input tokens/s, ${d['usd_per_million_input_tokens']:.4f} per 1M input tokens",
        ]
    )


def _render_utilization(d: dict[str, Any], r: Any, p: Any) -> str:
    return "\n".join(
        [
            _header(r),
            f"{p.output_tokens_per_day:,.0f} output tokens/day = "
            f"{d['output_tokens_per_month'] / 1e6:,.1f}M per 730-hour month",
            f"{d['replicas']} replica(s): ${_f(d['usd_per_month'])} per month, "
            f"GPUs busy {d['gpu_busy_fraction'] * 100:.1f}% of the time",
            f"${_f(d['usd_per_million_output_tokens'])} per 1M output tokens, "
            f"{d['times_floor']:.1f}x the ${_f(d['floor_usd_per_million_output_tokens'])} floor "
            f"(fully busy at concurrency {p.floor_concurrency})",
        ]
    )


def _render_kv(d: dict[str, Any], r: Any, p: Any) -> str:
    gib = 2**30
    return "\n".join(
        [
            _header(r),
            f"KV per token (per GPU): {d['kv_bytes_per_token']:,} bytes",
            f"memory x {p.gpu_memory_utilization}: weights {d['weight_bytes'] / gib:.1f} GiB, activations+runtime "
            f"{d['activation_reserve_bytes'] / gib:.1f} GiB, KV cache {d['kv_cache_bytes'] / gib:.1f} GiB",
            f"KV cache holds {d['kv_cache_tokens']:,} tokens = {d['max_concurrency']} sequences of "
            f"{p.context_tokens} tokens",
        ]
    )
