"""Marlin's GEMM efficiency (planner.catalog.quantization.marlin_efficiency): fp8 weights on a GPU
without fp8 tensor cores (vLLM's FP8 Marlin, W8A16) and int4 AWQ/GPTQ (Marlin W4A16) run their
compute-bound GEMMs slower than cuBLAS bf16 at the same tensor-core rate. Pinned to the published
A800-SXM4-80GB times (planner/catalog/data/kernels/marlin-a800-n8192-k8192.json, copied from
mgoin/humming at ff6442d7: benchmarks/results/a800/dense_n8192_k8192_g0/*.json, 'time' in ms)."""

from __future__ import annotations

import dataclasses
from statistics import median

import numpy as np
import pytest

from planner import api
from planner.catalog.gpus import get_gpu
from planner.catalog.models import get_model
from planner.catalog.quantization import (
    gemm_efficiency,
    marlin_points,
    marlin_table,
    quantized_warnings,
    rate_warning,
)
from planner.costmodel.profiles import resolve_profile
from planner.costmodel.steptime import batch_time_s, decode_run_time_s, step_coefficients

A100 = "a100-80gb-sxm"
QWEN32B = "Qwen/Qwen3-32B"
# The source's 'time' (ms) at the compute-bound m (>= 4096), as published:
# torch_w16a16_float16.json, marlin_w8a16_int8_float16.json, marlin_w4a16_int4_float16.json.
TORCH_MS = {4096: 2.1725535870672346, 8192: 4.254940795898437, 16384: 8.88370217503728}
W8A16_MS = {4096: 2.7282098508216968, 8192: 5.47040732180486, 16384: 10.971046812078926}
W4A16_MS = {4096: 2.4660066808621908, 8192: 4.94925232976675, 16384: 9.91735914018419}


def test_the_table_holds_the_published_times() -> None:
    t = marlin_table()
    for m in TORCH_MS:
        assert t["torch_w16a16"][str(m)] == TORCH_MS[m]
        assert t["marlin_w8a16"][str(m)] == W8A16_MS[m]
        assert t["marlin_w4a16"][str(m)] == W4A16_MS[m]
    # the same 15 m (1 .. 16384, powers of two) in every column
    assert {len(col) for col in t.values()} == {15}


def test_efficiency_is_the_median_time_ratio_at_compute_bound_m() -> None:
    """By hand: t_bf16 / t_marlin at m = 4096, 8192, 16384 is 0.7963, 0.7778, 0.8097 (W8A16) and
    0.8810, 0.8597, 0.8958 (W4A16); the medians are the 4096 ratios."""
    w8 = median(TORCH_MS[m] / W8A16_MS[m] for m in TORCH_MS)
    w4 = median(TORCH_MS[m] / W4A16_MS[m] for m in TORCH_MS)
    assert w8 == pytest.approx(0.7963, abs=1e-4) and w4 == pytest.approx(0.8810, abs=1e-4)
    assert gemm_efficiency("fp8", A100) == pytest.approx(w8, rel=1e-12)
    assert gemm_efficiency("int4-awq", A100) == gemm_efficiency("int4-gptq", A100) == pytest.approx(w4, rel=1e-12)


def test_only_the_gpu_the_table_times_and_only_marlin_formats() -> None:
    """fp8 on an H100 is CUTLASS W8A8 at the fp8 rate (not Marlin); int4 on an H100 is Marlin,
    but untimed there (the roofline, warned); bf16 and int8 are not Marlin."""
    assert gemm_efficiency("fp8", "h100-sxm") == 1.0
    assert gemm_efficiency("int4-awq", "h100-sxm") == 1.0
    assert gemm_efficiency("bf16", A100) == gemm_efficiency("int8", A100) == 1.0
    assert rate_warning("int4-awq", (A100,)) is None
    assert rate_warning("int4-awq", ("h100-sxm",)) is not None
    assert rate_warning("int4-awq", (A100, "h100-sxm")) is not None  # one GPU untimed
    assert rate_warning("int4-awq") is not None  # no GPU named: any
    assert rate_warning("int8", (A100,)) is not None  # CUTLASS int8: no table
    assert len(quantized_warnings("int4-gptq", [A100])) == 1  # quality only
    assert len(quantized_warnings("int4-gptq", ["h100-sxm"])) == 2


def test_a100_fp8_gemms_slower_weights_still_one_byte() -> None:
    """The compute term takes the efficiency; the bytes a step reads stay the format's."""
    m, g = get_model(QWEN32B), get_gpu(A100)
    prof = resolve_profile("theoretical", A100, "profile")
    bf16 = step_coefficients(m, g, prof, 1, "bf16")
    fp8 = step_coefficients(m, g, prof, 1, "fp8")
    assert fp8.linear_s_per_token == pytest.approx(bf16.linear_s_per_token / gemm_efficiency("fp8", A100))
    assert fp8.linear_s_per_token == pytest.approx(2 * m.active_params / (312e12 * prof.eta_matmul * 0.7963), rel=1e-4)
    assert fp8.weight_bytes == m.weight_bytes("fp8")
    assert fp8.weight_bytes < 0.51 * bf16.weight_bytes


