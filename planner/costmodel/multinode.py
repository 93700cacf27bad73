"""Beyond one node: pipeline parallelism (PP) and tensor parallelism (TP) across nodes.

A replica is TP x PP GPUs: PP cuts the model's L layers into `pp` stages of consecutive layers,
each stage a TP group of `tp` GPUs. vLLM gives the largest stage ceil(L / pp) layers
(`get_pp_indices`, vllm/distributed/utils.py: L // pp each, the remainder one by one to the
stages before the last); its share of the model is f = ceil(L / pp) / L (1/2 for
Llama-3.1-405B's 126 layers over 2 stages). Ranks are placed consecutively, `tp` to a stage,
whole stages to a node where they fit (vLLM's Ray executor sorts workers by node), so a node of
N GPUs holds N / tp stages (tp <= N) or a stage spans tp / N nodes (tp > N).

Memory, per GPU of the largest stage: the layers' weights x f (split over TP as before), plus
one vocabulary matrix (the first stage holds the embedding, the last the lm_head: vLLM builds
each only on its stage), the rotary cache and the final norm; KV bytes per token x f (a stage
caches only its layers' KV, for every token). KV capacity in tokens = free bytes / (KV x f).

Time. vLLM V1 runs PP with a batch queue of `pp` scheduled batches in flight
(vllm/v1/engine/core.py `EngineCore.step_with_batch_queue`; the queue's size is the executor's
`max_concurrent_batches`, `pipeline_parallel_size` for the Ray executor,
vllm/v1/executor/ray_distributed_executor.py). A running request is in at most one batch (its
next token is scheduled when its output returns), so in steady state the n running decodes
split into `pp` micro-batches of n/pp, each taking one stage at a time. The planner's "step" of
a PP replica is one *cycle*: every running sequence advances one token, i.e. each micro-batch
passes every stage once. With t_stage(m) the step formula (planner.costmodel.steptime) on the
stage's share f of the model for a micro-batch of m = n/pp decodes (and 1/pp of the chunk):

    cycle(n) = overhead + pp x t_stage(n / pp) + sum over the pp - 1 stage boundaries of send(n / pp)
    send(m)  = latency_link + m x 2 h b_act / tp / BW_link                 (the point-to-point send)
               + [tp > 1] (latency_tp + m x 2 h b_act (tp - 1) / tp / BW_tp)   (the all-gather)

Each stage sends the `hidden_states` and `residual` tensors (2 x h values a token, bf16) to the
next; vLLM's V1 worker sends each TP rank's 1/tp slice and the receiving stage all-gathers it
over its TP group (`send_tensor_dict(..., all_gather_group=get_tp_group())`,
vllm/v1/worker/gpu_worker.py). BW_link is the inter-node fabric (GpuSpec.inter_node_bandwidth)
where the boundary crosses nodes, the node's link (interconnect_bandwidth) otherwise. The sends
are the *bubble*: a micro-batch's round trip is pp stage times plus its pp - 1 sends, and it
cannot be rescheduled before it returns, so the stages idle for the sends' time each cycle.
The fixed per-step overhead is paid once per cycle (the engine schedules micro-batch k + 1 on
the CPU while the GPUs run the others; it stays on the critical path of each micro-batch's
round trip once). In coefficients (what `pipeline_coefficients` returns), from the TP-only ones
of the whole model:

    weights read per cycle   pp f W          (each stage reads its weights once per micro-batch)
    KV bytes per token       f KV            (each token's KV is read once per cycle, by its stage)
    linear, attention, elementwise, prefix re-read: x f       (all tokens pass all stages)
    all-reduce per token x f, per call x pp f              (2 f L calls per micro-batch per stage)
    decodes filling the SMs  N0 x pp         (a micro-batch has n / pp decodes)
    MoE untouched ratio      r^(1/pp)        (a micro-batch of t / pp tokens touches its experts)
    phantom GEMM tokens      x pp f          (per micro-batch per stage)
    sampled lm_head          x f, per-decode engine cost and the fixed overhead unchanged
    + sends: per token sum_b (2 h b_act / tp / BW_b + [tp > 1] 2 h b_act (tp - 1) / tp / BW_tp) / pp,
             per cycle sum_b (lat_b + [tp > 1] lat_tp)

so at pp = 1 it is exactly the TP-only step. Without overheads a memory-bound decode cycle
reads pp f W + f S KV bytes for n tokens: PP buys KV room and compute, not weight-read time,
and the sends add latency per cycle. The approximations: stages are balanced (f for every
stage; the embedding and lm_head, 0.5% of 405B's parameters, are spread with the layers), one
cycle carries the budget of one scheduled batch (vLLM schedules a budget per micro-batch, up to
pp per cycle: conservative for prefill throughput), a prompt's chunks pipeline (vLLM schedules a
request's next chunk before the last one returns: "PP>1 and we have already scheduled all prompt
tokens but they are not finished yet", vllm/v1/core/sched/scheduler.py) so its TTFT leaves out
the last chunk's pipeline fill (pp - 1 stage times of that chunk), and the CPU side of pp
micro-batches is assumed to fit in a cycle.

TP across nodes (tp > the GPUs of one node or NVLink domain): the two all-reduces per layer run
as one flat NCCL ring over all tp GPUs, whose slowest hop is each GPU's NIC: 2(tp - 1)/tp x data
/ inter_node_bandwidth, plus the inter-node latency per call (`allreduce_link`). A hierarchical
all-reduce (reduce-scatter in the node, all-reduce across, all-gather in the node) moves
1/N of the data across nodes and would be faster; NCCL picks its algorithm at run time, so the
ring is the conservative choice and is what this model uses.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from planner.catalog.gpus import GpuSpec
    from planner.catalog.models import ModelSpec
    from planner.costmodel.coefficients import StepCoefficients

MAX_PIPELINE_PARALLEL = 16  # stages per replica (pipeline_parallel_size), every loop's bound
PP_SENT_TENSORS = 2  # Llama-style decoders send hidden_states and residual between stages
PP_ACTIVATION_BYTES = 2  # bf16


def scale_up_gpus(gpu: GpuSpec) -> int:
    """GPUs that reach each other at `interconnect_bandwidth`: the node, or an NVLink domain
    larger than one node (NVL72-class racks; none in the catalog today)."""
    return max(gpu.max_gpus_per_node, gpu.nvlink_domain)


def nodes(gpu: GpuSpec, tp: int, pp: int = 1) -> int:
    """Nodes one replica of tp x pp GPUs spans."""
    return -(-(tp * pp) // gpu.max_gpus_per_node)


def allreduce_link(gpu: GpuSpec, tp: int) -> tuple[float, float]:
    """(bandwidth bytes/s, latency s) of a TP group's all-reduce: the node's link within one
    scale-up domain, the inter-node fabric (each GPU's NIC: the ring's slowest hop) beyond."""
    if tp <= scale_up_gpus(gpu):
        return gpu.interconnect_bandwidth, gpu.interconnect_latency
    return gpu.inter_node_bandwidth, gpu.inter_node_latency


def stage_crosses_node(gpu: GpuSpec, tp: int, boundary: int) -> bool:
    """Whether the send from stage `boundary` to stage `boundary + 1` leaves the node: stages
    are `tp` consecutive ranks, nodes `max_gpus_per_node` consecutive ranks."""
    node = gpu.max_gpus_per_node
    return tp >= node or ((boundary + 1) * tp) % node == 0


def stage_fraction(model: ModelSpec, pp: int) -> float:
    """f = ceil(L / pp) / L: the largest stage's share of the layers (1 at pp = 1)."""
    return math.ceil(model.layers / pp) / model.layers


