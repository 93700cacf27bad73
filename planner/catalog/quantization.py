"""Weight formats vLLM serves, as the cost model needs them: bytes per linear-layer weight as
loaded (packed values plus group scales and zero points), the tensor-core rate the GEMMs run at,
the `--quantization` value, and the GPUs that run them.

Only the linear layers (attention projections, MLP/expert matrices) are quantized; embeddings,
lm_head, norms and MoE routers stay bf16 in every format here (AWQ/GPTQ checkpoints leave them
unquantized, vLLM's fp8 and ModelOpt NVFP4 paths too). docs/quantization.md gives the formulas.

Where each figure comes from (vLLM 0.11 sources under vllm/model_executor/layers/quantization/):
- `int4-awq` (awq_marlin.py): int32 `qweight` holding 8 int4 values (0.5 byte a weight), fp16
  `scales` and int32-packed 4-bit `qzeros`, one of each per (group of `group_size` input rows x
  output column). Marlin repacks qweight and zero points in place (same bytes).
- `int4-gptq` (gptq_marlin.py): int4 `qweight` and fp16 `scales` per group; symmetric
  checkpoints only (Marlin's uint4b8 type): the loaded `qzeros` are replaced by an empty
  tensor after loading, and `g_idx` too when desc_act is off.
- `int8` (compressed_tensors, scheme W8A8 int8): int8 weights with one fp32 scale per output
  channel, activations quantized per token at run time; CUTLASS int8 GEMMs (`cutlass_scaled_mm`)
  at the GPU's int8 tensor-core rate. W8A16 (int8 weight-only, Marlin) is not this path.
- `nvfp4` (modelopt.py, ModelOptNvFp4Config): 4-bit e2m1 values (0.5 byte), one fp8 e4m3 scale per
  16 values, one fp32 global scale per tensor (left out: bytes per matrix, not per weight);
  FP4 tensor cores, Blackwell only.
- `fp8` (fp8.py, `--quantization fp8`): one byte a weight, one fp32 scale per tensor (left out);
  W8A8 on fp8 tensor cores, weight-only FP8 Marlin (W8A16, the bf16 rate) on GPUs without them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from statistics import median
from typing import Annotated, Literal, get_args

from pydantic import AfterValidator

from planner.errors import InvalidInput

WeightDtype = Literal["bf16", "fp8", "int8", "int4-awq", "int4-gptq", "nvfp4"]
WEIGHT_DTYPES: tuple[str, ...] = get_args(WeightDtype)
MatmulKind = Literal["bf16", "fp8", "int8", "fp4"]

DEFAULT_GROUP_SIZE = 128  # AutoAWQ's and GPTQ's default q_group_size
# What Marlin's AWQ/GPTQ kernels take; -1: one group per output channel (the whole input width).
GROUP_SIZES: tuple[int, ...] = (-1, 32, 64, 128)
FP16_SCALE_BYTES = 2
FP32_SCALE_BYTES = 4
NVFP4_GROUP = 16  # ModelOpt NVFP4: one fp8 scale per 16 values
FP8_SCALE_BYTES = 1
PACKED_ZERO_BYTES = 0.5  # a 4-bit zero point, 8 per int32


@dataclass(frozen=True)
class WeightFormat:
    """One weight format. `value_bytes`: bytes per quantized weight; `group_scale_bytes` and
    `group_zero_bytes`: bytes per group of `group_size` weights along the input dimension
    (`fixed_group` when the format fixes it, None when the checkpoint's group size applies, 0
    when per channel: one scale per output row of `in_features` weights)."""

    name: str
    value_bytes: float
    group_scale_bytes: float
    group_zero_bytes: float
    fixed_group: int | None
    matmul: MatmulKind
    weight_only: bool  # dequantized to bf16 in the kernel; the GEMM runs at the bf16 rate
    vllm_quantization: str | None  # the `--quantization` value (None: unquantized)
    why: str  # the vLLM path, for reports


FORMATS: dict[str, WeightFormat] = {
    "bf16": WeightFormat("bf16", 2.0, 0.0, 0.0, 0, "bf16", False, None, "unquantized"),
    "fp8": WeightFormat("fp8", 1.0, 0.0, 0.0, 0, "fp8", False, "fp8", "fp8 W8A8, per-tensor scales"),
    "int8": WeightFormat(
        "int8",
        1.0,
        FP32_SCALE_BYTES,
        0.0,
        0,
        "int8",
        False,
        "compressed-tensors",
        "compressed-tensors W8A8 int8 (per-channel weight scales, per-token activations)",
    ),
    "int4-awq": WeightFormat(
        "int4-awq",
        0.5,
        FP16_SCALE_BYTES,
        PACKED_ZERO_BYTES,
        None,
        "bf16",
        True,
        "awq_marlin",
        "AWQ W4A16 on Marlin kernels (awq_marlin)",
    ),
    "int4-gptq": WeightFormat(
        "int4-gptq",
        0.5,
        FP16_SCALE_BYTES,
        0.0,
        None,
        "bf16",
        True,
        "gptq_marlin",
        "GPTQ W4A16, symmetric, on Marlin kernels (gptq_marlin)",
    ),
    "nvfp4": WeightFormat(
        "nvfp4",
        0.5,
        FP8_SCALE_BYTES,
        0.0,
        NVFP4_GROUP,
        "fp4",
        False,
        "modelopt_fp4",
        "ModelOpt NVFP4 (modelopt_fp4) on FP4 tensor cores",
    ),
}


def weight_format(weight_dtype: str, field: str = "weight_dtype") -> WeightFormat:
    fmt = FORMATS.get(weight_dtype)
    if fmt is None:
        raise InvalidInput(
            field, f"unknown weight format {weight_dtype!r}; valid: {', '.join(WEIGHT_DTYPES)}"
        )
    return fmt


def linear_bytes_per_weight(
    weight_dtype: str, in_features: int, group_size: int = DEFAULT_GROUP_SIZE
) -> float:
    """Bytes one weight of a quantized linear layer with `in_features` inputs occupies as vLLM
    loads it: value + (scale + zero point) / group (group -1: per channel). bf16: 2; fp8: 1; int8: 1 + 4 / in_features;
    int4-awq at g 128: 0.5 + 2.5 / 128; int4-gptq: 0.5 + 2 / 128; nvfp4: 0.5 + 1 / 16."""
    fmt = weight_format(weight_dtype)
    group = fmt.fixed_group if fmt.fixed_group is not None else group_size
    if group <= 0:  # per channel: one scale (and zero point) per output row of in_features weights
        group = in_features
    return fmt.value_bytes + (fmt.group_scale_bytes + fmt.group_zero_bytes) / group


def weight_format_error(weight_dtype: str, gpu_name: str, gpu_vendor: str) -> str | None:
    """Why `gpu` cannot run `weight_dtype` under vLLM (None when it can): Marlin (AWQ/GPTQ) is a
    CUDA kernel for Ampere and later; NVFP4 needs Blackwell's FP4 tensor cores."""
    if weight_dtype == "nvfp4" and gpu_name != "b200":
        return f"nvfp4 weights need FP4 tensor cores (B200 in the catalog), not {gpu_name}"
    if weight_dtype in ("int4-awq", "int4-gptq") and gpu_vendor != "nvidia":
        return f"{weight_dtype} runs on Marlin kernels, which are CUDA-only; {gpu_name} is {gpu_vendor}"
    return None


