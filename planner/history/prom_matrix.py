"""vLLM's Prometheus metrics as a range-query result: the HTTP API's
`{"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {...},
"values": [[unix_s, "value"], ...]}, ...]}}` (prometheus.io/docs/prometheus/latest/querying/api,
"Range vectors"), or a JSON list of such results (one query per metric).

Series read, by `__name__` (vllm/v1/metrics/loggers.py; prometheus_client adds `_total` to a
counter's name and `_bucket` to a histogram's bucket series); every other series is ignored:

| metric                                   | gives per bucket                                  |
|------------------------------------------|---------------------------------------------------|
| `vllm:request_success_total` (required)  | requests: the counter's increase                  |
| `vllm:prompt_tokens_total`               | mean prompt length = token increase / requests    |
| `vllm:generation_tokens_total`           | mean output length, likewise                      |
| `vllm:request_prompt_tokens_bucket`      | prompt LengthHistogram: each `le` series' increase|
| `vllm:request_generation_tokens_bucket`  | output LengthHistogram, likewise                  |

Counters, per series (a pod, an engine, a `finished_reason`), then summed over series:
* The file's step is its smallest interval between two samples of a series (the query's step).
  Two consecutive samples at most 1.5 steps apart bound an observed interval; a longer interval
  is a gap (a scrape gap, a pod gone stale and back): its increase is unknown, not counted.
* A value below the previous one is a counter reset (the process restarted): the increase over
  that interval is the new value (counted from 0), as Prometheus' `increase()` does.
* An interval's increase is spread over the buckets it overlaps in proportion to time (linear
  interpolation of the counter between samples).
* A series that starts or ends inside the range (a pod added or gone stale) contributes over its
  observed intervals only: its absence elsewhere is not a gap while other series are observed.
* A bucket's coverage is the most time any one series of the metric observed in it; the sum of
  increases is scaled by bucket_s / coverage. A bucket covered for less than a quarter of its
  length is None (unobserved).
* Histogram buckets: the same per `le` (summed over the other labels), made cumulative again by
  a running maximum (scaling can break it by rounding); the `+Inf` bound is kept as inf.

Refused, naming the series (`FIELD.result[i]` and its name and labels): values that are not
finite numbers, timestamps that do not increase, negative counters, a bucket series without a
valid `le`, a result that is not a matrix or a query that did not succeed.
"""

from __future__ import annotations

import io
import json
import math
from collections import defaultdict

import numpy as np
import numpy.typing as npt

from planner.errors import echo
from planner.history.origin import MAX_HISTORY_ROWS, Source
from planner.history.series import (
    MAX_HISTORY_BUCKETS,
    MAX_REQUESTS_PER_BUCKET,
    BucketLengths,
    HistorySeries,
    LengthHistogram,
)

REQUESTS = "vllm:request_success_total"
PROMPT_TOKENS = "vllm:prompt_tokens_total"
OUTPUT_TOKENS = "vllm:generation_tokens_total"
PROMPT_HIST = "vllm:request_prompt_tokens_bucket"
OUTPUT_HIST = "vllm:request_generation_tokens_bucket"
READ = (REQUESTS, PROMPT_TOKENS, OUTPUT_TOKENS, PROMPT_HIST, OUTPUT_HIST)
GAP_STEPS = 1.5
MIN_COVERAGE = 0.25  # of a bucket
MAX_COUNTER = 1e18
MAX_LE_SERIES = 256  # LengthHistogram's bound count

Floats = npt.NDArray[np.float64]


class _Series:
    __slots__ = ("at", "label", "le", "t", "v")

    def __init__(self, at: str, label: str, t: Floats, v: Floats, le: float | None) -> None:
        self.at, self.label, self.t, self.v, self.le = at, label, t, v, le


def _label(metric: dict[str, object]) -> str:
    name = str(metric.get("__name__", ""))
    labels = ",".join(f"{k}={echo(str(v), 40)}" for k, v in sorted(metric.items()) if k != "__name__")
    return echo(f"{name}{{{labels}}}", 160)


