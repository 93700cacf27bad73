"""`capplan calibrate --serving` (planner/measurements/serving_fit.py): the serving terms fitted to
real vLLM runs, the base profile's kernel terms fixed.

* The fitter recovers terms it is handed: runs whose measured figures are capplan's own
  predictions under known terms give those terms back.
* Held out (issue 35): fitted on half of a GPU's corpus runs (every other run, by id), the
  profile predicts the other half within TPOT p50 MAPE <= 10%, TTFT p50 <= 25%, saturation
  throughput <= 20%. Where the corpus cannot get there with these terms the test is a strict
  xfail that says why (it fails the day it passes: update the reason and the figures then).
* A fit the terms cannot make good is refused, naming the 25% threshold.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner import api
from planner.costmodel.profile import Profile, load_profile_file
from planner.costmodel.profiles import resolve_profile
from planner.errors import InvalidInput
from planner.measurements import builtin_corpus
from planner.measurements.serving_fit import MAX_FIT_MAPE, fit_serving, predict_figures
from planner.measurements.serving_run import LatencySummary, ServingRun
from tests.cli_helpers import run_cli

TARGET_PCT = {"tpot_p50": 10.0, "ttft_p50": 25.0, "saturation_throughput": 20.0}  # the issue's


def _corpus(gpu: str) -> list[ServingRun]:
    return sorted((r for r in builtin_corpus() if r.settings.gpu == gpu), key=lambda r: r.id)


def _h200_runs() -> list[ServingRun]:
    return _corpus("h200-sxm")


def _as_measured(run: ServingRun, ttft_s: float, tpot_s: float) -> ServingRun:
    m = run.measured.model_copy(
        update={"ttft": LatencySummary(median_s=ttft_s), "tpot": LatencySummary(median_s=tpot_s), "itl": None}
    )
    return run.model_copy(update={"measured": m})


def test_the_fit_recovers_the_terms_the_runs_were_made_with() -> None:
    base = resolve_profile("auto", "h200-sxm")
    truth = base.model_copy(
        update={"step_overhead_s": 0.004, "sequence_overhead_s": 2e-4, "completions_overhead_s": 0.020}
    )
    runs = []
    for run in _h200_runs():
        figs = predict_figures(run, truth)
        ttft, tpot = figs["ttft_p50"][1], figs["tpot_p50"][1]
        assert ttft is not None and tpot is not None
        runs.append(_as_measured(run, ttft, tpot))
    fit = fit_serving(runs, base)
    assert fit.fit_mape_pct < 0.5
    assert fit.profile.completions_overhead_s == pytest.approx(0.020, rel=0.05)
    assert fit.profile.step_overhead_s == pytest.approx(0.004, rel=0.2)
    assert fit.parameters["request_overhead_s"] == (base.request_overhead_s, False)  # no chat run: held
    # the kernel terms are the base's
    for key in ("eta_bandwidth", "eta_matmul", "eta_attention", "matmul_phantom_tokens", "activation_passes"):
        assert getattr(fit.profile, key) == getattr(base, key)


def _held_out_mape(gpu: str) -> dict[str, float]:
    """Fitted on every other run of the GPU's modelled era (runs before vLLM 0.6 are scored apart,
    as `validate` scores them: their CPU costs are another release's), the other half predicted."""
    runs = [r for r in _corpus(gpu) if _predictable(r) and r.release_era == "modelled"]
    fit_half, held = runs[0::2], runs[1::2]
    fit = fit_serving(fit_half, resolve_profile("auto", gpu), force=True)
    from planner.measurements.serving_fit import _mape_pct

    return _mape_pct([predict_figures(r, fit.profile) for r in held])


def _predictable(run: ServingRun) -> bool:
    try:
        predict_figures(run, resolve_profile("auto", str(run.settings.gpu)))
    except InvalidInput:  # e.g. a prompt the modelled KV cache cannot hold
        return False
    return True


_H100_MISSING = (
    "saturation throughput 24.8% held out (TPOT 3.0%, TTFT 5.1%): the per-rig compute share fits "
    "GPUStack's H100 at 0.29 where its prefill-bound bursts alone ask 0.37-0.49, because it also "
    "absorbs the front end's per-request CPU time the model lacks, serial in a burst (the 4-token "
    "bursts: 7-12 ms a request beyond the modelled burst once the rig's compute is accounted for, "
    "on all three GPU/model pairs); so the prefill-bound bursts held out come out 25-30% low"
)


