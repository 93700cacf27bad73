"""The one step-time formula (planner.costmodel.steptime) against a literal reference: the
per-chunk formula of DESIGN.md written plainly from the model, GPU and profile (no
coefficients), on random batches including the latency model's negative "equivalent" offsets.
Every caller (Replica, its breakdown, the scalar and array branches, the one-chunk and the
many-chunk entry points, the linear-layers rows of calibration) must give the reference's time."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.catalog.gpus import get_gpu
from planner.catalog.models import DTYPE_BYTES, get_model
from planner.catalog.quantization import MARLIN_COLUMN, MARLIN_GPUS, gemm_efficiency, marlin_points
from planner.costmodel.profile import THEORETICAL, Profile
from planner.costmodel.roofline import Replica
from planner.costmodel.steptime import (
    batch_time_s,
    chunks_time_s,
    head_params,
    linear_layers_coefficients,
    step_time_s,
)

SLOW = Profile(
    name="slow",
    eta_bandwidth=0.7,
    eta_matmul=0.6,
    eta_attention=0.3,
    step_overhead_s=5e-4,
    prefix_kv_passes=12.5,
    decode_attention_items_per_sm=0.8,
)
# The calibrated terms added since: the re-read per query head, small GEMMs' phantom tokens, the
# kernels between the GEMMs and vLLM's vocabulary accounting (the old per-KV-byte passes beside,
# as a file may carry both).
VLLM = SLOW.model_copy(
    update={
        "name": "vllm",
        "prefix_query_kv_passes": 3.0,
        "matmul_phantom_tokens": 120.0,
        "sampled_logits": True,
        "activation_passes": 30.0,
    }
)


def reference_step_s(r: Replica, chunks: list[tuple[float, float]], n: float, s: float) -> float:
    """DESIGN.md, "The roofline cost model", one chunk at a time. A negative offset p (an
    "equivalent" chunk) attends to p + c/2 context tokens on average, reads p + c tokens of KV
    and has no prefix to re-read. The decodes' KV is read at bandwidth x u(n), u = min(1, max(n, 1)
    KV heads per GPU / (SMs x a)) for a profile's a = decode_attention_items_per_sm > 0.
    Calibrated terms: the prefix re-read also per query head (passes x KV x query heads / KV
    heads); m0 phantom tokens in the linear layers' FLOPs; e activation passes over each token's
    hidden state beside the all-reduce (not split by TP); with `sampled_logits`, the vocabulary
    (lm_head, and the embedding unless tied) leaves the per-token FLOPs and the untied
    embedding the bytes read, and the lm_head runs once per decode."""
    m, g, prof, tp = r.model, r.gpu, r.profile, r.tp
    real = list(chunks)
    tokens = sum(c for c, _ in real) + n
    if tokens <= 0:
        return 0.0
    kv = m.kv_bytes_per_token(r.kv_dtype, tp)
    weights = m.params_read(tokens) * DTYPE_BYTES[r.weight_dtype] / tp
    vocab = m.vocab_size * m.hidden_size
    if prof.sampled_logits and not m.tie_word_embeddings:
        weights -= vocab * DTYPE_BYTES[r.weight_dtype] / tp  # the embedding is a gather
    a = prof.decode_attention_items_per_sm
    u = min(1.0, max(n, 1.0) * math.ceil(m.kv_heads / tp) / (g.sms * a)) if a > 0 else 1.0
    bytes_moved = weights + s * kv / u + sum((p + c) * kv for c, p in real)
    linear_flops = 2 * m.active_params * (tokens + prof.matmul_phantom_tokens) / tp
    logits_flops = 0.0
    if prof.sampled_logits:
        layers = m.active_params - head_params(m)
        linear_flops = 2 * layers * (tokens + prof.matmul_phantom_tokens) / tp
        logits_flops = 2 * vocab * n / tp
    attention_flops = 4 * m.layers * m.query_dim * (sum(c * (p + c / 2) for c, p in real) + s) / tp
    bw = g.bandwidth * prof.eta_bandwidth
    matmul = g.matmul_flops(r.weight_dtype) * prof.eta_matmul * gemm_efficiency(r.weight_dtype, g.name)
    attention = g.matmul_flops("bf16") * prof.eta_attention
    # Marlin where its table times the format (fp8 on an A100): the layers' GEMMs at its
    # efficiency relative to cuBLAS bf16 at this many tokens, interpolated in log tokens
    layers_rate = matmul
    if r.weight_dtype in MARLIN_COLUMN and g.name in MARLIN_GPUS:
        ms, effs = zip(*marlin_points(MARLIN_COLUMN[r.weight_dtype]), strict=True)
        layers_rate = g.matmul_flops("bf16") * prof.eta_matmul * np.interp(np.log(tokens), np.log(ms), effs)
    compute = linear_flops / layers_rate + logits_flops / matmul + attention_flops / attention
    t = max(bytes_moved / bw, compute)
    if tp > 1:
        per_call = 2 * (tp - 1) / tp * tokens * m.hidden_size * 2
        t += 2 * m.layers * (per_call / g.interconnect_bandwidth + g.interconnect_latency)
    t += prof.step_overhead_s
    # the kernels between the GEMMs: e passes over every token's bf16 hidden state, all layers
    t += prof.activation_passes * m.layers * m.hidden_size * 2 * tokens / bw
    group = (m.attention_heads / tp) / math.ceil(m.kv_heads / tp)
    passes = prof.prefix_kv_passes + prof.prefix_query_kv_passes * group
    t += passes * sum(max(p, 0.0) for _, p in real) * kv / bw
    return t


REPLICAS = [
    Replica(get_model("Qwen/Qwen3-8B"), get_gpu("h100-sxm")),
    Replica(get_model("Qwen/Qwen3-8B"), get_gpu("h200-sxm"), tp=2, profile=SLOW),
    Replica(get_model("Qwen/Qwen3-30B-A3B"), get_gpu("h200-sxm"), tp=2, weight_dtype="fp8", profile=SLOW),
    Replica(get_model("mistralai/Mixtral-8x7B-v0.1"), get_gpu("a100-80gb-sxm"), tp=4),
    Replica(
        get_model("meta-llama/Llama-3.1-70B-Instruct"), get_gpu("b200"), tp=8, kv_dtype="fp8", profile=SLOW
    ),
    Replica(get_model("Qwen/Qwen3-32B"), get_gpu("h200-sxm"), tp=2, profile=VLLM),
    Replica(get_model("Qwen/Qwen3-30B-A3B"), get_gpu("h100-sxm"), tp=4, weight_dtype="fp8", profile=VLLM),
    Replica(
        get_model("meta-llama/Llama-3.1-70B-Instruct"), get_gpu("b200"), tp=8, kv_dtype="fp8", profile=VLLM
    ),
    # fp8 on an A100: FP8 Marlin's measured rate by tokens (planner.catalog.quantization)
    Replica(get_model("Qwen/Qwen3-32B"), get_gpu("a100-80gb-sxm"), weight_dtype="fp8", profile=VLLM),
    Replica(get_model("Qwen/Qwen3-8B"), get_gpu("a100-80gb-sxm"), tp=2, weight_dtype="fp8", profile=SLOW),
]


@st.composite
def chunk_st(draw: Any) -> tuple[float, float]:
    """A chunk and its offset, the offset possibly negative down to -chunk/2 (an equivalent chunk)."""
    c = draw(st.integers(1, 16384))
    p = draw(st.one_of(st.integers(0, 40000), st.floats(-c / 2, 0.0, allow_nan=False)))
    return float(c), float(p)


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-15)


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(REPLICAS),
    st.lists(chunk_st(), max_size=4),
    st.integers(0, 1024),
    st.integers(0, 30000),
)
def test_every_entry_point_equals_the_reference(
    r: Replica, chunks: list[tuple[float, float]], n: int, ctx: int
) -> None:
    s = float(n * ctx)
    want = reference_step_s(r, chunks, n, s)
    k = r.coefficients
    assert close(r.step_time_s(chunks, n, s), want)
    assert close(chunks_time_s(k, chunks, n, s), want)
    assert close(r.breakdown(chunks, n, s).time_s, want)
    if len(chunks) <= 1:
        c, p = chunks[0] if chunks else (0.0, 0.0)
        scalar = step_time_s(k, c, p, n, s)
        array = step_time_s(k, np.array([c, c]), np.array([p, p]), float(n), s)
        assert close(scalar, want)
        # the scalar branch is the array branch, one element at a time
        assert array.shape == (2,) and close(float(array[0]), scalar) and close(float(array[1]), scalar)


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(REPLICAS),
    st.lists(st.tuples(chunk_st(), st.integers(0, 512), st.integers(0, 20000)), min_size=1, max_size=40),
)
def test_array_branch_broadcasts_batches_of_one_chunk(r: Replica, batches: list[Any]) -> None:
    """Arrays of (chunk, offset, decodes, context), (0, 0) meaning no chunk, broadcast element-wise."""
    c = np.array([b[0][0] if i % 3 else 0.0 for i, b in enumerate(batches)])  # every third: no chunk
    p = np.array([b[0][1] if i % 3 else 0.0 for i, b in enumerate(batches)])
    n = np.array([float(b[1]) for b in batches])
    s = np.array([float(b[1] * b[2]) for b in batches])
    got = step_time_s(r.coefficients, c, p, n, s)
    for i in range(len(batches)):
        chunks = [(float(c[i]), float(p[i]))] if c[i] > 0 else []
        assert close(float(got[i]), reference_step_s(r, chunks, float(n[i]), float(s[i])))
    # a 2-D grid: chunks down, decodes across
    grid = step_time_s(r.coefficients, c[:, None], p[:, None], n[None, :3], s[None, :3])
    assert grid.shape == (len(batches), min(3, len(batches)))
    for i in range(len(batches)):
        for j in range(grid.shape[1]):
            chunks = [(float(c[i]), float(p[i]))] if c[i] > 0 else []
            assert close(float(grid[i, j]), reference_step_s(r, chunks, float(n[j]), float(s[j])))


def test_empty_batch_takes_no_time() -> None:
    k = REPLICAS[1].coefficients
    assert step_time_s(k, 0.0, 123.0, 0, 0.0) == 0.0
    assert batch_time_s(k, 0, 0.0) == 0.0
    assert step_time_s(k, np.array([0.0, 5.0]), np.array([9.0, 0.0]), 0.0, 0.0)[0] == 0.0
    assert REPLICAS[1].step_time_s([(0, 500)], 0, 0) == 0.0
    # the formula is literal: a 0-token "chunk" at offset 500 still reads 500 tokens of KV, in both
    # branches and through the replica (a step without a chunk is chunk = offset = 0)
    r = REPLICAS[1]
    want = reference_step_s(r, [(0.0, 500.0)], 4, 4000.0)
    assert want > reference_step_s(r, [], 4, 4000.0)
    assert close(step_time_s(k, 0.0, 500.0, 4, 4000.0), want)
    assert close(float(step_time_s(k, np.array([0.0]), np.array([500.0]), 4.0, 4000.0)[0]), want)
    assert close(r.step_time_s([(0, 500)], 4, 4000.0), want)
    # with the mask skipped on the caller's promise, an empty batch would pay the weights' read
    unmasked = step_time_s(k, np.array([0.0]), np.array([0.0]), 0.0, 0.0, empty_batches=False)[0]
    assert unmasked > 0.0


def test_negative_offset_is_an_equivalent_chunk() -> None:
    """A chunk at offset -c/2 attends to nothing on average and re-reads no prefix: the same
    attention as c tokens of one-token prompts. The KV it reads is p + c = c/2 tokens."""
    r = REPLICAS[1]
    k = r.coefficients
    c = 4096.0
    t = step_time_s(k, c, -c / 2, 0, 0.0)
    assert close(t, reference_step_s(r, [(c, -c / 2)], 0, 0.0))
    parts = r.breakdown([(c, -c / 2)], 0, 0.0)
    assert parts.attention_flops == 0.0 and parts.prefix_reread_s == 0.0
    assert parts.bytes_moved == pytest.approx(k.weight_bytes + c / 2 * k.kv_bytes_per_token)


@pytest.mark.parametrize("r", REPLICAS[:3])
def test_linear_layers_rows_are_the_layers_roofline(r: Replica) -> None:
    """Calibration's `linear` rows: the layers' weights read once, their FLOPs at the matmul
    rate, nothing else (written out plainly here)."""
    m, g, prof = r.model, r.gpu, r.profile
    k = linear_layers_coefficients(m, g, prof, r.tp, r.weight_dtype)
    for tokens in (1, 16, 256, 4096, 16384):
        read = (m.params_read(tokens) - head_params(m)) * DTYPE_BYTES[r.weight_dtype] / r.tp
        flops = 2.0 * (m.active_params - head_params(m)) * tokens / r.tp
        want = max(
            read / (g.bandwidth * prof.eta_bandwidth),
            flops / (g.matmul_flops(r.weight_dtype) * prof.eta_matmul),
        )
        assert close(step_time_s(k, 0.0, 0.0, tokens, 0.0), want)


def test_decode_attention_parallelism_by_hand() -> None:
    """Qwen3-8B (8 KV heads) on one H200 (132 SMs) with a = 0.8: N0 = 132 x 0.8 / 8 = 13.2 decodes
    fill the SMs. One decode over 16,000 tokens reads its KV at u(1) = 8 / 105.6 of the achieved
    bandwidth: the step's memory time is (W + 13.2 x 16,000 x KV) / BW. At 16 decodes
    (16 x 8 = 128 items >= 105.6) the term is off; at TP 2 (4 KV heads per GPU) N0 doubles."""
    m, g = get_model("Qwen/Qwen3-8B"), get_gpu("h200-sxm")
    prof = Profile(name="p", eta_bandwidth=0.5, decode_attention_items_per_sm=0.8)
    bw = 4.8e12 * 0.5
    kv = 36 * 2 * 8 * 128 * 2  # layers x (K, V) x KV heads x head dim x bf16 bytes = 147,456
    assert m.kv_bytes_per_token("bf16") == kv and g.sms == 132
    r = Replica(m, g, profile=prof)
    w = r.coefficients.weight_bytes
    assert r.coefficients.decode_kv_full_decodes == pytest.approx(13.2)
    assert r.decode_step(1, 16000).time_s == pytest.approx((w + 13.2 * 16000 * kv) / bw, rel=1e-12)
    assert r.decode_step(8, 4000).time_s == pytest.approx((w + 13.2 / 8 * 8 * 4000 * kv) / bw, rel=1e-12)
    assert r.decode_step(16, 4000).time_s == pytest.approx((w + 16 * 4000 * kv) / bw, rel=1e-12)
    assert Replica(m, g, tp=2, profile=prof).coefficients.decode_kv_full_decodes == pytest.approx(26.4)
    # only the decodes' KV: a prefill chunk's KV and the weights are read at full bandwidth
    off = Replica(m, g, profile=prof.model_copy(update={"decode_attention_items_per_sm": 0.0}))
    assert r.step_time_s([(2048, 8000)], 0, 0.0) == off.step_time_s([(2048, 8000)], 0, 0.0)
    # the run of decode steps sums in closed form (one factor for the whole run)
    direct = math.fsum(r.decode_step(4, 3000 + j).time_s for j in range(50))
    assert r.decode_run_time_s(4, 4 * 3000, 50) == pytest.approx(direct, rel=1e-12)


def test_theoretical_coefficients_carry_no_calibrated_terms() -> None:
    k = Replica(get_model("Qwen/Qwen3-8B"), get_gpu("h100-sxm"), profile=THEORETICAL).coefficients
    assert k.decode_kv_full_decodes == 0.0
    assert k.overhead_s == 0.0 and k.prefix_reread_s_per_token == 0.0
    assert k.allreduce_s == 0.0 and k.allreduce_s_per_token == 0.0  # TP 1
    assert k.moe_weight_bytes == 0.0  # dense
