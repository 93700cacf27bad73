"""planner.v1.PlannerService against a real server on port 0: every RPC answers what the local
api call answers, health and reflection work, errors carry the right codes and details,
deadlines bound the work, overload fails fast, and each call logs one line and counts in the
metrics."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from google.protobuf import descriptor_pb2
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_helpers import CHAT_PLAN, free_port, running_server, stub, violations
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from grpc_status import rpc_status
from structlog.testing import capture_logs

from planner import api
from planner.client import PlannerClient, ServiceError
from planner.errors import InvalidInput
from planner.server import convert
from planner.server.app import PlannerServer
from planner.server.policy import Limits
from planner.v1 import planner_service_pb2 as pb

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
MEASUREMENTS = Path(__file__).resolve().parents[1] / "planner" / "costmodel" / "data" / "measurements"
LIMITS = Limits(
    max_message_bytes=2**20, max_buckets=500, max_sweep_scenarios=20, max_simulated_requests=60_000
)


def _example(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((EXAMPLES / name).read_text())
    return data


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[PlannerServer, str]]:
    with running_server(workers=2, limits=LIMITS, reflection=True) as s:
        yield s


@pytest.fixture(scope="module")
def address(served: tuple[PlannerServer, str]) -> str:
    return served[1]


@pytest.fixture(scope="module")
def client(address: str) -> Iterator[PlannerClient]:
    with PlannerClient(address, timeout_s=60) as c:
        yield c


@pytest.fixture(scope="module")
def raw(address: str) -> Iterator[Any]:
    channel, s = stub(address)
    yield s
    channel.close()


def _json(report: Any) -> str:
    return json.dumps(report.model_dump(mode="json"))


# --- health and reflection -------------------------------------------------------------------------


def test_health_is_serving(address: str) -> None:
    with grpc.insecure_channel(address) as ch:
        h = health_pb2_grpc.HealthStub(ch)
        for service in ("", "planner.v1.PlannerService"):
            r = h.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
            assert r.status == health_pb2.HealthCheckResponse.SERVING
        with pytest.raises(grpc.RpcError) as e:
            h.Check(health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=5)
        assert e.value.code() is grpc.StatusCode.NOT_FOUND


def test_reflection_describes_the_service_without_the_proto(address: str) -> None:
    with grpc.insecure_channel(address) as ch:
        r = reflection_pb2_grpc.ServerReflectionStub(ch)
        asks = [
            reflection_pb2.ServerReflectionRequest(list_services=""),
            reflection_pb2.ServerReflectionRequest(file_containing_symbol="planner.v1.PlannerService"),
        ]
        listed, files = list(r.ServerReflectionInfo(iter(asks), timeout=5))
    names = {s.name for s in listed.list_services_response.service}
    assert {
        "planner.v1.PlannerService",
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
    } <= names
    fd = descriptor_pb2.FileDescriptorProto.FromString(
        files.file_descriptor_response.file_descriptor_proto[0]
    )
    methods = {m.name: m for m in fd.service[0].method}
    assert set(methods) == {"Plan", "Sweep", "Evaluate", "Simulate", "Analyze", "Calibrate", "ListCatalog"}
    assert methods["Sweep"].server_streaming


# --- every RPC answers what the api answers --------------------------------------------------------


def test_list_catalog(client: PlannerClient) -> None:
    for request in ({"kind": "gpus"}, {"kind": "models", "name": "Qwen/Qwen3-30B-A3B"}):
        assert _json(client.catalog(request)) == _json(api.catalog(request))


@pytest.mark.parametrize("name", ["chat-qwen3-8b-h100.yaml", "disagg-llama70b-h100.yaml"])
def test_evaluate(client: PlannerClient, name: str) -> None:
    data = _example(name)
    assert _json(client.evaluate(data)) == _json(api.evaluate(data, base_dir=EXAMPLES))


def test_evaluate_a_builtin_trace(client: PlannerClient) -> None:
    data = {**_example("azure-conv-h200.yaml"), "slo": {"ttft_p99_ms": 300, "itl_p99_ms": 30}}
    assert _json(client.evaluate(data)) == _json(api.evaluate(data))


def test_simulate(client: PlannerClient) -> None:
    data = {**_example("chat-qwen3-8b-h100.yaml"), "requests": 400, "seed": 3}
    assert _json(client.simulate(data)) == _json(api.simulate(data))


def test_analyze(client: PlannerClient) -> None:
    request = {
        "model": "Qwen/Qwen3-8B",
        "gpu": "h100-sxm",
        "concurrency": {"context_tokens": 2048, "concurrency": [1, 64]},
    }
    remote = client.analyze(request)
    assert _json(remote) == _json(api.analyze(request))
    assert remote.replica.gpu == "h100-sxm"


def test_calibrate(client: PlannerClient) -> None:
    rows = json.loads((MEASUREMENTS / "h200_qwen3_8b_shape.json").read_text())["rows"]
    request = {"model": "Qwen/Qwen3-8B", "gpu": "h200-sxm", "measurements": {"rows": rows}, "force": True}
    assert client.calibrate(request) == api.calibrate(request)


def test_plan_is_the_local_plan_byte_for_byte(client: PlannerClient) -> None:
    remote = client.plan(CHAT_PLAN)
    assert remote.status == "OPTIMAL"
    assert _json(remote) == _json(api.plan(CHAT_PLAN, workers=1))


def test_an_unmeetable_slo_is_an_ok_answer(client: PlannerClient) -> None:
    report = client.plan({**CHAT_PLAN, "slo": {"itl_p99_ms": 0.5}})
    assert report.status == "INFEASIBLE"
    assert report.infeasibility is not None and report.infeasibility.reason


def test_sweep_streams_every_scenario(address: str, raw: Any) -> None:
    scenarios = [
        (f"rate-{r}", {**CHAT_PLAN, "workload": {**CHAT_PLAN["workload"], "arrivals": {"requests_per_s": r}}})
        for r in (2, 8, 64)  # 2 replicas hold 2-32 req/s (availability.min_replicas 2); 64 needs 4
    ]
    with PlannerClient(address) as c:
        results = list(c.sweep(scenarios, streams=2))
    assert sorted(r.index for r in results) == [0, 1, 2]
    by_name = {r.name: r for r in results}
    assert all(r.error is None for r in results)
    gpus = [by_name[f"rate-{r}"].report.gpu_count_peak for r in (2, 8, 64)]  # type: ignore[union-attr]
    assert gpus == sorted(gpus) and gpus[0] < gpus[-1]  # more traffic, never fewer GPUs
    # a bad scenario is its own answer, named under scenarios[i].plan; the others are still solved
    bad = convert.to_message({**CHAT_PLAN, "slo": {"ttft_p99_ms": -1}}, pb.PlanRequest)
    good = convert.to_message(CHAT_PLAN, pb.PlanRequest)
    request = pb.SweepRequest(
        scenarios=[pb.SweepScenario(name="good", plan=good), pb.SweepScenario(name="bad", plan=bad)]
    )
    answers = {r.name: r for r in raw.Sweep(request, timeout=60)}
    assert answers["good"].WhichOneof("result") == "report"
    err = answers["bad"].error
    assert err.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    br = error_details_pb2.BadRequest()
    assert err.details[0].Unpack(br)
    assert br.field_violations[0].field == "scenarios[1].plan.slo.ttft_p99_ms"


# --- errors ----------------------------------------------------------------------------------------


def test_bad_fields_are_invalid_argument_with_every_field(raw: Any) -> None:
    data = _example("chat-qwen3-8b-h100.yaml")
    data["deployment"]["tp"] = 0
    data["workload"]["arrivals"]["requests_per_s"] = -3
    with pytest.raises(InvalidInput) as local:
        api.evaluate(data)
    with pytest.raises(grpc.RpcError) as e:
        raw.Evaluate(convert.to_message(data, pb.EvaluateRequest), timeout=30)
    assert e.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    found = violations(e.value)
    assert found[0] == (local.value.field, local.value.reason)  # the CLI's line comes first
    assert {f for f, _ in found} == {"deployment.tp", "workload.arrivals.requests_per_s"}
    assert e.value.details() == f"{local.value.field}: {local.value.reason}"


def test_the_client_raises_what_the_local_call_raises(client: PlannerClient) -> None:
    data = _example("chat-qwen3-8b-h100.yaml")
    data["deployment"]["tp"] = 3  # valid to pydantic; the domain refuses it (heads do not shard)
    with pytest.raises(InvalidInput) as local:
        api.evaluate(data)
    with pytest.raises(InvalidInput) as remote:
        client.evaluate(data)
    assert (remote.value.field, remote.value.reason) == (local.value.field, local.value.reason)
    assert remote.value.field == "deployment.tp"


@pytest.mark.parametrize(
    ("rpc", "data", "field"),
    [
        (
            "Evaluate",
            {
                "deployment": {"model": "/etc/passwd", "gpu": "h100-sxm"},
                "workload": {"trace": "azure-conv-2023"},
            },
            "deployment.model",
        ),
        (
            "Evaluate",
            {
                "deployment": {"model": "Qwen/Qwen3-8B", "gpu": "h100-sxm"},
                "workload": {"trace": "/etc/hosts"},
            },
            "workload.trace",
        ),
        ("Plan", {**CHAT_PLAN, "profile": "/tmp/profile.json"}, "profile"),
        (
            "Simulate",
            {
                "deployment": {"model": "Qwen/Qwen3-8B", "gpu": "h100-sxm"},
                "workload": {"trace": "azure-conv-2023"},
                "trace": "../x.csv",
            },
            "trace",
        ),
        (
            "Calibrate",
            {"model": "Qwen/Qwen3-8B", "gpu": "h200-sxm", "measurements": {"path": "/etc/shadow"}},
            "measurements.path",
        ),
    ],
)
def test_the_service_reads_no_files(raw: Any, rpc: str, data: dict[str, Any], field: str) -> None:
    with pytest.raises(grpc.RpcError) as e:
        getattr(raw, rpc)(convert.to_message(data, convert.RPCS[rpc].request), timeout=30)
    assert e.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert violations(e.value)[0][0] == field


def test_oversized_requests_are_resource_exhausted_with_the_limit(raw: Any) -> None:
    buckets = [{"duration_s": 3600, "requests_per_s": 5}] * 501
    data = {**CHAT_PLAN, "workload": {**CHAT_PLAN["workload"], "arrivals": {"buckets": buckets}}}
    with pytest.raises(grpc.RpcError) as e:
        raw.Plan(convert.to_message(data, pb.PlanRequest), timeout=30)
    assert e.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "at most 500" in e.value.details()
    status = rpc_status.from_call(e.value)
    qf = error_details_pb2.QuotaFailure()
    assert status is not None and status.details[0].Unpack(qf)
    assert qf.violations[0].subject == "workload.arrivals.buckets"

    plan = convert.to_message(CHAT_PLAN, pb.PlanRequest)
    sweep = pb.SweepRequest(scenarios=[pb.SweepScenario(name=str(i), plan=plan) for i in range(21)])
    with pytest.raises(grpc.RpcError) as e:
        list(raw.Sweep(sweep, timeout=30))
    assert e.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED and "at most 20" in e.value.details()

    big = {
        **CHAT_PLAN,
        "workload": {**CHAT_PLAN["workload"], "input_tokens": {"samples": list(range(1, 400_000))}},
    }
    with pytest.raises(grpc.RpcError) as e:  # over the 1 MiB message limit
        raw.Plan(convert.to_message(big, pb.PlanRequest), timeout=30)
    assert e.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED


def test_unexpected_errors_are_internal_without_a_traceback(
    raw: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("secret detail of the server")

    monkeypatch.setattr(api, "catalog", broken)  # ListCatalog runs on the serving thread
    with capture_logs() as logs, pytest.raises(grpc.RpcError) as e:
        raw.ListCatalog(pb.ListCatalogRequest(kind=pb.CATALOG_KIND_GPUS), timeout=10)
    assert e.value.code() is grpc.StatusCode.INTERNAL
    assert "secret" not in e.value.details() and "Traceback" not in e.value.details()
    rid = dict(e.value.trailing_metadata())["x-request-id"]
    assert rid in e.value.details()
    line = next(entry for entry in logs if entry["event"] == "rpc")
    assert (
        line["code"] == "INTERNAL" and "secret detail" in line["error"] and "Traceback" in line["traceback"]
    )


def test_bytes_that_are_not_the_message_are_invalid_argument(address: str) -> None:
    with grpc.insecure_channel(address) as ch:
        call = ch.unary_unary("/planner.v1.PlannerService/Evaluate")
        with pytest.raises(grpc.RpcError) as e:
            call(b"\x0a\xff\xff\xff\xff\x0f", timeout=10)
    assert e.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "not a valid planner.v1.EvaluateRequest" in e.value.details()


# --- deadlines -------------------------------------------------------------------------------------


def test_a_deadline_too_short_is_deadline_exceeded(raw: Any) -> None:
    data = {
        **_example("chat-qwen3-8b-h100.yaml"),
        "requests": 60_000,
    }  # the service's most: seconds of simulation
    start = time.perf_counter()
    with pytest.raises(grpc.RpcError) as e:
        raw.Simulate(convert.to_message(data, pb.SimulateRequest), timeout=0.3)
    assert e.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
    assert time.perf_counter() - start < 2


def test_the_deadline_caps_the_solver_time_limit(client: PlannerClient, address: str) -> None:
    request = {**CHAT_PLAN, "solver": {"time_limit_s": 600}}
    report = client.plan(request, timeout_s=8)
    assert report.solver.time_limit_s <= 0.75 * 8 + 0.01  # jobs.DEADLINE_SOLVER_SHARE of what is left
    assert report.status in ("OPTIMAL", "FEASIBLE")
    with PlannerClient(address, timeout_s=None) as unbounded:  # no deadline: the limit asked for
        assert unbounded.plan(request).solver.time_limit_s == 600


# --- overload, logs, metrics ----------------------------------------------------------------------


def test_overload_fails_fast_then_recovers() -> None:
    slow = {**_example("chat-qwen3-8b-h100.yaml"), "requests": 6000}
    quick = _example("chat-qwen3-8b-h100.yaml")
    with running_server(workers=1, queue_size=0) as (server, address):
        channel, s = stub(address)
        busy = s.Simulate.future(convert.to_message(slow, pb.SimulateRequest), timeout=60)
        deadline = time.monotonic() + 10
        while server.pool.admitted == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        start = time.perf_counter()
        with pytest.raises(grpc.RpcError) as e:
            s.Evaluate(convert.to_message(quick, pb.EvaluateRequest), timeout=30)
        assert e.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "server busy" in e.value.details()
        assert not busy.done()  # refused while the worker is busy: not queued behind it
        assert time.perf_counter() - start < 5
        assert busy.result().report.requests == 6000
        assert s.Evaluate(convert.to_message(quick, pb.EvaluateRequest), timeout=30).report.stable
        channel.close()


def test_one_log_line_per_rpc_with_request_id_and_summary(address: str) -> None:
    with capture_logs() as logs, PlannerClient(address, request_id="req-42") as c:
        c.plan({**CHAT_PLAN, "headroom": 0.23})  # a request not answered before: computed
    lines = [entry for entry in logs if entry["event"] == "rpc"]
    assert len(lines) == 1
    line = lines[0]
    assert line["method"] == "Plan" and line["request_id"] == "req-42" and line["code"] == "OK"
    assert line["peer"].startswith("ipv4:127.0.0.1:")
    assert line["duration_ms"] > 0 and line["compute_ms"] > 0
    assert line["plan_status"] == "OPTIMAL" and line["gpu_count_peak"] >= 1


def test_metrics_count_calls_and_serve_over_http(
    served: tuple[PlannerServer, str], client: PlannerClient
) -> None:
    server, _ = served
    reg = server.metrics.registry

    def count() -> float:
        return reg.get_sample_value("capplan_rpcs_total", {"method": "Evaluate", "code": "OK"}) or 0.0

    before = count()
    client.evaluate(_example("chat-qwen3-8b-h100.yaml"))
    assert count() == before + 1
    assert (reg.get_sample_value("capplan_compute_seconds_count", {"method": "Evaluate"}) or 0) >= 1
    assert reg.get_sample_value("capplan_queue_depth") == 0
    port = free_port()
    with running_server(workers=1, metrics_port=port) as (other, address), PlannerClient(address) as c:
        c.catalog({"kind": "gpus"})
        body = (
            urllib.request.urlopen(f"http://127.0.0.1:{other.metrics_port}/metrics", timeout=5)
            .read()
            .decode()
        )
    assert 'capplan_rpcs_total{code="OK",method="ListCatalog"} 1.0' in body
    assert "capplan_rpc_duration_seconds_bucket" in body


# --- several servers -------------------------------------------------------------------------------


def test_one_client_balances_over_two_servers(served: tuple[PlannerServer, str]) -> None:
    first, a = served
    with running_server(workers=1) as (second, b), PlannerClient([a, b]) as c:

        def evaluations(s: PlannerServer) -> float:
            return (
                s.metrics.registry.get_sample_value(
                    "capplan_rpcs_total", {"method": "Evaluate", "code": "OK"}
                )
                or 0.0
            )

        before = evaluations(first)
        for _ in range(6):
            c.evaluate(_example("chat-qwen3-8b-h100.yaml"))
        assert evaluations(first) - before > 0 and evaluations(second) > 0
        scenarios = [{**CHAT_PLAN, "headroom": 0.05 * i} for i in range(8)]
        results = list(c.sweep(scenarios, streams=4))
        assert sorted(r.index for r in results) == list(range(8))
        assert (
            second.metrics.registry.get_sample_value("capplan_sweep_scenarios_total", {"code": "OK"}) or 0
        ) > 0


def test_a_server_error_reaches_the_client_as_a_service_error(client: PlannerClient) -> None:
    with pytest.raises(ServiceError) as e:
        # ~3 s of simulation on this machine (never answered from the server's cache: its own seed),
        # against a 0.2 s deadline
        client.simulate(
            {**_example("chat-qwen3-8b-h100.yaml"), "requests": 30000, "seed": 424242}, timeout_s=0.2
        )
    assert e.value.code is grpc.StatusCode.DEADLINE_EXCEEDED


def test_a_repeated_request_is_answered_from_the_cache(served: tuple[PlannerServer, str], raw: Any) -> None:
    server, _ = served
    reg = server.metrics.registry
    request = convert.to_message({**CHAT_PLAN, "headroom": 0.37}, pb.PlanRequest)

    def lookups(result: str) -> float:
        return (
            reg.get_sample_value("capplan_cache_lookups_total", {"method": "Plan", "result": result}) or 0.0
        )

    hits = lookups("hit")
    first = raw.Plan(request, timeout=None)
    with capture_logs() as logs:
        again = raw.Plan(request, timeout=None)
    assert again.SerializeToString() == first.SerializeToString()
    assert lookups("hit") == hits + 1
    # (the previous test's cut-off Simulate may log its own line late, on a busy machine)
    assert next(e for e in logs if e["event"] == "rpc" and e.get("method") == "Plan").get("cache") == "hit"
    # an answer the deadline shaped (the solver limit cut) is not kept
    cut = convert.to_message({**CHAT_PLAN, "headroom": 0.41, "solver": {"time_limit_s": 900}}, pb.PlanRequest)
    raw.Plan(cut, timeout=20)
    misses = lookups("miss")
    raw.Plan(cut, timeout=20)
    assert lookups("miss") == misses + 1


def test_cheap_calls_overtake_queued_plans() -> None:
    slow = {**_example("chat-qwen3-8b-h100.yaml"), "requests": 4000}
    with running_server(workers=1, queue_size=4, cache_bytes=0) as (server, address):
        channel, s = stub(address)
        busy = s.Simulate.future(convert.to_message(slow, pb.SimulateRequest), timeout=60)
        end = time.monotonic() + 10
        while server.pool.admitted == 0 and time.monotonic() < end:
            time.sleep(0.01)
        done: list[str] = []
        plan = s.Plan.future(convert.to_message(CHAT_PLAN, pb.PlanRequest), timeout=60)
        plan.add_done_callback(lambda _: done.append("Plan"))
        while server.pool.admitted < 2 and time.monotonic() < end:
            time.sleep(0.01)
        evaluate = s.Evaluate.future(
            convert.to_message(_example("chat-qwen3-8b-h100.yaml"), pb.EvaluateRequest), timeout=60
        )
        evaluate.add_done_callback(lambda _: done.append("Evaluate"))
        assert busy.result().report.requests == 4000
        plan.result()
        evaluate.result()
        assert done == ["Evaluate", "Plan"]  # queued after the plan, run before it
        channel.close()


def test_no_plan_within_a_deadline_cut_limit_is_deadline_exceeded(monkeypatch: pytest.MonkeyPatch) -> None:
    from planner.schema.plan_request import parse_plan_request
    from planner.server import jobs

    real = api.plan(CHAT_PLAN, workers=1)
    asked: list[float] = []

    def no_solution(request: Any, **_: Any) -> Any:  # what the solver says when time runs out
        asked.append(parse_plan_request(request).solver.time_limit_s)  # validated, then cut
        return real.model_copy(update={"status": "NO_SOLUTION"})

    monkeypatch.setattr(api, "plan", no_solution)
    result = jobs.run_job("Plan", dict(CHAT_PLAN), {}, time.time() + 4.0)
    assert result["error"]["kind"] == "deadline" and asked[-1] <= 3.0  # 75% of the 4 s left
    # the caller's own time limit (no deadline cut it): NO_SOLUTION is the answer
    result = jobs.run_job("Plan", dict(CHAT_PLAN), {}, None)
    assert "response" in result and asked[-1] == jobs.DEFAULT_SOLVER_TIME_LIMIT_S
    # a deadline that leaves more than the limit asked for does not cut it
    result = jobs.run_job("Plan", {**CHAT_PLAN, "solver": {"time_limit_s": 1}}, {}, time.time() + 60)
    assert "response" in result and asked[-1] == 1
    # queued past its deadline: not started
    assert jobs.run_job("Plan", dict(CHAT_PLAN), {}, time.time() - 1)["error"]["kind"] == "deadline"
