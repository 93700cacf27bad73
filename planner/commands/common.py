"""Flag parsing shared by subcommands: every parser raises InvalidInput naming the flag."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Sequence
from typing import Any

from planner.errors import InvalidInput


def positive_int(flag: str, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise InvalidInput(flag, f"must be a positive integer, got {text!r}") from None
    if value <= 0:
        raise InvalidInput(flag, f"must be a positive integer, got {value}")
    return value


def positive_float(flag: str, text: str | float) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InvalidInput(flag, f"must be a positive number, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise InvalidInput(flag, f"must be a positive number, got {text}")
    return value


def fraction(flag: str, text: str | float) -> float:
    value = positive_float(flag, text)
    if value > 1:
        raise InvalidInput(flag, f"must be in (0, 1], got {text}")
    return value


def int_list(flag: str, text: str, allow_none: bool = False) -> list[int | None]:
    out: list[int | None] = []
    for item in text.split(","):
        item = item.strip()
        if allow_none and item.lower() == "none":
            out.append(None)
        elif not item:
            raise InvalidInput(flag, f"empty item in list {text!r}")
        else:
            out.append(positive_int(flag, item))
    return out


def pairs(flag: str, text: str) -> list[tuple[int, float]]:
    """'100:0.5,300:0.3' -> [(100, 0.5), (300, 0.3)]; the probabilities must sum to 1."""
    out: list[tuple[int, float]] = []
    for item in text.split(","):
        tokens, sep, prob = item.strip().partition(":")
        if not sep:
            raise InvalidInput(flag, f"expected TOKENS:PROBABILITY items, got {item.strip()!r}")
        out.append((positive_int(flag, tokens), fraction(flag, prob)))
    total = sum(p for _, p in out)
    if abs(total - 1.0) > 1e-6:
        raise InvalidInput(flag, f"probabilities must sum to 1, they sum to {total:g}")
    return out


def emit(data: dict[str, Any], as_json: bool, render: Callable[[dict[str, Any]], str]) -> None:
    if as_json:
        sys.stdout.write(json.dumps(data, indent=2, sort_keys=False) + "\n")
    else:
        sys.stdout.write(render(data) + "\n")


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True))
    body = ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join([line, "  ".join("-" * w for w in widths), *body])


def add_json_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="machine-readable JSON on stdout")


PROFILE_HELP = {
    "auto": "auto (the default: the built-in calibrated profile where one ships for the GPU, else "
    "theoretical), theoretical (roofline bound), calibrated, or a profile JSON file",
    "theoretical": "theoretical (roofline bound, the default here), calibrated, auto (calibrated where "
    "one ships for the GPU), or a profile JSON file",
}


def add_profile_flag(p: argparse.ArgumentParser, default: str) -> None:
    """`--profile`, the same choices everywhere (planner.costmodel.profile.resolve_profile)."""
    p.add_argument("--profile", default=default, help=PROFILE_HELP[default])
