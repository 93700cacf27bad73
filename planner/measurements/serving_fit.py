"""`capplan calibrate --serving`: fit a profile's serving-level terms to real vLLM runs.

The kernel terms of a base profile (efficiencies, re-reads, phantom tokens: what `capplan
calibrate` fits to timed steps) stay fixed; on top of them this fits, by bounded least squares
(`scipy.optimize.least_squares`) through capplan's own forward model (`predict_run`: the
analytic latency model, or the simulator with `simulate`), the terms a serving run shows and a
step timing does not:

* `step_overhead_s`: the engine's cost per step (the base's kernel overhead included);
* `sequence_overhead_s`: the engine's cost per decode in a step (scheduling, sampling,
  detokenizing, streaming each sequence);
* `request_overhead_s` / `completions_overhead_s`: the front end per request on
  /v1/chat/completions and /v1/completions;
* `compute_scale` (no unit): the rig's matmul and attention throughput as a share of the base
  profile's (both efficiencies scaled by it, memory bandwidth untouched). A per-rig term: the
  kernel tables a built-in profile is fitted to were timed on a healthy GPU, and a rig with
  capped clocks or power computes slower while its memory-bound decode steps keep pace (GPUStack's
  H100: light-load TPOT within 2% of the profile, prefill-bound bursts 1.5-2.1x slower than it,
  where the same publisher's A100 bursts are within 5-15% of theirs; docs/measurements.md,
  "Slow rigs"). Fitted only where a burst's throughput is among the figures (a light-load TTFT
  alone cannot tell the rig's compute from its front end); the fitted profile is that rig's.

Residuals: each run's relative error, (predicted - measured) / measured, on the figures the
issue scores: TPOT p50 (ITL p50 where the run printed no TPOT), TTFT p50, and saturation
throughput for a burst. A figure capplan cannot give for a trial profile (an open loop it calls
unstable) counts as a 100% miss. A term no fitted figure depends on is held at the base's value
(a front end without a TTFT on its endpoint; the step terms without a TPOT or a saturated run).

A fit whose figures miss by more than MAX_FIT_MAPE on average (the kernel `calibrate`'s 25%)
is refused unless forced: the model, not the terms, is then at fault, and a profile fitted
anyway would carry the misfit into every plan.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from planner.costmodel.fitting import MAX_FIT_MAPE  # the kernel fit's threshold: one bar for both
from planner.costmodel.profile import Profile
from planner.errors import InvalidInput
from planner.measurements.prediction import endpoint_of, predict_run
from planner.measurements.scoring import score_run
from planner.measurements.serving_run import ServingRun

__all__ = [
    "BOUNDS_S",
    "FIT_FIGURES",
    "MAX_FIT_MAPE",
    "SCALE_BOUNDS",
    "TERMS",
    "RunFit",
    "ServingFit",
    "endpoint_of",
    "fit_serving",
    "predict_figures",
]

# The terms and their bounds, seconds (each inside the profile field's documented range).
BOUNDS_S: dict[str, tuple[float, float]] = {
    "step_overhead_s": (0.0, 0.05),
    "sequence_overhead_s": (0.0, 0.002),
    "request_overhead_s": (0.0, 1.0),
    "completions_overhead_s": (0.0, 1.0),
}
# The per-rig compute term's bounds (a share of the base's compute; the top is also capped so
# that both scaled efficiencies stay <= 1, their documented range).
SCALE_BOUNDS: dict[str, tuple[float, float]] = {"compute_scale": (0.1, 2.0)}
TERMS: tuple[str, ...] = (*BOUNDS_S, *SCALE_BOUNDS)
FIT_FIGURES = ("tpot_p50", "ttft_p50", "saturation_throughput")
MISS = 1.0  # the residual of a figure the trial profile cannot predict (an unstable open loop)
MAX_RUNS = 500  # runs in one fit: bounds its time (each trial predicts every run)
MAX_EVALUATIONS = 200  # least_squares' function evaluations
DIFF_STEP = 1e-2  # relative finite-difference step: the forward model is piecewise smooth


@dataclass(frozen=True)
class RunFit:
    """One run's fitted figures: figure -> (measured, predicted before, predicted after), seconds
    or tokens/s; a prediction is None where the model has none."""

    run_id: str
    gpu: str
    figures: dict[str, tuple[float, float | None, float | None]]

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "gpu": self.gpu,
            "figures": {
                f: {
                    "measured": m,
                    "before": b,
                    "after": a,
                    "error_before_pct": _pct(b, m),
                    "error_after_pct": _pct(a, m),
                }
                for f, (m, b, a) in self.figures.items()
            },
        }


@dataclass(frozen=True)
class ServingFit:
    """The fitted profile, the terms (value, fitted or held) and each run's fit; MAPEs in %."""

    profile: Profile
    parameters: dict[str, tuple[float, bool]]  # name -> (value: s, or a share for compute_scale; fitted)
    runs: tuple[RunFit, ...]
    mape_before_pct: dict[str, float]
    mape_after_pct: dict[str, float]
    fit_mape_pct: float
    method: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "profile": self.profile.model_dump(),
            "method": self.method,
            "parameters": {
                k: {("value" if k in SCALE_BOUNDS else "value_s"): v, "fitted": f}
                for k, (v, f) in self.parameters.items()
            },
            "mape_before_pct": self.mape_before_pct,
            "mape_after_pct": self.mape_after_pct,
            "fit_mape_pct": self.fit_mape_pct,
            "max_fit_mape_pct": 100 * MAX_FIT_MAPE,
            "runs": [r.to_dict() for r in self.runs],
        }


