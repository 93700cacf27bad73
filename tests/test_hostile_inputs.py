"""What a hostile caller found (issue 33, "the remaining breaks" and "bounded echo"): each break
reproduced over the CLI, the Python API and gRPC, and the bounds that fix it."""

from __future__ import annotations

import copy
import json
import math
import warnings
from pathlib import Path
from typing import Any

import grpc
import pytest
import structlog
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner import api
from planner.client import PlannerClient
from planner.errors import ECHO_CHARS, InvalidInput, echo
from planner.latency.arrivals import company_count
from planner.server.interceptors import MAX_LOG_FIELD_CHARS, MAX_LOG_TRACEBACK_CHARS
from planner.server.service_errors import MAX_DETAILS_BYTES, MAX_MESSAGE_BYTES, BadRequest, status_of
from planner.v1 import planner_service_pb2 as pb
from tests.cli_helpers import run_cli, write
from tests.grpc_helpers import CHAT_PLAN, running_server, stub, violations

ROOT = Path(__file__).resolve().parent.parent
GRPC_METADATA_LIMIT_BYTES = 8 * 1024  # grpc.max_metadata_size's default (the response's trailers)

SMALL_PLAN: dict[str, Any] = {
    "model": "Qwen/Qwen3-8B",
    "slo": {"ttft_p99_ms": 500, "itl_p99_ms": 50},
    "workload": {
        "arrivals": {"requests_per_s": 5, "burstiness": 1},
        "input_tokens": {"percentiles": {"p50": 800, "p99": 4000}},
        "output_tokens": {"percentiles": {"p50": 200, "p99": 1000}},
    },
    "candidates": {"gpus": ["h100-sxm"], "tensor_parallel_sizes": [1], "disaggregation": "never"},
}


def _plan(**changes: Any) -> dict[str, Any]:
    req = copy.deepcopy(SMALL_PLAN)
    for path, value in changes.items():
        *head, last = path.split("__")
        node = req
        for k in head:
            node = node[k]
        node[last] = value
    return req


# --- burstiness 1e6 -------------------------------------------------------------------------------


def test_company_of_near_regular_arrivals_is_none_not_nan() -> None:
    # The state plan's capacity search reached at k = 1e6 (5 req/s, Qwen3-8B, h100, budget 1024):
    # the step under way has mean 29.5 ms and second moment 8.78e-4 s^2, so rate x L = 0.15 gaps.
    # Gaps of CV 0.001 put no other arrival within 0.15 of a gap of this one: P(K >= 1) was a
    # subnormal 1.1e-322 while E[K^2] kept the steps' own spread (2.7e-3), and the company's
    # second moment given any, E[K^2] / P(K >= 1), overflowed to inf (TTFT p99 NaN).
    cnt = company_count(1e6, 5.0, 0.0295, 8.78e-4)
    assert cnt == (0.0, 0.0, 0.0, 0.0, 0.0)
    # Poisson at the same step is untouched: P(K >= 1) = 1 - e^{-2 x 0.1475 / 2}... in closed form.
    mu = 5.0 * 0.0295
    assert company_count(1.0, 5.0, 0.0295, 8.78e-4).p_any == pytest.approx(-math.expm1(-mu), rel=1e-12)


def test_plan_at_burstiness_1e6_has_finite_latencies() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # the NaN surfaced as "invalid value" first
        report = api.plan(_plan(workload__arrivals__burstiness=1e6), workers=1)
    assert report.status == "OPTIMAL"
    assert report.predicted is not None
    assert math.isfinite(report.predicted.ttft_p99_ms) and math.isfinite(report.predicted.itl_p99_ms)
    # near-regular arrivals queue no more than Poisson ones: never more GPUs
    poisson = api.plan(_plan(), workers=1)
    assert report.gpu_count_peak <= poisson.gpu_count_peak


# --- KV link under 1e6 B/s ------------------------------------------------------------------------


def test_plan_kv_link_below_the_deployment_range_is_invalid_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    req = _plan(candidates__disaggregation="always", candidates__kv_transfer_bandwidth_bytes_per_s=5e5)
    with pytest.raises(InvalidInput) as exc:
        api.plan(req, workers=1)
    assert exc.value.field == "candidates.kv_transfer_bandwidth_bytes_per_s"
    assert "1000000" in exc.value.reason
    code, out, err = run_cli(["plan", str(write(tmp_path, yaml.safe_dump(req)))], capsys)
    assert code == 2, (out, err)
    assert "candidates.kv_transfer_bandwidth_bytes_per_s" in err and "Traceback" not in err


def test_plan_kv_link_at_the_range_floor_plans() -> None:
    req = _plan(candidates__disaggregation="always", candidates__kv_transfer_bandwidth_bytes_per_s=1e6)
    report = api.plan(req, workers=1)
    assert report.status in ("OPTIMAL", "INFEASIBLE")  # a 1 MB/s link may make the SLO unreachable


# --- prompts beyond the model's context -----------------------------------------------------------


