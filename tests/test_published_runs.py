"""Published vLLM serving results against capplan's own predictions (tests/data/vllm_bench_serve.json,
docs/published-runs.md).

For a run at `--max-concurrency c` the median TPOT and median ITL are one decode step of c
sequences at the run's mean context (mean input + half the mean output), the planner's
`Replica.decode_step` under the GPU's shipped profile; the median TTFT is the latency model's p50
(`planner.latency.evaluate`) at the run's achieved request rate with its mean lengths. Every number
is computed from the live profiles, never frozen here, so a refit moves the comparison with it.

The documented accuracy is per GPU and only where published runs exist (TPOT_TOLERANCE); a run on
a GPU without a stated tolerance fails until one is stated with its evidence. Misses are strict
xfails with their reason, never a loosened tolerance. `candidates` (results that do not qualify:
each says why) are schema-checked only; `python3 tests/test_published_runs.py` prints the table of
docs/published-runs.md, candidates included, from the live profiles.
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from planner.catalog.gpus import get_gpu, gpu_names
from planner.catalog.models import get_model, model_names
from planner.costmodel.calibrated import VLLM_ENGINE_COST_S
from planner.costmodel.profiles import resolve_profile
from planner.costmodel.roofline import Replica
from planner.deployment import Deployment
from planner.latency import evaluate
from planner.workload import Workload

DATA = Path(__file__).parent / "data" / "vllm_bench_serve.json"
DOC: dict[str, Any] = json.loads(DATA.read_text())
RUNS: list[dict[str, Any]] = DOC["observations"]
CANDIDATES: list[dict[str, Any]] = DOC["candidates"]

# Documented accuracy of the decode step against a published median TPOT / ITL, per GPU, with the
# evidence. h100-sxm (GPUStack, Qwen3-8B, vLLM 0.11.0, ShareGPT, concurrency 1-8): the
# concurrency-1 run sets the engine cost (in sample, 0%); at 2 / 4 / 8 the step falls short by
# 1-4%, growing with concurrency, because a ShareGPT run also mixes the next requests' prefills
# (~230-token prompts) into decode steps, which one decode step omits. 5% covers that and the
# ~1-2% run-to-run spread of published medians. No other GPU has a qualifying run yet
# (docs/published-runs.md lists what was found and why it was left out).
TPOT_TOLERANCE = {"h100-sxm": 0.05}

# Documented accuracy of the latency model's median TTFT (p50 at the run's achieved rate) against a
# published median TTFT. The profiles carry vLLM's front-end cost per request, request_overhead_s
# (52.3 ms, set from the concurrency-1 run: in sample); at 2 / 4 / 8 the model is within 5% (+2.6%,
# -2.5%, +4.8%). Without it the model was 80-83% short on every run (GPU steps only: ~8 ms of
# prefill for the ~233-token prompts, plus the step under way). 10% covers the rest and the spread
# of published medians (60.3-64.8 ms at concurrency 1-8 for one constant cost).
TTFT_TOLERANCE = 0.10


def mean_input_tokens(o: dict[str, Any]) -> float:
    return float(o["total_input_tokens"]) / o["num_prompts"]


def mean_output_tokens(o: dict[str, Any]) -> float:
    return float(o["total_output_tokens"]) / o["num_prompts"]


def mean_context_tokens(o: dict[str, Any]) -> int:
    """A decode's mean context over the run: mean input plus half the mean output, in tokens."""
    return round(mean_input_tokens(o) + mean_output_tokens(o) / 2)


def replica(model: str, gpu: str, tp: int = 1, weight_dtype: Any = "bf16", kv_dtype: Any = "bf16") -> Replica:
    """The replica the run served, under the GPU's shipped profile (`calibrated`)."""
    return Replica(
        get_model(model),
        get_gpu(gpu),
        tp=tp,
        weight_dtype=weight_dtype,
        kv_dtype=kv_dtype,
        profile=resolve_profile("calibrated", gpu),
    )


def run_replica(o: dict[str, Any]) -> Replica:
    return replica(o["model"], o["gpu"], o["tp"], o["weight_dtype"], o.get("kv_cache_dtype", "bf16"))