def _pct(predicted: float | None, measured: float) -> float | None:
    return None if predicted is None else 100.0 * (predicted - measured) / measured


def predict_figures(
    run: ServingRun, profile: Profile, *, simulate: bool = False
) -> dict[str, tuple[float, float | None]]:
    """The fitted figures of `run` under `profile` (its endpoint's front end): figure ->
    (measured, predicted). TPOT p50 stands in by ITL p50 where the run printed no TPOT."""
    pred = predict_run(run, profile, simulate=simulate)  # the run's endpoint picks the front end
    errors = {e.figure: e for e in score_run(run, pred).errors}
    if "tpot_p50" not in errors and "itl_p50" in errors:
        errors["tpot_p50"] = errors["itl_p50"]
    return {f: (errors[f].measured, errors[f].predicted) for f in FIT_FIGURES if f in errors}


def _free_terms(
    runs: Sequence[ServingRun], figures: Sequence[dict[str, tuple[float, float | None]]]
) -> list[str]:
    """The terms some fitted figure depends on (module docstring)."""
    kinds = set()
    for run, figs in zip(runs, figures, strict=True):
        if "ttft_p50" in figs:
            kinds.add("completions_overhead_s" if endpoint_of(run) == "completions" else "request_overhead_s")
        if "tpot_p50" in figs or "saturation_throughput" in figs:
            kinds.update(("step_overhead_s", "sequence_overhead_s"))
        if "saturation_throughput" in figs:
            kinds.add("compute_scale")
    return [k for k in TERMS if k in kinds]


def _bounds(base: Profile, name: str, kernel_step_s: float) -> tuple[float, float]:
    if name == "compute_scale":
        lo, hi = SCALE_BOUNDS[name]
        return lo, min(hi, 1.0 / max(base.eta_matmul, base.eta_attention))
    lo, hi = BOUNDS_S[name]
    return (kernel_step_s if name == "step_overhead_s" else lo), hi


def _start(base: Profile, name: str) -> float:
    if name == "compute_scale":
        return 1.0
    return base.front_end_s("completions") if name == "completions_overhead_s" else float(getattr(base, name))


def _with_terms(base: Profile, names: Sequence[str], x_s: Sequence[float] | np.ndarray, name: str) -> Profile:
    update: dict[str, Any] = {n: float(v) for n, v in zip(names, x_s, strict=True)}
    scale = update.pop("compute_scale", None)
    if scale is not None:
        update["eta_matmul"] = base.eta_matmul * scale
        update["eta_attention"] = base.eta_attention * scale
    return base.model_copy(update={**update, "name": name})


def _term_text(name: str, value: float) -> str:
    return f"{name} = {value:.3f}" if name in SCALE_BOUNDS else f"{name} = {1e3 * value:.3f} ms"


def _residuals(figures: Sequence[dict[str, tuple[float, float | None]]]) -> np.ndarray:
    out = [
        MISS if pred is None or not math.isfinite(pred) else (pred - meas) / meas
        for figs in figures
        for meas, pred in figs.values()
    ]
    return np.asarray(out, dtype=float)


def _mape_pct(figures: Sequence[dict[str, tuple[float, float | None]]]) -> dict[str, float]:
    """Per figure kind, the mean absolute % error over the runs that have it (a miss: 100%)."""
    out: dict[str, float] = {}
    for f in FIT_FIGURES:
        errs = [abs(_residuals([{f: figs[f]}])[0]) for figs in figures if f in figs]
        if errs:
            out[f] = 100.0 * float(np.mean(errs))
    return out


