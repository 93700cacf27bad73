"""What a checkpoint's unquantized modules add (planner.catalog.checkpoints): each linear matrix
the checkpoint keeps in bf16 holds two bytes a weight instead of the format's
`linear_bytes_per_weight`, and its GEMM runs at the bf16 rate instead of the format's.

Shapes per GPU of a TP group of `tp`, as vLLM shards them: q (h -> q_dim), o (q_dim -> h), gate
and up (h -> i) and down (i -> h) split over TP; k and v (h -> kv_heads x head_dim) split, or
one whole head a GPU when there are fewer KV heads than GPUs. Pipeline stages: vLLM gives each
stage ceil(L / pp) consecutive layers (planner.costmodel.multinode.stage_fraction), and the
largest stage's figure is the one that limits memory, so the stage holding the most bf16 bytes
counts.
"""

from __future__ import annotations

import math
from dataclasses import replace

from planner.catalog.checkpoints import MATRICES, UnquantizedLayers
from planner.catalog.gpus import GpuSpec
from planner.catalog.models import ModelSpec
from planner.catalog.quantization import gemm_efficiency, linear_bytes_per_weight
from planner.costmodel.profile import Profile
from planner.costmodel.steptime import StepCoefficients

BF16_BYTES = 2


def matrix_shape(model: ModelSpec, matrix: str, tp: int = 1) -> tuple[int, float]:
    """(in_features, weights on one GPU of a TP group of `tp`) of one layer's `matrix`."""
    m = model
    h, q, i = m.hidden_size, m.query_dim, m.intermediate_size
    if matrix == "q_proj":
        return h, h * q / tp
    if matrix in ("k_proj", "v_proj"):
        return h, h * math.ceil(m.kv_heads / tp) * m.head_dim
    if matrix == "o_proj":
        return q, q * h / tp
    if matrix in ("gate_proj", "up_proj"):
        return h, h * i / tp
    if matrix == "down_proj":
        return i, i * h / tp
    raise ValueError(f"unknown linear matrix {matrix!r}; valid: {', '.join(MATRICES)}")


def _layer_extra_bytes(
    model: ModelSpec, layers: UnquantizedLayers, tp: int, weight_dtype: str, group_size: int
) -> list[float]:
    """Per layer, the bytes one GPU holds beyond the format's for the layer's bf16 matrices."""
    out = [0.0] * model.layers
    for matrix in MATRICES:
        in_features, weights = matrix_shape(model, matrix, tp)
        extra = weights * (BF16_BYTES - linear_bytes_per_weight(weight_dtype, in_features, group_size))
        for layer in layers.layers(matrix):
            out[layer] += extra
    return out


def extra_weight_bytes(
    model: ModelSpec,
    layers: UnquantizedLayers | None,
    tp: int,
    weight_dtype: str,
    group_size: int,
    pp: int = 1,
) -> float:
    """Bytes one GPU of the largest pipeline stage holds beyond the format's figure: the stage
    (ceil(L / pp) consecutive layers) with the most (0 without unquantized modules)."""
    if layers is None or layers.empty or weight_dtype == "bf16":
        return 0.0
    per_layer = _layer_extra_bytes(model, layers, tp, weight_dtype, group_size)
    size = math.ceil(model.layers / pp)
    return max(sum(per_layer[s : s + size]) for s in range(0, model.layers, size))


def bf16_linear_params(model: ModelSpec, layers: UnquantizedLayers | None, tp: int = 1) -> float:
    """Weights of the bf16 matrices on one GPU (all layers): the GEMM FLOPs a token runs at the
    bf16 rate, 2 per weight (0 without unquantized modules)."""
    if layers is None:
        return 0.0
    return sum(matrix_shape(model, m, tp)[1] * len(layers.layers(m)) for m in MATRICES)


def unquantized_coefficients(
    k: StepCoefficients,
    model: ModelSpec,
    gpu: GpuSpec,
    profile: Profile,
    tp: int,
    weight_dtype: str,
    group_size: int,
    layers: UnquantizedLayers | None,
) -> StepCoefficients:
    """`k` (planner.costmodel.steptime.step_coefficients of the format) with the checkpoint's
    bf16 matrices: their extra bytes read every step, and their GEMMs at the bf16 rate instead
    of the format's, per token and in the phantom tokens every step pays. `k` itself when the
    checkpoint has none."""
    if layers is None or layers.empty or weight_dtype == "bf16":
        return k
    extra_bytes = extra_weight_bytes(model, layers, tp, weight_dtype, group_size)
    own = gpu.matmul_flops(weight_dtype) * gemm_efficiency(weight_dtype, gpu.name) * profile.eta_matmul
    bf16 = gpu.matmul_flops("bf16") * profile.eta_matmul
    extra_s = 2.0 * bf16_linear_params(model, layers, tp) * (1.0 / bf16 - 1.0 / own)
    return replace(
        k,
        weight_bytes=k.weight_bytes + extra_bytes,
        linear_s_per_token=k.linear_s_per_token + extra_s,
        linear_phantom_s=k.linear_phantom_s + profile.matmul_phantom_tokens * extra_s,
    )
