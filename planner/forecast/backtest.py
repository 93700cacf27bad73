"""Backtest in dollars (`capplan forecast --backtest`): a rolling origin over the history. By
default the origins are whole weeks from the second on: fold k (k = 2, 3, ...) fits each
forecaster on weeks 1..k and forecasts week k + 1. `Origins` sets the first origin (the least
history fitted), the step between origins and the span each fold tests (a daily step over a
two-week history: fit on everything before each day, test that day); the tested span is never
part of the fit. Each forecast quantile becomes a workload, the real planner (`planner.api.plan`, in this
process, so its capacity memo, planner/plan/memo.py, answers every plan after the first for the
same deployment shapes: capacities never read the rates) plans it with the user's plan file's
model, SLOs, candidates and prices, and the plan is scored against the week that came:

* GPU-hours bought: sum over buckets of the plan's GPUs x the bucket's hours;
* hours at risk: buckets (in hours) whose observed rate exceeded the plan's capacity in that
  bucket (replicas x each deployment's requests/s per replica at the SLO; a disaggregated
  plan's capacity is the smaller of its prefill and decode pools');
* $ per 1M tokens: the plan's dollars over the observed requests' tokens (the plan's mean input
  + output tokens per request).

Unobserved buckets of the test week are neither at risk nor counted in tokens. A plan with no
answer (infeasible) counts in `plans_failed` and in no other sum.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from planner.errors import InvalidInput
from planner.forecast import BASELINES, FORECASTERS, forecast, method_named
from planner.forecast.base import DAY_S, WEEK_S
from planner.forecast.to_workload import workload_block
from planner.history.series import HistorySeries
from planner.workload import Workload

MAX_FOLDS = 52  # a year of weekly origins; the oldest are dropped beyond it
MIN_TRAIN_WEEKS = 2
MAX_SPAN_S = 366 * DAY_S  # the longest first origin, step or tested span


@dataclass(frozen=True)
class Origins:
    """Where folds start, in seconds: the first origin after `min_train_s` of history, then every
    `step_s`; each fold tests the `test_s` after its origin (the last fold ends by the history's
    end). Each is a whole number of buckets, 1 bucket .. `MAX_SPAN_S`."""

    step_s: float = WEEK_S
    test_s: float = WEEK_S
    min_train_s: float = MIN_TRAIN_WEEKS * WEEK_S

    def in_buckets(self, bucket_s: float) -> tuple[int, int, int]:
        out = []
        for name, value in (("--origin-step", self.step_s), ("--test-span", self.test_s),
                            ("--min-train", self.min_train_s)):  # fmt: skip
            k = round(value / bucket_s)
            if not (bucket_s <= value <= MAX_SPAN_S and abs(k * bucket_s - value) < 1e-6 * value):
                raise InvalidInput(
                    name, f"must be a whole number of {bucket_s:g} s buckets up to 366 days, got {value:g} s"
                )
            out.append(k)
        return out[0], out[1], out[2]

    def folds(self, n_buckets: int, bucket_s: float) -> list[int]:
        """The origins (bucket indices), the last `MAX_FOLDS`; refused when there is none."""
        step, test, first = self.in_buckets(bucket_s)
        if first + test > n_buckets:
            raise InvalidInput(
                "history",
                f"the backtest fits on at least {first} buckets and tests on the next {test}: it needs "
                f"{first + test} buckets, the history has {n_buckets}",
            )
        return list(range(first, n_buckets - test + 1, step))[-MAX_FOLDS:]


@dataclass
class Score:
    method: str
    quantile: float
    folds: int = 0
    plans_failed: int = 0
    gpu_hours: float = 0.0
    hours_at_risk: float = 0.0
    usd: float = 0.0
    tokens: float = 0.0
    # per fold: its origin (bucket index), the planned quantile's forecast and the plan's capacity
    # (requests/s per tested bucket; capacity None for a failed plan): the report's figure
    timeline: list[dict[str, Any]] = field(default_factory=list)

    @property
    def usd_per_million_tokens(self) -> float | None:
        return self.usd / self.tokens * 1e6 if self.tokens > 0 else None

    def as_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["usd_per_million_tokens"] = self.usd_per_million_tokens
        return d


def _capacity_per_bucket(report: Any, n: int) -> np.ndarray:
    by_role: dict[str, np.ndarray] = {}
    for d in report.deployments:
        cap = np.asarray(d.replicas_by_bucket[:n], dtype=np.float64) * d.requests_per_s_per_replica
        by_role[d.role] = by_role.get(d.role, np.zeros(n)) + cap
    colocated = by_role.get("colocated", np.zeros(n))
    if "prefill" in by_role or "decode" in by_role:
        colocated = colocated + np.minimum(
            by_role.get("prefill", np.zeros(n)), by_role.get("decode", np.zeros(n))
        )
    return colocated


def score_plan(
    report: Any, actual_per_s: Sequence[float | None], bucket_s: float, into: Score
) -> np.ndarray | None:
    """Add one plan's GPU-hours, dollars, hours at risk and served tokens against `actual_per_s`;
    the plan's capacity per bucket (requests/s), None for a plan with no answer."""
    n = len(actual_per_s)
    if report.status not in ("OPTIMAL", "FEASIBLE"):
        into.plans_failed += 1
        return None
    hours = bucket_s / 3600.0
    into.folds += 1
    into.gpu_hours += sum(b.gpus for b in report.buckets[:n]) * hours
    into.usd += sum(b.usd_per_hour for b in report.buckets[:n]) * hours
    capacity = _capacity_per_bucket(report, n)
    tokens_per_request = report.workload.mean_input_tokens + report.workload.mean_output_tokens
    for i, rate in enumerate(actual_per_s):
        if rate is None:
            continue
        if rate > capacity[i] * (1 + 1e-9):
            into.hours_at_risk += hours
        into.tokens += rate * bucket_s * tokens_per_request
    return capacity


