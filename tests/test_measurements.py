"""planner.measurements: each reader on a fixture in its real format (tests/data/measurements,
README there cites the schemas), the figures pinned to the fixture's own numbers, and bad input
named by its field."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from planner.errors import InvalidInput
from planner.measurements import (
    METADATA_KEYS,
    builtin_corpus,
    builtin_corpus_files,
    detect_and_read,
    histogram_quantile,
    load_corpus,
    read_guidellm,
    read_metrics,
    read_startup_log,
    read_vllm_bench,
)

DATA = Path(__file__).parent / "data" / "measurements"


def _write(tmp_path: Path, name: str, data: object) -> Path:
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else json.dumps(data))
    return p


def _doc(name: str) -> dict:
    return json.loads((DATA / name).read_text())


# --- vllm bench serve --save-result ---------------------------------------------------------


def test_vllm_bench_result_with_metadata() -> None:
    (run,) = read_vllm_bench(DATA / "vllm_bench_rate4.json")
    s, load, m = run.settings, run.load, run.measured
    assert (s.model, s.gpu, s.tensor_parallel_size, s.max_num_seqs, s.max_num_batched_tokens) == (
        "Qwen/Qwen3-8B",
        "h200-sxm",
        1,
        256,
        8192,
    )
    assert (s.vllm_version, s.endpoint) == ("0.11.0", "/v1/completions")  # backend "openai"
    assert (load.dataset, load.input_len, load.output_len, load.num_prompts) == ("random", 1024, 128, 200)
    assert (load.request_rate_rps, load.burstiness, load.max_concurrency) == (4.0, 1.0, None)
    assert load.open_loop and not run.saturation
    assert m.ttft is not None and m.tpot is not None and m.itl is not None
    assert m.ttft.mean_s == pytest.approx(0.0415) and m.ttft.p(99.0) == pytest.approx(0.072)
    assert m.tpot.median_s == pytest.approx(0.0073) and m.itl.p(50.0) == pytest.approx(0.0072)
    assert m.e2el is None and m.per_request is None
    assert (m.duration_s, m.completed, m.output_throughput_tok_s) == (50.0, 200, 512.0)
    assert run.mean_input_tokens == 1024.0 and run.mean_output_tokens == 128.0


def test_vllm_bench_appended_results_and_fractional_percentile() -> None:
    runs = read_vllm_bench(DATA / "vllm_bench_appended.json")
    assert [r.id for r in runs] == ["qwen3-8b-h200-c8", "qwen3-8b-h200-c16"]  # capplan.run_id
    assert [r.load.max_concurrency for r in runs] == [8, 16]
    assert all(math.isinf(r.load.request_rate_rps) for r in runs)
    assert runs[0].measured.ttft is not None and runs[0].measured.ttft.p(99.9) == pytest.approx(0.090)


def test_vllm_bench_detailed_keeps_successful_requests() -> None:
    (run,) = read_vllm_bench(DATA / "vllm_bench_detailed.json", overrides={"vllm_version": "0.10.2"})
    pr = run.measured.per_request
    assert pr is not None
    assert pr.ttfts_s == [0.03, 0.032, 0.034]  # the third request failed ("Bad Request")
    assert pr.output_lens == [4, 4, 4] and len(pr.itls_s) == 3 and pr.itls_s[2] == [0.008, 0.007, 0.007]
    assert run.settings.endpoint == "/v1/chat/completions"  # backend "openai-chat"
    assert run.settings.vllm_version == "0.10.2"  # the override
    assert run.measured.failed == 1


def test_vllm_bench_overrides_win_over_metadata() -> None:
    (run,) = read_vllm_bench(
        DATA / "vllm_bench_rate4.json", overrides={"max_num_seqs": 128, "gpu": "h100-sxm"}
    )
    assert (run.settings.max_num_seqs, run.settings.gpu) == (128, "h100-sxm")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"capplan.max_num_seqs": "many"}, "capplan.max_num_seqs"),
        ({"capplan.gpu": "h300"}, "capplan.gpu"),
        ({"capplan.max_num_seq": "8"}, "capplan.max_num_seq"),
        ({"duration": -1.0}, "duration"),
        ({"p99_ttft_ms": "fast"}, "p99_ttft_ms"),
        ({"completed": None}, "completed"),
        ({"max_concurrency": 0}, "max_concurrency"),
    ],
)
def test_vllm_bench_bad_input_names_the_field(tmp_path: Path, change: dict, field: str) -> None:
    doc = {**_doc("vllm_bench_rate4.json"), **change}
    p = _write(tmp_path, "r.json", doc)
    with pytest.raises(InvalidInput) as e:
        read_vllm_bench(p)
    assert e.value.field == f"{p}: {field}"


def test_vllm_bench_bad_override_and_detailed_arrays(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as e:
        read_vllm_bench(DATA / "vllm_bench_rate4.json", overrides={"max_num_seqs": 0})
    assert e.value.field == "overrides.max_num_seqs"
    with pytest.raises(InvalidInput) as e:
        read_vllm_bench(DATA / "vllm_bench_rate4.json", overrides={"batch": 4})
    assert e.value.field == "overrides.batch"
    doc = _doc("vllm_bench_detailed.json")
    doc["itls"] = doc["itls"][:2]
    p = _write(tmp_path, "d.json", doc)
    with pytest.raises(InvalidInput, match="one per request") as e:
        read_vllm_bench(p)
    assert e.value.field == f"{p}: itls"


def test_vllm_bench_json_syntax_error_names_the_line(tmp_path: Path) -> None:
    p = _write(tmp_path, "r.json", '{"duration": 1.0,\n "completed": 3,\n oops}')
    with pytest.raises(InvalidInput, match="line 3 column 2"):
        read_vllm_bench(p)


def test_metadata_keys_cover_what_the_result_lacks() -> None:
    """Every server flag a ServingRun carries can come through --metadata (plan --emit bench)."""
    for key in ("gpu", "tensor_parallel_size", "max_num_seqs", "max_num_batched_tokens", "vllm_version"):
        assert key in METADATA_KEYS


# --- GuideLLM --------------------------------------------------------------------------------


def test_guidellm_report_one_run_per_benchmark() -> None:
    runs = read_guidellm(DATA / "guidellm_report.json", overrides={"gpu": "h200-sxm"})
    sync, const = runs
    assert sync.settings.model == "Qwen/Qwen3-8B" and sync.settings.gpu == "h200-sxm"
    assert (sync.load.max_concurrency, math.isinf(sync.load.request_rate_rps)) == (1, True)
    assert (const.load.request_rate_rps, const.load.burstiness) == (5.0, math.inf)  # evenly spaced
    m = const.measured
    assert (m.duration_s, m.completed, m.total_input_tokens) == (30.0, 150, 76800)
    assert m.request_throughput_rps == pytest.approx(5.0)  # 150 requests / 30 s
    assert m.ttft is not None and m.ttft.mean_s == pytest.approx(0.052)
    assert m.ttft.p(99.0) == pytest.approx(0.1111) and m.ttft.p(99.9) == pytest.approx(0.120)
    assert m.e2el is not None and m.e2el.mean_s == pytest.approx(1.3)  # request_latency is in s
    assert m.itl is not None and m.itl.mean_s == pytest.approx(0.0095)


def test_guidellm_older_layout() -> None:
    (run,) = read_guidellm(DATA / "guidellm_v03.json")
    assert (run.load.request_rate_rps, run.load.burstiness, run.settings.model) == (2.0, 1.0, "Qwen/Qwen3-8B")


def test_guidellm_bad_input_names_the_field(tmp_path: Path) -> None:
    doc = _doc("guidellm_report.json")
    doc["benchmarks"][1]["config"]["strategy"]["type_"] = "sweep"
    p = _write(tmp_path, "g.json", doc)
    with pytest.raises(InvalidInput) as e:
        read_guidellm(p)
    assert e.value.field == f"{p}: benchmarks[1].config.strategy.type_"
    doc = _doc("guidellm_report.json")
    del doc["benchmarks"][0]["metrics"]["time_to_first_token_ms"]["successful"]["mean"]
    p = _write(tmp_path, "g.json", doc)
    with pytest.raises(InvalidInput) as e:
        read_guidellm(p)
    assert e.value.field == f"{p}: benchmarks[0].metrics.time_to_first_token_ms.successful.mean"


# --- corpus ----------------------------------------------------------------------------------


def test_corpus_file_and_directory(tmp_path: Path) -> None:
    runs = load_corpus(DATA / "corpus_example.json")
    c1, burst = runs
    assert c1.settings.endpoint == "/v1/chat/completions" and c1.load.max_concurrency == 1
    assert c1.measured.ttft is not None and c1.measured.ttft.p(99.0) == pytest.approx(0.07349)
    assert c1.mean_input_tokens == pytest.approx(232.6)  # 23260 / 100
    assert burst.saturation and burst.load.burstiness == 1.0  # null -> vLLM's default
    assert (burst.settings.weight_dtype, burst.settings.kv_cache_dtype, burst.settings.max_num_seqs) == (
        "fp8",
        "fp8",
        512,
    )
    _write(tmp_path, "a.json", _doc("corpus_example.json"))
    assert [r.id for r in load_corpus(tmp_path)] == [c1.id, burst.id]
    _write(tmp_path, "b.json", _doc("corpus_example.json"))
    with pytest.raises(InvalidInput, match="repeats"):
        load_corpus(tmp_path)


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda d: d["runs"][1]["server"].update(max_num_seq=8), "runs[1].server.max_num_seq"),
        (lambda d: d["runs"][0]["result"].update(p99_ttft_ms=None), "runs[0].result.p99_ttft_ms"),
        (lambda d: d["runs"][0]["result"].update(p99_ttft_s=0.07), "runs[0].result"),
        (lambda d: d["runs"][0].update(gpu="h100"), "runs[0].gpu"),
        (lambda d: d["runs"][0].update(id="Bad_ID"), "runs[0].id"),
        (lambda d: d["runs"][1]["bench"].update(request_rate=-2), "runs[1].bench.request_rate_rps"),
        (lambda d: d["source"].pop("license"), "source.license"),
    ],
)
def test_corpus_bad_input_names_the_field(tmp_path: Path, edit, field: str) -> None:
    doc = _doc("corpus_example.json")
    edit(doc)
    p = _write(tmp_path, "c.json", doc)
    with pytest.raises(InvalidInput) as e:
        load_corpus(p)
    assert e.value.field == f"{p}: {field}"


def test_builtin_corpus_reads() -> None:
    """Every shipped corpus file reads (the directory may hold none yet)."""
    assert len(builtin_corpus()) >= len(builtin_corpus_files())


# --- start-up log ----------------------------------------------------------------------------


def test_startup_log_v1() -> None:
    log = read_startup_log(DATA / "startup_v1.log")
    assert (log.kv_cache_tokens, log.max_model_len, log.max_concurrency) == (1_540_576, 32_768, 47.01)
    assert log.available_kv_cache_gib == 105.79 and log.vllm_version == "0.11.0"
    o = log.settings_overrides()
    assert (o["max_num_seqs"], o["max_num_batched_tokens"], o["kv_cache_dtype"]) == (256, 8192, "fp8")
    assert o["gpu_memory_utilization"] == 0.9


def test_startup_log_v0_blocks() -> None:
    log = read_startup_log(DATA / "startup_v0.log")
    assert (log.gpu_blocks, log.kv_cache_tokens, log.max_model_len) == (27_892, None, 131_072)
    # vLLM's line: blocks * block_size (16) / max_model_len
    assert log.max_concurrency == pytest.approx(27_892 * 16 / 131_072, abs=0.005)


def test_startup_log_bad_args_line_names_the_line(tmp_path: Path) -> None:
    text = (DATA / "startup_v1.log").read_text()
    odd = text.replace(
        "'kv_cache_dtype': 'fp8'}", "'kv_cache_dtype': 'fp8', 'compilation_config': Config(level=3)}"
    )
    log = read_startup_log(_write(tmp_path, "odd.log", odd))  # a repr, not a literal: the pairs
    assert (log.non_default_args["max_num_seqs"], log.non_default_args["kv_cache_dtype"]) == (256, "fp8")
    assert "compilation_config" not in log.non_default_args
    p = _write(tmp_path, "s.log", text.replace("{'model_tag'", "[oops"))
    with pytest.raises(InvalidInput, match="line 3: non-default args"):
        read_startup_log(p)


# --- Prometheus ------------------------------------------------------------------------------


def test_prometheus_scrape() -> None:
    s = read_metrics(DATA / "metrics.txt")
    assert s.model_name == "Qwen/Qwen3-8B"
    ttft = s.histograms["ttft_s"]
    assert (ttft.count, ttft.mean) == (100, pytest.approx(0.039))  # sum 3.9 s / 100
    # p50: rank 50 in (0.02, 0.04] holding cumulative 10 -> 60: 0.02 + 0.02 * 40/50
    assert ttft.quantiles[0.5] == pytest.approx(0.036)
    # p95: rank 95 in (0.06, 0.08] holding 90 -> 98: 0.06 + 0.02 * 5/8
    assert ttft.quantiles[0.95] == pytest.approx(0.0725)
    assert s.histograms["iteration_tokens"].mean == pytest.approx(115_200 / 12_800)
    assert s.histograms["itl_s"].count == 12_700
    assert s.gauges == {
        "num_requests_running": 7.0,
        "num_requests_waiting": 0.0,
        "kv_cache_usage_fraction": 0.125,
    }
    assert s.counters["generation_tokens"] == 12_800.0


def test_histogram_quantile_edges() -> None:
    assert histogram_quantile(0.5, [(1.0, 0.0), (math.inf, 0.0)]) is None
    assert histogram_quantile(0.99, [(1.0, 1.0), (math.inf, 10.0)]) == 1.0  # rank in +Inf: top bound
    assert histogram_quantile(0.5, [(2.0, 4.0), (math.inf, 4.0)]) == pytest.approx(1.0)


def test_prometheus_bad_input(tmp_path: Path) -> None:
    text = (DATA / "metrics.txt").read_text()
    p = _write(
        tmp_path, "m.txt", text.replace("vllm:num_requests_waiting{", "vllm:num_requests_waiting{{", 1)
    )
    with pytest.raises(InvalidInput, match="line 6: not Prometheus"):
        read_metrics(p)
    two = text + text.replace("Qwen/Qwen3-8B", "other/model")
    p = _write(tmp_path, "m2.txt", two)
    with pytest.raises(InvalidInput, match="serves 2 models"):
        read_metrics(p)
    assert read_metrics(p, model_name="other/model").model_name == "other/model"
    # two engines (data parallel) of one model: counts add, the usage fraction is their mean
    dp = read_metrics(_write(tmp_path, "dp.txt", text + text.replace('engine="0"', 'engine="1"')))
    assert dp.histograms["ttft_s"].count == 200 and dp.gauges["num_requests_running"] == 14.0
    assert dp.gauges["kv_cache_usage_fraction"] == 0.125


# --- detection -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("vllm_bench_rate4.json", "vllm-bench"),
        ("vllm_bench_appended.json", "vllm-bench"),
        ("guidellm_report.json", "guidellm"),
        ("corpus_example.json", "corpus"),
        ("metrics.txt", "prometheus"),
        ("startup_v1.log", "startup-log"),
        ("startup_v0.log", "startup-log"),
    ],
)
def test_detect_and_read(name: str, kind: str) -> None:
    assert detect_and_read(DATA / name).kind == kind


def test_detect_refuses_unknown_files(tmp_path: Path) -> None:
    for name, text in (("x.json", '{"hello": 1}'), ("x.txt", "just some text\n")):
        p = _write(tmp_path, name, text)
        with pytest.raises(InvalidInput, match="expected a capplan corpus JSON") as e:
            detect_and_read(p)
        assert e.value.field == "run"
    with pytest.raises(InvalidInput, match="no such file"):
        detect_and_read(tmp_path / "missing.json")
