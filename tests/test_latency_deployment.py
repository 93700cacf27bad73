"""planner.deployment: vLLM defaults per GPU, validation naming the field, resolution."""

from __future__ import annotations

import pydantic
import pytest

from planner.costmodel.profile import THEORETICAL, Profile
from planner.deployment import (
    DEFAULT_KV_TRANSFER_BANDWIDTH_BYTES_PER_S,
    Deployment,
)
from planner.errors import InvalidInput


@pytest.mark.parametrize(
    ("gpu", "budget", "seqs"),
    [("h100-sxm", 8192, 1024), ("h200-sxm", 8192, 1024), ("a100-80gb-sxm", 2048, 256), ("l40s", 2048, 256)],
)
def test_vllm_defaults_per_gpu(gpu: str, budget: int, seqs: int) -> None:
    r = Deployment(model="Qwen/Qwen3-8B", gpu=gpu).resolve()
    assert (r.max_num_batched_tokens, r.max_num_seqs) == (budget, seqs)
    assert r.spec.gpu_memory_utilization == 0.92
    assert r.long_prefill_token_threshold == 0
    assert r.usd_per_gpu_hour == r.gpu.price
    assert r.kv.kv_cache_blocks > 0


def test_explicit_values_and_cost() -> None:
    d = Deployment(
        model="Qwen/Qwen3-8B",
        gpu="h100-sxm",
        tp=2,
        replicas=3,
        max_num_seqs=64,
        max_num_batched_tokens=2048,
        usd_per_gpu_hour=2.5,
    )
    r = d.resolve()
    assert (r.max_num_batched_tokens, r.max_num_seqs) == (2048, 64)
    assert r.gpus == 6 and r.usd_per_hour == pytest.approx(15.0)
    assert r.mode == "colocated" and not r.disaggregated and r.total_replicas == 3


def test_disaggregated() -> None:
    d = Deployment.from_mapping(
        {
            "model": "Qwen/Qwen3-8B",
            "gpu": "h100-sxm",
            "disaggregated": {"prefill_replicas": 2, "decode_replicas": 5},
        }
    )
    assert d.mode == "disaggregated" and d.total_replicas == 7
    r = d.resolve()
    assert (r.prefill_replicas, r.decode_replicas) == (2, 5)
    assert r.kv_transfer_bandwidth_bytes_per_s == DEFAULT_KV_TRANSFER_BANDWIDTH_BYTES_PER_S
    assert r.usd_per_hour == pytest.approx(7 * r.gpu.price)


def test_frozen_and_strict() -> None:
    d = Deployment(model="Qwen/Qwen3-8B", gpu="h100-sxm")
    with pytest.raises(pydantic.ValidationError):
        d.tp = 2
    with pytest.raises(InvalidInput) as e:
        Deployment.from_mapping({"model": "Qwen/Qwen3-8B", "gpu": "h100-sxm", "replica": 2})
    assert e.value.field == "deployment.replica"


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"gpu": "h100-sxm"}, "deployment.model"),
        ({"model": "Qwen/Qwen3-8B", "gpu": "h100-sxm", "tp": 0}, "deployment.tp"),
        (
            {"model": "Qwen/Qwen3-8B", "gpu": "h100-sxm", "gpu_memory_utilization": 1.2},
            "deployment.gpu_memory_utilization",
        ),
        (
            {"model": "Qwen/Qwen3-8B", "gpu": "h100-sxm", "long_prefill_token_threshold": -1},
            "deployment.long_prefill_token_threshold",
        ),
        ({"model": "Qwen/Qwen3-8B", "gpu": "h100-sxm", "weight_dtype": "int4"}, "deployment.weight_dtype"),
        ({"model": "Qwen/Qwen3-8B", "gpu": "h100-sxm", "usd_per_gpu_hour": 0}, "deployment.usd_per_gpu_hour"),
        (
            {"model": "Qwen/Qwen3-8B", "gpu": "h100-sxm", "disaggregated": {"prefill_replicas": 1}},
            "deployment.disaggregated.decode_replicas",
        ),
        (
            {
                "model": "Qwen/Qwen3-8B",
                "gpu": "h100-sxm",
                "disaggregated": {
                    "prefill_replicas": 1,
                    "decode_replicas": 1,
                    "kv_transfer_bandwidth_bytes_per_s": 0,
                },
            },
            "deployment.disaggregated.kv_transfer_bandwidth_bytes_per_s",
        ),
    ],
)
def test_validation_names_the_field(data: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInput) as e:
        Deployment.from_mapping(data)
    assert e.value.field == field


