"""Beyond one node (planner.costmodel.multinode, docs/multi-node.md): Llama-3.1-405B on TP 8 x
PP 2 H100 SXM against hand derivations from its config.json (126 layers, hidden 16384, 128
query / 8 KV heads of 128, intermediate 53248, vocabulary 128256, 131072 positions) and the
catalog's H100 figures (3.35 TB/s, 1979 fp8 / 989 bf16 TFLOP/s, NVLink 450 GB/s and 8 us per
call, InfiniBand 50 GB/s and 20 us per GPU); then the plan, evaluate, simulate, gRPC and --emit
carrying it."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from planner.catalog.gpus import get_gpu
from planner.catalog.models import get_model
from planner.costmodel.memory import kv_capacity, memory_budget, profile_activation_bytes
from planner.costmodel.multinode import (
    allreduce_link,
    nodes,
    pipeline_coefficients,
    send_coefficients,
    stage_crosses_node,
)
from planner.costmodel.profile import THEORETICAL
from planner.costmodel.profiles import resolve_profile
from planner.costmodel.roofline import Replica
from planner.costmodel.steptime import step_coefficients

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "llama405b-fp8-2x8-h100.yaml"
MODEL = "meta-llama/Llama-3.1-405B-Instruct"
CHECKPOINT = "meta-llama/Llama-3.1-405B-Instruct-FP8"  # Meta's fbgemm_fp8 checkpoint
H, INTER, L, VOCAB, POSITIONS = 16384, 53248, 126, 128256, 131072
BW, FP8, BF16 = 3.35e12, 1979e12, 989e12
NVLINK_BW, NVLINK_S, IB_BW, IB_S = 450e9, 8e-6, 50e9, 20e-6
TOKEN_SENT = 2 * H * 2  # hidden_states and residual, bf16, per token


@pytest.fixture(scope="module")
def m405() -> Any:
    return get_model(MODEL)


@pytest.fixture(scope="module")
def h100() -> Any:
    return get_gpu("h100-sxm")


def replica(tp: int, pp: int, profile: Any = THEORETICAL) -> Replica:
    return Replica(get_model(MODEL), get_gpu("h100-sxm"), tp, "fp8", "bf16", profile, pp=pp)


def test_catalog_has_the_node_and_fabric_figures(h100: Any) -> None:
    assert (h100.nvlink_domain, h100.max_gpus_per_node) == (8, 8)
    assert (h100.inter_node_bandwidth, h100.inter_node_latency) == (IB_BW, IB_S)
    assert "400 Gb/s" in h100.inter_node_bandwidth_bytes_per_s.source
    assert get_gpu("l40s").nvlink_domain == 1 and get_gpu("a100-80gb-sxm").inter_node_bandwidth == 25e9
    assert nodes(h100, 8, 2) == 2 and nodes(h100, 16) == 2 and nodes(h100, 4, 2) == 1


def test_weights_per_gpu_of_the_largest_stage_by_hand() -> None:
    """vLLM's accounting (measured profile): 63 layers of fp8 linear weights split over TP 8 (KV
    projections one head each), their two bf16 norms, one bf16 vocabulary matrix split over TP 8
    (embedding on stage 0, lm_head on stage 1), the bf16 rotary cache and the final norm."""
    layer = (2 * H * H + 3 * H * INTER) // 8 + 2 * H * 128 + 2 * H * 2
    stage = 63 * layer + VOCAB * H * 2 // 8 + POSITIONS * 128 * 2 + H * 2
    assert stage == 25_665_961_984  # 23.9 GiB
    measured = resolve_profile("auto", "h100-sxm", "profile")
    got = memory_budget(replica(8, 2, measured), 0.92, 2048, 256).weight_bytes
    assert got == pytest.approx(stage, rel=1e-12)
    # the theoretical (seed) budget: every parameter at 1 byte over 16 GPUs (126 layers, 2 stages)
    assert replica(8, 2).weight_bytes_per_gpu == pytest.approx(405_853_388_800 / 8 / 2, rel=1e-9)


def test_one_node_weights_against_vllms_log_for_metas_fp8_checkpoint() -> None:
    """Public measurement: vLLM issue #6746 (vllm-project/vllm, 2024-07-24), Llama-3.1-405B-
    Instruct-FP8 on 8 x H100, each TP worker logs "Loading model weights took 57.7520 GB" (vLLM
    divides by 2**30: GiB). The fp8 format alone quantizes every linear layer: 47.78 GiB, 17%
    short. Meta's checkpoint keeps the self-attention projections and the first and last layers'
    MLP in bf16 (its config.json's modules_to_not_convert, in the checkpoint catalog:
    planner.catalog.checkpoints); served as that checkpoint, one more byte a weight for those
    modules (split over TP 8, one KV head a GPU) gives 56.75 GiB, 1.7% short of the log."""
    measured = resolve_profile("auto", "h100-sxm", "profile")
    fmt_only = memory_budget(replica(8, 1, measured), 0.92, 2048, 256).weight_bytes / 2**30
    assert fmt_only == pytest.approx(47.78, abs=0.01)
    r = Replica(get_model(MODEL), get_gpu("h100-sxm"), 8, "fp8", "bf16", measured, checkpoint=CHECKPOINT)
    predicted = memory_budget(r, 0.92, 2048, 256).weight_bytes / 2**30
    attention_bf16 = 126 * (2 * H * H / 8 + 2 * H * 128) / 2**30  # q, o split; k, v one head a GPU
    first_last_mlp_bf16 = 2 * 3 * H * INTER / 8 / 2**30
    assert predicted == pytest.approx(fmt_only + attention_bf16 + first_last_mlp_bf16, rel=1e-12)
    assert predicted == pytest.approx(56.75, abs=0.01)
    assert predicted / 57.7520 - 1 == pytest.approx(-0.017, abs=0.001)
    assert fmt_only / 57.7520 - 1 == pytest.approx(-0.17, abs=0.01)


def test_kv_tokens_by_hand() -> None:
    """A stage caches its 63 layers' KV, one KV head per GPU: 2 x 63 x 128 x 2 bytes a token;
    the cache is whole 16-token blocks of the memory left (vLLM 0.11 budget, measured profile)."""
    measured = resolve_profile("auto", "h100-sxm", "profile")
    r = replica(8, 2, measured)
    assert r.kv_bytes_per_token == 2 * 63 * 1 * 128 * 2 == 32_256
    b = memory_budget(r, 0.92, 2048, 256)
    weights = 25_665_961_984
    left = 85_030_076_416 * 0.92 - weights - profile_activation_bytes(r.model, 8, 2048, 256) - 0.55 * 2**30
    left -= b.cuda_graph_bytes
    tokens = 16 * math.floor(left / (32_256 * 16))
    assert kv_capacity(r, 0.92, 2048, 256).kv_cache_tokens == tokens
    assert 1_500_000 < tokens < 1_600_000  # ~4x one node's: half the weights, half the KV a token
    assert kv_capacity(replica(8, 1, measured), 0.92, 2048, 256).kv_cache_tokens < tokens / 3.9


def test_inter_node_send_bytes_and_placement(h100: Any) -> None:
    """Each of 8 ranks sends its 1/8 of the 64 KiB a token (hidden_states + residual, bf16) over
    its NIC, the receiving stage all-gathers the rest (7/8) over NVLink."""
    per_token, fixed = send_coefficients(get_model(MODEL), h100, 8, 2)
    one_boundary = TOKEN_SENT / 8 / IB_BW + TOKEN_SENT * 7 / 8 / NVLINK_BW
    assert per_token == pytest.approx(one_boundary / 2, rel=1e-12)  # per token of the cycle (2 micro-batches)
    assert fixed == pytest.approx(IB_S + NVLINK_S, rel=1e-12)
    assert TOKEN_SENT / 8 == 8192  # bytes a GPU sends over InfiniBand per token
    # TP 4 x PP 2 fits one node: the send stays on NVLink
    assert not stage_crosses_node(h100, 4, 0)
    # TP 4 x PP 4 on two nodes: only the middle boundary leaves a node
    assert [stage_crosses_node(h100, 4, b) for b in range(3)] == [False, True, False]
    assert stage_crosses_node(h100, 16, 0)  # a stage spanning nodes sends across every boundary


def test_decode_cycle_with_the_bubble_by_hand() -> None:
    """n decodes at context c, theoretical profile: each of the 2 micro-batches of n/2 passes 2
    stages of 63 layers; per cycle the weights are read once per micro-batch per stage (all of a
    TP-8 GPU's share), the KV once; plus 2 x 63 layers x 2 all-reduces a micro-batch and the send."""
    p_total = 405_853_388_800
    n, c = 64, 3000
    w_t = p_total / 8
    mem = (w_t + n * c * 32_256) / BW
    cmp = 0.5 * (2 * p_total / 8 * n / FP8 + 4 * L * 16384 / 8 * n * c / BF16)
    allreduce = 0.5 * 2 * L * (2 * 7 / 8 * H * 2 / NVLINK_BW) * n + 2 * 0.5 * 2 * L * NVLINK_S
    send = (TOKEN_SENT / 8 / IB_BW + TOKEN_SENT * 7 / 8 / NVLINK_BW) / 2 * n + IB_S + NVLINK_S
    cycle = max(mem, cmp) + allreduce + send
    assert replica(8, 2).decode_step(n, c).time_s == pytest.approx(cycle, rel=1e-12)
    # 20.07 ms: 15.14 ms of weights and 1.85 ms of KV (memory-bound), 2.02 ms of all-reduce calls
    assert cycle == pytest.approx(0.02007, rel=1e-3)
    # the bubble: one sequence alone waits the sends beyond TP 8's own step (context 0: the
    # weights read once either way; PP halves the per-token compute and all-reduce traffic)
    one_tp8, one_pp2 = replica(8, 1).decode_step(1, 0).time_s, replica(8, 2).decode_step(1, 0).time_s
    ar_token = 2 * L * (2 * 7 / 8 * H * 2 / NVLINK_BW)
    bubble = IB_S + NVLINK_S + (TOKEN_SENT / 8 / IB_BW + TOKEN_SENT * 7 / 8 / NVLINK_BW) / 2
    assert one_pp2 - one_tp8 == pytest.approx(bubble - 0.5 * ar_token, rel=1e-6)


def test_tp_across_nodes_all_reduces_over_the_fabric(h100: Any) -> None:
    """TP 16 on two nodes: a flat ring whose slowest hop is each GPU's 400 Gb/s NIC."""
    assert allreduce_link(h100, 8) == (NVLINK_BW, NVLINK_S)
    assert allreduce_link(h100, 16) == (IB_BW, IB_S)
    k = replica(16, 1).coefficients
    assert k.allreduce_s == pytest.approx(2 * L * IB_S, rel=1e-12)
    assert k.allreduce_s_per_token == pytest.approx(2 * L * 2 * 15 / 16 * H * 2 / IB_BW, rel=1e-12)


def test_one_stage_is_exactly_the_tp_step(m405: Any, h100: Any) -> None:
    k = step_coefficients(m405, h100, THEORETICAL, 8, "fp8", "bf16")
    assert pipeline_coefficients(k, m405, h100, 8, 1) is k
    assert replica(8, 1).coefficients == k and replica(8, 1).gpus == 8 and replica(8, 2).gpus == 16


def test_evaluate_and_simulate_carry_pp() -> None:
    from planner import api

    dep = {"model": MODEL, "gpu": "h100-sxm", "tp": 8, "pipeline_parallel_size": 2, "weight_dtype": "fp8"}
    dep |= {"max_model_len": 32768, "max_num_batched_tokens": 2048, "max_num_seqs": 64}
    wl = {
        "arrivals": {"requests_per_s": 0.5},
        "input_tokens": {"pairs": [[2000, 1.0]]},
        "output_tokens": {"pairs": [[100, 1.0]]},
    }
    req = {"deployment": dep, "workload": wl, "slo": {"ttft_p99_ms": 5000, "itl_p99_ms": 100}}
    ev = api.evaluate(req)
    assert ev.deployment.pipeline_parallel_size == 2 and ev.deployment.gpus == 16
    assert ev.model_dump()["deployment"]["pipeline_parallel_size"] == 2
    sim = api.simulate({**req, "requests": 30, "seed": 1})
    assert sim.completed == 30 and sim.deployment.pipeline_parallel_size == 2
    # prefill/decode pools stay one stage: a disaggregated PP deployment is refused by name
    from planner.errors import InvalidInput

    pools = {"prefill_replicas": 1, "decode_replicas": 1}
    with pytest.raises(InvalidInput, match="colocated replicas only") as e:
        api.evaluate({**req, "deployment": {**dep, "disaggregated": pools}})
    assert e.value.field == "deployment"
    # without PP the key is absent, as before
    one = {**req, "deployment": {**dep, "pipeline_parallel_size": 1}}
    assert "pipeline_parallel_size" not in api.evaluate(one).model_dump()["deployment"]


def test_the_example_plans_multi_node_replicas_and_emits_the_ray_launch() -> None:
    from planner import api
    from planner.export import emit

    report = api.plan(yaml.safe_load(EXAMPLE.read_text()), workers=1)
    assert report.status == "OPTIMAL"
    (dep,) = report.deployments
    gpus_per_replica = dep.tensor_parallel_size * (dep.pipeline_parallel_size or 1)
    assert gpus_per_replica == 16  # two 8-GPU nodes a replica (the example offers only that shape)
    assert report.gpu_count_peak == dep.replicas_peak * 16
    assert "--distributed-executor-backend" in dep.vllm_args
    text = emit(report, "vllm-args")
    assert "ray start --head --port=6379" in text and "ray start --address=<head-node-ip>:6379" in text
    assert text.splitlines()[-1].startswith("vllm serve meta-llama/Llama-3.1-405B-Instruct-FP8 ")


def test_k8s_makes_a_multi_node_replica_a_leader_worker_set() -> None:
    """vLLM's LWS recipe: per replica one leader (Ray head, then `vllm serve`) and nodes - 1
    workers joining it, one node's GPUs each; the Service reaches the leaders only."""
    from planner import api
    from planner.export import k8s_manifests

    report = api.plan(yaml.safe_load(EXAMPLE.read_text()), workers=1)
    lws, svc = k8s_manifests(report)
    assert (lws["kind"], svc["kind"]) == ("LeaderWorkerSet", "Service") and lws["metadata"]["name"].endswith(
        "-tp8-pp2"
    )
    group = lws["spec"]["leaderWorkerTemplate"]
    assert group["size"] == 2 and lws["spec"]["replicas"] == report.deployments[0].replicas_peak
    leader = group["leaderTemplate"]["spec"]["containers"][0]
    worker = group["workerTemplate"]["spec"]["containers"][0]
    assert (
        leader["resources"]["limits"]["nvidia.com/gpu"]
        == 8
        == worker["resources"]["limits"]["nvidia.com/gpu"]
    )
    assert leader["command"][2].startswith("ray start --head --port=6379 && exec vllm serve ")
    assert "--pipeline-parallel-size 2" in leader["command"][2]
    assert worker["command"][2] == "ray start --address=$(LWS_LEADER_ADDRESS):6379 --block"
    assert svc["spec"]["selector"]["capplan/lws-role"] == "leader"


def test_grpc_carries_the_pp_keys() -> None:
    from planner.server.convert import to_mapping, to_message
    from planner.v1 import planner_service_pb2 as pb

    msg = to_message({"candidates": {"pipeline_parallel_sizes": [1, 2]}}, pb.PlanRequest)
    assert list(msg.candidates.pipeline_parallel_sizes) == [1, 2]  # type: ignore[attr-defined]
    dep = to_message({"deployment": {"pipeline_parallel_size": 2}}, pb.EvaluateRequest)
    assert to_mapping(dep)["deployment"]["pipeline_parallel_size"] == 2


def test_bad_pp_names_the_field() -> None:
    from planner.errors import InvalidInput
    from planner.schema.inputs import validate_request
    from planner.schema.plan_request import PlanRequest

    req = yaml.safe_load(EXAMPLE.read_text())
    req["candidates"]["pipeline_parallel_sizes"] = [1, 17]
    with pytest.raises(InvalidInput) as e:
        validate_request(PlanRequest, req)
    assert e.value.field == "candidates.pipeline_parallel_sizes[1]"


def test_alternatives_carry_pp_only_when_set() -> None:
    from planner.commands.plan import _shape
    from planner.schema.plan_report import AlternativeDeployment

    base = {"gpu": "h100-sxm", "tensor_parallel_size": 8, "role": "colocated", "replicas_peak": 2}
    base |= {"max_num_batched_tokens": 2048, "max_num_seqs": 64}
    assert "pipeline_parallel_size" not in AlternativeDeployment(**base).model_dump()
    two = AlternativeDeployment(**base, pipeline_parallel_size=2).model_dump()
    assert two["pipeline_parallel_size"] == 2
    assert _shape(two) == "h100-sxm TP8 x PP2 (16 GPUs a replica) colocated"
