"""Per-call authentication by bearer token (`capplan serve --auth-token-file`).

Every call but health checking must carry `authorization: Bearer <token>` metadata matching one
of the file's tokens (compared with hmac.compare_digest, against every token, so the time taken
does not say which one nearly matched); others get UNAUTHENTICATED before any work. Health is
exempt so that Kubernetes probes, which send no metadata, keep working. mTLS
(`--tls-client-ca`) is the other way to authenticate callers; both may be on.

The token file: one token per line, optionally preceded by a name and whitespace (`ci-pipeline
3f9a...`); blank lines and `#` comments are skipped. The name (default `token-<line>`) is the
caller's identity in the per-peer limits (planner.server.admission) and the logs.
"""

from __future__ import annotations

import hmac
import re
import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import grpc

from planner.errors import InvalidInput
from planner.server.observability import Metrics, logger

__all__ = ["AuthInterceptor", "BearerTokens"]

FLAG = "--auth-token-file"
MAX_TOKEN_FILE_BYTES = 64 * 1024
MIN_TOKEN_CHARS = 16
# RFC 6750 b64token: what may follow "Bearer ".
_TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
_NAME = re.compile(r"[A-Za-z0-9\-._@:]{1,64}")
_EXEMPT_PREFIX = "/grpc.health.v1.Health/"
_SERVICE_PREFIX = "/planner.v1.PlannerService/"


class BearerTokens:
    """Named tokens; `identity(metadata)` is the name of the token a call presents, or None."""

    def __init__(self, tokens: dict[str, str]) -> None:
        if not tokens:
            raise InvalidInput(FLAG, "no tokens given")
        self._tokens = [(name, token.encode()) for name, token in tokens.items()]

    @classmethod
    def from_file(cls, path: str) -> BearerTokens:
        """Read a token file (a regular file of at most 64 KiB; see the module docstring)."""
        p = Path(path)
        try:
            st = p.stat()
            if not stat.S_ISREG(st.st_mode):
                raise InvalidInput(FLAG, f"{path} is not a regular file")
            if st.st_size > MAX_TOKEN_FILE_BYTES:
                raise InvalidInput(FLAG, f"{path} is {st.st_size:,} bytes; at most {MAX_TOKEN_FILE_BYTES:,}")
            text = p.read_bytes()[: MAX_TOKEN_FILE_BYTES + 1].decode("utf-8")
        except OSError as exc:
            raise InvalidInput(FLAG, f"cannot read {path}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise InvalidInput(FLAG, f"{path} is not UTF-8 text") from None
        return cls(_parse(text.splitlines(), path))

    def identity(self, metadata: Iterable[tuple[str, Any]] | None) -> str | None:
        presented = _bearer(metadata)
        if presented is None:
            return None
        found = None
        for name, token in self._tokens:  # no early exit: the time does not depend on which matched
            if hmac.compare_digest(presented, token) and found is None:
                found = name
        return found


def _parse(lines: list[str], path: str) -> dict[str, str]:
    tokens: dict[str, str] = {}
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) > 2:
            raise InvalidInput(FLAG, f"{path}:{number}: expected `TOKEN` or `NAME TOKEN`")
        name, token = (f"token-{number}", parts[0]) if len(parts) == 1 else (parts[0], parts[1])
        if not _NAME.fullmatch(name):
            raise InvalidInput(FLAG, f"{path}:{number}: a name is 1-64 letters, digits or -._@:")
        if not _TOKEN.fullmatch(token) or len(token) < MIN_TOKEN_CHARS:
            raise InvalidInput(
                FLAG,
                f"{path}:{number}: a token is at least {MIN_TOKEN_CHARS} characters of "
                "A-Z a-z 0-9 - . _ ~ + / (then = padding)",
            )
        if name in tokens:
            raise InvalidInput(FLAG, f"{path}:{number}: the name {name!r} is given twice")
        tokens[name] = token
    return tokens


def _bearer(metadata: Iterable[tuple[str, Any]] | None) -> bytes | None:
    for key, value in metadata or ():
        if key == "authorization" and isinstance(value, str):
            scheme, _, token = value.strip().partition(" ")
            if scheme.lower() == "bearer" and token:
                return token.strip().encode("utf-8", "replace")
    return None


class AuthInterceptor(grpc.ServerInterceptor):
    """The outermost interceptor: a call without a valid token never reaches the others."""

    def __init__(self, tokens: BearerTokens, metrics: Metrics) -> None:
        self.tokens = tokens
        self.metrics = metrics

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        method: str = details.method
        if method.startswith(_EXEMPT_PREFIX) or self.tokens.identity(details.invocation_metadata) is not None:
            return continuation(details)
        handler = continuation(details)
        if handler is None:
            return None
        return self._denied(handler, method)

    def _denied(self, handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
        def deny(_request: Any, context: grpc.ServicerContext) -> Any:
            short = method.removeprefix(_SERVICE_PREFIX)
            if method.startswith(_SERVICE_PREFIX):
                self.metrics.rpcs.labels(short, "UNAUTHENTICATED").inc()
            logger().warning("rpc", method=short, code="UNAUTHENTICATED", peer=context.peer())
            context.abort(
                grpc.StatusCode.UNAUTHENTICATED,
                "missing or unknown bearer token: send `authorization: Bearer <token>` metadata",
            )

        ser = handler.response_serializer
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(deny, None, ser)
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(deny, None, ser)
        if handler.stream_unary is not None:
            return grpc.stream_unary_rpc_method_handler(deny, None, ser)
        return grpc.stream_stream_rpc_method_handler(deny, None, ser)
