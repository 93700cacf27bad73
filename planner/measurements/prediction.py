"""capplan's prediction for a measured serving run: the same model, GPU, TP, dtypes and vLLM
flags, the same lengths and the same load, through the analytic latency model or the simulator.

    from planner.measurements import builtin_corpus
    from planner.measurements.prediction import predict_run
    p = predict_run(builtin_corpus()[0], "auto")
    p.ttft_p50_s, p.tpot_p50_s, p.output_throughput_tok_s

The forward model of `capplan validate` and `capplan calibrate --serving`: `run_workload(run)`
builds the deployment and workload a run stands for, `predict_run(run, profile)` evaluates them.

What a run becomes (docs/measurements.md, "What capplan predicts for a run"):

* Server: the run's flags; a flag the run does not state (None) is the release's default, as
  `Deployment.resolve` fills it (planner/vllm_defaults.py). `kv_cache_dtype: auto` is the model's
  dtype: bf16 KV even under fp8 weights (vLLM's `auto`).
* Lengths: `dataset: random` with input/output length L and range ratio r: uniform over
  [L(1 - r), L(1 + r)] (vLLM's RandomDataset), a constant L when r is 0 or unstated; a run that
  kept its per-request lengths (`--save-detailed`): those, exactly; a `sharegpt` burst (load
  `saturation`): the shipped ShareGPT length sample (planner/data/lengths/, the requests of one
  published burst) scaled to the run's mean lengths (token totals over completed requests), so
  the burst's longest responses are there (its duration depends on them: planner/measurements/
  burst.py); any other run: a constant at the run's mean lengths. An open or closed loop keeps
  the means: its TTFT p99 is set by the longest of its own few hundred prompts, which a stand-in
  sample of other prompts (another tokenizer) does not know (with the sample, the H200 ShareGPT
  open loops' TTFT p99 came out 77-91% high, against 20% at the means).
* Load: `open` (a finite rate, no binding cap): gamma gaps at the rate, CV^2 = 1/burstiness;
  `closed` (`max_concurrency` C below `num_prompts`): C clients in a closed loop, with the rate
  as a cap when finite (both limits apply, planner/closed_loop.py); `saturation` (rate inf and
  no cap, or a cap >= num_prompts): a burst of num_prompts requests, written as a closed loop of
  num_prompts clients (each sends one). A saturation run is scored on throughput only: the
  analytic model's figure is that closed loop solved at num_prompts clients (planner/closed_loop.py:
  N requests in flight for the burst's life, so a burst smaller than what the engine holds runs at
  its own batch, not at the capacity; a burst that fills the engine gets the capacity, its max
  stable rate x the mean output), plus the burst's tail: the last responses finishing in a
  thinning batch (planner/measurements/burst.py); the simulator runs the burst itself
  (num_prompts requests at t = 0, a finite run that drains).
* Figures: TTFT p50/p99, TPOT p50, ITL p50/p99, output throughput (tokens/s). The analytic
  TPOT p50 is the mean decode step (a request's TPOT averages its steps); its throughput is the
  served rate x the mean output. The front-end cost is the profile's `request_overhead_s`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from planner.costmodel.profile import Endpoint, Profile
from planner.deployment import Deployment
from planner.errors import InvalidInput
from planner.measurements.burst import burst_tail_s
from planner.measurements.dataset_lengths import dataset_lengths
from planner.workload import MAX_SAMPLES, Arrivals, Histogram, LengthDistribution, Workload

if TYPE_CHECKING:
    from planner.deployment import ResolvedDeployment
    from planner.measurements.serving_run import ServingRun
    from planner.simulate.metrics import SimResult

__all__ = ["LoadKind", "Method", "RunInputs", "RunPrediction", "predict_run", "run_workload"]

LoadKind = Literal["open", "closed", "saturation"]
Method = Literal["analytic", "simulator"]
DEFAULT_PROMPTS = 1_000  # a run that does not say how many prompts it sent
MAX_SIMULATED_PROMPTS = 5_000  # the simulator's share of a long run: bounds validate's time
SEED = 0


@dataclass(frozen=True)
class RunInputs:
    """What a run stands for in capplan's terms: one replica of the deployment, the workload
    (a closed loop for `closed` and `saturation`), the load kind and the prompts sent."""

    deployment: Deployment
    workload: Workload
    load: LoadKind
    num_prompts: int


@dataclass(frozen=True)
class RunPrediction:
    """capplan's figures for one run (seconds, tokens/s); None where the method has no figure
    (an unstable open loop has no latency; a saturation run is scored on throughput)."""

    run_id: str
    gpu: str
    model: str
    method: Method
    load: LoadKind
    profile: str
    requests_per_s: float | None
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    tpot_p50_s: float | None
    itl_p50_s: float | None
    itl_p99_s: float | None
    output_throughput_tok_s: float | None
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["notes"] = list(self.notes)
        return d


def _where(run: ServingRun, field: str) -> str:
    return f"{run.source}: {run.id}.{field}"


def _lengths(
    run: ServingRun, centre: int | None, mean: float | None, field: str, burst: bool
) -> LengthDistribution:
    """The run's own per-request lengths where it kept them; vLLM's random draw around `centre`
    (uniform at the range ratio); for a burst, the dataset's shipped length sample at the run's
    mean; else the mean (module docstring)."""
    side: Literal["input", "output"] = "input" if field == "input_len" else "output"
    detailed = run.measured.per_request
    if detailed is not None:
        lens = detailed.input_lens if side == "input" else detailed.output_lens
        if lens:
            return LengthDistribution(samples=tuple(max(1, int(x)) for x in lens[:MAX_SAMPLES]))
    r = run.load.range_ratio or 0.0
    if run.load.dataset == "random" and centre is not None:
        if r <= 0.0:
            return LengthDistribution(constant=centre)
        low = max(1, math.floor(centre * (1.0 - r)))
        high = math.ceil(centre * (1.0 + r)) + 1  # vLLM draws integers in [low, high - 1]
        return LengthDistribution(histogram=Histogram(edges=(low, high), weights=(1.0,)))
    if mean is None:
        raise InvalidInput(
            _where(run, field), "unknown: the run states neither a random length nor token totals"
        )
    shaped = dataset_lengths(run.load.dataset, side, mean) if burst else None
    return shaped if shaped is not None else LengthDistribution(constant=max(1, round(mean)))


def _load_kind(run: ServingRun, prompts: int) -> LoadKind:
    cap = run.load.max_concurrency
    if cap is not None and cap < prompts:
        return "closed"
    return "open" if run.load.open_loop else "saturation"


def _arrivals(run: ServingRun, kind: LoadKind, prompts: int) -> Arrivals:
    ld = run.load
    rate = ld.request_rate_rps if math.isfinite(ld.request_rate_rps) else None
    if kind == "open":
        return Arrivals(requests_per_s=rate, burstiness=ld.burstiness)
    if kind == "closed":
        return Arrivals(concurrency=ld.max_concurrency, requests_per_s=rate, burstiness=ld.burstiness)
    return Arrivals(concurrency=prompts)  # a burst: every prompt's client sends it at once


def _deployment(run: ServingRun) -> Deployment:
    s = run.settings
    if s.gpu is None:
        raise InvalidInput(_where(run, "gpu"), "unknown: capplan predicts for a catalog GPU")
    args: dict[str, Any] = {
        "model": s.model,
        "gpu": s.gpu,
        "tp": s.tensor_parallel_size,
        "weight_dtype": s.weight_dtype,
        "kv_dtype": "fp8" if s.kv_cache_dtype == "fp8" else "bf16",
        "max_num_seqs": s.max_num_seqs,
        "max_num_batched_tokens": s.max_num_batched_tokens,
        "max_model_len": s.max_model_len,
    }
    if s.gpu_memory_utilization is not None:
        args["gpu_memory_utilization"] = s.gpu_memory_utilization
    return Deployment(**args)


def endpoint_of(run: ServingRun) -> Endpoint:
    """The run's endpoint kind: /v1/completions is `completions`, anything else (the chat route,
    or unstated) `chat`, the workload's default."""
    return "completions" if run.settings.endpoint == "/v1/completions" else "chat"


