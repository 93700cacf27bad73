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