def test_evaluate_on_a100_does_not_call_a_measured_rate_a_roofline() -> None:
    report = api.evaluate(
        {
            "deployment": {"model": QWEN32B, "gpu": A100, "weight_dtype": "int4-gptq"},
            "workload": {"arrivals": {"requests_per_s": 1}, "input_tokens": 1000, "output_tokens": 200},
        }
    )
    assert "roofline" not in (report.deployment.profile_warning or "")


def test_points_by_tokens_by_hand() -> None:
    """Below m = 4096 the efficiency is the table's ratio at each m (above 1 where Marlin, reading
    half or a quarter of the bytes, is the faster); m = 512 is left out: cuBLAS ran it at 139.7
    TFLOPS after 207.8 at m = 256 (0.4919 ms > 2 x 0.1654 / 0.9), a dip a smooth bf16 profile
    does not follow."""
    t = marlin_table()
    points = dict(marlin_points("marlin_w8a16"))
    assert sorted(points) == [1, 2, 4, 8, 16, 32, 64, 128, 256, 1024, 2048, 4096]
    assert points[1] == pytest.approx(0.10894155291950001 / 0.06377756763428163)  # 1.708
    assert points[256] == pytest.approx(0.1653531754100202 / 0.1858722193912978)  # 0.890
    assert points[4096] == gemm_efficiency("fp8", A100)
    assert t["torch_w16a16"]["512"] * 0.9 > 2 * t["torch_w16a16"]["256"]
    assert dict(marlin_points("marlin_w4a16"))[1] == pytest.approx(0.10894155291950001 / 0.042895356330507874)


def test_the_step_formula_takes_marlins_rate_at_the_steps_tokens() -> None:
    """The linear term (phantom tokens included) times plateau / efficiency(t), efficiency
    interpolated in log t: at 512 tokens, half way (in log) between 256 and 1024."""
    m, g = get_model(QWEN32B), get_gpu(A100)
    prof = resolve_profile("auto", A100)
    k = step_coefficients(m, g, prof, 1, "fp8")
    assert k.linear_rate is not None
    points = dict(marlin_points("marlin_w8a16"))
    plateau = points[4096]
    assert k.linear_rate.factor(512) == pytest.approx(plateau / ((points[256] + points[1024]) / 2))
    assert k.linear_rate.factor(1) == k.linear_rate.factor(0.5) == pytest.approx(plateau / points[1])
    assert k.linear_rate.factor(8192) == pytest.approx(1.0)
    assert step_coefficients(m, g, prof, 1, "bf16").linear_rate is None
    assert step_coefficients(m, get_gpu("h100-sxm"), prof, 1, "fp8").linear_rate is None
    # a decode step of 300 sequences, no context: compute bound, its linear term at the rate
    tokens = 300.0
    lin = (k.linear_s_per_token * tokens + k.linear_phantom_s) * k.linear_rate.factor(tokens)
    rest = k.sampled_s_per_decode * tokens
    mem = k.weight_bytes * k.s_per_byte
    assert lin + rest > mem
    want = lin + rest + (k.allreduce_s_per_token + k.elementwise_s_per_token + k.sequence_s) * tokens
    want += k.allreduce_s + k.overhead_s
    assert batch_time_s(k, tokens, 0.0) == pytest.approx(want, rel=1e-12)
    # the array branches agree, and a run of decode steps still sums in closed form
    arr = batch_time_s(k, np.array([tokens, 8.0]), np.array([0.0, 0.0]))
    assert float(arr[0]) == pytest.approx(want, rel=1e-12)
    assert float(arr[1]) == pytest.approx(batch_time_s(k, 8.0, 0.0), rel=1e-12)
    for n in (1, 8, 64, 256):
        direct = sum(batch_time_s(k, float(n), float(n * (1000 + j))) for j in range(40))
        assert decode_run_time_s(k, n, n * 1000.0, 40) == pytest.approx(direct, rel=1e-12)


def test_light_load_fp8_decodes_faster_than_bf16_on_an_a100() -> None:
    """Marlin at a few tokens reads half the bytes at about cuBLAS's bandwidth (1.7x faster in
    the table): a one-sequence decode step of fp8 Qwen3-32B takes 0.52x bf16's (memory bound),
    where the compute-bound factor alone (0.7963 at every m) would leave it at 0.75x (the
    profile's phantom tokens make a small GEMM compute bound)."""
    m, g = get_model(QWEN32B), get_gpu(A100)
    prof = resolve_profile("auto", A100)
    bf16 = batch_time_s(step_coefficients(m, g, prof, 1, "bf16"), 1.0, 1000.0)
    fp8 = batch_time_s(step_coefficients(m, g, prof, 1, "fp8"), 1.0, 1000.0)
    assert fp8 < 0.6 * bf16
    flat = dataclasses.replace(step_coefficients(m, g, prof, 1, "fp8"), linear_rate=None)
    assert batch_time_s(flat, 1.0, 1000.0) > 0.7 * bf16