def backtest(
    series: HistorySeries,
    plan_request: Mapping[str, Any],
    *,
    methods: Sequence[str],
    quantiles: Sequence[float],
    base_dir: Path | None = None,
    origins: Origins | None = None,
) -> list[Score]:
    """Scores per method x quantile over every fold (module docstring)."""
    for m in methods:
        method_named(m, "--methods")
    origins = origins or Origins()
    _, test, _ = origins.in_buckets(series.bucket_s)
    scores = {(m, q): Score(m, q) for m in methods for q in quantiles}
    plans: dict[str, Any] = {}  # one plan per distinct workload (a baseline's quantiles share it)
    rates = series.rates_per_s()
    for origin in origins.folds(len(series.requests), series.bucket_s):
        train = _head(series, origin)
        actual = rates[origin : origin + test]
        for m in methods:
            fc = forecast(train, horizon_buckets=test, quantiles=quantiles, method=m)
            for q in quantiles:
                report = _plan(fc, q, train, plan_request, base_dir, plans)
                capacity = score_plan(report, actual, series.bucket_s, scores[(m, q)])
                scores[(m, q)].timeline.append(
                    {
                        "origin_bucket": origin,
                        "forecast_per_s": [round(float(x), 4) for x in fc.quantiles_per_s[q]],
                        "capacity_per_s": None
                        if capacity is None
                        else [round(float(x), 4) for x in capacity],
                    }
                )
    return list(scores.values())


def _head(series: HistorySeries, n: int) -> HistorySeries:
    """The first `n` buckets: what a fold may fit on."""
    return series.model_copy(
        update={
            "requests": series.requests[:n],
            "lengths": None if series.lengths is None else series.lengths[:n],
            "gap_cv2": None if series.gap_cv2 is None else series.gap_cv2[:n],
        }
    )


def _plan(
    fc: Any,
    q: float,
    train: HistorySeries,
    plan_request: Mapping[str, Any],
    base_dir: Path | None,
    plans: dict[str, Any],
) -> Any:
    from planner import api

    block, _ = workload_block(fc, q, train, name="backtest")
    request = with_workload(plan_request, block)
    key = json.dumps(request, sort_keys=True)
    if key not in plans:
        plans[key] = api.plan(request, base_dir=base_dir, workers=1)
    return plans[key]


def as_json(series: HistorySeries, scores: Sequence[Score]) -> dict[str, Any]:
    """The backtest as `capplan forecast --backtest --json` prints it and `capplan report
    --backtest` reads it: the history's observed rates (None: unobserved) and each score."""
    return {
        "source": series.source,
        "start_unix_s": series.start_unix_s,
        "bucket_s": series.bucket_s,
        "actual_per_s": [None if r is None else round(r, 4) for r in series.rates_per_s()],
        "scores": [s.as_json() for s in scores],
    }


def with_workload(plan_request: Mapping[str, Any], block: Mapping[str, Any]) -> dict[str, Any]:
    """The plan file with its workload's arrivals (and lengths the history has) replaced: of a
    trace or history workload only the keys a plain workload also has are kept (its name,
    prefix-cache hit fraction, endpoint, lengths), the trace or history itself goes."""
    request = dict(plan_request)
    workload = {k: v for k, v in dict(request.get("workload") or {}).items() if k in Workload.model_fields}
    workload.update(block)
    request["workload"] = workload
    return request


DEFAULT_METHODS = tuple(FORECASTERS)
__all__ = [
    "BASELINES",
    "DEFAULT_METHODS",
    "Origins",
    "Score",
    "as_json",
    "backtest",
    "score_plan",
    "with_workload",
]
