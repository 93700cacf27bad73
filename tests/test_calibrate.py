"""Calibrated profiles: the H200 fit's figures, its stability, the shipped files, refusals, and
that theoretical mode and the decode closed form are untouched by the new terms."""

from __future__ import annotations

import json
import math
import random
from dataclasses import replace
from importlib import resources
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.catalog.gpus import get_gpu, gpu_names
from planner.catalog.models import get_model
from planner.costmodel.calibrated import (
    FITTED_MEASUREMENTS,
    MAX_FIT_MAPE,
    PARAMETERS,
    VLLM_ENGINE_COST_S,
    UnderdeterminedFit,
    builtin_calibrated,
    builtin_h200_profile,
    check_gpu_matches,
    fit_builtin,
    fit_profile,
    mape,
    observations,
    predict,
)
from planner.costmodel.fit_data import Measurements, parse_json
from planner.costmodel.profile import THEORETICAL, Profile
from planner.costmodel.profiles import measured_gpus, nearest_measured_gpu, resolve_profile
from planner.costmodel.roofline import Replica
from planner.errors import InvalidInput

H200 = get_gpu("h200-sxm")
QWEN8 = get_model("Qwen/Qwen3-8B")
DATA = resources.files("planner.costmodel") / "data"
MEAS = parse_json((DATA / "measurements" / FITTED_MEASUREMENTS).read_text(), FITTED_MEASUREMENTS)


@pytest.fixture(scope="module")
def fitted():
    return fit_builtin()


def _subset(rows) -> Measurements:
    return replace(MEAS, rows=tuple(rows))


def _timed_by(profile) -> list:
    """MEAS's rows with the times `profile` predicts for them (a chunked row: total and worst)."""
    pred = iter(predict(MEAS.rows, QWEN8, H200, profile))
    rows = []
    for r in MEAS.rows:
        if r.kind == "chunked_prefill":
            total, worst = next(pred), next(pred)
            rows.append(replace(r, time_s=total, worst_step_s=worst))
        else:
            rows.append(replace(r, time_s=next(pred)))
    return rows


# --- the figures -------------------------------------------------------------------------------


def test_fit_reproduces_the_h200_rows(fitted) -> None:
    assert len(fitted.rows) == 33  # 27 rows, chunked ones give a total and a worst step
    assert fitted.mape <= 0.10
    assert fitted.max_abs_error <= 0.20
    # the roofline alone is far off: a calibrated profile earns its keep
    assert fitted.theoretical_mape >= 0.30
    p = fitted.profile
    # physically sensible and below the measured ceilings (copy 0.88, GEMM 0.80 of datasheet)
    assert 0.5 < p.eta_bandwidth < fitted.ceilings["d2d_copy_TBps"]["fraction_of_datasheet"]
    assert 0.5 < p.eta_matmul < fitted.ceilings["bf16_gemm_TFLOPs"]["fraction_of_datasheet"]
    assert 0.2 < p.eta_attention < 0.8
    assert 0.0 <= p.step_overhead_s < 2e-3
    # the prefix re-read per query head (old files' prefix_kv_passes stays 0 in new fits)
    assert p.prefix_query_kv_passes > 1.0 and p.prefix_kv_passes == 0.0
    # small GEMMs below peak: ~100 phantom tokens (the knee rows, 128-384 tokens, were 11-15% fast)
    assert 30.0 < p.matmul_phantom_tokens < 300.0
    # vLLM's vocabulary accounting, with the kernels between the GEMMs beside it (~43 passes
    # over a token's hidden state in the PyTorch harness; 26-42 in vLLM's kernel tables)
    assert p.sampled_logits and 10.0 < p.activation_passes < 100.0


@pytest.mark.parametrize("seed", range(10))
def test_fit_is_stable_on_held_out_rows(seed: int) -> None:
    """Refit on a seeded random 2/3 of the measured rows (a chunked row's total and worst step
    stay together); the other third is predicted within 15% MAPE."""
    rows = list(MEAS.rows)
    random.Random(seed).shuffle(rows)
    k = round(len(rows) * 2 / 3)
    train, test = rows[:k], rows[k:]
    cal = fit_profile(_subset(train), QWEN8, H200)
    obs = observations(test)
    pred = predict(test, QWEN8, H200, cal.profile)
    held_out = mape([p / o.measured_s - 1 for p, o in zip(pred, obs, strict=True)])
    assert held_out <= 0.15, f"seed {seed}: held-out MAPE {held_out:.3f}"


