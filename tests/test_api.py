"""`planner.api` is the one contract: for every example, the report a Python caller gets dumps to
exactly what `capplan ... --json` prints; a request model and a plain mapping give the same
answer; bad input is an InvalidInput naming the request field; the README's snippet runs."""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_helpers import run_cli, write
from pydantic import BaseModel

from planner import api
from planner.errors import InvalidInput
from planner.schema import inputs
from planner.schema.inputs import (
    MAX_REQUESTS_PER_S,
    MAX_SIMULATED_REQUESTS,
    AnalyzeRequest,
    CalibrateRequest,
    EvaluateRequest,
    FixedParameters,
    SimulateRequest,
)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
# Evaluate/simulate files (a deployment to judge); plan files ask for one and are not these.
SERVING_EXAMPLES = sorted(p for p in EXAMPLES.glob("*.yaml") if "deployment" in yaml.safe_load(p.read_text()))
MEASUREMENTS = str(
    resources.files("planner.costmodel") / "data" / "measurements" / "h200_qwen3_8b_shape.json"
)

MINIMAL: dict[str, Any] = {
    "deployment": {"model": "Qwen/Qwen3-8B", "gpu": "h100-sxm"},
    "workload": {
        "arrivals": {"requests_per_s": 2},
        "input_tokens": {"constant": 1000},
        "output_tokens": {"constant": 100},
    },
}


def dumped(report: BaseModel) -> str:
    """What the CLI prints for this report with --json."""
    return json.dumps(report.model_dump(mode="json"), indent=2) + "\n"


def cli_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    rc, out, err = run_cli([*argv, "--json"], capsys)
    assert rc == 0, err
    return out


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text())
    return data


def test_the_examples_are_found() -> None:
    assert {p.name for p in SERVING_EXAMPLES} >= {
        "chat-qwen3-8b-h100.yaml",
        "azure-conv-h200.yaml",
        "bursty-code.yaml",
        "disagg-llama70b-h100.yaml",
    }


# --- the report's JSON is the CLI's --json -------------------------------------------------------


