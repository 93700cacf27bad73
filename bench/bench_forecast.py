"""`capplan forecast` on a 90-day hourly history, then `capplan plan` on what it prints, as a user
pipes them: a fresh process each, wall time of the pair, median of N (issue #36's target: under
5 s on the 2-core dev machine).

python3 bench/bench_forecast.py [N]

The history is synthetic (made here, seeded): 2,160 hourly buckets of a daily and a weekly cycle,
a 0.2%/day trend and Gaussian noise, in the plain `timestamp,requests_per_s` CSV with mean
lengths; the horizon is 30 days (720 buckets) at the 0.9 quantile by `mstl` (the default, and
the slowest forecaster), planned with examples/week-forecast.yaml's model, SLOs, candidates
and prices. One warm-up pair first caches bytecode.
"""

from __future__ import annotations

import math
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 5.0
DAYS = 90


def write_history(path: Path) -> None:
    rng = random.Random(36)
    rows = ["timestamp,requests_per_s,prompt_tokens_mean,output_tokens_mean"]
    for h in range(DAYS * 24):
        weekday = (h // 24) % 7 < 5
        daily = 12 * math.sin(2 * math.pi * (h % 24 - 8) / 24)
        rate = (20 + daily + (4 if weekday else -4)) * (1.002 ** (h / 24)) + rng.gauss(0, 1.5)
        rows.append(f"{1_700_000_000 + h * 3600},{max(rate, 0.1):.3f},800,300")
    path.write_text("\n".join(rows) + "\n")


def one_pair(history: Path, plan_file: Path, out: Path) -> float:
    start = time.perf_counter()
    fc = subprocess.run(
        [
            sys.executable,
            "-m",
            "planner.cli",
            "forecast",
            str(history),
            "--horizon",
            "30d",
            "--bucket",
            "1h",
            "--quantile",
            "0.9",
            "--plan",
            str(plan_file),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    out.write_text(fc.stdout)
    subprocess.run(
        [sys.executable, "-m", "planner.cli", "plan", str(out)], cwd=ROOT, capture_output=True, check=True
    )
    return time.perf_counter() - start


def main(n: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        history, out = Path(tmp) / "history.csv", Path(tmp) / "plan.yaml"
        write_history(history)
        plan_file = ROOT / "examples" / "week-forecast.yaml"
        one_pair(history, plan_file, out)  # warm-up: bytecode
        times = [one_pair(history, plan_file, out) for _ in range(n)]
    median = statistics.median(times)
    print(
        f"forecast (mstl, 90 days hourly -> 30 days) + plan: median {median:.2f} s, "
        f"min {min(times):.2f} s, max {max(times):.2f} s over {n} runs (target < {TARGET_S:g} s)"
    )
    return 0 if median < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 5))
