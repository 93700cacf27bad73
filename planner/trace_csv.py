"""Reading request traces in the Azure LLM inference trace format (CSV text, a file or a trace
bundled with the package) into a planner.trace_model.Trace. The format, the decisions (sorting,
zero counts, blank lines, how errors name a line) and the ranges are documented in
planner/traces.py, which re-exports this module's public names."""

from __future__ import annotations

import csv
import datetime as _dt
import io
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from planner.errors import InvalidInput, echo
from planner.trace_model import MAX_TRACE_REQUESTS, MAX_TRACE_SPAN_S, FloatArray, Trace
from planner.workload import MAX_TOKENS

TIMESTAMP = "TIMESTAMP"
CONTEXT_TOKENS = "ContextTokens"
GENERATED_TOKENS = "GeneratedTokens"
REQUIRED_COLUMNS = (TIMESTAMP, CONTEXT_TOKENS, GENERATED_TOKENS)

# Built-in traces: name -> file under planner/data/traces/ (attribution in the README there).
BUILTIN_TRACES: dict[str, str] = {
    "azure-conv-2023": "AzureLLMInferenceTrace_conv.csv",
    "azure-code-2023": "AzureLLMInferenceTrace_code.csv",
}

_TS_RE = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d+))?\s*(Z|[+-]\d{2}:?\d{2})?$"
)
_EPOCH_ORDINAL = _dt.date(1970, 1, 1).toordinal()


def _parse_timestamp(text: str) -> tuple[int, float] | None:
    """(whole seconds since the epoch, fraction of a second), or None if not a timestamp."""
    m = _TS_RE.match(text)
    if m is None:
        return None
    y, mo, d, h, mi, s, frac, tz = m.groups()
    try:
        ordinal = _dt.date(int(y), int(mo), int(d)).toordinal()
    except ValueError:
        return None
    hh, mm, ss = int(h), int(mi), int(s)
    if hh > 23 or mm > 59 or ss > 60:
        return None
    offset = 0
    if tz and tz != "Z":
        sign = -1 if tz[0] == "-" else 1
        digits = tz[1:].replace(":", "")
        offset = sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    whole = (ordinal - _EPOCH_ORDINAL) * 86400 + hh * 3600 + mm * 60 + ss - offset
    return whole, (int(frac) / 10 ** len(frac) if frac else 0.0)


def _parse_tokens(text: str, where: str) -> int:
    t = text.strip()
    if not t:
        raise InvalidInput(where, "missing value")
    try:
        v = int(t)
    except ValueError:
        try:
            f = float(t)
        except ValueError:
            raise InvalidInput(where, f"{echo(t)} is not a number of tokens") from None
        if not (math.isfinite(f) and f.is_integer()):
            raise InvalidInput(where, f"{echo(t)} is not a whole number of tokens") from None
        v = int(f)
    if v < 0:
        raise InvalidInput(where, f"{v} is negative")
    if v > MAX_TOKENS:
        raise InvalidInput(where, f"{v:,} tokens is more than {MAX_TOKENS:,}")
    return v


def parse_trace(lines: Iterable[str], name: str = "trace", field: str = "trace") -> Trace:
    """Parse Azure-format CSV text (an open file or any iterable of lines). `field` prefixes the
    names in errors (`trace:line 17.ContextTokens`)."""
    reader = csv.reader(lines)
    try:
        return _parse_rows(reader, name, field)
    except csv.Error as exc:
        raise InvalidInput(f"{field}:line {reader.line_num}", f"not CSV: {exc}") from None


class _Columns(NamedTuple):
    """Where the required columns are in a row, and how many cells a row needs to hold them."""

    timestamp: int
    context: int
    generated: int
    need: int


def _header_columns(reader: Any, field: str) -> _Columns:
    """The header line read: each required column found by name (exact, else ignoring case)."""
    header = next(reader, None)
    if header is None:
        raise InvalidInput(field, "is empty (no header line)")
    names = [h.strip().lstrip("\ufeff") for h in header]
    cols: dict[str, int] = {}
    for want in REQUIRED_COLUMNS:
        idx = (
            names.index(want)
            if want in names
            else next((i for i, h in enumerate(names) if h.lower() == want.lower()), -1)
        )
        if idx < 0:
            raise InvalidInput(
                f"{field}.{want}", f"missing column {want}; the header has {', '.join(names) or 'nothing'}"
            )
        cols[want] = idx
    i_ts, i_ctx, i_gen = cols[TIMESTAMP], cols[CONTEXT_TOKENS], cols[GENERATED_TOKENS]
    return _Columns(i_ts, i_ctx, i_gen, max(i_ts, i_ctx, i_gen) + 1)


def _timestamp_cell(text: str, where: str) -> tuple[int, float] | float:
    """A TIMESTAMP cell: (whole seconds since the epoch, fraction) for a date and time, a float
    for a plain number of seconds; anything else (or a non-finite number) is an error."""
    parsed = _parse_timestamp(text)
    if parsed is not None:
        return parsed
    try:
        num = float(text)
    except ValueError:
        num = math.nan
    if not math.isfinite(num):
        raise InvalidInput(
            where, f"cannot parse {echo(text)}; expected YYYY-MM-DD HH:MM:SS[.fraction] or seconds"
        )
    return num


