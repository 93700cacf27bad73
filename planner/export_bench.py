"""`capplan plan FILE --emit bench`: the `vllm bench serve` command that checks one replica of each
deployment of the plan at its peak load, against the plan's predictions there.

    from planner import api, export_bench
    print(export_bench.bench_commands(api.plan(request)))

What each command loads one replica with, all read from the plan's report:

* `--dataset-name random`. vLLM 0.11 builds each prompt as one `--random-prefix-len` P prefix
  shared by every prompt, then a random part whose length it draws uniformly from
  [floor(L (1 - r)), ceil(L (1 + r))], L = `--random-input-len`; the output length likewise
  around `--random-output-len`, with the same `--random-range-ratio` r
  (vllm/benchmarks/datasets.py `RandomDataset.sample` / `get_sampling_params`). So: P = the
  workload's prefix-cache hit fraction x its mean prompt (the shared prefix is what vLLM's prefix
  cache hits; it caches whole 16-token blocks, so up to 15 tokens of P miss), L = the mean
  prompt - P, the output length = the mean output (all rounded), and, as a uniform draw's p99 is
  L (1 + 0.98 r), r = (p99 prompt - P - L) / (0.98 L): the prompt p99 (the tail that sets TTFT
  p99 and the chunked-prefill load), capped below vLLM's limit of 1. The output p99 follows
  from the same r; the comment line prints both p99s the bench draws next to the workload's.
  Lost: every shape beyond mean and p99 (a uniform is not the workload's distribution), an
  output spread of its own, and a prompt tail past twice the mean (the cap).
* `--request-rate` = the replica's rate at the peak (`at_peak.requests_per_s_per_replica`) and
  `--burstiness` = 1/CV² of the gaps that replica sees: vLLM 0.11 draws gaps from a gamma of
  shape `burstiness` and mean 1/rate (vllm/benchmarks/serve.py `get_request`), CV² = 1/k. A
  replica taking `share` of a stream of gap CV² c (routed at random) sees 1 + (c - 1) share
  (planner/latency/model.py `per_replica_arrival_cv2`), the load the plan's `at_peak`
  predictions were made at (planner/plan/peak.py); share = the replica's rate / the peak demand.
  A single replica takes the whole stream: the workload's own burstiness.
* `--num-prompts` = max(rate x STEADY_S, SEQS_MULTIPLE x max_num_seqs), within
  [MIN_PROMPTS, MAX_PROMPTS]: long against the queue's relaxation, the first batch's fill-up at
  most a tenth of the samples, at least MIN_PROMPTS samples behind a p99, and a bounded run.
* `--ignore-eos` (each answer its drawn length: a model that stops early shortens the load),
  `--percentile-metrics ttft,tpot,itl --metric-percentiles 50,99 --save-result
  --result-filename`, and `--metadata` with the plan's settings and predictions
  (`capplan.*` keys, METADATA_KEYS), so the result file says what it checks.

Disaggregated plans: a prefill replica is benched alone with one output token (a request without
NixlConnector's kv_transfer_params is served as a plain one): its TTFT p50/p99 at its peak, less
the KV transfer the plan's TTFT adds; it cannot check ITL. A decode replica cannot be loaded
alone (a request sent straight to it is prefilled there), so its command goes through the P/D
proxy in front of it and enough prefill replicas to carry its rate: it checks ITL/TPOT p50/p99;
the TTFT it measures includes the prefill pool and the transfer, not this role's figure.
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING

from planner.errors import Infeasible
from planner.measurements.vllm_bench import EMITTED_METADATA_KEYS, METADATA_PREFIX
from planner.vllm_defaults import VLLM_RELEASE

if TYPE_CHECKING:
    from planner.schema.plan_report import PlanDeployment, PlanReport, PlanWorkload, PoolAtPeak

__all__ = [
    "METADATA_KEYS",
    "Lengths",
    "bench_argv",
    "bench_commands",
    "deployments_of",
    "lengths",
    "num_prompts",
    "range_ratio",
    "replica_burstiness",
]

STEADY_S = 300.0  # seconds of arrivals at the peak rate
SEQS_MULTIPLE = 10  # prompts per max_num_seqs: the first batch's fill-up is at most a tenth
MIN_PROMPTS = 500  # a p99 resting on at least 5 samples beyond it
MAX_PROMPTS = 10_000  # bounds the run
MAX_RANGE_RATIO = 0.99  # vLLM 0.11 refuses r >= 1 (RandomDataset.get_sampling_params)
UNIFORM_P99 = 0.98  # the p99 of uniform [L(1-r), L(1+r)] is L (1 + 0.98 r)
PERCENTILES = "50,99"
# The `--metadata` keys, in the order the values below are written: defined once, with the
# reader that takes them back (planner/measurements/vllm_bench.py).
METADATA_KEYS = tuple(METADATA_PREFIX + k for k in EMITTED_METADATA_KEYS)
NONE = "none"  # a metadata value the role has no figure for (prefill: ITL; decode: TTFT)


def _g(x: float) -> str:
    """Six significant digits: what the command carries and the metadata records."""
    return f"{x:.6g}"


@dataclass(frozen=True)
class Lengths:
    """The random dataset's lengths for a workload (module docstring): the shared prefix, the
    random part's and the output's centre, and the range ratio."""

    prefix_tokens: int
    input_tokens: int
    output_tokens: int
    range_ratio: float

    def p99(self, centre: int) -> float:
        """The p99 of a uniform draw around `centre` at this range ratio."""
        return centre * (1.0 + UNIFORM_P99 * self.range_ratio)


def range_ratio(centre_tokens: int, p99_above_tokens: float) -> float:
    """The `--random-range-ratio` whose uniform draw around `centre_tokens` has
    `p99_above_tokens` as its p99 (0: no spread), capped at MAX_RANGE_RATIO; 3 decimals."""
    if centre_tokens <= 0 or p99_above_tokens <= centre_tokens:
        return 0.0
    return round(min(MAX_RANGE_RATIO, (p99_above_tokens / centre_tokens - 1.0) / UNIFORM_P99), 3)


def lengths(wl: PlanWorkload) -> Lengths:
    """The workload's prompt and output lengths as vLLM's random dataset draws them."""
    prompt = max(1, round(wl.mean_input_tokens))
    prefix = min(prompt - 1, round(wl.prefix_cache_hit_fraction * prompt))
    body = prompt - prefix
    r = range_ratio(body, wl.p99_input_tokens - prefix)
    return Lengths(prefix, body, max(1, round(wl.mean_output_tokens)), r)


def replica_burstiness(stream_burstiness: float, share: float) -> float:
    """vLLM's gamma shape for one replica taking `share` (0 < share <= 1) of a stream of shape
    `stream_burstiness`: 1 / (1 + (1/k - 1) share) (planner/latency/model.py)."""
    share = min(1.0, max(share, 1e-12))
    return 1.0 / (1.0 + (1.0 / stream_burstiness - 1.0) * share)


def num_prompts(rate_per_s: float, max_num_seqs: int) -> int:
    """max(rate x STEADY_S, SEQS_MULTIPLE x max_num_seqs) within [MIN_PROMPTS, MAX_PROMPTS]."""
    n = max(math.ceil(rate_per_s * STEADY_S), SEQS_MULTIPLE * max_num_seqs)
    return min(MAX_PROMPTS, max(MIN_PROMPTS, n))


def deployments_of(report: PlanReport) -> list[PlanDeployment]:
    """The plan's deployments; a plan without any (infeasible) has nothing to emit."""
    if not report.deployments:
        why = report.infeasibility.reason if report.infeasibility is not None else "no deployment"
        raise Infeasible(f"the plan is {report.status}: {why}; nothing to emit")
    return list(report.deployments)


