"""`ServingRun`: one measured vLLM serving run, whatever file it was read from.

Every reader in this package (the corpus format, `vllm bench serve --save-result` JSON, GuideLLM
reports) normalizes into this one shape so that `capplan validate` and `capplan calibrate
--serving` compare a prediction with a measurement without knowing where it came from. Times are
in seconds inside (the files say milliseconds; the names here carry `_s`), rates in requests or
tokens per second. A setting the source does not state is None: for a server flag that means
"the release's default", never an estimate.
"""

from __future__ import annotations

import math
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from planner.catalog.gpus import gpu_names

__all__ = [
    "ENDPOINTS",
    "MODELLED_FROM_RELEASE",
    "LatencySummary",
    "Load",
    "Measured",
    "PerRequest",
    "Promised",
    "ReleaseEra",
    "ServingRun",
    "Settings",
]

Endpoint = Literal["/v1/completions", "/v1/chat/completions"]
ENDPOINTS: tuple[str, ...] = ("/v1/completions", "/v1/chat/completions")
MAX_LATENCY_S = 86_400.0  # a day: a latency past it is a unit mistake, not a measurement
MAX_REQUESTS = 10_000_000

ReleaseEra = Literal["modelled", "pre-0.6"]
# The first release the built-in profiles model (they are fitted on V1-era runs, 0.11 to 0.14).
# vLLM 0.6.0 (2024-09-04) moved the HTTP API server into its own process and added multi-step
# scheduling and the async output processor; vLLM's release post ("vLLM v0.6.0: 2.7x Throughput
# Improvement and 5x Latency Reduction", blog.vllm.ai 2024-09-05) profiled Llama 3 8B on one H100
# under 0.5.x: the API server 33% of the time, scheduling 29%, the GPU 38%, and measured 2.7x the
# throughput and 5x less TPOT on ShareGPT from 0.5.3 to 0.6.0. Costs of that size are in no
# built-in profile, so runs of earlier releases are scored apart (docs/measurements.md).
MODELLED_FROM_RELEASE = (0, 6)
_RELEASE = re.compile(r"v?(\d+)\.(\d+)")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", ser_json_inf_nan="strings")


class Settings(_Frozen):
    """The server the run was taken on: the model, the GPU and vLLM's flags (None: the
    release's default, or not stated)."""

    model: str = Field(min_length=1, max_length=256)
    gpu: str | None = None  # a capplan catalog name (planner/catalog/data/gpus)
    tensor_parallel_size: int = Field(default=1, ge=1, le=64)
    weight_dtype: Literal["bf16", "fp8"] = "bf16"
    kv_cache_dtype: Literal["auto", "fp8"] = "auto"
    max_num_seqs: int | None = Field(default=None, ge=1, le=65_536)
    max_num_batched_tokens: int | None = Field(default=None, ge=1, le=4_194_304)
    max_model_len: int | None = Field(default=None, ge=1, le=16_777_216)
    gpu_memory_utilization: float | None = Field(default=None, gt=0.0, le=1.0)
    enable_prefix_caching: bool | None = None
    vllm_version: str | None = Field(default=None, max_length=64)
    endpoint: Endpoint | None = None

    @field_validator("gpu")
    @classmethod
    def _known_gpu(cls, v: str | None) -> str | None:
        if v is not None and v not in gpu_names():
            raise ValueError(f"unknown GPU {v!r}; capplan's catalog has {', '.join(gpu_names())}")
        return v


class Load(_Frozen):
    """What the benchmark client sent. `request_rate_rps` is inf for "all at once" (vLLM's
    `--request-rate inf`, GuideLLM's synchronous/concurrent/throughput strategies);
    `burstiness` is the gamma shape of the inter-arrival times (1: Poisson; inf: evenly spaced,
    GuideLLM's `constant`); `max_concurrency` None: no cap."""

    dataset: str | None = Field(default=None, max_length=64)
    input_len: int | None = Field(default=None, ge=1, le=16_777_216)
    output_len: int | None = Field(default=None, ge=1, le=16_777_216)
    range_ratio: float | None = Field(default=None, ge=0.0, le=1.0)
    num_prompts: int | None = Field(default=None, ge=1, le=MAX_REQUESTS)
    request_rate_rps: float = Field(default=math.inf, gt=0.0)
    burstiness: float = Field(default=1.0, gt=0.0)
    max_concurrency: int | None = Field(default=None, ge=1, le=1_000_000)

    @property
    def open_loop(self) -> bool:
        """Arrivals at a finite rate (else a burst, capped or not by max_concurrency)."""
        return math.isfinite(self.request_rate_rps)


