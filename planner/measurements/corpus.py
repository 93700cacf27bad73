"""The serving-run corpus format (planner/data/serving_runs/README.md): public vLLM runs copied
by hand with their source, release and flags, one JSON file per source page.

The schema is strict (unknown keys are refused: a misspelt flag must not silently read as "the
release's default"), and every run becomes a `ServingRun`.
"""

from __future__ import annotations

import math
import re
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, field_validator

from planner.errors import InvalidInput
from planner.measurements.reader_base import latency_from_ms_keys, read_json_documents, validated
from planner.measurements.serving_run import Endpoint, Load, Measured, ServingRun, Settings

__all__ = ["MAX_CORPUS_FILES", "CorpusFile", "builtin_corpus_files", "load_corpus", "read_corpus_file"]

MAX_CORPUS_FILES = 10_000  # files in one corpus directory
_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_RESULT_PLAIN = {
    "duration": float,
    "completed": int,
    "failed": int,
    "total_input_tokens": int,
    "total_output_tokens": int,
    "request_throughput": float,
    "output_throughput": float,
    "total_token_throughput": float,
}
_RESULT_STAT = re.compile(r"^(mean|median|std|p\d+(\.\d+)?)_(ttft|tpot|itl|e2el)_ms$")


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CorpusSource(_Strict):
    url: str = Field(min_length=1, max_length=1024)
    publisher: str = Field(min_length=1, max_length=256)
    license: str = Field(min_length=1, max_length=256)
    retrieved: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")


class CorpusServer(_Strict):
    tensor_parallel_size: int = Field(ge=1, le=64)
    weight_dtype: Literal["bf16", "fp8"]
    kv_cache_dtype: Literal["auto", "fp8"]
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    enable_prefix_caching: bool | None = None
    serve_command: str | None = Field(default=None, max_length=4096)


class CorpusBench(_Strict):
    tool: Literal["vllm bench serve", "benchmark_serving.py", "guidellm", "other"]
    command: str | None = Field(default=None, max_length=4096)
    endpoint: Endpoint | None = None
    dataset: Literal["random", "sharegpt", "sonnet", "other"] | None = None
    input_len: int | None = None
    output_len: int | None = None
    range_ratio: float | None = None
    num_prompts: int | None = None
    request_rate: float | Literal["inf"] = "inf"
    burstiness: float | None = None
    max_concurrency: int | None = None


class CorpusRun(_Strict):
    id: str = Field(max_length=128)
    where: str = Field(min_length=1, max_length=1024)
    vllm_version: str | None = Field(default=None, max_length=64)
    gpu: str
    gpu_as_published: str | None = Field(default=None, max_length=256)
    model: str = Field(min_length=1, max_length=256)
    model_as_published: str | None = Field(default=None, max_length=256)
    server: CorpusServer
    bench: CorpusBench
    result: dict[str, StrictFloat]
    notes: list[str] = Field(default_factory=list, max_length=100)

    @field_validator("id")
    @classmethod
    def _id_chars(cls, v: str) -> str:
        if not _ID.match(v):
            raise ValueError(f"{v!r}: an id is lower-case letters, digits and '-'")
        return v

    @field_validator("result")
    @classmethod
    def _result_keys(cls, v: dict[str, float]) -> dict[str, float]:
        for key in v:
            if key not in _RESULT_PLAIN and not _RESULT_STAT.match(key):
                raise ValueError(f"{key!r} is not a `vllm bench serve --save-result` key")
        return v


class CorpusFile(_Strict):
    about: str = Field(min_length=1, max_length=8192)
    source: CorpusSource
    runs: list[CorpusRun] = Field(min_length=1, max_length=10_000)


def _rate(value: float | Literal["inf"]) -> float:
    return math.inf if value == "inf" else float(value)


def _measured(result: dict[str, float], root: str) -> Measured:
    """The corpus `result` (vLLM's keys, milliseconds) as Measured (seconds)."""
    plain = {
        "duration_s": result.get("duration"),
        "completed": result.get("completed"),
        "failed": result.get("failed"),
        "total_input_tokens": result.get("total_input_tokens"),
        "total_output_tokens": result.get("total_output_tokens"),
        "request_throughput_rps": result.get("request_throughput"),
        "output_throughput_tok_s": result.get("output_throughput"),
        "total_token_throughput_tok_s": result.get("total_token_throughput"),
    }
    stats = latency_from_ms_keys(result, root)
    return validated(Measured, {**plain, **stats}, root)