def _small_context_model(tmp_path: Path, context: int) -> Path:
    config = json.loads((ROOT / "planner/catalog/data/models/Qwen--Qwen3-8B.config.json").read_text())
    config["max_position_embeddings"] = context
    path = tmp_path / "small.config.json"
    path.write_text(json.dumps(config))
    return path


def test_prompts_beyond_a_custom_models_context_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # vLLM refuses a prompt longer than max_model_len, which is at most max_position_embeddings.
    model = _small_context_model(tmp_path, 2048)
    req = _plan(model=str(model))
    with pytest.raises(InvalidInput) as exc:
        api.plan(req, workers=1)
    assert exc.value.field == "workload.input_tokens"
    assert "max_position_embeddings 2,048" in exc.value.reason
    code, _, err = run_cli(["plan", str(write(tmp_path, yaml.safe_dump(req)))], capsys)
    assert code == 2 and "max_position_embeddings 2,048" in err


def test_prompts_beyond_a_catalog_models_context_are_refused() -> None:
    # Qwen3-8B's config.json: max_position_embeddings 40,960.
    req = _plan(workload__input_tokens={"constant": 41_000})
    with pytest.raises(InvalidInput) as exc:
        api.plan(req, workers=1)
    assert exc.value.field == "workload.input_tokens" and "40,960" in exc.value.reason
    with pytest.raises(InvalidInput) as exc:
        api.plan({**req, "max_model_len": 40_960}, workers=1)
    assert exc.value.field == "max_model_len"