def run_workload(run: ServingRun) -> RunInputs:
    """The deployment (one replica) and workload a run stands for (module docstring)."""
    prompts = run.load.num_prompts or DEFAULT_PROMPTS
    kind = _load_kind(run, prompts)
    ld = run.load
    workload = Workload(
        name=run.id,
        arrivals=_arrivals(run, kind, prompts),
        input_tokens=_lengths(run, ld.input_len, run.mean_input_tokens, "input_len", kind == "saturation"),
        output_tokens=_lengths(run, ld.output_len, run.mean_output_tokens, "output_len", kind == "saturation"),
        endpoint=endpoint_of(run),
    )
    return RunInputs(_deployment(run), workload, kind, prompts)


def _resolve(run: ServingRun, inputs: RunInputs, profile: Profile | str) -> ResolvedDeployment:
    if isinstance(profile, str):
        from planner.costmodel.profiles import resolve_profile

        assert run.settings.gpu is not None
        profile = resolve_profile(profile, run.settings.gpu, "profile")
    try:  # the run's endpoint picks the front end (Profile.for_endpoint), as the workload's does in api
        return inputs.deployment.resolve(profile.for_endpoint(inputs.workload.endpoint))
    except InvalidInput as exc:
        raise InvalidInput(_where(run, exc.field), exc.reason) from None


def _rated(wl: Workload) -> Workload:
    """The workload's lengths at a nominal Poisson rate: what a capacity or a length draw needs
    of a burst (the rate itself plays no part)."""
    return wl.model_copy(update={"arrivals": Arrivals(requests_per_s=1.0)})


