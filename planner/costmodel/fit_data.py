"""Measured step times: the JSON format `tools/measure_steps.py` writes, and a plain CSV of the
same facts. `capplan calibrate` fits a profile to them.

JSON: {"about": "...", "rows": [ROW, ...]}, one object per row, by `kind`:

  info             metadata (device, torch, model, gpu, params, kv_bytes_per_token, ...): optional,
                   cross-checked against the model and GPU being fitted where present
  ceiling          {"what": "d2d_copy_TBps" | "bf16_gemm_TFLOPs", "value": x}: measured peaks
  linear           {"tokens": T, "ms": t}: every layer's projections and MLP for T tokens
                   (no attention, no embedding, no lm_head)
  decode           {"batch": n, "ctx": c, "ms": t}: one full decode step of n sequences at context c
  prefill          {"prompt": P, "ms": t}: one causal prefill of a P-token prompt, nothing else
  chunked_prefill  {"prompt": P, "chunk": C, "decodes": n, "ctx": c, "prefill_ms": total,
                   "worst_step_ms": worst, "steps": k (optional)}: the prompt in chunks of C, each
                   step also carrying n decodes at context c

CSV: a header line naming the columns, then one row per line; `#` starts a comment line.
Columns: kind,tokens,batch,ctx,prompt,chunk,decodes,ms,worst_step_ms[,steps] (any order; only
`kind` and `ms` are mandatory in the header). A row fills the cells its kind uses and leaves the
others empty; for chunked_prefill, `ms` is the prompt's total prefill time. Kinds: linear,
decode, prefill, chunked_prefill (info and ceiling rows exist only in JSON).

Times are milliseconds in [MIN_MS, MAX_MS] (1 µs, a kernel launch, to one hour): outside
that a row is a unit mistake, and a fit over it cannot be computed (relative residuals over a
time of 1e-300 ms overflow). Shapes (tokens, batch, ctx, prompt, chunk, decodes, steps) are
integers up to MAX_COUNT (10,000,000: a batch of 2.4e155 overflowed the fit), ceilings up to
MAX_CEILING, info's numbers up to INFO_MAX; the inline rows of `api.calibrate` take the same
ranges. Errors name the file and line (and for JSON the row index) of the
offending row.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from planner.errors import InvalidInput, echo

StepKind = Literal["linear", "decode", "prefill", "chunked_prefill"]
STEP_KINDS: tuple[StepKind, ...] = ("linear", "decode", "prefill", "chunked_prefill")
META_KINDS = ("info", "ceiling")
CEILINGS = {"d2d_copy_TBps": 1e12, "bf16_gemm_TFLOPs": 1e12}  # name -> SI factor
CSV_COLUMNS = ("kind", "tokens", "batch", "ctx", "prompt", "chunk", "decodes", "ms", "worst_step_ms", "steps")

# Per kind: required integer keys, required time keys (JSON names), optional keys.
_INT_KEYS: dict[str, tuple[str, ...]] = {
    "linear": ("tokens",),
    "decode": ("batch", "ctx"),
    "prefill": ("prompt",),
    "chunked_prefill": ("prompt", "chunk", "decodes", "ctx"),
}
_TIME_KEYS: dict[str, tuple[str, ...]] = {
    "linear": ("ms",),
    "decode": ("ms",),
    "prefill": ("ms",),
    "chunked_prefill": ("prefill_ms", "worst_step_ms"),
}
_OPTIONAL_KEYS: dict[str, tuple[str, ...]] = {"chunked_prefill": ("steps",)}
_ZERO_OK = {"decodes", "ctx"}  # counts that may be 0 (a chunked prefill with no decodes)
MIN_MS = 1e-3  # a measured time's range (module docstring)
MAX_MS = 3.6e6
MAX_COUNT = 10_000_000  # tokens, sequences or steps in a row's shape: beyond every model's context
MAX_CEILING = 1e30  # a measured ceiling, in its own unit (TB/s, TFLOP/s)
_LINE = re.compile(r"([^\r\n]*)(?:\r\n|\r|\n|\Z)")  # a line, as str.splitlines splits CSV text
MAX_ROWS = 100_000  # rows in one file (a real calibration has hundreds); the file's bytes: planner.files
INFO_MAX = {"params": 1e15, "kv_bytes_per_token": 1e12, "weights_bytes": 1e16}  # info's numbers


@dataclass(frozen=True)
class StepRow:
    """One timed configuration. Times in seconds; `line` is where it came from (1-based)."""

    kind: StepKind
    line: int | None = None
    tokens: int = 0
    batch: int = 0
    ctx: int = 0
    prompt: int = 0
    chunk: int = 0
    decodes: int = 0
    time_s: float = 0.0  # chunked_prefill: the prompt's total prefill time
    worst_step_s: float | None = None  # chunked_prefill only

    @property
    def chunk_steps(self) -> int:
        return math.ceil(self.prompt / self.chunk) if self.chunk else 0

    def shape(self) -> dict[str, int]:
        """The integer facts of this row, as named in the file formats."""
        return {k: getattr(self, k) for k in _INT_KEYS[self.kind]}

    def label(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.shape().items())


@dataclass(frozen=True)
class Measurements:
    source: str  # file name it was read from (or a caller's label)
    rows: tuple[StepRow, ...]
    about: str = ""
    info: Mapping[str, Any] = field(default_factory=dict)
    ceilings: Mapping[str, float] = field(default_factory=dict)  # name -> value as written

    def kinds(self) -> set[str]:
        return {r.kind for r in self.rows}


# --- reading ------------------------------------------------------------------------------------


def load_measurements(path: str | Path, field: str = "MEASUREMENTS") -> Measurements:
    """A .csv file is read as CSV, anything else as JSON; within planner.files.MEASUREMENTS's
    bounds (a regular file of at most 16 MiB) and MAX_ROWS rows."""
    from planner.files import MEASUREMENTS, read_text

    p = Path(path)
    text = read_text(path, field, MEASUREMENTS)
    if p.suffix.lower() == ".csv":
        return parse_csv(text, p.name, field)
    return parse_json(text, p.name, field)


def parse_json(text: str, name: str, field: str = "MEASUREMENTS") -> Measurements:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(field, f"{name}:{exc.lineno}: malformed JSON: {exc.msg}") from None
    except RecursionError:  # json.loads recurses once per level of [ or {
        raise InvalidInput(field, f"{name}: nesting too deep") from None
    if isinstance(doc, list):
        rows_data, about = doc, ""
    elif isinstance(doc, dict):
        if "rows" not in doc:
            raise InvalidInput(field, f"{name}: expected an object with a 'rows' list")
        rows_data, about = doc["rows"], doc.get("about", "")
        if not isinstance(about, str):
            raise InvalidInput(field, f"{name}: 'about' must be text")
    else:
        raise InvalidInput(field, f"{name}: expected an object with a 'rows' list")
    if not isinstance(rows_data, list):
        raise InvalidInput(field, f"{name}: 'rows' must be a list")
    if len(rows_data) > MAX_ROWS:
        raise InvalidInput(
            field, f"{name}: {len(rows_data):,} rows; a measurements file takes at most {MAX_ROWS:,}"
        )
    lines = _row_lines(text, len(rows_data))
    info: dict[str, Any] = {}
    ceilings: dict[str, float] = {}
    rows: list[StepRow] = []
    for i, item in enumerate(rows_data):
        line = lines[i] if i < len(lines) else None
        where = f"{name}:{line}: rows[{i}]" if line else f"{name}: rows[{i}]"
        if not isinstance(item, dict):
            raise InvalidInput(field, f"{where}: expected an object, got {type(item).__name__}")
        kind = item.get("kind")
        if kind == "info":
            info.update({k: v for k, v in item.items() if k != "kind"})
            continue
        if kind == "ceiling":
            what, value = item.get("what"), item.get("value")
            if not isinstance(what, str) or not _is_number(value) or not float(value or 0) > 0:
                raise InvalidInput(
                    field, f"{where}: a ceiling row needs 'what' (text) and a positive 'value'"
                )
            if float(value or 0) > MAX_CEILING:
                raise InvalidInput(field, f"{where}: value must be at most {MAX_CEILING:g}, got {echo(value)}")
            ceilings[what] = float(value or 0)
            continue
        rows.append(_step_row(item, line, where, field))
    if not rows:
        raise InvalidInput(field, f"{name}: no timing rows (kinds: {', '.join(STEP_KINDS)})")
    _check_info(info, name, field)
    return Measurements(source=name, rows=tuple(rows), about=about, info=info, ceilings=ceilings)


def parse_csv(text: str, name: str, field: str = "MEASUREMENTS") -> Measurements:
    records: list[tuple[int, str]] = []  # (line number, text): the header, then at most MAX_ROWS rows
    for n, m in enumerate(_LINE.finditer(text), start=1):  # one at a time: nothing past the cap is kept
        line = m.group(1)
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if len(records) > MAX_ROWS:
            raise InvalidInput(
                field, f"{name}:{n}: more than {MAX_ROWS:,} rows; a measurements file takes at most that"
            )
        records.append((n, line))
    if not records:
        raise InvalidInput(field, f"{name}: empty CSV (expected a header: {','.join(CSV_COLUMNS)})")
    header_line, header_text = records[0]
    header = [h.strip() for h in next(csv.reader([header_text]))]
    for h in header:
        if h not in CSV_COLUMNS:
            raise InvalidInput(
                field, f"{name}:{header_line}: unknown column {echo(h)}; columns: {','.join(CSV_COLUMNS)}"
            )
    if len(set(header)) != len(header):
        raise InvalidInput(field, f"{name}:{header_line}: a column appears twice in the header")
    for need in ("kind", "ms"):
        if need not in header:
            raise InvalidInput(field, f"{name}:{header_line}: the header needs a {echo(need)} column")
    rows: list[StepRow] = []
    for line, raw in records[1:]:
        where = f"{name}:{line}"
        try:
            cells = next(csv.reader([raw]))
        except csv.Error as exc:
            raise InvalidInput(field, f"{where}: {exc}") from None
        if len(cells) != len(header):
            raise InvalidInput(field, f"{where}: {len(cells)} cells, the header has {len(header)}")
        rec = {h: c.strip() for h, c in zip(header, cells, strict=True) if c.strip()}
        kind = rec.get("kind", "")
        item: dict[str, Any] = {"kind": kind}
        for k, v in rec.items():
            if k == "kind":
                continue
            if k == "ms" and kind == "chunked_prefill":
                k = "prefill_ms"
            item[k] = _csv_number(v, k, where, field)
        rows.append(_step_row(item, line, where, field))
    if not rows:
        raise InvalidInput(field, f"{name}: no timing rows after the header")
    return Measurements(source=name, rows=tuple(rows))


def _csv_number(text: str, key: str, where: str, field: str) -> float | int:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise InvalidInput(field, f"{where}: {key} must be a number, got {echo(text)}") from None


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _step_row(item: Mapping[str, Any], line: int | None, where: str, field: str) -> StepRow:
    kind = item.get("kind")
    if kind not in STEP_KINDS:
        valid = ", ".join((*STEP_KINDS, *META_KINDS))
        raise InvalidInput(field, f"{where}: unknown kind {echo(kind)}; valid: {valid}")
    ints, times = _INT_KEYS[kind], _TIME_KEYS[kind]
    allowed = {"kind", *ints, *times, *_OPTIONAL_KEYS.get(kind, ())}
    for k in item:
        if k not in allowed:
            raise InvalidInput(
                field, f"{where}: {kind} rows take {', '.join(sorted(allowed - {'kind'}))}; not {echo(k)}"
            )
    values: dict[str, Any] = {}
    for k in ints:
        if k not in item:
            raise InvalidInput(field, f"{where}: {kind} row needs {echo(k)}")
        v = item[k]
        if not _is_number(v) or float(v) != int(v):
            raise InvalidInput(field, f"{where}: {k} must be an integer, got {echo(v)}")
        if int(v) < 0 or (int(v) == 0 and k not in _ZERO_OK):
            raise InvalidInput(
                field, f"{where}: {k} must be {'>= 0' if k in _ZERO_OK else 'positive'}, got {v}"
            )
        if int(v) > MAX_COUNT:
            raise InvalidInput(field, f"{where}: {k} must be at most {MAX_COUNT:,}, got {echo(v)}")
        values[k] = int(v)
    secs: list[float] = []
    for k in times:
        if k not in item:
            raise InvalidInput(field, f"{where}: {kind} row needs {echo(k)}")
        v = item[k]
        if not _is_number(v) or not v > 0:
            raise InvalidInput(field, f"{where}: {k} must be a positive number of milliseconds, got {echo(v)}")
        if not MIN_MS <= v <= MAX_MS:
            raise InvalidInput(
                field, f"{where}: {k} must be {MIN_MS:g} to {MAX_MS:g} ms (1 µs to an hour), got {echo(v)}"
            )
        secs.append(float(v) / 1e3)
    if kind == "chunked_prefill":
        if values["decodes"] > 0 and values["ctx"] == 0:
            raise InvalidInput(field, f"{where}: ctx must be positive when decodes > 0")
        steps = math.ceil(values["prompt"] / values["chunk"])
        if "steps" in item and item["steps"] != steps:
            raise InvalidInput(
                field,
                f"{where}: steps is {echo(item['steps'])}, but a {values['prompt']}-token prompt in "
                f"{values['chunk']}-token chunks takes {steps}",
            )
        if secs[1] > secs[0] * (1 + 1e-9):
            raise InvalidInput(field, f"{where}: worst_step_ms exceeds the total prefill_ms")
        return StepRow(kind=kind, line=line, time_s=secs[0], worst_step_s=secs[1], **values)
    return StepRow(kind=kind, line=line, time_s=secs[0], **values)


def _check_info(info: Mapping[str, Any], name: str, field: str) -> None:
    for k, most in INFO_MAX.items():
        if k in info and (not _is_number(info[k]) or not info[k] > 0):
            raise InvalidInput(field, f"{name}: info.{k} must be a positive number, got {echo(info[k])}")
        if k in info and info[k] > most:
            raise InvalidInput(field, f"{name}: info.{k} must be at most {most:g}, got {echo(info[k])}")
    for k in ("device", "torch", "model", "gpu", "dtype"):
        if k in info and not isinstance(info[k], str):
            raise InvalidInput(field, f"{name}: info.{k} must be text, got {echo(info[k])}")


_ROWS_KEY = re.compile(r'(?<!\\)"rows"\s*:\s*\[')


def _row_lines(text: str, count: int) -> list[int]:
    """1-based line where each element of the top-level "rows" array starts (best effort)."""
    decoder = json.JSONDecoder()
    stripped = text.lstrip()
    if stripped.startswith("["):
        pos = len(text) - len(stripped) + 1
    else:
        m = _ROWS_KEY.search(text)
        if m is None:
            return []
        pos = m.end()
    out: list[int] = []
    try:
        while len(out) < count:
            while pos < len(text) and text[pos] in " \t\r\n,":
                pos += 1
            out.append(text.count("\n", 0, pos) + 1)
            _, pos = decoder.raw_decode(text, pos)
    except json.JSONDecodeError:
        return out
    return out


# --- writing ------------------------------------------------------------------------------------


def row_to_json(row: StepRow) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": row.kind, **row.shape()}
    if row.kind == "chunked_prefill":
        out["steps"] = row.chunk_steps
        out["prefill_ms"] = row.time_s * 1e3
        out["worst_step_ms"] = (row.worst_step_s or 0.0) * 1e3
    else:
        out["ms"] = row.time_s * 1e3
    return out


def measurements_to_json(m: Measurements) -> dict[str, Any]:
    """The JSON document `parse_json` reads back (info first, then ceilings, then timings)."""
    rows: list[dict[str, Any]] = []
    if m.info:
        rows.append({"kind": "info", **m.info})
    rows.extend({"kind": "ceiling", "what": k, "value": v} for k, v in m.ceilings.items())
    rows.extend(row_to_json(r) for r in m.rows)
    return {"about": m.about, "rows": rows}


def measurements_to_csv(rows: Sequence[StepRow]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    cols = CSV_COLUMNS[:-1]
    w.writerow(cols)
    for r in rows:
        cells = dict.fromkeys(cols, "")
        cells["kind"] = r.kind
        for k, v in r.shape().items():
            cells[k] = str(v)
        cells["ms"] = repr(r.time_s * 1e3)
        if r.worst_step_s is not None:
            cells["worst_step_ms"] = repr(r.worst_step_s * 1e3)
        w.writerow([cells[c] for c in cols])
    return buf.getvalue()