# --- api keywords ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("keywords", "field"),
    [
        ({"workers": "two"}, "workers"),
        ({"workers": 0}, "workers"),
        ({"workers": 65}, "workers"),
        ({"workers": 2.0}, "workers"),
        ({"workers": True}, "workers"),
        ({"verify": "no"}, "verify"),
        ({"verify": 1}, "verify"),
        ({"base_dir": 3}, "base_dir"),
        ({"base_dir": ["examples"]}, "base_dir"),
    ],
)
def test_plan_keywords_are_validated(keywords: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as exc:
        api.plan(SMALL_PLAN, **keywords)
    assert exc.value.field == field


@pytest.mark.parametrize("fn", [api.evaluate, api.simulate, api.analyze, api.calibrate, api.catalog])
def test_base_dir_is_validated_by_every_use_case(fn: Any) -> None:
    requests = {
        "evaluate": {
            "deployment": {"model": "Qwen/Qwen3-8B", "gpu": "h100-sxm"},
            "workload": SMALL_PLAN["workload"],
        },
        "simulate": {
            "deployment": {"model": "Qwen/Qwen3-8B", "gpu": "h100-sxm"},
            "workload": SMALL_PLAN["workload"],
        },
        "analyze": {
            "model": "Qwen/Qwen3-8B",
            "gpu": "h100-sxm",
            "concurrency": {"context_tokens": 1000, "concurrency": [1]},
        },
        "calibrate": {"measurements": {"path": "nowhere.csv"}, "model": "Qwen/Qwen3-8B", "gpu": "h100-sxm"},
        "catalog": {"kind": "gpus"},
    }
    with pytest.raises(InvalidInput) as exc:
        fn(requests[fn.__name__], base_dir=12)
    assert exc.value.field == "base_dir"


def test_plan_workers_takes_numpy_integers() -> None:
    import numpy as np

    assert api.plan(SMALL_PLAN, workers=np.int64(1)).status == "OPTIMAL"


# --- bounded echo ---------------------------------------------------------------------------------


def test_echo_cuts_long_values_and_shows_their_length() -> None:
    assert echo("two") == "'two'"
    long = echo("a" * 10_000)
    assert long.startswith("'aaaa") and long.endswith("… (10,000 chars)")
    assert len(long) < ECHO_CHARS + 20


def test_unknown_model_name_is_echoed_bounded() -> None:
    with pytest.raises(InvalidInput) as exc:
        api.plan(_plan(model="m" * 4 * 2**20), workers=1)
    assert exc.value.field == "model"
    assert "(4,194,304 chars)" in exc.value.reason
    assert len(str(exc.value)) < 2_000


def _metadata_bytes(status: Any) -> int:
    """What the status costs in trailers: grpc-message percent-encoded (at most 3 bytes per
    byte), grpc-status-details-bin base64 (4 per 3)."""
    return 3 * len(status.message.encode()) + 4 * (-(-status.ByteSize() // 3))


@settings(max_examples=200, deadline=None)
@given(
    field=st.text(min_size=0, max_size=50).map(lambda s: s * 1000),
    reason=st.tuples(st.text(min_size=1, max_size=20), st.integers(0, 300_000)).map(lambda t: t[0] * t[1]),
    count=st.integers(1, 3_000),
)
def test_any_status_fits_the_metadata_limit(field: str, reason: str, count: int) -> None:
    for exc in (InvalidInput(field, reason), BadRequest([(f"{field}{i}", reason) for i in range(count)])):
        status = status_of(exc, "r" * 500)
        assert len(status.message.encode()) <= MAX_MESSAGE_BYTES
        assert sum(d.ByteSize() for d in status.details) <= MAX_DETAILS_BYTES + 16
        assert _metadata_bytes(status) < GRPC_METADATA_LIMIT_BYTES * 3 // 4
        assert status.details, "the BadRequest detail is always there"


# --- over gRPC: a real server ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def address() -> Any:
    with running_server(workers=1) as (_, addr):
        yield addr


@pytest.fixture(scope="module")
def raw(address: str) -> Any:
    channel, s = stub(address)
    yield s
    channel.close()


_STRING_FIELDS = [
    lambda v: pb.EvaluateRequest(
        deployment=pb.Deployment(model=v, gpu="h100-sxm"),
        workload=pb.Workload(
            arrivals=pb.Arrivals(requests_per_s=1),
            input_tokens=pb.LengthDistribution(constant=100),
            output_tokens=pb.LengthDistribution(constant=10),
        ),
    ),
    lambda v: pb.EvaluateRequest(deployment=pb.Deployment(model="Qwen/Qwen3-8B", gpu=v)),
    lambda v: pb.EvaluateRequest(deployment=pb.Deployment(model="Qwen/Qwen3-8B", gpu="h100-sxm"), profile=v),
    lambda v: pb.SimulateRequest(deployment=pb.Deployment(model="Qwen/Qwen3-8B", gpu="h100-sxm"), trace=v),
]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    which=st.integers(0, len(_STRING_FIELDS) - 1),
    unit=st.text(min_size=1, max_size=8),
    repeat=st.sampled_from([1, 100, 10_000, 200_000]),
)
def test_any_string_field_of_any_length_keeps_its_bad_request_over_grpc(
    raw: Any, which: int, unit: str, repeat: int
) -> None:
    request = _STRING_FIELDS[which](unit * repeat)
    method = raw.Evaluate if isinstance(request, pb.EvaluateRequest) else raw.Simulate
    with pytest.raises(grpc.RpcError) as exc:
        method(request, timeout=30)
    assert exc.value.code() is grpc.StatusCode.INVALID_ARGUMENT, exc.value.details()
    assert violations(exc.value), "the google.rpc.BadRequest detail reached the client"


def test_ten_thousand_char_model_name_gets_its_bad_request(raw: Any) -> None:
    with pytest.raises(grpc.RpcError) as exc:
        raw.Evaluate(_STRING_FIELDS[0]("x" * 10_000), timeout=30)
    assert exc.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    [(field, description)] = violations(exc.value)
    assert field == "deployment.model" and "(10,000 chars)" in description


def test_log_lines_stay_bounded(raw: Any) -> None:
    with structlog.testing.capture_logs() as logs, pytest.raises(grpc.RpcError):
        raw.Evaluate(_STRING_FIELDS[0]("y" * 2 * 2**20), timeout=30)
    lines = [e for e in logs if e.get("event") == "rpc"]
    assert lines, logs
    for line in lines:
        assert len(json.dumps(line, default=str)) < MAX_LOG_FIELD_CHARS * 4 + MAX_LOG_TRACEBACK_CHARS


def test_client_sweep_answers_a_bad_scenario_and_solves_the_others(address: str) -> None:
    bad = copy.deepcopy(CHAT_PLAN)
    bad["workload"]["arrivals"]["burstiness"] = -1
    with PlannerClient(address, timeout_s=60) as c:
        results = sorted(
            c.sweep([("a", CHAT_PLAN), ("bad", bad), ("c", CHAT_PLAN), ("pair", (1, 2, 3))]),
            key=lambda r: r.index,
        )
    assert [r.index for r in results] == [0, 1, 2, 3]
    assert [r.name for r in results[:3]] == ["a", "bad", "c"]
    assert results[0].report is not None and results[0].error is None
    assert results[2].report is not None and results[2].report.status == results[0].report.status
    err = results[1].error
    assert results[1].report is None and isinstance(err, BadRequest)
    assert [f for f, _ in err.violations] == ["workload.arrivals.burstiness"]
    assert isinstance(results[3].error, BadRequest) and results[3].report is None


def test_a_plan_larger_than_the_solver_takes_is_too_large_not_a_crash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """More candidates x buckets than solvers.milp_data takes (here its limit lowered to 10 cells,
    which the 24 hourly buckets of a small plan exceed with one candidate) is TooLarge naming the
    solver's limit, which the service answers RESOURCE_EXHAUSTED; it was a bare ValueError
    (INTERNAL over gRPC)."""
    import solvers.milp_data as milp_data
    from planner.errors import TooLarge
    from planner.server.jobs import raise_error

    monkeypatch.setattr(milp_data, "MAX_CELLS", 10)
    request = _plan()
    request["workload"]["arrivals"] = {"buckets": [{"duration_s": 3600, "requests_per_s": 5}] * 24}
    with pytest.raises(TooLarge, match=r"candidates x buckets exceeds the limit 10"):
        api.plan(request, workers=1)
    with pytest.raises(TooLarge) as e:  # as a worker's answer crosses to the serving thread
        raise_error({"kind": "capplan", "type": "TooLarge", "message": "too large"})
    assert status_of(e.value).code == grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
