"""What the network may ask of a server: no file of the server's disk (models, profiles and
traces by catalog or built-in name, measurements inline) and no request larger than the limits.
Checked on the request mapping before any work is queued; errors name the field."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from planner.errors import InvalidInput, echo
from planner.server.errors import LimitExceeded

__all__ = ["Limits", "check"]


@dataclass(frozen=True)
class Limits:
    """Request sizes one server takes; bigger requests get RESOURCE_EXHAUSTED naming the limit."""

    max_message_bytes: int = 16 * 2**20
    max_buckets: int = 10_000  # forecast buckets in a workload: a year of hours is 8,784
    max_candidate_configs: int = 20_000  # GPU types x TPs x budgets x max_num_seqs x thresholds listed
    max_sweep_scenarios: int = 10_000
    max_simulated_requests: int = 200_000  # about 10 s of simulator time
    max_length_samples: int = 1_000_000  # a length distribution's `samples`


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
            field, f"{echo(name)}: the service takes a built-in profile ({', '.join(BUILTIN_NAMES)}), not a file"
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


def _workload(w: Any, prefix: str, limits: Limits) -> None:
    if not isinstance(w, Mapping):
        return
    if "trace" in w:
        _builtin_trace(w["trace"], _join(prefix, "trace"))
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


def _candidates(plan: Mapping[str, Any], prefix: str, limits: Limits) -> None:
    from planner.catalog.gpus import gpu_names

    c = plan.get("candidates")
    c = c if isinstance(c, Mapping) else {}

    def n(key: str, default: int) -> int:
        v = c.get(key)
        return len(v) if isinstance(v, list | tuple) and v else default

    configs = math.prod(
        (
            n("gpus", len(gpu_names())),
            n("tensor_parallel_sizes", 4),
            n("max_num_batched_tokens", 1),
            n("max_num_seqs", 1),
            n("long_prefill_token_thresholds", 1),
        )
    )
    if configs > limits.max_candidate_configs:
        raise LimitExceeded(
            _join(prefix, "candidates"), configs, limits.max_candidate_configs, "listed configurations"
        )


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
        requests = data.get("requests")
        if isinstance(requests, int) and requests > limits.max_simulated_requests:
            raise LimitExceeded(
                _join(prefix, "requests"), requests, limits.max_simulated_requests, "simulated requests"
            )
    if rpc == "Calibrate":
        m = data.get("measurements")
        if isinstance(m, Mapping) and m.get("path") is not None:
            raise InvalidInput(
                _join(prefix, "measurements.path"), "the service reads no files; send the rows inline (rows)"
            )
    if rpc == "ListCatalog" and data.get("kind") == "models" and data.get("name") is not None:
        _catalog_model(data["name"], _join(prefix, "name"))
