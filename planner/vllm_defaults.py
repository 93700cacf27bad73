"""vLLM's defaults that capplan fills in when a deployment leaves a knob unset, each defined once,
with where vLLM sets it. A plan's launch flags spell these out, so a vLLM release that changes
one changes a plan only through this file.
"""

from __future__ import annotations

# The vLLM release a plan's flags target: the image `--emit k8s` pins (planner/export.py
# VLLM_IMAGE), the release tests/test_vllm_args.py checks the flags against, and the one
# `--emit bench` records as `capplan.vllm_version`.
VLLM_RELEASE = "0.11.0"

# KV cache block size in tokens: vllm/config/cache.py, CacheConfig.block_size (16 on CUDA and
# ROCm GPUs).
BLOCK_SIZE_TOKENS = 16

# Share of GPU memory vLLM may use (weights, activations, KV cache): 0.92 in current releases'
# `LLM(gpu_memory_utilization=...)` / engine arguments; 0.9 in releases before it.
GPU_MEMORY_UTILIZATION = 0.92

# Online-serving scheduler limits: vllm/engine/arg_utils.py, EngineArgs.get_batch_defaults, usage
# context OPENAI_API_SERVER. GPUs with >= 70 GiB other than A100 (vLLM checks "a100" in the device
# name: a large budget lowered A100 throughput, vLLM PR #17885) get the large pair.
LARGE_GPU_MIN_MEMORY_BYTES = 70 * 2**30
LARGE_GPU_MAX_NUM_BATCHED_TOKENS = 8192
LARGE_GPU_MAX_NUM_SEQS = 1024
OTHER_GPU_MAX_NUM_BATCHED_TOKENS = 2048
OTHER_GPU_MAX_NUM_SEQS = 256


def _large(memory_bytes: float, gpu_name: str) -> bool:
    return memory_bytes >= LARGE_GPU_MIN_MEMORY_BYTES and "a100" not in gpu_name.lower()


def default_max_num_batched_tokens(memory_bytes: float, gpu_name: str) -> int:
    """vLLM V1's online default token budget for a GPU of this memory and name."""
    return (
        LARGE_GPU_MAX_NUM_BATCHED_TOKENS
        if _large(memory_bytes, gpu_name)
        else OTHER_GPU_MAX_NUM_BATCHED_TOKENS
    )


def default_max_num_seqs(memory_bytes: float, gpu_name: str) -> int:
    """vLLM V1's online default cap on running sequences for a GPU of this memory and name."""
    return LARGE_GPU_MAX_NUM_SEQS if _large(memory_bytes, gpu_name) else OTHER_GPU_MAX_NUM_SEQS


# --max-model-len unset: the model's context (max_position_embeddings of its config.json):
# vllm/config/model.py, ModelConfig.max_model_len -> _get_and_verify_max_len. At startup vLLM
# refuses a KV cache that cannot hold one sequence of max_model_len tokens, counted in whole
# blocks (ceil(max_model_len / block_size) x the page size): vllm/v1/core/kv_cache_utils.py,
# check_enough_kv_cache_memory, and vllm/v1/kv_cache_interface.py, max_memory_usage_bytes.

# Prefill/decode disaggregation over NIXL: the connector's name in --kv-transfer-config, and the
# kv_role of each side. vllm/config/kv_transfer.py accepts kv_producer, kv_consumer and kv_both
# (KVRole) and requires one whenever kv_connector is set; vLLM's NixlConnector usage guide
# (docs/features/nixl_connector_usage.md, "Multi-Instance Setup") names kv_producer for prefill
# instances and kv_consumer for decode instances. NixlConnector itself does not read the role
# (vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py): a proxy routes each request.
NIXL_CONNECTOR = "NixlConnector"
NIXL_PREFILL_KV_ROLE = "kv_producer"
NIXL_DECODE_KV_ROLE = "kv_consumer"