@pytest.mark.parametrize(
    "gpu",
    [
        "h200-sxm",
        pytest.param("h100-sxm", marks=pytest.mark.xfail(strict=True, reason=_H100_MISSING)),
        # the bf16 bursts held out within 11-15%, the FP8 ShareGPT burst +26% (its GEMMs on FP8
        # Marlin, planner.catalog.quantization.marlin_points): 17.3% on saturation throughput
        "a100-80gb-sxm",
    ],
)
def test_a_fit_on_half_the_runs_predicts_the_other_half(gpu: str) -> None:
    mape = _held_out_mape(gpu)
    assert mape, "no figure held out"
    for figure, got in mape.items():
        assert got <= TARGET_PCT[figure], f"{gpu} {figure}: held-out MAPE {got:.1f}% > {TARGET_PCT[figure]}%"


def test_a_fit_the_terms_cannot_make_good_is_refused_naming_the_threshold() -> None:
    """GPUStack's Qwen3-14B bursts on an H100: 1,000 4-token requests run at 44 requests/s, 5x
    below what the per-step and per-sequence terms allow without breaking the long-output bursts
    (a serial per-request cost the model lacks); forced, the rig's compute share goes to 0.29 to
    meet them, the prefill-bound bursts come out low, and the fit misses by ~27% (~57% without the
    share)."""
    runs = [r for r in _corpus("h100-sxm") if r.id.startswith("gpustack-qwen3-14b") and _predictable(r)]
    with pytest.raises(InvalidInput) as err:
        fit_serving(runs, resolve_profile("auto", "h100-sxm"), field="--serving")
    assert err.value.field == "--serving"
    assert f"over {100 * MAX_FIT_MAPE:.0f}%" in err.value.reason
    forced = fit_serving(runs, resolve_profile("auto", "h100-sxm"), force=True)
    assert forced.fit_mape_pct > 100 * MAX_FIT_MAPE


def test_the_fit_recovers_a_rig_compute_share_it_is_handed() -> None:
    """GPUStack's A100 bursts re-measured as capplan predicts them on a rig computing at half the
    profile's matmul and attention throughput: the fit gives the half back (a burst's throughput is
    among the figures, so the per-rig term is free) and scales both efficiencies by it."""
    base = resolve_profile("auto", "a100-80gb-sxm")
    slow = base.model_copy(
        update={"eta_matmul": 0.5 * base.eta_matmul, "eta_attention": 0.5 * base.eta_attention}
    )
    runs = []
    for run in _corpus("a100-80gb-sxm"):
        if not run.saturation or not _predictable(run):
            continue
        (_, tok_s) = predict_figures(run, slow)["saturation_throughput"]
        assert tok_s is not None
        runs.append(
            run.model_copy(
                update={"measured": run.measured.model_copy(update={"output_throughput_tok_s": tok_s})}
            )
        )
    fit = fit_serving(runs, base, hold=("step_overhead_s", "sequence_overhead_s"))
    value, fitted = fit.parameters["compute_scale"]
    assert fitted and value == pytest.approx(0.5, rel=0.02)
    assert fit.profile.eta_matmul == pytest.approx(value * base.eta_matmul)
    assert fit.profile.eta_attention == pytest.approx(value * base.eta_attention)
    assert fit.profile.eta_bandwidth == base.eta_bandwidth
    assert fit.to_dict()["parameters"]["compute_scale"] == {"value": value, "fitted": True}


def test_the_rig_compute_share_is_held_without_a_burst() -> None:
    """Light-load runs alone (the H200 corpus: TTFT and TPOT, no burst) cannot tell a rig's
    compute from its front end: the share stays 1, the kernel efficiencies the base's."""
    base = resolve_profile("auto", "h200-sxm")
    fit = fit_serving(_h200_runs(), base)
    assert fit.parameters["compute_scale"] == (1.0, False)
    assert (fit.profile.eta_matmul, fit.profile.eta_attention) == (base.eta_matmul, base.eta_attention)


