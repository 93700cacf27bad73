"""The one step-time formula: a replica's coefficients, computed once, and one function that
times batches from them, on scalars or numpy arrays alike.

A step moves bytes (the weights it reads, the KV of every context token it touches) and does
FLOPs (linear layers, attention); it takes the longer of the two, plus two all-reduces per layer
under tensor parallelism, the profile's fixed per-step overhead and, for calibrated profiles,
the re-read of prefill chunks' prefix KV (../../../shared/DESIGN.md, "The roofline cost model"):

    tokens  = C + n
    memory  = (W(tokens) + (S + sum (p + c)) KV) / BW
    compute = 2 P tokens / F_lin + 4 L d_q (sum c (p + c/2) + S) / F_attn
    time    = max(memory, compute) + all-reduce(tokens) + overhead + sequence n
              + passes sum max(p, 0) KV / BW
              (+ e L h 2 tokens / BW, calibrated: below)

for n decodes over a total context of S tokens and prefill chunks of c tokens at offset p
(C = sum c); `sequence` is the profile's `sequence_overhead_s`, the engine's cost per decode in
the step (0 by default). Everything is per GPU of the TP group; a step of no tokens takes 0 s.
Expert parallelism (planner.costmodel.expert_parallel) changes the coefficients: the hottest
GPU's experts in W and P, and the all-to-all added to the all-reduce term; where its kernels were
measured (planner.costmodel.ep_measured, `StepCoefficients.ep_moe`) a step of t tokens also adds
(rho(t) - 1) x max(experts' bytes read / BW, experts' GEMM seconds), rho the measured EP-over-TP
ratio of the MoE layers (`EpMoeTerm.excess_s`; None: nothing added).

Calibrated profiles refine three terms (each off, i.e. exactly the above, at its default):

* `passes` = prefix_kv_passes + prefix_query_kv_passes x G, G = query heads / KV heads per GPU
  (the prefix re-read grows with the GQA group);
* `sampled_logits`: P and W leave out the vocabulary matrices (2 V d parameters untied, V d
  tied); the lm_head is charged per decode, 2 V d FLOPs each, and read as weights; the
  embedding is a gather, not read (tied: it is the lm_head, read anyway). In symbols, with
  P' = P - head parameters and W' = W - embedding bytes (untied):
  compute = (2 P' tokens + 2 V d n) / F_lin + ..., memory = (W' + ...) / BW;
* `matmul_phantom_tokens` m0: the linear layers run at eta_mm M / (M + m0) for M tokens, i.e.
  the compute term charges 2 P' (tokens + m0) FLOPs (m0 is per step, so a decode run's compute
  stays affine in the context and `decode_run_time_s` exact);
* `activation_passes` e: the kernels between the GEMMs (norms, residual adds, rotary,
  activations) read and write each token's hidden state e times over all layers, not
  overlapped and not split by TP: time += e L h 2 tokens / BW, beside the all-reduce.

Measured weight-only kernels (`StepCoefficients.linear_rate`, Marlin on a GPU its table times:
planner.catalog.quantization): the linear term of a step of t tokens, phantom tokens included,
is multiplied by e_c / e(t), e(t) the kernel's measured efficiency at t over cuBLAS bf16's, e_c
the compute-bound one `linear_s_per_token` is priced at (t fixed in a decode run: still affine).

Decode attention parallelism (calibrated profiles with `decode_attention_items_per_sm` a > 0):
the decode attention kernel runs one work item per (sequence, KV head on this GPU), and with
fewer than SMs x a of them it cannot pull the full bandwidth. The decodes' KV is read at
BW u(n), u(n) = min(1, max(n, 1) h / (SMs a)) with h KV heads per GPU: in `memory` the term
S KV becomes S KV f(n), f = 1 / u = max(1, N0 / max(n, 1)), N0 = SMs a / h (the decodes that
fill the GPU). Only the decodes' context is read this way: weights and chunks' KV are not.
u depends on n alone, so a run of decode steps stays affine in S (`decode_run_time_s`). The
formula is taken literally: a "chunk" of 0 tokens at offset p still reads p tokens of KV, so a
step without a chunk is written chunk = offset = 0.

Negative offsets. The latency model stands a full budget of many prompts' chunks in for one
"equivalent" chunk (c, p) whose tokens attend to as much context as the real ones on average:
c (p + c/2) = sum of the real attention, so p = mean attention context - c/2 can be negative
(down to -c/2). Such a chunk means exactly what the formula says: its attention term is
c (p + c/2), its KV read is (p + c) tokens, and it has no prefix to re-read (max(p, 0) = 0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from planner.costmodel.coefficients import StepCoefficients, _ArrayConstants
from planner.costmodel.replica_coefficients import (
    ACTIVATION_BYTES,
    decode_kv_full_decodes,
    head_params,
    kv_heads_per_gpu,
    linear_layers_coefficients,
    query_heads_per_kv_head,
    step_coefficients,
)

# The coefficients are built in planner/costmodel/replica_coefficients.py; their names are
# re-exported here, beside the formula that reads them.
__all__ = [
    "ACTIVATION_BYTES",
    "batch_time_s",
    "chunks_time_s",
    "decode_kv_full_decodes",
    "decode_run_time_s",
    "head_params",
    "kv_heads_per_gpu",
    "linear_layers_coefficients",
    "query_heads_per_kv_head",
    "step_coefficients",
    "step_time_s",
]

FloatArray = npt.NDArray[np.float64]
ArrayLike = float | int | FloatArray

_NDARRAY = np.ndarray  # the array branch is taken when any argument is exactly an ndarray
_ZERO, _HALF = np.array(0.0), np.array(0.5)  # 0-d: cheaper than Python floats beside arrays


# ---- the formula --------------------------------------------------------------------------------


def _verify_tokens(k: StepCoefficients, n: Any, s: Any) -> tuple[Any, Any]:
    """Speculative decoding: n decodes over s context tokens run k + 1 query tokens each through
    the verify step, so the step's decode tokens and attention pairs are (k + 1) n and (k + 1) s
    (its KV is read once: the memory term keeps s)."""
    q = 1.0 + k.speculative_tokens
    return n * q, s * q


def _scalar(k: StepCoefficients, n: float, s: float, c: float, a: float, kv: float, r: float) -> float:
    """The formula on plain numbers (the scalar branch of `batch_time_s`)."""
    nq, sq = n, s
    if k.speculative_tokens:
        nq, sq = _verify_tokens(k, n, s)
    tokens = c + nq
    if tokens <= 0:
        return 0.0
    if k.moe_weight_bytes == 0.0:
        w = k.weight_bytes
    else:
        w = k.weight_bytes + k.moe_weight_bytes * (1.0 - k.moe_untouched_ratio**tokens)
    if k.decode_kv_full_decodes:
        nn = n if n > 1.0 else 1.0
        f = k.decode_kv_full_decodes / nn
        mem = (w + ((s * f if f > 1.0 else s) + kv) * k.kv_bytes_per_token) * k.s_per_byte
    else:
        mem = (w + (s + kv) * k.kv_bytes_per_token) * k.s_per_byte
    cmp = k.linear_s_per_token * tokens + k.attention_s_per_pair * (a + sq)
    if k.linear_phantom_s or k.sampled_s_per_decode:
        cmp += k.linear_phantom_s + k.sampled_s_per_decode * nq
    if k.linear_rate is not None:
        cmp += k.linear_rate.excess_s(k.linear_s_per_token, k.linear_phantom_s, tokens)
    out = (
        (mem if mem >= cmp else cmp)
        + ((k.allreduce_s_per_token + k.elementwise_s_per_token) * tokens + k.allreduce_s)
        + k.overhead_s
        + k.prefix_reread_s_per_token * r
        + (k.sequence_s * n if k.sequence_s else 0.0)
    )
    if k.ep_moe is not None:
        out += k.ep_moe.excess_s(k, tokens)
    return out


def _array(
    k: StepCoefficients,
    n: ArrayLike,
    s: ArrayLike,
    c: ArrayLike,
    a: ArrayLike,
    kv: ArrayLike,
    r: ArrayLike,
    empty_batches: bool = True,
) -> FloatArray:
    """The formula on numpy arrays (the array branch of `batch_time_s`), term for term the
    scalar branch; terms whose coefficient is 0 are skipped (adding 0 changes nothing).
    `empty_batches=False`: the caller knows every batch has a token (no masking)."""
    kc = k._array_constants
    if type(n) is float and type(s) is float and k.moe_weight_bytes == 0.0:
        return _array_one_decode_batch(k, kc, n, s, c, a, kv, r, empty_batches)
    if type(n) is float:  # one decode count or context for the whole array (latency model):
        n = np.array(n)  # 0-d, taken twice below at the cost of one conversion
    if type(s) is float:
        s = np.array(s)
    nq, sq = n, s
    if k.speculative_tokens:
        nq, sq = _verify_tokens(k, n, s)
    tokens = c + nq
    if k.moe_weight_bytes == 0.0:
        w: FloatArray | float = kc.w0
    else:
        w = kc.w0 + k.moe_weight_bytes * (1.0 - np.power(k.moe_untouched_ratio, tokens))
    if k.decode_kv_full_decodes:
        f = np.maximum(k.decode_kv_full_decodes / np.maximum(n, 1.0), 1.0)
        mem = (w + (s * f + kv) * kc.kv) * kc.s_per_byte
    else:
        mem = (w + (s + kv) * kc.kv) * kc.s_per_byte
    cmp = kc.linear * tokens + kc.attention * (a + sq)
    if k.sampled_s_per_decode:
        cmp += kc.sampled * nq  # a fresh array of the broadcast shape: in place
    if k.linear_rate is not None:  # phantom tokens sit outside the max: the excess is the same
        cmp = cmp + k.linear_rate.excess_array(kc.linear, k.linear_phantom_s, tokens)
    out = np.maximum(mem, cmp)
    if k.allreduce_s_per_token or k.elementwise_s_per_token:
        out += kc.per_token * tokens
    if k.sequence_s:
        out += k.sequence_s * n
    if kc.fixed is not None:
        out += kc.fixed
    if k.prefix_reread_s_per_token:
        out += kc.prefix * (r if type(r) is np.ndarray else np.asarray(r, dtype=np.float64))
    if k.ep_moe is not None:
        out = out + k.ep_moe.excess_array(k, tokens)
    return np.where(tokens > 0, out, 0.0) if empty_batches else out


def _array_one_decode_batch(
    k: StepCoefficients,
    kc: _ArrayConstants,
    n: float,
    s: float,
    c: ArrayLike,
    a: ArrayLike,
    kv: ArrayLike,
    r: ArrayLike,
    empty_batches: bool,
) -> FloatArray:
    """`_array` where every batch has the same n decodes over s context tokens (the latency
    model's calls) and the weights are dense: the terms in n and s alone are summed once, as
    Python floats, and each array term is one operation (13 where the general branch takes 19;
    numpy's per-call cost dominates at these sizes). The same formula; the sums' order differs
    from `_scalar`'s, so a result may differ in its last bit (tests hold the branches to 1e-9)."""
    if k.decode_kv_full_decodes:
        f = k.decode_kv_full_decodes / (n if n > 1.0 else 1.0)
        s_kv = s * f if f > 1.0 else s
    else:
        s_kv = s
    mem = kv * kc.kv_s
    mem += (kc.w0_bytes + s_kv * k.kv_bytes_per_token) * k.s_per_byte
    nq, sq = n, s
    if k.speculative_tokens:
        nq, sq = _verify_tokens(k, n, s)
    cmp = c * kc.linear + a * kc.attention  # (not in place: c or a may broadcast the other)
    cmp += k.linear_s_per_token * nq + k.attention_s_per_pair * sq + k.sampled_s_per_decode * nq
    if k.linear_rate is not None:
        cmp = cmp + k.linear_rate.excess_array(kc.linear, k.linear_phantom_s, c + nq)
    out = np.maximum(mem, cmp)
    per_token = k.allreduce_s_per_token + k.elementwise_s_per_token
    if per_token:
        out += c * kc.per_token
    const = (
        per_token * nq + k.sequence_s * n if k.speculative_tokens else (per_token + k.sequence_s) * n
    ) + kc.fixed_s
    if const:
        out += const
    if k.prefix_reread_s_per_token:
        out += kc.prefix * (r if type(r) is np.ndarray else np.asarray(r, dtype=np.float64))
    return np.where(c > -nq, out, 0.0) if empty_batches else out  # c + n q > 0: a token


@overload
def batch_time_s(  # type: ignore[overload-overlap]
    k: StepCoefficients,
    decodes: float,
    context: float,
    chunk_tokens: float = 0.0,
    chunk_pairs: float = 0.0,
    chunk_kv_tokens: float = 0.0,
    prefix_tokens: float = 0.0,
    *,
    empty_batches: bool = True,
) -> float: ...
@overload
def batch_time_s(
    k: StepCoefficients,
    decodes: ArrayLike,
    context: ArrayLike,
    chunk_tokens: ArrayLike = 0.0,
    chunk_pairs: ArrayLike = 0.0,
    chunk_kv_tokens: ArrayLike = 0.0,
    prefix_tokens: ArrayLike = 0.0,
    *,
    empty_batches: bool = True,
) -> FloatArray: ...
def batch_time_s(
    k: StepCoefficients,
    decodes: ArrayLike,
    context: ArrayLike,
    chunk_tokens: ArrayLike = 0.0,
    chunk_pairs: ArrayLike = 0.0,
    chunk_kv_tokens: ArrayLike = 0.0,
    prefix_tokens: ArrayLike = 0.0,
    *,
    empty_batches: bool = True,
) -> float | FloatArray:
    """THE formula (module docstring), on a batch's sums: n `decodes` over `context` tokens, and
    its prefill chunks as C = sum c (`chunk_tokens`), sum c (p + c/2) (`chunk_pairs`), sum
    (p + c) (`chunk_kv_tokens`) and sum max(p, 0) (`prefix_tokens`). Plain numbers give a
    float (the scalar branch: no numpy, for the simulator's and the root-finders' one-at-a-time
    calls); any numpy array gives an array, every argument broadcast against the others.
    `empty_batches=False`: the caller's promise that every batch carries a token (arrays: no
    mask giving empty ones 0 s)."""
    if (
        isinstance(decodes, np.ndarray)
        or isinstance(context, np.ndarray)
        or isinstance(chunk_tokens, np.ndarray)
        or isinstance(chunk_pairs, np.ndarray)
        or isinstance(chunk_kv_tokens, np.ndarray)
        or isinstance(prefix_tokens, np.ndarray)
    ):
        return _array(
            k, decodes, context, chunk_tokens, chunk_pairs, chunk_kv_tokens, prefix_tokens, empty_batches
        )
    return _scalar(k, decodes, context, chunk_tokens, chunk_pairs, chunk_kv_tokens, prefix_tokens)


@overload
def step_time_s(  # type: ignore[overload-overlap]
    k: StepCoefficients,
    chunk: float,
    offset: float,
    decodes: float,
    context: float,
    *,
    empty_batches: bool = True,
) -> float: ...
@overload
def step_time_s(
    k: StepCoefficients,
    chunk: ArrayLike,
    offset: ArrayLike,
    decodes: ArrayLike,
    context: ArrayLike,
    *,
    empty_batches: bool = True,
) -> FloatArray: ...
def step_time_s(
    k: StepCoefficients,
    chunk: ArrayLike,
    offset: ArrayLike,
    decodes: ArrayLike,
    context: ArrayLike,
    *,
    empty_batches: bool = True,
) -> float | FloatArray:
    """Steps of one prefill chunk each, `chunk` tokens at `offset` (a step without one: chunk =
    offset = 0; negative offsets: see the module docstring), beside `decodes` sequences over
    `context` tokens: `batch_time_s` of that chunk's sums. Scalars give a float; any array
    gives an array, the four arguments broadcast. `empty_batches=False` is the caller's promise
    that every batch carries a token, which skips the mask giving empty ones 0 s."""
    if _NDARRAY in (type(chunk), type(offset), type(decodes), type(context)):
        r: ArrayLike = np.maximum(offset, _ZERO) if k.prefix_reread_s_per_token else 0.0
        pairs = chunk * (offset + _HALF * chunk)
        return _array(k, decodes, context, chunk, pairs, offset + chunk, r, empty_batches)
    if chunk or offset:
        r_s = offset if offset > 0 else 0.0
        return _scalar(k, decodes, context, chunk, chunk * (offset + 0.5 * chunk), offset + chunk, r_s)  # type: ignore[arg-type]
    return _scalar(k, decodes, context, 0.0, 0.0, 0.0, 0.0)  # type: ignore[arg-type]


def chunks_time_s(
    k: StepCoefficients, chunks: Sequence[tuple[float, float]], decodes: float, context: float
) -> float:
    """One step carrying any number of prefill chunks ((tokens, offset) pairs; the simulator's
    batches) beside `decodes` over `context` tokens."""
    c_sum = pairs = kv = prefix = 0.0
    for c, p in chunks:
        c_sum += c
        pairs += c * (p + 0.5 * c)
        kv += p + c
        if p > 0:
            prefix += p
    return _scalar(k, decodes, context, c_sum, pairs, kv, prefix)  # batch_time_s's scalar branch


def decode_run_time_s(k: StepCoefficients, decodes: int, context: float, steps: int) -> float:
    """Sum of `steps` decode-only steps of the same `decodes` sequences, the first over `context`
    tokens, each later one `decodes` tokens more (every sequence grew by one): the formula
    summed in closed form. Memory and compute time are both affine in the context (the decode KV
    factor f(n) is one number for the whole run), so their max switches side at most once: split the arithmetic series there and sum each part."""
    if steps <= 0 or decodes <= 0:
        return 0.0
    n = decodes
    q = 1.0 + k.speculative_tokens  # speculative decoding: k + 1 query tokens a decode (else 1)
    nq = n if q == 1.0 else n * q
    a_mem = k.weight_bytes_read(nq) * k.s_per_byte
    b_mem = k.kv_bytes_per_token * k.s_per_byte * k.decode_kv_factor(n)
    a_cmp = k.linear_s_per_token * nq + k.linear_phantom_s + k.sampled_s_per_decode * nq
    if k.linear_rate is not None:  # the same tokens every step of the run
        a_cmp += k.linear_rate.excess_s(k.linear_s_per_token, k.linear_phantom_s, nq)
    b_cmp = k.attention_s_per_pair * q
    if q == 1.0:
        per_decode = k.allreduce_s_per_token + k.elementwise_s_per_token + k.sequence_s
    else:
        per_decode = (k.allreduce_s_per_token + k.elementwise_s_per_token) * q + k.sequence_s
    fixed = per_decode * n + k.allreduce_s + k.overhead_s
    if k.ep_moe is not None:  # measured EP: the same tokens every step of the run
        fixed += k.ep_moe.excess_s(k, nq)
    s0 = float(context)

    def series(a: float, b: float, j0: int, j1: int) -> float:
        """sum over j in [j0, j1) of a + b (s0 + j n)."""
        m = j1 - j0
        if m <= 0:
            return 0.0
        return m * (a + b * s0) + b * n * (j0 + j1 - 1) * m / 2.0

    mem, cmp = (a_mem, b_mem), (a_cmp, b_cmp)
    d0 = (a_cmp - a_mem) + (b_cmp - b_mem) * s0  # compute minus memory at step 0
    dj = (b_cmp - b_mem) * n  # ... and its change per step
    if dj == 0:
        return series(*(cmp if d0 >= 0 else mem), 0, steps) + steps * fixed
    split = min(steps, max(0, math.ceil(-d0 / dj)))  # first step past the crossing
    before, after = (mem, cmp) if dj > 0 else (cmp, mem)
    return series(*before, 0, split) + series(*after, split, steps) + steps * fixed