def test_shipped_h200_profile_equals_a_fresh_fit(fitted) -> None:
    """The shipped file is fit_builtin's profile plus the vLLM engine cost per step, with vLLM's
    decode attention term (fitted to the aiconfigurator H200 table's decode rows) in place of the
    harness's that the fit held (kernel_h200_profile), its serving terms then refit to the corpus's
    H200 runs (refit_serving: the step cost at least the kernels')."""
    from planner.costmodel.calibrated import fit_decode_attention, kernel_h200_profile

    shipped = json.loads((DATA / "profiles" / "h200-sxm.json").read_text())
    kernel = kernel_h200_profile()
    assert kernel.step_overhead_s == fitted.profile.step_overhead_s + VLLM_ENGINE_COST_S
    fresh = builtin_h200_profile().model_dump()
    # the refit holds the engine terms (BUILTIN_HELD_TERMS) and fits the completions front end
    assert fresh["step_overhead_s"] == kernel.step_overhead_s and fresh["sequence_overhead_s"] == 0.0
    assert fresh["request_overhead_s"] == kernel.request_overhead_s
    assert 0.0 < fresh["completions_overhead_s"] < kernel.request_overhead_s
    for k in ("sequence_overhead_s", "completions_overhead_s", "request_overhead_s", "step_overhead_s"):
        assert shipped[k] == pytest.approx(fresh[k], rel=1e-6, abs=1e-12), k
    assert "calibrate --serving" in shipped["source"] and "doks-llama31-70b-fp8-h200" in shipped["source"]
    assert fitted.profile.decode_attention_items_per_sm > 0.5  # the harness's SDPA (0.81)
    assert (
        fresh["decode_attention_items_per_sm"] == fit_decode_attention().profile.decode_attention_items_per_sm
    )
    assert fresh["decode_attention_items_per_sm"] < 0.2  # vLLM's split-KV decode: 0 (fitted)
    assert shipped["name"] == fresh["name"] == "h200-sxm-calibrated"
    assert shipped["gpu"] == "h200-sxm"
    for k in PARAMETERS:
        assert shipped[k] == pytest.approx(fresh[k], rel=1e-6, abs=1e-12), k
    assert FITTED_MEASUREMENTS in shipped["source"]
    assert "least squares" in shipped["source"]


def test_unmeasured_gpus_carry_the_nearest_measured_numbers_and_say_so() -> None:
    for gpu in gpu_names():
        if gpu in measured_gpus():
            continue
        prof = resolve_profile("auto", gpu)
        origin = builtin_calibrated(nearest_measured_gpu(gpu) or "")
        assert prof.gpu == gpu and "transferred" in prof.name
        assert prof.source.startswith("Transferred, not measured")
        for k in PARAMETERS:
            assert getattr(prof, k) == getattr(origin, k)


def test_calibrated_resolves_per_gpu_and_is_refused_elsewhere() -> None:
    assert resolve_profile("calibrated", "h200-sxm").name == "h200-sxm-calibrated"
    for gpu in gpu_names():
        if gpu in measured_gpus():
            assert resolve_profile("calibrated", gpu).gpu == gpu
            continue
        with pytest.raises(InvalidInput, match=f"no calibrated profile ships for {gpu}"):
            resolve_profile("calibrated", gpu, "--profile")


def test_profile_predicts_another_model_sensibly() -> None:
    """Fitted on Qwen3-8B, used on Llama-3.1-8B (same GPU): every step is slower than the
    roofline bound, by a factor like the one measured on Qwen."""
    prof = fit_builtin().profile  # the timed steps' fit (the shipped one adds vLLM's engine cost)
    llama = get_model("meta-llama/Llama-3.1-8B-Instruct")
    cal, theo = Replica(llama, H200, profile=prof), Replica(llama, H200)
    for n in (1, 64, 256):
        ratio = cal.decode_step(n, 1500).time_s / theo.decode_step(n, 1500).time_s
        assert 1.3 < ratio < 1.7
    ratio = cal.prefill_time_s(16000) / theo.prefill_time_s(16000)
    assert 1.4 < ratio < 2.0
    # small chunks over a long prefix cost more than their FLOPs
    small, whole = cal.prefill_time_s(16000, 512), cal.prefill_time_s(16000)
    assert small > 1.5 * whole


