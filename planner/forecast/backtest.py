"""Backtest in dollars (`capplan forecast --backtest`): a rolling origin over the history. For fold
k (k = 2, 3, ... whole weeks), each forecaster is fitted on weeks 1..k and forecasts week k + 1;
each forecast quantile becomes a workload, the real planner (`planner.api.plan`, in this
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
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from planner.errors import InvalidInput
from planner.forecast import BASELINES, FORECASTERS, forecast, method_named
from planner.forecast.base import WEEK_S
from planner.forecast.to_workload import workload_block
from planner.history.series import HistorySeries

MAX_FOLDS = 52  # a year of weekly origins; the oldest are dropped beyond it
MIN_TRAIN_WEEKS = 2


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


def score_plan(report: Any, actual_per_s: Sequence[float | None], bucket_s: float, into: Score) -> None:
    """Add one plan's GPU-hours, dollars, hours at risk and served tokens against `actual_per_s`."""
    n = len(actual_per_s)
    if report.status not in ("OPTIMAL", "FEASIBLE"):
        into.plans_failed += 1
        return
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


def backtest(
    series: HistorySeries,
    plan_request: Mapping[str, Any],
    *,
    methods: Sequence[str],
    quantiles: Sequence[float],
    base_dir: Path | None = None,
) -> list[Score]:
    """Scores per method x quantile over every fold (module docstring)."""
    from planner import api

    for m in methods:
        method_named(m, "--methods")
    week = round(WEEK_S / series.bucket_s)
    n_weeks = len(series.requests) // week
    if n_weeks < MIN_TRAIN_WEEKS + 1:
        raise InvalidInput(
            "history",
            f"the backtest fits on {MIN_TRAIN_WEEKS} weeks and tests on the next: it needs at least "
            f"{(MIN_TRAIN_WEEKS + 1) * week} buckets, the history has {len(series.requests)}",
        )
    folds = list(range(MIN_TRAIN_WEEKS, n_weeks))[-MAX_FOLDS:]
    scores = {(m, q): Score(m, q) for m in methods for q in quantiles}
    plans: dict[str, Any] = {}  # one plan per distinct workload (a baseline's quantiles share it)
    for k in folds:
        train = series.model_copy(
            update={
                "requests": series.requests[: k * week],
                "lengths": None if series.lengths is None else series.lengths[: k * week],
                "gap_cv2": None if series.gap_cv2 is None else series.gap_cv2[: k * week],
            }
        )
        actual = series.rates_per_s()[k * week : (k + 1) * week]
        for m in methods:
            fc = forecast(train, horizon_buckets=week, quantiles=quantiles, method=m)
            for q in quantiles:
                block, _ = workload_block(fc, q, train, name="backtest")
                request = with_workload(plan_request, block)
                key = json.dumps(request, sort_keys=True)
                if key not in plans:
                    plans[key] = api.plan(request, base_dir=base_dir, workers=1)
                score_plan(plans[key], actual, series.bucket_s, scores[(m, q)])
    return list(scores.values())


def with_workload(plan_request: Mapping[str, Any], block: Mapping[str, Any]) -> dict[str, Any]:
    """The plan file with its workload's arrivals (and lengths the history has) replaced."""
    request = dict(plan_request)
    workload = dict(request.get("workload") or {})
    workload.pop("trace", None)
    workload.update(block)
    request["workload"] = workload
    return request


DEFAULT_METHODS = tuple(FORECASTERS)
__all__ = ["BASELINES", "DEFAULT_METHODS", "Score", "backtest", "score_plan", "with_workload"]
