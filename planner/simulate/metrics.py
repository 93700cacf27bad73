"""The result of a simulation (each part with `to_dict()` for JSON) and its goodput; the metrics
it is built from are in planner/simulate/itl_store.py (percentiles, ITL) and
planner/simulate/minute_series.py (per-minute series), re-exported here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from planner.simulate.itl_store import (
    PERCENTILES,
    FloatArray,
    IntArray,
    ItlRecorder,
    LatencyStats,
    itl_stats,
    json_float,
    weighted_percentiles,
)
from planner.simulate.minute_series import (
    MAX_SIM_SPAN_S,
    MINUTE_S,
    MinuteAccumulator,
    MinuteSeries,
    MinuteTotals,
    span_error,
)

__all__ = [
    "MAX_SIM_SPAN_S",
    "MINUTE_S",
    "PERCENTILES",
    "FloatArray",
    "Goodput",
    "IntArray",
    "ItlRecorder",
    "LatencyStats",
    "MinuteAccumulator",
    "MinuteSeries",
    "MinuteTotals",
    "ReplicaStats",
    "SimResult",
    "goodput",
    "itl_stats",
    "span_error",
    "weighted_percentiles",
]


# --- results -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ReplicaStats:
    """One replica. KV use is measured after each step's scheduling, like
    `vllm:kv_cache_usage_perc`; the queue length counts waiting requests (incl. preempted)."""

    role: str  # "colocated" | "prefill" | "decode"
    index: int
    requests: int
    steps: int
    busy_fraction: float
    preemptions: int
    peak_kv_blocks: int
    peak_kv_fraction: float
    max_queue_length: int

    def to_dict(self) -> dict[str, Any]:
        return {k: json_float(v) if isinstance(v, float) else v for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class Goodput:
    slo: dict[str, float | None]
    good_requests: int
    goodput_rps: float
    good_fraction: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "slo": dict(self.slo),
            "good_requests": self.good_requests,
            "goodput_rps": json_float(self.goodput_rps),
            "good_fraction": json_float(self.good_fraction),
        }


@dataclass(frozen=True)
class SimResult:
    """What one simulation measured. Per-request arrays (aligned with the input order) are kept
    as numpy arrays; `to_dict(include_requests=True)` adds them as lists."""

    mode: str  # "colocated" | "disaggregated"
    budget_reading: str  # "v1": max_num_batched_tokens covers decodes and prefill chunks
    requests: int
    completed: int
    duration_s: float
    request_throughput_rps: float
    output_tokens_per_s: float
    ttft: LatencyStats
    itl: LatencyStats
    tpot: LatencyStats
    e2el: LatencyStats
    goodput: Goodput | None
    preemptions: int
    peak_kv_blocks: int
    peak_kv_fraction: float
    max_queue_length: int
    replicas: list[ReplicaStats]
    series: MinuteSeries
    ttft_s: FloatArray = field(repr=False)
    e2el_s: FloatArray = field(repr=False)
    tpot_s: FloatArray = field(repr=False)
    first_token_s: FloatArray = field(repr=False)
    finish_s: FloatArray = field(repr=False)

    def to_dict(self, include_requests: bool = False) -> dict[str, Any]:
        d: dict[str, Any] = {
            "mode": self.mode,
            "budget_reading": self.budget_reading,
            "requests": self.requests,
            "completed": self.completed,
            "duration_s": json_float(self.duration_s),
            "request_throughput_rps": json_float(self.request_throughput_rps),
            "output_tokens_per_s": json_float(self.output_tokens_per_s),
            "ttft": self.ttft.to_dict(),
            "itl": self.itl.to_dict(),
            "tpot": self.tpot.to_dict(),
            "e2el": self.e2el.to_dict(),
            "goodput": None if self.goodput is None else self.goodput.to_dict(),
            "preemptions": self.preemptions,
            "peak_kv_blocks": self.peak_kv_blocks,
            "peak_kv_fraction": json_float(self.peak_kv_fraction),
            "max_queue_length": self.max_queue_length,
            "replicas": [r.to_dict() for r in self.replicas],
            "series": self.series.to_dict(),
        }
        if include_requests:
            d["per_request"] = {
                "ttft_s": [json_float(float(x)) for x in self.ttft_s],
                "e2el_s": [json_float(float(x)) for x in self.e2el_s],
                "tpot_s": [json_float(float(x)) for x in self.tpot_s],
                "first_token_s": [json_float(float(x)) for x in self.first_token_s],
                "finish_s": [json_float(float(x)) for x in self.finish_s],
            }
        return d


def goodput(
    ttft_s: FloatArray, tpot_s: FloatArray, e2el_s: FloatArray, slo: Any, duration_s: float
) -> Goodput:
    """Requests meeting every given objective (as `vllm bench serve --goodput`)."""
    good = np.ones(ttft_s.shape, dtype=bool)
    limits = slo.goodput_limits_s()  # planner.slo.Slo: per-request thresholds, vLLM's names
    for name, arr in (("ttft_s", ttft_s), ("tpot_s", tpot_s), ("e2el_s", e2el_s)):
        limit = limits[name]
        if limit is not None:
            good &= arr <= limit
    count = int(good.sum())
    return Goodput(
        slo=limits,
        good_requests=count,
        goodput_rps=count / duration_s if duration_s > 0 else math.nan,
        good_fraction=count / ttft_s.size if ttft_s.size else math.nan,
    )