# --- theoretical mode and the closed form are untouched ----------------------------------------


def test_new_profile_fields_default_to_theoretical() -> None:
    assert THEORETICAL.prefix_kv_passes == THEORETICAL.prefix_query_kv_passes == 0.0
    assert THEORETICAL.matmul_phantom_tokens == 0.0 and not THEORETICAL.sampled_logits
    assert THEORETICAL.activation_passes == 0.0
    r = Replica(QWEN8, H200)
    step = r.breakdown([(512, 15360)], 64, 64 * 1500)
    assert step.prefix_reread_s == 0.0
    assert step.time_s == max(step.memory_s, step.compute_s) + step.comm_s + step.overhead_s


def test_prefix_reread_term_by_hand() -> None:
    prof = Profile(name="p", gpu="h200-sxm", eta_bandwidth=0.5, prefix_kv_passes=10.0)
    r = Replica(QWEN8, H200, profile=prof)
    step = r.breakdown([(512, 15360), (256, 0)], 0, 0)
    assert step.prefix_reread_s == pytest.approx(10 * 15360 * 147_456 / (0.5 * 4.8e12))
    assert step.time_s == pytest.approx(max(step.memory_s, step.compute_s) + step.prefix_reread_s)


def test_prefix_reread_per_query_head_by_hand() -> None:
    """Per query head: Qwen3-8B has 32 query heads on 8 KV heads (G = 4), Qwen3-32B 64 on 8
    (G = 8): 10 passes per query head are 40 (80) passes over the KV bytes. At TP 2 each GPU
    holds 16 (32) query heads on 4 KV heads: G stays."""
    prof = Profile(name="p", gpu="h200-sxm", eta_bandwidth=0.5, prefix_query_kv_passes=10.0)
    q32 = get_model("Qwen/Qwen3-32B")
    for model, g, kv in ((QWEN8, 4, 147_456), (q32, 8, 262_144)):
        assert model.kv_bytes_per_token("bf16") == kv
        step = Replica(model, H200, profile=prof).breakdown([(512, 15360)], 0, 0)
        assert step.prefix_reread_s == pytest.approx(10 * g * 15360 * kv / (0.5 * 4.8e12))
        at_tp2 = Replica(model, H200, tp=2, profile=prof).breakdown([(512, 15360)], 0, 0)
        assert at_tp2.prefix_reread_s == pytest.approx(step.prefix_reread_s / 2)
    # an old file's 40 passes over the KV bytes mean the same on Qwen3-8B, half on Qwen3-32B
    old = Profile(name="o", gpu="h200-sxm", eta_bandwidth=0.5, prefix_kv_passes=40.0)
    assert Replica(QWEN8, H200, profile=old).breakdown([(512, 15360)], 0, 0).prefix_reread_s == pytest.approx(
        Replica(QWEN8, H200, profile=prof).breakdown([(512, 15360)], 0, 0).prefix_reread_s
    )


def test_matmul_phantom_tokens_by_hand() -> None:
    """m0 phantom tokens: the linear layers at M tokens run at eta_mm M / (M + m0), so a
    compute-bound step of T tokens costs 2 P (T + m0) / (eta_mm F); memory-bound steps and the
    attention term are untouched."""
    prof = Profile(name="p", gpu="h200-sxm", eta_matmul=0.5, matmul_phantom_tokens=100.0)
    base = prof.model_copy(update={"matmul_phantom_tokens": 0.0})
    f = H200.matmul_flops("bf16") * 0.5
    r, r0 = Replica(QWEN8, H200, profile=prof), Replica(QWEN8, H200, profile=base)
    step = r.breakdown([(4096, 0)], 0, 0)
    linear = 2 * QWEN8.active_params * (4096 + 100) / f
    attention = 4 * 36 * 4096 * (4096 * 2048) / H200.matmul_flops("bf16")
    assert step.compute_s == pytest.approx(linear + attention, rel=1e-12)
    assert step.time_s == pytest.approx(linear + attention, rel=1e-12)  # compute-bound
    assert r.decode_step(1, 1000).time_s == r0.decode_step(1, 1000).time_s  # memory-bound: unchanged


