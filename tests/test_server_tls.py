"""TLS and mTLS with throwaway certificates: a TLS server answers clients that trust its CA and no
plaintext client; an mTLS server answers only clients with a certificate its CA signed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from grpc_helpers import make_pki, running_server

from planner.client import ClientTls, PlannerClient, ServiceError
from planner.errors import InvalidInput
from planner.server.app import TlsFiles, create_server


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_address(pki: dict[str, str]) -> Iterator[str]:
    with running_server(workers=1, tls=TlsFiles(pki["server.pem"], pki["server.key"])) as (_, address):
        yield address


@pytest.fixture(scope="module")
def mtls_address(pki: dict[str, str]) -> Iterator[str]:
    files = TlsFiles(pki["server.pem"], pki["server.key"], client_ca_file=pki["ca.pem"])
    with running_server(workers=1, tls=files) as (_, address):
        yield address


def _gpus(address: str, tls: ClientTls | None) -> int:
    with PlannerClient(address, tls=tls, timeout_s=10) as c:
        return len(c.catalog({"kind": "gpus"}).gpus)


def test_tls_answers_a_client_that_trusts_the_ca(tls_address: str, pki: dict[str, str]) -> None:
    assert _gpus(tls_address, ClientTls(ca_file=pki["ca.pem"])) > 0
    assert _gpus(tls_address.replace("127.0.0.1", "localhost"), ClientTls(ca_file=pki["ca.pem"])) > 0


def test_tls_refuses_plaintext_and_untrusted_clients(tls_address: str, pki: dict[str, str]) -> None:
    for tls in (None, ClientTls(ca_file=pki["rogue.pem"])):
        with pytest.raises(ServiceError) as e:
            _gpus(tls_address, tls)
        assert e.value.code.name == "UNAVAILABLE"


def test_mtls_needs_a_client_certificate_from_the_ca(mtls_address: str, pki: dict[str, str]) -> None:
    good = ClientTls(ca_file=pki["ca.pem"], cert_file=pki["client.pem"], key_file=pki["client.key"])
    assert _gpus(mtls_address, good) > 0
    for bad in (
        ClientTls(ca_file=pki["ca.pem"]),  # no certificate
        ClientTls(
            ca_file=pki["ca.pem"], cert_file=pki["rogue.pem"], key_file=pki["rogue.key"]
        ),  # another CA's
    ):
        with pytest.raises(ServiceError) as e:
            _gpus(mtls_address, bad)
        assert e.value.code.name == "UNAVAILABLE"


def test_unreadable_certificate_files_name_the_flag(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as e:
        create_server(
            "127.0.0.1:0",
            workers=1,
            warm=False,
            tls=TlsFiles(str(tmp_path / "none.pem"), str(tmp_path / "none.key")),
        )
    assert e.value.field == "--tls-key"
