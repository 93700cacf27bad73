"""Reading requests: a mapping validated into a request model (errors naming the dotted path,
with a hint for keys users write for another concept), request files, paths relative to the
request's folder, and the workload a request's `workload:` builds (a trace or a history resolved).
planner/schema/inputs.py re-exports every name here."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError

from planner.errors import InvalidInput, echo
from planner.schema.history_workload import HistoryWorkload
from planner.schema.request_common import TraceWorkload
from planner.validation import error_to_invalid_input, loc_to_path
from planner.workload import Arrivals, Workload

if TYPE_CHECKING:
    from planner.traces import Trace

# Keys users write for a concept this schema names differently: the error says where it lives.
MISNOMERS: dict[str, str] = {
    "chunk_size": "deployment.max_num_batched_tokens (vLLM's token budget)",
    "chunked_prefill_size": "deployment.max_num_batched_tokens (vLLM's token budget)",
    "max_batched_tokens": "deployment.max_num_batched_tokens (vLLM's token budget)",
    "batch_size": "deployment.max_num_seqs (vLLM's cap on running sequences)",
    "max_batch_size": "deployment.max_num_seqs (vLLM's cap on running sequences)",
    "tensor_parallel_size": "deployment.tp",
    "tensor_parallel": "deployment.tp",
    "num_replicas": "deployment.replicas",
    "dtype": "deployment.weight_dtype and deployment.kv_dtype",
}

# --- validation ----------------------------------------------------------------------------------

R = TypeVar("R", bound=BaseModel)


def validate_request(cls: type[R], data: R | Mapping[str, Any]) -> R:
    """A request instance as is, or a mapping validated into one; errors are InvalidInput
    naming the dotted path, with a hint for keys users write for another concept."""
    if isinstance(data, cls):
        return data
    if not isinstance(data, Mapping):
        raise InvalidInput("(root)", f"expected a mapping or a {cls.__name__}, got {type(data).__name__}")
    try:
        return cls.model_validate(data)
    except ValidationError as err:
        raise _invalid(err, cls) from None


def _invalid(err: ValidationError, cls: type[BaseModel]) -> InvalidInput:
    errors = err.errors(include_url=False)
    for e in errors:
        name = e["loc"][-1] if e["loc"] else None
        if e["type"] == "extra_forbidden" and isinstance(name, str) and name in MISNOMERS:
            return InvalidInput(
                loc_to_path("", e["loc"]), f"unknown field {name}; did you mean {MISNOMERS[name]}?"
            )
    first = errors[0]
    if first["type"] == "extra_forbidden" and len(first["loc"]) == 1:
        return InvalidInput(
            str(first["loc"][0]), f"unknown top-level key; expected {', '.join(cls.model_fields)}"
        )
    return error_to_invalid_input(err, "")


# --- files ---------------------------------------------------------------------------------------


def read_mapping_file(path: str | Path, expected: str = "deployment: and workload:") -> dict[str, Any]:
    """A YAML (or JSON) request file holding a mapping, its size, values and keys checked before
    anything is built (planner/yamlfile.py; every file's limits: planner/files.py)."""
    from planner.yamlfile import read_mapping_file as read

    return read(path, expected)


def local_path(text: str, base_dir: Path | None) -> str:
    """A path as written, taken from `base_dir` when relative and present there."""
    try:
        if base_dir is None or Path(text).is_absolute():
            return text
        candidate = base_dir / text
        return str(candidate) if candidate.exists() else text
    except (OSError, ValueError):  # a name no file can have (NUL byte, too long)
        return text


def resolve_trace(name_or_path: str, field: str, base_dir: Path | None = None) -> Trace:
    """A built-in trace by name, or a trace CSV (a relative path is taken from `base_dir` when
    given); errors name `field`."""
    from planner.traces import BUILTIN_TRACES, builtin_trace, load_trace

    if name_or_path in BUILTIN_TRACES:
        return builtin_trace(name_or_path)
    path = Path(local_path(name_or_path, base_dir))
    try:
        exists = path.exists()  # a FIFO or a device exists: load_trace refuses it by what it is
    except (OSError, ValueError):
        exists = False
    if not exists:
        raise InvalidInput(
            field,
            f"{echo(name_or_path)} is neither a built-in trace ({', '.join(sorted(BUILTIN_TRACES))}) nor an existing file",
        )
    return load_trace(path, field=field)


def build_workload(
    spec: Workload | TraceWorkload | HistoryWorkload,
    root: str = "workload",
    base_dir: Path | None = None,
    *,
    closed_loop: bool = False,
) -> Workload:
    """The workload itself, or the one a trace reference derives (bucket rates, burstiness and
    length distributions from the trace). A closed loop (`arrivals.concurrency`) only where the
    caller takes one (`closed_loop`: evaluate and simulate); elsewhere it is refused by name."""
    if isinstance(spec, Workload):
        if spec.arrivals.closed_loop and not closed_loop:
            raise InvalidInput(
                f"{root}.arrivals.concurrency",
                "a closed loop is for evaluate and simulate; give an open-loop requests_per_s or buckets",
            )
        return spec
    if isinstance(spec, HistoryWorkload):
        from planner.forecast.from_history import build_history_workload

        path = spec.history.path
        if path is not None:
            history = spec.history.model_copy(update={"path": local_path(path, base_dir)})
            spec = spec.model_copy(update={"history": history})
        return build_history_workload(spec, root)
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
    if spec.endpoint != w.endpoint:
        w = w.model_copy(update={"endpoint": spec.endpoint})
    if not isinstance(spec.burstiness, str):
        arr = w.arrivals.model_dump()
        arr["burstiness"] = spec.burstiness
        w = w.model_copy(update={"arrivals": Arrivals.model_validate(arr)})
    return w