@dataclass
class _Rows:
    """The requests read so far, in file order: times (dates and times split into whole seconds
    and fractions, or plain seconds: one kind for the whole file), token counts, line numbers."""

    whole: list[int] = dataclass_field(default_factory=list)
    frac: list[float] = dataclass_field(default_factory=list)
    numeric: list[float] = dataclass_field(default_factory=list)
    ctx: list[int] = dataclass_field(default_factory=list)
    gen: list[int] = dataclass_field(default_factory=list)
    lines: list[int] = dataclass_field(default_factory=list)
    kind: str | None = None

    def add(self, row: list[str], line: int, cols: _Columns, field: str) -> None:
        """One non-blank row (file line `line`), checked in the order its errors are reported:
        the request count, the row's length, its TIMESTAMP, then its token counts."""
        if len(self.lines) >= MAX_TRACE_REQUESTS:
            raise InvalidInput(
                f"{field}:line {line}", f"more than {MAX_TRACE_REQUESTS:,} requests in a trace"
            )
        self.lines.append(line)
        if len(row) < cols.need:
            missing = next(c for c, i in zip(REQUIRED_COLUMNS, cols[:3], strict=True) if i >= len(row))
            raise InvalidInput(f"{field}:line {line}.{missing}", "missing value (row too short)")
        ts_text = row[cols.timestamp].strip()
        value = _timestamp_cell(ts_text, f"{field}:line {line}.{TIMESTAMP}")
        row_kind = "datetime" if isinstance(value, tuple) else "seconds"
        if self.kind is None:
            self.kind = row_kind
        elif row_kind != self.kind:
            raise InvalidInput(
                f"{field}:line {line}.{TIMESTAMP}",
                f"{echo(ts_text)} mixes {row_kind} with {self.kind} in earlier rows",
            )
        if isinstance(value, tuple):
            self.whole.append(value[0])
            self.frac.append(value[1])
        else:
            self.numeric.append(value)
        self.ctx.append(_parse_tokens(row[cols.context], f"{field}:line {line}.{CONTEXT_TOKENS}"))
        self.gen.append(_parse_tokens(row[cols.generated], f"{field}:line {line}.{GENERATED_TOKENS}"))

    def arrival_s(self, field: str) -> FloatArray:
        """Arrival seconds in file order (dates and times from the earliest one's whole second),
        their span checked against MAX_TRACE_SPAN_S, naming the latest request's line."""
        if self.kind == "datetime":
            w = np.asarray(self.whole, dtype=np.int64)
            t = (w - w.min()).astype(np.float64) + np.asarray(self.frac, dtype=np.float64)
        else:
            t = np.asarray(self.numeric, dtype=np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            span = float(t.max() - t.min())
        if not span <= MAX_TRACE_SPAN_S:
            last = self.lines[int(np.argmax(t))]
            raise InvalidInput(
                f"{field}:line {last}.{TIMESTAMP}",
                f"is {span:.4g} s after the first request; a trace may span at most {MAX_TRACE_SPAN_S:g} s",
            )
        return t


def _parse_rows(reader: Any, name: str, field: str) -> Trace:
    """The header, then every non-blank row (at most MAX_TRACE_REQUESTS), then the trace."""
    cols = _header_columns(reader, field)
    rows = _Rows()
    for row in reader:
        if not row or all(not c.strip() for c in row):
            continue
        rows.add(row, reader.line_num, cols, field)
    if not rows.ctx:
        raise InvalidInput(field, "has no requests (only a header)")
    t = rows.arrival_s(field)
    return Trace.from_arrays(
        t, np.asarray(rows.ctx, dtype=np.int64), np.asarray(rows.gen, dtype=np.int64), name
    )


def load_trace(path: str | Path, name: str | None = None, field: str = "trace") -> Trace:
    """Read an Azure-format trace CSV (see the module docstring), within planner.files.TRACE's
    bounds (a regular file of at most 64 MiB; MAX_TRACE_REQUESTS rows)."""
    from planner.files import TRACE, open_text

    p = Path(path)
    try:
        with open_text(p, field, TRACE, encoding="utf-8-sig") as f:
            return parse_trace(f, name or p.stem, field)
    except UnicodeDecodeError as e:
        raise InvalidInput(field, f"{p} is not UTF-8 text: {e.reason}") from None


def builtin_trace_names() -> list[str]:
    return sorted(BUILTIN_TRACES)


@cache
def builtin_trace(name: str) -> Trace:
    """A trace bundled with the package: "azure-conv-2023" or "azure-code-2023" (one hour of
    Azure LLM inference requests, 2023-11-16; CC-BY 4.0, Patel et al., Splitwise, ISCA 2024)."""
    fname = BUILTIN_TRACES.get(name)
    if fname is None:
        raise InvalidInput(
            "trace", f"unknown built-in trace {echo(name)}; valid: {', '.join(builtin_trace_names())}"
        )
    res = resources.files("planner") / "data" / "traces" / fname
    return parse_trace(
        io.StringIO(res.read_text(encoding="utf-8-sig"), newline=""), name, field=f"trace {name}"
    )
