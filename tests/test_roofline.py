"""Hand-derived checks of tensor parallelism, fp8 and MoE, and properties of the roofline."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.catalog.gpus import get_gpu
from planner.catalog.models import get_model
from planner.catalog.quantization import marlin_points
from planner.costmodel.analyses import concurrency_sweep
from planner.costmodel.memory import kv_capacity
from planner.costmodel.profile import Profile
from planner.costmodel.roofline import Replica

H100 = get_gpu("h100-sxm")
QWEN8 = get_model("Qwen/Qwen3-8B")
W8 = QWEN8.total_params * 2  # bf16 weight bytes


def test_tp2_decode_step_by_hand() -> None:
    r = Replica(QWEN8, H100, tp=2)
    # per GPU: half the weights, half the KV heads (8 -> 4): 2 x 36 x 4 x 128 x 2 = 73,728 B/token
    kv = 73_728
    memory_s = (W8 / 2 + 64 * 1500 * kv) / 3.35e12
    # two ring all-reduces per layer of 64 tokens x 4096 hidden x 2 bytes; ring moves 2(t-1)/t of it
    per_call_s = (2 * 1 / 2) * 64 * 4096 * 2 / 450e9 + 8e-6
    comm_s = 2 * 36 * per_call_s
    step = r.decode_step(64, 1500)
    assert step.memory_s == pytest.approx(memory_s)
    assert step.comm_s == pytest.approx(comm_s)
    assert step.time_s == pytest.approx(memory_s + comm_s)  # 4.56 ms + 0.66 ms
    assert step.time_s * 1e3 == pytest.approx(5.218, abs=0.001)
    # a replica of two GPUs is billed for two
    cost = concurrency_sweep(r, 1500, [64], 4.29)["rows"][0]["usd_per_million_output_tokens"]
    assert cost == pytest.approx(2 * 4.29 / (64 / step.time_s * 3600) * 1e6)


def test_fp8_weights_halve_bytes_and_use_fp8_rate() -> None:
    r = Replica(QWEN8, H100, weight_dtype="fp8", kv_dtype="fp8")
    # decode at 64 x 1500: memory-bound on 1-byte weights and 1-byte KV
    step = r.decode_step(64, 1500)
    assert step.memory_s == pytest.approx((W8 / 2 + 64 * 1500 * 73_728) / 3.35e12)
    # prefill of 1500 tokens: linear layers at the fp8 rate, attention at the bf16 rate
    pre = r.breakdown([(1500, 0)], 0, 0)
    linear_s = 2 * QWEN8.total_params * 1500 / 1979e12
    attention_s = 4 * 36 * 4096 * 1500 * 750 / 989e12
    assert pre.compute_s == pytest.approx(linear_s + attention_s)
    # A100 has no fp8 tensor cores: fp8 weights run on FP8 Marlin at its bf16 rate times Marlin's
    # measured efficiency at 1500 tokens (planner.catalog.quantization.marlin_points: 0.8522 at
    # 1024, 0.7978 at 2048, interpolated in log tokens)
    a100 = Replica(QWEN8, get_gpu("a100-80gb-sxm"), weight_dtype="fp8")
    points = dict(marlin_points("marlin_w8a16"))
    e = points[1024] + (points[2048] - points[1024]) * math.log(1500 / 1024) / math.log(2)
    assert e == pytest.approx(0.8222, abs=1e-4)
    assert a100.breakdown([(1500, 0)], 0, 0).compute_s == pytest.approx(
        2 * QWEN8.total_params * 1500 / (312e12 * e) + 4 * 36 * 4096 * 1500 * 750 / 312e12
    )


def test_moe_decode_reads_touched_experts_and_multiplies_active() -> None:
    m = get_model("Qwen/Qwen3-30B-A3B")
    r = Replica(m, H100)
    expert_bytes = 3 * 2048 * 768 * 2
    dense_bytes = m.dense_params * 2
    one = r.decode_step(1, 1000)
    kv = 2 * 48 * 4 * 128 * 2
    assert one.memory_s == pytest.approx((dense_bytes + 48 * 8 * expert_bytes + 1000 * kv) / 3.35e12)
    assert one.linear_flops == pytest.approx(2 * m.active_params)
    n = 32
    touched = 128 * (1 - (1 - 8 / 128) ** n)
    step = r.decode_step(n, 1000)
    assert step.memory_s == pytest.approx(
        (dense_bytes + 48 * touched * expert_bytes + n * 1000 * kv) / 3.35e12
    )
    assert step.linear_flops == pytest.approx(2 * m.active_params * n)


def test_profile_divides_rates_and_adds_overhead() -> None:
    p = Profile(name="p", eta_bandwidth=0.5, eta_matmul=0.25, eta_attention=0.125, step_overhead_s=1e-3)
    r = Replica(QWEN8, H100, profile=p)
    d = r.decode_step(8, 1500)
    assert d.memory_s == pytest.approx((W8 + 8 * 1500 * 147_456) / (0.5 * 3.35e12))
    assert d.compute_s == pytest.approx(
        2 * QWEN8.total_params * 8 / (0.25 * 989e12) + 4 * 36 * 4096 * 8 * 1500 / (0.125 * 989e12)
    )
    assert d.time_s == pytest.approx(max(d.memory_s, d.compute_s) + 1e-3)


def test_kv_capacity_by_hand() -> None:
    r = Replica(QWEN8, H100)
    cap = kv_capacity(r, 0.92, max_num_batched_tokens=8192, max_num_seqs=1024)
    free = 80 * 2**30 * 0.92 - W8 - cap.activation_bytes
    assert cap.kv_cache_blocks == math.floor(free / (147_456 * 16))
    assert cap.max_concurrency(1500) == cap.kv_cache_blocks // math.ceil(1500 / 16)
    # a lower utilization or a bigger budget leaves less room
    assert kv_capacity(r, 0.8).kv_cache_blocks < cap.kv_cache_blocks
    assert kv_capacity(r, 0.92, max_num_batched_tokens=32768).kv_cache_blocks < cap.kv_cache_blocks


def _replicas() -> list[Replica]:
    slow = Profile(name="slow", eta_bandwidth=0.7, eta_matmul=0.6, eta_attention=0.3, step_overhead_s=5e-4)
    return [
        Replica(QWEN8, H100),
        Replica(QWEN8, H100, tp=2, profile=slow),
        Replica(get_model("Qwen/Qwen3-30B-A3B"), get_gpu("h200-sxm"), weight_dtype="fp8"),
        Replica(get_model("mistralai/Mixtral-8x7B-v0.1"), get_gpu("a100-80gb-sxm"), tp=4, profile=slow),
        Replica(get_model("meta-llama/Llama-3.1-70B-Instruct"), get_gpu("b200"), tp=8, kv_dtype="fp8"),
    ]


REPLICAS = _replicas()
replica_st = st.sampled_from(REPLICAS)


@settings(max_examples=300, deadline=None)
@given(replica_st, st.integers(1, 2048), st.integers(1, 2048), st.integers(1, 32768), st.integers(0, 32768))
def test_step_time_never_falls_as_concurrency_or_context_grows(
    r: Replica, n1: int, n2: int, c1: int, dc: int
) -> None:
    lo, hi = sorted((n1, n2))
    assert r.decode_step(lo, c1).time_s <= r.decode_step(hi, c1).time_s * (1 + 1e-12)
    assert r.decode_step(lo, c1).time_s <= r.decode_step(lo, c1 + dc).time_s * (1 + 1e-12)


@settings(max_examples=300, deadline=None)
@given(replica_st, st.integers(1, 1024), st.integers(1, 1024), st.integers(16, 16384))
def test_cost_per_token_never_rises_with_concurrency_below_kv_limit(
    r: Replica, n1: int, n2: int, ctx: int
) -> None:
    limit = kv_capacity(r).max_concurrency(ctx)
    lo, hi = sorted((n1, n2))
    if hi > limit:
        hi = max(lo, limit)
    rows = concurrency_sweep(r, ctx, [lo, hi], 1.0)["rows"]
    assert rows[1]["usd_per_million_output_tokens"] <= rows[0]["usd_per_million_output_tokens"] * (1 + 1e-12)


@settings(max_examples=200, deadline=None)
@given(replica_st, st.integers(1, 512), st.integers(0, 10**6), st.integers(1, 3000))
def test_decode_run_closed_form_equals_step_sum(r: Replica, n: int, s0: int, steps: int) -> None:
    direct = math.fsum(r.step_time_s((), n, s0 + j * n) for j in range(steps))
    assert r.decode_run_time_s(n, s0, steps) == pytest.approx(direct, rel=1e-9)


@settings(max_examples=200, deadline=None)
@given(replica_st, st.integers(1, 8192), st.integers(0, 30000), st.integers(0, 256), st.integers(1, 4000))
def test_mixed_step_grows_with_every_component(r: Replica, chunk: int, offset: int, n: int, ctx: int) -> None:
    base = r.step_time_s([(chunk, offset)], n, n * ctx)
    assert r.step_time_s([(chunk + 1, offset)], n, n * ctx) >= base * (1 - 1e-12)
    assert r.step_time_s([(chunk, offset + 1)], n, n * ctx) >= base * (1 - 1e-12)
    assert r.step_time_s([(chunk, offset)], n + 1, (n + 1) * ctx) >= base * (1 - 1e-12)
