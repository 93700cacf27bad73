"""LoRA (vLLM --enable-lora): the adapter buffers vLLM 0.11 allocates, the KV cache they leave,
their per-step cost, the ranges of the keys, the flags and the reports. The buffer shapes are
vLLM 0.11's (vllm/lora/layers/base_linear.py `create_lora_weights`: A is max_loras x rank x
input, B max_loras x output x rank, per slice; column-parallel layers shard B's output,
row-parallel ones A's input; vllm/config/lora.py: MaxLoRARanks, max_loras >= 1,
max_cpu_loras >= max_loras); docs/kv-capacity.md, "LoRA adapters"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from planner.catalog.gpus import get_gpu
from planner.catalog.models import get_model
from planner.costmodel.lora import LoraConfig, lora_buffer_bytes, lora_step_bytes, lora_step_flops_per_token
from planner.costmodel.memory import kv_capacity, memory_budget
from planner.costmodel.profile import THEORETICAL
from planner.costmodel.roofline import Replica
from planner.costmodel.steptime import step_coefficients
from planner.deployment import Deployment
from planner.errors import InvalidInput
from planner.plan import plan

ROOT = Path(__file__).resolve().parent.parent
LLAMA8B = "meta-llama/Llama-3.1-8B-Instruct"
EIGHT_64 = LoraConfig(max_loras=8, max_lora_rank=64)


def test_llama8b_buffers_by_hand() -> None:
    """Llama-3.1-8B (h 4096, 32 query / 8 KV heads of 128, I 14336, 32 layers, vocab 128256),
    TP 1, rank 64, bf16. Per layer and adapter, elements / rank:
      qkv A 3 x 4096 = 12288, B 4096 + 2 x 1024 = 6144; o A 4096, B 4096;
      gate_up A 2 x 4096 = 8192, B 2 x 14336 = 28672; down A 14336, B 4096  -> 81920.
    Embedding: A (128256 + 256) x 64, B 4096 x 64, extra vocab 256 x 4096;
    logits: A 64 x 4096, B 128256 (a multiple of 256) x 64, extra vocab 256 x 4096."""
    m = get_model(LLAMA8B)
    layers = 32 * 64 * 81920
    embed = (128256 + 256) * 64 + 4096 * 64 + 256 * 4096
    logits = 64 * 4096 + 128256 * 64 + 256 * 4096
    per_adapter = layers + embed + logits  # 186,826,752 elements
    assert per_adapter == 186_826_752
    assert lora_buffer_bytes(m, 1, EIGHT_64) == 8 * per_adapter * 2  # 2.78 GiB
    assert lora_buffer_bytes(m, 1, None) == 0.0


def test_tp_shards_b_of_column_and_a_of_row_layers() -> None:
    """TP 2: per layer / rank: qkv A 12288 (whole), B 2048 + 2 x 512 = 3072; o A 2048, B 4096;
    gate_up A 8192, B 2 x 7168 = 14336; down A 7168, B 4096 -> 55296. Embeddings whole."""
    m = get_model(LLAMA8B)
    one = LoraConfig(max_loras=1, max_lora_rank=64)
    embed_logits = ((128256 + 256) * 64 + 4096 * 64 + 256 * 4096) + (64 * 4096 + 128256 * 64 + 256 * 4096)
    assert lora_buffer_bytes(m, 2, one) == (32 * 64 * 55296 + embed_logits) * 2


def test_moe_adapts_attention_only() -> None:
    """vLLM 0.11 has no LoRA for fused-MoE experts: Qwen3-30B-A3B's layers carry only q/k/v/o
    (h 2048, 32 query heads x 128 = 4096, 4 KV heads x 128 = 512): 3 x 2048 + 4096 + 2 x 512 +
    4096 + 2048 = 17408 per rank and layer."""
    m = get_model("Qwen/Qwen3-30B-A3B")
    one = LoraConfig(max_loras=1, max_lora_rank=8)
    assert lora_step_flops_per_token(m, 1, one) == 2 * m.layers * 8 * 17408


def test_kv_left_is_the_budget_less_the_buffers() -> None:
    """The KV cache loses exactly the buffers (the shrink buffer hides under the sampler's peak at
    vLLM's defaults); without LoRA the budget is the one before LoRA existed, field for field."""
    m, g = get_model(LLAMA8B), get_gpu("h100-sxm")
    profile = Deployment(model=LLAMA8B, gpu="h100-sxm").resolve().replica.profile
    plain = memory_budget(Replica(m, g, profile=profile), 0.92, 8192, 1024)
    with_lora = memory_budget(Replica(m, g, profile=profile, lora=EIGHT_64), 0.92, 8192, 1024)
    assert plain.lora_bytes == 0.0
    assert with_lora.activation_bytes == plain.activation_bytes
    assert plain.available_bytes - with_lora.available_bytes == pytest.approx(8 * 186_826_752 * 2, abs=1)
    # 433,984 -> 411,168 tokens: 2.78 GiB at 128 KiB a token is 22,816 tokens (1,426 blocks)
    assert kv_capacity(Replica(m, g, profile=profile), 0.92, 8192, 1024).kv_cache_tokens == 433_984
    assert (
        kv_capacity(Replica(m, g, profile=profile, lora=EIGHT_64), 0.92, 8192, 1024).kv_cache_tokens
        == 411_168
    )


def test_the_seed_budget_also_pays_for_adapters() -> None:
    m, g = get_model(LLAMA8B), get_gpu("h100-sxm")
    b = memory_budget(Replica(m, g, lora=EIGHT_64), 0.92, 8192, 1024)
    assert b.vllm_version is None and b.lora_bytes == lora_buffer_bytes(m, 1, EIGHT_64)


def test_step_pays_adapter_flops_and_reads() -> None:
    """Per token: 2 x the per-layer elements over 32 layers, plus the lm_head adapter's
    2 x 64 x (4096 + 128256) (theoretical profile: every row gets logits); per step every
    adapter's linear and logits buffers once (8 x (32 x 64 x 81920 + 64 x 4096 + 128256 x 64) x 2
    bytes). Without LoRA the coefficients are the ones before LoRA existed."""
    m, g = get_model(LLAMA8B), get_gpu("h100-sxm")
    base = step_coefficients(m, g, THEORETICAL)
    k = step_coefficients(m, g, THEORETICAL, lora=EIGHT_64)
    assert step_coefficients(m, g, THEORETICAL, lora=None) == base
    flops = 2 * 32 * 64 * 81920 + 2 * 64 * (4096 + 128256)
    assert k.linear_flops_per_token - base.linear_flops_per_token == pytest.approx(flops, rel=1e-12)
    read = 8 * (32 * 64 * 81920 + 64 * 4096 + 128256 * 64) * 2
    assert lora_step_bytes(m, 1, EIGHT_64) == read
    assert k.weight_bytes - base.weight_bytes == pytest.approx(read, rel=1e-12)


@pytest.mark.parametrize(
    ("lora", "field", "reason"),
    [
        ({"max_loras": 8, "max_lora_rank": 48}, "deployment.lora.max_lora_rank", "not a rank vLLM accepts"),
        ({"max_loras": 0, "max_lora_rank": 16}, "deployment.lora.max_loras", "greater than or equal to 1"),
        ({"max_loras": 257, "max_lora_rank": 16}, "deployment.lora.max_loras", "less than or equal to 256"),
        ({"max_loras": 4, "max_lora_rank": 16, "max_cpu_loras": 2}, "deployment.lora", "max_cpu_loras (2)"),
        ({"max_lora_rank": 16}, "deployment.lora.max_loras", "required"),
        ({"max_loras": 4, "max_lora_rank": 16, "rank": 8}, "deployment.lora.rank", "not permitted"),
    ],
)
def test_bad_lora_input_names_the_field(lora: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(InvalidInput) as exc:
        Deployment.from_mapping({"model": LLAMA8B, "gpu": "h100-sxm", "lora": lora})
    assert exc.value.field == field
    assert reason in exc.value.reason


def test_adapters_that_do_not_fit_are_refused() -> None:
    """256 adapters of rank 512 on an 8B (about 380 GiB of buffers) leave no KV cache."""
    d = Deployment(model=LLAMA8B, gpu="h100-sxm", lora=LoraConfig(max_loras=256, max_lora_rank=512))
    with pytest.raises(InvalidInput) as exc:
        d.resolve()
    assert exc.value.field == "deployment.tp" and "LoRA adapters" in exc.value.reason


def test_the_example_plans_with_lora_flags_and_reports_the_memory() -> None:
    req = yaml.safe_load((ROOT / "examples" / "llama8b-lora-h100.yaml").read_text())
    report = plan(req, base_dir=ROOT / "examples", workers=1)
    assert report.status == "OPTIMAL"
    plain = plan({k: v for k, v in req.items() if k != "lora"}, base_dir=ROOT / "examples", workers=1)
    for dep in report.deployments:
        args = dep.vllm_args
        i = args.index("--enable-lora")
        assert args[i : i + 5] == ["--enable-lora", "--max-loras", "8", "--max-lora-rank", "64"]
        assert dep.lora is not None
        assert dep.lora.adapter_gib == pytest.approx(8 * 186_826_752 * 2 / 2**30)
        assert dep.lora.kv_cache_tokens > 0
    assert all(d.lora is None and "--enable-lora" not in d.vllm_args for d in plain.deployments)
    # the adapters' reads slow every step: a replica serves less within the same SLOs
    cap = {(d.gpu, d.role): d.requests_per_s_per_replica for d in plain.deployments}
    for d in report.deployments:
        if (d.gpu, d.role) in cap:
            assert d.requests_per_s_per_replica < cap[(d.gpu, d.role)]
