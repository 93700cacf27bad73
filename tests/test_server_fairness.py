"""Fairness (planner/server/admission.py): health and ListCatalog answer while another client
holds every Sweep it may; a call over a limit fails at once with RESOURCE_EXHAUSTED naming the
limit; one peer at its limit does not stop another."""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_helpers import CHAT_PLAN, running_server, stub
from grpc_status import rpc_status

from planner.errors import InvalidInput
from planner.server import convert
from planner.server.admission import Admission, AdmissionLimits, Fairness, Throttled, peer_address
from planner.server.auth import BearerTokens
from planner.v1 import planner_service_pb2 as pb

ALICE = "alice-0123456789abcdef"
BOB = "bob-0123456789abcdef0"


def _sweep(n: int, offset: float) -> pb.SweepRequest:
    """n distinct plans (no answer cached), each a worker's ~20-200 ms: a sweep held for seconds
    on one worker."""
    scenarios = []
    for i in range(n):
        data: dict[str, Any] = copy.deepcopy(CHAT_PLAN)
        data["workload"]["arrivals"]["requests_per_s"] = round(offset + 1 + 0.37 * i, 3)
        scenarios.append(pb.SweepScenario(name=f"s{i}", plan=convert.to_message(data, pb.PlanRequest)))
    return pb.SweepRequest(scenarios=scenarios)


def _quota_subjects(err: grpc.RpcError) -> list[str]:
    status = rpc_status.from_call(err)
    assert status is not None
    out = []
    for d in status.details:
        q = error_details_pb2.QuotaFailure()
        if d.Unpack(q):
            out.extend(v.subject for v in q.violations)
    return out


def _wait_done(calls: list[Any], n: int, timeout_s: float = 30) -> list[Any]:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        done = [c for c in calls if c.done()]
        if len(done) >= n:
            return done
        time.sleep(0.02)
    raise AssertionError(f"only {sum(c.done() for c in calls)} of {n} calls ended")


def _health_latencies_s(address: str, n: int) -> list[float]:
    with grpc.insecure_channel(address) as ch:
        h = health_pb2_grpc.HealthStub(ch)
        h.Check(health_pb2.HealthCheckRequest(), timeout=5)  # connect
        out = []
        for _ in range(n):
            start = time.perf_counter()
            r = h.Check(health_pb2.HealthCheckRequest(), timeout=5)
            out.append(time.perf_counter() - start)
            assert r.status == health_pb2.HealthCheckResponse.SERVING
    return out


# --- against a real server ------------------------------------------------------------------------


def test_health_answers_while_another_client_holds_100_sweeps() -> None:
    """The issue's attack: one client opens 100 Sweeps (held: one worker, slow scenarios). It gets
    its 8 streams (the per-peer default); the other 92 fail at once naming the limit; health and
    ListCatalog from another connection answer in milliseconds throughout."""
    with running_server(workers=1) as (_, address):
        channel, s = stub(address)
        calls = [s.Sweep(_sweep(40, k), timeout=60) for k in range(100)]
        try:
            refused = _wait_done(calls, 92)
            assert len(refused) == 92
            for call in refused:
                assert call.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
                assert "--max-streams-per-peer" in call.details()
                assert _quota_subjects(call) == ["--max-streams-per-peer"]
            held = [c for c in calls if not c.done()]
            assert len(held) == 8
            latencies = _health_latencies_s(address, 30)
            assert statistics.median(latencies) < 0.1, latencies
            assert max(latencies) < 1.0, latencies
            ch2, s2 = stub(address)
            start = time.perf_counter()
            s2.ListCatalog(pb.ListCatalogRequest(kind=pb.CATALOG_KIND_GPUS), timeout=5)
            assert time.perf_counter() - start < 1.0
            ch2.close()
            assert sum(not c.done() for c in held) == 8  # still held while health answered
        finally:
            for call in calls:
                call.cancel()
            channel.close()


def test_one_peer_at_its_limit_does_not_stop_another(tmp_path: Path) -> None:
    """With tokens the peer is the token's name: alice at her stream limit gets RESOURCE_EXHAUSTED
    for a third Sweep, bob's Sweep is admitted and answered, alice's catalog call still answers."""
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice {ALICE}\nbob {BOB}\n")
    auth = BearerTokens.from_file(str(tokens))
    fairness = Fairness(max_calls=20, max_streams_per_peer=2)
    with running_server(workers=1, auth=auth, fairness=fairness) as (_, address):
        channel, s = stub(address)
        alice = (("authorization", f"Bearer {ALICE}"),)
        held = [s.Sweep(_sweep(1000, k), timeout=60, metadata=alice) for k in range(2)]
        try:
            time.sleep(0.3)  # both admitted (their first scenarios are computing)
            with pytest.raises(grpc.RpcError) as e:
                list(s.Sweep(_sweep(1, 99), timeout=10, metadata=alice))
            assert e.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
            assert (
                "token:alice" in e.value.details() and "limit 2 (--max-streams-per-peer)" in e.value.details()
            )
            s.ListCatalog(pb.ListCatalogRequest(kind=pb.CATALOG_KIND_GPUS), timeout=5, metadata=alice)
            for c in held:
                c.cancel()  # alice's running scenarios finish; bob's scenario waits for the worker
            bob = (("authorization", f"Bearer {BOB}"),)
            (answer,) = list(s.Sweep(_sweep(1, 77), timeout=60, metadata=bob))
            assert answer.WhichOneof("result") == "report"
        finally:
            for c in held:
                c.cancel()
            channel.close()


