"""What the network may ask of a server: no file of the server's disk (models, profiles and
traces by catalog or built-in name, measurements inline) and no request whose work exceeds the
limits. Checked on the request mapping before any work is queued (the servicer calls `check`
before the job pool, and for each Sweep scenario); errors name the field.

Admission is by cost: a cheap estimate of the work, from the mapping alone (no model, no search),
calibrated so that an admitted request takes at most ~30 s of one core (bench/bench_admission.py
measures it; figures from the 2-core development machine):

* Plan: the configurations the search evaluates (`plan_configurations`): per GPU type x TP, the
  colocated shapes (one per long_prefill_token_threshold), the prefill shape and the decode shape,
  each searching its budgets (listed, else the coarse grid and two refinements) x its listed
  max_num_seqs, plus two to set max_num_seqs (a decode pool has one budget), times the whole
  plans the request asks for (each weight format listed, EP's two, each speculative k). Measured
  1.3-2.7 ms a configuration for listed budgets (5,001 in 6.5 s; 20,001 colocated + prefill
  ~60 s), ~5.8 ms for thresholds (4,345 evaluated of 8,000 estimated in 25 s): the estimate is
  an upper bound (the defaults evaluate 274 of 460 estimated), ~3 ms an estimated configuration
  at worst, so 10,000 is ~30 s. Buckets add ~60 us each past the search (a leap year of hourly buckets,
  60 shapes: 0.6 s) and are capped at what the MILP sizes (solvers.milp_data.MAX_BUCKETS). The
  MILP's own time is the caller's `solver.time_limit_s` (default 10 s; the service cuts it to
  the deadline); `verify` simulates at most planner.plan.verify.MAX_REQUESTS a deployment.
* Simulate: the simulated arrivals (`simulated_arrivals`): `requests`; else rate x `horizon_s`
  (the request's `requests_per_s`, else the workload's mean rate or the trace's); else one pass
  over the workload's buckets (mean rate x their span), the whole trace of a replay, or
  planner.api's default 10,000. A closed loop (`arrivals.concurrency`) with a horizon and no rate
  cap counts as the most a simulation takes (its sends are known only by running it). Measured 30 us a request with the replicas within capacity
  (200,000 in 6.1 s) and ~130 us overloaded (50,000 in 5.9 s; 200,000 in 26 s, 853 MiB): 200,000
  is ~26 s at worst.
* A Plan's history workload (`workload: {history: {points}, forecast}`): the forecast's fit is
  bounded by `forecast_units` = history buckets x (weekly period in buckets + 200), the fit's
  cost growing with the history's length and the seasonal period STL smooths; at the worst
  measured ~2.7 us a unit (`bench/bench_forecast_cost.py`), 10,000,000 units is ~27 s. Its
  horizon is capped like any buckets; files (`history.path`) are refused.
* Evaluate: analytic; at the schema's largest workload (100,000 buckets, 1,000,000 length
  samples) 1.1 s. The buckets and samples are capped as for the other RPCs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from planner.errors import InvalidInput, echo
from planner.server.service_errors import LimitExceeded
from planner.workload import MAX_SAMPLES
from solvers.milp_data import MAX_BUCKETS

__all__ = [
    "PLAN_CONFIGURATIONS_PER_CALL",
    "SIMULATED_REQUESTS_PER_CALL",
    "Limits",
    "check",
    "plan_configurations",
    "simulated_arrivals",
]

PLAN_CONFIGURATIONS_PER_CALL = 10_000  # estimated configurations: ~30 s of one core at ~3 ms each
SIMULATED_REQUESTS_PER_CALL = 200_000  # ~26 s of one core at ~130 us each (overloaded replicas)
DEFAULT_TPS = 4  # CandidateSpace's default tensor_parallel_sizes: 1, 2, 4, 8
FORECAST_UNITS_PER_CALL = 10_000_000  # history buckets x (week period + 200): ~27 s at ~2.7 us
FORECAST_UNIT_OFFSET = 200
SEQS_PASS = 2  # configurations a shape adds past its budgets x max_num_seqs (setting max_num_seqs)


@dataclass(frozen=True)
class Limits:
    """What one call may cost; more gets RESOURCE_EXHAUSTED naming the field and the limit.
    Defaults: the schema's own caps where they bound the work (one definition each), the cost
    limits of the module docstring otherwise."""

    max_message_bytes: int = 16 * 2**20
    max_buckets: int = MAX_BUCKETS  # forecast buckets: a leap year of hours, what the MILP sizes
    max_candidate_configs: int = PLAN_CONFIGURATIONS_PER_CALL  # a Plan's search (estimate)
    max_sweep_scenarios: int = 10_000
    max_simulated_requests: int = SIMULATED_REQUESTS_PER_CALL  # a Simulate's arrivals (estimate)
    max_length_samples: int = MAX_SAMPLES  # a length distribution's `samples`
    max_forecast_units: int = FORECAST_UNITS_PER_CALL  # a history workload's fit (estimate)


def _catalog_model(name: Any, field: str) -> None:
    from planner.catalog.models import model_names

    if isinstance(name, str) and name.lower() not in {n.lower() for n in model_names()}:
        raise InvalidInput(
            field, f"unknown model {echo(name)}; the service takes catalog names: {', '.join(model_names())}"
        )


def _builtin_profile(name: Any, field: str) -> None:
    from planner.costmodel.profile import BUILTIN_NAMES

    if isinstance(name, str) and name not in BUILTIN_NAMES:
        raise InvalidInput(
            field,
            f"{echo(name)}: the service takes a built-in profile ({', '.join(BUILTIN_NAMES)}), not a file",
        )


def _builtin_trace(name: Any, field: str) -> None:
    from planner.traces import BUILTIN_TRACES

    if isinstance(name, str) and name not in BUILTIN_TRACES:
        raise InvalidInput(
            field,
            f"{echo(name)}: the service replays built-in traces ({', '.join(sorted(BUILTIN_TRACES))}), not files",
        )


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def _number(v: Any) -> float | None:
    """A positive finite number as written, else None (the schema reports the bad value)."""
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
        return None
    return float(v)


def _trace(name: Any) -> Any:
    """The built-in trace (cached after its first read), or None: an unknown name is refused by
    _builtin_trace, a bad one by the schema."""
    from planner.traces import BUILTIN_TRACES, builtin_trace

    return builtin_trace(name) if isinstance(name, str) and name in BUILTIN_TRACES else None


def _trace_buckets(w: Mapping[str, Any]) -> int:
    """Buckets a trace workload derives: its span (time-scaled to `requests_per_s`) / `bucket_s`."""
    t, bucket_s = _trace(w.get("trace")), w.get("bucket_s", 60.0)
    if t is None or _number(bucket_s) is None or t.num_requests < 2 or t.duration_s <= 0:
        return 0
    rate = _number(w.get("requests_per_s"))
    span_s = t.duration_s * (t.mean_requests_per_s / rate if rate else 1.0)
    return math.ceil(min(span_s / float(bucket_s), 1e18))


def _duration_s(text: Any) -> float | None:
    from planner.forecast.growth import parse_duration_s

    try:
        return parse_duration_s(text, "") if isinstance(text, str) else None
    except InvalidInput:
        return None  # the schema names it


def forecast_units(w: Mapping[str, Any]) -> int:
    """The fit's cost estimate of a history workload (module docstring): history buckets x
    (the weekly period in buckets + FORECAST_UNIT_OFFSET)."""
    h, f = w.get("history"), w.get("forecast")
    points = h.get("points") if isinstance(h, Mapping) else None
    bucket_s = _duration_s((f if isinstance(f, Mapping) else {}).get("bucket", "1h"))
    raw = [p.get("timestamp") for p in points or () if isinstance(p, Mapping)]
    stamps = [
        float(t) for t in raw if isinstance(t, int | float) and not isinstance(t, bool) and math.isfinite(t)
    ]
    if bucket_s is None or not stamps:
        return 0
    n = math.ceil(min((max(stamps) - min(stamps)) / bucket_s + 1, 1e12))
    return n * (round(7 * 86_400.0 / bucket_s) + FORECAST_UNIT_OFFSET)


def _history(w: Mapping[str, Any], prefix: str, limits: Limits) -> None:
    h, f = w["history"], w.get("forecast")
    if isinstance(h, str) or (isinstance(h, Mapping) and h.get("path") is not None):
        raise InvalidInput(
            _join(prefix, "history.path"),
            "the service reads no files; send the rates inline (history.points)",
        )
    f = f if isinstance(f, Mapping) else {}
    horizon_s, bucket_s = _duration_s(f.get("horizon", "7d")), _duration_s(f.get("bucket", "1h"))
    if horizon_s is not None and bucket_s is not None and round(horizon_s / bucket_s) > limits.max_buckets:
        n = round(horizon_s / bucket_s)
        raise LimitExceeded(_join(prefix, "forecast.horizon"), n, limits.max_buckets, "forecast buckets")
    units = forecast_units(w)
    if units > limits.max_forecast_units:
        raise LimitExceeded(
            _join(prefix, "history.points"),
            units,
            limits.max_forecast_units,
            "forecast work (history buckets x (weekly period in buckets + 200))",
        )


def _workload(w: Any, prefix: str, limits: Limits) -> None:
    if not isinstance(w, Mapping):
        return
    if "history" in w:
        _history(w, prefix, limits)
    if "trace" in w:
        _builtin_trace(w["trace"], _join(prefix, "trace"))
        n = _trace_buckets(w)
        if n > limits.max_buckets:
            raise LimitExceeded(_join(prefix, "bucket_s"), n, limits.max_buckets, "buckets from the trace")
    arrivals = w.get("arrivals")
    if isinstance(arrivals, Mapping):
        buckets = arrivals.get("buckets") or ()
        if len(buckets) > limits.max_buckets:
            raise LimitExceeded(
                _join(prefix, "arrivals.buckets"), len(buckets), limits.max_buckets, "buckets"
            )
    for key in ("input_tokens", "output_tokens"):
        dist = w.get(key)
        if isinstance(dist, Mapping) and len(dist.get("samples") or ()) > limits.max_length_samples:
            n = len(dist["samples"])
            raise LimitExceeded(_join(prefix, f"{key}.samples"), n, limits.max_length_samples, "samples")


def plan_configurations(plan: Mapping[str, Any]) -> int:
    """An upper bound on the configurations a Plan's search evaluates (module docstring): per
    GPU type x TP x PP, the colocated shapes (x thresholds), prefill and decode, each its budgets x
    max_num_seqs; times the whole plans the request asks for (`plan_variants`).
    planner/plan/search.py is what it bounds."""
    from planner.catalog.gpus import gpu_names
    from planner.schema.plan_request import COARSE_BUDGETS

    c = plan.get("candidates")
    c = c if isinstance(c, Mapping) else {}

    def n(key: str) -> int | None:
        v = c.get(key)
        return len(v) if isinstance(v, list | tuple) and v else None

    gpus, tps = n("gpus") or len(gpu_names()), n("tensor_parallel_sizes") or DEFAULT_TPS
    tps *= n("pipeline_parallel_sizes") or 1  # each TP with each PP is a shape
    budgets, seqs = n("max_num_batched_tokens"), n("max_num_seqs")
    thresholds = n("long_prefill_token_thresholds") or 1

    def per_shape(n_budgets: int) -> int:
        return n_budgets * (seqs or 1) + SEQS_PASS

    searched = per_shape(budgets or len(COARSE_BUDGETS) + 2)  # the coarse grid and two refinements
    colocated, prefill, decode = thresholds * searched, searched, per_shape(1)
    mode = c.get("disaggregation")
    roles = {"never": colocated, "always": prefill + decode}.get(str(mode), colocated + prefill + decode)
    return gpus * tps * roles * plan_variants(plan)


def plan_variants(plan: Mapping[str, Any]) -> int:
    """Whole plans a request runs, each a search of its own (planner/plan/pipeline.py): one per
    weight format listed (`candidates.weight_dtypes`), twice with `candidates.expert_parallel`
    (the EP plan and the TP split's, planner/plan/ep_variants.py), one per speculative k
    (planner/plan/speculative_k.speculative_ks: the listed k, speculative_decoding's own, else
    the default six)."""
    from planner.schema.plan_request import DEFAULT_SPECULATIVE_TOKENS

    c = plan.get("candidates")
    c = c if isinstance(c, Mapping) else {}
    dtypes = c.get("weight_dtypes")
    formats = len(set(map(str, dtypes))) if isinstance(dtypes, list | tuple) and dtypes else 1
    ep = 2 if c.get("expert_parallel") is True else 1
    sd, ks = plan.get("speculative_decoding"), c.get("num_speculative_tokens")
    if not isinstance(sd, Mapping):
        k = 1
    elif isinstance(ks, list | tuple) and ks:
        k = len(ks)
    elif sd.get("num_speculative_tokens") is not None:
        k = 1
    else:
        k = len(DEFAULT_SPECULATIVE_TOKENS)
    return formats * ep * k


def _candidates(plan: Mapping[str, Any], prefix: str, limits: Limits) -> None:
    configs = plan_configurations(plan)
    if configs > limits.max_candidate_configs:
        raise LimitExceeded(
            _join(prefix, "candidates"),
            configs,
            limits.max_candidate_configs,
            "configurations to search (GPU types x TPs x PPs x roles x budgets x max_num_seqs x thresholds, "
            "x each whole plan asked for: weight formats, EP and the TP split, speculative k)",
        )


def _workload_rate_and_period(w: Any) -> tuple[float | None, float | None]:
    """The workload's mean rate (requests/s) and the span of one pass over its buckets or trace."""
    if not isinstance(w, Mapping):
        return None, None
    if "trace" in w:
        t = _trace(w["trace"])
        if t is None or t.num_requests < 2 or t.duration_s <= 0:
            return None, None
        rate = _number(w.get("requests_per_s")) or t.mean_requests_per_s
        bucketed = w.get("bucket_s", 60.0) is not None
        return rate, (t.num_requests / rate if bucketed else None)
    a = w.get("arrivals")
    if not isinstance(a, Mapping):
        return None, None
    buckets = [b for b in a.get("buckets") or () if isinstance(b, Mapping)]
    if not buckets:
        return _number(a.get("requests_per_s")), None
    span_s = math.fsum(_number(b.get("duration_s")) or 0.0 for b in buckets)
    n = math.fsum(
        (_number(b.get("duration_s")) or 0.0) * (_number(b.get("requests_per_s")) or 0.0) for b in buckets
    )
    return (n / span_s if span_s > 0 else None), (span_s or None)


def simulated_arrivals(data: Mapping[str, Any]) -> tuple[str, int]:
    """The field that sets a Simulate's number of requests and an estimate of it (module
    docstring; planner.api.simulating's _sampled and _replayed are what it follows)."""
    from planner.api.simulating import DEFAULT_SIMULATED_REQUESTS
    from planner.schema.inputs import MAX_SIMULATED_REQUESTS

    requests, horizon_s = data.get("requests"), _number(data.get("horizon_s"))
    if isinstance(requests, int) and not isinstance(requests, bool):
        return "requests", requests
    rate = _number(data.get("requests_per_s"))
    if data.get("trace") is not None:  # a replay: the trace's rate unless scaled to requests_per_s
        t = _trace(data["trace"])
        if t is None or t.num_requests < 2 or t.duration_s <= 0:
            return "trace", 0
        if horizon_s is None:
            return "trace", t.num_requests
        return "horizon_s", _ceil((rate or t.mean_requests_per_s) * horizon_s)
    wl_rate, period_s = _workload_rate_and_period(data.get("workload"))
    rate = rate or wl_rate
    if horizon_s is not None and rate is None and _closed_loop(data.get("workload")):
        # C clients with no rate cap send as fast as the engine answers: how many fit in the
        # horizon is known only by running the loop, so it counts as the most a simulation takes.
        return "horizon_s", MAX_SIMULATED_REQUESTS
    if horizon_s is not None:
        return "horizon_s", _ceil((rate or 0.0) * horizon_s)
    if period_s is not None:  # one pass over the buckets
        return "requests", _ceil((rate or 0.0) * period_s)
    return "requests", DEFAULT_SIMULATED_REQUESTS


def _closed_loop(w: Any) -> bool:
    """Whether a workload's arrivals are a closed loop (`arrivals.concurrency`)."""
    a = w.get("arrivals") if isinstance(w, Mapping) else None
    return isinstance(a, Mapping) and a.get("concurrency") is not None


def _ceil(x: float) -> int:
    return math.ceil(min(x, 1e18))


def check(rpc: str, data: Mapping[str, Any], limits: Limits, prefix: str = "") -> None:
    """Raise InvalidInput for a file reference, LimitExceeded for an oversized request."""
    if rpc in ("Evaluate", "Simulate"):
        dep = data.get("deployment")
        if isinstance(dep, Mapping):
            _catalog_model(dep.get("model"), _join(prefix, "deployment.model"))
        _workload(data.get("workload"), _join(prefix, "workload"), limits)
    if rpc in ("Plan", "Analyze", "Calibrate"):
        _catalog_model(data.get("model"), _join(prefix, "model"))
    if "profile" in data:
        _builtin_profile(data["profile"], _join(prefix, "profile"))
    if rpc == "Plan":
        _workload(data.get("workload"), _join(prefix, "workload"), limits)
        _candidates(data, prefix, limits)
    if rpc == "Simulate":
        if data.get("trace") is not None:
            _builtin_trace(data["trace"], _join(prefix, "trace"))
        field, arrivals = simulated_arrivals(data)
        if arrivals > limits.max_simulated_requests:
            raise LimitExceeded(
                _join(prefix, field), arrivals, limits.max_simulated_requests, "simulated requests"
            )
    if rpc == "Calibrate":
        m = data.get("measurements")
        if isinstance(m, Mapping) and m.get("path") is not None:
            raise InvalidInput(
                _join(prefix, "measurements.path"), "the service reads no files; send the rows inline (rows)"
            )
    if rpc == "ListCatalog" and data.get("kind") == "models" and data.get("name") is not None:
        _catalog_model(data["name"], _join(prefix, "name"))
