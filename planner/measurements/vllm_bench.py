"""`vllm bench serve --save-result` JSON (and the older benchmarks/benchmark_serving.py, whose
keys are the same) as `ServingRun`s.

The file carries the load (`request_rate`, `burstiness`, `max_concurrency`, `num_prompts`), the
client (`backend`), `model_id` and the results (`duration`, `completed`, token totals,
throughputs, `{mean,median,std,pNN}_{ttft,tpot,itl,e2el}_ms`), and with `--save-detailed` the
per-request arrays `input_lens`, `output_lens`, `ttfts`, `itls` (seconds) and `errors`. It does
not carry the server's flags, the GPU or the dataset: those come from `--metadata KEY=VALUE`
pairs, which vLLM writes at the top level as strings, under the `capplan.` keys below (what
`capplan plan --emit bench` writes), or from the caller's overrides, which win.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from planner.errors import InvalidInput
from planner.measurements.reader_base import (
    apply_overrides,
    latency_from_ms_keys,
    read_json_documents,
    validated,
)
from planner.measurements.serving_run import Load, Measured, PerRequest, Promised, ServingRun, Settings

__all__ = [
    "EMITTED_METADATA_KEYS",
    "METADATA_KEYS",
    "METADATA_PREFIX",
    "PLAN_METADATA_KEYS",
    "VllmBenchResult",
    "read_vllm_bench",
    "runs_of_vllm_bench",
]

METADATA_PREFIX = "capplan."
# `--metadata capplan.KEY=VALUE` keys, defined here once for the reader and for `capplan plan
# --emit bench` (planner/export_bench.py writes EMITTED_METADATA_KEYS in this order). The first
# ones are the Settings and Load fields the result JSON lacks; PLAN_METADATA_KEYS carry what the
# plan promised (ServingRun.promised).
PLAN_METADATA_KEYS: tuple[str, ...] = (
    "role",
    "predicted_ttft_p99_ms",
    "predicted_itl_p99_ms",
    "predicted_ttft_p50_ms",
    "predicted_itl_p50_ms",
    "rate_per_s",
)
EMITTED_METADATA_KEYS: tuple[str, ...] = (
    "gpu",
    "model",
    "tensor_parallel_size",
    "max_num_seqs",
    "max_num_batched_tokens",
    "max_model_len",
    "weight_dtype",
    "kv_cache_dtype",
    "vllm_version",
    *PLAN_METADATA_KEYS,
)
METADATA_KEYS: tuple[str, ...] = (
    *EMITTED_METADATA_KEYS,
    "gpu_memory_utilization",
    "enable_prefix_caching",
    "endpoint",
    "dataset",
    "input_len",
    "output_len",
    "range_ratio",
    "run_id",
)
NULL_VALUES = ("", "None", "null", "none")  # a metadata value that means "not stated"
# vLLM's --backend -> the endpoint it posts to (vllm/benchmarks/lib/endpoint_request_func.py).
_BACKEND_ENDPOINT = {
    "vllm": "/v1/completions",
    "openai": "/v1/completions",
    "openai-chat": "/v1/chat/completions",
}


class VllmBenchResult(BaseModel):
    """The keys capplan reads from a `--save-result` file (vllm/benchmarks/serve.py); the rest
    (`date`, `label`, `generated_texts`, spec-decode figures, metadata) pass through."""

    model_config = ConfigDict(extra="allow", frozen=True)
    backend: str | None = None
    endpoint_type: str | None = None
    model_id: str | None = None
    num_prompts: int | None = Field(default=None, ge=1)
    request_rate: float | Literal["inf"] = "inf"
    burstiness: float | None = Field(default=None, gt=0.0)
    max_concurrency: int | None = Field(default=None, ge=1)
    duration: float = Field(gt=0.0)
    completed: int = Field(ge=0)
    failed: int | None = Field(default=None, ge=0)
    total_input_tokens: int = Field(ge=0)
    total_output_tokens: int = Field(ge=0)
    request_throughput: float | None = Field(default=None, ge=0.0)
    output_throughput: float | None = Field(default=None, ge=0.0)
    total_token_throughput: float | None = Field(default=None, ge=0.0)
    input_lens: list[int] | None = None
    output_lens: list[int] | None = None
    ttfts: list[float] | None = None
    itls: list[list[float]] | None = None
    errors: list[str] | None = None
    # With speculative decoding on the server (vllm/benchmarks/serve.py, from its
    # spec_decode Prometheus counters): mean tokens per verify step (1 + accepted / drafts), the
    # accepted share of drafted tokens in %, and the counts they come from.
    spec_decode_acceptance_length: float | None = Field(default=None, ge=1.0)
    spec_decode_acceptance_rate: float | None = Field(default=None, ge=0.0, le=100.0)
    spec_decode_num_drafts: int | None = Field(default=None, ge=0)
    spec_decode_draft_tokens: int | None = Field(default=None, ge=0)


def _at(root: str, key: str) -> str:
    """`key` under the dotted prefix `root` ("" for a file's only object, "[2]" in an appended file)."""
    return f"{root}.{key}" if root else key


def _metadata(doc: Mapping[str, Any], root: str) -> dict[str, Any]:
    """The `capplan.*` top-level keys, without the prefix; an unknown one is refused by name."""
    out: dict[str, Any] = {}
    for key, value in doc.items():
        if not key.startswith(METADATA_PREFIX):
            continue
        name = key[len(METADATA_PREFIX) :]
        if name not in METADATA_KEYS:
            raise InvalidInput(
                _at(root, key), f"unknown capplan metadata key; known: {', '.join(METADATA_KEYS)}"
            )
        out[name] = None if value in NULL_VALUES else value
    return out


def _per_request(r: VllmBenchResult, root: str) -> PerRequest | None:
    """The `--save-detailed` arrays, kept for the successful requests only (a failed request
    has ttft 0 and no ITLs; vLLM's summary figures leave it out too)."""
    arrays = {"input_lens": r.input_lens, "output_lens": r.output_lens, "ttfts": r.ttfts, "itls": r.itls}
    if all(a is None for a in arrays.values()):
        return None
    n = len(r.ttfts or [])
    for name, a in arrays.items():
        if a is None or len(a) != n:
            got = "absent" if a is None else f"{len(a):,} entries"
            raise InvalidInput(
                _at(root, name), f"{got}; --save-detailed writes one per request ({n:,} ttfts)"
            )
    if r.errors is not None and len(r.errors) != n:
        raise InvalidInput(_at(root, "errors"), f"{len(r.errors):,} entries for {n:,} requests")
    ok = [i for i in range(n) if not (r.errors or [""] * n)[i]]
    assert r.input_lens is not None and r.output_lens is not None and r.ttfts and r.itls is not None
    for i in ok:
        if not (math.isfinite(r.ttfts[i]) and r.ttfts[i] >= 0.0):
            raise InvalidInput(_at(root, f"ttfts[{i}]"), f"must be a time >= 0 s, got {r.ttfts[i]}")
    return PerRequest(
        input_lens=[r.input_lens[i] for i in ok],
        output_lens=[r.output_lens[i] for i in ok],
        ttfts_s=[r.ttfts[i] for i in ok],
        itls_s=[r.itls[i] for i in ok],
    )


def _measured(r: VllmBenchResult, doc: Mapping[str, Any], root: str) -> Measured:
    stats = latency_from_ms_keys(doc, root)
    data = {
        "duration_s": r.duration,
        "completed": r.completed,
        "failed": r.failed,
        "total_input_tokens": r.total_input_tokens,
        "total_output_tokens": r.total_output_tokens,
        "request_throughput_rps": r.request_throughput,
        "output_throughput_tok_s": r.output_throughput,
        "total_token_throughput_tok_s": r.total_token_throughput,
        "per_request": _per_request(r, root),
        **stats,
    }
    return validated(Measured, data, root)


def _settings_and_load(
    r: VllmBenchResult, meta: dict[str, Any], overrides: Mapping[str, Any] | None, root: str
) -> tuple[Settings, Load]:
    backend = r.backend or r.endpoint_type
    settings: dict[str, Any] = {"model": r.model_id, "endpoint": _BACKEND_ENDPOINT.get(backend or "")}
    load: dict[str, Any] = {
        "num_prompts": r.num_prompts,
        "request_rate_rps": math.inf if r.request_rate == "inf" else r.request_rate,
        "burstiness": 1.0 if r.burstiness is None else r.burstiness,
        "max_concurrency": r.max_concurrency,
    }
    meta = {k: v for k, v in meta.items() if k != "run_id" and k not in PLAN_METADATA_KEYS}
    apply_overrides(settings, load, meta, _at(root, "capplan"))
    apply_overrides(settings, load, overrides, "overrides")
    if settings.get("model") is None:
        raise InvalidInput(_at(root, "model_id"), "absent; pass --metadata capplan.model=NAME or an override")
    try:
        return validated(Settings, settings, ""), validated(Load, load, "")
    except InvalidInput as exc:  # name the key the value came from: the override, else the metadata
        key = exc.field.split(".")[0].split("[")[0]
        if key in (overrides or {}):
            raise InvalidInput(f"overrides.{exc.field}", exc.reason) from None
        if key in meta:
            raise InvalidInput(_at(root, METADATA_PREFIX + exc.field), exc.reason) from None
        raise InvalidInput(_at(root, exc.field), exc.reason) from None


def _promised(meta: dict[str, Any], root: str) -> Promised | None:
    """The plan's promise from the PLAN_METADATA_KEYS present (None when none is)."""
    if not any(meta.get(k) is not None for k in PLAN_METADATA_KEYS):
        return None
    data: dict[str, Any] = {"role": meta.get("role"), "rate_per_s": meta.get("rate_per_s")}
    for key in PLAN_METADATA_KEYS:
        if key.startswith("predicted_") and meta.get(key) is not None:
            where = _at(root, METADATA_PREFIX + key)
            try:
                ms = float(meta[key])
            except (TypeError, ValueError):
                raise InvalidInput(where, f"must be a number of milliseconds, got {meta[key]!r}") from None
            if not (math.isfinite(ms) and ms >= 0.0):
                raise InvalidInput(where, f"must be a finite number of milliseconds >= 0, got {ms}")
            data[key.removeprefix("predicted_").replace("_ms", "_s")] = ms / 1e3
    try:
        return validated(Promised, data, "")
    except InvalidInput as exc:
        name = "rate_per_s" if exc.field.startswith("rate_per_s") else exc.field.split(".")[0]
        raise InvalidInput(_at(root, METADATA_PREFIX + name), exc.reason) from None


def runs_of_vllm_bench(
    doc: Mapping[str, Any], name: str, index: int | None = None, overrides: Mapping[str, Any] | None = None
) -> ServingRun:
    """One parsed result object as a ServingRun; a bad value is named `NAME: key` (`NAME:
    [i].key` for the i-th object of an appended file). `index`: its place in such a file."""
    root = "" if index is None else f"[{index}]"
    try:
        r: VllmBenchResult = validated(VllmBenchResult, doc, root)
        meta = _metadata(doc, root)
        settings, load = _settings_and_load(r, meta, overrides, root)
        measured = _measured(r, doc, root)
        promised = _promised(meta, root)
    except InvalidInput as exc:
        field = exc.field if exc.field.startswith("overrides") else f"{name}: {exc.field}"
        raise InvalidInput(field, exc.reason) from None
    run_id = meta.get("run_id") or Path(name).stem + ("" if index is None else f"-{index}")
    return ServingRun(
        id=str(run_id)[:128],
        source=name,
        format="vllm-bench",
        settings=settings,
        load=load,
        measured=measured,
        promised=promised,
    )


def read_vllm_bench(
    path: str | Path, overrides: Mapping[str, Any] | None = None, field: str = "run"
) -> list[ServingRun]:
    """The runs of a `--save-result` file (several when written with `--append-result`)."""
    docs = read_json_documents(path, field)
    name = str(path)
    for i, d in enumerate(docs):
        if not isinstance(d, dict):
            raise InvalidInput(field, f"{name}: document {i} is not a JSON object")
    if len(docs) == 1:
        return [runs_of_vllm_bench(docs[0], name, None, overrides)]
    return [runs_of_vllm_bench(d, name, i, overrides) for i, d in enumerate(docs)]


def spec_decode_acceptance(path: str | Path, field: str) -> tuple[float, int]:
    """(acceptance length, k) of the first run in a `--save-result` file that carries
    `spec_decode_*` figures: vLLM's mean tokens per verify step and the guesses per draft
    (draft tokens / drafts). A file without them is an InvalidInput on `field`."""
    for i, doc in enumerate(read_json_documents(path, field)):
        if not isinstance(doc, dict):
            continue
        r = validated(VllmBenchResult, doc, f"{field}[{i}]")
        length, drafts, tokens = r.spec_decode_acceptance_length, r.spec_decode_num_drafts, r.spec_decode_draft_tokens
        if length is not None and drafts and tokens:
            return length, round(tokens / drafts)
    raise InvalidInput(
        field,
        f"{path}: no run with spec_decode_acceptance_length, spec_decode_num_drafts and "
        "spec_decode_draft_tokens (vllm bench serve writes them when the server speculates)",
    )
