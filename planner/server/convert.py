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

import re
import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal, Union, get_args, get_origin

from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor
from google.protobuf.message import Message
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from planner.errors import InvalidInput, echo
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

_VALUE = "google.protobuf.Value"
_F = FieldDescriptor
_INT_TYPES = {_F.TYPE_INT32, _F.TYPE_INT64, _F.TYPE_SINT32, _F.TYPE_SINT64, _F.TYPE_UINT32, _F.TYPE_UINT64}
_INT_BOUNDS = {
    _F.TYPE_INT32: (-(2**31), 2**31 - 1),
    _F.TYPE_SINT32: (-(2**31), 2**31 - 1),
    _F.TYPE_INT64: (-(2**63), 2**63 - 1),
    _F.TYPE_SINT64: (-(2**63), 2**63 - 1),
    _F.TYPE_UINT32: (0, 2**32 - 1),
    _F.TYPE_UINT64: (0, 2**64 - 1),
}
_FLOAT_TYPES = {_F.TYPE_DOUBLE, _F.TYPE_FLOAT}


def _is_repeated(fd: FieldDescriptor) -> bool:
    return bool(fd.is_repeated)


def _is_map(fd: FieldDescriptor) -> bool:
    return fd.message_type is not None and fd.message_type.GetOptions().map_entry


# --- enums ---------------------------------------------------------------------------------------


def _enum_prefix(enum: EnumDescriptor) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", enum.name).upper() + "_"


def enum_value_name(enum: EnumDescriptor, word: str) -> str:
    """The proto name of a YAML word: Dtype, "bf16" -> DTYPE_BF16."""
    return _enum_prefix(enum) + re.sub(r"[^0-9A-Za-z]", "_", word).upper()


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
    if t == _F.TYPE_BOOL:
        if not isinstance(value, bool):
            raise InvalidInput(path, f"expected true or false, got {echo(value)}")
        return value
    if isinstance(value, str) and (t in _INT_TYPES or t in _FLOAT_TYPES):
        value = _number(value, path)  # YAML 1.1 reads 50.0e9 as a string; pydantic takes it as a number
    if t in _INT_TYPES:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            raise InvalidInput(path, f"expected an integer, got {echo(value)}")
        lo, hi = _INT_BOUNDS[t]
        if not lo <= value <= hi:
            raise InvalidInput(path, f"{value} is out of range [{lo}, {hi}]")
        return value
    if t in _FLOAT_TYPES:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidInput(path, f"expected a number, got {echo(value)}")
        return float(value)
    if t == _F.TYPE_STRING:
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
    words = _ENUM_WORDS().get(enum.full_name, {})
    return [words.get(v.name, v.name) for v in enum.values if v.number != 0]


def _fill(msg: Message, data: Any, path: str) -> None:
    desc = msg.DESCRIPTOR
    if desc.full_name == _VALUE:
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
        is_value = fd.message_type is not None and fd.message_type.full_name == _VALUE
        if value is None and not is_value:
            continue
        target = getattr(msg, key)
        if _is_map(fd):
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
        elif _is_repeated(fd):
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
        if fd.message_type.full_name == _VALUE:
            return _value_to_python(v)
        return to_mapping(v, complete=complete)
    if fd.enum_type is not None:
        if v == 0:
            return None
        ev = fd.enum_type.values_by_number.get(v)
        if ev is None:  # a number from a newer schema
            return v
        return _ENUM_WORDS().get(fd.enum_type.full_name, {}).get(ev.name, ev.name)
    if fd.type in _FLOAT_TYPES:
        return float(v)
    return v


def to_mapping(msg: Message, *, complete: bool = False) -> dict[str, Any]:
    """The mapping of a message: the fields that are set (a request: what the caller gave), or with
    `complete` every field of the pydantic model it mirrors (a report), unset ones as null."""
    desc = msg.DESCRIPTOR
    nullable = _NULLABLE().get(desc.full_name, frozenset())
    model_fields = _MODEL_FIELDS().get(desc.full_name)
    out: dict[str, Any] = {}
    for fd in desc.fields:
        name = fd.name
        if _is_map(fd):
            entries = getattr(msg, name)
            if entries or complete:
                vfd = fd.message_type.fields_by_name["value"]
                out[name] = {k: _value_of(vfd, entries[k], complete) for k in sorted(entries)}
        elif _is_repeated(fd):
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


# --- the schema: pydantic models beside their messages -------------------------------------------


