"""How far capplan's prediction for a run is from what the run measured: a signed error per figure,
MAPE per GPU per figure kind, and whether an emitted bench kept the plan's promise.

    from planner.measurements.scoring import score_run, mape_by_gpu
    scores = [score_run(run, predict_run(run, "auto")) for run in runs]
    mape_by_gpu(scores)["h100-sxm"]["tpot_p50"].mape_pct

A run scores only the figures it prints (and the prediction has): a source without a TTFT p99
is not scored on one. A saturation run is scored on throughput alone, as the figure kind
`saturation_throughput`; an open or closed loop's throughput is `throughput` (for an open loop
below capacity it is the rate x the mean output, close to exact by construction). The signed error
is 100 (predicted - measured) / measured: positive means capplan says slower (latency) or more
(throughput) than vLLM did. MAPE is the mean of the absolute errors. A run on a release before
vLLM 0.6 (ServingRun.release_era `pre-0.6`) is scored like any other but counted apart: its MAPE
is its own (`mape_by_gpu(scores, "pre-0.6")`), not the target figure.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from planner.costmodel.profile import Profile
    from planner.measurements.prediction import RunPrediction
    from planner.measurements.serving_run import ServingRun

__all__ = [
    "FIGURES",
    "FigureError",
    "Mape",
    "PromiseCheck",
    "RunScore",
    "mape_by",
    "mape_by_gpu",
    "promise_checks",
    "score_run",
    "score_runs",
]

# Figure kinds, in report order: (kind, the measured metric, its percentile, the prediction field).
_LATENCY_FIGURES: tuple[tuple[str, str, float, str], ...] = (
    ("ttft_p50", "ttft", 50.0, "ttft_p50_s"),
    ("ttft_p99", "ttft", 99.0, "ttft_p99_s"),
    ("tpot_p50", "tpot", 50.0, "tpot_p50_s"),
    ("itl_p50", "itl", 50.0, "itl_p50_s"),
    ("itl_p99", "itl", 99.0, "itl_p99_s"),
)
FIGURES: tuple[str, ...] = (*(f[0] for f in _LATENCY_FIGURES), "throughput", "saturation_throughput")


@dataclass(frozen=True)
class FigureError:
    """One figure: predicted and measured (seconds, or tokens/s for throughputs) and the signed
    error in percent (None when capplan has no figure, e.g. an unstable open loop)."""

    figure: str
    predicted: float | None
    measured: float
    error_pct: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "figure": self.figure,
            "predicted": self.predicted,
            "measured": self.measured,
            "error_pct": self.error_pct,
        }


@dataclass(frozen=True)
class PromiseCheck:
    """One figure the plan promised (a p50 or p99, seconds) against the bench: `held` when the
    measurement is no worse (measured <= promised)."""

    figure: str
    promised_s: float
    measured_s: float
    held: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "figure": self.figure,
            "promised_s": self.promised_s,
            "measured_s": self.measured_s,
            "held": self.held,
        }


@dataclass(frozen=True)
class RunScore:
    """A run's figures side by side with capplan's, and the plan's promise where it carries one."""

    run_id: str
    gpu: str
    model: str
    load: str
    method: str
    errors: tuple[FigureError, ...]
    promise: tuple[PromiseCheck, ...] = ()
    profile: str | None = None
    no_prediction: str | None = None  # why capplan has no prediction for the run (then no errors)
    release_era: str = "modelled"  # ServingRun.release_era: `pre-0.6` runs stay out of the target MAPE

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "gpu": self.gpu,
            "model": self.model,
            "load": self.load,
            "method": self.method,
            "profile": self.profile,
            "no_prediction": self.no_prediction,
            "release_era": self.release_era,
            "errors": [e.to_dict() for e in self.errors],
            "promise": [p.to_dict() for p in self.promise],
        }


@dataclass(frozen=True)
class Mape:
    """Mean absolute percentage error of one figure kind over `runs` scored runs."""

    mape_pct: float
    runs: int

    def to_dict(self) -> dict[str, Any]:
        return {"mape_pct": self.mape_pct, "runs": self.runs}


def _error(figure: str, predicted: float | None, measured: float | None) -> FigureError | None:
    if measured is None or not (math.isfinite(measured) and measured > 0.0):
        return None  # not printed (or zero: no relative error)
    if predicted is None or not math.isfinite(predicted):
        return FigureError(figure, None, measured, None)
    return FigureError(figure, predicted, measured, 100.0 * (predicted - measured) / measured)


