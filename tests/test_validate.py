"""`capplan validate` and its parts: what a run becomes (planner/measurements/prediction.py), the
error per figure and MAPE (scoring.py), the command's table and JSON, a plan's promise read back
from a bench `--emit bench` emitted, and the round trip run -> workload -> plan -> `--emit bench`."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from planner import api
from planner.errors import InvalidInput
from planner.export_bench import METADATA_KEYS, bench_argv
from planner.measurements import builtin_corpus, read_vllm_bench
from planner.measurements.prediction import predict_run, run_workload
from planner.measurements.scoring import mape_by_gpu, score_run, score_runs
from planner.measurements.serving_run import LatencySummary, Load, Measured, ServingRun, Settings
from tests.cli_helpers import run_cli
from tests.test_export_bench import parse_bench


def _run(load: Load, measured: Measured | None = None, **settings: Any) -> ServingRun:
    s = {"model": "Qwen/Qwen3-8B", "gpu": "h100-sxm", **settings}
    m = measured or Measured(total_input_tokens=1000 * 100, total_output_tokens=200 * 100, completed=100)
    return ServingRun(id="t", source="test", format="corpus", settings=Settings(**s), load=load, measured=m)


def _corpus(run_id: str) -> ServingRun:
    (run,) = [r for r in builtin_corpus() if r.id == run_id]
    return run


# --- what a run becomes --------------------------------------------------------------------------


def test_random_lengths_are_vllms_uniform_draw() -> None:
    """--random-input-len 1000 --random-range-ratio 0.5: uniform over [500, 1500] (vLLM draws
    integers in [floor(L(1-r)), ceil(L(1+r))]); mean 1000.5 for the histogram [500, 1501)."""
    run = _run(Load(dataset="random", input_len=1000, output_len=200, range_ratio=0.5, request_rate_rps=2.0))
    wl = run_workload(run).workload
    assert wl.input_tokens.histogram is not None
    assert wl.input_tokens.histogram.edges == (500, 1501)
    assert wl.input_tokens.mean() == pytest.approx(1000.5)
    assert wl.output_tokens.histogram is not None and wl.output_tokens.histogram.edges == (100, 301)


def test_other_datasets_take_the_mean_lengths() -> None:
    """sharegpt: the token totals over completed requests, rounded: 23,260 / 100 -> 233."""
    m = Measured(completed=100, total_input_tokens=23_260, total_output_tokens=22_061)
    wl = run_workload(_run(Load(dataset="sharegpt", request_rate_rps=1.0), m)).workload
    assert wl.input_tokens.constant == 233 and wl.output_tokens.constant == 221


@pytest.mark.parametrize(
    ("load", "kind", "concurrency", "rate"),
    [
        (Load(request_rate_rps=3.0, burstiness=0.5, num_prompts=300), "open", None, 3.0),
        (Load(max_concurrency=8, num_prompts=100), "closed", 8, None),
        (Load(request_rate_rps=5.0, max_concurrency=8, num_prompts=100), "closed", 8, 5.0),
        (Load(num_prompts=500), "saturation", 500, None),
        (Load(max_concurrency=1000, num_prompts=500), "saturation", 500, None),
    ],
)
def test_load_kinds(load: Load, kind: str, concurrency: int | None, rate: float | None) -> None:
    """Open loop at the rate (gaps' CV^2 = 1/burstiness); closed at max_concurrency (the rate a
    cap); a burst (no cap, or a cap >= num_prompts) as num_prompts clients sending one each."""
    inputs = run_workload(
        _run(load.model_copy(update={"dataset": "random", "input_len": 1000, "output_len": 200}))
    )
    a = inputs.workload.arrivals
    assert (inputs.load, a.concurrency, a.requests_per_s) == (kind, concurrency, rate)
    if kind == "open":
        assert a.burstiness == 0.5


def test_unset_flags_are_the_release_defaults() -> None:
    """max_num_seqs / budget None: vLLM's online defaults for a >= 70 GiB GPU (1024, 8192);
    kv_cache_dtype auto under fp8 weights is bf16 KV."""
    run = _run(Load(request_rate_rps=1.0), weight_dtype="fp8", kv_cache_dtype="auto")
    dep = run_workload(run).deployment
    assert dep.kv_dtype == "bf16" and dep.weight_dtype == "fp8"
    resolved = dep.resolve("auto")
    assert resolved.scheduler.max_num_seqs == 1024 and resolved.scheduler.max_num_batched_tokens == 8192


def test_prediction_is_the_evaluate_report() -> None:
    """A closed-loop corpus run predicted here is `capplan evaluate` of the same request."""
    run = _corpus("gpustack-qwen3-8b-h100-sxm-c4")
    inputs = run_workload(run)
    p = predict_run(run, "auto")
    rep = api.evaluate(
        {
            "deployment": inputs.deployment.model_dump(),
            "workload": inputs.workload.model_dump(exclude_none=True),
        }
    )
    assert p.load == "closed" and rep.ttft_p50_ms is not None and rep.itl_p99_ms is not None
    assert p.ttft_p50_s == pytest.approx(rep.ttft_p50_ms / 1e3)
    assert p.itl_p99_s == pytest.approx(rep.itl_p99_ms / 1e3)
    assert rep.closed_loop is not None
    assert p.requests_per_s == pytest.approx(rep.closed_loop.requests_per_s)


def test_saturation_is_scored_on_throughput_alone() -> None:
    run = _corpus("gpustack-qwen3-32b-h100-sxm-random-2000-100")
    for sim in (False, True):
        p = predict_run(run, "auto", simulate=sim)
        s = score_run(run, p)
        assert p.load == "saturation" and [e.figure for e in s.errors] == ["saturation_throughput"]
        assert p.ttft_p50_s is None and p.output_throughput_tok_s is not None


@pytest.mark.parametrize(("prompts", "rel"), [(4, 0.05), (16, 0.05), (64, 0.15), (256, 0.30), (2000, 0.30)])
def test_burst_is_the_closed_loop_at_its_prompts_and_tracks_the_simulator(prompts: int, rel: float) -> None:
    """A burst of N prompts (rate inf, no cap): the analytic figure is the closed loop of N
    clients (N requests in flight for the burst's life; the steady-state capacity only when N
    fills the engine), against the simulator running the burst itself (constant lengths: the
    burst ends with its last wave). Qwen3-8B on an H100, 1000/200 tokens. Measured: within 4% at
    N <= 16; the analytic capacity itself is 20% above the simulator's saturated throughput here
    (the latency model's capacity, not the burst), so N >= 256 is held to 30%."""
    load = Load(dataset="random", input_len=1000, output_len=200, num_prompts=prompts)
    run = _run(load)
    a = predict_run(run, "auto")
    s = predict_run(run, "auto", simulate=True)
    assert a.output_throughput_tok_s is not None and s.output_throughput_tok_s is not None
    assert a.output_throughput_tok_s == pytest.approx(s.output_throughput_tok_s, rel=rel)
    capacity = predict_run(_run(load.model_copy(update={"num_prompts": 100_000})), "auto")
    assert capacity.output_throughput_tok_s is not None
    assert a.output_throughput_tok_s <= capacity.output_throughput_tok_s * (1 + 1e-9)
    if prompts <= 16:  # far below what the engine holds: the batch, not the capacity, sets the rate
        assert a.output_throughput_tok_s < 0.5 * capacity.output_throughput_tok_s


def test_simulated_prediction_is_deterministic() -> None:
    run = _corpus("gpustack-qwen3-8b-h100-sxm-c2")
    assert predict_run(run, "auto", simulate=True) == predict_run(run, "auto", simulate=True)


def test_unknown_gpu_is_named() -> None:
    run = _run(Load(request_rate_rps=1.0)).model_copy(update={"settings": Settings(model="Qwen/Qwen3-8B")})
    with pytest.raises(InvalidInput, match=r"t\.gpu"):
        predict_run(run)
    (score,) = score_runs([run])
    assert score.errors == () and score.no_prediction is not None and "gpu" in score.no_prediction


# --- scoring -------------------------------------------------------------------------------------


def test_signed_errors_and_mape_by_hand() -> None:
    """Predicted vs measured by hand: +x% means capplan says slower / more; MAPE the mean |x|."""
    run = _corpus("gpustack-qwen3-8b-h100-sxm-c1")
    p = predict_run(run, "auto")
    s = score_run(run, p)
    got = {e.figure: e for e in s.errors}
    assert set(got) == {"ttft_p50", "ttft_p99", "tpot_p50", "itl_p50", "itl_p99", "throughput"}
    m = run.measured
    assert m.ttft is not None and m.tpot is not None
    assert got["ttft_p50"].measured == m.ttft.p(50)
    assert got["ttft_p50"].error_pct == pytest.approx(100 * (p.ttft_p50_s - m.ttft.p(50)) / m.ttft.p(50))  # type: ignore[operator]
    assert got["tpot_p50"].predicted == p.tpot_p50_s
    other = score_run(
        _corpus("gpustack-qwen3-8b-h100-sxm-c2"), predict_run(_corpus("gpustack-qwen3-8b-h100-sxm-c2"))
    )
    other_ttft = {e.figure: e for e in other.errors}["ttft_p50"].error_pct
    mape = mape_by_gpu([s, other])["h100-sxm"]["ttft_p50"]
    assert mape.runs == 2
    assert mape.mape_pct == pytest.approx((abs(got["ttft_p50"].error_pct or 0) + abs(other_ttft or 0)) / 2)


def test_a_run_scores_only_what_it_prints() -> None:
    m = Measured(
        completed=100,
        total_input_tokens=100_000,
        total_output_tokens=20_000,
        tpot=LatencySummary(median_s=0.01),
    )
    run = _run(Load(dataset="random", input_len=1000, output_len=200, request_rate_rps=1.0), m)
    assert [e.figure for e in score_run(run, predict_run(run)).errors] == ["tpot_p50"]


@pytest.mark.parametrize(
    ("version", "era"),
    [("0.5.4", "pre-0.6"), ("v0.5.3.post1", "pre-0.6"), ("0.4.0", "pre-0.6"), ("0.6.0", "modelled"),
     ("0.11.0", "modelled"), ("1.0.0", "modelled"), (None, "modelled"), ("nightly", "modelled")],
)  # fmt: skip
def test_release_era_is_read_from_the_version(version: str | None, era: str) -> None:
    """Before vLLM 0.6.0 (its API server in the engine's process, one scheduling pass per step:
    MODELLED_FROM_RELEASE) a run is `pre-0.6`; later, or not stated, `modelled`."""
    run = _run(Load(request_rate_rps=1.0), vllm_version=version)
    assert run.release_era == era


def test_pre_0_6_runs_are_scored_apart() -> None:
    """A pre-0.6 run keeps its errors but counts only in its own era's MAPE."""
    m = Measured(completed=100, total_input_tokens=100_000, total_output_tokens=20_000, duration_s=50.0)
    load = Load(dataset="random", input_len=1000, output_len=200, num_prompts=100)
    old, new = _run(load, m, vllm_version="0.5.4"), _run(load, m, vllm_version="0.11.0")
    s_old, s_new = score_runs([old, new])
    assert s_old.release_era == "pre-0.6" and s_new.release_era == "modelled"
    assert s_old.errors == s_new.errors and s_old.errors[0].figure == "saturation_throughput"
    assert mape_by_gpu([s_old, s_new])["h100-sxm"]["saturation_throughput"].runs == 1
    assert mape_by_gpu([s_old, s_new], "pre-0.6")["h100-sxm"]["saturation_throughput"].runs == 1
    assert mape_by_gpu([s_old]) == {}


# --- the command ---------------------------------------------------------------------------------


def test_cli_corpus_text_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_cli(["validate", "--corpus"], capsys)
    assert rc == 0, err
    assert "MAPE per GPU (analytic, profile auto" in out and "gpustack-qwen3-8b-h100-sxm-c1:" in out
    rc, js, err = run_cli(["validate", "--corpus", "--json"], capsys)
    assert rc == 0, err
    data = json.loads(js)
    assert len(data["runs"]) == len(builtin_corpus())
    assert set(data["mape_by_gpu"]) >= {"h100-sxm", "h200-sxm", "a100-80gb-sxm"}
    pre = [r for r in data["runs"] if r["release_era"] == "pre-0.6"]
    n_pre = data["mape_by_gpu_pre_0_6"]["h100-sxm"]["saturation_throughput"]["runs"]
    assert pre and n_pre == len(pre) and "releases before 0.6" in out
    assert f"{pre[0]['run_id']}: " in out and out.count("; vLLM before 0.6, scored apart") == len(pre)
    # the text and the JSON say the same: each run's TTFT p50 error, to the printed digit
    c1 = next(r for r in data["runs"] if r["run_id"] == "gpustack-qwen3-8b-h100-sxm-c1")
    err_pct = next(e for e in c1["errors"] if e["figure"] == "ttft_p50")["error_pct"]
    assert f"{err_pct:+.1f}%" in out.split("gpustack-qwen3-8b-h100-sxm-c1:")[1].split("\n\n")[0]


def test_cli_refuses_no_runs_and_a_bad_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run_cli(["validate"], capsys)
    assert rc == 2 and "RUNS" in err
    bad = tmp_path / "r.json"
    bad.write_text(
        json.dumps({"duration": -1.0, "completed": 1, "total_input_tokens": 1, "total_output_tokens": 1})
    )
    rc, _, err = run_cli(["validate", str(bad)], capsys)
    assert rc == 2 and "duration" in err


# --- the plan's promise and the round trips ------------------------------------------------------


def _plan(run: ServingRun, slo: dict[str, float]) -> Any:
    """The plan of the workload `run_workload` builds from `run`, on the run's GPU, TP and dtypes."""
    inputs = run_workload(run)
    dep = inputs.deployment
    return api.plan(
        {
            "model": dep.model,
            "slo": slo,
            "workload": inputs.workload.model_dump(exclude_none=True),
            "candidates": {
                "gpus": [dep.gpu],
                "tensor_parallel_sizes": [dep.tp],
                "disaggregation": "never",
                "weight_dtype": dep.weight_dtype,
                "kv_dtype": dep.kv_dtype,
            },
            "availability": {"min_replicas": 1},  # one replica takes the run's whole stream
        },
        workers=1,
    )


def _result_file(tmp_path: Path, argv: list[str], ttft_p99_ms: float, itl_p99_ms: float) -> Path:
    """A synthetic `--save-result` file for the emitted command: vLLM's keys, the load the
    command sets and its `--metadata` pairs at the top level as vLLM writes them."""
    got = parse_bench(argv)
    doc: dict[str, Any] = {
        "backend": got["--backend"],
        "model_id": got["--model"],
        "num_prompts": int(got["--num-prompts"]),
        "request_rate": float(got["--request-rate"]),
        "burstiness": float(got["--burstiness"]),
        "max_concurrency": None,
        "duration": 300.0,
        "completed": int(got["--num-prompts"]),
        "total_input_tokens": 1_000 * int(got["--num-prompts"]),
        "total_output_tokens": 200 * int(got["--num-prompts"]),
        "median_ttft_ms": ttft_p99_ms / 2,
        "p99_ttft_ms": ttft_p99_ms,
        "median_itl_ms": itl_p99_ms / 2,
        "p99_itl_ms": itl_p99_ms,
        "median_tpot_ms": itl_p99_ms / 2,
    }
    doc.update(x.split("=", 1) for x in got["--metadata"])
    path = tmp_path / got["--result-filename"]
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture(scope="module")
def random_run_plan() -> tuple[ServingRun, Any]:
    """A vllm bench serve run (random 1000/200 at range ratio 0.5, 2 req/s, burstiness 0.5) and
    the plan of the workload run_workload builds from it."""
    run = _run(
        Load(
            dataset="random",
            input_len=1000,
            output_len=200,
            range_ratio=0.5,
            request_rate_rps=2.0,
            burstiness=0.5,
        )
    )
    return run, _plan(run, {"ttft_p99_ms": 2000, "itl_p99_ms": 100})


def test_emitted_bench_reads_back_with_its_promise(
    tmp_path: Path, random_run_plan: tuple[ServingRun, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """plan --emit bench -> a result file carrying its metadata -> validate reads the settings
    and the promise, and says per figure whether it held."""
    _, report = random_run_plan
    (dep,) = report.deployments
    at = dep.at_peak
    argv = bench_argv(report, dep)
    assert sum(1 for x in parse_bench(argv)["--metadata"] if x.split("=")[0] in METADATA_KEYS) == len(
        METADATA_KEYS
    )
    # TTFT p99 measured at half the promise (held), ITL p99 at twice it (broken)
    path = _result_file(tmp_path, argv, at.ttft_p99_ms / 2, at.itl_p99_ms * 2)
    (run,) = read_vllm_bench(path)
    assert run.settings.gpu == dep.gpu and run.settings.max_num_seqs == dep.max_num_seqs
    assert run.promised is not None and run.promised.role == "colocated"
    assert run.promised.ttft_p99_s == pytest.approx(at.ttft_p99_ms / 1e3, rel=1e-5)
    rc, out, err = run_cli(["validate", str(path), "--json"], capsys)
    assert rc == 0, err
    checks = {p["figure"]: p["held"] for p in json.loads(out)["runs"][0]["promise"]}
    assert checks["ttft_p99"] is True and checks["itl_p99"] is False
    rc, out, _ = run_cli(["validate", str(path)], capsys)
    assert "ttft_p99 <= " in out and "BROKEN" in out and "promises: 2 of 4 held" in out


def test_round_trip_random_run_gives_the_same_load(random_run_plan: tuple[ServingRun, Any]) -> None:
    """run -> run_workload -> plan -> --emit bench: the rate, burstiness and lengths come back.
    Not exactly: the input length is the uniform's mean rounded (1000.5 -> 1001: vLLM's draw
    over the integers [500, 1500] has mean 1000, the histogram [500, 1501) 1000.5), the range
    ratio comes from the p99 (within 0.01), and the output gets the input's range ratio (one
    --random-range-ratio for both)."""
    run, report = random_run_plan
    (dep,) = report.deployments
    assert dep.replicas_peak == 1
    got = parse_bench(bench_argv(report, dep))
    assert float(got["--request-rate"]) == pytest.approx(run.load.request_rate_rps, rel=1e-5)
    assert float(got["--burstiness"]) == pytest.approx(run.load.burstiness, rel=1e-5)
    assert got["--random-prefix-len"] == "0"
    assert abs(int(got["--random-input-len"]) - 1000) <= 1
    assert got["--random-output-len"] == "200"
    assert float(got["--random-range-ratio"]) == pytest.approx(0.5, abs=0.01)


def test_round_trip_corpus_run_gives_the_same_load() -> None:
    """A corpus vllm bench serve run (sharegpt on Llama 3.1 70B fp8, H200, 1 req/s Poisson):
    rate and burstiness come back exactly, the lengths as the run's means (207.46 -> 207,
    197.02 -> 197). Lost: sharegpt's spread (only the means are known), so --emit bench draws
    constant lengths (range ratio 0) from the random dataset."""
    run = _corpus("doks-llama31-70b-fp8-h200-sharegpt-rate-1p0")
    assert run.settings.vllm_version is not None and run.load.dataset == "sharegpt"
    report = _plan(run, {"ttft_p99_ms": 5000, "itl_p99_ms": 200})
    (dep,) = report.deployments
    assert dep.replicas_peak == 1 and dep.weight_dtype == "fp8"
    got = parse_bench(bench_argv(report, dep))
    assert float(got["--request-rate"]) == 1.0 and float(got["--burstiness"]) == 1.0
    assert run.mean_input_tokens is not None and run.mean_output_tokens is not None
    assert int(got["--random-input-len"]) == round(run.mean_input_tokens) == 207
    assert int(got["--random-output-len"]) == round(run.mean_output_tokens) == 197
    assert float(got["--random-range-ratio"]) == 0.0
    assert math.isfinite(float(got["--num-prompts"]))