# GPUStack's prefill-bound bursts (random lengths, one GPU): the share of the built-in profile's
# matmul and attention efficiency at which the analytic model meets each one's measured
# throughput (docs/measurements.md, "Slow rigs"), to 0.01.
RIG_SHARES = {
    "gpustack-qwen3-14b-h100-sxm-random-32000-100": 0.49,
    "gpustack-qwen3-14b-h100-sxm-random-4000-200": 0.41,
    "gpustack-qwen3-14b-h100-sxm-random-2000-100": 0.41,
    "gpustack-qwen3-32b-h100-sxm-random-32000-100": 0.49,
    "gpustack-qwen3-32b-h100-sxm-random-4000-200": 0.37,
    "gpustack-qwen3-32b-h100-sxm-random-2000-100": 0.41,
    "gpustack-qwen3-32b-a100-80gb-sxm-random-32000-100": 0.82,
    "gpustack-qwen3-32b-a100-80gb-sxm-random-4000-200": 0.92,
    "gpustack-qwen3-32b-a100-80gb-sxm-random-2000-100": 0.92,
}


def test_gpustacks_h100_computes_at_half_the_profile_where_its_a100_keeps_pace() -> None:
    """The evidence that GPUStack's H100 is a slow rig, not a wrong H100 profile: its
    prefill-bound bursts meet the model at 37-49% of the profile's compute, the same publisher's
    A100 bursts of the same lengths at 82-92% of theirs (and its H100 light-load TPOT is within 2%:
    the pinned tpot_p50 of tests/test_real_accuracy.py)."""
    from scipy.optimize import brentq

    by_id = {r.id: r for r in builtin_corpus()}
    for run_id, share in RIG_SHARES.items():
        run = by_id[run_id]
        base = resolve_profile("auto", str(run.settings.gpu))
        measured = run.measured.output_throughput_tok_s
        assert measured is not None

        def miss(k: float, run: ServingRun = run, base: Profile = base, measured: float = measured) -> float:
            prof = base.model_copy(
                update={"eta_matmul": k * base.eta_matmul, "eta_attention": k * base.eta_attention}
            )
            (_, tok_s) = predict_figures(run, prof)["saturation_throughput"]
            assert tok_s is not None
            return tok_s / measured - 1.0

        assert brentq(miss, 0.1, 1.2, xtol=1e-3) == pytest.approx(share, abs=0.006), run_id


def test_runs_of_two_gpus_are_refused() -> None:
    runs = _corpus("h200-sxm")[:1] + _corpus("a100-80gb-sxm")[:1]
    with pytest.raises(InvalidInput, match="fit each GPU apart"):
        fit_serving(runs, resolve_profile("auto", "h200-sxm"))


H200_FILE = "planner/data/serving_runs/doks-gtc2026-phase0-llama31-70b-fp8-h200.json"


def test_the_command_writes_a_profile_evaluate_takes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "h200-serving.json"
    rc, stdout, stderr = run_cli(["calibrate", "--serving", H200_FILE, "-o", str(out), "--json"], capsys)
    assert rc == 0, stderr
    report = json.loads(stdout)
    assert report["max_fit_mape_pct"] == 25.0
    assert report["parameters"]["completions_overhead_s"]["fitted"] is True
    assert report["parameters"]["compute_scale"] == {"value": 1.0, "fitted": False}  # no burst: held
    run = report["runs"][0]["figures"]["ttft_p50"]
    assert abs(run["error_after_pct"]) < abs(run["error_before_pct"])
    prof = load_profile_file(out)
    assert prof.completions_overhead_s == pytest.approx(report["profile"]["completions_overhead_s"])
    request = {
        "deployment": {
            "model": "meta-llama/Llama-3.1-70B-Instruct",
            "gpu": "h200-sxm",
            "weight_dtype": "fp8",
        },
        "workload": {
            "arrivals": {"requests_per_s": 1.0},
            "input_tokens": {"constant": 200},
            "output_tokens": {"constant": 200},
            "endpoint": "completions",
        },
        "profile": str(out),
    }
    chat = {**request, "workload": {**request["workload"], "endpoint": "chat"}}
    gap_ms = (
        api.evaluate(chat).model_dump()["ttft_p50_ms"] - api.evaluate(request).model_dump()["ttft_p50_ms"]
    )
    assert gap_ms == pytest.approx(
        1e3 * (prof.request_overhead_s - prof.front_end_s("completions")), abs=1e-6
    )


def test_the_command_refuses_mixed_modes(capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run_cli(["calibrate", "x.csv", "--serving", H200_FILE], capsys)
    assert rc != 0 and "MEASUREMENTS" in err
    rc, _, err = run_cli(
        ["calibrate", "x.csv", "--model", "Qwen/Qwen3-8B", "--gpu", "h100-sxm", "--simulate"], capsys
    )
    assert rc != 0 and "--simulate" in err
