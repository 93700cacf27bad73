"""The `vllm serve` flags of a replica configuration: exactly the operating point the plan
modelled, and vLLM's own defaults (the `vllm_defaults` alternative); the launch rules a plan
must keep for vLLM to start it: `--max-model-len` (one such sequence must fit the KV cache,
planner.costmodel.feasibility) and which prefill and decode pools NixlConnector can pair.
docs/plan.md, "The flags"."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

from planner.catalog.models import ModelSpec
from planner.catalog.quantization import weight_format
from planner.costmodel.lora import LoraConfig
from planner.costmodel.speculative import SpeculativeConfig, vllm_method
from planner.errors import InvalidInput
from planner.plan.capacity import CapacityPoint, ReplicaConfig, SearchContext
from planner.schema.kinds import Role
from planner.vllm_defaults import NIXL_CONNECTOR, NIXL_DECODE_KV_ROLE, NIXL_PREFILL_KV_ROLE
from planner.workload import Workload

# The default --max-model-len is the workload's longest request rounded up to a multiple of this
# (a round number a reader recognises, with room for lengths a little past the given ones).
MAX_MODEL_LEN_STEP_TOKENS = 1024

KV_ROLES: dict[Role, str] = {"prefill": NIXL_PREFILL_KV_ROLE, "decode": NIXL_DECODE_KV_ROLE}


def kv_transfer_config(role: Role) -> str:
    """The `--kv-transfer-config` JSON of a prefill or decode replica (compact, keys sorted)."""
    return json.dumps(
        {"kv_connector": NIXL_CONNECTOR, "kv_role": KV_ROLES[role]}, sort_keys=True, separators=(",", ":")
    )


def longest_request_tokens(workload: Workload) -> tuple[int, int]:
    """(longest prompt, longest answer) of the workload's length distributions, whole tokens: the
    top of each support (a sampled length never exceeds it rounded up)."""
    return math.ceil(workload.input_tokens.max_tokens), math.ceil(workload.output_tokens.max_tokens)


def plan_max_model_len(requested: int | None, workload: Workload, model: ModelSpec) -> int:
    """The `--max-model-len` every replica of a plan runs with. Given: at most the model's context
    (max_position_embeddings), and above the longest prompt (vLLM refuses a prompt that leaves no
    room for one output token; longer answers are cut there, as vLLM cuts them). Unset: the
    longest prompt plus the longest answer, rounded up to a multiple of
    MAX_MODEL_LEN_STEP_TOKENS, at most the model's context; a workload whose longest request
    exceeds the context is bad input, naming the length that does not fit."""
    prompt, answer = longest_request_tokens(workload)
    context = model.max_position_embeddings
    if requested is not None:
        if requested > context:
            raise InvalidInput(
                "max_model_len",
                f"{requested:,} tokens exceeds {model.name}'s context (max_position_embeddings {context:,}), "
                "which vLLM refuses",
            )
        if prompt >= requested:
            raise InvalidInput(
                "max_model_len",
                f"{requested:,} tokens leaves no room for an answer to the workload's longest prompt "
                f"({prompt:,} tokens): vLLM would refuse it; raise max_model_len above {prompt:,}",
            )
        return requested
    if prompt + answer > context:
        field = "workload.input_tokens" if prompt >= context else "workload.output_tokens"
        raise InvalidInput(
            field,
            f"the longest request ({prompt:,}-token prompt + {answer:,}-token answer) exceeds {model.name}'s "
            f"context (max_position_embeddings {context:,}); give max_model_len (at most {context:,}, above "
            "the longest prompt) to serve it with answers cut there, as vLLM cuts them",
        )
    step = MAX_MODEL_LEN_STEP_TOKENS
    return min(context, -(-(prompt + answer) // step) * step)


def nixl_pairing_error(prefill_tp: int, decode_tp: int, kv_heads: int) -> str | None:
    """Why NixlConnector cannot pair a prefill replica of `prefill_tp` GPUs with a decode replica
    of `decode_tp` (None: it can). vLLM 0.11's NixlConnectorWorker.add_remote_agent
    (vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py): the decode TP must be a
    multiple of the prefill TP (`divide(decode, prefill)` asserts it; "Decode TP cannot be smaller
    than prefill TP"), each decode GPU reading its share of a prefill GPU's KV heads; a prefill
    GPU holding fewer heads than that (its TP >= the KV heads: the cache is replicated) must
    match the decode GPU's block exactly, and a decode TP above the KV heads (replicated there)
    never matches a split prefill cache."""
    if decode_tp < prefill_tp or decode_tp % prefill_tp:
        return (
            f"NixlConnector needs the decode TP to be a multiple of the prefill TP; "
            f"decode TP {decode_tp} with prefill TP {prefill_tp} is not"
        )
    if prefill_tp < kv_heads < decode_tp:
        return (
            f"NixlConnector cannot split a prefill TP {prefill_tp} KV cache ({kv_heads} KV heads) over a "
            f"decode TP {decode_tp} that replicates them"
        )
    return None


def incompatible_pairs(points: Sequence[CapacityPoint], kv_heads: int) -> tuple[tuple[str, str], ...]:
    """(prefill id, decode id) of every candidate pair NixlConnector cannot join, sorted: the MILP
    never deploys both (solvers.milp_data.MilpData.incompatible_pairs)."""
    pre = sorted((p.config for p in points if p.config.role == "prefill"), key=lambda c: c.id)
    dec = sorted((p.config for p in points if p.config.role == "decode"), key=lambda c: c.id)
    return tuple(
        (a.id, b.id)
        for a in pre
        for b in dec
        if nixl_pairing_error(a.tensor_parallel_size, b.tensor_parallel_size, kv_heads) is not None
    )


def default_configs(
    gpus: Sequence[str], tps: Sequence[int], unfit: Sequence[tuple[str, int, int, str]] = ()
) -> list[ReplicaConfig]:
    """Colocated replicas with vLLM's default budget and `max_num_seqs` for each GPU type (one
    stage: the alternatives compare single-stage replicas)."""
    from planner.catalog.gpus import get_gpu

    skip = {(g, tp) for g, tp, pp, _ in unfit if pp == 1}
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
    """The `vllm serve` flags of a replica configuration: exactly the operating point modelled.
    Every flag and value is one vLLM's `serve` accepts (tests/test_vllm_args.py checks them
    against planner/data/vllm/serve-args-0.11.0.json)."""
    args = [
        "--tensor-parallel-size", str(cfg.tensor_parallel_size),
        *multinode_args(cfg),
        "--max-model-len", str(ctx.max_model_len),
        "--max-num-batched-tokens", str(cfg.max_num_batched_tokens),
        "--max-num-seqs", str(cfg.max_num_seqs),
        "--gpu-memory-utilization", f"{ctx.gpu_memory_utilization:g}",
    ]  # fmt: skip
    if cfg.long_prefill_token_threshold:
        args += ["--long-prefill-token-threshold", str(cfg.long_prefill_token_threshold)]
    quantization = weight_format(ctx.weight_dtype).vllm_quantization
    if quantization is not None:  # fp8, compressed-tensors (int8), awq_marlin, gptq_marlin, modelopt_fp4
        args += ["--quantization", quantization]
    if ctx.kv_dtype == "fp8":
        args += ["--kv-cache-dtype", "fp8"]
    if ctx.lora is not None:
        args += lora_args(ctx.lora)
    if ctx.expert_parallel(cfg):
        args += ["--enable-expert-parallel"]
    if ctx.speculative is not None:
        args += ["--speculative-config", speculative_config(ctx.speculative)]
    if cfg.role != "colocated":
        args += ["--kv-transfer-config", kv_transfer_config(cfg.role)]
    return args


def multinode_args(cfg: ReplicaConfig) -> list[str]:
    """`--pipeline-parallel-size` with PP, and the Ray executor vLLM's multi-node serving and
    its PP batch queue run on (docs/multi-node.md) for PP or a replica beyond one node; nothing
    for a single-node TP replica."""
    from planner.catalog.gpus import get_gpu

    pp = cfg.pipeline_parallel_size
    out = [] if pp == 1 else ["--pipeline-parallel-size", str(pp)]
    if pp > 1 or cfg.gpus > get_gpu(cfg.gpu).max_gpus_per_node:
        out += ["--distributed-executor-backend", "ray"]
    return out


def lora_args(lora: LoraConfig) -> list[str]:
    """vLLM's LoRA flags for the adapters modelled (planner.costmodel.lora); `--max-cpu-loras`
    only where given (vLLM's default: max_loras)."""
    args = ["--enable-lora", "--max-loras", str(lora.max_loras), "--max-lora-rank", str(lora.max_lora_rank)]
    if lora.max_cpu_loras is not None:
        args += ["--max-cpu-loras", str(lora.max_cpu_loras)]
    return args


def speculative_config(spec: SpeculativeConfig) -> str:
    """vLLM 0.11's `--speculative-config` JSON (compact) for the modelled k: `method` in vLLM's
    names (draft -> draft_model), `num_speculative_tokens`, and `model` where the proposer is a
    separate checkpoint (draft model, EAGLE / EAGLE-3 head; MTP and n-gram use none). Fields
    from SpeculativeConfig of vllm/config/speculative.py (serve-args-0.11.0.json)."""
    cfg: dict[str, object] = {
        "method": vllm_method(spec.method),
        "num_speculative_tokens": spec.num_speculative_tokens,
    }
    if spec.draft_model is not None:
        cfg["model"] = spec.draft_model
    return json.dumps(cfg, separators=(",", ":"))
