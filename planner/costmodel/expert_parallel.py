"""Expert parallelism (vLLM `--enable-expert-parallel`), data-parallel attention
(`--data-parallel-size`) and routing skew: how a MoE model's experts, tokens and KV cache sit on
the GPUs, and what a step pays for it.

How vLLM 0.11 lays it out (vllm/model_executor/layers/fused_moe/config.py,
`FusedMoEParallelConfig.make`): with `--tensor-parallel-size t --data-parallel-size D
--enable-expert-parallel`, the fused-MoE layers flatten the TP group across the DP ranks and,
when t x D > 1, set `ep_size = t x D`, `tp_size = 1`: each of the E_p = t x D GPUs owns whole
experts (vllm/model_executor/layers/fused_moe/layer.py `determine_expert_map`: E // E_p each,
the remainder one more on the first ranks) instead of a 1/t slice of every expert. Attention is
untouched: each DP rank is its own engine core with its own scheduler, batch and KV cache, its
attention sharded over its t GPUs (and so replicated across the D ranks). At t x D = 1 EP is off
(nothing to split). vLLM's DP engine cores step in lockstep: an idle rank runs a dummy batch so
the MoE layers' collectives complete (vllm/v1/engine/core.py `DPEngineCoreProc`).

capplan's unit with EP is one DP rank (t GPUs, one scheduler); a deployment's replicas are vLLM
instances of D such ranks (planner.deployment). Per GPU of a rank, with E experts, k routed per
token, L MoE layers, hidden size h, bf16 activations (b = 2 bytes), s the routing skew:

    experts held        n_e = ceil(E / E_p)   (the most loaded rank; vLLM's expert map)
    expert weights      n_e x L x (bytes of one expert, unsplit)        (memory.loaded_weight_bytes)
    dense weights       as under TP: attention / t, norms and routers replicated
    KV per token        as at TP t (each DP rank caches only its own sequences)
    expert FLOPs/token  2 L k P_expert s / t     (the hottest GPU's share of the EP group's tokens:
                        D ranks' tokens x k copies over E_p GPUs, x s; D cancels)
    expert bytes read   n_e/E x expert bytes x (1 - r^(s D T)),  r = 1 - k/E, T the rank's tokens
                        (each of the hottest GPU's experts is hit by s x the mean of D x T tokens)
    all-to-all (D > 1)  2 directions x L x T x k x h x b x (E_p - 1)/E_p bytes per GPU, at the
                        GPU's interconnect bandwidth, + 2 L x its latency per step (a GPU with
                        measured DeepEP calls: their per-call floors and achieved bandwidth,
                        planner.costmodel.ep_measured)

Where vLLM's fused-MoE layers were timed (planner.costmodel.ep_measured: the expert shape, EP
size and GPU in its table, bf16 weights), the step also pays the measured EP-over-TP slowdown of
the MoE layers on top of this roofline.

The all-to-all is the dispatch of each routed token copy to the GPU that holds its expert and the
combine back, (E_p - 1)/E_p of them leaving the GPU: the traffic of vLLM's sparse all-to-all
backends (VLLM_ALL2ALL_BACKEND=pplx, deepep_*; vllm/envs.py). Its dense default,
`allgather_reducescatter`, gathers every rank's hidden states instead, (D - 1) x T x h x b per
direction: for Qwen3-30B-A3B (k = 8) at D = 4 that is 3 T h b against the formula's 6 T h b, so the
formula is the costlier of the two there. At D = 1 vLLM dispatches nothing: a TP group's tokens
are already on every GPU, and each GPU's partial expert outputs are summed by the same TP
all-reduce a dense MoE layer ends with (`FusedMoE.forward_impl`), which the step already pays.
Within a DP rank of t > 1 GPUs the two all-reduces per layer stay.

Routing skew s: the load of the most loaded EP rank over the mean, >= 1 (1: uniform routing, the
assumption of the TP model; at most E_p, every token on one GPU). Every MoE layer waits for its
slowest GPU, so the step pays the hottest GPU's expert GEMMs and reads. Under TP (no EP) every GPU
holds a slice of every expert and skew changes nothing. At s = 1 and D = 1, with E divisible by
t, EP's per-GPU bytes and FLOPs equal TP's exactly: the roofline then predicts the same step
(EP's real gain at D = 1, fewer and larger expert GEMMs, is a kernel efficiency the roofline does
not model). What it leaves out: the activation peak of a DP rank's dispatch buffers, the lockstep
stalls of unequal batches across ranks (ranks are taken as alike), and pipeline overlap of the
all-to-all with compute. docs/expert-parallel.md gives the formulas with a worked example.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.catalog.gpus import GpuSpec
from planner.catalog.models import ModelSpec
from planner.costmodel.ep_measured import all_to_all_measured

__all__ = [
    "MAX_DATA_PARALLEL_SIZE",
    "MAX_ROUTING_SKEW",
    "ExpertParallel",
    "all_to_all_bytes_per_token",
    "all_to_all_coefficients",
    "ep_error",
    "expert_active_params",
    "expert_fraction_per_gpu",
    "experts_per_gpu",
    "untouched_ratio",
]

ACTIVATION_BYTES = 2  # bf16 hidden states dispatched and combined
MAX_DATA_PARALLEL_SIZE = 64  # DP ranks of one vLLM instance (64 x TP 1 is 8 nodes of 8)
MAX_ROUTING_SKEW = 64.0  # hottest EP rank over the mean: at most E_p (checked per deployment)


@dataclass(frozen=True)
class ExpertParallel:
    """EP on: `data_parallel_size` D DP ranks of the TP group per vLLM instance, and the routing
    skew s (hottest EP rank's load over the mean, 1.0 = uniform). Ranges: D 1..64, s 1..64 and
    at most the EP size t x D (`ep_error`)."""

    data_parallel_size: int = 1
    routing_skew: float = 1.0

    def ep_size(self, tp: int) -> int:
        """E_p = t x D (vLLM's FusedMoEParallelConfig: the TP group flattened across DP)."""
        return tp * self.data_parallel_size


def experts_per_gpu(model: ModelSpec, ep_size: int) -> int:
    """ceil(E / E_p): the experts the most loaded GPU holds (vLLM gives the remainder of E // E_p
    one each to the first ranks)."""
    return -(-model.num_experts // ep_size)


def ep_error(model: ModelSpec, tp: int, ep: ExpertParallel) -> tuple[str, str] | None:
    """(field, reason) vLLM or the model refuses this EP layout for; None when it runs."""
    if not model.is_moe:
        return "expert_parallel", f"{model.name} is a dense model: it has no experts to split"
    e_p = ep.ep_size(tp)
    if e_p > model.num_experts:
        return (
            "data_parallel_size",
            f"an EP group of {e_p} GPUs (tp {tp} x data_parallel_size {ep.data_parallel_size}) exceeds "
            f"{model.name}'s {model.num_experts} experts: some GPUs would hold none",
        )
    if ep.routing_skew > e_p:
        return (
            "routing_skew",
            f"{ep.routing_skew:g} exceeds the EP size {e_p}: the hottest of {e_p} ranks carries at most "
            f"{e_p} x the mean (every token)",
        )
    return None


def all_to_all_bytes_per_token(model: ModelSpec, ep_size: int) -> float:
    """Bytes one GPU sends per token per MoE layer and direction: k x h x b x (E_p - 1)/E_p."""
    return model.experts_per_token * model.hidden_size * ACTIVATION_BYTES * (ep_size - 1) / ep_size


def all_to_all_coefficients(
    model: ModelSpec, gpu: GpuSpec, tp: int, ep: ExpertParallel
) -> tuple[float, float]:
    """(seconds per token, seconds per step) of the dispatch and combine of every MoE layer; (0, 0)
    at D = 1, where vLLM dispatches nothing (module docstring)."""
    if ep.data_parallel_size == 1:
        return 0.0, 0.0
    per_token = 2 * model.layers * all_to_all_bytes_per_token(model, ep.ep_size(tp))
    measured = all_to_all_measured(gpu.name)
    if measured is not None:  # DeepEP timed on this GPU: its per-call floors and achieved bandwidth
        floors = model.layers * (measured.dispatch_floor_s + measured.combine_floor_s)
        return per_token / (gpu.interconnect_bandwidth * measured.bandwidth_efficiency), floors
    return per_token / gpu.interconnect_bandwidth, 2 * model.layers * gpu.interconnect_latency


def expert_fraction_per_gpu(model: ModelSpec, ep_size: int) -> float:
    """n_e / E: the share of all experts' bytes the most loaded GPU holds and reads from."""
    return experts_per_gpu(model, ep_size) / model.num_experts


def expert_active_params(model: ModelSpec) -> int:
    """L k P_expert: the routed experts' parameters one token multiplies through."""
    return model.layers * model.experts_per_token * model.expert_params


def untouched_ratio(model: ModelSpec, ep: ExpertParallel) -> float:
    """r^(s D): the per-token chance an expert of the hottest GPU is missed, with its s x D x T
    token copies folded into the exponent (the step reads experts at (1 - this^T))."""
    r = 1.0 - model.experts_per_token / model.num_experts
    return float(r ** (ep.routing_skew * ep.data_parallel_size))
