"""Request traces in the Azure LLM inference trace format, and the workloads they imply.

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

import csv
import datetime as _dt
import io
import math
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from planner.errors import InvalidInput, echo
from planner.validation import validate
from planner.workload import (
    MAX_BUCKET_DURATION_S,
    MAX_BUCKETS,
    MAX_BURSTINESS,
    MAX_DISTRIBUTION_POINTS,
    MAX_REQUESTS_PER_S,
    MAX_TOKENS,
    MIN_BUCKET_DURATION_S,
    MIN_BURSTINESS,
    MIN_REQUESTS_PER_S,
    Arrivals,
    LengthDistribution,
    RateBucket,
    Workload,
)

__all__ = [
    "BUILTIN_TRACES",
    "LengthStats",
    "Trace",
    "TraceSummary",
    "builtin_trace",
    "builtin_trace_names",
    "load_trace",
    "parse_trace",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

TIMESTAMP = "TIMESTAMP"
CONTEXT_TOKENS = "ContextTokens"
GENERATED_TOKENS = "GeneratedTokens"
REQUIRED_COLUMNS = (TIMESTAMP, CONTEXT_TOKENS, GENERATED_TOKENS)

# Built-in traces: name -> file under planner/data/traces/ (attribution in the README there).
BUILTIN_TRACES: dict[str, str] = {
    "azure-conv-2023": "AzureLLMInferenceTrace_conv.csv",
    "azure-code-2023": "AzureLLMInferenceTrace_code.csv",
}

# Caps (see the module docstring). k = 1/CV² is capped at MAX_BURSTINESS (a perfectly regular
# trace has CV 0).
MAX_TRACE_REQUESTS = 1_000_000
MAX_TRACE_SPAN_S = 1e7
MAX_BINS = MAX_DISTRIBUTION_POINTS

_TS_RE = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d+))?\s*(Z|[+-]\d{2}:?\d{2})?$"
)
_EPOCH_ORDINAL = _dt.date(1970, 1, 1).toordinal()


@dataclass(frozen=True)
class LengthStats:
    """Token-length statistics (percentiles by linear interpolation, numpy's default)."""

    mean: float
    std: float
    min: float
    p50: float
    p90: float
    p99: float
    max: float

    @classmethod
    def of(cls, x: IntArray) -> LengthStats:
        p50, p90, p99 = np.percentile(x, [50, 90, 99])
        return cls(
            mean=float(x.mean()),
            std=float(x.std()),
            min=float(x.min()),
            p50=float(p50),
            p90=float(p90),
            p99=float(p99),
            max=float(x.max()),
        )


@dataclass(frozen=True)
class TraceSummary:
    name: str
    num_requests: int
    duration_s: float  # first to last request
    mean_requests_per_s: float  # num_requests / duration_s
    interarrival_mean_s: float
    interarrival_p50_s: float
    interarrival_cv: float  # std / mean of the gaps (population std)
    bucket_s: float
    bucket_rate_min: float  # over full-length buckets (a partial last one is left out)
    bucket_rate_max: float
    peak_to_mean: float  # bucket_rate_max / mean_requests_per_s
    input_tokens: LengthStats
    output_tokens: LengthStats

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True, eq=False)
class Trace:
    """Requests of a trace as parallel arrays: arrival seconds (ascending, first at 0), prompt
    tokens and output tokens (int64, ≥ 1). Arrays are read-only."""

    arrival_s: FloatArray
    prompt_tokens: IntArray
    output_tokens: IntArray
    name: str = "trace"
    clamped_zero_tokens: int = 0

    @classmethod
    def from_arrays(
        cls,
        arrival_s: npt.ArrayLike,
        prompt_tokens: npt.ArrayLike,
        output_tokens: npt.ArrayLike,
        name: str = "trace",
    ) -> Trace:
        """A trace from arrays (arrival times in seconds, any origin, any order). Zero token
        counts are clamped to 1; negative ones are an error."""
        try:
            t = np.asarray(arrival_s, dtype=np.float64)
        except (TypeError, ValueError):
            raise InvalidInput("trace.arrival_s", "arrival times must be numbers of seconds") from None
        p = _whole(prompt_tokens, "trace.prompt_tokens")
        o = _whole(output_tokens, "trace.output_tokens")
        if t.ndim != 1 or t.shape != p.shape or t.shape != o.shape:
            raise InvalidInput("trace", "arrival, prompt and output arrays must be 1-D and the same length")
        if t.size == 0:
            raise InvalidInput("trace", "has no requests")
        if t.size > MAX_TRACE_REQUESTS:
            raise InvalidInput(
                "trace", f"has {t.size:,} requests, more than the {MAX_TRACE_REQUESTS:,} limit"
            )
        if not np.isfinite(t).all():
            raise InvalidInput("trace.arrival_s", "has a non-finite time")
        order = np.argsort(t, kind="stable")
        ts = t[order] - t[order][0]
        if not ts[-1] <= MAX_TRACE_SPAN_S:
            raise InvalidInput(
                "trace.arrival_s",
                f"spans {ts[-1]:.4g} s from the first to the last request, more than {MAX_TRACE_SPAN_S:g} s",
            )
        clamped = int((p == 0).sum() + (o == 0).sum())
        return cls._make(ts, np.maximum(p[order], 1), np.maximum(o[order], 1), name, clamped)

    @classmethod
    def _make(cls, t: FloatArray, p: IntArray, o: IntArray, name: str, clamped: int) -> Trace:
        for a in (t, p, o):
            a.flags.writeable = False
        return cls(t, p, o, name, clamped)

    # ---- basic statistics ------------------------------------------------------------------

    @property
    def num_requests(self) -> int:
        return int(self.arrival_s.size)

    def __len__(self) -> int:
        return self.num_requests

    @property
    def duration_s(self) -> float:
        """Time from the first to the last request."""
        return float(self.arrival_s[-1])

    def _need_span(self) -> None:
        if self.num_requests < 2 or self.duration_s <= 0:
            raise InvalidInput("trace", "needs at least two requests at distinct times to derive a rate")

    @property
    def mean_requests_per_s(self) -> float:
        """num_requests / duration_s (the published convention)."""
        self._need_span()
        return self.num_requests / self.duration_s

    @property
    def interarrival_s(self) -> FloatArray:
        return np.diff(self.arrival_s)

    @property
    def interarrival_cv(self) -> float:
        """Coefficient of variation of the inter-arrival gaps (population std / mean)."""
        self._need_span()
        g = self.interarrival_s
        return float(g.std() / g.mean())

    def buckets(self, bucket_s: float = 60.0) -> tuple[FloatArray, IntArray]:
        """(durations, request counts) of consecutive buckets of `bucket_s` from t = 0; the last
        bucket ends at the last request (merged into the previous one if shorter than a
        quarter bucket)."""
        if not (MIN_BUCKET_DURATION_S <= bucket_s <= MAX_BUCKET_DURATION_S):
            raise InvalidInput(
                "bucket_s",
                f"must be {MIN_BUCKET_DURATION_S:g} .. {MAX_BUCKET_DURATION_S:g} seconds, got {bucket_s}",
            )
        self._need_span()
        span = self.duration_s
        nb = max(1, math.ceil(span / bucket_s))
        if nb > MAX_BUCKETS:
            raise InvalidInput(
                "bucket_s",
                f"{bucket_s:g} s cuts the trace's {span:,.0f} s into {nb:,} buckets, more than "
                f"{MAX_BUCKETS:,}; use at least {span / MAX_BUCKETS:.3g} s",
            )
        idx = np.minimum((self.arrival_s // bucket_s).astype(np.int64), nb - 1)
        counts = np.bincount(idx, minlength=nb).astype(np.int64)
        durations = np.full(nb, bucket_s)
        durations[-1] = span - (nb - 1) * bucket_s
        if nb > 1 and durations[-1] < bucket_s / 4:
            durations[-2] += durations[-1]
            counts[-2] += counts[-1]
            durations, counts = durations[:-1], counts[:-1]
        return durations, counts

    def bucket_rates(self, bucket_s: float = 60.0) -> tuple[FloatArray, FloatArray]:
        """(durations, requests per second) per bucket; see `buckets`."""
        durations, counts = self.buckets(bucket_s)
        return durations, counts / durations

    def summary(self, bucket_s: float = 60.0) -> TraceSummary:
        durations, rates = self.bucket_rates(bucket_s)
        full = durations >= bucket_s * (1 - 1e-9)
        if full.any():
            rates = rates[full]  # min/max over full buckets (as published)
        g = self.interarrival_s
        mean_rate = self.mean_requests_per_s
        return TraceSummary(
            name=self.name,
            num_requests=self.num_requests,
            duration_s=self.duration_s,
            mean_requests_per_s=mean_rate,
            interarrival_mean_s=float(g.mean()),
            interarrival_p50_s=float(np.median(g)),
            interarrival_cv=self.interarrival_cv,
            bucket_s=bucket_s,
            bucket_rate_min=float(rates.min()),
            bucket_rate_max=float(rates.max()),
            peak_to_mean=float(rates.max() / mean_rate),
            input_tokens=LengthStats.of(self.prompt_tokens),
            output_tokens=LengthStats.of(self.output_tokens),
        )

    # ---- derived traces and workloads ------------------------------------------------------

    def time_scaled(self, target_requests_per_s: float) -> Trace:
        """The same requests with time stretched or squeezed so the mean rate is the target
        (burstiness, i.e. the CV of gaps, is unchanged)."""
        if not (MIN_REQUESTS_PER_S <= target_requests_per_s <= MAX_REQUESTS_PER_S):
            raise InvalidInput(
                "requests_per_s",
                f"must be {MIN_REQUESTS_PER_S:g} .. {MAX_REQUESTS_PER_S:g} requests/s, got {target_requests_per_s}",
            )
        factor = self.mean_requests_per_s / target_requests_per_s
        if not self.duration_s * factor <= MAX_TRACE_SPAN_S:
            raise InvalidInput(
                "requests_per_s",
                f"{target_requests_per_s:g}/s stretches the trace to {self.duration_s * factor:.4g} s, "
                f"more than {MAX_TRACE_SPAN_S:g} s",
            )
        return Trace._make(
            self.arrival_s * factor,
            self.prompt_tokens.copy(),
            self.output_tokens.copy(),
            f"{self.name}@{target_requests_per_s:g}rps",
            self.clamped_zero_tokens,
        )

    def operational_interarrival_cv(self, bucket_s: float = 60.0) -> float:
        """CV of the gaps after rescaling time by the per-bucket rates (gaps in units of expected
        arrivals): the burstiness left once the bucket rates explain the slow variation."""
        durations, counts = self.buckets(bucket_s)
        rates = counts / durations
        starts = np.concatenate(([0.0], np.cumsum(durations)[:-1]))
        lam = np.concatenate(([0.0], np.cumsum(counts)[:-1])).astype(np.float64)
        j = np.clip(np.searchsorted(starts, self.arrival_s, side="right") - 1, 0, rates.size - 1)
        s = lam[j] + (self.arrival_s - starts[j]) * rates[j]
        g = np.diff(s)
        return float(g.std() / g.mean())

    def to_workload(
        self,
        bucket_s: float | None = 60.0,
        bins: int | None = None,
        burstiness: Literal["gaps", "rescaled"] = "rescaled",
        name: str | None = None,
        prefix_cache_hit_fraction: float = 0.0,
    ) -> Workload:
        """The workload this trace implies.

        * Arrivals: per-bucket rates (`bucket_s`; None = one constant rate, the mean) and
          burstiness k = 1/CV² of the inter-arrival gaps. With buckets, the raw gaps' CV also
          contains the slow rate variation the buckets already reproduce, so the default
          (`burstiness="rescaled"`) takes the CV of gaps rescaled by the bucket rates, to not
          count it twice (conv: 1.03 vs 1.09 raw; code: 7.2 vs 13.2 raw); `"gaps"` uses the raw
          CV. Without buckets the raw CV is the only one. k is capped at 1e6.
        * Lengths: the empirical distributions of prompt and output tokens (`bins=None`: the
          samples themselves, exact; an int: quantile-binned histograms of that many bins).
        """
        if bins is not None and not (1 <= bins <= MAX_BINS):
            raise InvalidInput("bins", f"must be 1 .. {MAX_BINS:,}, got {bins}")
        if bucket_s is None:
            rate = self.mean_requests_per_s
            if rate > MAX_REQUESTS_PER_S:
                raise InvalidInput(
                    "trace",
                    f"its mean rate {rate:.4g} requests/s is above the {MAX_REQUESTS_PER_S:g} limit",
                )
            arrivals_rate: dict[str, object] = {"requests_per_s": rate}
            cv = self.interarrival_cv
        else:
            durations, rates = self.bucket_rates(bucket_s)
            if durations.min() < MIN_BUCKET_DURATION_S:
                raise InvalidInput(
                    "trace",
                    f"spans {self.duration_s:.3g} s; per-bucket rates need at least {MIN_BUCKET_DURATION_S:g} s",
                )
            if rates.max() > MAX_REQUESTS_PER_S:
                raise InvalidInput(
                    "bucket_s",
                    f"the busiest {bucket_s:g} s bucket has {rates.max():.4g} requests/s, above the "
                    f"{MAX_REQUESTS_PER_S:g} limit; use longer buckets",
                )
            arrivals_rate = {
                "buckets": tuple(
                    RateBucket(duration_s=float(d), requests_per_s=float(r))
                    for d, r in zip(durations, rates, strict=True)
                )
            }
            cv = (
                self.operational_interarrival_cv(bucket_s)
                if burstiness == "rescaled"
                else self.interarrival_cv
            )
        k = MAX_BURSTINESS if cv <= 0 else min(MAX_BURSTINESS, 1.0 / (cv * cv))
        arrivals = validate(Arrivals, {**arrivals_rate, "burstiness": max(k, MIN_BURSTINESS)}, "trace")
        return Workload(
            name=name or self.name,
            arrivals=arrivals,
            input_tokens=LengthDistribution.from_samples(self.prompt_tokens, bins=bins),
            output_tokens=LengthDistribution.from_samples(self.output_tokens, bins=bins),
            prefix_cache_hit_fraction=prefix_cache_hit_fraction,
        )


def _whole(values: npt.ArrayLike, field: str) -> IntArray:
    try:
        a = np.asarray(values)
    except (TypeError, ValueError):
        raise InvalidInput(field, "token counts must be numbers") from None
    if a.dtype.kind == "f":
        bad = ~(np.isfinite(a) & (a == np.round(a)))
        if bad.any():
            raise InvalidInput(field, f"not a whole number of tokens at index {int(np.flatnonzero(bad)[0])}")
    elif a.size and a.dtype.kind not in "iub":
        raise InvalidInput(field, "token counts must be numbers")
    big = np.flatnonzero(a > MAX_TOKENS) if a.size else np.empty(0, dtype=np.intp)
    if big.size:
        i = int(big[0])
        raise InvalidInput(field, f"{a.flat[i]:g} tokens at index {i}, more than {MAX_TOKENS:,}")
    return a.astype(np.int64)


# --------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------


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


def _parse_rows(reader: Any, name: str, field: str) -> Trace:
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
    need = max(i_ts, i_ctx, i_gen) + 1

    whole: list[int] = []
    frac: list[float] = []
    numeric: list[float] = []
    ctx: list[int] = []
    gen: list[int] = []
    lines: list[int] = []
    kind: str | None = None
    for row in reader:
        if not row or all(not c.strip() for c in row):
            continue
        line = reader.line_num
        if len(lines) >= MAX_TRACE_REQUESTS:
            raise InvalidInput(
                f"{field}:line {line}", f"more than {MAX_TRACE_REQUESTS:,} requests in a trace"
            )
        lines.append(line)
        if len(row) < need:
            missing = next(c for c in REQUIRED_COLUMNS if cols[c] >= len(row))
            raise InvalidInput(f"{field}:line {line}.{missing}", "missing value (row too short)")
        ts_text = row[i_ts].strip()
        parsed = _parse_timestamp(ts_text)
        row_kind = "datetime"
        if parsed is None:
            try:
                num = float(ts_text)
            except ValueError:
                num = math.nan
            if not math.isfinite(num):
                raise InvalidInput(
                    f"{field}:line {line}.{TIMESTAMP}",
                    f"cannot parse {echo(ts_text)}; expected YYYY-MM-DD HH:MM:SS[.fraction] or seconds",
                )
            row_kind = "seconds"
        if kind is None:
            kind = row_kind
        elif row_kind != kind:
            raise InvalidInput(
                f"{field}:line {line}.{TIMESTAMP}",
                f"{echo(ts_text)} mixes {row_kind} with {kind} in earlier rows",
            )
        if parsed is not None:
            whole.append(parsed[0])
            frac.append(parsed[1])
        else:
            numeric.append(num)
        ctx.append(_parse_tokens(row[i_ctx], f"{field}:line {line}.{CONTEXT_TOKENS}"))
        gen.append(_parse_tokens(row[i_gen], f"{field}:line {line}.{GENERATED_TOKENS}"))

    if not ctx:
        raise InvalidInput(field, "has no requests (only a header)")
    if kind == "datetime":
        w = np.asarray(whole, dtype=np.int64)
        t = (w - w.min()).astype(np.float64) + np.asarray(frac, dtype=np.float64)
    else:
        t = np.asarray(numeric, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        span = float(t.max() - t.min())
    if not span <= MAX_TRACE_SPAN_S:
        last = lines[int(np.argmax(t))]
        raise InvalidInput(
            f"{field}:line {last}.{TIMESTAMP}",
            f"is {span:.4g} s after the first request; a trace may span at most {MAX_TRACE_SPAN_S:g} s",
        )
    return Trace.from_arrays(t, np.asarray(ctx, dtype=np.int64), np.asarray(gen, dtype=np.int64), name)


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