def test_activation_passes_by_hand() -> None:
    """e passes over each token's hidden state (bf16) in every layer, at the achieved bandwidth,
    added to the step and not split by TP: Qwen3-8B (36 layers x 4,096) with e = 40 at
    0.5 x 4.8 TB/s costs 40 x 36 x 4,096 x 2 / 2.4e12 = 4.9 us per token."""
    prof = Profile(name="p", gpu="h200-sxm", eta_bandwidth=0.5, activation_passes=40.0)
    per_token = 40 * 36 * 4096 * 2 / (0.5 * 4.8e12)
    r, r0 = (
        Replica(QWEN8, H200, profile=prof),
        Replica(QWEN8, H200, profile=Profile(name="q", eta_bandwidth=0.5)),
    )
    for chunks, n in (([(2048, 0)], 0), ((), 64), ([(512, 4096)], 32)):
        tokens = sum(c for c, _ in chunks) + n
        step = r.breakdown(chunks, n, n * 1500.0)
        assert step.elementwise_s == pytest.approx(per_token * tokens, rel=1e-12)
        assert step.time_s == pytest.approx(r0.breakdown(chunks, n, n * 1500.0).time_s + per_token * tokens)
    two = Replica(QWEN8, H200, tp=2, profile=prof).breakdown((), 64, 64 * 1500.0)
    assert two.elementwise_s == pytest.approx(per_token * 64, rel=1e-12)  # the same per GPU at TP 2


def test_sampled_logits_by_hand() -> None:
    """vLLM's vocabulary accounting (a profile flag, off in theoretical mode): the lm_head runs
    for the decodes' rows only and the embedding table is not read. Qwen3-8B (untied, vocabulary
    151,936 x hidden 4,096): a 4,096-token prefill loses 2 x 2 V d x 4,096 FLOPs; a decode step
    reads V d x 2 bytes less and keeps its lm_head FLOPs."""
    assert not QWEN8.tie_word_embeddings and QWEN8.vocab_size == 151_936 and QWEN8.hidden_size == 4096
    vd = 151_936 * 4096
    prof = Profile(name="p", gpu="h200-sxm", sampled_logits=True)
    new, old = Replica(QWEN8, H200, profile=prof), Replica(QWEN8, H200)
    a, b = new.breakdown([(4096, 0)], 0, 0), old.breakdown([(4096, 0)], 0, 0)
    assert b.linear_flops - a.linear_flops == 2 * (2 * vd + 4096) * 4096  # + the final norm's weights
    a, b = new.breakdown((), 8, 8000), old.breakdown((), 8, 8000)
    assert b.bytes_moved - a.bytes_moved == vd * 2
    assert b.linear_flops - a.linear_flops == 2 * (vd + 4096) * 8  # the embedding's and norm's FLOPs only
    # tied embeddings: the lm_head's matrix is the table, read anyway
    tied = type(QWEN8).model_validate({**QWEN8.model_dump(), "tie_word_embeddings": True})
    n, o = Replica(tied, H200, profile=prof), Replica(tied, H200)
    assert n.breakdown((), 8, 8000).bytes_moved == o.breakdown((), 8, 8000).bytes_moved
    # ... and the lm_head still runs for every decode: only the table's gather FLOPs go
    assert o.breakdown((), 8, 8000).linear_flops - n.breakdown((), 8, 8000).linear_flops == 2 * 4096 * 8


_PROFILES = [
    builtin_calibrated("h200-sxm"),
    builtin_calibrated("h100-sxm"),
    builtin_calibrated("h200-sxm").model_copy(update={"sampled_logits": True}),  # the lm_head per decode
]


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(_PROFILES),
    st.sampled_from(["Qwen/Qwen3-8B", "meta-llama/Llama-3.1-70B-Instruct", "Qwen/Qwen3-30B-A3B"]),
    st.sampled_from([1, 2, 4]),
    st.integers(1, 512),
    st.integers(0, 10**6),
    st.integers(1, 3000),
)
def test_decode_run_closed_form_equals_step_sum_calibrated(
    prof: Profile, model: str, tp: int, n: int, s0: int, steps: int
) -> None:
    r = Replica(get_model(model), get_gpu(prof.gpu or "h200-sxm"), tp=tp, profile=prof)
    direct = math.fsum(r.step_time_s((), n, s0 + j * n) for j in range(steps))
    assert r.decode_run_time_s(n, s0, steps) == pytest.approx(direct, rel=1e-9)


