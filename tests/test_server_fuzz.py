"""Fuzzing the service: random request messages of every RPC (from scratch, and mutations of a
valid request so they get past validation into the models and the solver) and random bytes on
the wire. Every call is answered with a status a caller can act on, never INTERNAL or UNKNOWN,
and the server keeps serving the next call."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from google.protobuf import struct_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_helpers import CHAT_PLAN, running_server
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.server import convert
from planner.server.policy import Limits
from planner.v1 import planner_service_pb2 as pb

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
MEASUREMENTS = Path(__file__).resolve().parents[1] / "planner" / "costmodel" / "data" / "measurements"
ROWS = json.loads((MEASUREMENTS / "h200_qwen3_8b_shape.json").read_text())["rows"]
ACTIONABLE = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.FAILED_PRECONDITION,
}
# Small limits keep a valid random request cheap; a deadline bounds the rest.
LIMITS = Limits(max_buckets=24, max_candidate_configs=40, max_sweep_scenarios=4, max_simulated_requests=1500,
                max_length_samples=2000)  # fmt: skip
CALL_TIMEOUT_S = 4.0
FUZZ = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))

WORDS = ["Qwen/Qwen3-8B", "meta-llama/Llama-3.1-70B-Instruct", "h100-sxm", "h200-sxm", "l40s", "auto",
         "theoretical", "calibrated", "azure-conv-2023", "azure-code-2023", "gaps", "rescaled", "p50", "p99.9",
         "max", "", "../../etc/passwd", "/dev/zero", "\x00", "é" * 3]  # fmt: skip


def _scalar(fd: FieldDescriptor) -> st.SearchStrategy[Any]:
    t = fd.type
    if fd.enum_type is not None:
        return st.integers(0, len(fd.enum_type.values) + 1)
    if t == fd.TYPE_BOOL:
        return st.booleans()
    if t in (fd.TYPE_INT32, fd.TYPE_SINT32):
        return st.one_of(st.integers(-2, 9000), st.sampled_from([0, -(2**31), 2**31 - 1, 65536, 1 << 20]))
    if t in (fd.TYPE_INT64, fd.TYPE_SINT64):
        return st.one_of(st.integers(-2, 9000), st.sampled_from([-(2**63), 2**63 - 1]))
    if t in (fd.TYPE_DOUBLE, fd.TYPE_FLOAT):
        return st.one_of(
            st.floats(-1, 5000),
            st.sampled_from([0.0, -0.0, 1e-300, 1e300, float("inf"), float("-inf"), float("nan")]),
        )
    return st.one_of(st.sampled_from(WORDS), st.text(max_size=12))


def _json_value() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.none(),
        st.booleans(),
        st.floats(allow_nan=False),
        st.sampled_from(WORDS),
        st.lists(st.integers(), max_size=2),
    )


@st.composite
def messages(draw: st.DrawFn, desc: Descriptor, depth: int = 0, fields_in_10: int = 5) -> Message:
    """A message with about `fields_in_10` of every 10 fields set (at every level) to values
    from the edges of their types."""
    msg: Message = getattr(pb, desc.name)() if desc.file is pb.DESCRIPTOR else struct_pb2.Value()
    for fd in desc.fields:
        if draw(st.integers(0, 9)) >= fields_in_10:
            continue
        target = getattr(msg, fd.name)
        if fd.message_type is not None and fd.message_type.full_name == "google.protobuf.Value":
            msg_value = struct_pb2.Value()
            from google.protobuf import json_format

            json_format.ParseDict(draw(_json_value()), msg_value)
            (target.add() if fd.is_repeated else target).CopyFrom(msg_value)
        elif fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            vfd = fd.message_type.fields_by_name["value"]
            for key in draw(st.lists(st.sampled_from(WORDS), max_size=2)):
                if vfd.message_type is not None:
                    if depth < 4:
                        target[key].CopyFrom(draw(messages(vfd.message_type, depth + 1, fields_in_10)))
                else:
                    target[key] = draw(_scalar(vfd))
        elif fd.message_type is not None:
            if depth >= 4:
                continue
            if fd.is_repeated:
                for sub in draw(st.lists(messages(fd.message_type, depth + 1, fields_in_10), max_size=3)):
                    target.add().CopyFrom(sub)
            else:
                target.CopyFrom(draw(messages(fd.message_type, depth + 1, fields_in_10)))
        elif fd.is_repeated:
            target.extend(draw(st.lists(_scalar(fd), max_size=4)))
        else:
            setattr(msg, fd.name, draw(_scalar(fd)))
    return msg


def _base(rpc: str) -> Message:
    """A valid request of each RPC, for mutations to start from."""
    chat = yaml.safe_load((EXAMPLES / "chat-qwen3-8b-h100.yaml").read_text())
    data: dict[str, Any] = {
        "Plan": CHAT_PLAN,
        "Evaluate": chat,
        "Simulate": {**chat, "requests": 200},
        "Analyze": {"model": "Qwen/Qwen3-8B", "gpu": "h100-sxm", "prefill": {"prompt_tokens": 2048}},
        "Calibrate": {
            "model": "Qwen/Qwen3-8B",
            "gpu": "h200-sxm",
            "measurements": {"rows": ROWS},
            "force": True,
        },
        "ListCatalog": {"kind": "models"},
    }[rpc]
    return convert.to_message(data, convert.RPCS[rpc].request)


@pytest.fixture(scope="module")
def address() -> Iterator[str]:
    with running_server(workers=2, limits=LIMITS) as (_, addr):
        yield addr


@pytest.fixture(scope="module")
def channel(address: str) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(address) as ch:
        yield ch


def _call(channel: grpc.Channel, method: str, payload: bytes, streaming: bool) -> grpc.StatusCode:
    path = f"/planner.v1.PlannerService/{method}"
    try:
        if streaming:
            for _ in channel.unary_stream(path)(payload, timeout=CALL_TIMEOUT_S):
                pass
        else:
            channel.unary_unary(path)(payload, timeout=CALL_TIMEOUT_S)
    except grpc.RpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


def _still_serving(channel: grpc.Channel) -> None:
    r = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
    assert r.status == health_pb2.HealthCheckResponse.SERVING


UNARY = ["Plan", "Evaluate", "Simulate", "Analyze", "Calibrate", "ListCatalog"]


@pytest.mark.parametrize("rpc", [*UNARY, "Sweep"])
def test_random_requests_get_an_actionable_status(channel: grpc.Channel, rpc: str) -> None:
    desc = pb.SweepRequest.DESCRIPTOR if rpc == "Sweep" else convert.RPCS[rpc].request.DESCRIPTOR

    @FUZZ
    @given(messages(desc))
    def check(message: Message) -> None:
        code = _call(channel, rpc, message.SerializeToString(), streaming=rpc == "Sweep")
        assert code in ACTIONABLE, f"{rpc} answered {code.name} for {message}"
        _still_serving(channel)

    check()


@pytest.mark.parametrize("rpc", UNARY)
def test_mutated_valid_requests_get_an_actionable_status(channel: grpc.Channel, rpc: str) -> None:
    base = _base(rpc)
    seen: list[grpc.StatusCode] = []

    @FUZZ
    @given(messages(base.DESCRIPTOR, fields_in_10=1))
    def check(patch: Message) -> None:
        message = type(base)()
        message.CopyFrom(base)
        message.MergeFrom(patch)
        code = _call(channel, rpc, message.SerializeToString(), streaming=False)
        seen.append(code)
        assert code in ACTIONABLE, f"{rpc} answered {code.name} for {convert.to_mapping(message)}"

    assert _call(channel, rpc, base.SerializeToString(), streaming=False) is grpc.StatusCode.OK
    check()
    _still_serving(channel)
    assert grpc.StatusCode.OK in seen, seen  # mutations get through to the models


@pytest.mark.parametrize("rpc", [*UNARY, "Sweep"])
def test_random_bytes_on_the_wire(channel: grpc.Channel, rpc: str) -> None:
    @FUZZ
    @given(st.binary(max_size=300))
    def check(payload: bytes) -> None:
        code = _call(channel, rpc, payload, streaming=rpc == "Sweep")
        assert code in ACTIONABLE, f"{rpc} answered {code.name} for {payload!r}"

    check()
    _still_serving(channel)
    # and a real call right after
    ok = channel.unary_unary("/planner.v1.PlannerService/ListCatalog")(
        pb.ListCatalogRequest(kind=pb.CATALOG_KIND_GPUS).SerializeToString(), timeout=10
    )
    assert pb.ListCatalogResponse.FromString(ok).gpus.gpus
