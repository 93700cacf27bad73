"""Fitting a profile to measured step times (`fit_profile`, what `capplan calibrate` runs).

The fit predicts every measured row with the planner's own step-time formula
(`steptime.step_time_s`, all rows in one array call: a fitted profile means the same thing when
the planner uses it) and solves for the profile's parameters by bounded least squares on
relative residuals (`solvers.fit`), from a few spread-out starts. It refuses, naming the field:

* rows of another model (KV bytes per token, parameter count) or another GPU (the `gpu` or
  `device` the file names), and a mixture-of-experts model (fit the GPU on a dense one);
* a fit the rows cannot determine (`UnderdeterminedFit`, naming each parameter and the rows
  that would pin it);
* unless `force`: a fit that misses the rows by more than MAX_FIT_MAPE on average (the cost
  model cannot describe them: wrong model, wrong units, a broken run), or one whose every
  fitted parameter sits on a bound (the bounds, not the data, chose it).

Predicting the rows and checking they are of this model and GPU: planner/costmodel/fit_predict.py.
See docs/calibration.md. Which profile a name means is planner.costmodel.profiles'.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from planner.catalog.gpus import GpuSpec
from planner.catalog.models import ModelSpec
from planner.costmodel.fit_data import CEILINGS, Measurements, StepRow
from planner.costmodel.fit_predict import (
    Predictor,
    check_gpu_matches,
    check_model_matches,
    observations,
)
from planner.costmodel.profile import THEORETICAL, Profile
from planner.costmodel.steptime import (
    kv_heads_per_gpu,
    query_heads_per_kv_head,
)
from planner.errors import InvalidInput, echo

MAX_FIT_MAPE = 0.25  # a fit missing the rows by more, on average, is refused unless forced

# --- the fit ------------------------------------------------------------------------------------

PARAMETERS = (
    "eta_bandwidth",
    "eta_matmul",
    "eta_attention",
    "step_overhead_s",
    "prefix_query_kv_passes",
    "decode_attention_items_per_sm",
    "matmul_phantom_tokens",
    "activation_passes",
)
BOUNDS: dict[str, tuple[float, float]] = {
    "eta_bandwidth": (0.01, 1.0),
    "eta_matmul": (0.01, 1.0),
    "eta_attention": (0.01, 1.0),
    "step_overhead_s": (0.0, 0.1),
    "prefix_query_kv_passes": (0.0, 1000.0),
    "decode_attention_items_per_sm": (0.0, 4.0),
    "matmul_phantom_tokens": (0.0, 1024.0),
    "activation_passes": (0.0, 1000.0),
}
# Fitted profiles use vLLM's accounting of the vocabulary (Profile.sampled_logits: logits for
# sampled rows only, the embedding a gather) with the per-token kernels between the GEMMs
# (activation_passes) beside it: the seed's per-token lm_head and embedding FLOPs had stood in
# for those (docs/calibration.md, "The vocabulary and the kernels between the GEMMs").
SAMPLED_LOGITS = True
# `fix` names accepted for profiles' older parameters: prefix_kv_passes P (passes over the KV
# bytes) holds prefix_query_kv_passes at P / G for the fitted model's GQA group G.
LEGACY_FIXED = {"prefix_kv_passes": "prefix_query_kv_passes"}
FIX_NAMES = PARAMETERS + tuple(LEGACY_FIXED)  # every name `fixed` accepts
# Typical magnitudes (scipy x_scale) and a few spread-out starts: the objective has kinks (the
# roofline's max), so the fit runs from each start and keeps the best.
SCALES = {
    "eta_bandwidth": 0.5,
    "eta_matmul": 0.5,
    "eta_attention": 0.5,
    "step_overhead_s": 1e-3,
    "prefix_query_kv_passes": 10.0,
    "decode_attention_items_per_sm": 0.5,
    "matmul_phantom_tokens": 100.0,
    "activation_passes": 10.0,
}
STARTS = (
    {
        "eta_bandwidth": 0.7,
        "eta_matmul": 0.7,
        "eta_attention": 0.5,
        "step_overhead_s": 1e-3,
        "prefix_query_kv_passes": 1.0,
        "decode_attention_items_per_sm": 1.0,
        "matmul_phantom_tokens": 32.0,
        "activation_passes": 10.0,
    },
    {
        "eta_bandwidth": 0.5,
        "eta_matmul": 0.5,
        "eta_attention": 0.3,
        "step_overhead_s": 1e-4,
        "prefix_query_kv_passes": 10.0,
        "decode_attention_items_per_sm": 0.5,
        "matmul_phantom_tokens": 128.0,
        "activation_passes": 30.0,
    },
    {
        "eta_bandwidth": 0.9,
        "eta_matmul": 0.9,
        "eta_attention": 0.9,
        "step_overhead_s": 2e-3,
        "prefix_query_kv_passes": 0.1,
        "decode_attention_items_per_sm": 2.0,
        "matmul_phantom_tokens": 8.0,
        "activation_passes": 1.0,
    },
    {
        "eta_bandwidth": 0.3,
        "eta_matmul": 0.3,
        "eta_attention": 0.1,
        "step_overhead_s": 5e-3,
        "prefix_query_kv_passes": 50.0,
        "decode_attention_items_per_sm": 0.25,
        "matmul_phantom_tokens": 256.0,
        "activation_passes": 100.0,
    },
)
# A parameter is refused when its Jacobian column is (nearly) a combination of the others':
# independence = sine of the angle to their span. Real, well-covered data give ~0.7; 0.05 means
# the data barely tell it apart (a 1% timing error moves it ~20x more than if it stood alone).
MIN_INDEPENDENCE = 0.05
NOISE_FLOOR = 0.01  # timing rows are never better than ~1%: the floor for standard errors

HINTS = {
    "eta_bandwidth": "add memory-bound rows: linear rows with few tokens (1-64) or decode rows",
    "eta_matmul": "add compute-bound rows: linear rows with >= 1024 tokens, or long prefills",
    "eta_attention": "add attention-heavy rows: prefills of >= 8k tokens or chunked_prefill rows "
    "with long prompts, beside linear rows of many tokens",
    "step_overhead_s": "add whole steps (decode at small batch, short prefills) beside linear rows",
    "prefix_query_kv_passes": "add chunked_prefill rows (several chunk sizes over a long prompt)",
    "decode_attention_items_per_sm": "add decode rows at small batch (1-8) over several contexts "
    "(1k-16k), or hold it fixed (0 = off)",
    "matmul_phantom_tokens": "add compute-bound linear rows at several sizes (128-8192 tokens), or hold "
    "it fixed (0 = one matmul rate at every size)",
    "activation_passes": "add whole steps of many tokens (prefills of 512-16k tokens) beside linear rows "
    "of the same sizes, or hold it fixed (0 = none)",
}
DECODE_ATTENTION = "decode_attention_items_per_sm"


def decode_attention_unidentified(rows: Sequence[StepRow], model: ModelSpec, gpu: GpuSpec) -> str | None:
    """Why the rows cannot pin `decode_attention_items_per_sm`, or None when they can: it needs
    decode rows whose attention work items (batch x KV heads) leave SMs idle at two or more
    batch sizes, spanning two or more contexts (the penalty is the slope in context at a small
    batch, against the slope at another)."""
    h = kv_heads_per_gpu(model)
    small = [r for r in rows if r.kind == "decode" and r.batch * h < gpu.sms]
    batches = sorted({r.batch for r in small})
    contexts = sorted({r.ctx for r in small})
    if len(batches) >= 2 and len(contexts) >= 2:
        return None
    return (
        f"it needs decode rows with batch x {h} KV heads under the GPU's {gpu.sms:g} SMs at >= 2 batch "
        f"sizes and >= 2 contexts; these have batches {batches or 'none'} at contexts {contexts or 'none'}"
    )


class UnderdeterminedFit(InvalidInput):
    """The rows cannot pin one or more parameters; `parameters` names them."""

    def __init__(self, field: str, reason: str, parameters: Sequence[str]) -> None:
        super().__init__(field, reason)
        self.parameters = tuple(parameters)


@dataclass(frozen=True)
class ParameterReport:
    name: str
    value: float
    fixed: bool
    std_error: float | None
    independence: float | None
    at_bound: bool


@dataclass(frozen=True)
class Calibration:
    profile: Profile
    model: str
    gpu: str
    source: str
    rows: list[dict[str, Any]]
    parameters: list[ParameterReport]
    ceilings: dict[str, dict[str, float]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # parameters held or zeroed by the fit itself

    @property
    def errors(self) -> list[float]:
        return [r["error"] for r in self.rows]

    @property
    def mape(self) -> float:
        return mape(self.errors)

    @property
    def max_abs_error(self) -> float:
        return max(abs(e) for e in self.errors)

    @property
    def theoretical_mape(self) -> float:
        return mape([r["theoretical_ms"] / r["measured_ms"] - 1 for r in self.rows])


def mape(errors: Sequence[float]) -> float:
    """Mean absolute relative error, as a fraction."""
    return math.fsum(abs(e) for e in errors) / len(errors)


def _profile(
    values: Mapping[str, float], gpu: str, name: str, source: str, sampled_logits: bool = SAMPLED_LOGITS
) -> Profile:
    return Profile.model_validate(
        {
            "name": name,
            "gpu": gpu,
            "source": source,
            "sampled_logits": sampled_logits,
            **{k: float(values[k]) for k in PARAMETERS},
        }
    )


def fit_profile(
    meas: Measurements,
    model: ModelSpec,
    gpu: GpuSpec,
    *,
    name: str | None = None,
    fixed: Mapping[str, float] | None = None,
    field: str = "measurements",
    source_label: str | None = None,
    force: bool = False,
    sampled_logits: bool = SAMPLED_LOGITS,
) -> Calibration:
    """Least-squares fit of the profile's parameters to `meas` (relative residuals, bounded).
    `fixed` holds parameters at given values instead of fitting them; `sampled_logits` picks the
    vocabulary accounting (False: the seed's, for comparisons). Raises UnderdeterminedFit
    naming every parameter the rows cannot pin, and (unless `force`) refuses a fit with a MAPE
    over MAX_FIT_MAPE or every fitted parameter on a bound. Errors name `field` (the
    measurements), `model`, `gpu` or `fix` (the held parameters)."""
    from solvers.fit import least_squares_fit

    if model.is_moe:
        raise InvalidInput(
            "model",
            f"{model.name} is a mixture of experts; fit the GPU's profile on a dense model "
            "(a profile describes the GPU and stack, and transfers to other models)",
        )
    check_model_matches(meas, model)
    check_gpu_matches(meas, gpu)
    user_fixed = dict(fixed or {})
    fixed = _held_parameters(user_fixed, model)
    notes: list[str] = []
    if DECODE_ATTENTION not in fixed:
        why = decode_attention_unidentified(meas.rows, model, gpu)
        if why is not None:
            fixed[DECODE_ATTENTION] = 0.0
            notes.append(f"{DECODE_ATTENTION} held at 0 (off): {why}")
    free = [k for k in PARAMETERS if k not in fixed]
    obs = observations(meas.rows)
    measured = [o.measured_s for o in obs]
    predictor = Predictor(meas.rows)
    if len(obs) < len(free):
        raise UnderdeterminedFit(
            field,
            f"{len(obs)} timings cannot pin {len(free)} parameters ({', '.join(free)}); "
            "add rows or hold some fixed",
            free,
        )

    def values(x: Sequence[float] | np.ndarray) -> dict[str, float]:
        return {**fixed, **{k: float(v) for k, v in zip(free, x, strict=True)}}

    trial = THEORETICAL.model_copy(update={"name": "fit", "gpu": gpu.name, "sampled_logits": sampled_logits})

    measured_arr = np.array(measured)

    def residuals(x: np.ndarray) -> np.ndarray:
        # model_copy skips validation: the solver keeps x within BOUNDS
        return predictor(model, gpu, trial.model_copy(update=values(x))) / measured_arr - 1.0

    result = least_squares_fit(
        residuals,
        free,
        [[s[k] for k in free] for s in STARTS],
        [BOUNDS[k][0] for k in free],
        [BOUNDS[k][1] for k in free],
        x_scale=[SCALES[k] for k in free],
        noise_floor=NOISE_FLOOR,
    )
    fitted = values(result.x)
    bad = result.unidentifiable(MIN_INDEPENDENCE)
    flat = _flat_decode_attention(meas.rows, model, gpu, fitted) if DECODE_ATTENTION in free else False
    if flat:
        # Fitted below the smallest batch's items per SM: no row's time depends on it, and every
        # row is predicted as with 0, which is what the rows say.
        bad = [d for d in bad if d.name != DECODE_ATTENTION]
        fitted[DECODE_ATTENTION] = 0.0
        notes.append(f"{DECODE_ATTENTION} fitted to 0 (off): the rows show no decode attention penalty")
    if bad:
        raise UnderdeterminedFit(field, _underdetermined_message(bad, meas), [d.name for d in bad])
    err_pct = 100 * float(np.mean(np.abs(result.residuals)))
    if not force:
        _refuse_a_poor_fit(field, meas, err_pct / 100, {k: fitted[k] for k in free})
    label = source_label or meas.source
    source = (
        f"Fitted by capplan calibrate: least squares on relative errors of {len(obs)} step timings "
        f"({', '.join(sorted(meas.kinds()))}) of {model.name} on {gpu.name} from {label}"
        + (f" ({meas.info['device']})" if "device" in meas.info else "")
        + f"; MAPE {err_pct:.1f}%"
        + (f"; held fixed: {', '.join(f'{k}={v:g}' for k, v in user_fixed.items())}" if user_fixed else "")
        + "".join(f"; {n}" for n in notes)
        + "."
    )
    profile = _profile(fitted, gpu.name, name or f"{gpu.name}-calibrated", source, sampled_logits)
    pred = predictor(model, gpu, profile).tolist()
    theo = predictor(model, gpu, THEORETICAL).tolist()
    # A decode attention term fitted flat to 0 was not estimated: no error, no independence.
    unestimated = set(fixed) | ({DECODE_ATTENTION} if flat else set())
    return Calibration(
        profile=profile,
        model=model.name,
        gpu=gpu.name,
        source=meas.source,
        rows=_row_reports(obs, measured, pred, theo),
        parameters=_parameter_reports(fitted, set(fixed), unestimated, result.diagnostics),
        ceilings=_ceilings(meas, gpu, profile),
        notes=notes,
    )


def _held_parameters(user_fixed: Mapping[str, float], model: ModelSpec) -> dict[str, float]:
    """`fix`: the parameters held, by parameter name (legacy names translated), each checked
    against its bounds."""
    fixed: dict[str, float] = {}
    for k, v in user_fixed.items():
        param = LEGACY_FIXED.get(k, k)
        if param not in PARAMETERS or param in fixed:
            what = f"{echo(k)} twice (as {param})" if param in fixed else f"unknown parameter {echo(k)}"
            raise InvalidInput("fix", f"{what}; valid: {', '.join(PARAMETERS)}")
        lo, hi = BOUNDS[param]
        if not lo <= v <= hi or (k.startswith("eta_") and v <= 0):
            raise InvalidInput(f"fix.{k}", f"must be in [{lo:g}, {hi:g}], got {v:g}")
        fixed[param] = v / query_heads_per_kv_head(model) if k != param else v
    return fixed


def _row_reports(
    obs: Sequence[Any], measured: Sequence[float], pred: Sequence[float], theo: Sequence[float]
) -> list[dict[str, Any]]:
    """Each timing measured, fitted and theoretical (ms), with the fit's relative error."""
    return [
        {
            "kind": o.row.kind,
            "line": o.row.line,
            "shape": o.row.shape(),
            "quantity": o.quantity,
            "measured_ms": m * 1e3,
            "fitted_ms": p * 1e3,
            "theoretical_ms": t * 1e3,
            "error": p / m - 1.0,
        }
        for o, m, p, t in zip(obs, measured, pred, theo, strict=True)
    ]


def _parameter_reports(
    fitted: Mapping[str, float], fixed: set[str], unestimated: set[str], diagnostics: Sequence[Any]
) -> list[ParameterReport]:
    """Every parameter's value; the estimated ones with their standard error, independence and
    whether a bound binds (an unestimated one fitted, not held, counts as at its bound)."""
    diag = {d.name: d for d in diagnostics}
    return [
        ParameterReport(
            name=k,
            value=fitted[k],
            fixed=k in fixed,
            std_error=None if k in unestimated else diag[k].std_error,
            independence=None if k in unestimated else diag[k].independence,
            at_bound=False if k in fixed else k in unestimated or diag[k].binding_bound,
        )
        for k in PARAMETERS
    ]


def _flat_decode_attention(
    rows: Sequence[StepRow], model: ModelSpec, gpu: GpuSpec, fitted: Mapping[str, float]
) -> bool:
    """Does the fitted decode attention parameter leave every row's time as at 0? It does when
    even the smallest decode count with context fills the SMs: N0 <= min max(n, 1)."""
    counts = [max(r.batch, 1) for r in rows if r.kind == "decode" and r.ctx > 0]
    counts += [max(r.decodes, 1) for r in rows if r.kind == "chunked_prefill" and r.decodes and r.ctx > 0]
    if not counts:
        return True
    n0 = gpu.sms * fitted[DECODE_ATTENTION] / kv_heads_per_gpu(model)
    # every a <= min(counts) h / SMs fits alike: the solver may stop a rounding error above it
    return n0 <= min(counts) * (1.0 + 1e-9)


def on_bound(name: str, value: float) -> bool:
    """Is a fitted value on (within 1e-6 of the span of) one of its BOUNDS?"""
    lo, hi = BOUNDS[name]
    return min(value - lo, hi - value) <= 1e-6 * (hi - lo)


def _refuse_a_poor_fit(field: str, meas: Measurements, fit_mape: float, free: Mapping[str, float]) -> None:
    if fit_mape > MAX_FIT_MAPE:
        raise InvalidInput(
            field,
            f"the best fit misses the rows of {meas.source} by {100 * fit_mape:.1f}% on average "
            f"(MAPE over {100 * MAX_FIT_MAPE:.0f}%): the cost model cannot describe these timings "
            "(another model or GPU, milliseconds vs seconds, a disturbed run?); check them, or force "
            "the fit to keep it anyway",
        )
    if free and all(on_bound(k, v) for k, v in free.items()):
        where = ", ".join(f"{k}={v:g}" for k, v in free.items())
        raise InvalidInput(
            field,
            f"every fitted parameter sits on a bound ({where}): the bounds chose them, not the rows "
            f"of {meas.source}; check the timings, or force the fit to keep it anyway",
        )


def _underdetermined_message(bad: Sequence[Any], meas: Measurements) -> str:
    parts = []
    for d in bad:
        if d.sensitivity == 0.0 or d.most_aligned is None:
            why = "no row's fitted time depends on it"
        else:
            why = (
                f"its effect cannot be separated from {d.most_aligned}'s (independence {d.independence:.2g})"
            )
        parts.append(f"{d.name}: {why}; {HINTS[d.name]}")
    kinds = ", ".join(sorted(meas.kinds()))
    names = ", ".join(d.name for d in bad)
    return (
        f"underdetermined fit: the rows ({kinds}) cannot pin {names}. "
        + " | ".join(parts)
        + " | or hold it fixed at a value (fix NAME=VALUE)"
    )


def _ceilings(meas: Measurements, gpu: GpuSpec, profile: Profile) -> dict[str, dict[str, float]]:
    """Measured peaks as fractions of the datasheet, beside the fitted efficiencies they cap."""
    out: dict[str, dict[str, float]] = {}
    if "d2d_copy_TBps" in meas.ceilings:
        v = meas.ceilings["d2d_copy_TBps"] * CEILINGS["d2d_copy_TBps"]
        out["d2d_copy_TBps"] = {
            "value": meas.ceilings["d2d_copy_TBps"],
            "fraction_of_datasheet": v / gpu.bandwidth,
            "fitted_eta": profile.eta_bandwidth,
        }
    if "bf16_gemm_TFLOPs" in meas.ceilings:
        v = meas.ceilings["bf16_gemm_TFLOPs"] * CEILINGS["bf16_gemm_TFLOPs"]
        out["bf16_gemm_TFLOPs"] = {
            "value": meas.ceilings["bf16_gemm_TFLOPs"],
            "fraction_of_datasheet": v / gpu.matmul_flops("bf16"),
            "fitted_eta": profile.eta_matmul,
        }
    return out