# --- the accounting -------------------------------------------------------------------------------


def test_admission_counts_per_peer_and_overall() -> None:
    a = Admission(AdmissionLimits(max_calls=4, max_streams=2, max_calls_per_peer=3, max_streams_per_peer=1))
    a.enter("p", stream=True)
    with pytest.raises(Throttled, match=r"streams from p: 1 held, limit 1 \(--max-streams-per-peer\)"):
        a.enter("p", stream=True)
    a.enter("q", stream=True)
    with pytest.raises(Throttled, match=r"--max-calls") as e:  # both streams of the server taken
        a.enter("r", stream=True)
    assert e.value.field == "--max-calls" and e.value.limit == 2
    a.enter("p", stream=False)
    a.enter("p", stream=False)
    with pytest.raises(Throttled, match=r"calls from p: 3 held, limit 3 \(--max-calls-per-peer\)"):
        a.enter("p", stream=False)
    with pytest.raises(Throttled, match=r"long calls: 4 held, limit 4 \(--max-calls\)"):
        a.enter("r", stream=False)
    assert a.held() == (4, 2)
    a.leave("p", stream=True)
    a.leave("p", stream=False)
    a.leave("p", stream=False)
    a.leave("q", stream=True)
    assert a.held() == (0, 0)
    a.enter("p", stream=True)  # released: admitted again


def test_fairness_defaults_follow_the_pool() -> None:
    # 2 workers + 64 queued = 66 jobs: 132 handlers, 66 of them streams, 8 per peer; a peer may
    # hold what the pool takes (66) plus its 8 streams.
    assert Fairness().resolve(66) == AdmissionLimits(132, 66, 74, 8)
    # One worker, no queue: 2 handlers, 1 stream; one peer may hold both.
    assert Fairness().resolve(1) == AdmissionLimits(2, 1, 2, 1)
    assert Fairness(max_calls=10, max_streams_per_peer=5).resolve(66) == AdmissionLimits(10, 5, 10, 5)
    with pytest.raises(InvalidInput, match="--max-streams-per-peer"):
        Fairness(max_calls=10, max_streams_per_peer=6).resolve(66)
    with pytest.raises(InvalidInput, match="--max-calls-per-peer"):
        Fairness(max_calls=10, max_calls_per_peer=11).resolve(66)
    with pytest.raises(InvalidInput, match="--max-calls"):
        Fairness(max_calls=0).resolve(66)


@pytest.mark.parametrize(
    ("peer", "key"),
    [
        ("ipv4:10.0.0.5:41234", "ipv4:10.0.0.5"),
        ("ipv6:[::1]:5000", "ipv6:[::1]"),
        ("ipv6:[2001:db8::7]:443", "ipv6:[2001:db8::7]"),
        ("unix:/tmp/capplan.sock", "unix:/tmp/capplan.sock"),
    ],
)
def test_a_peer_is_its_address_without_the_port(peer: str, key: str) -> None:
    assert peer_address(peer) == key


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    import structlog

    structlog.configure(logger_factory=structlog.ReturnLoggerFactory())
    yield
    structlog.reset_defaults()


def test_health_check_runs_on_threads_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """Check is served by the capplan-health pool, not the threads the long calls share."""
    import threading

    from grpc_health.v1 import health

    seen: list[str] = []
    real = health.HealthServicer.Check

    def check(self: Any, request: Any, context: Any) -> Any:
        seen.append(threading.current_thread().name)
        return real(self, request, context)

    monkeypatch.setattr(health.HealthServicer, "Check", check)
    with running_server(workers=1, warm=False) as (_, address):
        _health_latencies_s(address, 3)
    assert seen and all(name.startswith("capplan-health") for name in seen), seen


def test_the_peer_of_an_mtls_client_is_its_certificate(tmp_path: Path) -> None:
    from grpc_helpers import make_pki

    from planner.client import ClientTls, PlannerClient, ServiceError
    from planner.server.app import TlsFiles

    pki = make_pki(tmp_path)
    files = TlsFiles(pki["server.pem"], pki["server.key"], client_ca_file=pki["ca.pem"])
    tls = ClientTls(pki["ca.pem"], pki["client.pem"], pki["client.key"], server_name="localhost")
    fairness = Fairness(max_calls=4, max_streams_per_peer=1)
    with running_server(workers=1, tls=files, fairness=fairness) as (_, address):
        client = PlannerClient(address, tls=tls, timeout_s=30)
        held = client.stub.Sweep(_sweep(1000, 0), timeout=30)
        try:
            time.sleep(0.3)
            with pytest.raises(ServiceError) as e:
                list(client.sweep([CHAT_PLAN]))
            assert e.value.code is grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "from tls:capplan client" in e.value.message
        finally:
            held.cancel()
            client.close()
