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
from planner.costmodel.fit_predict import (
    Observation,
    Predictor,
    check_gpu_matches,
    check_model_matches,
    linear_layers_time_s,
    observations,
    predict,
)
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
    ParameterReport,
    UnderdeterminedFit,
    fit_profile,
    mape,
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
    "HARNESS_ATTENTION_MEASUREMENTS",
    "HINTS",
    "MAX_FIT_MAPE",
    "MIN_INDEPENDENCE",
    "NOISE_FLOOR",
    "PARAMETERS",
    "SCALES",
    "STARTS",
    "VLLM_ENGINE_COST_S",
    "VLLM_REQUEST_OVERHEAD_S",
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
# The decode attention parallelism term, twice. Our harness's decode rows over batch x context
# (h200_qwen3_8b_ctx.json, another H200: see data/measurements/README.md) time PyTorch SDPA, one
# work item per (sequence, KV head), which crawls at small batch and long context (a ~ 0.8): the
# fit of the harness's other rows holds the harness's own term, so that the penalty is not
# absorbed into the bandwidth or the per-step overhead. vLLM's FlashAttention splits the KV across
# the SMs and barely pays it: the shipped profile carries the term of vLLM's own decode kernels,
# fitted to the decode rows (batch 1-256 x context 1k-8k) of NVIDIA aiconfigurator's measured
# vLLM tables for the H200 (data/kernels/h200-sxm.csv, see its README), the same way the engine
# cost is added after the fit (docs/calibration.md, "The H200 figures").
HARNESS_ATTENTION_MEASUREMENTS = "h200_qwen3_8b_ctx.json"
ATTENTION_MEASUREMENTS = "h200-sxm.csv"
# vLLM's engine cost per step (scheduling, sampling, detokenizing, streaming), which timed kernels
# leave out: the median TPOT minus the kernel-fitted decode step of published `vllm bench serve`
# runs at concurrency 1 (gpustack-qwen3-8b-h100-sxm-c1 in tests/data/vllm_bench_serve.json),
# as tools/profiles_from_aiconfigurator.py computes it for every other GPU; tests/test_kernel_profiles.py
# checks the two agree. Measured on an H100 SXM and applied unchanged (a host-side cost).
VLLM_ENGINE_COST_S = 0.0009697894453165445
# vLLM's front end per request (HTTP, chat template, tokenizing, streaming the first token): the
# same runs' median TTFT minus one step prefilling the mean prompt on the idle engine, as
# tools/profiles_from_aiconfigurator.py computes it (tests/test_kernel_profiles.py checks the two
# agree). A host-side cost, applied unchanged.
VLLM_REQUEST_OVERHEAD_S = 0.05228845507207215


def _measurements_dir() -> Any:
    return resources.files("planner.costmodel") / "data" / "measurements"


# --- regenerating the built-in files ------------------------------------------------------------


def _read(name: str) -> tuple[Any, str]:
    from planner.costmodel.fit_data import parse_csv, parse_json

    folder = "kernels" if name.endswith(".csv") else "measurements"
    text = (resources.files("planner.costmodel") / "data" / folder / name).read_text()
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    parse = parse_csv if name.endswith(".csv") else parse_json
    return parse(text, name), f"planner/costmodel/data/{folder}/{name} (sha256 {digest}...)"


def fit_decode_attention(
    fixed: Mapping[str, float] | None = None,
    sampled_logits: bool = fitting.SAMPLED_LOGITS,
    measurements: str = ATTENTION_MEASUREMENTS,
) -> Calibration:
    """Stage 1: the decode attention term from the decode rows of `measurements` alone (vLLM's
    kernels by default, HARNESS_ATTENTION_MEASUREMENTS for the harness's), with the bandwidth and
    per-step overhead fitted beside it (those rows' own, not kept) and the parameters decode rows
    cannot see held at the main file's fit. `fixed` and `sampled_logits` (both stages) give the
    variants docs/calibration.md compares."""
    from dataclasses import replace

    from planner.catalog.gpus import get_gpu
    from planner.catalog.models import get_model

    model, gpu = get_model(FITTED_MODEL), get_gpu(FITTED_GPU)
    main, _ = _read(FITTED_MEASUREMENTS)
    # the term held at 0: one context there
    base = fit_profile(main, model, gpu, fixed=fixed, sampled_logits=sampled_logits).profile
    meas, label = _read(measurements)
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
    """Stage 2, the h200-sxm fit of the timed steps: every other parameter from
    FITTED_MEASUREMENTS, the decode attention term held at the harness's own (stage 1 on
    HARNESS_ATTENTION_MEASUREMENTS). The shipped profile swaps in vLLM's term and adds the engine
    cost (`builtin_h200_profile`)."""
    from planner.catalog.gpus import get_gpu
    from planner.catalog.models import get_model

    harness = fit_decode_attention(fixed, sampled_logits, HARNESS_ATTENTION_MEASUREMENTS)
    attention = harness.profile.decode_attention_items_per_sm
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