def decode_step_ms(o: dict[str, Any]) -> float:
    """One decode step of `max_concurrency` sequences at the run's mean context, in ms."""
    return run_replica(o).decode_step(o["max_concurrency"], mean_context_tokens(o)).time_s * 1e3


def ttft_p50_ms(o: dict[str, Any]) -> float:
    """The latency model's median TTFT at the run's achieved rate (requests / duration) with its
    mean lengths, on one replica with vLLM's default scheduler limits, in ms."""
    dep = Deployment(model=o["model"], gpu=o["gpu"], tp=o["tp"], weight_dtype=o["weight_dtype"])
    workload = Workload.from_mapping(
        {
            "arrivals": {"requests_per_s": o["num_prompts"] / o["duration_s"]},
            "input_tokens": {"constant": round(mean_input_tokens(o))},
            "output_tokens": {"constant": round(mean_output_tokens(o))},
        }
    )
    pred = evaluate(dep, workload, resolve_profile("calibrated", o["gpu"]))
    assert pred.ttft_p50_s is not None, (o["id"], "the run's rate is unstable for the model")
    return pred.ttft_p50_s * 1e3


def implied_engine_cost_ms(o: dict[str, Any]) -> float:
    """For a concurrency-1 run: its median TPOT minus the kernel-only decode step (the shipped
    profile's step less the engine cost it carries, VLLM_ENGINE_COST_S)."""
    assert o["max_concurrency"] == 1
    return o["tpot_ms"]["median"] - (decode_step_ms(o) - VLLM_ENGINE_COST_S * 1e3)


# --- the qualifying runs ------------------------------------------------------------------------------


def test_every_run_is_on_a_gpu_with_a_documented_tolerance() -> None:
    assert RUNS, "no published run to check"
    for o in RUNS:
        assert o["gpu"] in TPOT_TOLERANCE, (
            o["id"],
            "state the documented accuracy for this GPU, with evidence",
        )
        assert o["model"] in model_names() and o["gpu"] in gpu_names()


@pytest.mark.parametrize("o", RUNS, ids=lambda o: o["id"])
def test_decode_step_predicts_the_median_tpot(o: dict[str, Any]) -> None:
    assert decode_step_ms(o) == pytest.approx(o["tpot_ms"]["median"], rel=TPOT_TOLERANCE[o["gpu"]])


@pytest.mark.parametrize("o", RUNS, ids=lambda o: o["id"])
def test_decode_step_predicts_the_median_itl(o: dict[str, Any]) -> None:
    """Median ITL: one token per step and stream chunk, so the same step as TPOT."""
    assert decode_step_ms(o) == pytest.approx(o["itl_ms"]["median"], rel=TPOT_TOLERANCE[o["gpu"]])


@pytest.mark.parametrize("o", RUNS, ids=[o["id"] for o in RUNS])
def test_latency_model_predicts_the_median_ttft(o: dict[str, Any]) -> None:
    assert ttft_p50_ms(o) == pytest.approx(o["ttft_ms"]["median"], rel=TTFT_TOLERANCE)


def test_the_engine_alone_misses_the_ttft_by_the_front_end() -> None:
    """Without the front end's cost the model's TTFT is GPU steps only, at least the prefill of
    the mean prompt, and short of every published median by tens of ms: the gap the profile's
    request_overhead_s closes."""
    for o in RUNS:
        front = resolve_profile("calibrated", o["gpu"]).request_overhead_s
        assert 0.045 < front < 0.055, o["gpu"]
        ours, theirs = ttft_p50_ms(o) - front * 1e3, o["ttft_ms"]["median"]
        prefill = run_replica(o).prefill_time_s(round(mean_input_tokens(o))) * 1e3
        assert prefill <= ours < theirs * 0.25, (o["id"], ours, theirs)
        assert 40 < theirs - ours < 60, (o["id"], ours, theirs)