def _flag(dep: PlanDeployment, name: str) -> str:
    args = dep.vllm_args
    return args[args.index(name) + 1] if name in args else NONE


def _metadata(report: PlanReport, dep: PlanDeployment, at: PoolAtPeak) -> list[str]:
    def ms(x: float | None) -> str:
        return NONE if x is None else _g(x)

    values = (
        dep.gpu,
        report.model,
        str(dep.tensor_parallel_size),
        str(dep.max_num_seqs),
        str(dep.max_num_batched_tokens),
        _flag(dep, "--max-model-len"),
        dep.weight_dtype,
        "fp8" if dep.kv_dtype == "fp8" else "auto",
        VLLM_RELEASE,
        dep.role,
        ms(at.ttft_p99_ms),
        ms(at.itl_p99_ms),
        ms(at.ttft_p50_ms),
        ms(at.itl_p50_ms),
        _g(at.requests_per_s_per_replica),
    )
    return [f"{k}={v}" for k, v in zip(METADATA_KEYS, values, strict=True)]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def bench_argv(report: PlanReport, dep: PlanDeployment) -> list[str]:
    """The `vllm bench serve` argv for one replica of `dep` at its peak load (module docstring).
    Needs the deployment's `at_peak` with a positive rate."""
    at = dep.at_peak
    if at is None or not at.requests_per_s_per_replica > 0:
        raise Infeasible(f"deployment {dep.id} has no load at the peak bucket; nothing to bench")
    wl = report.workload
    demand = report.predicted.requests_per_s if report.predicted is not None else wl.peak_requests_per_s
    rate = at.requests_per_s_per_replica
    k = replica_burstiness(wl.burstiness, rate / demand if demand > 0 else 1.0)
    ln = lengths(wl)
    out_len = 1 if dep.role == "prefill" else ln.output_tokens
    return [
        "vllm", "bench", "serve",
        "--backend", "vllm",
        "--endpoint", "/v1/completions",
        "--model", report.model,
        "--dataset-name", "random",
        "--random-prefix-len", str(ln.prefix_tokens),
        "--random-input-len", str(ln.input_tokens),
        "--random-output-len", str(out_len),
        "--random-range-ratio", f"{ln.range_ratio:g}",
        "--ignore-eos",
        "--request-rate", _g(rate),
        "--burstiness", _g(k),
        "--num-prompts", str(num_prompts(rate, dep.max_num_seqs)),
        "--seed", "0",
        "--percentile-metrics", "ttft,tpot,itl",
        "--metric-percentiles", PERCENTILES,
        "--save-result",
        "--result-filename", f"capplan-bench-{_slug(dep.id)}.json",
        "--metadata", *_metadata(report, dep, at),
    ]  # fmt: skip


