"""Domain errors. Every bad-input error names the field it is about, so the CLI and the
gRPC interceptor can both say which input is wrong and why without parsing messages."""

from __future__ import annotations

MAX_FIELD_CHARS = 256  # an InvalidInput's field path (its parts may be the caller's keys)
MAX_REASON_CHARS = 2_000  # and its reason


class CapplanError(Exception):
    """Base of every error the product raises on purpose."""


class InvalidInput(CapplanError, ValueError):
    """A caller-supplied value is wrong. `field` is the name the caller used (a CLI flag,
    a YAML key path or a proto field path); `reason` says what is wrong with it."""

    def __init__(self, field: str, reason: str) -> None:
        # A backstop: a field path or reason built from a caller's keys or values stays bounded
        # even where the message forgot `echo` (the CLI prints it, the service logs and sends it).
        field, reason = clip(field, MAX_FIELD_CHARS), clip(reason, MAX_REASON_CHARS)
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class Infeasible(CapplanError):
    """No configuration satisfies the request; an answer, not a bug."""


class TooLarge(CapplanError):
    """A request whose sizing problem is larger than the solver takes (solvers' SizeLimitError:
    too many candidates x buckets, replicas per bucket, model variables). Not a wrong value and
    not a bug: the service answers it RESOURCE_EXHAUSTED, the CLI exits 1 with the message."""


# A caller's value repeated in an error or a log line is cut to this many characters (its length
# shown): a 4 MiB model name must not become a 4 MiB message, log line or gRPC trailer.
ECHO_CHARS = 64


def echo(value: object, limit: int = ECHO_CHARS) -> str:
    """`repr(value)` for an error message, at most `limit` characters of it, with the value's
    length when cut: `'aaaa…' (10,000 chars)`. Every error that repeats what the caller wrote
    goes through this (or `clip` for text that is not a value)."""
    text = repr(value)
    if len(text) <= limit:
        return text
    size = f"{len(value):,} chars" if isinstance(value, str) else f"{len(text):,} chars as written"
    return f"{text[:limit]}… ({size})"


def clip(text: str, limit: int) -> str:
    """`text` itself when at most `limit` characters, else its head and how long it was (for
    messages, descriptions and log fields that may carry a caller's value)."""
    if len(text) <= limit:
        return text
    note = f"… ({len(text):,} chars)"
    return text[: max(0, limit - len(note))] + note