def _results(doc: object, src: Source) -> list[object]:
    docs = doc if isinstance(doc, list) else [doc]
    out: list[object] = []
    for i, d in enumerate(docs):
        at = f"[{i}]" if isinstance(doc, list) else ""
        if not isinstance(d, dict) or not isinstance(d.get("data"), dict):
            raise src.error(at, "is not a Prometheus query result (no data object)")
        if d.get("status", "success") != "success":
            raise src.error(
                f"{at}.status", f"the query did not succeed: {echo(d.get('error', d.get('status')))}"
            )
        data = d["data"]
        if data.get("resultType") != "matrix":
            raise src.error(
                f"{at}.data.resultType",
                f"is {echo(data.get('resultType'))}; a range query (matrix) is needed",
            )
        result = data.get("result")
        if not isinstance(result, list):
            raise src.error(f"{at}.data.result", "is not a list")
        out.extend(result)
    return out


def _samples(values: object, at: str, label: str, src: Source) -> tuple[Floats, Floats]:
    if not isinstance(values, list) or not values:
        raise src.error(f"{at}.values", f"series {label}: no samples (a list of [time, value])")
    try:
        t = np.array([float(p[0]) for p in values], dtype=np.float64)
        v = np.array([float(p[1]) for p in values], dtype=np.float64)
    except (TypeError, ValueError, IndexError, KeyError):
        raise src.error(f"{at}.values", f'series {label}: a sample is not [time, "value"]') from None
    if not (np.isfinite(t).all() and np.isfinite(v).all()):
        k = int(np.argmin(np.isfinite(t) & np.isfinite(v)))
        raise src.error(f"{at}.values[{k}]", f"series {label}: {echo(values[k])} is not finite")
    if (np.diff(t) <= 0).any():
        k = int(np.argmax(np.diff(t) <= 0)) + 1
        raise src.error(f"{at}.values[{k}]", f"series {label}: time {t[k]:g} does not follow {t[k - 1]:g}")
    if (v < 0).any() or (v > MAX_COUNTER).any() or t[0] < 0 or t[-1] >= 1e11:
        k = int(np.argmax((v < 0) | (v > MAX_COUNTER) | (t < 0) | (t >= 1e11)))
        raise src.error(
            f"{at}.values[{k}]",
            f"series {label}: {echo(values[k])} is out of range (a counter is 0 .. {MAX_COUNTER:g})",
        )
    return t, v


def _parse(text: str, src: Source) -> dict[str, list[_Series]]:
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise src.error("", f"not JSON: {exc}") from None
    by_name: dict[str, list[_Series]] = defaultdict(list)
    total = 0
    for i, item in enumerate(_results(doc, src)):
        at = f".result[{i}]"
        metric = item.get("metric") if isinstance(item, dict) else None
        if not isinstance(metric, dict):
            raise src.error(at, "has no metric labels")
        name = metric.get("__name__")
        if name not in READ:
            if name is None:
                raise src.error(
                    f"{at}.metric",
                    f"series {_label(metric)} has no __name__: export the raw metrics, not rate() or sum()",
                )
            continue
        label = _label(metric)
        assert isinstance(item, dict)
        t, v = _samples(item.get("values"), at, label, src)
        total += t.size
        if total > MAX_HISTORY_ROWS:
            raise src.error(at, f"more than {MAX_HISTORY_ROWS:,} samples")
        le = None
        if name in (PROMPT_HIST, OUTPUT_HIST):
            try:
                le = float(str(metric.get("le")))
            except ValueError:
                le = math.nan
            if math.isnan(le) or le < 0:
                raise src.error(
                    f"{at}.metric.le", f"series {label}: a histogram bucket needs le, a number or +Inf"
                )
        by_name[str(name)].append(_Series(at, label, t, v, le))
    if REQUESTS not in by_name:
        raise src.error("", f"has no {REQUESTS} series (the request counter every history needs)")
    return by_name


def _increase(s: _Series, step: float, edges: Floats) -> tuple[Floats, Floats]:
    """(increase, observed seconds) per bucket of one counter series (module docstring)."""
    dt = np.diff(s.t)
    observed = dt <= GAP_STEPS * step
    d = np.diff(s.v)
    d = np.where(d >= 0, d, s.v[1:])  # a drop: the process restarted, count from 0
    cum = np.concatenate(([0.0], np.cumsum(np.where(observed, d, 0.0))))
    cov = np.concatenate(([0.0], np.cumsum(np.where(observed, dt, 0.0))))
    return np.diff(np.interp(edges, s.t, cum)), np.diff(np.interp(edges, s.t, cov))


