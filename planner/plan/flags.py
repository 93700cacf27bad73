"""The `vllm serve` flags of a replica configuration: exactly the operating point the plan
modelled, and vLLM's own defaults (the `vllm_defaults` alternative)."""

from __future__ import annotations

from collections.abc import Sequence

from planner.plan.capacity import ReplicaConfig, SearchContext

NIXL_CONFIG = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'


def default_configs(
    gpus: Sequence[str], tps: Sequence[int], unfit: Sequence[tuple[str, int, str]] = ()
) -> list[ReplicaConfig]:
    """Colocated replicas with vLLM's default budget and `max_num_seqs` for each GPU type."""
    from planner.catalog.gpus import get_gpu

    skip = {(g, tp) for g, tp, _ in unfit}
    out = []
    for g in gpus:
        spec = get_gpu(g)
        for tp in tps:
            if (g, tp) in skip:
                continue
            out.append(
                ReplicaConfig(
                    g,
                    tp,
                    "colocated",
                    spec.vllm_default_max_num_batched_tokens,
                    spec.vllm_default_max_num_seqs,
                )
            )
    return out


def vllm_args(ctx: SearchContext, cfg: ReplicaConfig) -> list[str]:
    """The `vllm serve` flags of a replica configuration: exactly the operating point modelled."""
    args = [
        "--tensor-parallel-size", str(cfg.tensor_parallel_size),
        "--max-num-batched-tokens", str(cfg.max_num_batched_tokens),
        "--max-num-seqs", str(cfg.max_num_seqs),
        "--gpu-memory-utilization", f"{ctx.gpu_memory_utilization:g}",
    ]  # fmt: skip
    if cfg.long_prefill_token_threshold:
        args += ["--long-prefill-token-threshold", str(cfg.long_prefill_token_threshold)]
    if ctx.weight_dtype == "fp8":
        args += ["--quantization", "fp8"]
    if ctx.kv_dtype == "fp8":
        args += ["--kv-cache-dtype", "fp8"]
    if cfg.role != "colocated":
        args += ["--kv-transfer-config", NIXL_CONFIG]
    return args