def _roots() -> list[tuple[Descriptor, Any]]:
    from planner.schema import inputs, plan_report, plan_request, reports

    return [
        (pb.EvaluateRequest.DESCRIPTOR, inputs.EvaluateRequest),
        (pb.SimulateRequest.DESCRIPTOR, inputs.SimulateRequest),
        (pb.AnalyzeRequest.DESCRIPTOR, inputs.AnalyzeRequest),
        (pb.CalibrateRequest.DESCRIPTOR, inputs.CalibrateRequest),
        (pb.ListCatalogRequest.DESCRIPTOR, inputs.CatalogRequest),
        (pb.PlanRequest.DESCRIPTOR, plan_request.PlanRequest),
        (pb.EvaluateReport.DESCRIPTOR, reports.EvaluateReport),
        (pb.SimulateReport.DESCRIPTOR, reports.SimulateReport),
        (pb.ReplicaInfo.DESCRIPTOR, reports.ReplicaInfo),
        (pb.ConcurrencyReport.DESCRIPTOR, reports.ConcurrencyReport),
        (pb.StaticBatchingReport.DESCRIPTOR, reports.StaticBatchingReport),
        (pb.ChunkedPrefillReport.DESCRIPTOR, reports.ChunkedPrefillReport),
        (pb.PrefillReport.DESCRIPTOR, reports.PrefillReport),
        (pb.UtilizationReport.DESCRIPTOR, reports.UtilizationReport),
        (pb.KvCapacityReport.DESCRIPTOR, reports.KvCapacityReport),
        (pb.CalibrateReport.DESCRIPTOR, reports.CalibrateReport),
        (pb.GpuCatalogReport.DESCRIPTOR, reports.GpuCatalogReport),
        (pb.ModelCatalogReport.DESCRIPTOR, reports.ModelCatalogReport),
        (pb.PlanReport.DESCRIPTOR, plan_report.PlanReport),
    ]


# Proto fields with no pydantic field: arguments of the api call, not of the YAML schema.
CALL_OPTIONS: dict[str, tuple[str, ...]] = {"planner.v1.PlanRequest": ("verify",)}


@dataclass
class _Schema:
    enum_words: dict[str, dict[str, str]] = field(default_factory=dict)
    nullable: dict[str, set[str]] = field(default_factory=dict)
    model_fields: dict[str, set[str]] = field(default_factory=dict)
    mismatches: list[str] = field(default_factory=list)
    seen: set[tuple[str, tuple[str, ...]]] = field(default_factory=set)


def _strip_annotated(tp: Any) -> Any:
    while get_origin(tp) is typing.Annotated:
        tp = get_args(tp)[0]
    return tp


def _unwrap(tp: Any) -> tuple[list[Any], bool]:
    """(the non-None members of an annotation, whether None is allowed)."""
    tp = _strip_annotated(tp)
    if get_origin(tp) in (Union, types.UnionType):
        members = [_strip_annotated(a) for a in get_args(tp)]
        kept = [m for m in members if m is not type(None)]
        return kept, len(kept) < len(members)
    return [tp], False


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _walk_message(s: _Schema, desc: Descriptor, models: Sequence[type[BaseModel]], request: bool) -> None:
    key = (desc.full_name, tuple(sorted(m.__qualname__ for m in models)))
    if key in s.seen:
        return
    s.seen.add(key)
    annotations: dict[str, list[tuple[Any, Any]]] = {}
    for m in models:
        for name, info in m.model_fields.items():
            if info.exclude:
                continue
            annotations.setdefault(name, []).append((info.annotation, info))
    s.model_fields.setdefault(desc.full_name, set()).update(annotations)
    options = set(CALL_OPTIONS.get(desc.full_name, ()))
    proto_names = {f.name for f in desc.fields}
    where = f"planner.v1.{desc.name}"
    pyd = " | ".join(m.__name__ for m in models)
    for name in sorted(set(annotations) - proto_names):
        s.mismatches.append(f"{where}: no field {name!r} (pydantic {pyd} has it)")
    for name in sorted(proto_names - set(annotations) - options):
        s.mismatches.append(f"{where}.{name}: not a field of pydantic {pyd}")
    for name, anns in annotations.items():
        fd = desc.fields_by_name.get(name)
        if fd is None:
            continue
        for ann, info in anns:
            members, nullable = _unwrap(ann)
            if nullable:
                s.nullable.setdefault(desc.full_name, set()).add(name)
            # In a request, a field with a default must be distinguishable from unset.
            has_default = request and (
                info.default is not PydanticUndefined or info.default_factory is not None
            )
            _walk_field(s, f"{where}.{name}", fd, members, nullable, has_default, info.default, request)


