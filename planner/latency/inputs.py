"""Reading `capplan evaluate` files: YAML (or JSON) with `deployment:`, `workload:` and an
optional `slo:`. Every error is an InvalidInput naming the key path the user wrote
(`workload.arrivals.requests_per_s`) or, for a trace CSV, its line (`workload.trace:line 17...`).

A workload is either the schema of planner/workload.py or a trace reference:

    workload:
      trace: azure-conv-2023        # a built-in trace name, or a CSV path (relative to the file)
      bucket_s: 60                  # per-bucket arrival rates (null: one constant mean rate)
      burstiness: rescaled          # rescaled (CV of gaps once bucket rates are taken out) | gaps | a number k (CV^2 = 1/k)
      bins: null                    # null: exact empirical lengths; N: N-bin histograms
      requests_per_s: null          # rescale the trace's time to this mean rate
      prefix_cache_hit_fraction: 0
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from planner.deployment import Deployment
from planner.errors import InvalidInput
from planner.latency.model import Slo
from planner.validation import validate
from planner.workload import Arrivals, Workload

if TYPE_CHECKING:
    from planner.traces import Trace

_CONFIG = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
TOP_LEVEL_KEYS = ("deployment", "workload", "slo")


class TraceWorkload(BaseModel):
    """`workload: {trace: ...}`: a workload derived from a request trace (see module docstring)."""

    model_config = _CONFIG
    trace: str = Field(min_length=1)
    bucket_s: float | None = Field(default=60.0, gt=0)
    burstiness: str | float = "rescaled"
    bins: int | None = Field(default=None, ge=1)
    requests_per_s: float | None = Field(default=None, gt=0)
    prefix_cache_hit_fraction: float = Field(default=0.0, ge=0.0, lt=1.0)
    name: str | None = None

    @field_validator("burstiness", mode="before")
    @classmethod
    def _burstiness(cls, v: Any) -> Any:
        if v in ("gaps", "rescaled"):
            return v
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v > 0:
            return float(v)
        raise ValueError(f"must be gaps, rescaled or a number k > 0 (CV^2 of the gaps = 1/k), got {v!r}")


class SloSpec(BaseModel):
    model_config = _CONFIG
    ttft_p99_ms: float | None = Field(default=None, gt=0)
    itl_p99_ms: float | None = Field(default=None, gt=0)


@dataclass(frozen=True)
class EvaluateInput:
    deployment: Deployment
    workload: Workload
    slo: Slo | None
    source: str


def workload_from_mapping(data: Any, root: str = "workload", base_dir: Path | None = None) -> Workload:
    """A Workload from its schema, or from a trace reference (`trace:` key)."""
    if isinstance(data, Mapping) and "trace" in data:
        return _trace_workload(validate(TraceWorkload, data, root), root, base_dir)
    return Workload.from_mapping(data, root)


def resolve_trace(name_or_path: str, field: str, base_dir: Path | None = None) -> Trace:
    """A built-in trace by name, or a trace CSV (a relative path is taken from `base_dir` when
    given); errors name `field`."""
    from planner.traces import BUILTIN_TRACES, builtin_trace, load_trace

    if name_or_path in BUILTIN_TRACES:
        return builtin_trace(name_or_path)
    path = Path(name_or_path)
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    if not path.exists():
        raise InvalidInput(
            field,
            f"{name_or_path!r} is neither a built-in trace ({', '.join(sorted(BUILTIN_TRACES))}) nor an existing file",
        )
    return load_trace(path, field=field)


def _trace_workload(spec: TraceWorkload, root: str, base_dir: Path | None) -> Workload:
    trace = resolve_trace(spec.trace, f"{root}.trace", base_dir)
    try:
        if spec.requests_per_s is not None:
            trace = trace.time_scaled(spec.requests_per_s)
        mode: Literal["gaps", "rescaled"] = "gaps" if spec.burstiness == "gaps" else "rescaled"
        w = trace.to_workload(
            bucket_s=spec.bucket_s,
            bins=spec.bins,
            burstiness=mode,
            name=spec.name,
            prefix_cache_hit_fraction=spec.prefix_cache_hit_fraction,
        )
    except InvalidInput as exc:
        f = exc.field if exc.field.startswith(root) else f"{root}.{exc.field}"
        raise InvalidInput(f, exc.reason) from None
    if not isinstance(spec.burstiness, str):
        arr = w.arrivals.model_dump()
        arr["burstiness"] = spec.burstiness
        w = w.model_copy(update={"arrivals": Arrivals.model_validate(arr)})
    return w


def parse_evaluate_mapping(data: Any, source: str = "input", base_dir: Path | None = None) -> EvaluateInput:
    """Validate the top-level mapping {deployment, workload, slo?}."""
    if not isinstance(data, Mapping):
        raise InvalidInput(
            source, f"expected a mapping with keys {', '.join(TOP_LEVEL_KEYS)}, got {type(data).__name__}"
        )
    for key in data:
        if key not in TOP_LEVEL_KEYS:
            raise InvalidInput(str(key), f"unknown top-level key; expected {', '.join(TOP_LEVEL_KEYS)}")
    for key in ("deployment", "workload"):
        if key not in data or data[key] is None:
            raise InvalidInput(key, "is required")
    deployment = Deployment.from_mapping(data["deployment"], "deployment")
    workload = workload_from_mapping(data["workload"], "workload", base_dir)
    slo = None
    if data.get("slo") is not None:
        s = validate(SloSpec, data["slo"], "slo")
        if s.ttft_p99_ms is None and s.itl_p99_ms is None:
            raise InvalidInput("slo", "give ttft_p99_ms, itl_p99_ms or both")
        slo = Slo(
            ttft_p99_s=None if s.ttft_p99_ms is None else s.ttft_p99_ms / 1e3,
            itl_p99_s=None if s.itl_p99_ms is None else s.itl_p99_ms / 1e3,
        )
    return EvaluateInput(deployment, workload, slo, source)


def load_evaluate_file(path: str | Path) -> EvaluateInput:
    """Read and validate an evaluate file (YAML; JSON is YAML too)."""
    import yaml

    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidInput(str(path), "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(str(path), f"cannot read: {exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InvalidInput(str(path), f"not valid YAML{where}: {problem}") from None
    if data is None:
        raise InvalidInput(str(path), "is empty; expected deployment: and workload:")
    return parse_evaluate_mapping(data, str(path), p.parent)
