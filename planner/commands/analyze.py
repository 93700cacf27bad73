"""`capplan analyze ...`: the seed article's analyses for any model and GPU.

Flag names and JSON keys are a public contract (programs read them). Flags are taken as text
and parsed here so a bad value is reported as `FLAG: reason`, not argparse's generic message.
"""

from __future__ import annotations

import argparse
from typing import Any

from planner.commands import common as c
from planner.errors import InvalidInput


def register(sub: Any) -> None:
    p = sub.add_parser("analyze", help="roofline analyses: concurrency, batching, chunked prefill, cost")
    kinds = p.add_subparsers(dest="analysis", required=True, parser_class=type(p))

    def base(name: str, help_: str) -> argparse.ArgumentParser:
        q: argparse.ArgumentParser = kinds.add_parser(name, help=help_)
        q.add_argument(
            "--model", required=True, help="catalog name (e.g. Qwen/Qwen3-8B) or a config.json path"
        )
        q.add_argument("--gpu", required=True, help="catalog GPU (e.g. h100-sxm)")
        q.add_argument("--tp", default="1", help="tensor parallelism (GPUs per replica)")
        q.add_argument("--weight-dtype", default="bf16", help="bf16 or fp8")
        q.add_argument("--kv-dtype", default="bf16", help="bf16 or fp8")
        c.add_profile_flag(q, "theoretical")
        c.add_json_flag(q)
        return q

    def price(q: argparse.ArgumentParser) -> None:
        q.add_argument("--usd-per-gpu-hour", help="GPU price (default: the catalog's on-demand price)")

    q = base("concurrency", "decode step time, speed and cost per concurrency (continuous batching)")
    q.add_argument("--context-tokens", required=True, help="mean context per sequence (prompt + generated)")
    q.add_argument("--concurrency", required=True, help="comma-separated concurrencies, e.g. 1,8,32,64")
    q.add_argument("--gpu-memory-utilization", default="0.92")
    price(q)
    q.set_defaults(handler=_concurrency)

    q = base(
        "static-batching", "static batching (generate()) vs continuous, from an output-length distribution"
    )
    q.add_argument("--context-tokens", required=True)
    q.add_argument("--batch", required=True, help="comma-separated batch sizes")
    q.add_argument("--output-lengths", required=True, help="TOKENS:PROBABILITY,... e.g. 100:0.5,300:0.3,...")
    price(q)
    q.set_defaults(handler=_static)

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
    q.set_defaults(handler=_chunked)

    q = base("prefill", "prefill throughput and cost per input token")
    q.add_argument("--prompt-tokens", required=True)
    price(q)
    q.set_defaults(handler=_prefill)

    q = base("utilization", "cost per token at a given daily volume (idle capacity)")
    q.add_argument("--context-tokens", required=True)
    q.add_argument("--output-tokens-per-day", required=True)
    q.add_argument(
        "--floor-concurrency", default="64", help="concurrency the floor cost is taken at (seed: 64)"
    )
    price(q)
    q.set_defaults(handler=_utilization)

    q = base("kv-capacity", "KV-cache capacity and the concurrency that fits")
    q.add_argument("--context-tokens", required=True)
    q.add_argument("--gpu-memory-utilization", default="0.92")
    q.add_argument("--max-num-batched-tokens", help="token budget (default: vLLM's for this GPU)")
    q.add_argument("--max-num-seqs", help="(default: vLLM's for this GPU)")
    q.set_defaults(handler=_kv)


# --- shared argument handling -------------------------------------------------------------------


def _dtype(flag: str, text: str) -> Any:
    if text not in ("bf16", "fp8"):
        raise InvalidInput(flag, f"must be bf16 or fp8, got {text!r}")
    return text