def send_coefficients(model: ModelSpec, gpu: GpuSpec, tp: int, pp: int) -> tuple[float, float]:
    """(seconds per token of the cycle, seconds per cycle) of the pp - 1 stage-to-stage sends of
    each micro-batch (module docstring): point-to-point over the boundary's link, then the
    all-gather over the receiving TP group."""
    token_bytes = PP_SENT_TENSORS * model.hidden_size * PP_ACTIVATION_BYTES
    tp_bw, tp_lat = allreduce_link(gpu, tp)
    per_token = fixed = 0.0
    for b in range(pp - 1):
        if stage_crosses_node(gpu, tp, b):
            bw, lat = gpu.inter_node_bandwidth, gpu.inter_node_latency
        else:
            bw, lat = gpu.interconnect_bandwidth, gpu.interconnect_latency
        per_token += token_bytes / tp / bw
        fixed += lat
        if tp > 1:
            per_token += token_bytes * (tp - 1) / tp / tp_bw
            fixed += tp_lat
    return per_token / pp, fixed


def pipeline_coefficients(
    k: StepCoefficients, model: ModelSpec, gpu: GpuSpec, tp: int, pp: int
) -> StepCoefficients:
    """The cycle of a pp-stage replica as step coefficients (module docstring), from `k`, the
    TP-only coefficients of the whole model on one GPU of the TP group. pp = 1 returns `k`."""
    if pp == 1:
        return k
    f = stage_fraction(model, pp)
    send_per_token, send_fixed = send_coefficients(model, gpu, tp, pp)
    return replace(
        k,
        weight_bytes=pp * f * k.weight_bytes,
        moe_weight_bytes=pp * f * k.moe_weight_bytes,
        moe_untouched_ratio=k.moe_untouched_ratio ** (1.0 / pp),
        kv_bytes_per_token=f * k.kv_bytes_per_token,
        linear_s_per_token=f * k.linear_s_per_token,
        attention_s_per_pair=f * k.attention_s_per_pair,
        allreduce_s_per_token=f * k.allreduce_s_per_token + send_per_token,
        allreduce_s=pp * f * k.allreduce_s + send_fixed,
        elementwise_s_per_token=f * k.elementwise_s_per_token,
        prefix_reread_s_per_token=f * k.prefix_reread_s_per_token,
        decode_kv_full_decodes=pp * k.decode_kv_full_decodes,
        linear_phantom_s=pp * f * k.linear_phantom_s,
        sampled_s_per_decode=f * k.sampled_s_per_decode,
        linear_flops_per_token=f * k.linear_flops_per_token,
        attention_flops_per_pair=f * k.attention_flops_per_pair,
        sampled_flops_per_decode=f * k.sampled_flops_per_decode,
    )


