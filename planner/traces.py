"""Request traces in the Azure LLM inference trace format, and the workloads they imply.

The Trace and its statistics are planner/trace_model.py; reading the CSV format (a file, text or a
bundled trace) is planner/trace_csv.py. This module re-exports both; its docstring is their
reference.

Format (Azure/AzurePublicDataset, `data/AzureLLMInferenceTrace_*.csv`): a CSV with header
`TIMESTAMP,ContextTokens,GeneratedTokens` (other columns are ignored; names match
case-insensitively), one request per row, TIMESTAMP like `2023-11-16 18:15:46.6805900`
(any number of fractional digits, `T` or space between date and time, optional `Z`/`±HH:MM`
offset; naive times are taken as UTC). A TIMESTAMP may instead be a plain number of seconds,
if every row does so.

Decisions:
* Rows are sorted by time (stably) if the file is not; arrival times are seconds from the first
  request, so the first arrival is at 0.
* Token counts must be whole, non-negative numbers. A count of 0 is clamped to 1 token (a
  request carries at least one prompt token and vLLM generates at least one token); the number
  of clamped values is kept in `Trace.clamped_zero_tokens`. The two bundled Azure 2023 traces
  have none (minimum prompt 2 / 3 tokens, minimum output 7 / 6 tokens).
* Blank lines are skipped. Errors name the line as `trace:line N.Column`, N the 1-based line
  number in the file (the header is line 1); a missing column is `trace.Column`.
* Per-bucket rates: buckets of `bucket_s` from the first request; the last, partial bucket's
  rate uses its real duration (up to the last request), unless it is shorter than a quarter of
  a bucket, in which case it is merged into the previous one (a lone request in a sliver of time
  would otherwise read as a huge peak). This matches the published per-minute rates.

Ranges (a value outside is refused, naming the trace line or the option and the limit):

| input                        | range                                                      |
|------------------------------|------------------------------------------------------------|
| requests in a trace          | 1 .. 1,000,000 (`MAX_TRACE_REQUESTS`)                      |
| span (first to last request) | at most 1e7 s (~116 days, `MAX_TRACE_SPAN_S`)              |
| token counts                 | 0 .. 10,000,000 (0 is read as 1)                           |
| bucket_s                     | 0.001 .. 1e7 s, and at most 100,000 buckets over the span  |
| bins                         | 1 .. 100,000                                               |
| requests_per_s (time-scaled) | 1e-7 .. 1e6, and the scaled span at most 1e7 s             |
| a derived workload's rates   | at most 1e6 requests/s in any bucket                       |
"""

from __future__ import annotations

from planner.trace_csv import (
    BUILTIN_TRACES,
    CONTEXT_TOKENS,
    GENERATED_TOKENS,
    REQUIRED_COLUMNS,
    TIMESTAMP,
    _parse_timestamp,
    _parse_tokens,
    builtin_trace,
    builtin_trace_names,
    load_trace,
    parse_trace,
)
from planner.trace_model import (
    MAX_BINS,
    MAX_TRACE_REQUESTS,
    MAX_TRACE_SPAN_S,
    FloatArray,
    IntArray,
    LengthStats,
    Trace,
    TraceSummary,
)

__all__ = [
    "BUILTIN_TRACES",
    "CONTEXT_TOKENS",
    "GENERATED_TOKENS",
    "MAX_BINS",
    "MAX_TRACE_REQUESTS",
    "MAX_TRACE_SPAN_S",
    "REQUIRED_COLUMNS",
    "TIMESTAMP",
    "FloatArray",
    "IntArray",
    "LengthStats",
    "Trace",
    "TraceSummary",
    "_parse_timestamp",
    "_parse_tokens",
    "builtin_trace",
    "builtin_trace_names",
    "load_trace",
    "parse_trace",
]
