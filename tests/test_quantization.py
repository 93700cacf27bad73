"""Quantized weight formats (docs/quantization.md): bytes as vLLM loads them, pinned to a hand
derivation and to a vLLM start-up log; step coefficients; refusals naming the field; the flags
and the planner's choice of format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from planner import api
from planner.catalog.gpus import get_gpu
from planner.catalog.models import get_model
from planner.catalog.quantization import linear_bytes_per_weight
from planner.costmodel.memory import GIB, loaded_weight_bytes
from planner.costmodel.profiles import resolve_profile
from planner.costmodel.steptime import step_coefficients
from planner.deployment import Deployment
from planner.errors import InvalidInput

ROOT = Path(__file__).resolve().parents[1]
STARTUP = json.loads((ROOT / "tests" / "data" / "vllm_startup_kv.json").read_text())["observations"]
SERVE_ARGS = json.loads((ROOT / "planner" / "data" / "vllm" / "serve-args-0.11.0.json").read_text())
LLAMA_70B = "meta-llama/Llama-3.1-70B-Instruct"


def test_bytes_per_linear_weight() -> None:
    """value + (scale + zero point) / group: AWQ fp16 scale and 4-bit zero per 128 weights, GPTQ
    (symmetric) the scale only, NVFP4 an fp8 scale per 16, int8 an fp32 scale per output row."""
    assert linear_bytes_per_weight("bf16", 8192) == 2.0
    assert linear_bytes_per_weight("fp8", 8192) == 1.0
    assert linear_bytes_per_weight("int4-awq", 8192) == 0.5 + 2.5 / 128
    assert linear_bytes_per_weight("int4-gptq", 8192) == 0.5 + 2 / 128
    assert linear_bytes_per_weight("int4-gptq", 8192, 32) == 0.5 + 2 / 32
    assert linear_bytes_per_weight("int4-gptq", 8192, -1) == 0.5 + 2 / 8192
    assert linear_bytes_per_weight("nvfp4", 8192, 128) == 0.5 + 1 / 16  # the format fixes 16
    assert linear_bytes_per_weight("int8", 28672) == 1 + 4 / 28672


def test_llama70b_awq_loaded_bytes_by_hand() -> None:
    """Per layer: q 8192x8192, k+v 2x8192x1024, o 8192x8192, gate/up/down 3x8192x28672 =
    855,638,016 linear weights; x 80 = 68,451,041,280 at 0.51953125 B = 35,562,455,040 B.
    bf16: embeddings + lm_head 2 x 128,256 x 8192 x 2 = 4,202,692,608; norms 161 x 8192 x 2 =
    2,637,824; rotary cache 131,072 x 128 x 2 = 33,554,432. Total 39,801,339,904 B (37.07 GiB)."""
    m = get_model(LLAMA_70B)
    assert loaded_weight_bytes(m, 1, "int4-awq", 128) == 39_801_339_904
    assert m.weight_bytes("int4-awq") == 35_562_455_040 + 4_202_692_608 + 2_637_824  # no rotary cache


def test_bf16_and_fp8_keep_their_accounting() -> None:
    """Every parameter at 2 or 1 bytes in what a step reads: the seed's figures do not move."""
    m = get_model(LLAMA_70B)
    assert m.weight_bytes("bf16") == m.total_params * 2
    assert m.weight_bytes("fp8") == m.total_params
    moe = get_model("Qwen/Qwen3-30B-A3B")
    dense, experts, _ = moe.weight_bytes_parts("fp8")
    assert (dense, experts) == (moe.dense_params, moe.layers * moe.num_experts * moe.expert_params)


def _logged(entry_id: str) -> dict[str, Any]:
    (o,) = [o for o in STARTUP if o["id"] == entry_id]
    return o


def test_mixtral_gptq_weights_match_the_vllm_log() -> None:
    """vLLM PR #23066: 'Model loading took 11.0802 GiB' per GPU, Mixtral-8x7B GPTQ on gptq_marlin at
    TP 2. Without grouping (g -1) the formula gives 11.075 GiB; at g 128, 11.40 GiB (+2.9%)."""
    o = _logged("vllm-pr23066-mixtral-8x7b-gptq-tp2")
    m = get_model(o["same_shape_as_catalog"])
    logged = o["logged"]["model_weights_gib"]
    channelwise = loaded_weight_bytes(m, o["tp"], "int4-gptq", -1) / GIB
    grouped = loaded_weight_bytes(m, o["tp"], "int4-gptq", 128) / GIB
    assert channelwise == pytest.approx(logged, rel=0.01)
    assert grouped == pytest.approx(logged, rel=0.05)