def _replica(args: argparse.Namespace) -> Any:
    from planner.catalog.gpus import get_gpu
    from planner.catalog.models import get_model
    from planner.costmodel.profile import resolve_profile
    from planner.costmodel.roofline import Replica

    gpu = get_gpu(args.gpu, "--gpu")
    model = get_model(args.model, "--model")
    tp = c.positive_int("--tp", args.tp)
    if tp > gpu.max_gpus_per_node:
        raise InvalidInput("--tp", f"{tp} exceeds the {gpu.max_gpus_per_node} GPUs of one {gpu.name} node")
    if (why := model.tp_error(tp)) is not None:
        raise InvalidInput("--tp", why)
    return Replica(
        model=model,
        gpu=gpu,
        tp=tp,
        weight_dtype=_dtype("--weight-dtype", args.weight_dtype),
        kv_dtype=_dtype("--kv-dtype", args.kv_dtype),
        profile=resolve_profile(args.profile, gpu.name, "--profile"),
    )


def _price(args: argparse.Namespace, replica: Any) -> float:
    if args.usd_per_gpu_hour is None:
        return float(replica.gpu.price)
    return c.positive_float("--usd-per-gpu-hour", args.usd_per_gpu_hour)


def _context(flag: str, text: str, replica: Any) -> int:
    value = c.positive_int(flag, text)
    limit = replica.model.max_position_embeddings
    if value > limit:
        raise InvalidInput(flag, f"{value} exceeds {replica.model.name}'s maximum context of {limit} tokens")
    return value


def _header(args: argparse.Namespace, replica: Any) -> str:
    tp = f" x TP{replica.tp}" if replica.tp > 1 else ""
    return (
        f"{replica.model.name} on {replica.gpu.name}{tp}  weights {args.weight_dtype}, KV {args.kv_dtype}, "
        f"profile {replica.profile.name}"
    )


def _f(x: float, digits: int = 2) -> str:
    return f"{x:,.{digits}f}"


# --- handlers ----------------------------------------------------------------------------------


def _concurrency(args: argparse.Namespace) -> None:
    from planner.costmodel.analyses import concurrency_sweep

    r = _replica(args)
    ctx = _context("--context-tokens", args.context_tokens, r)
    ns = [n for n in c.int_list("--concurrency", args.concurrency) if n is not None]
    util = c.fraction("--gpu-memory-utilization", args.gpu_memory_utilization)
    data = concurrency_sweep(r, ctx, ns, _price(args, r), util)

    def render(d: dict[str, Any]) -> str:
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
            _header(args, r),
            f"mean context {ctx} tokens; KV cache holds {d['kv_max_concurrency']} such sequences",
            c.table(
                ["concurrency", "step ms", "user tok/s", "GPU tok/s", "$/1M out", "bound", "fits KV"], rows
            ),
        ]
        if any(not x["fits_in_memory"] for x in d["rows"]):
            out.append(
                f"NO = KV cache does not fit (limit {d['kv_max_concurrency']} sequences): "
                "vLLM would preempt; cost shown as if it fit."
            )
        return "\n".join(out)

    c.emit(data, args.json, render)


def _static(args: argparse.Namespace) -> None:
    from planner.costmodel.analyses import static_batching
    from planner.workload import LengthDistribution

    r = _replica(args)
    ctx = _context("--context-tokens", args.context_tokens, r)
    batches = [b for b in c.int_list("--batch", args.batch) if b is not None]
    dist = LengthDistribution.from_pairs(c.pairs("--output-lengths", args.output_lengths))
    data = static_batching(r, ctx, batches, dist, _price(args, r))

    def render(d: dict[str, Any]) -> str:
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
                _header(args, r),
                f"mean output {d['mean_output_tokens']:.0f} tokens",
                c.table(["batch", "E[longest]", "slot util", "static $/1M", "continuous $/1M"], rows),
            ]
        )

    c.emit(data, args.json, render)