@pytest.mark.parametrize("path", SERVING_EXAMPLES, ids=lambda p: p.name)
def test_evaluate_dumps_to_the_cli_json(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = api.evaluate(load(path), base_dir=path.parent)
    assert dumped(report) == cli_json(["evaluate", str(path)], capsys)


@pytest.mark.parametrize("path", SERVING_EXAMPLES, ids=lambda p: p.name)
def test_simulate_dumps_to_the_cli_json(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = api.simulate({**load(path), "requests": 60, "seed": 4}, base_dir=path.parent)
    assert report.completed == 60
    assert dumped(report) == cli_json(["simulate", str(path), "--requests", "60", "--seed", "4"], capsys)


def test_evaluate_with_flags_is_the_request_with_those_fields(capsys: pytest.CaptureFixture[str]) -> None:
    path = EXAMPLES / "chat-qwen3-8b-h100.yaml"
    data = load(path)
    data["slo"] = {**data["slo"], "itl_p99_ms": 40}
    data["deployment"]["usd_per_gpu_hour"] = 2.5
    report = api.evaluate({**data, "requests_per_s": 9, "profile": "theoretical"}, base_dir=EXAMPLES)
    argv = ["evaluate", str(path), "--slo-itl-p99-ms", "40", "--usd-per-gpu-hour", "2.5"]
    argv += ["--requests-per-s", "9", "--profile", "theoretical"]
    assert dumped(report) == cli_json(argv, capsys)
    assert report.deployment.usd_per_gpu_hour == 2.5 and report.requests_per_s == 9
    assert report.slo is not None and report.slo.ttft_p99_ms == 1000 and report.slo.itl_p99_ms == 40


def test_simulate_trace_replay_is_the_request_with_those_fields(capsys: pytest.CaptureFixture[str]) -> None:
    path = EXAMPLES / "chat-qwen3-8b-h100.yaml"
    request = {**load(path), "trace": "azure-conv-2023", "requests": 80, "requests_per_s": 15}
    report = api.simulate(request, base_dir=EXAMPLES)
    argv = ["simulate", str(path), "--trace", "azure-conv-2023", "--requests", "80", "--requests-per-s", "15"]
    assert dumped(report) == cli_json(argv, capsys)
    assert report.input.source == "trace" and report.input.replay == "scaled"


BASE = ["--model", "Qwen/Qwen3-8B", "--gpu", "h100-sxm"]
COMMON = {"model": "Qwen/Qwen3-8B", "gpu": "h100-sxm"}
ANALYSES: list[tuple[list[str], dict[str, Any]]] = [
    (
        ["concurrency", "--context-tokens", "1500", "--concurrency", "1,8,64,512", "--usd-per-gpu-hour", "2"],
        {"usd_per_gpu_hour": 2, "concurrency": {"context_tokens": 1500, "concurrency": [1, 8, 64, 512]}},
    ),
    (
        [
            "static-batching",
            "--context-tokens",
            "1500",
            "--batch",
            "8,32",
            "--output-lengths",
            "100:0.5,800:0.5",
        ],
        {
            "static_batching": {
                "context_tokens": 1500,
                "batch": [8, 32],
                "output_lengths": {"pairs": [[100, 0.5], [800, 0.5]]},
            }
        },
    ),
    (
        [
            "chunked-prefill",
            "--prompt-tokens",
            "16000",
            "--decodes",
            "64",
            "--context-tokens",
            "1500",
            "--chunk",
            "512,2048,none",
        ],
        {
            "chunked_prefill": {
                "prompt_tokens": 16000,
                "decodes": 64,
                "context_tokens": 1500,
                "sizes_tokens": [512, 2048, 0],
            }
        },
    ),
    (
        [
            "chunked-prefill",
            "--prompt-tokens",
            "8000",
            "--decodes",
            "32",
            "--context-tokens",
            "1000",
            "--budget",
            "2048,none",
            "--profile",
            "calibrated",
        ],
        {
            "profile": "calibrated",
            "chunked_prefill": {
                "prompt_tokens": 8000,
                "decodes": 32,
                "context_tokens": 1000,
                "reading": "budget",
                "sizes_tokens": [2048, 0],
            },
        },
    ),
    (["prefill", "--prompt-tokens", "1500", "--tp", "2"], {"tp": 2, "prefill": {"prompt_tokens": 1500}}),
    (
        [
            "utilization",
            "--context-tokens",
            "1500",
            "--output-tokens-per-day",
            "1e6",
            "--weight-dtype",
            "fp8",
        ],
        {"weight_dtype": "fp8", "utilization": {"context_tokens": 1500, "output_tokens_per_day": 1e6}},
    ),
    (
        ["kv-capacity", "--context-tokens", "1500", "--kv-dtype", "fp8", "--max-num-seqs", "64"],
        {"kv_dtype": "fp8", "kv_capacity": {"context_tokens": 1500, "max_num_seqs": 64}},
    ),
]


@pytest.mark.parametrize(("argv", "request_"), ANALYSES, ids=lambda x: x[0] if isinstance(x, list) else "")
def test_analyze_dumps_to_the_cli_json(
    argv: list[str], request_: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    report = api.analyze({**COMMON, **request_})
    assert dumped(report) == cli_json(["analyze", argv[0], *BASE, *argv[1:]], capsys)


def test_every_analysis_is_covered() -> None:
    assert {k for _, r in ANALYSES for k in r if k in inputs.ANALYSES} == set(inputs.ANALYSES)


def test_calibrate_and_catalog_dump_to_the_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    report = api.calibrate(
        {"measurements": MEASUREMENTS, "model": "Qwen/Qwen3-8B", "gpu": "h200-sxm", "name": "mine"}
    )
    argv = ["calibrate", MEASUREMENTS, "--model", "Qwen/Qwen3-8B", "--gpu", "h200-sxm", "--name", "mine"]
    assert dumped(report) == cli_json(argv, capsys)
    assert dumped(api.catalog({"kind": "gpus"})) == cli_json(["catalog", "gpus"], capsys)
    moe = api.catalog({"kind": "models", "name": "Qwen/Qwen3-30B-A3B", "batch_tokens": [1, 64]})
    argv = ["catalog", "models", "--model", "Qwen/Qwen3-30B-A3B", "--batch", "1,64"]
    assert dumped(moe) == cli_json(argv, capsys)
    assert (
        "expert_reads" in moe.model_dump()
        and "expert_reads" not in api.catalog({"kind": "models"}).model_dump()
    )


# --- a request model or a mapping ---------------------------------------------------------------


def test_a_request_model_and_its_mapping_give_the_same_report() -> None:
    path = EXAMPLES / "bursty-code.yaml"
    data = load(path)
    assert api.evaluate(EvaluateRequest.model_validate(data)) == api.evaluate(data)
    sim = {**data, "requests": 50}
    assert api.simulate(SimulateRequest.model_validate(sim)) == api.simulate(sim)
    an = {**COMMON, "prefill": {"prompt_tokens": 1000}}
    assert api.analyze(AnalyzeRequest.model_validate(an)) == api.analyze(an)
    cal = {"measurements": {"path": MEASUREMENTS}, "model": "Qwen/Qwen3-8B", "gpu": "h200-sxm"}
    assert api.calibrate(CalibrateRequest.model_validate(cal)) == api.calibrate(cal)


def test_inline_measurement_rows_fit_like_the_file() -> None:
    rows = json.loads(Path(MEASUREMENTS).read_text())["rows"]
    by_rows = api.calibrate({"measurements": {"rows": rows}, "model": "Qwen/Qwen3-8B", "gpu": "h200-sxm"})
    by_file = api.calibrate({"measurements": MEASUREMENTS, "model": "Qwen/Qwen3-8B", "gpu": "h200-sxm"})
    assert by_rows.measurements == "inline rows"
    assert by_rows.parameters == by_file.parameters and by_rows.mape_percent == by_file.mape_percent


def test_paths_in_a_request_are_taken_from_base_dir(tmp_path: Path) -> None:
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"] + [
        f"{0.5 * i},{300 + 7 * i},{20 + i % 5}" for i in range(60)
    ]
    (tmp_path / "t.csv").write_text("\n".join(lines) + "\n")
    cfg = resources.files("planner.catalog") / "data" / "models" / "Qwen--Qwen3-8B.config.json"
    (tmp_path / "my-model.json").write_text(cfg.read_text())
    request = {
        "deployment": {"model": "my-model.json", "gpu": "h100-sxm"},
        "workload": {"trace": "t.csv", "bucket_s": None},
    }
    report = api.evaluate(request, base_dir=tmp_path)
    assert report.workload.mean_input_tokens == pytest.approx(300 + 7 * 29.5)
    with pytest.raises(InvalidInput) as exc:
        api.evaluate(request)  # not found from the working directory
    assert exc.value.field in ("deployment.model", "workload.trace")


def test_a_rate_stands_in_for_missing_arrivals(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    no_arrivals = {**MINIMAL, "workload": {k: v for k, v in MINIMAL["workload"].items() if k != "arrivals"}}
    report = api.evaluate({**no_arrivals, "requests_per_s": 2})
    assert dumped(report) == dumped(api.evaluate(MINIMAL))
    f = write(tmp_path, yaml.safe_dump(no_arrivals))
    assert json.loads(cli_json(["evaluate", str(f), "--requests-per-s", "2"], capsys))["requests_per_s"] == 2
    rc, _, err = run_cli(["evaluate", str(f)], capsys)
    assert rc == 2 and err.startswith("capplan: error: workload.arrivals: Field required")
    rc, _, err = run_cli(["evaluate", str(f), "--requests-per-s", "-2"], capsys)
    assert rc == 2 and err.startswith("capplan: error: --requests-per-s: Input should be greater than 0")
    sim = api.simulate({**no_arrivals, "requests_per_s": 3, "requests": 40})
    assert sim.input.mean_requests_per_s_target == 3


# --- bad input names the request field ----------------------------------------------------------


def bad(fn: Any, request: Any) -> InvalidInput:
    with pytest.raises(InvalidInput) as exc:
        fn(request)
    return exc.value


def test_invalid_input_paths() -> None:
    wl = MINIMAL["workload"]
    e = bad(api.evaluate, {**MINIMAL, "workload": {**wl, "arrivals": {"requests_per_s": "nan"}}})
    assert e.field == "workload.arrivals.requests_per_s"
    e = bad(api.evaluate, {**MINIMAL, "workload": {**wl, "output_tokens": {"pairs": [[10, 0.5], [20, 0.2]]}}})
    assert e.field == "workload.output_tokens.pairs" and "sum to 0.7" in e.reason
    e = bad(api.evaluate, {**MINIMAL, "requests_per_s": MAX_REQUESTS_PER_S * 10})
    assert e.field == "requests_per_s" and "less than or equal to 1000000" in e.reason
    e = bad(api.evaluate, {**MINIMAL, "slo": {"ttft_p99_ms": 500, "tpot_p99_ms": 30}})
    assert e.field == "slo.tpot_p99_ms" and "simulate" in e.reason
    e = bad(api.evaluate, {**MINIMAL, "slo": {}})
    assert e.field == "slo"
    e = bad(api.evaluate, {**MINIMAL, "colour": "blue"})
    assert e.field == "colour" and "unknown top-level key" in e.reason
    e = bad(api.evaluate, ["not", "a", "mapping"])
    assert e.field == "(root)"
    e = bad(api.simulate, {**MINIMAL, "requests": 10, "horizon_s": 5})
    assert e.field == "horizon_s"
    e = bad(api.simulate, {**MINIMAL, "requests": MAX_SIMULATED_REQUESTS + 1})
    assert e.field == "requests"
    e = bad(api.simulate, {**MINIMAL, "horizon_s": 1e7})  # 2/s for 1e7 s: 2e7 requests
    assert e.field == "horizon_s" and f"{MAX_SIMULATED_REQUESTS:,}" in e.reason
    e = bad(api.simulate, {**MINIMAL, "router": "random"})
    assert e.field == "router"
    e = bad(api.analyze, {**COMMON, "concurrency": {"context_tokens": 10, "concurrency": [1, 0]}})
    assert e.field == "concurrency.concurrency[1]"
    e = bad(api.analyze, {**COMMON, "prefill": {"prompt_tokens": 50_000}})
    assert e.field == "prefill.prompt_tokens" and "maximum context of 40960" in e.reason
    e = bad(api.analyze, COMMON)
    assert e.field == "analysis"
    e = bad(api.analyze, {**COMMON, "prefill": {"prompt_tokens": 10}, "kv_capacity": {"context_tokens": 10}})
    assert e.field == "kv_capacity" and "exactly one" in e.reason
    e = bad(api.calibrate, {"measurements": {"path": "a.json", "rows": []}, "model": "m", "gpu": "g"})
    assert e.field.startswith("measurements")
    e = bad(
        api.calibrate,
        {"measurements": MEASUREMENTS, "model": "Qwen/Qwen3-8B", "gpu": "h200-sxm", "fix": {"eta": 1}},
    )
    assert e.field == "fix" and "unknown parameter 'eta'" in e.reason
    e = bad(api.catalog, {"kind": "gpus", "name": "tpu"})
    assert e.field == "name"


def test_a_misnamed_key_points_at_the_right_one() -> None:
    e = bad(api.evaluate, {**MINIMAL, "deployment": {**MINIMAL["deployment"], "chunk_size": 512}})
    assert e.field == "deployment.chunk_size"
    assert e.reason == (
        "unknown field chunk_size; did you mean deployment.max_num_batched_tokens (vLLM's token budget)?"
    )
    e = bad(api.simulate, {**MINIMAL, "chunk_size": 512})
    assert e.field == "chunk_size" and "max_num_batched_tokens" in e.reason
    e = bad(api.evaluate, {**MINIMAL, "deployment": {**MINIMAL["deployment"], "tensor_parallel_size": 2}})
    assert "deployment.tp" in e.reason


def test_weights_that_do_not_fit_are_refused() -> None:
    for analysis in ({"utilization": {"context_tokens": 1000, "output_tokens_per_day": 1e6}},
                     {"kv_capacity": {"context_tokens": 1000}}):  # fmt: skip
        e = bad(api.analyze, {"model": "meta-llama/Llama-3.1-70B-Instruct", "gpu": "l40s", **analysis})
        assert e.field == "tp" and "raise tp" in e.reason
    # the same model fits on enough GPUs
    fits = api.analyze(
        {
            "model": "meta-llama/Llama-3.1-70B-Instruct",
            "gpu": "l40s",
            "tp": 4,
            "prefill": {"prompt_tokens": 100},
        }
    )
    assert fits.tokens_per_s > 0  # type: ignore[union-attr]


def test_fixed_parameters_are_the_profiles_parameters() -> None:
    from planner.costmodel.fitting import FIX_NAMES, PARAMETERS

    assert set(FixedParameters.model_fields) == set(FIX_NAMES) >= set(PARAMETERS)


# --- the README's Python API snippet -------------------------------------------------------------


def test_the_readme_snippet_runs(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Python API", 1)[1]
    snippet = re.search(r"```python\n(.*?)```", section, re.S)
    assert snippet is not None
    monkeypatch.chdir(ROOT)
    exec(compile(snippet.group(1), "README.md", "exec"), {})
    assert capsys.readouterr().out.strip()


def test_simulate_cuts_answers_at_the_models_context() -> None:
    """Answers longer than the model's context stop there, as vLLM stops them (max_model_len,
    Qwen3-8B's 40,960 tokens): the report counts them. With 300,000-token answers the fuzzer
    found this simulation taking 28 s in preemptions of sequences vLLM would have ended."""
    wl = {
        "arrivals": {"requests_per_s": 12},
        "input_tokens": {"pairs": [[800, 1.0]]},
        "output_tokens": {"pairs": [[100, 0.7], [300_000, 0.3]]},
    }
    rep = api.simulate(
        {"deployment": {"model": "Qwen/Qwen3-8B", "gpu": "h100-sxm"}, "workload": wl, "requests": 48}
    )
    cut = rep.input.outputs_cut_at_context
    assert 0 < cut < 48 and rep.completed == 48
    assert rep.input.mean_output_tokens == pytest.approx(((48 - cut) * 100 + cut * (40_960 - 800)) / 48)
