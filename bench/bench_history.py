"""History reader speed: an Azure-format request log of `--rows` requests (the bundled 2023 code
trace tiled end to end, real timestamps, gaps and lengths, in the 2024 `+00:00` timestamp form)
read into hourly buckets by planner.history.reader.read_history. Prints the median wall time
of `--runs` runs, rows per second and the process's peak RSS.

    python bench/bench_history.py [--rows 1000000] [--runs 3]

Azure's 2024 week-long code trace has 16.8M rows: the rows/s figure says how long it takes.
"""

from __future__ import annotations

import argparse
import datetime as dt
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from planner.history.reader import read_history
from planner.traces import builtin_trace


def _write_log(path: Path, rows: int) -> None:
    trace = builtin_trace("azure-code-2023")
    span = float(trace.arrival_s[-1]) + float(trace.interarrival_s.mean())
    t0 = dt.datetime(2024, 5, 10, tzinfo=dt.UTC).timestamp()
    with path.open("w") as f:
        f.write("TIMESTAMP,ContextTokens,GeneratedTokens\n")
        for i in range(rows):
            copy, k = divmod(i, trace.num_requests)
            t = dt.datetime.fromtimestamp(t0 + copy * span + float(trace.arrival_s[k]), dt.UTC)
            f.write(f"{t.isoformat(sep=' ')},{trace.prompt_tokens[k]},{trace.output_tokens[k]}\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "azure.csv"
        _write_log(log, args.rows)
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            s = read_history(log, bucket_s=3600)
            times.append(time.perf_counter() - start)
    median = statistics.median(times)
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"{args.rows:,} rows -> {len(s.requests)} buckets: "
        f"median {median:.2f} s of {args.runs}, {args.rows / median:,.0f} rows/s, peak RSS {rss_mib:.0f} MiB"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