def test_the_concurrency_1_runs_imply_an_engine_cost() -> None:
    """Median TPOT minus the kernel-only step: positive and below 1.5 ms for every concurrency-1
    run; the run a shipped profile names in its source gives back the engine cost it carries."""
    c1 = [o for o in RUNS if o["max_concurrency"] == 1]
    assert c1
    for o in c1:
        cost = implied_engine_cost_ms(o)
        assert 0 < cost < 1.5, (o["id"], cost)
        if o["id"] in resolve_profile("calibrated", o["gpu"]).source:
            assert cost == pytest.approx(VLLM_ENGINE_COST_S * 1e3, abs=0.05), o["id"]


# --- the candidates (not runs: schema only) -------------------------------------------------------------

_COMMIT_URL = re.compile(r"^https://github\.com/[^/]+/[^/]+/blob/[0-9a-f]{40}/")


def test_candidates_say_why_they_do_not_qualify() -> None:
    ids = [o["id"] for o in RUNS + CANDIDATES]
    assert len(ids) == len(set(ids))
    for c in CANDIDATES:
        assert _COMMIT_URL.match(c["source_url"]), c["id"]
        assert c["engine"] == "vllm" and isinstance(c["where"], str) and c["where"]
        assert c["why_not"] and all(isinstance(w, str) and w for w in c["why_not"]), c["id"]
        assert c["model"] in model_names() and c["gpu_if_assumed"] in gpu_names(), c["id"]
        assert isinstance(c["vllm_version"], str) and c["max_concurrency"] >= 1
        if c["kind"] == "itl_fit":
            fit, (lo, hi) = c["itl_fit"], c["input_tokens_range"]
            assert fit["intercept_ms"] > 0 and fit["slope_ms_per_input_token"] > 0 and 0 < lo < hi
            assert c["output_tokens"] > 0 and c["max_concurrency"] == 1
        else:
            assert c["kind"] == "run", c["id"]
            assert c["ttft_ms"]["median"] > 0 and c["itl_ms"]["median"] > 0
            # the printed throughput x duration gives the ~2k output tokens per request the post states
            out = c["output_throughput_tok_per_s"] * c["duration_s"] / c["num_prompts"]
            assert 1700 <= out <= 2300, (c["id"], out)


def test_data_readme_describes_the_candidates() -> None:
    text = (DATA.parent / "README.md").read_text()
    assert "`candidates`" in text and "test_published_runs.py" in text


# --- the table of docs/published-runs.md ------------------------------------------------------------------


def _pct(ours: float, theirs: float) -> str:
    return f"{100 * (ours / theirs - 1):+.1f}%"


def run_rows() -> list[str]:
    rows = []
    for o in RUNS:
        step = decode_step_ms(o)
        ttft = ttft_p50_ms(o)
        rows.append(
            f"| `{o['id']}` | {o['gpu']} | {o['model']} | {o['tp']} | {o['max_concurrency']} "
            f"| {mean_context_tokens(o)} | {step:.2f} | {o['tpot_ms']['median']:.2f} ({_pct(step, o['tpot_ms']['median'])}) "
            f"| {o['itl_ms']['median']:.2f} ({_pct(step, o['itl_ms']['median'])}) "
            f"| {ttft:.1f} | {o['ttft_ms']['median']:.1f} ({_pct(ttft, o['ttft_ms']['median'])}) |"
        )
    return rows


def engine_rows() -> list[str]:
    rows = []
    for o in RUNS:
        if o["max_concurrency"] != 1:
            continue
        kernel = decode_step_ms(o) - VLLM_ENGINE_COST_S * 1e3
        rows.append(
            f"| `{o['id']}` | {o['gpu']} | {o['vllm_version']} | {o['tpot_ms']['median']:.2f} | {kernel:.3f} "
            f"| {implied_engine_cost_ms(o):.3f} |"
        )
    return rows