def _metric(series: list[_Series], step: float, edges: Floats, bucket_s: float) -> Floats:
    """The metric's increase per bucket summed over series and scaled to a whole bucket; NaN
    where it is unobserved."""
    total = np.zeros(edges.size - 1)
    coverage = np.zeros(edges.size - 1)
    for s in series:
        inc, cov = _increase(s, step, edges)
        total += inc
        coverage = np.maximum(coverage, cov)
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = total * bucket_s / coverage
    return np.where(coverage >= MIN_COVERAGE * bucket_s, scaled, np.nan)


def _histograms(
    series: list[_Series], step: float, edges: Floats, bucket_s: float, src: Source
) -> list[LengthHistogram | None] | None:
    if not series:
        return None
    by_le: dict[float, list[_Series]] = defaultdict(list)
    for s in series:
        assert s.le is not None
        by_le[s.le].append(s)
    if len(by_le) > MAX_LE_SERIES:
        raise src.error(series[0].at, f"{len(by_le)} le bounds; at most {MAX_LE_SERIES}")
    bounds = sorted(by_le)
    counts = np.stack([_metric(by_le[b], step, edges, bucket_s) for b in bounds])  # (bounds, buckets)
    out: list[LengthHistogram | None] = []
    for j in range(counts.shape[1]):
        col = counts[:, j]
        if np.isnan(col).any() or col[-1] <= 0:
            out.append(None)
            continue
        cum = np.minimum(np.maximum.accumulate(col), MAX_REQUESTS_PER_BUCKET)
        out.append(LengthHistogram(upper_tokens=tuple(bounds), counts=tuple(float(c) for c in cum)))
    return out


def read(stream: io.TextIOBase, bucket_s: float, src: Source) -> HistorySeries:
    by_name = _parse(stream.read(), src)
    every = [s for group in by_name.values() for s in group]
    step = min((float(np.diff(s.t).min()) for s in every if s.t.size > 1), default=bucket_s)
    first = min(float(s.t[0]) for s in every)
    last = max(float(s.t[-1]) for s in every)
    start = math.floor(first / bucket_s) * bucket_s
    n = max(1, math.ceil((last - start) / bucket_s))
    if n > MAX_HISTORY_BUCKETS:
        raise src.error(".bucket_s", f"{n:,} buckets of {bucket_s:g} s; at most {MAX_HISTORY_BUCKETS:,}")
    edges = start + bucket_s * np.arange(n + 1, dtype=np.float64)
    requests = _metric(by_name[REQUESTS], step, edges, bucket_s)
    if np.isnan(requests).all():
        raise src.error(
            "", f"no bucket of {bucket_s:g} s is observed for a quarter of its length by {REQUESTS}"
        )
    lengths = None
    if PROMPT_TOKENS in by_name and OUTPUT_TOKENS in by_name:
        prompt = _metric(by_name[PROMPT_TOKENS], step, edges, bucket_s)
        output = _metric(by_name[OUTPUT_TOKENS], step, edges, bucket_s)
        p_hist = _histograms(by_name.get(PROMPT_HIST, []), step, edges, bucket_s, src)
        o_hist = _histograms(by_name.get(OUTPUT_HIST, []), step, edges, bucket_s, src)
        lengths = tuple(
            None
            if not (requests[j] > 0 and np.isfinite(prompt[j]) and np.isfinite(output[j]))
            else BucketLengths(
                prompt_tokens_mean=min(float(prompt[j] / requests[j]), 1e7),
                output_tokens_mean=min(float(output[j] / requests[j]), 1e7),
                prompt_histogram=None if p_hist is None else p_hist[j],
                output_histogram=None if o_hist is None else o_hist[j],
            )
            for j in range(n)
        )
    return HistorySeries(
        source=src.name,
        start_unix_s=start,
        bucket_s=bucket_s,
        requests=tuple(None if math.isnan(r) else min(float(r), MAX_REQUESTS_PER_BUCKET) for r in requests),
        lengths=lengths,
    )