def _comment(report: PlanReport, dep: PlanDeployment) -> list[str]:
    wl, at = report.workload, dep.at_peak
    assert at is not None
    ln = lengths(wl)
    output = (
        "output 1 token (what the P/D proxy asks of a prefill replica)"
        if dep.role == "prefill"
        else f"output p99 {ln.p99(ln.output_tokens):,.0f} (workload {wl.p99_output_tokens:,.0f})"
    )
    lines = [
        f"# {dep.id}: one {dep.role} replica of {dep.replicas_peak} at the peak on {dep.gpu} x TP"
        f"{dep.tensor_parallel_size}{f' x PP{dep.pipeline_parallel_size}' if dep.pipeline_parallel_size else ''}, "
        f"{_g(at.requests_per_s_per_replica)} req/s",
        f"# lengths: a {ln.prefix_tokens}-token shared prefix (prefix-cache hits {wl.prefix_cache_hit_fraction:.3g}), "
        f"then uniform at range ratio {ln.range_ratio:g}: prompt p99 "
        f"{ln.prefix_tokens + ln.p99(ln.input_tokens):,.0f} (workload {wl.p99_input_tokens:,.0f}), {output}; "
        "beyond mean and p99 the shape is not the workload's",
    ]
    if dep.role == "prefill":
        lines.append(
            "# prefill alone (run against one prefill replica, no proxy), one output token: checks TTFT "
            "p50/p99 less the KV transfer; no ITL"
        )
    elif dep.role == "decode":
        lines.append(
            "# decode: run through the P/D proxy in front of this decode replica and prefill replicas enough for "
            "this rate; checks ITL/TPOT p50/p99; its TTFT includes prefill and transfer (not this role's figure)"
        )
    return lines


def bench_commands(report: PlanReport) -> str:
    """One `vllm bench serve` line per deployment with load at the peak, each after comments
    naming the replica, its rate and what the length draw keeps of the workload."""
    lines = []
    for dep in deployments_of(report):
        if dep.at_peak is None or not dep.at_peak.requests_per_s_per_replica > 0:
            lines.append(f"# {dep.id}: no load at the peak bucket (no replica there); nothing to bench")
            continue
        lines += _comment(report, dep)
        lines.append(shlex.join(bench_argv(report, dep)))
    return "\n".join(lines) + "\n"
