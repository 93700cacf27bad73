"""A Prometheus text-format scrape of vLLM's `/metrics` (curl http://HOST:8000/metrics > m.txt).

Read with prometheus_client's parser. Histograms read: `vllm:time_to_first_token_seconds`,
`vllm:inter_token_latency_seconds` (older releases: `vllm:time_per_output_token_seconds`),
`vllm:request_time_per_output_token_seconds`, `vllm:e2e_request_latency_seconds`,
`vllm:request_queue_time_seconds`, `vllm:iteration_tokens_total`; gauges:
`vllm:num_requests_running`, `vllm:num_requests_waiting`, `vllm:kv_cache_usage_perc` (older:
`vllm:gpu_cache_usage_perc`); counters `vllm:prompt_tokens_total`, `vllm:generation_tokens_total`,
`vllm:request_success_total`. Series of one model (label `model_name`) are summed across their
other labels (engine, finished_reason); the KV cache usage fraction is their mean.

A scrape is cumulative since the server started: its counts include warm-up. Quantiles come
from the buckets by linear interpolation within the bucket that holds the rank (as PromQL's
histogram_quantile): they are approximations, as coarse as vLLM's buckets; a rank in the +Inf
bucket reads as the highest finite bound.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families
from pydantic import BaseModel, ConfigDict, Field

from planner.errors import InvalidInput, echo
from planner.files import MEASUREMENTS, read_text

__all__ = [
    "HISTOGRAMS",
    "HistogramSummary",
    "MetricsScrape",
    "histogram_quantile",
    "parse_metrics",
    "read_metrics",
]

HISTOGRAMS: dict[str, str] = {  # vLLM's name -> ours
    "vllm:time_to_first_token_seconds": "ttft_s",
    "vllm:inter_token_latency_seconds": "itl_s",
    "vllm:time_per_output_token_seconds": "itl_s",  # its name before 0.10; the same gap
    "vllm:request_time_per_output_token_seconds": "tpot_s",
    "vllm:e2e_request_latency_seconds": "e2el_s",
    "vllm:request_queue_time_seconds": "queue_s",
    "vllm:iteration_tokens_total": "iteration_tokens",
}
GAUGES: dict[str, str] = {
    "vllm:num_requests_running": "num_requests_running",
    "vllm:num_requests_waiting": "num_requests_waiting",
    "vllm:kv_cache_usage_perc": "kv_cache_usage_fraction",
    "vllm:gpu_cache_usage_perc": "kv_cache_usage_fraction",
}
COUNTERS: dict[str, str] = {
    "vllm:prompt_tokens_total": "prompt_tokens",
    "vllm:generation_tokens_total": "generation_tokens",
    "vllm:request_success_total": "requests_succeeded",
}
QUANTILES: tuple[float, ...] = (0.5, 0.9, 0.95, 0.99)
MAX_BUCKETS = 10_000


class HistogramSummary(BaseModel):
    """One histogram: its observations, their mean and interpolated quantiles (q in [0, 1])."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    count: int = Field(ge=0)
    sum: float
    mean: float | None
    quantiles: dict[float, float]
    buckets: list[tuple[float, float]]  # (upper bound, cumulative count), +Inf last


class MetricsScrape(BaseModel):
    """The vLLM figures of one model in a scrape (names say units: `_s` seconds)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    model_name: str | None
    histograms: dict[str, HistogramSummary]
    gauges: dict[str, float]
    counters: dict[str, float]


def histogram_quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """The q-quantile of cumulative `buckets` (sorted by bound, +Inf last) by linear
    interpolation inside the bucket holding rank q * count (the first bucket starts at 0 when
    its bound is positive); None with no observations."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    prev_bound, prev_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank and count > prev_count:
            if math.isinf(bound):
                return prev_bound
            lower = prev_bound if prev_bound < bound else min(0.0, bound)
            return lower + (bound - lower) * (rank - prev_count) / (count - prev_count)
        prev_bound, prev_count = bound, count
    return prev_bound


def _parses(lines: list[str]) -> bool:
    try:
        for _ in text_string_to_metric_families("\n".join(lines) + "\n"):
            pass
    except ValueError:
        return False
    return True


def _line_of(text: str) -> str:
    """The number of the line the parser refuses (its message quotes the text, not the number):
    the shortest prefix of lines that fails to parse ends there, found by bisection (about 20
    parses for a million lines; only on the error path)."""
    lines = text.splitlines()
    good, bad = 0, len(lines)  # lines[:good] parses, lines[:bad] does not
    while bad - good > 1:
        mid = (good + bad) // 2
        good, bad = (mid, bad) if _parses(lines[:mid]) else (good, mid)
    return f"line {bad}: "