def candidate_rows() -> list[str]:
    """What each candidate would show if its missing setting were as assumed (`gpu_if_assumed`,
    `mean_input_tokens_if_assumed`): informational, not tested."""
    rows = []
    for c in CANDIDATES:
        r = replica(c["model"], c["gpu_if_assumed"], c["tp"], c["weight_dtype"], c["kv_cache_dtype"])
        if c["kind"] == "itl_fit":
            fit, (lo, hi) = c["itl_fit"], c["input_tokens_range"]
            half = c["output_tokens"] / 2
            cells = []
            for n in (lo, 8192, 32768, hi):
                ours = r.decode_step(1, n + half).time_s * 1e3
                theirs = fit["intercept_ms"] + fit["slope_ms_per_input_token"] * n
                cells.append(f"{n}: {ours:.2f} vs {theirs:.2f} ({_pct(ours, theirs)})")
            kernel = r.decode_step(1, half).time_s * 1e3 - VLLM_ENGINE_COST_S * 1e3
            note = f"implied engine cost {fit['intercept_ms'] - kernel:.2f} ms"
            what = "c=1 ITL fit, input: ours vs theirs (ms)"
        else:
            out = c["output_throughput_tok_per_s"] * c["duration_s"] / c["num_prompts"]
            ctx = c["mean_input_tokens_if_assumed"] + out / 2
            ours = r.decode_step(c["max_concurrency"], ctx).time_s * 1e3
            cells = [
                f"median ITL {ours:.2f} vs {c['itl_ms']['median']:.2f} ({_pct(ours, c['itl_ms']['median'])})"
            ]
            note = f"context {ctx:,.0f}"
            what = f"c={c['max_concurrency']} run"
        rows.append(
            f"| `{c['id']}` | {c['gpu_if_assumed']} ({c['kv_cache_dtype']} KV) | {what} | {'; '.join(cells)} "
            f"| {note} | {c['why_not'][0]} |"
        )
    return rows


LONG_CONTEXT_TOKENS = (1024, 32768, 125000)


def long_context_rows() -> list[str]:
    """capplan's batch-1 decode step of Llama-3.1-8B (bf16) per GPU with a shipped profile, beside
    the only published batch-1 long-context data (the H100 candidate line): informational."""
    rows = []
    for gpu in ("a100-80gb-sxm", "h100-sxm", "h200-sxm", "b200", "l40s"):
        r = replica("meta-llama/Llama-3.1-8B-Instruct", gpu)
        steps = [r.decode_step(1, n + 64).time_s * 1e3 for n in LONG_CONTEXT_TOKENS]
        rows.append(f"| {gpu} | {r.profile.name} | " + " | ".join(f"{t:.2f}" for t in steps) + " |")
    return rows


def table() -> str:
    """The markdown tables of docs/published-runs.md, from the live profiles."""
    head = (
        "| run | GPU | model | TP | conc. | mean ctx | decode step (ms) | median TPOT (ms) | median ITL (ms) "
        "| TTFT p50 ours (ms) | median TTFT (ms) |\n|---|---|---|---|---|---|---|---|---|---|---|"
    )
    eng = (
        "| concurrency-1 run | GPU | vLLM | median TPOT (ms) | kernel-only step (ms) | implied engine cost (ms) |\n"
        "|---|---|---|---|---|---|"
    )
    cand = (
        "| candidate | GPU as assumed | what | ours vs published | note | first reason it does not qualify |\n"
        "|---|---|---|---|---|---|"
    )
    longc = (
        "| GPU | profile | "
        + " | ".join(f"input {n:,} (ms)" for n in LONG_CONTEXT_TOKENS)
        + " |\n|---|---|"
        + "---|" * len(LONG_CONTEXT_TOKENS)
    )
    footer = f"(engine cost carried by the profiles: {VLLM_ENGINE_COST_S * 1e3:.3f} ms)"
    parts = [head, *run_rows(), "", eng, *engine_rows(), "", cand, *candidate_rows()]
    return "\n".join([*parts, "", longc, *long_context_rows(), "", footer])


def test_table_has_a_row_for_every_run_and_candidate() -> None:
    text = table()
    for o in RUNS + CANDIDATES:
        assert f"`{o['id']}`" in text
    assert not any(math.isnan(float(x)) for x in re.findall(r"[-+]?\d+\.\d+", text))


if __name__ == "__main__":
    sys.stdout.write(table() + "\n")
