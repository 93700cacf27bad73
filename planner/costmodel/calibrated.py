"""The shipped H200 profile: fitted to our own measurements, regenerated with
`python -m planner.costmodel.calibrated [DIR]`; and the names this module used to hold.

The fit is planner.costmodel.fitting's; which profile a name means (the registry, the
built-in files, transfers to unmeasured GPUs) is planner.costmodel.profiles'. Both are
re-exported here under their historical names for callers that import them from here.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Mapping
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


def fit_decode_attention(
    fixed: Mapping[str, float] | None = None, sampled_logits: bool = fitting.SAMPLED_LOGITS
) -> Calibration:
    """Stage 1: the decode attention term from ATTENTION_MEASUREMENTS' decode rows alone, with
    the bandwidth and per-step overhead fitted beside it (that machine's own) and the parameters
    decode rows cannot see held at the main file's fit. `fixed` and `sampled_logits` (both
    stages) give the variants docs/calibration.md compares."""
    from dataclasses import replace

    from planner.catalog.gpus import get_gpu
    from planner.catalog.models import get_model

    model, gpu = get_model(FITTED_MODEL), get_gpu(FITTED_GPU)
    main, _ = _read(FITTED_MEASUREMENTS)
    # the term held at 0: one context there
    base = fit_profile(main, model, gpu, fixed=fixed, sampled_logits=sampled_logits).profile
    meas, label = _read(ATTENTION_MEASUREMENTS)
    decodes = replace(meas, rows=tuple(r for r in meas.rows if r.kind == "decode"))
    seen = ("eta_bandwidth", "step_overhead_s", "decode_attention_items_per_sm")
    held = {k: getattr(base, k) for k in fitting.PARAMETERS if k not in seen}
    return fit_profile(
        decodes,
        model,
        gpu,
        fixed=held,
        source_label=f"the decode rows of {label}",
        sampled_logits=sampled_logits,
    )


def fit_builtin(
    fixed: Mapping[str, float] | None = None, sampled_logits: bool = fitting.SAMPLED_LOGITS
) -> Calibration:
    """Stage 2, the shipped h200-sxm fit: every other parameter from FITTED_MEASUREMENTS, the
    decode attention term held at stage 1's value. The kernels' fit: the shipped profile adds
    the engine cost (`builtin_h200_profile`)."""
    from planner.catalog.gpus import get_gpu
    from planner.catalog.models import get_model

    attention = fit_decode_attention(fixed, sampled_logits).profile.decode_attention_items_per_sm
    meas, label = _read(FITTED_MEASUREMENTS)
    return fit_profile(
        meas,
        get_model(FITTED_MODEL),
        get_gpu(FITTED_GPU),
        name=f"{FITTED_GPU}-calibrated",
        fixed={**(fixed or {}), "decode_attention_items_per_sm": attention},
        source_label=label,
        sampled_logits=sampled_logits,
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


# --- the figures of docs/calibration.md -----------------------------------------------------------

HELD_OUT = {  # the other measured files, and the model each timed
    "h200_qwen3_32b.json": "Qwen/Qwen3-32B",
    "h200_llama31_8b.json": "meta-llama/Llama-3.1-8B-Instruct",
    "h200_qwen3_8b_ctx.json": "Qwen/Qwen3-8B",
}


def errors_by_kind(rows: Any, model_name: str, profile: Profile) -> dict[str, list[float]]:
    """Relative errors (predicted / measured - 1) per row kind; a chunked row's total and worst
    step apart ("chunked total", "chunked worst"), and "all"."""
    from planner.catalog.gpus import get_gpu
    from planner.catalog.models import get_model

    obs = observations(rows)
    pred = predict(rows, get_model(model_name), get_gpu(FITTED_GPU), profile)
    out: dict[str, list[float]] = {}
    every: list[float] = []
    for o, p in zip(obs, pred, strict=True):
        kind: str = o.row.kind
        if kind == "chunked_prefill":
            kind = "chunked total" if o.quantity == "prefill_ms" else "chunked worst"
        out.setdefault(kind, []).append(p / o.measured_s - 1.0)
        every.append(p / o.measured_s - 1.0)
    return {**out, "all": every}


def _summary(errs: dict[str, list[float]]) -> str:
    return "  ".join(
        f"{k} {100 * mape(v):.1f}% ({100 * max(abs(e) for e in v):.0f}%)" for k, v in errs.items()
    )


def per_kv_byte(profile: Profile) -> Profile:
    """The same profile with its prefix re-read charged on the KV bytes (the model before
    prefix_query_kv_passes): P = passes per query head x G of the fitted model."""
    from planner.catalog.models import get_model
    from planner.costmodel.steptime import query_heads_per_kv_head

    g = query_heads_per_kv_head(get_model(FITTED_MODEL))
    return profile.model_copy(
        update={"prefix_kv_passes": profile.prefix_query_kv_passes * g, "prefix_query_kv_passes": 0.0}
    )


def figures() -> None:
    """Print the H200 figures of docs/calibration.md: both stages, the fitted parameters, the
    errors by kind, the held-out files, the variants the formula was chosen over, stability."""
    import random
    from dataclasses import replace

    from planner.catalog.gpus import get_gpu
    from planner.catalog.models import get_model

    stage1 = fit_decode_attention()
    a1 = next(p for p in stage1.parameters if p.name == "decode_attention_items_per_sm")
    print(
        f"stage 1: decode_attention_items_per_sm {a1.value:.4g} +/- {a1.std_error or 0:.2g} "
        f"({len(stage1.rows)} rows, MAPE {100 * stage1.mape:.1f}%, max {100 * stage1.max_abs_error:.1f}%)"
    )
    cal = fit_builtin()
    print(
        f"stage 2: {len(cal.rows)} timings, MAPE {100 * cal.mape:.2f}% (max {100 * cal.max_abs_error:.1f}%), "
        f"theoretical {100 * cal.theoretical_mape:.1f}%"
    )
    for p in cal.parameters:
        se = "fixed" if p.fixed else f"+/- {p.std_error:.3g}, independence {p.independence:.2f}"
        print(f"  {p.name:30s} {p.value:.4g}  ({se})")
    main, _ = _read(FITTED_MEASUREMENTS)
    by_kind = errors_by_kind(main.rows, FITTED_MODEL, cal.profile)
    print(
        "  by kind: "
        + "  ".join(f"{k} {100 * min(v):+.0f}..{100 * max(v):+.0f}%" for k, v in by_kind.items())
    )
    print("  " + _summary(by_kind))
    held = {f: _read(f)[0] for f in HELD_OUT}
    variants: list[tuple[str, Profile]] = [("as shipped (timed steps)", cal.profile)]
    variants.append(("prefix re-read per KV byte (same fit)", per_kv_byte(cal.profile)))
    for label, fixed, sampled in (
        ("fix matmul_phantom_tokens=0", {"matmul_phantom_tokens": 0.0}, True),
        ("fix activation_passes=0", {"activation_passes": 0.0}, True),
        ("seed vocabulary accounting, activation_passes=0", {"activation_passes": 0.0}, False),
        (
            "seed accounting, activation_passes=0, m0=0 (the previous model)",
            {"activation_passes": 0.0, "matmul_phantom_tokens": 0.0},
            False,
        ),
    ):
        variants.append((label, fit_builtin(fixed, sampled).profile))
    prev = variants[-1][1]
    variants.append(("... and its re-read per KV byte (the previous shipped profile)", per_kv_byte(prev)))
    for label, prof in variants:
        own = errors_by_kind(main.rows, FITTED_MODEL, prof)["all"]
        print(f"{label}: in-sample MAPE {100 * mape(own):.2f}% (max {100 * max(abs(e) for e in own):.1f}%)")
        for f, model_name in HELD_OUT.items():
            print(f"    {f}: " + _summary(errors_by_kind(held[f].rows, model_name, prof)))
    model, gpu = get_model(FITTED_MODEL), get_gpu(FITTED_GPU)
    rows = list(main.rows)
    out = []
    for seed in range(10):  # as tests/test_calibrate.py::test_fit_is_stable_on_held_out_rows
        shuffled = rows[:]
        random.Random(seed).shuffle(shuffled)
        k = round(len(shuffled) * 2 / 3)
        fit = fit_profile(replace(main, rows=tuple(shuffled[:k])), model, gpu)
        test = shuffled[k:]
        pred = predict(test, model, gpu, fit.profile)
        out.append(mape([p / o.measured_s - 1 for p, o in zip(pred, observations(test), strict=True)]))
    print("stability, held-out third, seeds 0-9: " + ", ".join(f"{100 * m:.1f}" for m in out) + "%")


if __name__ == "__main__":  # python -m planner.costmodel.calibrated [DIR] | --figures
    if sys.argv[1:] == ["--figures"]:
        figures()
        sys.exit(0)
    target = sys.argv[1] if len(sys.argv) > 1 else str(Path(__file__).parent / "data" / "profiles")
    for p in write_builtin_profiles(target):
        print(p)