def test_resolution_errors_name_the_field() -> None:
    with pytest.raises(InvalidInput) as e:
        Deployment(model="Qwen/Qwen3-8B", gpu="b300").resolve()
    assert e.value.field == "deployment.gpu"
    with pytest.raises(InvalidInput) as e:
        Deployment(model="Qwen/Qwen3-8B", gpu="h100-sxm", max_num_seqs=9000).resolve()
    assert e.value.field == "deployment.max_num_seqs" and "8192" in e.value.reason
    with pytest.raises(InvalidInput) as e:
        Deployment(model="meta-llama/Llama-3.1-70B-Instruct", gpu="h100-sxm").resolve()
    assert e.value.field == "deployment.tp" and "leave no KV cache" in e.value.reason
    assert (
        Deployment(model="meta-llama/Llama-3.1-70B-Instruct", gpu="h100-sxm", tp=2)
        .resolve()
        .kv.kv_cache_blocks
        > 0
    )


def test_profile_for_another_gpu_is_refused() -> None:
    other = Profile(name="x", gpu="h200-sxm")
    with pytest.raises(InvalidInput) as e:
        Deployment(model="Qwen/Qwen3-8B", gpu="h100-sxm").resolve(other)
    assert e.value.field == "profile"
    assert (
        Deployment(model="Qwen/Qwen3-8B", gpu="h100-sxm").resolve(THEORETICAL).replica.profile is THEORETICAL
    )


# ---- ranges, feasibility, one scheduler config --------------------------------------------------


@pytest.mark.parametrize(
    ("data", "field", "limit"),
    [
        ({"tp": 65}, "deployment.tp", "64"),
        ({"tp": 0}, "deployment.tp", "1"),
        ({"replicas": 100_001}, "deployment.replicas", "100000"),
        ({"max_num_seqs": 65_537}, "deployment.max_num_seqs", "65536"),
        ({"max_num_batched_tokens": 2**20 + 1}, "deployment.max_num_batched_tokens", "1048576"),
        ({"long_prefill_token_threshold": 2**20 + 1}, "deployment.long_prefill_token_threshold", "1048576"),
        ({"gpu_memory_utilization": 1.01}, "deployment.gpu_memory_utilization", "1"),
        ({"gpu_memory_utilization": 0}, "deployment.gpu_memory_utilization", "0"),
        ({"usd_per_gpu_hour": 1000.5}, "deployment.usd_per_gpu_hour", "1000"),
        (
            {
                "disaggregated": {
                    "prefill_replicas": 1,
                    "decode_replicas": 1,
                    "kv_transfer_bandwidth_bytes_per_s": 1e14,
                }
            },
            "deployment.disaggregated.kv_transfer_bandwidth_bytes_per_s",
            "10000000000000",
        ),
        (
            {
                "disaggregated": {
                    "prefill_replicas": 1,
                    "decode_replicas": 1,
                    "kv_transfer_bandwidth_bytes_per_s": 1e5,
                }
            },
            "deployment.disaggregated.kv_transfer_bandwidth_bytes_per_s",
            "1000000",
        ),
        (
            {"disaggregated": {"prefill_replicas": 1, "decode_replicas": 1, "kv_transfer_latency_s": 11}},
            "deployment.disaggregated.kv_transfer_latency_s",
            "10",
        ),
        (
            {"disaggregated": {"prefill_replicas": 100_001, "decode_replicas": 1}},
            "deployment.disaggregated.prefill_replicas",
            "100000",
        ),
    ],
)
def test_out_of_range_names_the_field_and_the_limit(data: dict[str, object], field: str, limit: str) -> None:
    with pytest.raises(InvalidInput) as e:
        Deployment.from_mapping({"model": "Qwen/Qwen3-8B", "gpu": "h100-sxm", **data})
    assert e.value.field == field
    assert e.value.reason.endswith(f" {limit}")


def test_an_oversized_budget_is_blamed_not_tp() -> None:
    """Qwen3-8B fits one H100 with room to spare; a 1M-token budget's activations do not."""
    with pytest.raises(InvalidInput) as e:
        Deployment(model="Qwen/Qwen3-8B", gpu="h100-sxm", max_num_batched_tokens=1_048_576).resolve()
    assert e.value.field == "deployment.max_num_batched_tokens"
    assert "1048576-token step" in e.value.reason


