"""What the readers share: a bounded JSON read with line numbers, vLLM's latency keys
(`{mean,median,std,pNN}_{ttft,tpot,itl,e2el}_ms`) as `LatencySummary` in seconds, and caller
overrides of settings and load."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from planner.errors import InvalidInput, echo
from planner.files import MEASUREMENTS, read_text
from planner.measurements.serving_run import LatencySummary, Load, Settings
from planner.validation import error_to_invalid_input

__all__ = [
    "LATENCY_METRICS",
    "MAX_DOCUMENTS",
    "apply_overrides",
    "latency_from_ms_keys",
    "parse_json_documents",
    "read_json_documents",
    "validated",
]

LATENCY_METRICS: tuple[str, ...] = ("ttft", "tpot", "itl", "e2el")
MAX_DOCUMENTS = 10_000  # JSON objects in one `--append-result` file
_STAT_KEY = re.compile(r"^(mean|median|std|p(\d+(?:\.\d+)?))_(ttft|tpot|itl|e2el)_ms$")
MS_PER_S = 1000.0


def read_json_documents(path: str | Path, field: str) -> list[Any]:
    """The JSON values in `path`: one, or several written one after another (vLLM's
    `--append-result` appends a newline and another object). A syntax error names its line and
    column."""
    return parse_json_documents(read_text(path, field, MEASUREMENTS, encoding="utf-8-sig"), str(path), field)


def parse_json_documents(text: str, path: str, field: str) -> list[Any]:
    """`read_json_documents` of text already read (`path` names it in errors)."""
    decoder = json.JSONDecoder()
    docs: list[Any] = []
    pos = 0
    while len(docs) <= MAX_DOCUMENTS:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            break
        try:
            value, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise InvalidInput(
                field, f"{path}: not JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
            ) from None
        docs.append(value)
    if len(docs) > MAX_DOCUMENTS:
        raise InvalidInput(field, f"{path}: more than {MAX_DOCUMENTS:,} JSON documents")
    if not docs:
        raise InvalidInput(field, f"{path}: empty, expected JSON")
    return docs


def validated(model: type[BaseModel], data: Any, root: str) -> Any:
    """`model.model_validate(data)` with the first error as InvalidInput at its dotted path."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise error_to_invalid_input(exc, root) from None


def _ms_value(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidInput(where, f"must be a finite number of milliseconds, got {echo(value)}")
    if value < 0:
        raise InvalidInput(where, f"must be >= 0 ms, got {value}")
    return float(value) / MS_PER_S


def latency_from_ms_keys(data: Mapping[str, Any], root: str) -> dict[str, LatencySummary]:
    """vLLM's printed latency keys in `data` grouped per metric, in seconds. `root` prefixes the
    field named on a bad value (e.g. "runs[3].result")."""
    parts: dict[str, dict[str, Any]] = {}
    for key, value in data.items():
        m = _STAT_KEY.match(key)
        if m is None or value is None:
            continue
        where = f"{root}.{key}" if root else key
        seconds = _ms_value(value, where)
        stat, pct, metric = m.group(1), m.group(2), m.group(3)
        entry = parts.setdefault(metric, {"percentiles_s": {}})
        if pct is not None:
            entry["percentiles_s"][float(pct)] = seconds
        else:
            entry[f"{stat}_s"] = seconds
    out: dict[str, LatencySummary] = {}
    for metric in LATENCY_METRICS:
        if metric in parts:
            out[metric] = validated(LatencySummary, parts[metric], f"{root}.{metric}".strip("."))
    return out


def apply_overrides(
    settings: dict[str, Any], load: dict[str, Any], overrides: Mapping[str, Any] | None, root: str
) -> None:
    """Put the caller's `overrides` (keys: Settings or Load field names) into the raw
    `settings` / `load` mappings, in place; an unknown key is refused by name."""
    for key, value in (overrides or {}).items():
        if key in Settings.model_fields:
            settings[key] = value
        elif key in Load.model_fields:
            load[key] = value
        else:
            known = sorted({*Settings.model_fields, *Load.model_fields})
            raise InvalidInput(f"{root}.{key}", f"not a setting or load field; one of {', '.join(known)}")
