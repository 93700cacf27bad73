"""Deployment security of `capplan serve`: reflection off unless asked, plaintext only on loopback
unless asked, metrics on the serving host, bearer tokens on every call but health, and the
connection policy handed to gRPC."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from cli_helpers import run_cli
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_helpers import CHAT_PLAN, free_port, running_server, stub
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from planner.client import PlannerClient, ServiceError
from planner.errors import InvalidInput
from planner.server.app import create_server
from planner.server.auth import BearerTokens
from planner.server.transport import ConnectionPolicy, is_loopback, require_safe_transport
from planner.v1 import planner_service_pb2 as pb

TOKEN = "s3cret-token-0123456789"


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    import structlog

    structlog.configure(logger_factory=structlog.ReturnLoggerFactory())
    yield
    structlog.reset_defaults()


def _reflect(address: str) -> grpc.StatusCode | None:
    with grpc.insecure_channel(address) as ch:
        r = reflection_pb2_grpc.ServerReflectionStub(ch)
        try:
            list(
                r.ServerReflectionInfo(
                    iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5
                )
            )
        except grpc.RpcError as exc:
            return exc.code()
    return None


def test_reflection_is_off_unless_asked() -> None:
    with running_server(workers=1, warm=False) as (_, address):
        assert _reflect(address) is grpc.StatusCode.UNIMPLEMENTED
    with running_server(workers=1, warm=False, reflection=True) as (_, address):
        assert _reflect(address) is None


@pytest.mark.parametrize(
    ("address", "allowed"),
    [
        ("127.0.0.1:50051", True),
        ("localhost:0", True),
        ("[::1]:50051", True),
        ("127.3.4.5:1", True),
        ("unix:/tmp/capplan.sock", True),
        ("[::]:50051", False),
        ("0.0.0.0:50051", False),
        ("10.0.0.5:50051", False),
        ("capplan.example.com:50051", False),
    ],
)
def test_plaintext_only_on_loopback_unless_asked(address: str, allowed: bool) -> None:
    require_safe_transport(address, tls=True, plaintext=False)
    require_safe_transport(address, tls=False, plaintext=True)
    if allowed:
        require_safe_transport(address, tls=False, plaintext=False)
    else:
        with pytest.raises(InvalidInput, match="not a loopback address") as e:
            require_safe_transport(address, tls=False, plaintext=False)
        assert e.value.field == "--plaintext"


def test_is_loopback() -> None:
    assert is_loopback("::1") and is_loopback("LOCALHOST") and not is_loopback("::")


def test_create_server_refuses_plaintext_on_all_addresses_before_starting() -> None:
    with pytest.raises(InvalidInput) as e:
        create_server("0.0.0.0:0", workers=1, warm=False)
    assert e.value.field == "--plaintext"


def test_serve_cli_names_the_plaintext_flag(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["serve", "--host", "0.0.0.0", "--port", "0", "--workers", "1"], capsys)
    assert code != 0 and "--plaintext" in err and "not a loopback address" in err


def test_metrics_listen_on_the_serving_host_unless_told() -> None:
    with running_server(workers=1, warm=False, metrics_port=free_port()) as (server, _):
        assert server.metrics._http.server_address[0] == "127.0.0.1"
    with running_server(workers=1, warm=False, metrics_port=free_port(), metrics_host="127.0.0.2") as (
        server,
        _,
    ):
        assert server.metrics._http.server_address[0] == "127.0.0.2"


# --- bearer tokens --------------------------------------------------------------------------------


def _tokens(tmp_path: Path, text: str) -> str:
    path = tmp_path / "tokens"
    path.write_text(text)
    return str(path)


def test_calls_need_a_token_health_does_not(tmp_path: Path) -> None:
    auth = BearerTokens.from_file(_tokens(tmp_path, f"# the CI pipeline\nci {TOKEN}\n"))
    with running_server(workers=1, auth=auth) as (_, address):
        channel, s = stub(address)
        request = pb.ListCatalogRequest(kind=pb.CATALOG_KIND_GPUS)
        for metadata in (
            None,
            (("authorization", "Bearer wrong-token-0123456789"),),
            (("authorization", TOKEN),),
        ):
            with pytest.raises(grpc.RpcError) as e:
                s.ListCatalog(request, timeout=5, metadata=metadata)
            assert e.value.code() is grpc.StatusCode.UNAUTHENTICATED
            assert "authorization: Bearer" in e.value.details()
        with pytest.raises(grpc.RpcError) as e:  # a stream is refused the same way
            list(s.Sweep(pb.SweepRequest(), timeout=5))
        assert e.value.code() is grpc.StatusCode.UNAUTHENTICATED
        assert s.ListCatalog(request, timeout=5, metadata=(("authorization", f"bearer {TOKEN}"),)).gpus
        h = health_pb2_grpc.HealthStub(channel)
        assert (
            h.Check(health_pb2.HealthCheckRequest(), timeout=5).status
            == health_pb2.HealthCheckResponse.SERVING
        )
        channel.close()
        with PlannerClient(address, auth_token=TOKEN) as client:
            assert client.plan(CHAT_PLAN).status in ("OPTIMAL", "FEASIBLE")
        with PlannerClient(address) as client, pytest.raises(ServiceError) as err:
            client.plan(CHAT_PLAN)
        assert err.value.code is grpc.StatusCode.UNAUTHENTICATED


def test_plan_server_sends_the_environments_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import yaml

    auth = BearerTokens.from_file(_tokens(tmp_path, f"{TOKEN}\n"))
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump(CHAT_PLAN))
    with running_server(workers=1, auth=auth) as (_, address):
        monkeypatch.delenv("CAPPLAN_AUTH_TOKEN", raising=False)
        code, _, err = run_cli(["plan", str(plan), "--json", "--server", address], capsys)
        assert code != 0 and "UNAUTHENTICATED" in err
        monkeypatch.setenv("CAPPLAN_AUTH_TOKEN", TOKEN)
        code, out, _ = run_cli(["plan", str(plan), "--json", "--server", address], capsys)
        assert code == 0 and '"status"' in out


def test_identity_is_the_tokens_name() -> None:
    tokens = BearerTokens({"a": "A" * 20, "b": "B" * 20})
    assert tokens.identity([("authorization", "Bearer " + "B" * 20)]) == "b"
    assert tokens.identity([("authorization", "Basic " + "B" * 20)]) is None
    assert tokens.identity([("authorization", "Bearer " + "B" * 19)]) is None
    assert tokens.identity([("x-request-id", "1")]) is None and tokens.identity(None) is None


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "no tokens"),
        ("short\n", "at least 16 characters"),
        ("a b c\n", "expected `TOKEN` or `NAME TOKEN`"),
        (f"x {TOKEN}\nx {TOKEN}x\n", "given twice"),
        (f"bad/name {TOKEN}\n", "a name is"),
        ("tok€n-with-odd-characters\n", "at least 16 characters"),
    ],
)
def test_bad_token_files_are_refused_naming_the_flag(tmp_path: Path, text: str, reason: str) -> None:
    with pytest.raises(InvalidInput, match=reason) as e:
        BearerTokens.from_file(_tokens(tmp_path, text))
    assert e.value.field == "--auth-token-file"


def test_token_file_must_be_a_small_regular_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="not a regular file"):
        BearerTokens.from_file(str(tmp_path))
    with pytest.raises(InvalidInput, match="cannot read"):
        BearerTokens.from_file(str(tmp_path / "missing"))
    big = tmp_path / "big"
    big.write_text(f"{TOKEN}\n" * 5000)
    with pytest.raises(InvalidInput, match="at most 65,536"):
        BearerTokens.from_file(str(big))
    if os.path.exists("/dev/zero"):
        with pytest.raises(InvalidInput, match="not a regular file"):
            BearerTokens.from_file("/dev/zero")


# --- connection policy ----------------------------------------------------------------------------


def test_connection_policy_becomes_grpc_arguments() -> None:
    options = dict(ConnectionPolicy().grpc_options())
    assert options == {
        "grpc.keepalive_time_ms": 60_000,
        "grpc.keepalive_timeout_ms": 20_000,
        "grpc.keepalive_permit_without_calls": 1,
        "grpc.http2.min_ping_interval_without_data_ms": 10_000,
        "grpc.http2.max_ping_strikes": 2,
        "grpc.max_concurrent_streams": 100,
        "grpc.max_connection_idle_ms": 300_000,
        "grpc.max_connection_age_ms": 1_800_000,
        "grpc.max_connection_age_grace_ms": 600_000,
    }
    unlimited = dict(ConnectionPolicy(max_connection_idle_s=0, max_connection_age_s=0).grpc_options())
    assert "grpc.max_connection_idle_ms" not in unlimited and "grpc.max_connection_age_ms" not in unlimited
    with pytest.raises(InvalidInput) as e:
        ConnectionPolicy(max_streams_per_connection=0)
    assert e.value.field == "--max-streams-per-connection"
    with pytest.raises(InvalidInput) as e:
        ConnectionPolicy(max_connection_age_s=-1)
    assert e.value.field == "--max-connection-age-s"


def test_an_old_connection_is_closed_and_the_client_reconnects() -> None:
    """max_connection_age reaches gRPC: with 0.5 s (+-10%) the server sends GOAWAY, the channel
    reconnects, and calls keep working."""
    policy = ConnectionPolicy(max_connection_age_s=0.5, max_connection_age_grace_s=0.5)
    states: list[grpc.ChannelConnectivity] = []
    with running_server(workers=1, warm=False, connections=policy) as (_, address):
        channel = grpc.insecure_channel(address)
        channel.subscribe(states.append, try_to_connect=True)
        h = health_pb2_grpc.HealthStub(channel)
        end = time.monotonic() + 3
        while time.monotonic() < end:
            assert h.Check(health_pb2.HealthCheckRequest(), timeout=5).status == 1
            time.sleep(0.1)
        channel.close()
    ready = [s for s in states if s is grpc.ChannelConnectivity.READY]
    assert len(ready) >= 2, states  # connected again after the server closed the old connection