def _walk_field(
    s: _Schema,
    where: str,
    fd: FieldDescriptor,
    members: list[Any],
    nullable: bool,
    has_default: bool,
    default: Any,
    request: bool,
) -> None:
    is_value = fd.message_type is not None and fd.message_type.full_name == _VALUE
    if nullable and has_default and default is not None and not is_value:
        s.mismatches.append(f"{where}: null means something other than unset; use google.protobuf.Value")
    if len(members) == 1:
        tp = members[0]
        origin = get_origin(tp)
        if origin in (list, tuple, Sequence):
            args = [a for a in get_args(tp) if a is not Ellipsis]
            if not _is_repeated(fd) or _is_map(fd):
                s.mismatches.append(f"{where}: pydantic has a list, the proto field is not repeated")
                return
            elem, _ = _unwrap(args[0])
            _walk_value(s, where, fd, elem, request)
            return
        if origin is dict:
            k, v = get_args(tp)
            k = _strip_annotated(k)
            vm, _ = _unwrap(v)
            if get_origin(k) is Literal:
                words = [str(w) for w in get_args(k)]
                if fd.message_type is None or _is_repeated(fd):
                    s.mismatches.append(f"{where}: a map keyed by {words} is a message with a field per key")
                    return
                got = [f.name for f in fd.message_type.fields]
                if got != words:
                    s.mismatches.append(f"{where}: keys {words} but message fields {got}")
                    return
                for f in fd.message_type.fields:
                    _walk_value(s, f"{where}.{f.name}", f, vm, request)
                return
            if not _is_map(fd):
                s.mismatches.append(f"{where}: pydantic has a dict, the proto field is not a map")
                return
            _walk_value(s, where, fd.message_type.fields_by_name["value"], vm, request)
            return
    if _is_repeated(fd) and not is_value:
        s.mismatches.append(f"{where}: repeated in the proto, not a list in pydantic")
        return
    if fd.message_type is None and fd.enum_type is None and (nullable or has_default) and not fd.has_presence:
        s.mismatches.append(f"{where}: may be unset or null; the proto field needs presence (optional)")
    if fd.enum_type is not None and fd.has_presence:
        s.mismatches.append(f"{where}: an enum is unset by _UNSPECIFIED, not `optional`")
    _walk_value(s, where, fd, members, request)


def _walk_value(s: _Schema, where: str, fd: FieldDescriptor, members: list[Any], request: bool) -> None:
    if fd.message_type is not None and fd.message_type.full_name == _VALUE:
        if not all(m in (str, int, float, bool) or get_origin(m) is Literal for m in members):
            s.mismatches.append(f"{where}: google.protobuf.Value for {members}")
        return
    if all(_is_model(m) for m in members):
        if fd.message_type is None:
            s.mismatches.append(f"{where}: pydantic has a model, the proto a scalar")
            return
        _walk_message(s, fd.message_type, members, request)
        return
    if len(members) != 1:
        s.mismatches.append(f"{where}: a union of {members} needs google.protobuf.Value")
        return
    tp = members[0]
    if get_origin(tp) is Literal:
        words = [str(w) for w in get_args(tp)]
        if fd.enum_type is None:
            s.mismatches.append(f"{where}: the words {words} need an enum")
            return
        names = {enum_value_name(fd.enum_type, w): w for w in words}
        table = s.enum_words.setdefault(fd.enum_type.full_name, {})
        for name, word in names.items():
            if name not in fd.enum_type.values_by_name:
                s.mismatches.append(f"{where}: enum {fd.enum_type.name} has no {name} for {word!r}")
            elif table.get(name, word) != word:
                s.mismatches.append(f"{where}: {name} is both {table[name]!r} and {word!r}")
            table[name] = word
        extra = [v.name for v in fd.enum_type.values if v.number != 0 and v.name not in names]
        # An enum shared by several fields may have values another field uses (Role, Dtype).
        if extra and fd.enum_type.name not in _SHARED_ENUMS:
            s.mismatches.append(f"{where}: enum values {extra} have no pydantic word")
        return
    expected = {
        bool: {_F.TYPE_BOOL},
        int: _INT_TYPES,
        float: _FLOAT_TYPES,
        str: {_F.TYPE_STRING},
    }.get(tp)
    if expected is None:
        s.mismatches.append(f"{where}: no proto type for {tp!r}")
    elif fd.type not in expected or fd.enum_type is not None:
        s.mismatches.append(f"{where}: pydantic {getattr(tp, '__name__', tp)} but proto type {fd.type}")


_SHARED_ENUMS = frozenset({"Dtype", "Role", "Mode", "Router", "Replay"})


@cache
def _schema() -> _Schema:
    s = _Schema()
    for desc, model in _roots():
        _walk_message(s, desc, [model], request=desc.name.endswith("Request"))
    return s


@cache
def _ENUM_WORDS() -> dict[str, dict[str, str]]:
    return _schema().enum_words


@cache
def _NULLABLE() -> dict[str, frozenset[str]]:
    return {k: frozenset(v) for k, v in _schema().nullable.items()}


@cache
def _MODEL_FIELDS() -> dict[str, frozenset[str]]:
    return {k: frozenset(v) for k, v in _schema().model_fields.items()}


def schema_mismatches() -> list[str]:
    """Every difference between the pydantic models and their planner.v1 messages."""
    return list(_schema().mismatches)


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
            if f.message_type is not None and not _is_map(f) and f.message_type.full_name != _VALUE:
                yield from go(f.message_type, path)

    yield from go(desc, prefix)
