"""`capplan catalog gpus|models`: what the cost model knows, with sources, so numbers can be checked."""

from __future__ import annotations

import argparse
from typing import Any

from planner.commands import common as c


def register(sub: Any) -> None:
    p = sub.add_parser("catalog", help="list GPUs (with sources and prices) and models (with computed sizes)")
    kinds = p.add_subparsers(dest="catalog", required=True, parser_class=type(p))
    g = kinds.add_parser("gpus", help="GPU specs and default prices, each with its source")
    g.add_argument("--gpu", help="one GPU only")
    c.add_json_flag(g)
    g.set_defaults(handler=_gpus)
    m = kinds.add_parser("models", help="model shapes and parameter counts computed from config.json")
    m.add_argument("--model", help="one model (catalog name or config.json path)")
    m.add_argument(
        "--batch", default="1,8,32,128,512", help="token counts for the MoE expert-read table (with --model)"
    )
    c.add_json_flag(m)
    m.set_defaults(handler=_models)


_GPU_FIELDS = (
    "memory_bytes",
    "memory_bandwidth_bytes_per_s",
    "bf16_dense_flops_per_s",
    "fp8_dense_flops_per_s",
    "interconnect_bandwidth_bytes_per_s",
    "interconnect_latency_s",
    "nvlink_domain_gpus",
    "inter_node_bandwidth_bytes_per_s",
    "inter_node_latency_s",
    "usd_per_gpu_hour",
)


def _gpus(args: argparse.Namespace) -> None:
    from planner import api

    flags = c.Flags()
    flags.alias("name", "--gpu")
    with flags.named():
        report = api.catalog({"kind": "gpus", **({"name": args.gpu} if args.gpu is not None else {})})
    specs = report.gpus  # type: ignore[union-attr]

    def render(_: dict[str, Any]) -> str:
        rows = [
            [
                s.name,
                f"{s.memory / 2**30:.0f} GiB",
                f"{s.bandwidth / 1e12:.2f} TB/s",
                f"{s.matmul_flops('bf16') / 1e12:.0f}",
                "-"
                if s.fp8_dense_flops_per_s.value is None
                else f"{s.fp8_dense_flops_per_s.value / 1e12:.0f}",
                f"{s.interconnect_bandwidth / 1e9:.0f} GB/s",
                f"${s.price:.2f}",
            ]
            for s in specs
        ]
        out = [c.table(["gpu", "memory", "HBM", "bf16 TFLOP/s", "fp8 TFLOP/s", "link/dir", "$/GPU-h"], rows)]
        out += _price_lines(specs)
        if args.gpu:
            s = specs[0]
            out.append("")
            for f in _GPU_FIELDS:
                v = getattr(s, f)
                out.append(f"{f}: {v.value} ({v.source}; checked {v.checked})")
        return "\n".join(out)

    c.emit(report, args.json, render)


def _price_lines(specs: Any) -> list[str]:
    """Where the $/GPU-h column comes from: the default price list, a GPU priced from another
    list, the other lists a plan may name (`price_list:`)."""
    from planner.catalog.prices import DEFAULT_PRICE_LIST, get_price_list, price_list_names

    default = get_price_list(DEFAULT_PRICE_LIST)
    out = ["", f"$/GPU-h: price list {default.title()}"]
    for s in specs:
        if s.price_list != DEFAULT_PRICE_LIST:
            out.append(
                f"  {s.name}: not on it; from {get_price_list(s.price_list).title()} (a plan lists it only when "
                "asked, with a warning that it mixes price sources)"
            )
    others = [n for n in price_list_names() if n != DEFAULT_PRICE_LIST]
    out.append(f"other price lists (plan request `price_list:`): {', '.join(others)}")
    from planner.costmodel.profiles import measured_gpus

    measured = set(measured_gpus())
    plain = [s.name for s in specs if s.name in measured and s.price_list == DEFAULT_PRICE_LIST]
    rest = [s.name for s in specs if s.name not in measured]
    out.append(
        "`capplan plan` candidates by default: the GPUs with their own measured profile on the default "
        f"list: {', '.join(plain) or 'none'}"
        + (
            f"; {', '.join(rest)}: transferred profiles, only with candidates.allow_transferred_profiles"
            if rest
            else ""
        )
    )
    return out


def _models(args: argparse.Namespace) -> None:
    from planner import api

    flags = c.Flags()
    flags.alias("name", "--model")
    flags.alias("batch_tokens", "--batch")
    data: dict[str, Any] = {"kind": "models", "batch_tokens": c.split_list(args.batch)}
    if args.model is not None:
        data["name"] = args.model
    with flags.named():
        report = api.catalog(data)

    def render(d: dict[str, Any]) -> str:
        rows = [
            [
                m["name"],
                "MoE" if m["num_experts"] > 0 else "dense",
                f"{m['total_params'] / 1e9:.2f}B",
                f"{m['active_params'] / 1e9:.2f}B",
                str(m["layers"]),
                f"{m['attention_heads']}/{m['kv_heads']}x{m['head_dim']}",
                f"{m['kv_bytes_per_token_bf16']:,}",
                f"{m['max_position_embeddings']:,}",
            ]
            for m in d["models"]
        ]
        out = [
            c.table(["model", "kind", "total", "active", "layers", "heads/kv", "KV B/token", "max ctx"], rows)
        ]
        if "expert_reads" in d:
            m = d["models"][0]
            out += [
                "",
                f"{m['num_experts']} experts, {m['experts_per_token']} per token; a step of N tokens reads:",
                c.table(
                    ["tokens", "experts/layer", "params read"],
                    [
                        [
                            str(x["tokens"]),
                            f"{x['experts_touched_per_layer']:.1f}",
                            f"{x['params_read'] / 1e9:.2f}B",
                        ]
                        for x in d["expert_reads"]
                    ],
                ),
            ]
        return "\n".join(out)

    c.emit(report, args.json, render)
