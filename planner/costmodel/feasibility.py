"""Can vLLM run this model on this GPU at this TP with these limits? Every reason it cannot.

`feasibility` is the cheap check the planner filters candidates with (no deployment, no
workload, no profile: catalog look-ups already done, a few multiplications) and the one
`Deployment.resolve` raises from, naming the field at fault. vLLM refuses each of these at
startup: heads that do not split over the TP group, a TP group beyond one node that does not
fill whole nodes (or pipeline stages straddling nodes, or more stages than layers),
`max_num_batched_tokens < max_num_seqs`, weights that do not fit the memory it may use, a
KV cache with no room left after the activations of a full budget, and a KV cache that cannot
hold one sequence of `max_model_len` tokens (vLLM's `check_enough_kv_cache_memory`,
vllm/v1/core/kv_cache_utils.py: it needs ceil(max_model_len / block_size) whole blocks). Memory is counted by
`memory_budget` (planner.costmodel.memory, docs/kv-capacity.md), the budget Deployment.resolve
sizes the cache with, so the screen and the resolve agree: vLLM's accounting for measured
profiles, the seed's idealized budget for the theoretical one.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.catalog.checkpoints import get_checkpoint
from planner.catalog.gpus import GpuSpec
from planner.catalog.models import Dtype, ModelSpec
from planner.catalog.quantization import DEFAULT_GROUP_SIZE, WeightDtype, weight_format_error
from planner.costmodel.expert_parallel import ExpertParallel, ep_error
from planner.costmodel.lora import LoraConfig
from planner.costmodel.memory import DEFAULT_VLLM_VERSION, memory_budget
from planner.costmodel.multinode import placement_error
from planner.costmodel.profile import THEORETICAL, Profile
from planner.costmodel.roofline import Replica
from planner.costmodel.speculative import SpeculativeConfig
from planner.vllm_defaults import (
    BLOCK_SIZE_TOKENS,
    GPU_MEMORY_UTILIZATION,
    default_max_num_batched_tokens,
    default_max_num_seqs,
)

GIB = 2**30


@dataclass(frozen=True)
class Infeasibility:
    """One reason: `field` is the deployment field to change (`tp`, `max_num_seqs`,
    `max_num_batched_tokens`, `gpu_memory_utilization`, `max_model_len`), as written under
    `deployment`."""

    field: str
    reason: str


def feasibility(
    model: ModelSpec,
    gpu: GpuSpec,
    tp: int,
    weight_dtype: WeightDtype = "bf16",
    kv_dtype: Dtype = "bf16",
    max_num_batched_tokens: int | None = None,
    max_num_seqs: int | None = None,
    gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION,
    profile: Profile | None = None,
    max_model_len: int | None = None,
    lora: LoraConfig | None = None,
    weight_group_size: int = DEFAULT_GROUP_SIZE,
    pp: int = 1,
    ep: ExpertParallel | None = None,
    speculative: SpeculativeConfig | None = None,
    draft: ModelSpec | None = None,
    checkpoint: str | None = None,
) -> list[Infeasibility]:
    """Every reason vLLM could not serve `model` on `tp` x `gpu` with these limits (empty: it can).
    Unset limits take vLLM's defaults for the GPU; a limit a caller left unset is never the one
    blamed when a given one can be. `profile` picks the memory budget as for the deployment
    (theoretical: the seed's); None: vLLM's, as for every measured or transferred profile.
    `max_model_len`: the longest sequence vLLM must hold (None: not checked; vLLM's default, the
    model's context, is checked only where a caller passes it). `lora`: the adapter buffers
    vLLM allocates with --enable-lora (planner.costmodel.lora), counted with the weights. `pp`:
    pipeline stages (a replica of tp x pp GPUs over whole nodes, planner.costmodel.multinode);
    each stage needs a layer. `ep`: expert parallelism (a MoE model, an EP group of at most E
    GPUs within one node, a skew of at most the EP size; planner.costmodel.expert_parallel).
    `speculative` (and `draft`, method draft): the proposer's weights beside them and its KV in
    every block (planner.costmodel.speculative); vLLM 0.11 refuses it with pipeline stages.
    `checkpoint`: the pre-quantized checkpoint vLLM serves (its unquantized modules at bf16 where
    the catalog lists them, planner.catalog.checkpoints)."""
    if ep is not None and (bad := ep_error(model, tp, ep)) is not None:
        return [Infeasibility(*bad)]
    out = _parallelism(model, gpu, tp, pp, ep, speculative)
    if checkpoint is not None and (c := get_checkpoint(checkpoint)) is not None and c.weight_dtype != weight_dtype:
        return [Infeasibility("checkpoint", f"{c.name} is a {c.weight_dtype} checkpoint, not {weight_dtype}")]
    if (why := weight_format_error(weight_dtype, gpu.name, gpu.vendor)) is not None:
        return [Infeasibility("weight_dtype", why)]  # no rate, no kernel: nothing else to size
    seqs = max_num_seqs or default_max_num_seqs(gpu.memory, gpu.name)
    budget = max_num_batched_tokens or default_max_num_batched_tokens(gpu.memory, gpu.name)
    if budget < seqs:
        which = "max_num_batched_tokens" if max_num_batched_tokens is not None else "max_num_seqs"
        out.append(
            Infeasibility(which, f"vLLM requires max_num_batched_tokens ({budget}) >= max_num_seqs ({seqs})")
        )
    r = Replica(
        model=model,
        gpu=gpu,
        tp=tp,
        weight_dtype=weight_dtype,
        kv_dtype=kv_dtype,
        profile=THEORETICAL if profile is None else profile,
        lora=lora,
        weight_group_size=weight_group_size,
        pp=pp,
        expert_parallel=ep,
        speculative=speculative,
        draft=draft,
        checkpoint=checkpoint,
    )
    version = DEFAULT_VLLM_VERSION if profile is None else None  # None: as the profile implies
    out += _memory(r, budget, seqs, gpu_memory_utilization, max_num_batched_tokens, version, max_model_len)
    return out


def _parallelism(
    model: ModelSpec,
    gpu: GpuSpec,
    tp: int,
    pp: int,
    ep: ExpertParallel | None,
    speculative: SpeculativeConfig | None,
) -> list[Infeasibility]:
    """What the GPUs' layout refuses: an EP group beyond one node, TP x PP not placed on whole
    nodes, more stages than layers, speculation with pipeline stages, a TP the model's heads do
    not divide."""
    out: list[Infeasibility] = []
    if ep is not None and ep.ep_size(tp) > gpu.max_gpus_per_node:
        out.append(
            Infeasibility(
                "data_parallel_size",
                f"tp {tp} x data_parallel_size {ep.data_parallel_size} exceeds the "
                f"{gpu.max_gpus_per_node} GPUs of one {gpu.name} node (the all-to-all is modelled "
                "within a node)",
            )
        )
    if (why := placement_error(gpu, tp, pp)) is not None:
        out.append(Infeasibility("tp", why))
    if pp > model.layers:
        out.append(
            Infeasibility(
                "pipeline_parallel_size", f"{pp} stages exceed {model.name}'s {model.layers} layers"
            )
        )
    if pp > 1 and speculative is not None:
        # vLLM 0.11's V1 engine runs no speculative proposer under pipeline parallelism (support
        # came after it, vLLM PR #32359)
        out.append(
            Infeasibility("pipeline_parallel_size", "vLLM 0.11 does not run speculative decoding with pipeline stages")
        )
    if (why := model.tp_error(tp)) is not None:
        out.append(Infeasibility("tp", why))
    return out


def _memory(
    r: Replica,
    budget: int,
    seqs: int,
    utilization: float,
    budget_given: int | None,
    version: str | None,
    max_model_len: int | None,
) -> list[Infeasibility]:
    """Weights and the fixed reserves, then the activations of a full step, against the memory
    vLLM may use, as memory_budget counts them; then one `max_model_len` sequence against the
    whole blocks left."""
    b = memory_budget(r, utilization, budget, seqs, version)
    fixed = b.weight_bytes + b.non_torch_bytes + b.cuda_graph_bytes + b.lora_bytes + b.speculative_bytes
    block = r.kv_bytes_per_token * BLOCK_SIZE_TOKENS
    model, gpu, tp = r.model, r.gpu, r.tp
    shape = f"{tp} x {gpu.name}" if r.pp == 1 else f"{tp} x {r.pp} (TP x PP) {gpu.name}"
    where = f"{model.name} on {shape} at gpu_memory_utilization {utilization:g}"
    lora_note = f" (LoRA adapters {b.lora_bytes / GIB:.1f} GiB)" if b.lora_bytes else ""
    if b.speculative_bytes:
        lora_note += f" (speculative proposer {b.speculative_bytes / GIB:.1f} GiB)"
    if fixed + block > b.requested_bytes:
        return [
            Infeasibility(
                "tp",
                f"{where}: the weights ({b.weight_bytes / GIB:.1f} GiB per GPU in {r.weight_dtype}) and "
                f"{(fixed - b.weight_bytes) / GIB:.1f} GiB of CUDA context and buffers{lora_note} exceed the "
                f"{b.requested_bytes / GIB:.1f} GiB vLLM may use and leave no KV cache; raise tp, use fp8 "
                "weights or a GPU with more memory",
            )
        ]
    if b.available_bytes < block:
        field = "max_num_batched_tokens" if budget_given is not None else "tp"
        return [
            Infeasibility(
                field,
                f"{where}: the weights ({b.weight_bytes / GIB:.1f} GiB per GPU) and the activations of a "
                f"{budget}-token step ({b.activation_bytes / GIB:.1f} GiB) leave no KV cache (not one "
                "block); lower max_num_batched_tokens or raise tp",
            )
        ]
    if max_model_len is None:
        return []
    blocks = int(b.available_bytes // block)
    need = -(-max_model_len // BLOCK_SIZE_TOKENS)
    if blocks < need:
        return [
            Infeasibility(
                "max_model_len",
                f"{where} and max_num_batched_tokens {budget}: the KV cache "
                f"({b.available_bytes / GIB:.2f} GiB, {blocks * BLOCK_SIZE_TOKENS:,} tokens) cannot hold one "
                f"sequence of max_model_len {max_model_len:,} tokens ({need:,} blocks of "
                f"{BLOCK_SIZE_TOKENS}, {need * block / GIB:.2f} GiB) and vLLM refuses to start; lower "
                "max_model_len or max_num_batched_tokens, or raise tp",
            )
        ]
    return []
