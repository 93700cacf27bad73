"""planner.v1 mirrors the api's pydantic requests and reports: no field missing on either side,
every example YAML round-trips through the proto to the same mapping, and every report
round-trips to the same model and the same `--json` bytes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from planner import api
from planner.errors import InvalidInput
from planner.schema import inputs, reports
from planner.schema.plan_request import PlanRequest, parse_plan_request
from planner.server import convert, proto_schema
from planner.v1 import planner_service_pb2 as pb

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
MEASUREMENTS = Path(__file__).resolve().parents[1] / "planner" / "costmodel" / "data" / "measurements"


# --- the schema ------------------------------------------------------------------------------------


def test_every_model_field_is_in_its_message_and_back() -> None:
    assert convert.schema_mismatches() == []


def test_the_walk_reports_a_missing_field() -> None:
    class Grown(reports.Floors):
        queue_p99_ms: float | None

    class Shrunk(BaseModel):
        ttft_p99_ms: float | None
        itl_p99_ms: float | None

    s = proto_schema._Schema()
    proto_schema._walk_message(s, pb.Floors.DESCRIPTOR, [Grown], request=False)
    assert any("no field 'queue_p99_ms'" in m for m in s.mismatches)
    s = proto_schema._Schema()
    proto_schema._walk_message(s, pb.Floors.DESCRIPTOR, [Shrunk], request=False)
    assert any("itl_mixed_step_ms: not a field" in m for m in s.mismatches)


def test_the_walk_reports_a_type_or_presence_mismatch() -> None:
    class Typed(BaseModel):
        ttft_p99_ms: str | None
        itl_p99_ms: float | None
        itl_mixed_step_ms: float | None

    s = proto_schema._Schema()
    proto_schema._walk_message(s, pb.Floors.DESCRIPTOR, [Typed], request=False)
    assert any("Floors.ttft_p99_ms: pydantic str" in m for m in s.mismatches)

    class Defaulted(BaseModel):  # a request field with a default needs presence
        model: str
        gpu: str
        measurements: str
        mape_percent: float = 0.0

    s = proto_schema._Schema()
    proto_schema._walk_message(s, pb.CalibrateReport.DESCRIPTOR, [Defaulted], request=True)
    assert any("mape_percent: may be unset" in m for m in s.mismatches)


# --- requests: the YAML a CLI user writes ----------------------------------------------------------


def _canonical(data: Any, desc: Any) -> Any:
    """A YAML mapping with its shorthands spelled out and number-like strings as numbers (YAML
    1.1 reads 50.0e9 as a string; pydantic and the proto take it as the number)."""
    data = convert._shorthand(desc, data)
    if not isinstance(data, dict) or desc.full_name == "google.protobuf.Value":
        return data
    out = {}
    for k, v in data.items():
        fd = desc.fields_by_name[k]
        if fd.message_type is not None and not fd.message_type.GetOptions().map_entry:
            v = (
                [_canonical(x, fd.message_type) for x in v]
                if fd.is_repeated
                else _canonical(v, fd.message_type)
            )
        elif isinstance(v, str) and fd.type in (fd.TYPE_DOUBLE, fd.TYPE_INT32, fd.TYPE_INT64):
            v = float(v)
        out[k] = v
    return out


def _request_kind(data: dict[str, Any]) -> tuple[type[Any], type[BaseModel]]:
    if "deployment" in data:
        return pb.EvaluateRequest, inputs.EvaluateRequest
    if "model" in data and "workload" in data:
        return pb.PlanRequest, PlanRequest
    raise AssertionError(f"no request type for keys {sorted(data)}")


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_example_yaml_round_trips_through_the_proto(path: Path) -> None:
    data = yaml.safe_load(path.read_text())
    cls, model = _request_kind(data)
    message = convert.to_message(data, cls)
    back = convert.to_mapping(message)
    assert back == _canonical(data, cls.DESCRIPTOR)
    # ... and the wire bytes carry it too
    again = convert.to_mapping(cls.FromString(message.SerializeToString()))
    assert again == back
    if model is PlanRequest:
        assert parse_plan_request(back) == parse_plan_request(data)
    else:
        assert inputs.validate_request(model, back) == inputs.validate_request(model, data)


def test_a_request_converts_to_exactly_the_keys_given() -> None:
    data = {
        "deployment": {"model": "Qwen/Qwen3-8B", "gpu": "h100-sxm", "replicas": 1},
        "workload": {"trace": "azure-conv-2023"},
    }
    back = convert.to_mapping(convert.to_message(data, pb.EvaluateRequest))
    assert back == data  # replicas: 1 given (the pydantic default, still "set"); nothing added


def test_value_fields_carry_a_word_a_number_or_null() -> None:
    for burstiness in ("gaps", "rescaled", 2.5):
        data = {"trace": "azure-conv-2023", "bucket_s": None, "burstiness": burstiness}
        back = convert.to_mapping(convert.to_message(data, pb.Workload))
        assert back == data  # bucket_s: null (one constant rate) is not bucket_s unset (60 s)
    assert "bucket_s" not in convert.to_mapping(convert.to_message({"trace": "azure-conv-2023"}, pb.Workload))


def test_enum_words_both_ways() -> None:
    m = convert.to_message({"disaggregation": "always", "weight_dtype": "fp8"}, pb.CandidateSpace)
    assert m.disaggregation == pb.DISAGGREGATION_POLICY_ALWAYS and m.weight_dtype == pb.DTYPE_FP8
    assert convert.to_mapping(m) == {"disaggregation": "always", "weight_dtype": "fp8"}
    assert convert.to_message({"weight_dtype": "DTYPE_BF16"}, pb.Deployment).weight_dtype == pb.DTYPE_BF16


@pytest.mark.parametrize(
    ("data", "field", "reason"),
    [
        ({"workload": {"arrivals": {"rate": 3}}}, "workload.arrivals.rate", "unknown field"),
        ({"deployment": {"weight_dtype": "int4"}}, "deployment.weight_dtype", "bf16, fp8"),
        ({"deployment": {"tp": 2**40}}, "deployment.tp", "out of range"),
        ({"deployment": {"tp": "two"}}, "deployment.tp", "expected a number"),
        ({"deployment": {"tp": True}}, "deployment.tp", "expected an integer"),
        (
            {"workload": {"input_tokens": {"pairs": [[1, 0.5], "x"]}}},
            "workload.input_tokens.pairs[1]",
            "mapping",
        ),
        ({"workload": {"input_tokens": {"samples": [1, None]}}}, "workload.input_tokens.samples[1]", "null"),
        ({"workload": []}, "workload", "expected a mapping"),
    ],
)
def test_conversion_errors_name_the_field(data: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(InvalidInput) as e:
        convert.to_message(data, pb.EvaluateRequest)
    assert e.value.field == field
    assert reason in e.value.reason


# --- reports: the JSON `--json` prints ------------------------------------------------------------


def _round_trip(rpc: str, report: BaseModel, keep_order: bool = True) -> None:
    r = convert.RPCS[rpc]
    wire = convert.response_from_report(r, report).SerializeToString()
    back = convert.report_from_response(r, r.response.FromString(wire))
    assert back == report
    # Byte for byte; a report with proto maps (keyed by open strings) gets them back sorted by key.
    sort = not keep_order
    assert json.dumps(back.model_dump(mode="json"), sort_keys=sort) == json.dumps(
        report.model_dump(mode="json"), sort_keys=sort
    )


@pytest.mark.parametrize("name", ["chat-qwen3-8b-h100.yaml", "disagg-llama70b-h100.yaml", "bursty-code.yaml"])
def test_evaluate_reports_round_trip_byte_for_byte(name: str) -> None:
    _round_trip("Evaluate", api.evaluate(yaml.safe_load((EXAMPLES / name).read_text()), base_dir=EXAMPLES))


def test_evaluate_report_with_buckets_round_trips() -> None:
    data = yaml.safe_load((EXAMPLES / "azure-conv-h200.yaml").read_text())
    data["slo"] = {"ttft_p99_ms": 300, "itl_p99_ms": 30}
    report = api.evaluate(data, base_dir=EXAMPLES)
    assert report.buckets  # a bucketed workload: one prediction per bucket
    _round_trip("Evaluate", report)


BASE = {"model": "Qwen/Qwen3-8B", "gpu": "h100-sxm"}
ANALYSES: list[dict[str, Any]] = [
    {"concurrency": {"context_tokens": 2048, "concurrency": [1, 64, 4096]}},
    {
        "static_batching": {
            "context_tokens": 1024,
            "batch": [1, 8],
            "output_lengths": {"pairs": [[100, 0.5], [900, 0.5]]},
        }
    },
    {
        "chunked_prefill": {
            "prompt_tokens": 8192,
            "decodes": 32,
            "context_tokens": 2048,
            "sizes_tokens": [0, 512, 2048],
        }
    },
    {"prefill": {"prompt_tokens": 4096}},
    {"utilization": {"context_tokens": 2048, "output_tokens_per_day": 1e7}},
    {"kv_capacity": {"context_tokens": 32768}},
]


@pytest.mark.parametrize("analysis", ANALYSES, ids=lambda a: next(iter(a)))
def test_analyze_reports_round_trip(analysis: dict[str, Any]) -> None:
    report = api.analyze({**BASE, **analysis})
    _round_trip("Analyze", report)
    assert report.replica.model == "Qwen/Qwen3-8B"  # excluded from the JSON, carried beside it


@pytest.mark.parametrize(
    "request_", [{"kind": "gpus"}, {"kind": "models"}, {"kind": "models", "name": "Qwen/Qwen3-30B-A3B"}]
)
def test_catalog_reports_round_trip(request_: dict[str, Any]) -> None:
    _round_trip("ListCatalog", api.catalog(request_))


def test_closed_loop_reports_round_trip() -> None:
    data = yaml.safe_load((EXAMPLES / "bench-closed-loop.yaml").read_text())
    evaluated = api.evaluate(data, base_dir=EXAMPLES)
    assert evaluated.closed_loop is not None and evaluated.closed_loop.limited_by == "concurrency"
    _round_trip("Evaluate", evaluated)
    simulated = api.simulate({**data, "requests": 200})
    assert simulated.closed_loop is not None and simulated.closed_loop.concurrency == 32
    _round_trip("Simulate", simulated)


def test_simulate_report_round_trips() -> None:
    data = yaml.safe_load((EXAMPLES / "chat-qwen3-8b-h100.yaml").read_text())
    report = api.simulate({**data, "requests": 300, "slo": {"ttft_p99_ms": 1000, "tpot_p99_ms": 50}})
    _round_trip("Simulate", report)


def test_calibrate_report_round_trips() -> None:
    doc = json.loads((MEASUREMENTS / "h200_qwen3_8b_shape.json").read_text())
    report = api.calibrate(
        {
            "model": "Qwen/Qwen3-8B",
            "gpu": "h200-sxm",
            "measurements": {"rows": doc["rows"], "about": "test"},
            "force": True,
        }
    )
    _round_trip("Calibrate", report, keep_order=False)  # parameters, ceilings: maps


def test_plan_report_round_trips() -> None:
    request = parse_plan_request(
        {
            "model": "Qwen/Qwen3-8B",
            "slo": {"ttft_p99_ms": 500, "itl_p99_ms": 50},
            "workload": {
                "arrivals": {
                    "buckets": [
                        {"duration_s": 3600, "requests_per_s": 4},
                        {"duration_s": 3600, "requests_per_s": 12},
                    ]
                },
                "input_tokens": {"constant": 1000},
                "output_tokens": {"constant": 200},
            },
            "candidates": {"gpus": ["h100-sxm"], "tensor_parallel_sizes": [1]},
        }
    )
    report = api.plan(request, workers=1)
    _round_trip("Plan", report)
    # the request itself crosses too, as the server receives it
    message = convert.request_from_model(convert.RPCS["Plan"], request, verify=True)
    data, options = convert.request_to_mapping(message)
    assert options == {"verify": True}
    assert parse_plan_request(data) == request
