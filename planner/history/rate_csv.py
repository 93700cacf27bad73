"""The plain history CSV: `timestamp,requests_per_s` and optionally `prompt_tokens_mean`,
`output_tokens_mean`, `gap_cv2` (what planner/data/history/ holds).

Rows are samples of a rate at their timestamp (ISO-8601 or unix seconds), in increasing time.
The file's step is its smallest interval between rows (one bucket if it has one row); a row's
rate holds from its timestamp for one step, or until the next row if that comes sooner. Time
no row covers is unobserved: a row more than a step after the previous leaves a gap.

Re-bucketing by time-weighting: a bucket's requests are the time-weighted mean rate over the
part of it that rows cover, times bucket_s; a bucket no row covers is None. The optional
columns are weighted by requests (rate x time covered), so a bucket's mean prompt length is
the mean over its requests; gap_cv2 likewise (exact when rows and buckets coincide).
"""

from __future__ import annotations

import io
import itertools
import math

from planner.history.csv_rows import number, rows, unix_s
from planner.history.origin import Source
from planner.history.series import (
    MAX_HISTORY_BUCKETS,
    MAX_REQUESTS_PER_BUCKET,
    BucketLengths,
    HistorySeries,
)

TIME, RATE = "timestamp", "requests_per_s"
PROMPT, OUTPUT, CV2 = "prompt_tokens_mean", "output_tokens_mean", "gap_cv2"
MAX_RATE_PER_S = 1e7
MAX_MEAN_TOKENS = 1e7
MAX_GAP_CV2 = 1e6

Row = tuple[float, float, float | None, float | None, float | None]


def _read_rows(stream: io.TextIOBase, src: Source) -> list[Row]:
    out: list[Row] = []
    for line, row in rows(stream, (TIME, RATE), (PROMPT, OUTPUT, CV2), src):
        at = f":line {line}"
        t = unix_s(row[TIME], f"{at}.{TIME}", src)
        if out and t <= out[-1][0]:
            raise src.error(f"{at}.{TIME}", f"{row[TIME]} is not after the previous row's time")
        p, o, c = (
            None if not row.get(c) else number(row[c], f"{at}.{c}", src, hi)
            for c, hi in ((PROMPT, MAX_MEAN_TOKENS), (OUTPUT, MAX_MEAN_TOKENS), (CV2, MAX_GAP_CV2))
        )
        out.append((t, number(row[RATE], f"{at}.{RATE}", src, MAX_RATE_PER_S), p, o, c))
    if not out:
        raise src.error("", "has no rows (only a header)")
    return out


def read(stream: io.TextIOBase, bucket_s: float, src: Source) -> HistorySeries:
    """The plain CSV as a HistorySeries (module docstring)."""
    return bucketed(_read_rows(stream, src), bucket_s, src)


def bucketed(data: list[Row], bucket_s: float, src: Source) -> HistorySeries:
    """Rows (unix s, requests/s, prompt mean, output mean, gap CV²), in increasing time, as
    buckets of `bucket_s` (module docstring); the inline `history.points` of a plan request
    (planner/forecast/from_history.py) come here too."""
    step = min((b[0] - a[0] for a, b in itertools.pairwise(data)), default=bucket_s)
    start = math.floor(data[0][0] / bucket_s) * bucket_s
    n = math.ceil((data[-1][0] + step - start) / bucket_s)
    if n > MAX_HISTORY_BUCKETS:
        raise src.error(".bucket_s", f"{n:,} buckets of {bucket_s:g} s; at most {MAX_HISTORY_BUCKETS:,}")
    covered, reqs = [0.0] * n, [0.0] * n
    sums = [[0.0] * n for _ in range(6)]  # weight and weighted sum, per optional column
    for i, (t, rate, *extra) in enumerate(data):
        end = t + step if i + 1 == len(data) else min(t + step, data[i + 1][0])
        b = int((t - start) // bucket_s)
        while b < n and start + b * bucket_s < end:  # at most step / bucket_s + 1 buckets
            lo, hi = max(t, start + b * bucket_s), min(end, start + (b + 1) * bucket_s)
            if hi > lo:
                covered[b] += hi - lo
                reqs[b] += rate * (hi - lo)
                for k, v in enumerate(extra):
                    if v is not None:
                        sums[2 * k][b] += rate * (hi - lo)
                        sums[2 * k + 1][b] += v * rate * (hi - lo)
            b += 1
    requests = [
        None if covered[b] <= 0.0 else min(reqs[b] / covered[b] * bucket_s, MAX_REQUESTS_PER_BUCKET)
        for b in range(n)
    ]

    def mean(k: int, b: int) -> float | None:
        return sums[2 * k + 1][b] / sums[2 * k][b] if sums[2 * k][b] > 0.0 else None

    lengths = None
    if any(d[2] is not None or d[3] is not None for d in data):
        lengths = []
        for b in range(n):
            p, o = mean(0, b), mean(1, b)
            lengths.append(
                BucketLengths(prompt_tokens_mean=p, output_tokens_mean=o)
                if p is not None and o is not None
                else None
            )
    gap_cv2 = [mean(2, b) for b in range(n)] if any(d[4] is not None for d in data) else None
    return HistorySeries(
        source=src.name,
        start_unix_s=start,
        bucket_s=bucket_s,
        requests=tuple(requests),
        lengths=None if lengths is None else tuple(lengths),
        gap_cv2=None if gap_cv2 is None else tuple(gap_cv2),
    )
