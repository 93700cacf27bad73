"""Request logs, one request per row, summed per bucket (arrival_buckets.ArrivalBuckets).

Formats (column names match case-insensitively; other columns are ignored):

* `azure`: the Azure LLM inference traces (Azure/AzurePublicDataset,
  AzureLLMInferenceDataset2023.md and 2024.md): `TIMESTAMP,ContextTokens,GeneratedTokens`.
  2023 writes `2023-11-16 18:15:46.6805900` (naive, UTC), 2024 `2024-05-10 00:00:00.009930+00:00`;
  both are read by planner.traces' timestamp parser, as are unix seconds.
* `burstgpt`: BurstGPT (HPMLL/BurstGPT README, "Schema"):
  `Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type`, Timestamp in seconds
  from 0:00 of the trace's first day (so the series starts near unix 0: the dates are not
  published). Failed requests are written with `Response tokens` 0; they are left out of the
  counts (the authors' `BurstGPT_without_fails_*.csv` drop exactly these rows) and counted in
  HistorySeries.dropped_requests.
* `mooncake`: Mooncake's traces (kvcache-ai/Mooncake, FAST25-release/traces/*.jsonl), one JSON
  object a line: `timestamp` (ms from the trace's start), `input_length`, `output_length`,
  `hash_ids` (ignored).

Token counts are whole numbers in 0 .. 10,000,000 (planner.traces' parser).
"""

from __future__ import annotations

import io
import json

from planner.errors import InvalidInput, echo
from planner.history.arrival_buckets import ArrivalBuckets
from planner.history.csv_rows import rows, unix_s
from planner.history.origin import MAX_HISTORY_ROWS, Source
from planner.history.series import HistorySeries
from planner.traces import _parse_tokens

MAX_TRACE_MS = 1e14  # Mooncake timestamps: ~3,000 years of milliseconds


def _tokens(text: str, at: str, src: Source) -> int:
    try:
        return _parse_tokens(text, at)
    except InvalidInput as exc:
        raise src.error(at, exc.reason) from None


def _csv_log(
    stream: io.TextIOBase, bucket_s: float, src: Source, cols: tuple[str, str, str], drop_zero_output: bool
) -> HistorySeries:
    time_col, prompt_col, output_col = cols
    acc = ArrivalBuckets(bucket_s, src)
    for line, row in rows(stream, cols, (), src):
        at = f":line {line}"
        t = unix_s(row[time_col], f"{at}.{time_col}", src)
        prompt = _tokens(row[prompt_col], f"{at}.{prompt_col}", src)
        output = _tokens(row[output_col], f"{at}.{output_col}", src)
        if drop_zero_output and output == 0:
            acc.dropped += 1
            continue
        acc.add(t, prompt, output, at)
    return acc.series()


def read_azure(stream: io.TextIOBase, bucket_s: float, src: Source) -> HistorySeries:
    return _csv_log(stream, bucket_s, src, ("TIMESTAMP", "ContextTokens", "GeneratedTokens"), False)


def read_burstgpt(stream: io.TextIOBase, bucket_s: float, src: Source) -> HistorySeries:
    return _csv_log(stream, bucket_s, src, ("Timestamp", "Request tokens", "Response tokens"), True)


def _field(obj: dict[str, object], key: str, at: str, src: Source) -> object:
    if key not in obj:
        raise src.error(f"{at}.{key}", "missing")
    return obj[key]


def read_mooncake(stream: io.TextIOBase, bucket_s: float, src: Source) -> HistorySeries:
    acc = ArrivalBuckets(bucket_s, src)
    count = 0
    for line, text in enumerate(stream, start=1):
        if not text.strip():
            continue
        at = f":line {line}"
        count += 1
        if count > MAX_HISTORY_ROWS:
            raise src.error(at, f"more than {MAX_HISTORY_ROWS:,} rows")
        try:
            obj = json.loads(text)
        except ValueError as exc:
            raise src.error(at, f"not JSON: {exc}") from None
        if not isinstance(obj, dict):
            raise src.error(at, f"is {type(obj).__name__}, not a JSON object")
        ms = _field(obj, "timestamp", at, src)
        if isinstance(ms, bool) or not isinstance(ms, int | float) or not 0 <= ms < MAX_TRACE_MS:
            raise src.error(f"{at}.timestamp", f"{echo(ms)} is not milliseconds in 0 .. {MAX_TRACE_MS:g}")
        prompt, output = (
            _tokens(str(_field(obj, k, at, src)), f"{at}.{k}", src) for k in ("input_length", "output_length")
        )
        acc.add(ms / 1000.0, prompt, output, at)
    return acc.series()