def test_feasibility_lists_every_reason_with_its_field() -> None:
    from planner.catalog.gpus import get_gpu
    from planner.catalog.models import get_model
    from planner.costmodel.feasibility import Infeasibility, feasibility

    qwen8, l40s, h100 = get_model("Qwen/Qwen3-8B"), get_gpu("l40s"), get_gpu("h100-sxm")
    llama70 = get_model("meta-llama/Llama-3.1-70B-Instruct")
    assert feasibility(qwen8, h100, 1) == []
    # 32 query heads do not split over 3 GPUs; 3 GPUs also fit (node of 8): one reason
    assert [p.field for p in feasibility(qwen8, h100, 3)] == ["tp"]
    # 16 = two whole 8-GPU nodes: a TP group across nodes vLLM runs over Ray (multinode.py)
    assert feasibility(qwen8, h100, 16) == []
    # 12 > 8 fills no whole nodes (and 32 heads do not split over 12): the node's reason first
    assert [(p.field, "node" in p.reason) for p in feasibility(qwen8, h100, 12)] == [("tp", True), ("tp", False)]
    # more stages than layers (Qwen3-8B has 36)
    assert [p.field for p in feasibility(qwen8, h100, 1, pp=37)] == ["pipeline_parallel_size"]
    # the budget below max_num_seqs: blame the one the caller gave
    assert feasibility(qwen8, h100, 1, max_num_batched_tokens=512) == [
        Infeasibility(
            "max_num_batched_tokens", "vLLM requires max_num_batched_tokens (512) >= max_num_seqs (1024)"
        )
    ]
    assert [p.field for p in feasibility(qwen8, h100, 1, max_num_seqs=9000)] == ["max_num_seqs"]
    # 70B in bf16 on one L40S: 131 GiB of weights, 44.7 GiB of memory -> refused, raise tp
    (weights,) = feasibility(llama70, l40s, 1)
    assert weights.field == "tp" and "131.4 GiB" in weights.reason
    # ... still at TP 2 (66 GiB each), fits at TP 4 (33 GiB each, 41 GiB usable)
    assert [p.field for p in feasibility(llama70, l40s, 2)] == ["tp"]
    assert feasibility(llama70, l40s, 4) == []
    # fp8 weights halve them: 32.9 GiB on each of 2 GPUs fits
    assert feasibility(llama70, l40s, 2, weight_dtype="fp8") == []
    # several reasons at once, in a fixed order
    many = feasibility(llama70, l40s, 3, max_num_batched_tokens=100, max_num_seqs=200)
    assert [p.field for p in many] == ["tp", "max_num_batched_tokens", "tp"]


def test_resolve_refuses_what_feasibility_refuses() -> None:
    with pytest.raises(InvalidInput) as e:
        Deployment(model="meta-llama/Llama-3.1-70B-Instruct", gpu="l40s").resolve()
    assert e.value.field == "deployment.tp" and "leave no KV cache" in e.value.reason


def test_one_scheduler_config_for_the_latency_model_and_the_simulator() -> None:
    from planner.latency import LatencyModel, WorkloadStats
    from planner.scheduler_config import SchedulerConfig
    from planner.simulate.run import engine_config
    from planner.vllm_defaults import BLOCK_SIZE_TOKENS
    from planner.workload import Workload

    r = Deployment(
        model="Qwen/Qwen3-8B", gpu="h100-sxm", max_num_seqs=64, long_prefill_token_threshold=512
    ).resolve(THEORETICAL)
    s = r.scheduler
    assert isinstance(s, SchedulerConfig)
    assert (s.max_num_seqs, s.max_num_batched_tokens, s.long_prefill_token_threshold) == (64, 8192, 512)
    assert s.kv_cache_blocks == r.kv.kv_cache_blocks and s.block_size == BLOCK_SIZE_TOKENS == 16
    assert s.kv_cache_tokens == r.kv.kv_cache_tokens and s.prefix_cache_hit_fraction == 0.0
    sim = engine_config(r, 0.25)
    assert sim == SchedulerConfig(**{**s.to_dict(), "prefix_cache_hit_fraction": 0.25})
    w = Workload.from_mapping({"arrivals": {"requests_per_s": 1}, "input_tokens": 500, "output_tokens": 50})
    engine = LatencyModel(r, WorkloadStats.of(w)).engines["colocated"]
    assert engine.config is s
