"""The one conversion between planner.v1 messages and the pydantic requests and reports of
planner.api.

The proto mirrors the pydantic models field for field with the same snake_case names, so a
message converts to the mapping a CLI user writes (requests) or `capplan ... --json` prints
(reports), and back, by walking the descriptor. What differs in shape is handled here, driven by
the schema, not per field:

* enums carry the YAML words: `auto` <-> DISAGGREGATION_AUTO (prefix from the enum's name);
  _UNSPECIFIED is "not given" (request) or null (report);
* proto3 presence stands for YAML presence: a request converts to exactly the keys that were set,
  so pydantic applies the same defaults (and `model_fields_set`) as for a file;
* report fields pydantic allows to be null come back as null when unset, lists that may be null
  come back null when empty;
* maps keyed by a closed set of words (`pools: {prefill: ..., decode: ...}`) are messages with one
  field per word (same JSON, order kept); `google.protobuf.Value` carries the fields that take a
  word or a number, or an explicit null;
* YAML shorthands: a bare integer length distribution is `constant`, a `[tokens, probability]`
  pair a TokenProbability, a bare string measurements input its `path`.

`schema_mismatches()` walks every request and report model beside its message and lists every
field missing or typed differently on either side (tests/test_proto_schema.py requires none).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor
from google.protobuf.message import Message
from pydantic import BaseModel

from planner.errors import InvalidInput, echo
from planner.server.proto_schema import (
    CALL_OPTIONS,
    FD,
    FLOAT_TYPES,
    INT_BOUNDS,
    INT_TYPES,
    VALUE_TYPE,
    enum_value_name,
    enum_words,
    is_map,
    is_repeated,
    model_field_names,
    nullable_fields,
    schema_mismatches,
)
from planner.v1 import planner_service_pb2 as pb

__all__ = [
    "RPCS",
    "Rpc",
    "enum_value_name",
    "report_from_response",
    "request_from_model",
    "request_to_mapping",
    "response_from_report",
    "schema_mismatches",
    "to_mapping",
    "to_message",
]



# --- dict (YAML / model_dump) -> message ---------------------------------------------------------


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _shorthand(desc: Descriptor, data: Any) -> Any:
    """The YAML shorthands the pydantic models accept, spelled out."""
    if (
        desc.full_name == "planner.v1.LengthDistribution"
        and isinstance(data, int)
        and not isinstance(data, bool)
    ):
        return {"constant": data}
    if (
        desc.full_name == "planner.v1.TokenProbability"
        and isinstance(data, Sequence)
        and not isinstance(data, str | bytes)
        and len(data) == 2
    ):
        return {"tokens": data[0], "probability": data[1]}
    if desc.full_name == "planner.v1.MeasurementsInput" and isinstance(data, str):
        return {"path": data}
    return data


def _scalar(fd: FieldDescriptor, value: Any, path: str) -> Any:
    t = fd.type
    if fd.enum_type is not None:
        if isinstance(value, str):
            ev = fd.enum_type.values_by_name.get(value) or fd.enum_type.values_by_name.get(
                enum_value_name(fd.enum_type, value)
            )
            if ev is not None and ev.number != 0:
                return ev.number
        elif (
            isinstance(value, int) and not isinstance(value, bool) and value in fd.enum_type.values_by_number
        ):
            return value
        words = ", ".join(_enum_words(fd.enum_type))
        raise InvalidInput(path, f"must be one of {words}, got {echo(value)}")
    if t == FD.TYPE_BOOL:
        if not isinstance(value, bool):
            raise InvalidInput(path, f"expected true or false, got {echo(value)}")
        return value
    if isinstance(value, str) and (t in INT_TYPES or t in FLOAT_TYPES):
        value = _number(value, path)  # YAML 1.1 reads 50.0e9 as a string; pydantic takes it as a number
    if t in INT_TYPES:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            raise InvalidInput(path, f"expected an integer, got {echo(value)}")
        lo, hi = INT_BOUNDS[t]
        if not lo <= value <= hi:
            raise InvalidInput(path, f"{value} is out of range [{lo}, {hi}]")
        return value
    if t in FLOAT_TYPES:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidInput(path, f"expected a number, got {echo(value)}")
        return float(value)
    if t == FD.TYPE_STRING:
        if not isinstance(value, str):
            raise InvalidInput(path, f"expected a string, got {echo(value)}")
        return value
    raise InvalidInput(path, f"unsupported field type {t}")  # pragma: no cover - schema has none


def _number(text: str, path: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise InvalidInput(path, f"expected a number, got {echo(text)}") from None


def _enum_words(enum: EnumDescriptor) -> list[str]:
    words = enum_words().get(enum.full_name, {})
    return [words.get(v.name, v.name) for v in enum.values if v.number != 0]


def _fill(msg: Message, data: Any, path: str) -> None:
    desc = msg.DESCRIPTOR
    if desc.full_name == VALUE_TYPE:
        _set_value(msg, data, path)
        return
    data = _shorthand(desc, data)
    if not isinstance(data, Mapping):
        raise InvalidInput(path or "(root)", f"expected a mapping, got {type(data).__name__}")
    for key, value in data.items():
        p = _join(path, str(key))
        fd = desc.fields_by_name.get(key) if isinstance(key, str) else None
        if fd is None:
            raise InvalidInput(p, f"unknown field of planner.v1.{desc.name}")
        is_value = fd.message_type is not None and fd.message_type.full_name == VALUE_TYPE
        if value is None and not is_value:
            continue
        target = getattr(msg, key)
        if is_map(fd):
            if not isinstance(value, Mapping):
                raise InvalidInput(p, f"expected a mapping, got {type(value).__name__}")
            vfd = fd.message_type.fields_by_name["value"]
            for k, v in value.items():
                kp = _join(p, str(k))
                if not isinstance(k, str):
                    raise InvalidInput(kp, "keys must be strings")
                if vfd.message_type is not None:
                    _fill(target[k], v, kp)
                elif v is not None:
                    target[k] = _scalar(vfd, v, kp)
        elif is_repeated(fd):
            if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
                raise InvalidInput(p, f"expected a list, got {type(value).__name__}")
            for i, item in enumerate(value):
                ip = f"{p}[{i}]"
                if fd.message_type is not None:
                    _fill(target.add(), item, ip)
                else:
                    if item is None:
                        raise InvalidInput(ip, "must not be null")
                    target.append(_scalar(fd, item, ip))
        elif fd.message_type is not None:
            target.SetInParent()
            _fill(target, value, p)
        else:
            setattr(msg, key, _scalar(fd, value, p))


def _set_value(msg: Any, data: Any, path: str, depth: int = 0) -> None:
    """A google.protobuf.Value from a JSON-like value (numbers as they are, infinities included:
    validation, not the conversion, refuses them)."""
    if depth > 32:
        raise InvalidInput(path, "nested too deeply")
    if data is None:
        msg.null_value = 0
    elif isinstance(data, bool):
        msg.bool_value = data
    elif isinstance(data, int | float):
        msg.number_value = float(data)
    elif isinstance(data, str):
        msg.string_value = data
    elif isinstance(data, Mapping):
        for k, v in data.items():
            _set_value(msg.struct_value.fields[str(k)], v, _join(path, str(k)), depth + 1)
        msg.struct_value.SetInParent()
    elif isinstance(data, Sequence) and not isinstance(data, bytes):
        msg.list_value.SetInParent()
        for i, v in enumerate(data):
            _set_value(msg.list_value.values.add(), v, f"{path}[{i}]", depth + 1)
    else:
        raise InvalidInput(path, f"expected a number, a string or null, got {type(data).__name__}")


def _value_to_python(v: Any, depth: int = 0) -> Any:
    kind = v.WhichOneof("kind")
    if kind == "number_value":
        return v.number_value
    if kind == "string_value":
        return v.string_value
    if kind == "bool_value":
        return v.bool_value
    if depth > 32:  # deeper than any field takes: let validation refuse a placeholder
        return []
    if kind == "struct_value":
        return {k: _value_to_python(x, depth + 1) for k, x in v.struct_value.fields.items()}
    if kind == "list_value":
        return [_value_to_python(x, depth + 1) for x in v.list_value.values]
    return None


def to_message(data: Any, cls: type[Message], path: str = "") -> Message:
    """A message from a YAML-like mapping (or a report's `model_dump(mode="json")`); a key, type
    or word the message does not have is an InvalidInput naming its dotted path."""
    msg = cls()
    _fill(msg, data, path)
    return msg


# --- message -> dict -----------------------------------------------------------------------------


def _value_of(fd: FieldDescriptor, v: Any, complete: bool) -> Any:
    if fd.message_type is not None:
        if fd.message_type.full_name == VALUE_TYPE:
            return _value_to_python(v)
        return to_mapping(v, complete=complete)
    if fd.enum_type is not None:
        if v == 0:
            return None
        ev = fd.enum_type.values_by_number.get(v)
        if ev is None:  # a number from a newer schema
            return v
        return enum_words().get(fd.enum_type.full_name, {}).get(ev.name, ev.name)
    if fd.type in FLOAT_TYPES:
        return float(v)
    return v


def to_mapping(msg: Message, *, complete: bool = False) -> dict[str, Any]:
    """The mapping of a message: the fields that are set (a request: what the caller gave), or with
    `complete` every field of the pydantic model it mirrors (a report), unset ones as null."""
    desc = msg.DESCRIPTOR
    nullable = nullable_fields().get(desc.full_name, frozenset())
    model_fields = model_field_names().get(desc.full_name)
    out: dict[str, Any] = {}
    for fd in desc.fields:
        name = fd.name
        if is_map(fd):
            entries = getattr(msg, name)
            if entries or complete:
                vfd = fd.message_type.fields_by_name["value"]
                out[name] = {k: _value_of(vfd, entries[k], complete) for k in sorted(entries)}
        elif is_repeated(fd):
            items = getattr(msg, name)
            if items:
                out[name] = [_value_of(fd, x, complete) for x in items]
            elif complete and model_fields is not None and name in model_fields:
                out[name] = None if name in nullable else []
        elif fd.has_presence:
            if msg.HasField(name):
                out[name] = _value_of(fd, getattr(msg, name), complete)
            elif complete and model_fields is not None and name in model_fields:
                if name in nullable:
                    out[name] = None
                elif fd.message_type is not None:
                    out[name] = _value_of(fd, getattr(msg, name), complete)
        else:
            v = getattr(msg, name)
            if fd.enum_type is not None and v == 0:
                if complete and model_fields is not None and name in model_fields:
                    out[name] = None
            elif complete or v != fd.default_value:
                out[name] = _value_of(fd, v, complete)
    return out


# --- the RPCs ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rpc:
    """One unary RPC: its messages, the api function it calls and the request model it validates."""

    name: str
    api: str
    request: type[Message]
    response: type[Message]

    @property
    def method(self) -> str:
        return f"/planner.v1.PlannerService/{self.name}"


RPCS: dict[str, Rpc] = {
    r.name: r
    for r in (
        Rpc("Plan", "plan", pb.PlanRequest, pb.PlanResponse),
        Rpc("Evaluate", "evaluate", pb.EvaluateRequest, pb.EvaluateResponse),
        Rpc("Simulate", "simulate", pb.SimulateRequest, pb.SimulateResponse),
        Rpc("Analyze", "analyze", pb.AnalyzeRequest, pb.AnalyzeResponse),
        Rpc("Calibrate", "calibrate", pb.CalibrateRequest, pb.CalibrateResponse),
        Rpc("ListCatalog", "catalog", pb.ListCatalogRequest, pb.ListCatalogResponse),
    )
}


def request_to_mapping(request: Message) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the request as the YAML mapping a CLI user writes, the api call's keyword options)."""
    data = to_mapping(request)
    options = {k: data.pop(k) for k in CALL_OPTIONS.get(request.DESCRIPTOR.full_name, ()) if k in data}
    return data, options


def request_from_model(rpc: Rpc, request: BaseModel | Mapping[str, Any], **options: Any) -> Message:
    """The message of a pydantic request (only the fields it was given: defaults stay the
    server's) or of a YAML-like mapping."""
    data: Any = (
        request.model_dump(mode="json", exclude_unset=True)
        if isinstance(request, BaseModel)
        else dict(request)
    )
    data.update({k: v for k, v in options.items() if v is not None})
    return to_message(data, rpc.request)


def _report_message(report: BaseModel, cls: type[Message]) -> Message:
    try:
        return to_message(report.model_dump(mode="json"), cls)
    except InvalidInput as exc:  # a report the proto cannot carry is a bug, not the caller's input
        raise TypeError(f"{type(report).__name__} does not fit planner.v1.{cls.__name__}: {exc}") from None


_ANALYSES = ("concurrency", "static_batching", "chunked_prefill", "prefill", "utilization", "kv_capacity")


def response_from_report(rpc: Rpc, report: BaseModel) -> Message:
    """The RPC's response carrying an api report."""
    from planner.schema import reports

    if rpc.name == "Analyze":
        which = {
            reports.ConcurrencyReport: "concurrency",
            reports.StaticBatchingReport: "static_batching",
            reports.ChunkedPrefillReport: "chunked_prefill",
            reports.PrefillReport: "prefill",
            reports.UtilizationReport: "utilization",
            reports.KvCapacityReport: "kv_capacity",
        }[type(report)]
        sub = pb.AnalyzeResponse.DESCRIPTOR.fields_by_name[which].message_type
        replica = getattr(report, "replica")  # noqa: B009 - excluded from the dump, carried beside it
        return pb.AnalyzeResponse(
            replica=_report_message(replica, pb.ReplicaInfo),
            **{which: _report_message(report, _message_class(sub))},
        )
    if rpc.name == "ListCatalog":
        if isinstance(report, reports.GpuCatalogReport):
            return pb.ListCatalogResponse(gpus=_report_message(report, pb.GpuCatalogReport))
        return pb.ListCatalogResponse(models=_report_message(report, pb.ModelCatalogReport))
    report_field = rpc.response.DESCRIPTOR.fields_by_name["report"]
    return rpc.response(report=_report_message(report, _message_class(report_field.message_type)))


def _message_class(desc: Descriptor) -> type[Message]:
    cls: type[Message] = getattr(pb, desc.name)
    return cls


def report_from_response(rpc: Rpc, response: Message) -> BaseModel:
    """The api report a response carries (what the local call would have returned)."""
    from planner.schema import reports
    from planner.schema.plan_report import PlanReport

    if rpc.name == "Analyze":
        assert isinstance(response, pb.AnalyzeResponse)
        which = response.WhichOneof("report")
        if which is None:
            raise ValueError("AnalyzeResponse carries no report")
        cls: type[BaseModel] = {  # type: ignore[assignment]
            "concurrency": reports.ConcurrencyReport,
            "static_batching": reports.StaticBatchingReport,
            "chunked_prefill": reports.ChunkedPrefillReport,
            "prefill": reports.PrefillReport,
            "utilization": reports.UtilizationReport,
            "kv_capacity": reports.KvCapacityReport,
        }[which]
        data = to_mapping(getattr(response, which), complete=True)
        data["replica"] = to_mapping(response.replica, complete=True)
        return cls.model_validate(data)
    if rpc.name == "ListCatalog":
        assert isinstance(response, pb.ListCatalogResponse)
        if response.WhichOneof("report") == "gpus":
            return reports.GpuCatalogReport.model_validate(to_mapping(response.gpus, complete=True))
        return reports.ModelCatalogReport.model_validate(to_mapping(response.models, complete=True))
    model_cls: type[BaseModel] = {  # type: ignore[assignment]
        "Plan": PlanReport,
        "Evaluate": reports.EvaluateReport,
        "Simulate": reports.SimulateReport,
        "Calibrate": reports.CalibrateReport,
    }[rpc.name]
    return model_cls.model_validate(to_mapping(getattr(response, "report"), complete=True))  # noqa: B009


def walk_fields(desc: Descriptor, prefix: str = "") -> Iterator[tuple[str, FieldDescriptor]]:
    """Every (dotted path, field) under a message, once per message type (for fuzzing and docs)."""
    seen: set[str] = set()

    def go(d: Descriptor, p: str) -> Iterator[tuple[str, FieldDescriptor]]:
        if d.full_name in seen:
            return
        seen.add(d.full_name)
        for f in d.fields:
            path = _join(p, f.name)
            yield path, f
            if f.message_type is not None and not is_map(f) and f.message_type.full_name != VALUE_TYPE:
                yield from go(f.message_type, path)

    yield from go(desc, prefix)
