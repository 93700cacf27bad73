"""Errors of the service and the gRPC status each becomes (one mapping, used by the interceptor
and by Sweep for a scenario's error). Domain errors come from planner.errors; these add what only
a shared server has: limits, overload, deadlines, shutdown."""

from __future__ import annotations

from collections.abc import Sequence

import grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2

from planner.errors import CapplanError, Infeasible, InvalidInput

__all__ = [
    "BadRequest",
    "Cancelled",
    "DeadlineExceeded",
    "JobLimitExceeded",
    "LimitExceeded",
    "Overloaded",
    "ShuttingDown",
    "status_of",
]


class BadRequest(InvalidInput):
    """InvalidInput with every bad field (the first is the one the CLI would print)."""

    def __init__(self, violations: Sequence[tuple[str, str]]) -> None:
        field, reason = violations[0]
        super().__init__(field, reason)
        self.violations = list(violations)


class LimitExceeded(CapplanError):
    """A request larger than the service takes (buckets, candidates, scenarios)."""

    def __init__(self, field: str, got: int, limit: int, what: str) -> None:
        super().__init__(f"{field}: {got:,} {what}; the service takes at most {limit:,}")
        self.field, self.got, self.limit, self.what = field, got, limit, what


class Overloaded(CapplanError):
    """Every worker busy and the queue full: fail fast instead of queueing without bound."""


class ShuttingDown(CapplanError):
    """The server is draining: no new work."""


class DeadlineExceeded(CapplanError):
    """The call's deadline left no time to answer (for Plan: not even a feasible plan)."""


class Cancelled(CapplanError):
    """The caller cancelled the call; its job was dropped or stopped."""


class JobLimitExceeded(CapplanError):
    """A job ran past a worker's per-job limit (`limit`: "cpu" or "memory"); it was stopped."""

    def __init__(self, limit: str, message: str) -> None:
        super().__init__(message)
        self.limit = limit


_CODES: tuple[tuple[type[BaseException], grpc.StatusCode], ...] = (
    (InvalidInput, grpc.StatusCode.INVALID_ARGUMENT),
    (LimitExceeded, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (Overloaded, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (JobLimitExceeded, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (Cancelled, grpc.StatusCode.CANCELLED),
    (ShuttingDown, grpc.StatusCode.UNAVAILABLE),
    (DeadlineExceeded, grpc.StatusCode.DEADLINE_EXCEEDED),
    (Infeasible, grpc.StatusCode.FAILED_PRECONDITION),
    (CapplanError, grpc.StatusCode.FAILED_PRECONDITION),
)


def _pack(detail: object) -> any_pb2.Any:
    a = any_pb2.Any()
    a.Pack(detail)
    return a


def status_of(exc: BaseException, request_id: str = "") -> status_pb2.Status:
    """The google.rpc.Status for an exception. Unexpected exceptions are INTERNAL with no detail
    beyond the request id (the traceback goes to the log, not to the client)."""
    code = next((c for t, c in _CODES if isinstance(exc, t)), grpc.StatusCode.INTERNAL)
    number = code.value[0]
    if code is grpc.StatusCode.INTERNAL:
        rid = f" (request id {request_id})" if request_id else ""
        return status_pb2.Status(code=number, message=f"internal error{rid}")
    details = []
    if isinstance(exc, InvalidInput):
        violations = exc.violations if isinstance(exc, BadRequest) else [(exc.field, exc.reason)]
        details.append(
            _pack(
                error_details_pb2.BadRequest(
                    field_violations=[
                        error_details_pb2.BadRequest.FieldViolation(field=f, description=r)
                        for f, r in violations
                    ]
                )
            )
        )
    elif isinstance(exc, LimitExceeded):
        details.append(
            _pack(
                error_details_pb2.QuotaFailure(
                    violations=[
                        error_details_pb2.QuotaFailure.Violation(subject=exc.field, description=str(exc))
                    ]
                )
            )
        )
    return status_pb2.Status(code=number, message=str(exc), details=details)