def _families(text: str, field: str) -> list[tuple[str, str, list[tuple[str, dict[str, str], float]]]]:
    try:
        return [
            (f.name, f.type, [(s.name, dict(s.labels), float(s.value)) for s in f.samples])
            for f in text_string_to_metric_families(text)
        ]
    except ValueError as exc:
        raise InvalidInput(
            field, f"{_line_of(text)}not Prometheus text format: {echo(str(exc), 160)}"
        ) from None


def _summarize(
    samples: Iterable[tuple[str, dict[str, str], float]], name: str, field: str
) -> HistogramSummary:
    bounds: dict[float, float] = {}
    total_sum = 0.0
    for sample, labels, value in samples:
        if sample.endswith("_bucket"):
            bounds[float(labels["le"])] = bounds.get(float(labels["le"]), 0.0) + value
        elif sample.endswith("_sum"):
            total_sum += value
    if len(bounds) > MAX_BUCKETS or math.inf not in bounds:
        raise InvalidInput(
            field, f"{name}: a histogram needs a +Inf bucket and at most {MAX_BUCKETS:,} buckets"
        )
    buckets = sorted(bounds.items())
    if any(b[1] < a[1] for a, b in itertools.pairwise(buckets)):
        raise InvalidInput(field, f"{name}: bucket counts must not decrease with the bound")
    count = buckets[-1][1]
    quantiles = {q: v for q in QUANTILES if (v := histogram_quantile(q, buckets)) is not None}
    return HistogramSummary(
        count=round(count),
        sum=total_sum,
        mean=total_sum / count if count else None,
        quantiles=quantiles,
        buckets=buckets,
    )


def _models(families: list[tuple[str, str, list[tuple[str, dict[str, str], float]]]]) -> list[str]:
    return sorted(
        {
            lab["model_name"]
            for n, _, ss in families
            if n.startswith("vllm:")
            for _, lab, _ in ss
            if "model_name" in lab
        }
    )


def parse_metrics(text: str, model_name: str | None = None, field: str = "metrics") -> MetricsScrape:
    """vLLM's figures in a scrape's text, for `model_name` (needed when the scrape serves more
    than one model). A scrape with no vLLM histogram is refused."""
    families = _families(text, field)
    models = _models(families)
    if model_name is None and len(models) > 1:
        raise InvalidInput(field, f"the scrape serves {len(models)} models ({', '.join(models)}); name one")
    if model_name is not None and model_name not in models:
        raise InvalidInput(
            field,
            f"no series with model_name={echo(model_name)}; the scrape has {', '.join(models) or 'none'}",
        )
    chosen = model_name if model_name is not None else (models[0] if models else None)
    hist: dict[str, HistogramSummary] = {}
    gauges: dict[str, float] = {}
    counters: dict[str, float] = {}
    engines: dict[str, int] = {}  # series summed per figure
    by_name: dict[str, list[tuple[str, dict[str, str], float]]] = {}
    for name, _, samples in families:  # a family declared twice: its series together
        by_name.setdefault(name, []).extend(samples)
    for name, samples in by_name.items():
        mine = [s for s in samples if chosen is None or s[1].get("model_name") == chosen]
        if name in HISTOGRAMS and mine:
            hist.setdefault(HISTOGRAMS[name], _summarize(mine, name, field))
        for table, out in ((GAUGES, gauges), (COUNTERS, counters)):
            for sample, _, value in mine:
                if sample in table:
                    out[table[sample]] = out.get(table[sample], 0.0) + value
                    engines[table[sample]] = engines.get(table[sample], 0) + 1
    if "kv_cache_usage_fraction" in gauges:  # a fraction: the engines' mean, not their sum
        gauges["kv_cache_usage_fraction"] /= engines["kv_cache_usage_fraction"]
    if not hist:
        raise InvalidInput(field, f"no vLLM histogram (expected one of {', '.join(sorted(HISTOGRAMS))})")
    return MetricsScrape(model_name=chosen, histograms=hist, gauges=gauges, counters=counters)


def looks_like_metrics(text: str) -> bool:
    """Whether `text` names a vLLM metric in Prometheus text format."""
    return "# TYPE vllm:" in text or "\nvllm:" in text or text.startswith("vllm:")


def read_metrics(path: str | Path, model_name: str | None = None, field: str = "metrics") -> MetricsScrape:
    """`parse_metrics` of a scrape file read within the measurements limit (16 MiB)."""
    text = read_text(path, field, MEASUREMENTS)
    return parse_metrics(text, model_name, f"{field} {path}" if field != str(path) else field)
