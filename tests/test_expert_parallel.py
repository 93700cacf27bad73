"""Expert parallelism (planner.costmodel.expert_parallel): experts per GPU, expert weights per GPU,
the all-to-all, KV per DP rank and the routing skew, each against a hand derivation; the public
facts the catalog MoE models are checked against; errors naming the field; plan, evaluate and
gRPC carrying it.

Qwen3-30B-A3B: L = 48 layers, E = 128 experts, k = 8 routed, h = 2048, expert width 768, so one
expert is 3 x 2048 x 768 = 4,718,592 parameters (9,437,184 bytes in bf16) per layer; 4 KV heads
of 128. Mixtral-8x7B: L = 32, E = 8, k = 2, h = 4096, expert width 14,336.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from planner import api
from planner.catalog.gpus import get_gpu
from planner.catalog.models import get_model
from planner.costmodel.expert_parallel import ExpertParallel, all_to_all_bytes_per_token, experts_per_gpu
from planner.costmodel.memory import kv_capacity, loaded_weight_bytes, memory_budget
from planner.costmodel.profile import THEORETICAL
from planner.costmodel.roofline import Replica
from planner.costmodel.steptime import batch_time_s, step_coefficients
from planner.deployment import Deployment
from planner.errors import InvalidInput
from planner.plan import plan

ROOT = Path(__file__).resolve().parent.parent
QWEN = "Qwen/Qwen3-30B-A3B"
MIXTRAL = "mistralai/Mixtral-8x7B-v0.1"
GIB = 2**30
EXPERT_BYTES = 3 * 2048 * 768 * 2  # one Qwen3-30B-A3B expert of one layer, bf16


def test_catalog_moe_models_match_their_published_sizes() -> None:
    """The expert counts every EP formula multiplies: Qwen's model card gives Qwen3-30B-A3B
    30.5B parameters, 3.3B activated; Mistral AI's Mixtral announcement (mistral.ai/news/
    mixtral-of-experts) 46.7B total, 12.9B used per token."""
    q, m = get_model(QWEN), get_model(MIXTRAL)
    assert round(q.total_params / 1e9, 1) == 30.5 and 3.3e9 <= q.active_params < 3.4e9
    assert round(m.total_params / 1e9, 1) == 46.7 and round(m.active_params / 1e9, 1) == 12.9


def test_experts_per_gpu_follow_vllms_expert_map() -> None:
    """E // E_p each, the remainder one more on the first ranks: the most loaded GPU holds
    ceil(E / E_p). vLLM logged 'Local/global number of experts: 32/128' on each of 4 EP ranks of
    a 128-expert Qwen3 MoE (QwenLM/Qwen3-VL issue #1520)."""
    q, m = get_model(QWEN), get_model(MIXTRAL)
    assert experts_per_gpu(q, 4) == 32
    assert [experts_per_gpu(m, e) for e in (1, 2, 3, 4, 8)] == [8, 4, 3, 2, 1]
    assert ExpertParallel(data_parallel_size=4).ep_size(2) == 8  # vLLM: ep_size = tp x dp


def test_expert_weights_per_gpu_by_hand() -> None:
    q = get_model(QWEN)
    tp4 = loaded_weight_bytes(q, 4)
    # EP over TP 4: 32 whole experts = a quarter of each of 128, the same bytes
    assert loaded_weight_bytes(q, 4, ep=ExpertParallel()) == pytest.approx(tp4, rel=1e-12)
    # vLLM 0.8.5 logged 'Model loading took 14.2474 GiB' per GPU for Qwen3-30B-A3B at TP 4
    # (vllm-project/vllm issue #17469)
    assert tp4 / GIB == pytest.approx(14.2474, rel=1e-3)
    # DP 4 x TP 1: the whole dense part on each GPU, 96 of 128 experts fewer per layer than TP 1
    dp4 = loaded_weight_bytes(q, 1, ep=ExpertParallel(data_parallel_size=4))
    assert loaded_weight_bytes(q, 1) - dp4 == 48 * 96 * EXPERT_BYTES == 43_486_543_872  # 40.5 GiB
    # Mixtral over EP 3 (TP 1 x DP 3): the hottest GPU holds ceil(8/3) = 3 experts of 3 x 4096 x 14336
    mx = get_model(MIXTRAL)
    one = 3 * 4096 * 14336 * 2
    ep3 = loaded_weight_bytes(mx, 1, ep=ExpertParallel(data_parallel_size=3))
    assert loaded_weight_bytes(mx, 1) - ep3 == 32 * (8 - 3) * one


def test_all_to_all_by_hand() -> None:
    """D = 4 ranks of TP 1 (E_p = 4): each token's 8 routed copies of 2048 bf16 values, 3/4 of
    them to another GPU, per direction and layer: 8 x 2048 x 2 x 3/4 = 24,576 bytes; dispatch and
    combine in 48 layers: 2,359,296 bytes per token over the interconnect, plus 96 latencies.
    On the H200 (no measured all-to-all: the catalog's bandwidth and latency; the H100's measured
    terms are tests/test_ep_measured.py's)."""
    q, gpu = get_model(QWEN), get_gpu("h200-sxm")
    assert all_to_all_bytes_per_token(q, 4) == 24_576
    k = step_coefficients(q, gpu, THEORETICAL, 1, ep=ExpertParallel(data_parallel_size=4))
    assert k.allreduce_s_per_token == pytest.approx(2_359_296 / gpu.interconnect_bandwidth, rel=1e-12)
    assert k.allreduce_s == pytest.approx(96 * gpu.interconnect_latency, rel=1e-12)
    # D = 1: vLLM dispatches nothing (the TP all-reduce combines), so EP adds no communication
    tp4 = step_coefficients(q, gpu, THEORETICAL, 4)
    ep4 = step_coefficients(q, gpu, THEORETICAL, 4, ep=ExpertParallel())
    assert (ep4.allreduce_s_per_token, ep4.allreduce_s) == (tp4.allreduce_s_per_token, tp4.allreduce_s)


def test_ep_at_uniform_routing_times_steps_as_tp() -> None:
    """The roofline's claim, on a GPU without measured MoE kernels (the H100's measured EP-over-TP
    ratio is tests/test_ep_measured.py's)."""
    q, gpu = get_model(QWEN), get_gpu("h200-sxm")
    tp4 = step_coefficients(q, gpu, THEORETICAL, 4)
    ep4 = step_coefficients(q, gpu, THEORETICAL, 4, ep=ExpertParallel())
    for n, s, c in ((1, 1000.0, 0.0), (64, 64_000.0, 0.0), (8, 8000.0, 2048.0)):
        a = batch_time_s(tp4, n, s, c, c * c / 2, c, 0.0)
        assert batch_time_s(ep4, n, s, c, c * c / 2, c, 0.0) == pytest.approx(a, rel=1e-12)


def test_skew_multiplies_the_hottest_gpus_experts() -> None:
    """s = 1.5 over EP 4: the hottest GPU runs 1.5 x its mean share of the expert GEMMs, 2 L k
    P_e (s - 1) / t = 2 x 48 x 8 x 4,718,592 x 0.5 / 4 = 452,984,832 FLOPs more per token; each
    of its experts misses a token with (1 - 8/128)^1.5 (D = 4, s = 1: ^4)."""
    q, gpu = get_model(QWEN), get_gpu("h100-sxm")
    even = step_coefficients(q, gpu, THEORETICAL, 4, ep=ExpertParallel())
    hot = step_coefficients(q, gpu, THEORETICAL, 4, ep=ExpertParallel(routing_skew=1.5))
    assert hot.linear_flops_per_token - even.linear_flops_per_token == pytest.approx(452_984_832, rel=1e-12)
    assert hot.moe_untouched_ratio == pytest.approx((120 / 128) ** 1.5, rel=1e-12)
    dp4 = step_coefficients(q, gpu, THEORETICAL, 1, ep=ExpertParallel(data_parallel_size=4))
    assert dp4.moe_untouched_ratio == pytest.approx((120 / 128) ** 4, rel=1e-12)
    assert dp4.moe_weight_bytes == pytest.approx(48 * 32 * EXPERT_BYTES, rel=1e-12)
    # a skewed router slows a full prefill step (compute-bound) by the experts' extra GEMMs
    assert batch_time_s(hot, 0, 0.0, 8192, 8192**2 / 2, 8192) > batch_time_s(even, 0, 0.0, 8192, 8192**2 / 2, 8192)


def test_kv_per_dp_rank() -> None:
    """Each DP rank of TP 1 caches its own sequences with all 4 KV heads: 2 x 48 x 4 x 128 x 2 =
    98,304 bytes a token (TP 4: one head per GPU, 24,576); its blocks are what the budget leaves
    after the DP layout's weights."""
    dep = Deployment(model=QWEN, gpu="h100-sxm", expert_parallel=True, data_parallel_size=4).resolve()
    assert dep.replica.kv_bytes_per_token == 98_304
    assert Replica(get_model(QWEN), get_gpu("h100-sxm"), 4).kv_bytes_per_token == 24_576
    b = memory_budget(dep.replica, max_num_batched_tokens=dep.max_num_batched_tokens, max_num_seqs=dep.max_num_seqs)
    assert b.weight_bytes == loaded_weight_bytes(get_model(QWEN), 1) - 43_486_543_872
    assert dep.kv.kv_cache_blocks == int(b.available_bytes // (98_304 * 16))
    # one instance of 4 DP ranks: 4 schedulers of 1 GPU each
    assert (dep.replicas, dep.gpus) == (4, 4)
    assert dep.summary()["expert_parallel"]["kv_cache_tokens_per_rank"] == dep.kv.kv_cache_tokens


def test_theoretical_budget_counts_the_ep_layout() -> None:
    q, gpu = get_model(QWEN), get_gpu("h100-sxm")
    r = Replica(q, gpu, 1, expert_parallel=ExpertParallel(data_parallel_size=4))
    assert kv_capacity(r).weight_bytes == pytest.approx(q.weight_bytes() - 48 * 96 * EXPERT_BYTES, rel=1e-12)


@pytest.mark.parametrize(
    ("fields", "field", "reason"),
    [
        ({"data_parallel_size": 2}, "deployment.data_parallel_size", "expert_parallel: true only"),
        ({"routing_skew": 1.2}, "deployment.routing_skew", "expert_parallel: true only"),
        ({"expert_parallel": True, "routing_skew": 0.9}, "deployment.routing_skew", "greater than or equal to 1"),
        ({"expert_parallel": True, "data_parallel_size": 65}, "deployment.data_parallel_size", "less than or equal"),
        ({"expert_parallel": True, "tp": 2, "routing_skew": 3}, "deployment.routing_skew", "exceeds the EP size 2"),
        ({"expert_parallel": True, "tp": 4, "data_parallel_size": 4}, "deployment.data_parallel_size", "one h100"),
    ],
)
def test_bad_ep_input_names_the_field(fields: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(InvalidInput) as e:
        Deployment.from_mapping({"model": QWEN, "gpu": "h100-sxm", **fields}).resolve()
    assert e.value.field == field and reason in e.value.reason


def test_ep_needs_experts_and_no_more_gpus_than_experts() -> None:
    with pytest.raises(InvalidInput) as e:
        Deployment(model="Qwen/Qwen3-8B", gpu="h100-sxm", tp=2, expert_parallel=True).resolve()
    assert e.value.field == "deployment.expert_parallel" and "dense model" in e.value.reason
    with pytest.raises(InvalidInput) as e:
        Deployment(model=MIXTRAL, gpu="h100-sxm", tp=8, expert_parallel=True, data_parallel_size=2).resolve()
    assert e.value.field == "deployment.data_parallel_size" and "8 experts" in e.value.reason


def test_plan_skew_needs_expert_parallel() -> None:
    req = yaml.safe_load((ROOT / "examples" / "qwen30b-a3b-ep4-h100.yaml").read_text())
    req["candidates"].update(expert_parallel=False, routing_skew=1.3)
    with pytest.raises(InvalidInput) as e:
        plan(req, workers=1)
    assert e.value.field == "candidates.routing_skew"


def test_the_example_plans_expert_parallel_and_a_cheaper_tp_split_warns() -> None:
    req = yaml.safe_load((ROOT / "examples" / "qwen30b-a3b-ep4-h100.yaml").read_text())
    report = plan(req, base_dir=ROOT / "examples", workers=1)
    assert report.status == "OPTIMAL"
    for dep in report.deployments:
        assert "--enable-expert-parallel" in dep.vllm_args and "--data-parallel-size" not in dep.vllm_args
        ep = dep.expert_parallel
        assert ep is not None and (ep.ep_size, ep.experts_per_gpu, ep.data_parallel_size) == (4, 32, 1)
        assert ep.expert_gib_per_gpu == 48 * 32 * EXPERT_BYTES / GIB == 13.5
    note = next(n for n in report.notes if n.startswith("candidates.expert_parallel: expert-parallel planned"))
    assert note.endswith(f"${report.usd_per_month:,.0f}/month, experts split over TP ${report.usd_per_month:,.0f}/month")
    assert not any("expert parallelism costs" in w for w in report.warnings)  # uniform routing: a tie
    assert "candidates.expert_parallel: MoE layers at EP 4 priced from measured kernels" in " ".join(report.notes)
    # long prompts (compute-bound prefills, TTFT binds): a router whose hottest GPU carries 1.5 x
    # the mean makes EP the costlier plan; it is still the plan asked for, with a warning (decode
    # steps, bound by reading the weights, barely feel skew: every expert is read at a large batch)
    req["workload"] = {"arrivals": {"requests_per_s": 60}, "input_tokens": {"constant": 6000}, "output_tokens": {"constant": 50}}
    req["slo"] = {"ttft_p99_ms": 600}
    req["candidates"]["routing_skew"] = 1.5
    skewed = plan(req, base_dir=ROOT / "examples", workers=1)
    assert all("--enable-expert-parallel" in d.vllm_args for d in skewed.deployments)
    assert skewed.usd_per_month == pytest.approx(40_763, abs=1)
    assert any("costs $40,763/month where splitting the experts over TP costs $30,572" in w for w in skewed.warnings)


def test_evaluate_and_simulate_carry_dp_ranks() -> None:
    data = {
        "deployment": {"model": QWEN, "gpu": "h100-sxm", "expert_parallel": True, "data_parallel_size": 4},
        "workload": {"arrivals": {"requests_per_s": 8}, "input_tokens": {"constant": 500}, "output_tokens": {"constant": 100}},
    }
    ev = api.evaluate(data)
    dep = ev.deployment
    assert (dep.replicas, dep.gpus) == (4, 4)
    assert dep.expert_parallel is not None and dep.expert_parallel.ep_size == 4
    sim = api.simulate({**data, "requests": 200})
    assert sim.deployment.expert_parallel is not None and sim.deployment.replicas == 4
    plain = api.evaluate({**data, "deployment": {"model": QWEN, "gpu": "h100-sxm"}})
    assert "expert_parallel" not in plain.deployment.model_dump()


def test_grpc_carries_expert_parallel() -> None:
    from grpc_helpers import quiet_server

    from planner.client import PlannerClient

    data = {
        "deployment": {"model": QWEN, "gpu": "h100-sxm", "expert_parallel": True, "data_parallel_size": 2},
        "workload": {"arrivals": {"requests_per_s": 4}, "input_tokens": {"constant": 500}, "output_tokens": {"constant": 100}},
    }
    req = yaml.safe_load((ROOT / "examples" / "qwen30b-a3b-ep4-h100.yaml").read_text())
    with quiet_server(workers=1) as addr, PlannerClient(addr, timeout_s=60) as c:
        ev = c.evaluate(data)
        planned = c.plan(req)
    assert ev.deployment.expert_parallel.ep_size == 2 and ev.deployment.replicas == 2
    assert all("--enable-expert-parallel" in d.vllm_args for d in planned.deployments)
    assert planned.deployments[0].expert_parallel.experts_per_gpu == 32


def _measured(model: str, tp: int, ep: int, distribution: str = "balanced") -> dict[int, float]:
    """{tokens: ms} of one MoE layer from tests/data/aiconfigurator_moe_h100.csv (its header names
    the source)."""
    import csv

    lines = (ROOT / "tests" / "data" / "aiconfigurator_moe_h100.csv").read_text().splitlines()
    rows = csv.DictReader(line for line in lines if not line.startswith("#"))
    return {
        int(r["num_tokens"]): float(r["latency_ms"])
        for r in rows
        if r["model"] == model
        and (int(r["moe_tp_size"]), int(r["moe_ep_size"])) == (tp, ep)
        and r["distribution"] == distribution
    }


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    return (s[(len(s) - 1) // 2] + s[len(s) // 2]) / 2


def test_measured_kernels_bound_the_ep_equals_tp_claim() -> None:
    """The roofline's EP = TP at uniform routing (test above) against vLLM's measured fused-MoE
    layers: within 6% at the median for Qwen3-30B-A3B's 128 small experts, while Mixtral's 8
    large ones run 1.66x slower at EP 8 (docs/expert-parallel.md states both)."""
    tp4, ep4 = _measured("qwen3-30b-a3b", 4, 1), _measured("qwen3-30b-a3b", 1, 4)
    assert len(tp4) == len(ep4) == 27
    assert _median([ep4[t] / tp4[t] for t in tp4]) == pytest.approx(1.06, abs=0.005)
    tp8, ep8 = _measured("mixtral-8x7b", 8, 1), _measured("mixtral-8x7b", 1, 8)
    assert _median([ep8[t] / tp8[t] for t in tp8]) == pytest.approx(1.66, abs=0.005)


def test_measured_skew_slows_compute_bound_layers() -> None:
    """A skewed router (the table's power_law_1.2) at EP 4 slows the compute-bound layers of 4,096
    tokens and more by 1.18-1.28x, the regime where routing_skew multiplies the expert FLOPs."""
    even, skewed = _measured("qwen3-30b-a3b", 1, 4), _measured("qwen3-30b-a3b", 1, 4, "power_law_1.2")
    ratios = [skewed[t] / even[t] for t in even if t >= 4096]
    assert len(ratios) >= 4 and min(ratios) >= 1.18 and max(ratios) <= 1.28
