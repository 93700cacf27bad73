"""The shipped H200 profile: fitted to our own measurements, regenerated with
`python -m planner.costmodel.calibrated [DIR]`; and the names this module used to hold.

The fit is planner.costmodel.fitting's; which profile a name means (the registry, the
built-in files, transfers to unmeasured GPUs) is planner.costmodel.profiles'. Both are
re-exported here under their historical names for callers that import them from here.
"""

from __future__ import annotations

import hashlib
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from planner.costmodel import fitting
from planner.costmodel.fitting import (
    BOUNDS,
    HINTS,
    MAX_FIT_MAPE,
    MIN_INDEPENDENCE,
    NOISE_FLOOR,
    PARAMETERS,
    SCALES,
    STARTS,
    Calibration,
    Observation,
    ParameterReport,
    Predictor,
    UnderdeterminedFit,
    check_gpu_matches,
    check_model_matches,
    fit_profile,
    linear_layers_time_s,
    mape,
    observations,
    predict,
)
from planner.costmodel.profile import Profile, profile_to_json
from planner.costmodel.profiles import builtin_profile as builtin_calibrated
from planner.costmodel.profiles import measured_gpus as builtin_gpus

__all__ = [
    "ATTENTION_MEASUREMENTS",
    "BOUNDS",
    "FITTED_GPU",
    "FITTED_MEASUREMENTS",
    "FITTED_MODEL",
    "HINTS",
    "MAX_FIT_MAPE",
    "MIN_INDEPENDENCE",
    "NOISE_FLOOR",
    "PARAMETERS",
    "SCALES",
    "STARTS",
    "VLLM_ENGINE_COST_S",
    "Calibration",
    "Observation",
    "ParameterReport",
    "Predictor",
    "UnderdeterminedFit",
    "builtin_calibrated",
    "builtin_gpus",
    "builtin_h200_profile",
    "check_gpu_matches",
    "check_model_matches",
    "fit_builtin",
    "fit_decode_attention",
    "fit_profile",
    "linear_layers_time_s",
    "mape",
    "observations",
    "predict",
    "write_builtin_profiles",
]

FITTED_GPU = "h200-sxm"
FITTED_MEASUREMENTS = "h200_qwen3_8b_shape.json"
FITTED_MODEL = "Qwen/Qwen3-8B"
# Decode rows over batch x context (another H200, whose small-batch decode ran ~25% slower: see
# data/measurements/README.md): they pin the decode attention parallelism term alone, a ratio of
# long- to short-context steps at one batch that a machine's constant offset does not move.
ATTENTION_MEASUREMENTS = "h200_qwen3_8b_ctx.json"
# vLLM's engine cost per step (scheduling, sampling, detokenizing, streaming), which timed kernels
# leave out: the median TPOT minus the kernel-fitted decode step of published `vllm bench serve`
# runs at concurrency 1 (gpustack-qwen3-8b-h100-sxm-c1 in tests/data/vllm_bench_serve.json),
# as tools/profiles_from_aiconfigurator.py computes it for every other GPU; tests/test_kernel_profiles.py
# checks the two agree. Measured on an H100 SXM and applied unchanged (a host-side cost).
VLLM_ENGINE_COST_S = 0.0009697894453165445


def _measurements_dir() -> Any:
    return resources.files("planner.costmodel") / "data" / "measurements"


# --- regenerating the built-in files ------------------------------------------------------------


def _read(name: str) -> tuple[Any, str]:
    from planner.costmodel.fit_data import parse_json

    text = (_measurements_dir() / name).read_text()
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    return parse_json(text, name), f"planner/costmodel/data/measurements/{name} (sha256 {digest}...)"


def fit_decode_attention() -> Calibration:
    """Stage 1: the decode attention term from ATTENTION_MEASUREMENTS' decode rows alone, with
    the bandwidth and per-step overhead fitted beside it (that machine's own) and the parameters
    decode rows cannot see held at the main file's fit."""
    from dataclasses import replace

    from planner.catalog.gpus import get_gpu
    from planner.catalog.models import get_model

    model, gpu = get_model(FITTED_MODEL), get_gpu(FITTED_GPU)
    main, _ = _read(FITTED_MEASUREMENTS)
    base = fit_profile(main, model, gpu).profile  # the term held at 0: one context there
    meas, label = _read(ATTENTION_MEASUREMENTS)
    decodes = replace(meas, rows=tuple(r for r in meas.rows if r.kind == "decode"))
    seen = ("eta_bandwidth", "step_overhead_s", "decode_attention_items_per_sm")
    held = {k: getattr(base, k) for k in fitting.PARAMETERS if k not in seen}
    return fit_profile(decodes, model, gpu, fixed=held, source_label=f"the decode rows of {label}")


def fit_builtin() -> Calibration:
    """Stage 2, the shipped h200-sxm fit: every other parameter from FITTED_MEASUREMENTS, the
    decode attention term held at stage 1's value. The kernels' fit: the shipped profile adds
    the engine cost (`builtin_h200_profile`)."""
    from planner.catalog.gpus import get_gpu
    from planner.catalog.models import get_model

    attention = fit_decode_attention().profile.decode_attention_items_per_sm
    meas, label = _read(FITTED_MEASUREMENTS)
    return fit_profile(
        meas,
        get_model(FITTED_MODEL),
        get_gpu(FITTED_GPU),
        name=f"{FITTED_GPU}-calibrated",
        fixed={"decode_attention_items_per_sm": attention},
        source_label=label,
    )


def builtin_h200_profile() -> Profile:
    """The shipped h200-sxm profile: `fit_builtin`'s, plus VLLM_ENGINE_COST_S per step."""
    cal = fit_builtin()
    stage1 = fit_decode_attention()
    kernel_s = cal.profile.step_overhead_s
    source = (
        cal.profile.source.removesuffix(".")
        + f". decode_attention_items_per_sm = {cal.profile.decode_attention_items_per_sm:.4g} fitted to the "
        f"{len(stage1.rows)} decode rows (batch 1-128 x context 1k-16k) of "
        f"planner/costmodel/data/measurements/{ATTENTION_MEASUREMENTS} (MAPE {100 * stage1.mape:.1f}%; that "
        "machine's bandwidth and overhead fitted beside it, not kept). "
        f"step_overhead_s = {1e3 * kernel_s:.3f} ms fitted to the timed steps + {1e3 * VLLM_ENGINE_COST_S:.3f} ms "
        "vLLM engine cost per step (scheduling, sampling, detokenizing, streaming) from published vllm bench "
        "serve runs on h100-sxm (tests/data/vllm_bench_serve.json: gpustack-qwen3-8b-h100-sxm-c1), as every "
        "other GPU's profile carries it."
    )
    return cal.profile.model_copy(update={"step_overhead_s": kernel_s + VLLM_ENGINE_COST_S, "source": source})


def write_builtin_profiles(directory: str | Path) -> list[Path]:
    """Write the H200 profile fitted here (the other GPUs' come from
    tools/profiles_from_aiconfigurator.py)."""
    path = Path(directory) / f"{FITTED_GPU}.json"
    path.write_text(profile_to_json(builtin_h200_profile()))
    return [path]


if __name__ == "__main__":  # python -m planner.costmodel.calibrated [DIR]
    target = sys.argv[1] if len(sys.argv) > 1 else str(Path(__file__).parent / "data" / "profiles")
    for p in write_builtin_profiles(target):
        print(p)