class LatencySummary(_Frozen):
    """One latency figure over the run's successful requests, in seconds. `percentiles_s` maps a
    percentile (99.0, 99.9) to its value."""

    mean_s: float | None = Field(default=None, ge=0.0, le=MAX_LATENCY_S)
    median_s: float | None = Field(default=None, ge=0.0, le=MAX_LATENCY_S)
    std_s: float | None = Field(default=None, ge=0.0, le=MAX_LATENCY_S)
    percentiles_s: dict[float, float] = Field(default_factory=dict)

    @field_validator("percentiles_s")
    @classmethod
    def _in_range(cls, v: dict[float, float]) -> dict[float, float]:
        for p, value in v.items():
            if not 0.0 <= p <= 100.0:
                raise ValueError(f"percentile {p} is outside [0, 100]")
            if not (math.isfinite(value) and 0.0 <= value <= MAX_LATENCY_S):
                raise ValueError(f"p{p:g} is {value}; a latency is in [0, {MAX_LATENCY_S:g}] s")
        return dict(sorted(v.items()))

    def p(self, percentile: float) -> float | None:
        """The value at `percentile` (the median for 50 when no p50 was printed), or None."""
        if percentile in self.percentiles_s:
            return self.percentiles_s[percentile]
        return self.median_s if percentile == 50.0 else None


class PerRequest(_Frozen):
    """vLLM's `--save-detailed` arrays for the successful requests, in request order: seconds
    for times, tokens for lengths; `itls_s[i]` holds request i's gaps between tokens."""

    input_lens: list[int]
    output_lens: list[int]
    ttfts_s: list[float]
    itls_s: list[list[float]]


class Measured(_Frozen):
    """What the run measured. Throughputs are per second over `duration_s`."""

    duration_s: float | None = Field(default=None, gt=0.0)
    completed: int | None = Field(default=None, ge=0, le=MAX_REQUESTS)
    failed: int | None = Field(default=None, ge=0, le=MAX_REQUESTS)
    total_input_tokens: int | None = Field(default=None, ge=0)
    total_output_tokens: int | None = Field(default=None, ge=0)
    request_throughput_rps: float | None = Field(default=None, ge=0.0)
    output_throughput_tok_s: float | None = Field(default=None, ge=0.0)
    total_token_throughput_tok_s: float | None = Field(default=None, ge=0.0)
    ttft: LatencySummary | None = None
    tpot: LatencySummary | None = None
    itl: LatencySummary | None = None
    e2el: LatencySummary | None = None
    per_request: PerRequest | None = None


class Promised(_Frozen):
    """What the plan a bench checks promised (`capplan plan --emit bench` writes it as
    `capplan.*` metadata): the replica's role, its rate at the peak and its predicted latencies
    in seconds (None: the role has no such figure)."""

    role: Literal["colocated", "prefill", "decode"] | None = None
    rate_per_s: float | None = Field(default=None, gt=0.0)
    ttft_p50_s: float | None = Field(default=None, ge=0.0, le=MAX_LATENCY_S)
    ttft_p99_s: float | None = Field(default=None, ge=0.0, le=MAX_LATENCY_S)
    itl_p50_s: float | None = Field(default=None, ge=0.0, le=MAX_LATENCY_S)
    itl_p99_s: float | None = Field(default=None, ge=0.0, le=MAX_LATENCY_S)


class ServingRun(_Frozen):
    """One run: where it came from, the server, the load and what was measured."""

    id: str = Field(min_length=1, max_length=128)
    source: str = Field(max_length=1024)  # a file path or the published page's URL
    format: Literal["corpus", "vllm-bench", "guidellm"]
    where: str | None = None
    settings: Settings
    load: Load
    measured: Measured
    promised: Promised | None = None  # a bench emitted by `capplan plan --emit bench`
    notes: tuple[str, ...] = ()

    @property
    def mean_input_tokens(self) -> float | None:
        """Mean prompt length: the token total over completed requests, else the random length."""
        m = self.measured
        if m.total_input_tokens is not None and m.completed:
            return m.total_input_tokens / m.completed
        return None if self.load.input_len is None else float(self.load.input_len)

    @property
    def mean_output_tokens(self) -> float | None:
        """Mean generated length, as `mean_input_tokens`."""
        m = self.measured
        if m.total_output_tokens is not None and m.completed:
            return m.total_output_tokens / m.completed
        return None if self.load.output_len is None else float(self.load.output_len)

    @property
    def release_era(self) -> ReleaseEra:
        """`pre-0.6` for a run on a vLLM release before MODELLED_FROM_RELEASE (its CPU-side costs
        are outside the built-in profiles: scored, but apart from the target MAPE); `modelled`
        otherwise, a release not stated or not read as MAJOR.MINOR included."""
        m = _RELEASE.match(self.settings.vllm_version or "")
        if m is not None and (int(m.group(1)), int(m.group(2))) < MODELLED_FROM_RELEASE:
            return "pre-0.6"
        return "modelled"

    @property
    def saturation(self) -> bool:
        """A burst with no concurrency cap: scored on throughput (corpus format)."""
        return not self.load.open_loop and self.load.max_concurrency is None