# The GEMM rate of a format relative to its tensor-core rate, as a fraction of bf16's relative
# efficiency (the profile's eta_matmul is fitted on bf16 GEMMs and applies on top): measured where
# NVIDIA aiconfigurator 0.12.0's vLLM GEMM tables time the format (tools/quantized_gemm_efficiency.py:
# median over 693 compute-bound shapes, m, n, k >= 4096). B200 NVFP4 (FlashInfer CuteDSL kernel)
# reaches 43.6% of its 9 PFLOPS where bf16 reaches 69.0% of 2.25: 0.6285. (fp8 measures 0.6846 on
# H100 and 0.6915 on B200; capplan's fp8 keeps the full rate its profiles were fitted with.)
MEASURED_GEMM_EFFICIENCY: dict[tuple[str, str], float] = {("nvfp4", "b200"): 0.6285}
QUANTIZED: frozenset[str] = frozenset({"int8", "int4-awq", "int4-gptq", "nvfp4"})
ROOFLINE_ONLY: frozenset[str] = frozenset({"int8", "int4-awq", "int4-gptq"})

# vLLM's Marlin kernel (weight-only: dequantized to fp16/bf16 in the kernel) runs int4 AWQ/GPTQ,
# and fp8 checkpoints on GPUs without fp8 tensor cores (compute capability < 8.9: fp8.py's
# use_marlin, marlin_utils_fp8.py). data/kernels/marlin-a800-n8192-k8192.json times it beside
# cuBLAS bf16 on an A800-SXM4 (the A100 SXM 80GB's chip) for m = 1..16384 tokens: its efficiency
# relative to bf16 at m is t_bf16(m) / t_marlin(m), above 1 at a few tokens (fewer bytes read),
# below 1 where the GEMM is compute bound (dequantizing costs it: W8A16 0.7963, W4A16 0.8810,
# the median over m >= MARLIN_COMPUTE_BOUND_M). gemm_efficiency is that compute-bound figure;
# the step formula takes the ratio at the step's tokens (marlin_points, marlin_rate_knots;
# docs/quantization.md). The 8-bit column is Marlin's int8 (uint8b128) path: fp8 takes the same
# kernel with another dequantization, not timed in the table. The memory side keeps reading the
# format's bytes (linear_bytes_per_weight).
MARLIN_TABLE = "marlin-a800-n8192-k8192.json"
MARLIN_COLUMN: dict[str, str] = {
    "fp8": "marlin_w8a16",
    "int4-awq": "marlin_w4a16",
    "int4-gptq": "marlin_w4a16",
}
MARLIN_GPUS: frozenset[str] = frozenset({"a100-80gb-sxm"})  # the GPUs the table times (no fp8 cores)
MARLIN_COMPUTE_BOUND_M = 4096  # as tools/quantized_gemm_efficiency.py: m, n, k >= 4096
MARLIN_DIP = 0.1  # a cuBLAS point this much slower per FLOP than at half the tokens: left out


