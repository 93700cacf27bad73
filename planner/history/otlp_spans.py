"""vLLM's OpenTelemetry request spans exported as OTLP JSON.

vLLM (with `--otlp-traces-endpoint`) opens one span per request named `llm_request` and sets
the attributes `gen_ai.usage.prompt_tokens` and `gen_ai.usage.completion_tokens`
(vllm/tracing.py SpanAttributes). An OTLP JSON export (the OTLP/HTTP JSON encoding, and the
collector's file exporter, which writes one such object a line) holds them as
`resourceSpans[].scopeSpans[].spans[]`, each with `name`, `startTimeUnixNano` (a decimal string
or a number) and `attributes: [{"key": ..., "value": {"intValue": "123"}}]` (int64 values are
strings in OTLP JSON). A span's start is the request's arrival.

Spans of other names are skipped; an `llm_request` span without the two token attributes is
refused, named by its position (`spans[i]` counts llm_request-or-not spans in file order).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

from planner.errors import echo
from planner.history.arrival_buckets import MAX_TOKENS, ArrivalBuckets
from planner.history.origin import MAX_HISTORY_ROWS, Source
from planner.history.series import HistorySeries

SPAN_NAME = "llm_request"
PROMPT_ATTR = "gen_ai.usage.prompt_tokens"
OUTPUT_ATTR = "gen_ai.usage.completion_tokens"
MAX_UNIX_NS = 10**20  # HistorySeries' 1e11 s


def _documents(text: str, src: Source) -> Iterator[tuple[str, object]]:
    """(where, parsed object): the whole file, else one JSON object a line (file exporter)."""
    try:
        yield "", json.loads(text)
        return
    except ValueError:
        pass
    for line, chunk in enumerate(text.splitlines(), start=1):
        if chunk.strip():
            try:
                yield f":line {line}", json.loads(chunk)
            except ValueError as exc:
                raise src.error(f":line {line}", f"not JSON: {exc}") from None


def _list(obj: object, key: str, at: str, src: Source) -> list[object]:
    value = obj.get(key, []) if isinstance(obj, dict) else None
    if not isinstance(value, list):
        raise src.error(f"{at}.{key}", "is not a list")
    return value


def _spans(text: str, src: Source) -> Iterator[tuple[str, dict[str, object]]]:
    index = 0
    for where, doc in _documents(text, src):
        if not isinstance(doc, dict) or "resourceSpans" not in doc:
            raise src.error(where, "has no resourceSpans (not an OTLP JSON trace export)")
        for r, rs in enumerate(_list(doc, "resourceSpans", where, src)):
            for s, ss in enumerate(_list(rs, "scopeSpans", f"{where}.resourceSpans[{r}]", src)):
                for span in _list(ss, "spans", f"{where}.resourceSpans[{r}].scopeSpans[{s}]", src):
                    if index >= MAX_HISTORY_ROWS:
                        raise src.error(".spans", f"more than {MAX_HISTORY_ROWS:,} spans")
                    if not isinstance(span, dict):
                        raise src.error(f".spans[{index}]", "is not a JSON object")
                    yield f".spans[{index}]", span
                    index += 1


def _int(value: object, at: str, src: Source, hi: int) -> int:
    """An OTLP int64 (a decimal string or a JSON number) in 0 .. hi."""
    if isinstance(value, dict):  # an AnyValue: {"intValue": "12"} (or doubleValue)
        value = value.get("intValue", value.get("doubleValue"))
    try:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ValueError
        number = int(value) if not isinstance(value, float) or value.is_integer() else None
    except ValueError:
        number = None
    if number is None or not 0 <= number <= hi:
        raise src.error(at, f"{echo(value)} is not a whole number in 0 .. {hi:,}")
    return number


def read(stream: io.TextIOBase, bucket_s: float, src: Source) -> HistorySeries:
    acc = ArrivalBuckets(bucket_s, src)
    for at, span in _spans(stream.read(), src):
        if span.get("name") != SPAN_NAME:
            continue
        attrs = {
            a.get("key"): a.get("value") for a in _list(span, "attributes", at, src) if isinstance(a, dict)
        }
        tokens = []
        for key in (PROMPT_ATTR, OUTPUT_ATTR):
            if key not in attrs:
                raise src.error(f"{at}.attributes", f"an {SPAN_NAME} span without {key}")
            tokens.append(_int(attrs[key], f"{at}.attributes.{key}", src, MAX_TOKENS))
        if "startTimeUnixNano" not in span:
            raise src.error(f"{at}.startTimeUnixNano", "missing")
        start_ns = _int(span["startTimeUnixNano"], f"{at}.startTimeUnixNano", src, MAX_UNIX_NS)
        acc.add(start_ns / 1e9, tokens[0], tokens[1], at)
    return acc.series()