def _check_runs(runs: Sequence[ServingRun], base: Profile, field: str) -> None:
    if not runs:
        raise InvalidInput(field, "no runs to fit")
    if len(runs) > MAX_RUNS:
        raise InvalidInput(field, f"{len(runs):,} runs; a fit takes at most {MAX_RUNS}")
    gpus = {r.settings.gpu for r in runs}
    if len(gpus) != 1 or None in gpus:
        raise InvalidInput(
            field, f"runs from one catalog GPU, got {sorted(str(g) for g in gpus)}: fit each GPU apart"
        )
    (gpu,) = gpus
    if base.gpu is not None and base.gpu != gpu:
        raise InvalidInput("base_profile", f"the base profile is {base.gpu}'s; the runs are on {gpu}")


def fit_serving(
    runs: Sequence[ServingRun],
    base: Profile,
    *,
    simulate: bool = False,
    force: bool = False,
    name: str | None = None,
    kernel_step_s: float = 0.0,
    hold: Sequence[str] = (),
    field: str = "runs",
) -> ServingFit:
    """Fit the serving terms of `base` to `runs` (one GPU), the kernel terms fixed (module
    docstring). `kernel_step_s`: the part of the base's `step_overhead_s` its kernels take (the
    fitted step cost is that plus an engine cost >= 0; 0 when unknown). `hold`: terms (BOUNDS_S
    names) kept at the base's value whatever the runs show. Refuses (InvalidInput
    naming `field`) a fit missing the figures by more than MAX_FIT_MAPE on average unless
    `force`, and runs with nothing to fit."""
    if not (0.0 <= kernel_step_s <= base.step_overhead_s and kernel_step_s < BOUNDS_S["step_overhead_s"][1]):
        raise InvalidInput(
            "kernel_step_s", f"must be in [0, the base's step_overhead_s], got {kernel_step_s:g}"
        )
    _check_runs(runs, base, field)
    gpu = str(runs[0].settings.gpu)
    before = [predict_figures(r, base, simulate=simulate) for r in runs]
    unknown = sorted(set(hold) - set(TERMS))
    if unknown:
        raise InvalidInput("hold", f"{', '.join(unknown)}: not a serving term ({', '.join(TERMS)})")
    free = [k for k in _free_terms(runs, before) if k not in hold]
    if not free:
        raise InvalidInput(field, f"none of the runs printed {', '.join(FIT_FIGURES)}: nothing to fit")
    label = name or f"{gpu}-serving"
    lo, hi = (np.array(b) for b in zip(*(_bounds(base, k, kernel_step_s) for k in free), strict=True))
    x0 = np.clip([_start(base, k) for k in free], lo, hi)  # the base's values, inside the bounds
    scale = np.array([max(1e-3 * (h - lo_), v) for lo_, h, v in zip(lo, hi, x0, strict=True)])

    def residuals(x_s: np.ndarray) -> np.ndarray:
        prof = _with_terms(base, free, x_s, label)
        return _residuals([predict_figures(r, prof, simulate=simulate) for r in runs])

    res = least_squares(
        residuals, x0, bounds=(lo, hi), x_scale=scale, diff_step=DIFF_STEP, max_nfev=MAX_EVALUATIONS
    )
    fitted = _with_terms(base, free, res.x, label)
    after = [predict_figures(r, fitted, simulate=simulate) for r in runs]
    fit_mape = float(np.mean(np.abs(_residuals(after))))
    if fit_mape > MAX_FIT_MAPE and not force:
        raise InvalidInput(
            field,
            f"the fitted profile misses the runs' figures by {100 * fit_mape:.0f}% on average (over "
            f"{100 * MAX_FIT_MAPE:.0f}%): the model cannot describe these runs with its serving terms "
            "alone (another release, a disturbed rig, a missing cost?); check them, or force the fit",
        )
    runs_fit = tuple(
        RunFit(r.id, gpu, {f: (m, b[f][1], a[f][1]) for f, (m, _) in a.items()})
        for r, b, a in zip(runs, before, after, strict=True)
    )
    source = (
        f"{base.source} Serving terms fitted by `capplan calibrate --serving` "
        f"({', '.join(_term_text(k, float(v)) for k, v in zip(free, res.x, strict=True))}; "
        f"{'simulator' if simulate else 'analytic model'}, fit MAPE {100 * fit_mape:.1f}%) "
        f"to {len(runs)} runs of the serving-run corpus: {', '.join(r.id for r in runs)}."
    ).strip()
    fitted = fitted.model_copy(update={"source": source})
    params = {k: (float(getattr(fitted, k) or 0.0), k in free) for k in BOUNDS_S}
    fitted_scale = dict(zip(free, res.x, strict=True)).get("compute_scale")
    params["compute_scale"] = (1.0 if fitted_scale is None else float(fitted_scale), fitted_scale is not None)
    return ServingFit(
        profile=fitted,
        parameters=params,
        runs=runs_fit,
        mape_before_pct=_mape_pct(before),
        mape_after_pct=_mape_pct(after),
        fit_mape_pct=100.0 * fit_mape,
        method="simulator" if simulate else "analytic",
    )