def _measured_throughput(run: ServingRun) -> float | None:
    m = run.measured
    if m.output_throughput_tok_s is not None:
        return m.output_throughput_tok_s
    if m.total_output_tokens is not None and m.duration_s:
        return m.total_output_tokens / m.duration_s
    return None


def score_run(run: ServingRun, prediction: RunPrediction) -> RunScore:
    """The signed error of every figure both the run and the prediction speak of."""
    errors: list[FigureError] = []
    if prediction.load != "saturation":
        for figure, metric, pct, field in _LATENCY_FIGURES:
            summary = getattr(run.measured, metric)
            e = _error(figure, getattr(prediction, field), None if summary is None else summary.p(pct))
            if e is not None:
                errors.append(e)
    kind = "saturation_throughput" if prediction.load == "saturation" else "throughput"
    e = _error(kind, prediction.output_throughput_tok_s, _measured_throughput(run))
    if e is not None:
        errors.append(e)
    return RunScore(
        run_id=run.id,
        gpu=prediction.gpu,
        model=prediction.model,
        load=prediction.load,
        method=prediction.method,
        errors=tuple(errors),
        promise=promise_checks(run),
        profile=prediction.profile,
        release_era=run.release_era,
    )


def score_runs(
    runs: list[ServingRun], profile: Profile | str = "auto", *, simulate: bool = False
) -> list[RunScore]:
    """Each run predicted (planner/measurements/prediction.py) and scored, in order. A run capplan
    cannot predict (a prompt the modelled KV cache cannot hold, a GPU the catalog lacks) is kept
    with the reason in `no_prediction` and no errors: it counts in no MAPE."""
    from planner.errors import InvalidInput
    from planner.measurements.prediction import predict_run, run_workload

    out = []
    for run in runs:
        try:
            out.append(score_run(run, predict_run(run, profile, simulate=simulate)))
        except InvalidInput as exc:
            try:
                load: str = run_workload(run).load
            except InvalidInput:
                load = "unknown"
            out.append(
                RunScore(
                    run_id=run.id,
                    gpu=run.settings.gpu or "unknown",
                    model=run.settings.model,
                    load=load,
                    method="simulator" if simulate else "analytic",
                    errors=(),
                    promise=promise_checks(run),
                    no_prediction=f"{exc.field}: {exc.reason}",
                    release_era=run.release_era,
                )
            )
    return out


def promise_checks(run: ServingRun) -> tuple[PromiseCheck, ...]:
    """For a bench `capplan plan --emit bench` emitted: each promised TTFT/ITL p50/p99 against
    the measured one (measured <= promised holds); empty for any other run."""
    p = run.promised
    if p is None:
        return ()
    checks = []
    for figure, metric, pct in (
        ("ttft_p50", "ttft", 50.0),
        ("ttft_p99", "ttft", 99.0),
        ("itl_p50", "itl", 50.0),
        ("itl_p99", "itl", 99.0),
    ):
        promised = getattr(p, f"{figure}_s")
        summary = getattr(run.measured, metric)
        measured = None if summary is None else summary.p(pct)
        if promised is not None and measured is not None:
            checks.append(PromiseCheck(figure, promised, measured, measured <= promised))
    return tuple(checks)


def mape_by(scores: list[RunScore], key: Callable[[RunScore], str]) -> dict[str, dict[str, Mape]]:
    """MAPE per group (`key` of a score; sorted) per figure kind (FIGURES order), over the runs
    scored on it."""
    by: dict[str, dict[str, list[float]]] = {}
    for s in scores:
        for e in s.errors:
            if e.error_pct is not None:
                by.setdefault(key(s), {}).setdefault(e.figure, []).append(abs(e.error_pct))
    return {
        group: {f: Mape(math.fsum(v) / len(v), len(v)) for f in FIGURES if (v := figs.get(f))}
        for group, figs in sorted(by.items())
    }


def mape_by_gpu(scores: list[RunScore], era: str = "modelled") -> dict[str, dict[str, Mape]]:
    """MAPE per GPU per figure kind (`mape_by` the GPU) over the runs of one release era: by
    default the releases the built-in profiles model (the target MAPE); `pre-0.6` for the runs
    of earlier releases, scored apart (ServingRun.release_era)."""
    return mape_by([s for s in scores if s.release_era == era], lambda s: s.gpu)
