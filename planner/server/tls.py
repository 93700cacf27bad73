"""`capplan serve`'s TLS material: read within planner.files.PEM's bounds and checked with the
standard library's `ssl` before the server binds, so that every problem is one line naming its
flag (`--tls-key: does not match --tls-cert`), where gRPC core only says "Failed to bind" after
logging its own lines.

The checks: --tls-cert holds PEM certificates, --tls-key a PEM private key (not encrypted: the
service has no one to ask for a passphrase) that matches the certificate's public key, and
--tls-client-ca PEM certificates. OpenSSL reads the bytes already read (through an anonymous
in-memory file where the platform has one), never the paths again: a path swapped for /dev/zero
after the checks is not read.
"""

from __future__ import annotations

import contextlib
import os
import re
import ssl
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass

import grpc

from planner.errors import InvalidInput
from planner.files import PEM, read_bytes

__all__ = ["TlsFiles"]


@dataclass(frozen=True)
class TlsFiles:
    """PEM files: the server's certificate chain and key; with `client_ca_file`, clients must
    present a certificate signed by it (mTLS)."""

    cert_file: str
    key_file: str
    client_ca_file: str | None = None

    def credentials(self) -> grpc.ServerCredentials:
        """The server credentials, once the files are read and checked (module docstring)."""
        key = read_bytes(self.key_file, "--tls-key", PEM)
        cert = read_bytes(self.cert_file, "--tls-cert", PEM)
        ca = None if self.client_ca_file is None else read_bytes(self.client_ca_file, "--tls-client-ca", PEM)
        _check_certificates(cert, "--tls-cert", self.cert_file)
        if ca is not None:
            _check_certificates(ca, "--tls-client-ca", self.client_ca_file or "")
        _check_key_matches(cert, key, self.key_file)
        return grpc.ssl_server_credentials(
            [(key, cert)], root_certificates=ca, require_client_auth=ca is not None
        )


def _ssl_reason(exc: ssl.SSLError | ValueError) -> str:
    """OpenSSL's words without the library's tags: `[SSL] PEM lib (_ssl.c:3926)` -> `PEM lib`."""
    text = str(exc.args[1] if isinstance(exc, ssl.SSLError) and len(exc.args) > 1 else exc)
    text = re.sub(r"\s*\(_ssl\.c:\d+\)$", "", text.splitlines()[0] if text else "")
    return re.sub(r"^\[\w+\]\s*", "", text) or type(exc).__name__


def _check_certificates(pem: bytes, field: str, path: str) -> None:
    """`pem` holds at least one certificate OpenSSL can parse."""
    if b"-----BEGIN CERTIFICATE-----" not in pem:
        raise InvalidInput(field, f"{path} holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_verify_locations(cadata=pem.decode("ascii"))
    except (ssl.SSLError, ValueError) as exc:  # also non-ASCII bytes
        raise InvalidInput(field, f"{path} is not a PEM certificate OpenSSL can read ({_ssl_reason(exc)})") from None


class _Encrypted(Exception):
    pass


def _passphrase() -> str:
    raise _Encrypted


def _check_key_matches(cert: bytes, key: bytes, key_path: str) -> None:
    """`key` parses as a private key, unencrypted, and is the key of `cert`'s first certificate."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with _in_memory(cert) as cert_path, _in_memory(key) as key_path_copy:
        try:
            context.load_cert_chain(cert_path, key_path_copy, password=_passphrase)
        except _Encrypted:
            raise InvalidInput(
                "--tls-key", f"{key_path} is encrypted; give the key without a passphrase"
            ) from None
        except ssl.SSLError as exc:
            if "KEY_VALUES_MISMATCH" in str(exc) or exc.reason == "KEY_VALUES_MISMATCH":
                raise InvalidInput(
                    "--tls-key", "does not match --tls-cert (another certificate's key)"
                ) from None
            raise InvalidInput(
                "--tls-key", f"{key_path} is not a PEM private key OpenSSL can read ({_ssl_reason(exc)})"
            ) from None


@contextlib.contextmanager
def _in_memory(data: bytes) -> Iterator[str]:
    """A path OpenSSL can open holding `data`: an anonymous memory file (Linux), else a file in
    a private temporary folder, removed on exit."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("capplan-tls", os.MFD_CLOEXEC)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    with tempfile.TemporaryDirectory(prefix="capplan-tls-") as folder:  # mode 0700
        path = os.path.join(folder, "pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        yield path
