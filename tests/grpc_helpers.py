"""Shared by the gRPC server tests: servers on port 0, raw stubs, throwaway certificates."""

from __future__ import annotations

import datetime
import ipaddress
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import structlog
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from planner.server.app import PlannerServer, create_server
from planner.v1 import planner_service_pb2_grpc as pb_grpc

CHAT_PLAN: dict[str, Any] = {
    "model": "Qwen/Qwen3-8B",
    "slo": {"ttft_p99_ms": 500, "itl_p99_ms": 50},
    "workload": {
        "arrivals": {"requests_per_s": 10},
        "input_tokens": {"percentiles": {"p10": 150, "p50": 800, "p90": 2000, "p99": 4000}},
        "output_tokens": {"pairs": [[100, 0.5], [300, 0.3], [800, 0.2]]},
    },
    "candidates": {"gpus": ["h100-sxm"], "tensor_parallel_sizes": [1]},
}


@contextmanager
def running_server(**options: Any) -> Iterator[tuple[PlannerServer, str]]:
    """A started server on 127.0.0.1 (port 0 unless given) and its address; drained on exit."""
    server, port = create_server("127.0.0.1:0", **options)
    try:
        yield server, f"127.0.0.1:{port}"
    finally:
        server.stop(grace_s=1)


@contextmanager
def quiet_server(workers: int = 1) -> Iterator[str]:
    """A real server on port 0 in this process, its log lines kept out of the output a test
    compares (structlog returns them instead of printing); yields its address."""
    structlog.configure(logger_factory=structlog.ReturnLoggerFactory())
    try:
        with running_server(workers=workers) as (_, addr):
            yield addr
    finally:
        structlog.reset_defaults()


def stub(address: str) -> tuple[grpc.Channel, pb_grpc.PlannerServiceStub]:
    channel = grpc.insecure_channel(address)
    return channel, pb_grpc.PlannerServiceStub(channel)


def violations(err: grpc.RpcError) -> list[tuple[str, str]]:
    """The google.rpc.BadRequest field violations of an INVALID_ARGUMENT error."""
    status = rpc_status.from_call(err)
    assert status is not None, "no google.rpc.Status details"
    out: list[tuple[str, str]] = []
    for d in status.details:
        br = error_details_pb2.BadRequest()
        if d.Unpack(br):
            out.extend((v.field, v.description) for v in br.field_violations)
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- throwaway certificates ------------------------------------------------------------------------


def _key() -> Any:
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _cert(subject_cn: str, key: Any, issuer: tuple[Any, Any] | None, *, ca: bool, server: bool) -> Any:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject_cn)])
    issuer_cert, issuer_key = issuer if issuer is not None else (None, key)
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer_cert.subject if issuer_cert is not None else name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
    return builder.sign(issuer_key, hashes.SHA256())


def make_pki(directory: Path) -> dict[str, str]:
    """A CA with a server certificate (localhost, 127.0.0.1) and a client certificate, plus a
    client certificate from another CA; returns their PEM file paths."""
    from cryptography.hazmat.primitives import serialization

    files: dict[str, str] = {}

    def write(name: str, data: bytes) -> None:
        path = directory / name
        path.write_bytes(data)
        files[name] = str(path)

    def pem(cert: Any) -> bytes:
        return cert.public_bytes(serialization.Encoding.PEM)

    ca_key = _key()
    ca = _cert("capplan test CA", ca_key, None, ca=True, server=False)
    write("ca.pem", pem(ca))
    for role, is_server in (("server", True), ("client", False)):
        k = _key()
        write(f"{role}.pem", pem(_cert(f"capplan {role}", k, (ca, ca_key), ca=False, server=is_server)))
        write(f"{role}.key", _pem_key(k))
    rogue_key = _key()
    rogue_ca = _cert("rogue CA", rogue_key, None, ca=True, server=False)
    k = _key()
    write("rogue.pem", pem(_cert("rogue client", k, (rogue_ca, rogue_key), ca=False, server=False)))
    write("rogue.key", _pem_key(k))
    return files