# The serving terms a built-in refit keeps: the engine's per-step and per-sequence costs depend on
# the vLLM release more than on the GPU (the corpus's H200 runs, vLLM 0.14.1, show ~0 engine cost
# per step where the H100 runs that set VLLM_ENGINE_COST_S, vLLM 0.11.0, show 0.97 ms); every
# GPU's profile carries the same engine cost, so that plans compare GPUs, not releases.
BUILTIN_HELD_TERMS = ("step_overhead_s", "sequence_overhead_s", "compute_scale")  # a rig's compute: not the GPU's


def builtin_h200_profile() -> Profile:
    """The shipped h200-sxm profile: `kernel_h200_profile`'s, its front ends refit to the
    built-in corpus's h200-sxm runs (`refit_serving`)."""
    kernel = kernel_h200_profile()
    return refit_serving(kernel, fit_builtin().profile.step_overhead_s)


def refit_serving(profile: Profile, kernel_step_s: float) -> Profile:
    """`profile` with its serving terms but BUILTIN_HELD_TERMS (so: the front end of each
    endpoint the runs used) fitted by `capplan calibrate --serving`'s fit to every run of the
    built-in corpus (planner/data/serving_runs) on its GPU; the profile's `source` names the runs.
    Unchanged where the corpus has none."""
    from planner.measurements import builtin_corpus
    from planner.measurements.serving_fit import fit_serving

    runs = [r for r in builtin_corpus() if r.settings.gpu == profile.gpu]
    if not runs:
        return profile
    fit = fit_serving(runs, profile, name=profile.name, kernel_step_s=kernel_step_s, hold=BUILTIN_HELD_TERMS)
    return fit.profile


def kernel_h200_profile() -> Profile:
    """The h200-sxm profile before its serving refit: `fit_builtin`'s, with vLLM's decode
    attention term (stage 1 on ATTENTION_MEASUREMENTS) in place of the harness's, plus
    VLLM_ENGINE_COST_S per step and VLLM_REQUEST_OVERHEAD_S per request."""
    cal = fit_builtin()
    harness = cal.profile.decode_attention_items_per_sm
    stage1 = fit_decode_attention()
    vllm_a = stage1.profile.decode_attention_items_per_sm
    kernel_s = cal.profile.step_overhead_s
    source = (
        cal.profile.source.removesuffix(".")
        + f" (the harness's SDPA decode term, fitted to the decode rows of planner/costmodel/data/measurements/"
        f"{HARNESS_ATTENTION_MEASUREMENTS}). Shipped with decode_attention_items_per_sm = {vllm_a:.4g} instead, "
        f"fitted to the {len(stage1.rows)} decode rows (batch 1-256 x context 1k-8k) of vLLM's own kernels in "
        f"NVIDIA aiconfigurator 0.12.0's H200 table, planner/costmodel/data/kernels/{ATTENTION_MEASUREMENTS} (MAPE "
        f"{100 * stage1.mape:.1f}%; those tables' bandwidth and overhead fitted beside it, not kept): vLLM's "
        f"split-KV decode keeps the SMs busy at small batch where the harness's ({harness:.3g}) does not. "
        f"step_overhead_s = {1e3 * kernel_s:.3f} ms fitted to the timed steps + {1e3 * VLLM_ENGINE_COST_S:.3f} ms "
        "vLLM engine cost per step (scheduling, sampling, detokenizing, streaming) from published vllm bench "
        "serve runs on h100-sxm (tests/data/vllm_bench_serve.json: gpustack-qwen3-8b-h100-sxm-c1), as every "
        f"other GPU's profile carries it; request_overhead_s = {1e3 * VLLM_REQUEST_OVERHEAD_S:.1f} ms per request "
        "(vLLM's front end) from the same runs' median TTFT."
    )
    return cal.profile.model_copy(
        update={
            "step_overhead_s": kernel_s + VLLM_ENGINE_COST_S,
            "request_overhead_s": VLLM_REQUEST_OVERHEAD_S,
            "decode_attention_items_per_sm": vllm_a,
            "source": source,
        }
    )


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