def _chunked(args: argparse.Namespace) -> None:
    from planner.costmodel.analyses import Reading, chunked_prefill

    r = _replica(args)
    prompt = _context("--prompt-tokens", args.prompt_tokens, r)
    decodes = c.positive_int("--decodes", args.decodes)
    ctx = _context("--context-tokens", args.context_tokens, r)
    reading: Reading
    if args.budget is not None:
        reading, sizes = "budget", c.int_list("--budget", args.budget, allow_none=True)
        for s in sizes:
            if s is not None and s <= decodes:
                raise InvalidInput(
                    "--budget", f"budget {s} leaves no room for a prefill chunk beside {decodes} decodes"
                )
    else:
        reading, sizes = "chunk", c.int_list("--chunk", args.chunk, allow_none=True)
    data = chunked_prefill(r, prompt, decodes, ctx, sizes, reading)

    def render(d: dict[str, Any]) -> str:
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
            if reading == "chunk"
            else "budget = vLLM V1 max_num_batched_tokens; decodes are scheduled first, chunk = budget - decodes"
        )
        return "\n".join(
            [
                _header(args, r),
                f"{prompt}-token prompt among {decodes} decodes at {ctx} context; {note}",
                c.table(["chunk", "max_num_batched_tokens", "steps", "prefill ms", "worst ITL ms"], rows),
            ]
        )

    c.emit(data, args.json, render)


def _prefill(args: argparse.Namespace) -> None:
    from planner.costmodel.analyses import prefill

    r = _replica(args)
    prompt = _context("--prompt-tokens", args.prompt_tokens, r)
    data = prefill(r, prompt, _price(args, r))

    def render(d: dict[str, Any]) -> str:
        return "\n".join(
            [
                _header(args, r),
                f"{prompt}-token prompt in one step: {_f(d['prompt_ms'])} ms ({d['bound']}-bound)",
                f"{_f(d['tokens_per_s'], 0)} input tokens/s, ${d['usd_per_million_input_tokens']:.4f} per 1M input tokens",
            ]
        )

    c.emit(data, args.json, render)


def _utilization(args: argparse.Namespace) -> None:
    from planner.costmodel.analyses import utilization

    r = _replica(args)
    ctx = _context("--context-tokens", args.context_tokens, r)
    per_day = c.positive_float("--output-tokens-per-day", args.output_tokens_per_day)
    floor_n = c.positive_int("--floor-concurrency", args.floor_concurrency)
    data = utilization(r, ctx, per_day, _price(args, r), floor_n)

    def render(d: dict[str, Any]) -> str:
        return "\n".join(
            [
                _header(args, r),
                f"{per_day:,.0f} output tokens/day = {d['output_tokens_per_month'] / 1e6:,.1f}M per 730-hour month",
                f"{d['replicas']} replica(s): ${_f(d['usd_per_month'])} per month, "
                f"GPUs busy {d['gpu_busy_fraction'] * 100:.1f}% of the time",
                f"${_f(d['usd_per_million_output_tokens'])} per 1M output tokens, "
                f"{d['times_floor']:.1f}x the ${_f(d['floor_usd_per_million_output_tokens'])} floor "
                f"(fully busy at concurrency {floor_n})",
            ]
        )

    c.emit(data, args.json, render)


def _kv(args: argparse.Namespace) -> None:
    from planner.costmodel.analyses import kv_report

    r = _replica(args)
    ctx = _context("--context-tokens", args.context_tokens, r)
    util = c.fraction("--gpu-memory-utilization", args.gpu_memory_utilization)
    budget = (
        None
        if args.max_num_batched_tokens is None
        else c.positive_int("--max-num-batched-tokens", args.max_num_batched_tokens)
    )
    seqs = None if args.max_num_seqs is None else c.positive_int("--max-num-seqs", args.max_num_seqs)
    data = kv_report(r, ctx, util, budget, seqs)

    def render(d: dict[str, Any]) -> str:
        gib = 2**30
        return "\n".join(
            [
                _header(args, r),
                f"KV per token (per GPU): {d['kv_bytes_per_token']:,} bytes",
                f"memory x {util}: weights {d['weight_bytes'] / gib:.1f} GiB, activations+runtime "
                f"{d['activation_reserve_bytes'] / gib:.1f} GiB, KV cache {d['kv_cache_bytes'] / gib:.1f} GiB",
                f"KV cache holds {d['kv_cache_tokens']:,} tokens = {d['max_concurrency']} sequences of {ctx} tokens",
            ]
        )

    c.emit(data, args.json, render)
