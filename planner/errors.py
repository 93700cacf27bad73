"""Domain errors. Every bad-input error names the field it is about, so the CLI and the
gRPC interceptor can both say which input is wrong and why without parsing messages."""

from __future__ import annotations


class CapplanError(Exception):
    """Base of every error the product raises on purpose."""


class InvalidInput(CapplanError, ValueError):
    """A caller-supplied value is wrong. `field` is the name the caller used (a CLI flag,
    a YAML key path or a proto field path); `reason` says what is wrong with it."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class Infeasible(CapplanError):
    """No configuration satisfies the request; an answer, not a bug."""
