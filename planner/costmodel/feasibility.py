"""Can vLLM run this model on this GPU at this TP with these limits? Every reason it cannot.

`feasibility` is the cheap check the planner filters candidates with (no deployment, no
workload, no profile: catalog look-ups already done, a few multiplications) and the one
`Deployment.resolve` raises from, naming the field at fault. vLLM refuses each of these at
startup: heads that do not split over the TP group, a TP group larger than one node,
`max_num_batched_tokens < max_num_seqs`, weights that do not fit the memory it may use, and a
KV cache with no room left after the activations of a full budget.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.catalog.gpus import GpuSpec
from planner.catalog.models import Dtype, ModelSpec
from planner.costmodel.memory import NON_TORCH_BYTES, activation_peak_bytes
from planner.costmodel.roofline import Replica
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
    `max_num_batched_tokens`, `gpu_memory_utilization`), as written under `deployment`."""

    field: str
    reason: str


def feasibility(
    model: ModelSpec,
    gpu: GpuSpec,
    tp: int,
    weight_dtype: Dtype = "bf16",
    kv_dtype: Dtype = "bf16",
    max_num_batched_tokens: int | None = None,
    max_num_seqs: int | None = None,
    gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION,
) -> list[Infeasibility]:
    """Every reason vLLM could not serve `model` on `tp` x `gpu` with these limits (empty: it can).
    Unset limits take vLLM's defaults for the GPU; a limit a caller left unset is never the one
    blamed when a given one can be."""
    out: list[Infeasibility] = []
    if tp > gpu.max_gpus_per_node:
        out.append(
            Infeasibility("tp", f"{tp} exceeds the {gpu.max_gpus_per_node} GPUs of one {gpu.name} node")
        )
    if (why := model.tp_error(tp)) is not None:
        out.append(Infeasibility("tp", why))
    seqs = max_num_seqs or default_max_num_seqs(gpu.memory, gpu.name)
    budget = max_num_batched_tokens or default_max_num_batched_tokens(gpu.memory, gpu.name)
    if budget < seqs:
        which = "max_num_batched_tokens" if max_num_batched_tokens is not None else "max_num_seqs"
        out.append(
            Infeasibility(which, f"vLLM requires max_num_batched_tokens ({budget}) >= max_num_seqs ({seqs})")
        )
    out += _memory(
        model, gpu, tp, weight_dtype, kv_dtype, budget, seqs, gpu_memory_utilization, max_num_batched_tokens
    )
    return out


def _memory(
    model: ModelSpec,
    gpu: GpuSpec,
    tp: int,
    weight_dtype: Dtype,
    kv_dtype: Dtype,
    budget: int,
    seqs: int,
    utilization: float,
    budget_given: int | None,
) -> list[Infeasibility]:
    """Weights, then activations, against the memory vLLM may use (planner.costmodel.memory)."""
    r = Replica(model=model, gpu=gpu, tp=tp, weight_dtype=weight_dtype, kv_dtype=kv_dtype)
    usable = gpu.memory * utilization
    weights = r.weight_bytes_per_gpu
    block = r.kv_bytes_per_token * BLOCK_SIZE_TOKENS
    where = f"{model.name} on {tp} x {gpu.name} at gpu_memory_utilization {utilization:g}"
    if weights + NON_TORCH_BYTES + block > usable:
        return [
            Infeasibility(
                "tp",
                f"{where}: the weights ({weights / GIB:.1f} GiB per GPU in {weight_dtype}) and "
                f"{NON_TORCH_BYTES / GIB:.1f} GiB of CUDA context and buffers exceed the "
                f"{usable / GIB:.1f} GiB vLLM may use and leave no KV cache; raise tp, use fp8 weights "
                "or a GPU with more memory",
            )
        ]
    act = activation_peak_bytes(r, budget, seqs)
    if weights + NON_TORCH_BYTES + act + block > usable:
        field = "max_num_batched_tokens" if budget_given is not None else "tp"
        return [
            Infeasibility(
                field,
                f"{where}: the weights ({weights / GIB:.1f} GiB per GPU) and the activations of a "
                f"{budget}-token step ({act / GIB:.1f} GiB) leave no KV cache (not one block); "
                "lower max_num_batched_tokens or raise tp",
            )
        ]
    return []
