"""CPU cost of one forecast fit against the service's estimate of it (planner/server/policy.py,
`forecast_units` = history buckets x (weekly period in buckets + 200)): the measurement behind
FORECAST_UNITS_PER_CALL.

python3 bench/bench_forecast_cost.py [BUCKETS:BUCKET_S ...]      (default 2160:3600 1344:900)

For each history size and each forecaster, the process CPU time of `planner.forecast.forecast`
(1,000 buckets ahead at the 0.5/0.9/0.99 quantiles) on a seeded synthetic history with a daily
and a weekly cycle, and that time per estimated unit (us). The admission limit is sound while
the largest us/unit times the limit stays within the per-call budget (~30 s), over the methods
a plan request may name (planner/schema/history_workload.py METHODS); the others (`conformal`,
one extra mstl fit per calibration origin) are measured too and marked, the service does not
run them.
"""

from __future__ import annotations

import math
import random
import sys
import time

from planner.forecast import FORECASTERS, forecast
from planner.history.series import HistorySeries
from planner.schema.history_workload import METHODS as SERVICE_METHODS
from planner.server.policy import FORECAST_UNIT_OFFSET, FORECAST_UNITS_PER_CALL

HORIZON_BUCKETS = 1000


def history(buckets: int, bucket_s: float) -> HistorySeries:
    rng = random.Random(36)
    per_day = 86_400.0 / bucket_s
    counts = []
    for i in range(buckets):
        day = i / per_day
        rate = 20 + 12 * math.sin(2 * math.pi * (day % 1.0)) + (4 if int(day) % 7 < 5 else -4)
        counts.append(max(rate + rng.gauss(0, 1.5), 0.1) * bucket_s)
    return HistorySeries(source="synthetic", start_unix_s=1.7e9, bucket_s=bucket_s, requests=tuple(counts))


def main() -> int:
    sizes = [tuple(a.split(":")) for a in sys.argv[1:]] or [("2160", "3600"), ("1344", "900")]
    print(f"limit: {FORECAST_UNITS_PER_CALL:,} units per call")
    for n_text, bucket_text in sizes:
        n, bucket_s = int(n_text), float(bucket_text)
        units = n * (round(7 * 86_400.0 / bucket_s) + FORECAST_UNIT_OFFSET)
        series = history(n, bucket_s)
        for method in FORECASTERS:
            t0 = time.process_time()
            forecast(series, horizon_buckets=HORIZON_BUCKETS, quantiles=(0.5, 0.9, 0.99), method=method)
            cpu_s = time.process_time() - t0
            print(
                f"{n:>7,} buckets of {bucket_s:>6g} s  {method:<15} {cpu_s:7.2f} s CPU  "
                f"{1e6 * cpu_s / units:6.3f} us/unit  (limit at this rate: {cpu_s / units * FORECAST_UNITS_PER_CALL:5.1f} s)"
                + ("" if method in SERVICE_METHODS else "  [not offered by the service]")
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
