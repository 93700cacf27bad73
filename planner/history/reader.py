"""`read_history`: one entry point for every history format (issue #36), with format detection.

A history file is read whole within planner.files.HISTORY's bounds (a regular file of at most
1 GiB) and parsed as a stream: the per-row work keeps only per-bucket sums, so memory beyond
the file's bytes grows with the number of buckets, not rows (the plain rate CSV, itself an
aggregate, keeps its rows). At most `MAX_HISTORY_ROWS` rows (or samples, or spans) are read.

Every error is an `InvalidInput` whose field is `FIELD:line N.Column` (or `FIELD.series[i]`,
`FIELD.spans[i]` for JSON) and whose reason starts with the file and the format it was read as.

Formats (`format=`; None detects from the content):

| name         | what                                                                  | module       |
|--------------|-----------------------------------------------------------------------|--------------|
| `csv`        | plain CSV `timestamp,requests_per_s[,prompt_tokens_mean,...]`         | rate_csv     |
| `azure`      | Azure LLM inference trace 2023/2024 `TIMESTAMP,ContextTokens,...`     | request_logs |
| `burstgpt`   | BurstGPT `Timestamp,Model,Request tokens,Response tokens,...`         | request_logs |
| `mooncake`   | Mooncake JSONL `{"timestamp": ms, "input_length", "output_length"}`   | request_logs |
| `otlp`       | vLLM `llm_request` spans as OTLP JSON (`resourceSpans[]...`)          | otlp_spans   |
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Callable
from pathlib import Path

from planner.errors import InvalidInput, echo
from planner.history.origin import FORMATS, MAX_HISTORY_ROWS, Source
from planner.history.series import MAX_BUCKET_S, MIN_BUCKET_S, HistorySeries

__all__ = ["FORMATS", "MAX_HISTORY_ROWS", "Source", "detect_format", "read_history"]

Reader = Callable[[io.TextIOBase, float, Source], HistorySeries]


def _readers() -> dict[str, Reader]:
    from planner.history import otlp_spans, rate_csv, request_logs

    return {
        "csv": rate_csv.read,
        "azure": request_logs.read_azure,
        "burstgpt": request_logs.read_burstgpt,
        "mooncake": request_logs.read_mooncake,
        "otlp": otlp_spans.read,
    }


def _first_line(head: str) -> str:
    return head.lstrip("\ufeff").lstrip().split("\n", 1)[0].strip()


def detect_format(head: str, path: str, field: str) -> str:
    """The format of a file whose text starts with `head` (a few KiB): JSON by its keys, CSV by
    its header's columns. Refused, naming the file and what it starts with, if none fits."""
    line = _first_line(head)
    if line.startswith("{") or line.startswith("["):
        return _detect_json(head, line, path, field)
    names = {c.strip().strip('"').lower() for c in line.split(",")}
    if {"timestamp", "requests_per_s"} <= names:
        return "csv"
    if {"timestamp", "contexttokens", "generatedtokens"} <= names:
        return "azure"
    if {"timestamp", "request tokens", "response tokens"} <= names:
        return "burstgpt"
    raise InvalidInput(
        field,
        f"{path}: cannot tell the history format from its first line {echo(line)}; "
        f"give format= one of {', '.join(FORMATS)}",
    )


def _detect_json(head: str, line: str, path: str, field: str) -> str:
    try:
        first = json.loads(line)
    except ValueError:
        first = None
    if isinstance(first, dict) and {"timestamp", "input_length", "output_length"} <= set(first):
        return "mooncake"
    if '"resourceSpans"' in head:
        return "otlp"
    if '"resultType"' in head or '"result"' in head:
        return "prometheus"
    raise InvalidInput(
        field,
        f"{path}: JSON, but neither a Prometheus range-query result, OTLP spans nor Mooncake "
        f"JSONL; give format= one of {', '.join(FORMATS)}",
    )


def _check_bucket(bucket_s: float, field: str) -> None:
    if not (isinstance(bucket_s, int | float) and math.isfinite(bucket_s)):
        raise InvalidInput(f"{field}.bucket_s", f"{echo(bucket_s)} is not a number of seconds")
    if not MIN_BUCKET_S <= bucket_s <= MAX_BUCKET_S:
        raise InvalidInput(
            f"{field}.bucket_s", f"{bucket_s:g} s is outside {MIN_BUCKET_S:g} .. {MAX_BUCKET_S:g} s"
        )


def read_history(
    path: str | Path, *, bucket_s: float, format: str | None = None, field: str = "history"
) -> HistorySeries:
    """The history in `path` as equal buckets of `bucket_s` seconds (series.HistorySeries).
    `format`: one of FORMATS, or None to detect it from the content."""
    from planner.files import HISTORY, read_bytes

    _check_bucket(bucket_s, field)
    readers = _readers()
    if format is not None and format not in readers:
        raise InvalidInput(
            f"{field}.format", f"{echo(format)} is not a history format; one of {', '.join(readers)}"
        )
    name = str(path)
    data = read_bytes(name, field, HISTORY)
    if format is None:
        format = detect_format(data[:8192].decode("utf-8", errors="replace"), name, field)
        if format not in readers:
            raise InvalidInput(f"{field}.format", f"{name}: detected {format}, which is not read yet")
    source = Source(field, name, format)
    stream = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8-sig", newline="")
    try:
        return readers[format](stream, float(bucket_s), source)
    except UnicodeDecodeError as exc:
        raise source.error("", f"is not UTF-8 text: {exc.reason}") from None
