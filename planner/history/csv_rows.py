"""What the CSV history readers share: header columns found by name, timestamps (ISO-8601 or
unix seconds, planner.traces' parser), bounded numbers, and rows with their line numbers."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterator

from planner.errors import echo
from planner.history.origin import MAX_HISTORY_ROWS, Source
from planner.traces import _parse_timestamp

MAX_UNIX_S = 1e11  # year 5138: HistorySeries.start_unix_s's bound


def columns(
    header: list[str] | None, need: tuple[str, ...], optional: tuple[str, ...], src: Source
) -> dict[str, int]:
    """Column index by name (case-insensitive, blanks and a BOM stripped); a missing needed
    column is refused naming it and the header."""
    if header is None:
        raise src.error("", "is empty (no header line)")
    names = [h.strip().lstrip("\ufeff").lower() for h in header]
    found: dict[str, int] = {}
    for want in need + optional:
        if want.lower() in names:
            found[want] = names.index(want.lower())
        elif want in need:
            raise src.error(
                f".{want}", f"missing column {want}; the header has {', '.join(header) or 'nothing'}"
            )
    return found


def rows(
    stream: io.TextIOBase, need: tuple[str, ...], optional: tuple[str, ...], src: Source
) -> Iterator[tuple[int, dict[str, str]]]:
    """(line number, {column: text}) for each non-blank row, at most MAX_HISTORY_ROWS; a row
    too short or bad CSV is refused naming its line."""
    reader = csv.reader(stream)
    try:
        cols = columns(next(reader, None), need, optional, src)
        width = max(cols.values()) + 1
        count = 0
        for row in reader:
            if not row or all(not c.strip() for c in row):
                continue
            count += 1
            if count > MAX_HISTORY_ROWS:
                raise src.error(f":line {reader.line_num}", f"more than {MAX_HISTORY_ROWS:,} rows")
            if len(row) < width:
                short = next(c for c, i in cols.items() if i >= len(row))
                raise src.error(f":line {reader.line_num}.{short}", "missing value (row too short)")
            yield reader.line_num, {c: row[i].strip() for c, i in cols.items()}
    except csv.Error as exc:
        raise src.error(f":line {reader.line_num}", f"not CSV: {exc}") from None


def unix_s(text: str, at: str, src: Source) -> float:
    """Seconds since the epoch from ISO-8601 (`2024-05-10 00:00:00.0099+00:00`, naive = UTC) or
    a plain number of seconds."""
    parsed = _parse_timestamp(text)
    if parsed is not None:
        t = parsed[0] + parsed[1]
    else:
        try:
            t = float(text)
        except ValueError:
            raise src.error(
                at, f"cannot parse {echo(text)} as a time; expected ISO-8601 or unix seconds"
            ) from None
    if not 0.0 <= t < MAX_UNIX_S:
        raise src.error(at, f"{echo(text)} is outside 0 .. {MAX_UNIX_S:g} unix seconds")
    return t


def number(text: str, at: str, src: Source, hi: float) -> float:
    """A finite number in 0 .. hi."""
    try:
        v = float(text)
    except ValueError:
        raise src.error(at, f"{echo(text)} is not a number") from None
    if not (math.isfinite(v) and 0.0 <= v <= hi):
        raise src.error(at, f"{echo(text)} is outside 0 .. {hi:g}")
    return v
