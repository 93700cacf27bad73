"""The one interceptor of the service: every planner.v1 RPC gets a request id, a status mapped
from the exception that ended it (planner.server.service_errors.status_of), one structured log line and
its metrics. Unparseable request bytes are INVALID_ARGUMENT, not gRPC's generic INTERNAL; an
unexpected exception is INTERNAL with only the request id for the client and the traceback in the
log."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections import namedtuple
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

import grpc
from grpc_status import rpc_status

from planner.errors import InvalidInput, clip
from planner.server.observability import Metrics, logger
from planner.server.service_errors import status_of

__all__ = ["ServiceInterceptor", "annotate"]

SERVICE_PREFIX = "/planner.v1.PlannerService/"
REQUEST_ID_KEY = "x-request-id"

_SCOPE: ContextVar[dict[str, Any] | None] = ContextVar("capplan_rpc_scope", default=None)


def annotate(**fields: Any) -> None:
    """Add fields to the current RPC's log line (queue and compute time, a plan summary)."""
    scope = _SCOPE.get()
    if scope is not None:
        scope.update(fields)


class _Unparseable:
    """What the request deserializer gives for bytes that are not the request message."""

    def __init__(self, error: str) -> None:
        self.error = error


class _Status(namedtuple("_Status", ("code", "details", "trailing_metadata")), grpc.Status):
    """The status to abort with: google.rpc details plus the request id, in trailing metadata."""


_CODES = {c.value[0]: c for c in grpc.StatusCode}
# A log line's text fields are cut to these (with their length): the error may repeat a caller's
# value and the peer is the transport's, so no call writes a line of unbounded size.
MAX_LOG_FIELD_CHARS = 1_000
MAX_LOG_TRACEBACK_CHARS = 8_000


def _request_id(details: grpc.HandlerCallDetails) -> str:
    for key, value in details.invocation_metadata or ():
        if key == REQUEST_ID_KEY and isinstance(value, str) and 0 < len(value) <= 128:
            return value
    return uuid.uuid4().hex[:16]


class ServiceInterceptor(grpc.ServerInterceptor):
    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self.log = logger()

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(details)
        full: str = details.method
        if handler is None or not full.startswith(SERVICE_PREFIX):
            return handler  # health, reflection: as they come
        method = full[len(SERVICE_PREFIX) :]
        rid = _request_id(details)
        deserializer = _safe_deserializer(handler.request_deserializer, method)
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._unary(method, rid, handler.unary_unary),
                request_deserializer=deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                self._stream(method, rid, handler.unary_stream),
                request_deserializer=deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler  # pragma: no cover - the service has no client-streaming RPCs

    # -- the wrappers --

    def _begin(self, method: str, rid: str, request: Any, context: grpc.ServicerContext) -> dict[str, Any]:
        self.metrics.in_flight.inc()
        scope: dict[str, Any] = {"method": method, "request_id": rid, "peer": context.peer()}
        context.set_trailing_metadata(((REQUEST_ID_KEY, rid),))
        if isinstance(request, _Unparseable):
            raise InvalidInput(
                "(request)", f"not a valid planner.v1.{method}Request message: {request.error}"
            )
        return scope

    def _fail(self, exc: BaseException, scope: dict[str, Any], context: grpc.ServicerContext) -> None:
        """Abort the RPC with the status of `exc` (raises)."""
        if context.code() not in (None, grpc.StatusCode.OK):  # already aborted by the handler
            raise exc
        status = status_of(exc, scope["request_id"])
        code = _CODES[status.code]
        scope["code"] = code.name
        if code is grpc.StatusCode.INTERNAL:
            scope["error"] = f"{type(exc).__name__}: {exc}"
            scope["traceback"] = getattr(exc, "details", "") or _traceback(exc)
        else:
            scope["error"] = status.message
        base = rpc_status.to_status(status)
        context.abort_with_status(
            _Status(base.code, base.details, (*base.trailing_metadata, (REQUEST_ID_KEY, scope["request_id"])))
        )

    def _end(self, scope: dict[str, Any], start: float) -> None:
        duration = time.perf_counter() - start
        method = scope["method"]
        code = scope.setdefault("code", "OK")
        self.metrics.in_flight.dec()
        self.metrics.rpcs.labels(method, code).inc()
        self.metrics.latency.labels(method).observe(duration)
        scope["duration_ms"] = round(duration * 1e3, 3)
        level = "error" if code in ("INTERNAL", "UNKNOWN") else "info"
        getattr(self.log, level)("rpc", **_bounded(scope))

    def _unary(
        self, method: str, rid: str, inner: Callable[[Any, grpc.ServicerContext], Any]
    ) -> Callable[..., Any]:
        def behavior(request: Any, context: grpc.ServicerContext) -> Any:
            start = time.perf_counter()
            scope: dict[str, Any] = {"method": method, "request_id": rid}
            token = _SCOPE.set(scope)
            try:
                scope.update(self._begin(method, rid, request, context))
                return inner(request, context)
            except Exception as exc:
                self._fail(exc, scope, context)
                raise  # pragma: no cover - _fail raises
            finally:
                _SCOPE.reset(token)
                self._end(scope, start)

        return behavior

    def _stream(
        self, method: str, rid: str, inner: Callable[[Any, grpc.ServicerContext], Iterator[Any]]
    ) -> Callable[..., Iterator[Any]]:
        def behavior(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            start = time.perf_counter()
            scope: dict[str, Any] = {"method": method, "request_id": rid}
            token = _SCOPE.set(scope)
            sent = 0
            try:
                scope.update(self._begin(method, rid, request, context))
                for item in inner(request, context):
                    sent += 1
                    yield item
            except GeneratorExit:  # the client went away mid-stream
                scope["code"] = "CANCELLED"
                raise
            except Exception as exc:
                self._fail(exc, scope, context)
            finally:
                scope["messages"] = sent
                with contextlib.suppress(ValueError):  # closed from another context (garbage collection)
                    _SCOPE.reset(token)
                self._end(scope, start)

        return behavior


def _safe_deserializer(deserialize: Callable[[bytes], Any] | None, method: str) -> Callable[[bytes], Any]:
    def parse(data: bytes) -> Any:
        try:
            return deserialize(data) if deserialize is not None else data
        except Exception as exc:  # DecodeError, or anything the parser raises on hostile bytes
            return _Unparseable(f"{type(exc).__name__}: {exc}"[:200])

    return parse


def _bounded(scope: dict[str, Any]) -> dict[str, Any]:
    """The log line's fields with every text cut to its bound (`planner.errors.clip`)."""
    return {
        k: clip(v, MAX_LOG_TRACEBACK_CHARS if k == "traceback" else MAX_LOG_FIELD_CHARS)
        if isinstance(v, str)
        else v
        for k, v in scope.items()
    }


def _traceback(exc: BaseException) -> str:
    import traceback

    return "".join(traceback.format_exception(exc))