# --- refusals ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kinds", "unpinned"),
    [
        # decode rows at one context: the per-token kernels (activation_passes x n) and the KV
        # read (n x context) move together, so bandwidth, overhead and passes cannot be told apart
        (
            {"decode"},
            {
                "eta_bandwidth",
                "eta_matmul",
                "eta_attention",
                "step_overhead_s",
                "prefix_query_kv_passes",
                "matmul_phantom_tokens",
                "activation_passes",
            },
        ),
        ({"linear"}, {"eta_attention", "step_overhead_s", "prefix_query_kv_passes", "activation_passes"}),
        ({"linear", "decode"}, {"eta_attention", "prefix_query_kv_passes"}),
        ({"linear", "decode", "prefill"}, {"prefix_query_kv_passes"}),
    ],
)
def test_underdetermined_fit_is_refused_naming_the_parameter(kinds: set[str], unpinned: set[str]) -> None:
    rows = [r for r in MEAS.rows if r.kind in kinds]
    with pytest.raises(UnderdeterminedFit) as exc:
        fit_profile(_subset(rows), QWEN8, H200)
    assert set(exc.value.parameters) == unpinned
    for name in unpinned:
        assert name in exc.value.reason
    assert "cannot pin" in exc.value.reason  # too few timings, or columns the others explain


def test_holding_the_unpinned_parameter_makes_the_fit_determined() -> None:
    rows = [r for r in MEAS.rows if r.kind in {"linear", "decode", "prefill"}]
    cal = fit_profile(_subset(rows), QWEN8, H200, fixed={"prefix_query_kv_passes": 0.0})
    assert cal.profile.prefix_query_kv_passes == 0.0
    assert next(p for p in cal.parameters if p.name == "prefix_query_kv_passes").fixed
    assert "held fixed: prefix_query_kv_passes=0" in cal.profile.source
    assert cal.mape < 0.10
    # the old name still holds it: P passes over the KV bytes are P / G per query head (G = 4)
    old = fit_profile(_subset(MEAS.rows), QWEN8, H200, fixed={"prefix_kv_passes": 32.0})
    assert old.profile.prefix_query_kv_passes == 8.0 and old.profile.prefix_kv_passes == 0.0
    with pytest.raises(InvalidInput, match="twice"):
        fit_profile(MEAS, QWEN8, H200, fixed={"prefix_kv_passes": 32.0, "prefix_query_kv_passes": 8.0})


def test_matmul_phantom_tokens_are_pinned_by_rows_that_show_them() -> None:
    """Rows timed by a known profile with m0 = 150 give m0 back; held with --fix, it stays."""
    truth = builtin_calibrated("h200-sxm").model_copy(
        update={"matmul_phantom_tokens": 150.0, "decode_attention_items_per_sm": 0.0}
    )
    rows = _timed_by(truth)
    cal = fit_profile(_subset(rows), QWEN8, H200)
    assert cal.profile.matmul_phantom_tokens == pytest.approx(150.0, rel=1e-3) and cal.mape < 1e-6
    held = fit_profile(_subset(rows), QWEN8, H200, fixed={"matmul_phantom_tokens": 0.0})
    assert held.profile.matmul_phantom_tokens == 0.0 and held.mape > 0.005


def test_too_few_rows_for_the_parameters() -> None:
    with pytest.raises(UnderdeterminedFit, match="cannot pin 7 parameters"):
        fit_profile(_subset(MEAS.rows[:3]), QWEN8, H200)


def test_mismatched_model_or_gpu_or_moe_is_refused() -> None:
    with pytest.raises(InvalidInput, match="KV bytes per token") as exc:
        fit_profile(MEAS, get_model("Qwen/Qwen3-32B"), H200)
    assert exc.value.field == "model"
    with pytest.raises(InvalidInput, match="mixture of experts"):
        fit_profile(MEAS, get_model("Qwen/Qwen3-30B-A3B"), H200)
    tagged = replace(MEAS, info={**MEAS.info, "gpu": "h100-sxm"})
    with pytest.raises(InvalidInput, match="measured on h100-sxm, not h200-sxm"):
        fit_profile(tagged, QWEN8, H200)
    with pytest.raises(InvalidInput, match="unknown parameter"):
        fit_profile(MEAS, QWEN8, H200, fixed={"eta_nope": 0.5})
    with pytest.raises(InvalidInput, match="must be in"):
        fit_profile(MEAS, QWEN8, H200, fixed={"eta_matmul": 1.5})


