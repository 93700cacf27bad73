"""`capplan serve` start-up errors are one line naming the flag: TLS material is read within its
bounds and checked with `ssl` before binding (planner/server/tls.py), the address with a plain
socket (planner/server/listen.py), so gRPC core's "Failed to bind" and its own stderr lines never
reach the user."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from grpc_helpers import make_pki

from planner.errors import InvalidInput
from planner.server.app import create_server
from planner.server.tls import TlsFiles

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("pki")
    files = make_pki(d)
    (d / "junk.pem").write_text("not PEM at all\n")
    (d / "bad-body.pem").write_text("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
    os.mkfifo(d / "fifo.key")
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(Path(files["server.key"]).read_bytes(), None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"secret"),
    )
    (d / "encrypted.key").write_bytes(encrypted)
    return {**files, **{p.name: str(p) for p in d.iterdir()}}


@pytest.mark.parametrize(
    ("cert", "key", "ca", "expected"),
    [
        ("server.pem", "rogue.key", None, "--tls-key: does not match --tls-cert (another certificate's key)"),
        (
            "server.pem",
            "client.key",
            "ca.pem",
            "--tls-key: does not match --tls-cert (another certificate's key)",
        ),
        (
            "junk.pem",
            "server.key",
            None,
            "--tls-cert: junk.pem holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
        ),
        (
            "bad-body.pem",
            "server.key",
            None,
            "--tls-cert: bad-body.pem is not a PEM certificate OpenSSL can read "
            "(no start line: cadata does not contain a certificate)",
        ),
        (
            "server.pem",
            "junk.pem",
            None,
            "--tls-key: junk.pem is not a PEM private key OpenSSL can read (PEM lib)",
        ),
        (
            "server.pem",
            "server.pem",
            None,
            "--tls-key: server.pem is not a PEM private key OpenSSL can read (PEM lib)",
        ),
        (
            "server.pem",
            "encrypted.key",
            None,
            "--tls-key: encrypted.key is encrypted; give the key without a passphrase",
        ),
        (
            "server.pem",
            "server.key",
            "junk.pem",
            "--tls-client-ca: junk.pem holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
        ),
        ("/dev/zero", "server.key", None, "--tls-cert: /dev/zero is a character device, not a regular file"),
        (
            "/dev/urandom",
            "server.key",
            None,
            "--tls-cert: /dev/urandom is a character device, not a regular file",
        ),
        ("server.pem", "fifo.key", None, "--tls-key: fifo.key is a FIFO, not a regular file"),
        (
            "server.pem",
            "server.key",
            "/dev/zero",
            "--tls-client-ca: /dev/zero is a character device, not a regular file",
        ),
    ],
)
def test_tls_problems_are_one_line_naming_the_flag(
    cert: str, key: str, ca: str | None, expected: str, pki: dict[str, str]
) -> None:
    def path(name: str) -> str:
        return name if name.startswith("/") else pki[name]

    tls = TlsFiles(path(cert), path(key), None if ca is None else path(ca))
    with pytest.raises(InvalidInput) as e:
        create_server("127.0.0.1:0", workers=1, warm=False, tls=tls)
    folder = str(Path(pki["ca.pem"]).parent) + "/"
    assert str(e.value).replace(folder, "") == expected


def test_good_tls_material_passes_the_checks(pki: dict[str, str]) -> None:
    assert TlsFiles(pki["server.pem"], pki["server.key"], pki["ca.pem"]).credentials() is not None


def _serve(*args: str) -> subprocess.CompletedProcess[str]:
    """`capplan serve` with the console log format: stderr as a person reads it (the JSON format
    wraps each line: tests/test_server_logging.py)."""
    argv = [sys.executable, "-m", "planner.cli", "serve", "--workers", "1", "--log-format", "console", *args]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_a_port_in_use_is_one_line_and_no_grpc_log() -> None:
    """The whole stderr of the process: gRPC core's `E... add_port.cc] Failed to add port` lines
    and its 'set GRPC_VERBOSITY' advice do not appear."""
    with socket.socket() as held:
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        r = _serve("--host", "127.0.0.1", "--port", str(port))
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == f"capplan: error: --port: {port} is in use on 127.0.0.1\n"


def test_a_key_mismatch_from_the_command_line_is_one_line(pki: dict[str, str]) -> None:
    r = _serve("--port", "0", "--tls-cert", pki["server.pem"], "--tls-key", pki["rogue.key"])
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == "capplan: error: --tls-key: does not match --tls-cert (another certificate's key)\n"


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("nohost.invalid:0", "--host: cannot resolve nohost.invalid: "),
        ("192.0.2.1:0", "--host: cannot listen on 192.0.2.1: no such address on this machine"),  # TEST-NET-1
    ],
)
def test_a_host_that_cannot_be_listened_on_names_host(address: str, expected: str) -> None:
    with pytest.raises(InvalidInput) as e:
        create_server(address, workers=1, warm=False, plaintext=True)
    assert str(e.value).startswith(expected), e.value