def _analytic(run: ServingRun, inputs: RunInputs, resolved: ResolvedDeployment) -> dict[str, Any]:
    from planner.closed_loop import solve_workload
    from planner.latency import LatencyModel, WorkloadStats

    wl = inputs.workload
    mean_out = float(wl.output_tokens.mean())
    if inputs.load == "saturation":  # the burst as a closed loop of num_prompts clients, and its tail
        loop, model = solve_workload(resolved, wl)
        replica = model.engines["colocated"].replica
        bulk_s = inputs.num_prompts / loop.requests_per_s
        tail_s = burst_tail_s(replica, wl.output_tokens, inputs.num_prompts)
        rate = inputs.num_prompts / (bulk_s + tail_s)
        return {"requests_per_s": rate,
                "output_throughput_tok_s": rate * mean_out,
                "notes": (_burst_note(loop.saturated, inputs.num_prompts), _tail_note(tail_s, bulk_s))}  # fmt: skip
    if inputs.load == "closed":
        loop, model = solve_workload(resolved, wl)
        pred = model.evaluate(loop.requests_per_s)
    else:
        model = LatencyModel(resolved, WorkloadStats.of(wl))
        pred = model.evaluate()
    served = pred.requests_per_s if pred.stable else pred.deployment_max_stable_requests_per_s
    return {
        "requests_per_s": served,
        "ttft_p50_s": pred.ttft_p50_s,
        "ttft_p99_s": pred.ttft_p99_s,
        "tpot_p50_s": pred.mean_step_s,
        "itl_p50_s": pred.itl_p50_s,
        "itl_p99_s": pred.itl_p99_s,
        "output_throughput_tok_s": served * mean_out,
        "notes": pred.notes,
    }


def _burst_note(saturated: bool, prompts: int) -> str:
    if saturated:
        return f"saturation: {prompts:,} prompts fill the engine; the figure is its capacity"
    return f"saturation: {prompts:,} prompts never fill the engine; the figure is the closed loop at {prompts:,} clients"


def _tail_note(tail_s: float, bulk_s: float) -> str:
    return f"saturation: the burst's tail (its last responses, a thinning batch) adds {tail_s:.3g} s to {bulk_s:.3g} s"


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _simulated(run: ServingRun, inputs: RunInputs, resolved: ResolvedDeployment) -> dict[str, Any]:
    from planner.closed_loop import simulate_workload
    from planner.simulate.requests import RequestArrays, within_context
    from planner.simulate.run import run as sim_run
    from planner.simulate.run import workload_requests

    count = min(inputs.num_prompts, MAX_SIMULATED_PROMPTS)
    wl = inputs.workload
    result: SimResult
    if inputs.load == "closed":
        result = simulate_workload(resolved, wl, SEED, count, None, "round_robin", None)[0]
    else:
        if inputs.load == "open":
            reqs = workload_requests(wl, SEED, count=count)
        else:  # the burst: every prompt at t = 0 (lengths drawn as an open loop's would be)
            drawn = workload_requests(_rated(wl), SEED, count=count)
            reqs = RequestArrays(np.zeros(len(drawn)), drawn.prompt_tokens, drawn.output_tokens)
        reqs, _ = within_context(reqs, resolved.scheduler.max_model_len)
        result = sim_run(resolved, reqs)
    notes = (
        ()
        if count == inputs.num_prompts
        else (f"simulated the first {count:,} of {inputs.num_prompts:,} prompts",)
    )
    return {
        "requests_per_s": _finite(result.request_throughput_rps),
        "ttft_p50_s": _finite(result.ttft.p50_s),
        "ttft_p99_s": _finite(result.ttft.p99_s),
        "tpot_p50_s": _finite(result.tpot.p50_s),
        "itl_p50_s": _finite(result.itl.p50_s),
        "itl_p99_s": _finite(result.itl.p99_s),
        "output_throughput_tok_s": _finite(result.output_tokens_per_s),
        "notes": notes,
    }


def predict_run(run: ServingRun, profile: Profile | str = "auto", *, simulate: bool = False) -> RunPrediction:
    """capplan's prediction for `run` (module docstring): the analytic model, or the simulator
    when `simulate`. `profile`: a Profile for the run's GPU, or a name/file the registry
    resolves for it (planner.costmodel.profiles). Same run, same profile: same figures."""
    inputs = run_workload(run)
    resolved = _resolve(run, inputs, profile)
    try:
        figures = (_simulated if simulate else _analytic)(run, inputs, resolved)
    except InvalidInput as exc:  # e.g. a prompt the modelled KV cache cannot hold
        raise InvalidInput(_where(run, exc.field), exc.reason) from None
    if inputs.load == "saturation":  # scored on throughput alone
        figures = {k: figures.get(k) for k in ("requests_per_s", "output_throughput_tok_s", "notes")}
    assert run.settings.gpu is not None
    return RunPrediction(
        run_id=run.id,
        gpu=run.settings.gpu,
        model=run.settings.model,
        method="simulator" if simulate else "analytic",
        load=inputs.load,
        profile=resolved.replica.profile.name,
        requests_per_s=figures.get("requests_per_s"),
        ttft_p50_s=figures.get("ttft_p50_s"),
        ttft_p99_s=figures.get("ttft_p99_s"),
        tpot_p50_s=figures.get("tpot_p50_s"),
        itl_p50_s=figures.get("itl_p50_s"),
        itl_p99_s=figures.get("itl_p99_s"),
        output_throughput_tok_s=figures.get("output_throughput_tok_s"),
        notes=tuple(figures.get("notes") or ()),
    )
