"""Regenerate planner/data/history/servegen-<model>-hourly.csv from Alibaba's ServeGen data.

ServeGen (github.com/alibaba/ServeGen, Apache-2.0) publishes, per client of a model's service,
`chunk-<client>-trace.csv` (rows `start_s,rate_per_s,cv,pattern,arg1,arg2`, one per 10-minute
window over 14 days; an empty pattern is an idle window) and `chunk-<client>-dataset.json`
(per 6-hour window, the input and output token-count distributions as `{tokens: probability}`).

This sums the clients' rates per 10-minute window (the service's arrival rate) and weighs each
client's mean lengths (its latest 6-hour distribution) by its rate, writes that as the plain
history CSV at 10-minute rows, reads it back with planner.history.reader.read_history at --bucket-s
(time-weighted, as every plain CSV is read) and writes the bucketed series in the same format.
ServeGen's times are seconds from the trace's start (its dates are not published), so the
series starts at unix 0.

    python tools/servegen_history.py SERVEGEN/data/language/m-large \
        planner/data/history/servegen-m-large-hourly.csv --bucket-s 3600
"""

from __future__ import annotations

import argparse
import bisect
import csv
import json
import re
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from planner.history.reader import read_history

_PAIR = re.compile(r"(\d+)\s*:\s*([0-9.eE+-]+)")


def _mean_tokens(pdf_text: str) -> float | None:
    """Mean of a `{tokens: probability}` distribution written as a Python dict literal."""
    total = weighted = 0.0
    for tokens, p in _PAIR.findall(pdf_text):
        total += float(p)
        weighted += int(tokens) * float(p)
    return weighted / total if total > 0 else None


def _client_lengths(path: Path) -> list[tuple[int, float, float]]:
    """(window start s, mean input, mean output) of one client, by window, sorted."""
    out = []
    for start, fields in json.loads(path.read_text()).items():
        p, o = _mean_tokens(fields["input_tokens"]), _mean_tokens(fields["output_tokens"])
        if p is not None and o is not None:
            out.append((int(start), p, o))
    return sorted(out)


def _windows(folder: Path) -> tuple[dict[int, list[float]], int, int]:
    """Per 10-minute window start: [rate sum, rate with lengths, prompt x rate, output x rate]."""
    sums: dict[int, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    clients = with_lengths = 0
    for trace in sorted(folder.glob("chunk-*-trace.csv")):
        clients += 1
        dataset = trace.with_name(trace.name.replace("-trace.csv", "-dataset.json"))
        lengths = _client_lengths(dataset) if dataset.exists() else []
        with_lengths += bool(lengths)
        starts = [w[0] for w in lengths]
        with trace.open() as f:
            for row in csv.reader(f):
                t, rate = int(row[0]), float(row[1])
                acc = sums[t]
                acc[0] += rate
                i = bisect.bisect_right(starts, t) - 1
                if rate > 0 and i >= 0:
                    acc[1] += rate
                    acc[2] += lengths[i][1] * rate
                    acc[3] += lengths[i][2] * rate
    return sums, clients, with_lengths


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path, help="a ServeGen model folder (data/language/m-large)")
    ap.add_argument("out", type=Path)
    ap.add_argument("--bucket-s", type=float, default=3600.0)
    args = ap.parse_args(argv)
    sums, clients, with_lengths = _windows(args.folder)
    with tempfile.TemporaryDirectory() as tmp:
        ten_min = Path(tmp) / "ten-minute.csv"
        with ten_min.open("w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(["timestamp", "requests_per_s", "prompt_tokens_mean", "output_tokens_mean"])
            for t in sorted(sums):
                rate, rate_l, p, o = sums[t]
                means = [f"{p / rate_l:.1f}", f"{o / rate_l:.1f}"] if rate_l > 0 else ["", ""]
                w.writerow([t, f"{rate:.6g}", *means])
        series = read_history(ten_min, bucket_s=args.bucket_s, format="csv")
    with args.out.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["timestamp", "requests_per_s", "prompt_tokens_mean", "output_tokens_mean"])
        for i, (r, length) in enumerate(zip(series.requests, series.lengths or [], strict=True)):
            t = int(series.start_unix_s + i * series.bucket_s)
            rate = "" if r is None else f"{r / series.bucket_s:.4f}"
            means = (
                ["", ""]
                if length is None
                else [f"{length.prompt_tokens_mean:.1f}", f"{length.output_tokens_mean:.1f}"]
            )
            w.writerow([t, rate, *means])
    print(
        f"{clients} clients ({with_lengths} with length data), {len(sums)} windows -> "
        f"{len(series.requests)} buckets of {args.bucket_s:g} s in {args.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