@pytest.mark.parametrize(
    "device", ["NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "AMD Instinct MI300X", "NVIDIA A100-SXM4-80GB"]
)
def test_rows_from_another_device_are_refused(device: str) -> None:
    tagged = replace(MEAS, info={**MEAS.info, "device": device})
    with pytest.raises(InvalidInput) as exc:
        fit_profile(tagged, QWEN8, H200)
    assert exc.value.field == "gpu" and device in exc.value.reason and "h200-sxm" in exc.value.reason


def test_rows_from_the_same_device_are_accepted() -> None:
    assert MEAS.info["device"] == "NVIDIA H200"  # as tools/measure_steps.py recorded it
    same = replace(MEAS, info={**MEAS.info, "device": "NVIDIA H100 80GB HBM3"})
    check_gpu_matches(same, get_gpu("h100-sxm"))  # an H100 SXM's driver name
    with pytest.raises(InvalidInput):
        check_gpu_matches(same, get_gpu("h100-pcie"))


def _scaled(factor_of_row: Any) -> Measurements:
    rows = []
    for i, r in enumerate(MEAS.rows):
        f = factor_of_row(i)
        worst = None if r.worst_step_s is None else r.worst_step_s * f
        rows.append(replace(r, time_s=r.time_s * f, worst_step_s=worst))
    return _subset(rows)


def test_a_fit_that_misses_by_more_than_25_percent_is_refused_unless_forced() -> None:
    """Every other row 4x slower, the rest 2x faster: no profile describes both (best MAPE ~53%)."""
    scrambled = _scaled(lambda i: 4.0 if i % 2 else 0.5)
    with pytest.raises(InvalidInput) as exc:
        fit_profile(scrambled, QWEN8, H200)
    assert exc.value.field == "measurements" and "MAPE over 25%" in exc.value.reason
    forced = fit_profile(scrambled, QWEN8, H200, force=True)
    assert forced.mape > MAX_FIT_MAPE


def test_a_fit_with_every_parameter_on_a_bound_is_refused_unless_forced() -> None:
    """Rows that are exactly the roofline's predictions (not measurements; with the fit's
    vocabulary accounting): every efficiency lands on 1 and the other terms on 0, a perfect fit
    the bounds chose."""
    roofline = THEORETICAL.model_copy(update={"sampled_logits": True})
    rows = _timed_by(roofline)
    with pytest.raises(InvalidInput) as exc:
        fit_profile(_subset(rows), QWEN8, H200)
    assert exc.value.field == "measurements" and "every fitted parameter sits on a bound" in exc.value.reason
    forced = fit_profile(_subset(rows), QWEN8, H200, force=True)
    assert forced.mape < 1e-6 and all(p.at_bound for p in forced.parameters if not p.fixed)
    # one context only: the decode attention term is held at 0, and the fit says so
    held = {p.name: p for p in forced.parameters}["decode_attention_items_per_sm"]
    assert held.fixed and held.value == 0.0
    assert "decode_attention_items_per_sm held at 0" in forced.profile.source


# --- the decode attention parallelism term -----------------------------------------------------

CTX = parse_json((DATA / "measurements" / "h200_qwen3_8b_ctx.json").read_text(), "h200_qwen3_8b_ctx.json")
_DECODE_GRID = tuple(r for r in CTX.rows if r.kind == "decode")  # batch 1-128 x context 1k-16k
# decode rows cannot see them
_HELD = {
    "eta_matmul": 0.65,
    "eta_attention": 0.43,
    "prefix_query_kv_passes": 7.5,
    "matmul_phantom_tokens": 100.0,
    "activation_passes": 40.0,
}


def _synthetic(a: float) -> Measurements:
    """The decode grid's shapes timed by a known profile with decode_attention_items_per_sm = a."""
    truth = Profile(
        name="t",
        gpu="h200-sxm",
        eta_bandwidth=0.8,
        step_overhead_s=2e-3,
        decode_attention_items_per_sm=a,
        **_HELD,
    )
    times = predict(_DECODE_GRID, QWEN8, H200, truth)
    return replace(CTX, rows=tuple(replace(r, time_s=t) for r, t in zip(_DECODE_GRID, times, strict=True)))


@pytest.mark.parametrize("a", [0.3, 0.8, 2.0])
def test_decode_rows_over_batch_and_context_pin_the_attention_term(a: float) -> None:
    cal = fit_profile(_synthetic(a), QWEN8, H200, fixed=_HELD)
    assert cal.profile.decode_attention_items_per_sm == pytest.approx(a, rel=1e-4)
    assert cal.profile.eta_bandwidth == pytest.approx(0.8, rel=1e-4) and not cal.notes


def test_rows_without_a_penalty_fit_the_attention_term_to_zero() -> None:
    cal = fit_profile(_synthetic(0.0), QWEN8, H200, fixed=_HELD)
    assert cal.profile.decode_attention_items_per_sm == 0.0 and cal.mape < 1e-6
    assert cal.notes == [
        "decode_attention_items_per_sm fitted to 0 (off): the rows show no decode attention penalty"
    ]
    assert cal.notes[0] in cal.profile.source


@pytest.mark.parametrize(
    ("keep", "why"),
    [
        (lambda r: r.ctx == 4000, "contexts [4000]"),  # one context
        (lambda r: r.batch in (1, 32, 64), "batches [1] at"),  # one batch under 132 / 8 = 16.5
    ],
)
def test_rows_that_cannot_pin_the_attention_term_hold_it_at_zero(keep: Any, why: str) -> None:
    rows = tuple(r for r in _synthetic(0.8).rows if keep(r))
    cal = fit_profile(replace(CTX, rows=rows), QWEN8, H200, fixed=_HELD, force=True)
    held = {p.name: p for p in cal.parameters}["decode_attention_items_per_sm"]
    assert held.fixed and held.value == 0.0
    assert len(cal.notes) == 1 and cal.notes[0].startswith("decode_attention_items_per_sm held at 0 (off)")
    assert why in cal.notes[0] and cal.notes[0] in cal.profile.source


def test_the_h200_attention_term_the_fit_holds_and_the_one_it_ships() -> None:
    """Stage 1 (docs/calibration.md), twice: the harness's term from h200_qwen3_8b_ctx.json's 25
    decode rows (PyTorch SDPA, one work item per sequence x KV head) is what the fit of the
    harness's other rows holds; the shipped profile carries vLLM's, from the 15 decode rows of
    aiconfigurator's H200 table (vLLM's split-KV FlashAttention decode)."""
    from planner.costmodel.calibrated import HARNESS_ATTENTION_MEASUREMENTS, fit_builtin, fit_decode_attention

    harness = fit_decode_attention(measurements=HARNESS_ATTENTION_MEASUREMENTS)
    assert len(harness.rows) == 25 and harness.mape < 0.03  # 2.0%
    a = harness.profile.decode_attention_items_per_sm
    assert 0.6 < a < 1.0  # 0.81: ~107 (sequence x KV head) items fill the 132 SMs
    assert fit_builtin().profile.decode_attention_items_per_sm == a
    vllm = fit_decode_attention()
    assert len(vllm.rows) == 15 and vllm.mape < 0.05  # 3.2%
    # batch 1 at 8,000 tokens runs at the bandwidth of batch 256: no parallelism penalty to fit
    assert vllm.profile.decode_attention_items_per_sm < 0.2
    assert (
        builtin_calibrated("h200-sxm").decode_attention_items_per_sm
        == vllm.profile.decode_attention_items_per_sm
    )


@pytest.mark.parametrize("ms", [1e-300, 5e-324, 9e-4, 3.7e6, 1e300])
def test_measured_times_out_of_range_are_refused(ms: float) -> None:
    """Below 1 µs or above an hour a time is a unit mistake, and a fit over 1e-300 ms crashed in
    SciPy (its relative residuals overflow; found by the CLI fuzz test's exploration mode)."""
    text = json.dumps({"rows": [{"kind": "prefill", "prompt": 512, "ms": ms}]})
    with pytest.raises(InvalidInput, match="1 µs to an hour") as exc:
        parse_json(text, "steps.json")
    assert exc.value.field == "MEASUREMENTS"


def test_measured_times_at_the_ends_of_the_range_are_taken() -> None:
    for ms in (1e-3, 3.6e6):
        m = parse_json(json.dumps({"rows": [{"kind": "prefill", "prompt": 512, "ms": ms}]}), "steps.json")
        assert m.rows[0].time_s == pytest.approx(ms / 1e3)
