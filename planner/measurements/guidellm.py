"""GuideLLM benchmark reports (`guidellm benchmark ... --output-path x.json`, or `--output
kind=json`) as one `ServingRun` per benchmark.

The report is `{"benchmarks": [...]}` (schemas in vllm-project/guidellm
src/guidellm/benchmark/schemas/ and src/guidellm/schemas/statistics.py). Each benchmark's
`metrics` holds distributions (`time_to_first_token_ms`, `time_per_output_token_ms`,
`inter_token_latency_ms`, `request_latency` in seconds, `prompt_token_count`,
`output_token_count`) split by status; the successful requests' `mean`, `median`, `std_dev`,
`count`, `total_sum` and `percentiles` (`p001` ... `p999`) are read. The load is its scheduling
strategy (`config.strategy`, `args.strategy` in releases before 0.4): synchronous = one request at
a time, concurrent = `streams` at a time, throughput = all at once, constant = evenly spaced at
`rate`, poisson = Poisson at `rate`. The report carries no server flags or GPU: those come from
the caller's overrides.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from planner.errors import InvalidInput
from planner.measurements.reader_base import apply_overrides, read_json_documents, validated
from planner.measurements.serving_run import LatencySummary, Load, Measured, ServingRun, Settings

__all__ = ["GuidellmReport", "read_guidellm", "runs_of_guidellm"]

_PERCENTILES = {
    "p001": 0.1,
    "p01": 1.0,
    "p05": 5.0,
    "p10": 10.0,
    "p25": 25.0,
    "p50": 50.0,
    "p75": 75.0,
    "p90": 90.0,
    "p95": 95.0,
    "p99": 99.0,
    "p999": 99.9,
}
MAX_BENCHMARKS = 1_000


class _Loose(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Distribution(_Loose):
    mean: float = Field(ge=0.0)
    median: float = Field(ge=0.0)
    std_dev: float | None = Field(default=None, ge=0.0)
    count: int = Field(ge=0)
    total_sum: float = Field(ge=0.0)
    percentiles: dict[str, float] = Field(default_factory=dict)


class StatusDistribution(_Loose):
    successful: Distribution


class Metrics(_Loose):
    time_to_first_token_ms: StatusDistribution
    time_per_output_token_ms: StatusDistribution | None = None
    inter_token_latency_ms: StatusDistribution | None = None
    request_latency: StatusDistribution
    prompt_token_count: StatusDistribution
    output_token_count: StatusDistribution


class Strategy(_Loose):
    type_: Literal["synchronous", "concurrent", "throughput", "constant", "poisson"]
    streams: int | None = Field(default=None, ge=1)
    rate: float | None = Field(default=None, gt=0.0)
    max_concurrency: int | None = Field(default=None, ge=1)


class StrategyHolder(_Loose):
    strategy: Strategy


class Benchmark(_Loose):
    config: StrategyHolder | None = None  # guidellm >= 0.4
    args: StrategyHolder | None = None  # earlier
    start_time: float | None = None
    end_time: float | None = None
    duration: float | None = Field(default=None, gt=0.0)
    metrics: Metrics


class GuidellmReport(_Loose):
    benchmarks: list[Benchmark] = Field(min_length=1, max_length=MAX_BENCHMARKS)


def _summary(d: StatusDistribution | None, to_s: float) -> LatencySummary | None:
    """A successful-requests distribution as a LatencySummary (`to_s`: its unit in seconds)."""
    if d is None or d.successful.count == 0:
        return None
    s = d.successful
    pct = {_PERCENTILES[k]: v * to_s for k, v in s.percentiles.items() if k in _PERCENTILES}
    return LatencySummary(
        mean_s=s.mean * to_s,
        median_s=s.median * to_s,
        std_s=None if s.std_dev is None else s.std_dev * to_s,
        percentiles_s=pct,
    )


def _load(strategy: Strategy, root: str) -> dict[str, Any]:
    kind = strategy.type_
    if kind in ("constant", "poisson") and strategy.rate is None:
        raise InvalidInput(f"{root}.rate", f"a {kind} strategy needs its rate")
    if kind == "concurrent" and strategy.streams is None:
        raise InvalidInput(f"{root}.streams", "a concurrent strategy needs its streams")
    cap = {"synchronous": 1, "concurrent": strategy.streams}.get(kind, strategy.max_concurrency)
    rate = strategy.rate if kind in ("constant", "poisson") else math.inf
    return {
        "request_rate_rps": rate,
        "burstiness": math.inf if kind == "constant" else 1.0,
        "max_concurrency": cap,
    }


def _measured(b: Benchmark, root: str) -> Measured:
    m = b.metrics
    duration = b.duration
    if duration is None and b.start_time is not None and b.end_time is not None:
        duration = b.end_time - b.start_time
    if duration is not None and duration <= 0:
        raise InvalidInput(f"{root}.duration", f"must be > 0 s, got {duration}")
    done = m.request_latency.successful.count
    tokens_in = round(m.prompt_token_count.successful.total_sum)
    tokens_out = round(m.output_token_count.successful.total_sum)

    def per_s(x: float) -> float | None:
        return None if duration is None else x / duration

    return Measured(
        duration_s=duration,
        completed=done,
        total_input_tokens=tokens_in,
        total_output_tokens=tokens_out,
        request_throughput_rps=per_s(done),
        output_throughput_tok_s=per_s(tokens_out),
        total_token_throughput_tok_s=per_s(tokens_in + tokens_out),
        ttft=_summary(m.time_to_first_token_ms, 1e-3),
        tpot=_summary(m.time_per_output_token_ms, 1e-3),
        itl=_summary(m.inter_token_latency_ms, 1e-3),
        e2el=_summary(m.request_latency, 1.0),
    )


def _run(
    b: Benchmark, i: int, name: str, model: str | None, overrides: Mapping[str, Any] | None
) -> ServingRun:
    holder, where = (b.config, "config") if b.config is not None else (b.args, "args")
    root = f"benchmarks[{i}]"
    if holder is None:
        raise InvalidInput(f"{root}.config.strategy", "absent: the benchmark's load is unknown")
    settings: dict[str, Any] = {"model": model}
    load = _load(holder.strategy, f"{root}.{where}.strategy")
    apply_overrides(settings, load, overrides, "overrides")
    if settings.get("model") is None:
        raise InvalidInput("overrides.model", "the report does not name the model; pass it")
    return ServingRun(
        id=f"{Path(name).stem}-{i}",
        source=name,
        format="guidellm",
        where=root,
        settings=validated(Settings, settings, "overrides"),
        load=validated(Load, load, "overrides"),
        measured=_measured(b, root),
    )


def _model_name(doc: Mapping[str, Any], i: int) -> str | None:
    """The served model where the report records it (the backend's info, or the older
    worker description); None when absent."""
    bench = doc["benchmarks"][i]
    for outer, inner in (("config", "backend"), ("worker", None)):
        part = bench.get(outer) if isinstance(bench, dict) else None
        part = part.get(inner) if isinstance(part, dict) and inner else part
        if isinstance(part, dict):
            for key in ("model", "backend_model"):
                if isinstance(part.get(key), str):
                    return str(part[key])
    return None


def runs_of_guidellm(
    doc: Mapping[str, Any], name: str, overrides: Mapping[str, Any] | None = None
) -> list[ServingRun]:
    """A parsed report's benchmarks; a bad value is named `NAME: benchmarks[i]....`."""
    try:
        report: GuidellmReport = validated(GuidellmReport, doc, "")
        return [_run(b, i, name, _model_name(doc, i), overrides) for i, b in enumerate(report.benchmarks)]
    except InvalidInput as exc:
        field = exc.field if exc.field.startswith("overrides") else f"{name}: {exc.field}"
        raise InvalidInput(field, exc.reason) from None


def read_guidellm(
    path: str | Path, overrides: Mapping[str, Any] | None = None, field: str = "run"
) -> list[ServingRun]:
    """The runs of a GuideLLM JSON report file."""
    docs = read_json_documents(path, field)
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise InvalidInput(field, f"{path}: a GuideLLM report is one JSON object")
    return runs_of_guidellm(docs[0], str(path), overrides)