@cache
def marlin_table() -> dict[str, dict[str, float]]:
    """The table's GEMM times in ms per kernel column, keyed by m (as a string)."""
    path = resources.files("planner.catalog") / "data" / "kernels" / MARLIN_TABLE
    times: dict[str, dict[str, float]] = json.loads(path.read_text())["time_ms"]
    return times


@cache
def marlin_efficiency(column: str) -> float:
    """Marlin's compute-bound GEMM rate over cuBLAS bf16's on the table's GPU: the median of
    t_bf16(m) / t_marlin(m) over m >= MARLIN_COMPUTE_BOUND_M (both run the bf16 tensor cores, so
    the ratio of times is the ratio of efficiencies)."""
    table = marlin_table()
    ratios = [
        table["torch_w16a16"][m] / t for m, t in table[column].items() if int(m) >= MARLIN_COMPUTE_BOUND_M
    ]
    return float(median(ratios))


@cache
def marlin_points(column: str) -> tuple[tuple[int, float], ...]:
    """(m, Marlin's efficiency relative to cuBLAS bf16 at m) where the table has it: t_bf16(m) /
    t_marlin(m) at each m below MARLIN_COMPUTE_BOUND_M (above 1 where Marlin, reading fewer
    bytes, is the faster), then the compute-bound median at MARLIN_COMPUTE_BOUND_M. An m where
    cuBLAS runs more than MARLIN_DIP slower per FLOP than at m / 2 is left out: a heuristic's
    dip (the table's m = 512: 139.7 TFLOPS after 207.8 at 256), which a bf16 profile, smooth
    in m, does not follow."""
    table = marlin_table()
    ref, col = table["torch_w16a16"], table[column]
    points: list[tuple[int, float]] = []
    for m in sorted(int(key) for key in col):
        if m >= MARLIN_COMPUTE_BOUND_M:
            break
        half = ref.get(str(m // 2))
        if half is not None and ref[str(m)] * (1.0 - MARLIN_DIP) > 2.0 * half:
            continue
        points.append((m, ref[str(m)] / col[str(m)]))
    points.append((MARLIN_COMPUTE_BOUND_M, marlin_efficiency(column)))
    return tuple(points)


def marlin_rate_knots(
    weight_dtype: str, gpu_name: str
) -> tuple[tuple[float, ...], tuple[float, ...], float] | None:
    """The step formula's curve (planner.costmodel.coefficients.GemmRateCurve) for a format Marlin
    runs on a GPU its table times: log m, the efficiency at m (marlin_points) and the one the
    linear term is priced at (gemm_efficiency, the compute-bound one); None elsewhere."""
    if not _marlin_measured(weight_dtype, gpu_name):
        return None
    points = marlin_points(MARLIN_COLUMN[weight_dtype])
    return tuple(math.log(m) for m, _ in points), tuple(e for _, e in points), points[-1][1]


def _marlin_measured(weight_dtype: str, gpu_name: str) -> bool:
    return weight_dtype in MARLIN_COLUMN and gpu_name in MARLIN_GPUS


def gemm_efficiency(weight_dtype: str, gpu_name: str) -> float:
    """The format's measured GEMM efficiency on this GPU relative to bf16's (1.0: none measured):
    aiconfigurator's tables, or Marlin's on the GPUs its table times (fp8 there is Marlin W8A16)."""
    if _marlin_measured(weight_dtype, gpu_name):
        return marlin_efficiency(MARLIN_COLUMN[weight_dtype])
    return MEASURED_GEMM_EFFICIENCY.get((weight_dtype, gpu_name), 1.0)


def rate_warning(weight_dtype: str, gpu_names: Sequence[str] = ()) -> str | None:
    """The GEMM rate of a quantized format is a roofline, not a measured kernel, on the GPUs
    named (none named: any GPU). None: measured on every GPU named, or not a roofline format."""
    if weight_dtype not in ROOFLINE_ONLY:
        return None
    if gpu_names and all(_marlin_measured(weight_dtype, g) for g in gpu_names):
        return None
    kind = weight_format(weight_dtype).matmul
    return (
        f"{weight_dtype} GEMM times are the roofline of the GPU's {kind} rate: no measured "
        "kernel table for this format (docs/quantization.md)"
    )


def quantized_warnings(weight_dtype: str, gpu_names: Sequence[str] = ()) -> list[str]:
    """What a plan says when it picks quantized weights: quality is the user's call, and the
    GEMM rate is a roofline, not a measured kernel (unless measured on every GPU it uses)."""
    if weight_dtype not in QUANTIZED:
        return []
    fmt = weight_format(weight_dtype)
    rate = rate_warning(weight_dtype, gpu_names)
    return [
        f"weights in {weight_dtype} ({fmt.why}): the plan sizes memory and speed only; whether the "
        "quantized checkpoint's quality is acceptable is the user's call (evaluate it on your task)",
        *([rate] if rate is not None else []),
    ]


def _group_size(v: int) -> int:
    if v not in GROUP_SIZES:
        raise ValueError(f"must be one of {', '.join(map(str, GROUP_SIZES))} (Marlin's group sizes), got {v}")
    return v


# A request's quantization group size: the AWQ/GPTQ checkpoint's `group_size` (quantize_config).
GroupSize = Annotated[int, AfterValidator(_group_size)]