def _to_serving_run(run: CorpusRun, source_url: str, root: str) -> ServingRun:
    s, b = run.server, run.bench
    settings = validated(
        Settings,
        {
            "model": run.model,
            "gpu": run.gpu,
            "tensor_parallel_size": s.tensor_parallel_size,
            "weight_dtype": s.weight_dtype,
            "kv_cache_dtype": s.kv_cache_dtype,
            "max_num_seqs": s.max_num_seqs,
            "max_num_batched_tokens": s.max_num_batched_tokens,
            "max_model_len": s.max_model_len,
            "gpu_memory_utilization": s.gpu_memory_utilization,
            "enable_prefix_caching": s.enable_prefix_caching,
            "vllm_version": run.vllm_version,
            "endpoint": b.endpoint,
        },
        root,
    )
    load = validated(
        Load,
        {
            "dataset": b.dataset,
            "input_len": b.input_len,
            "output_len": b.output_len,
            "range_ratio": b.range_ratio,
            "num_prompts": b.num_prompts,
            "request_rate_rps": _rate(b.request_rate),
            "burstiness": 1.0 if b.burstiness is None else b.burstiness,
            "max_concurrency": b.max_concurrency,
        },
        f"{root}.bench",
    )
    return ServingRun(
        id=run.id,
        source=source_url,
        format="corpus",
        where=run.where,
        settings=settings,
        load=load,
        measured=_measured(run.result, f"{root}.result"),
        notes=tuple(run.notes),
    )


def read_corpus_file(path: str | Path, field: str = "corpus") -> list[ServingRun]:
    """The runs of one corpus file; a bad value is named by its path in the file
    (`FILE: runs[3].server.max_num_seqs`)."""
    docs = read_json_documents(path, field)
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise InvalidInput(field, f"{path}: a corpus file is one JSON object")
    return runs_of_corpus_document(docs[0], str(path))


def runs_of_corpus_document(doc: dict[str, Any], name: str) -> list[ServingRun]:
    """A parsed corpus object's runs; a bad value is named `NAME: runs[i].key`."""
    try:
        parsed: CorpusFile = validated(CorpusFile, doc, "")
        runs = [_to_serving_run(r, parsed.source.url, f"runs[{i}]") for i, r in enumerate(parsed.runs)]
    except InvalidInput as exc:
        raise InvalidInput(f"{name}: {exc.field}", exc.reason) from None
    _unique(runs, name)
    return runs


def _unique(runs: list[ServingRun], where: str) -> None:
    seen: set[str] = set()
    for run in runs:
        if run.id in seen:
            raise InvalidInput(f"{where}: {run.id}", f"{run.id!r} repeats an earlier run's id")
        seen.add(run.id)


def load_corpus(path: str | Path, field: str = "corpus") -> list[ServingRun]:
    """The runs of a corpus file, or of every *.json file in a directory (sorted by name, ids
    unique across them)."""
    p = Path(path)
    if not p.is_dir():
        return read_corpus_file(p, field)
    files = sorted(p.glob("*.json"))
    if len(files) > MAX_CORPUS_FILES:
        raise InvalidInput(
            field, f"{p} holds {len(files):,} JSON files; a corpus takes at most {MAX_CORPUS_FILES:,}"
        )
    runs: list[ServingRun] = []
    for f in files:
        runs.extend(read_corpus_file(f, field))
    _unique(runs, str(p))
    return runs


def builtin_corpus_files() -> list[Path]:
    """The corpus shipped with capplan (package data planner/data/serving_runs/*.json), sorted."""
    root = resources.files("planner") / "data" / "serving_runs"
    return sorted(Path(str(root)).glob("*.json"))


def builtin_corpus() -> list[ServingRun]:
    """Every run of the built-in corpus (empty when none is shipped)."""
    runs: list[ServingRun] = []
    for f in builtin_corpus_files():
        runs.extend(read_corpus_file(f, "corpus"))
    _unique(runs, "planner/data/serving_runs")
    return runs
