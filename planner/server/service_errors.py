"""Errors of the service and the gRPC status each becomes (one mapping, used by the interceptor
and by Sweep for a scenario's error). Domain errors come from planner.errors; these add what only
a shared server has: limits, overload, deadlines, shutdown."""

from __future__ import annotations

from collections.abc import Sequence

import grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2

from planner.errors import CapplanError, Infeasible, InvalidInput, TooLarge

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
    (TooLarge, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (Infeasible, grpc.StatusCode.FAILED_PRECONDITION),
    (CapplanError, grpc.StatusCode.FAILED_PRECONDITION),
)


def _pack(detail: object) -> any_pb2.Any:
    a = any_pb2.Any()
    a.Pack(detail)
    return a


# The status travels as trailing metadata (grpc-message percent-encoded: up to 3 bytes per byte;
# grpc-status-details-bin base64: 4 per 3), and gRPC's default limit on a response's metadata is
# 8 KiB: past it the client gets RESOURCE_EXHAUSTED and no status details. These budgets keep the
# whole status near 4 KiB on the wire whatever the exception says.
MAX_MESSAGE_BYTES = 300  # UTF-8 bytes of Status.message (<= 900 percent-encoded)
MAX_DETAILS_BYTES = 2_400  # serialized details (<= 3,200 base64)
MAX_DETAIL_FIELD_BYTES = 128  # one violation's field path
MIN_DESCRIPTION_BYTES = 48  # a description is never cut below this while violations are dropped instead


def _fit(text: str, max_bytes: int) -> str:
    """`text` cut to at most `max_bytes` UTF-8 bytes (on a character boundary), with a mark and its
    length when cut."""
    if len(text.encode()) <= max_bytes:
        return text
    note = f"… ({len(text):,} chars)"
    head = text.encode()[: max(0, max_bytes - len(note.encode()))].decode(errors="ignore")
    return head + note


def _violations(pairs: Sequence[tuple[str, str]]) -> tuple[list[tuple[str, str]], int]:
    """The field violations that fit MAX_DETAILS_BYTES: every field path (cut to
    MAX_DETAIL_FIELD_BYTES), descriptions cut to share what is left; where even short descriptions
    do not fit, the last violations are left out (returns how many)."""
    fields = [_fit(f, MAX_DETAIL_FIELD_BYTES) for f, _ in pairs]
    reasons = [r for _, r in pairs]
    per_item = 8  # tags and lengths of a FieldViolation inside BadRequest
    n = len(fields)
    while n > 0:
        fixed = sum(len(f.encode()) + per_item for f in fields[:n])
        share = (MAX_DETAILS_BYTES - 64 - fixed) // n
        if share >= MIN_DESCRIPTION_BYTES or n == 1:
            share = max(share, 0)
            return [(fields[i], _fit(reasons[i], share)) for i in range(n)], len(pairs) - n
        n = max(1, n * 3 // 4)
    return [], len(pairs)


def status_of(exc: BaseException, request_id: str = "") -> status_pb2.Status:
    """The google.rpc.Status for an exception. Unexpected exceptions are INTERNAL with no detail
    beyond the request id (the traceback goes to the log, not to the client). Bounded: message
    and details stay within MAX_MESSAGE_BYTES and MAX_DETAILS_BYTES (descriptions cut, with their
    length), so the status always reaches the client."""
    code = next((c for t, c in _CODES if isinstance(exc, t)), grpc.StatusCode.INTERNAL)
    number = code.value[0]
    if code is grpc.StatusCode.INTERNAL:
        rid = f" (request id {_fit(request_id, 128)})" if request_id else ""
        return status_pb2.Status(code=number, message=f"internal error{rid}")
    details = []
    message, note = str(exc), ""
    if isinstance(exc, InvalidInput):
        violations = exc.violations if isinstance(exc, BadRequest) else [(exc.field, exc.reason)]
        kept, left_out = _violations(violations)
        if left_out:
            note = f" ({left_out:,} more violations left out of the details)"
        details.append(
            _pack(
                error_details_pb2.BadRequest(
                    field_violations=[
                        error_details_pb2.BadRequest.FieldViolation(field=f, description=r) for f, r in kept
                    ]
                )
            )
        )
    elif isinstance(exc, LimitExceeded):
        details.append(
            _pack(
                error_details_pb2.QuotaFailure(
                    violations=[
                        error_details_pb2.QuotaFailure.Violation(
                            subject=_fit(exc.field, MAX_DETAIL_FIELD_BYTES),
                            description=_fit(str(exc), MAX_DETAILS_BYTES // 2),
                        )
                    ]
                )
            )
        )
    return status_pb2.Status(
        code=number, message=_fit(message, MAX_MESSAGE_BYTES - len(note)) + note, details=details
    )
