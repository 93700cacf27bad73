"""The pydantic models beside their planner.v1 messages: the walk that pairs every request and
report model with its message, field by field, and what it learns for the conversion
(planner/server/convert.py): each enum's YAML words, the report fields that may be null, the
fields a model has. `schema_mismatches()` lists every field missing or typed differently on
either side (tests/test_proto_schema.py requires none)."""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal, Union, get_args, get_origin

from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from planner.v1 import planner_service_pb2 as pb

VALUE_TYPE = "google.protobuf.Value"
FD = FieldDescriptor
INT_TYPES = {FD.TYPE_INT32, FD.TYPE_INT64, FD.TYPE_SINT32, FD.TYPE_SINT64, FD.TYPE_UINT32, FD.TYPE_UINT64}
INT_BOUNDS = {
    FD.TYPE_INT32: (-(2**31), 2**31 - 1),
    FD.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FD.TYPE_INT64: (-(2**63), 2**63 - 1),
    FD.TYPE_SINT64: (-(2**63), 2**63 - 1),
    FD.TYPE_UINT32: (0, 2**32 - 1),
    FD.TYPE_UINT64: (0, 2**64 - 1),
}
FLOAT_TYPES = {FD.TYPE_DOUBLE, FD.TYPE_FLOAT}



def is_repeated(fd: FieldDescriptor) -> bool:
    return bool(fd.is_repeated)


def is_map(fd: FieldDescriptor) -> bool:
    return fd.message_type is not None and fd.message_type.GetOptions().map_entry


# --- enums ---------------------------------------------------------------------------------------


def enum_prefix(enum: EnumDescriptor) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", enum.name).upper() + "_"


def enum_value_name(enum: EnumDescriptor, word: str) -> str:
    """The proto name of a YAML word: Dtype, "bf16" -> DTYPE_BF16."""
    return enum_prefix(enum) + re.sub(r"[^0-9A-Za-z]", "_", word).upper()


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
    is_value = fd.message_type is not None and fd.message_type.full_name == VALUE_TYPE
    if nullable and has_default and default is not None and not is_value:
        s.mismatches.append(f"{where}: null means something other than unset; use google.protobuf.Value")
    if len(members) == 1:
        tp = members[0]
        origin = get_origin(tp)
        if origin in (list, tuple, Sequence):
            args = [a for a in get_args(tp) if a is not Ellipsis]
            if not is_repeated(fd) or is_map(fd):
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
                if fd.message_type is None or is_repeated(fd):
                    s.mismatches.append(f"{where}: a map keyed by {words} is a message with a field per key")
                    return
                got = [f.name for f in fd.message_type.fields]
                if got != words:
                    s.mismatches.append(f"{where}: keys {words} but message fields {got}")
                    return
                for f in fd.message_type.fields:
                    _walk_value(s, f"{where}.{f.name}", f, vm, request)
                return
            if not is_map(fd):
                s.mismatches.append(f"{where}: pydantic has a dict, the proto field is not a map")
                return
            _walk_value(s, where, fd.message_type.fields_by_name["value"], vm, request)
            return
    if is_repeated(fd) and not is_value:
        s.mismatches.append(f"{where}: repeated in the proto, not a list in pydantic")
        return
    if fd.message_type is None and fd.enum_type is None and (nullable or has_default) and not fd.has_presence:
        s.mismatches.append(f"{where}: may be unset or null; the proto field needs presence (optional)")
    if fd.enum_type is not None and fd.has_presence:
        s.mismatches.append(f"{where}: an enum is unset by _UNSPECIFIED, not `optional`")
    _walk_value(s, where, fd, members, request)


def _walk_value(s: _Schema, where: str, fd: FieldDescriptor, members: list[Any], request: bool) -> None:
    if fd.message_type is not None and fd.message_type.full_name == VALUE_TYPE:
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
        bool: {FD.TYPE_BOOL},
        int: INT_TYPES,
        float: FLOAT_TYPES,
        str: {FD.TYPE_STRING},
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
def enum_words() -> dict[str, dict[str, str]]:
    return _schema().enum_words


@cache
def nullable_fields() -> dict[str, frozenset[str]]:
    return {k: frozenset(v) for k, v in _schema().nullable.items()}


@cache
def model_field_names() -> dict[str, frozenset[str]]:
    return {k: frozenset(v) for k, v in _schema().model_fields.items()}


def schema_mismatches() -> list[str]:
    """Every difference between the pydantic models and their planner.v1 messages."""
    return list(_schema().mismatches)