def stage_kv_bytes_per_token(model: ModelSpec, kv_bytes_per_token_tp: int, pp: int) -> int:
    """KV bytes per token on one GPU of the largest stage: its ceil(L / pp) layers' share."""
    if pp == 1:
        return kv_bytes_per_token_tp
    return kv_bytes_per_token_tp // model.layers * math.ceil(model.layers / pp)


def stage_loaded_weight_bytes(
    model: ModelSpec, loaded_tp_bytes: float, vocab_matrix_bytes: float, rotary_bytes: float, pp: int
) -> float:
    """Weights one GPU of the largest stage loads: the layers' share f of what the whole model
    loads per TP GPU (`loaded_tp_bytes`, planner.costmodel.memory.loaded_weight_bytes, less
    its vocabulary matrices, rotary cache and final norm), plus one vocabulary matrix
    (`vocab_matrix_bytes`, per GPU), the rotary cache and the final norm."""
    if pp == 1:
        return loaded_tp_bytes
    matrices = 1 if model.tie_word_embeddings else 2
    norm = model.hidden_size * PP_ACTIVATION_BYTES
    layers = loaded_tp_bytes - matrices * vocab_matrix_bytes - rotary_bytes - norm
    return layers * stage_fraction(model, pp) + vocab_matrix_bytes + rotary_bytes + norm


def placement_error(gpu: GpuSpec, tp: int, pp: int) -> str | None:
    """Why vLLM's placement cannot lay tp x pp out on whole nodes (None when it can): a TP group
    beyond one node must fill whole nodes, and stages must not straddle a node."""
    node = gpu.max_gpus_per_node
    if tp > node and tp % node:
        return f"a TP group of {tp} GPUs beyond one {node}-GPU {gpu.name} node must fill whole nodes"
    if tp * pp > node and tp < node and node % tp:
        return f"{pp} stages of TP {tp} straddle {gpu.name}'s {node}-GPU nodes (TP must divide the node)"
    return None
