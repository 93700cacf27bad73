"""The serving-run corpus (planner/data/serving_runs/*.json) keeps the shared format of issue #35.

Read with plain json, independent of planner.measurements: the structure every file and run must
have (keys and their order, ids unique across files, catalog GPU and model names, result keys
within vLLM's `--save-result` set, positive numbers) and what makes a run qualify (release,
lengths, load, at least one latency or throughput figure).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from planner.catalog.gpus import gpu_names
from planner.catalog.models import model_names

CORPUS_DIR = Path(__file__).resolve().parents[1] / "planner" / "data" / "serving_runs"
FILES = sorted(CORPUS_DIR.glob("*.json"))

RUN_KEYS = [
    "id", "where", "vllm_version", "gpu", "gpu_as_published", "model", "model_as_published",
    "server", "bench", "result", "notes",
]  # fmt: skip
SERVER_KEYS = [
    "tensor_parallel_size", "weight_dtype", "kv_cache_dtype", "max_num_seqs",
    "max_num_batched_tokens", "max_model_len", "gpu_memory_utilization", "enable_prefix_caching",
    "serve_command",
]  # fmt: skip
BENCH_KEYS = [
    "tool", "command", "endpoint", "dataset", "input_len", "output_len", "range_ratio",
    "num_prompts", "request_rate", "burstiness", "max_concurrency",
]  # fmt: skip
# vLLM's `vllm bench serve --save-result` keys the format allows in `result`
RESULT_KEYS = {
    "duration", "completed", "total_input_tokens", "total_output_tokens", "request_throughput",
    "output_throughput", "total_token_throughput",
} | {
    f"{stat}_{metric}_ms"
    for stat in ("mean", "median", "std", "p50", "p90", "p95", "p99")
    for metric in ("ttft", "tpot", "itl", "e2el")
}  # fmt: skip
FIGURES = {k for k in RESULT_KEYS if k.endswith(("_ttft_ms", "_tpot_ms", "_itl_ms"))} | {
    "request_throughput", "output_throughput", "total_token_throughput",
}  # fmt: skip
ID = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _runs() -> list[tuple[str, dict[str, Any]]]:
    return [(p.name, r) for p in FILES for r in _load(p)["runs"]]


def _positive(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and v > 0


def _positive_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def _text(v: Any) -> bool:
    return isinstance(v, str) and v.strip() != ""


def test_the_corpus_is_there() -> None:
    assert FILES, f"no corpus files in {CORPUS_DIR}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_file_structure(path: Path) -> None:
    assert ID.match(path.stem), f"{path.name}: file name must be <publisher>-<slug> in [a-z0-9-]"
    doc = _load(path)
    assert list(doc) == ["about", "source", "runs"], path.name
    assert _text(doc["about"])
    source = doc["source"]
    assert list(source) == ["url", "publisher", "license", "retrieved"], path.name
    assert source["url"].startswith("https://"), path.name
    assert all(_text(source[k]) for k in ("publisher", "license"))
    assert DATE.match(source["retrieved"]), path.name
    assert isinstance(doc["runs"], list) and doc["runs"], f"{path.name}: no runs"


def test_ids_are_unique_across_files() -> None:
    seen: dict[str, str] = {}
    for name, run in _runs():
        assert ID.match(run["id"]), f"{name}: id {run['id']!r} not [a-z0-9-]"
        assert run["id"] not in seen, f"{run['id']} in {seen.get(run['id'])} and {name}"
        seen[run["id"]] = name


@pytest.mark.parametrize(("name", "run"), _runs(), ids=lambda x: x if isinstance(x, str) else x["id"])
def test_run_structure(name: str, run: dict[str, Any]) -> None:
    assert list(run) == RUN_KEYS, f"{name}: {run.get('id')}: keys {list(run)}"
    for key in ("where", "vllm_version", "gpu_as_published", "model_as_published"):
        assert _text(run[key]), f"{run['id']}: {key}"
    assert run["gpu"] in gpu_names(), f"{run['id']}: gpu {run['gpu']!r} not in the catalog"
    assert run["model"] in model_names(), f"{run['id']}: model {run['model']!r} not in the catalog"
    assert isinstance(run["notes"], list) and all(_text(n) for n in run["notes"])
    _check_server(run["id"], run["server"])
    _check_bench(run["id"], run["bench"])
    _check_result(run["id"], run["result"], run["bench"])


def _check_server(rid: str, server: dict[str, Any]) -> None:
    assert list(server) == SERVER_KEYS, f"{rid}: server keys {list(server)}"
    assert _positive_int(server["tensor_parallel_size"]), f"{rid}: tensor_parallel_size"
    assert server["weight_dtype"] in ("bf16", "fp8"), f"{rid}: weight_dtype"
    assert server["kv_cache_dtype"] in ("auto", "fp8"), f"{rid}: kv_cache_dtype"
    for key in ("max_num_seqs", "max_num_batched_tokens", "max_model_len"):
        assert server[key] is None or _positive_int(server[key]), f"{rid}: server.{key}"
    util = server["gpu_memory_utilization"]
    assert util is None or (_positive(util) and util <= 1), f"{rid}: gpu_memory_utilization"
    assert server["enable_prefix_caching"] in (None, True, False), f"{rid}: enable_prefix_caching"
    assert server["serve_command"] is None or _text(server["serve_command"])


def _check_bench(rid: str, bench: dict[str, Any]) -> None:
    assert list(bench) == BENCH_KEYS, f"{rid}: bench keys {list(bench)}"
    tools = ("vllm bench serve", "benchmark_serving.py", "guidellm", "other")
    assert bench["tool"] in tools, f"{rid}: bench.tool"
    assert bench["command"] is None or _text(bench["command"])
    assert bench["endpoint"] in ("/v1/completions", "/v1/chat/completions"), f"{rid}: endpoint"
    assert bench["dataset"] in ("random", "sharegpt", "sonnet", "other"), f"{rid}: dataset"
    for key in ("input_len", "output_len", "num_prompts", "max_concurrency"):
        assert bench[key] is None or _positive_int(bench[key]), f"{rid}: bench.{key}"
    ratio = bench["range_ratio"]
    assert ratio is None or (isinstance(ratio, int | float) and 0 <= ratio <= 1), f"{rid}: range_ratio"
    assert bench["request_rate"] == "inf" or _positive(bench["request_rate"]), f"{rid}: request_rate"
    assert bench["burstiness"] is None or _positive(bench["burstiness"]), f"{rid}: burstiness"
    # the load: a concurrency cap and/or a rate (rate inf with no cap is a saturation burst)
    assert bench["num_prompts"] is not None or bench["max_concurrency"] is not None, f"{rid}: load"


def _check_result(rid: str, result: dict[str, Any], bench: dict[str, Any]) -> None:
    unknown = set(result) - RESULT_KEYS
    assert not unknown, f"{rid}: result keys outside --save-result: {sorted(unknown)}"
    for key, value in result.items():
        assert _positive(value), f"{rid}: result.{key} = {value!r} (omit what the source does not print)"
    for key in ("completed", "total_input_tokens", "total_output_tokens"):
        assert key not in result or _positive_int(result[key]), f"{rid}: result.{key}"
    assert FIGURES & set(result), f"{rid}: prints none of TTFT / TPOT / ITL / throughput"
    if bench["dataset"] == "random":
        assert bench["input_len"] and bench["output_len"], f"{rid}: random lengths"
    else:
        totals = {"completed", "total_input_tokens", "total_output_tokens"}
        assert totals <= set(result), f"{rid}: a dataset run needs its token totals"
