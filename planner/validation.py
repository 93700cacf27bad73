"""One way to turn a user's mapping (YAML/JSON) into a model: pydantic errors become
`InvalidInput` naming the dotted path the user wrote, e.g.
``workload.output_tokens.pairs[2].probability``.

Validators inside models should raise plain `ValueError` (not `InvalidInput`): pydantic then
records where the error happened and `validate` turns that location into the field name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from planner.errors import InvalidInput

M = TypeVar("M", bound=BaseModel)

# Prefixes pydantic puts in front of messages from validators; the user does not need them.
_MSG_PREFIXES = ("Value error, ", "Assertion failed, ")


def loc_to_path(root: str, loc: Sequence[int | str]) -> str:
    """("pairs", 2, "probability") under root "workload.output_tokens" ->
    "workload.output_tokens.pairs[2].probability". Integer parts become [i]; pydantic's
    synthetic parts such as "[key]" are dropped."""
    out = root
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.startswith("[") and part.endswith("]"):
            continue
        else:
            out = f"{out}.{part}" if out else part
    return out or "(root)"


def error_to_invalid_input(err: ValidationError, root: str = "") -> InvalidInput:
    """The first error of a pydantic ValidationError as an InvalidInput (with a count of the rest)."""
    errors = err.errors(include_url=False)
    first = errors[0]
    msg = str(first["msg"])
    for prefix in _MSG_PREFIXES:
        if msg.startswith(prefix):
            msg = msg[len(prefix) :]
    if len(errors) > 1:
        msg += f" (and {len(errors) - 1} more error{'s' if len(errors) > 2 else ''})"
    return InvalidInput(loc_to_path(root, first["loc"]), msg)


def validate(model_cls: type[M], data: Any, root: str = "workload") -> M:
    """`model_cls.model_validate(data)`, raising InvalidInput(field=dotted path under `root`)."""
    try:
        return model_cls.model_validate(data)
    except ValidationError as e:
        raise error_to_invalid_input(e, root) from None