def test_decode_reads_fewer_bytes_and_int4_keeps_the_bf16_rate() -> None:
    m, g = get_model(LLAMA_70B), get_gpu("h100-sxm")
    prof = resolve_profile("theoretical", g.name, "profile")
    bf16 = step_coefficients(m, g, prof, 1, "bf16")
    awq = step_coefficients(m, g, prof, 1, "int4-awq")
    int8 = step_coefficients(m, g, prof, 1, "int8")
    assert awq.weight_bytes == m.weight_bytes("int4-awq")
    assert awq.weight_bytes / bf16.weight_bytes == pytest.approx(0.2815, abs=1e-3)  # 39.77 / 141.1 GB
    assert awq.linear_s_per_token == bf16.linear_s_per_token  # dequantized to bf16 in Marlin
    assert int8.linear_s_per_token == pytest.approx(bf16.linear_s_per_token * 989e12 / 1979e12)
    b200 = get_gpu("b200")
    fp4 = step_coefficients(m, b200, resolve_profile("theoretical", "b200", "profile"), 1, "nvfp4")
    # the FP4 rate times the measured NVFP4/bf16 GEMM efficiency ratio (aiconfigurator, B200)
    assert fp4.linear_s_per_token == pytest.approx(2 * m.active_params / (9e15 * 0.6285))


@pytest.mark.parametrize(
    ("gpu", "fmt", "reason"),
    [("h100-sxm", "nvfp4", "FP4 tensor cores"), ("mi300x", "int4-awq", "CUDA-only")],
)
def test_unsupported_format_is_refused_naming_the_field(gpu: str, fmt: str, reason: str) -> None:
    dep = Deployment(model="Qwen/Qwen3-8B", gpu=gpu, weight_dtype=fmt)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput) as e:
        dep.resolve()
    assert e.value.field == "deployment.weight_dtype"
    assert reason in e.value.reason


def test_group_size_is_one_marlin_takes() -> None:
    with pytest.raises(InvalidInput) as e:
        Deployment.from_mapping({"model": LLAMA_70B, "gpu": "h100-sxm", "weight_group_size": 100})
    assert e.value.field == "deployment.weight_group_size"


def test_awq_fits_one_h100_where_bf16_does_not() -> None:
    """37.07 GiB of weights leave the KV cache vLLM's budget gives: 0.92 x 79.19 GiB less the
    weights, the profile run's peak and the non-torch memory."""
    r = Deployment(model=LLAMA_70B, gpu="h100-sxm", weight_dtype="int4-awq").resolve()
    assert r.kv.weight_bytes == 39_801_339_904
    assert 25 * GIB < r.kv.kv_cache_bytes < 35 * GIB
    with pytest.raises(InvalidInput):
        Deployment(model=LLAMA_70B, gpu="h100-sxm").resolve()


def test_example_plans_awq_with_flags_vllm_accepts() -> None:
    """examples/llama70b-awq-h100.yaml: AWQ chosen over bf16, the checkpoint served, the
    --quantization value one of vLLM 0.11's choices, the quality warning."""
    from planner.yamlfile import read_mapping_file

    req = read_mapping_file(ROOT / "examples" / "llama70b-awq-h100.yaml", "model: and workload:")
    report = api.plan(req, base_dir=ROOT / "examples", workers=1)
    assert report.status == "OPTIMAL"
    assert report.served_model == "hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4"
    (dep,) = report.deployments
    assert dep.weight_dtype == "int4-awq" and dep.tensor_parallel_size == 1
    args = dep.vllm_args
    q = args[args.index("--quantization") + 1]
    assert q == "awq_marlin" and q in SERVE_ARGS["arguments"]["--quantization"]["choices"]
    assert dep.vllm_command.startswith("vllm serve hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4 ")
    assert any("the user's call" in w for w in report.warnings)
    assert any(n.startswith("candidates.weight_dtypes: int4-awq chosen") for n in report.notes)


def test_every_format_flag_is_one_vllm_accepts() -> None:
    from planner.catalog.quantization import FORMATS

    choices = SERVE_ARGS["arguments"]["--quantization"]["choices"]
    assert {f.vllm_quantization for f in FORMATS.values()} - {None} <= set(choices)


def test_evaluate_says_a_quantized_rate_is_a_roofline() -> None:
    report = api.evaluate(
        {
            "deployment": {"model": LLAMA_70B, "gpu": "h100-sxm", "weight_dtype": "int4-gptq"},
            "workload": {"arrivals": {"requests_per_s": 1}, "input_tokens": 1000, "output_tokens": 200},
        }
    )
    assert report.deployment.weight_dtype == "int4-gptq"
    assert "roofline" in (report.deployment.profile_warning or "")
