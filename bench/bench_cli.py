"""Wall time of `capplan analyze` calls as a user runs them (fresh process each), median of N.

python3 bench/bench_cli.py [N]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

S = ["--model", "Qwen/Qwen3-8B", "--gpu", "h100-sxm", "--profile", "theoretical", "--json"]
CALLS = {
    "concurrency": ["concurrency", *S, "--context-tokens", "1500", "--concurrency", "1,8,32,64,128,256"],
    "static-batching": [
        "static-batching",
        *S,
        "--context-tokens",
        "1500",
        "--batch",
        "8,32",
        "--output-lengths",
        "100:0.5,300:0.3,800:0.15,2000:0.05",
    ],
    "chunked-prefill": [
        "chunked-prefill",
        *S,
        "--prompt-tokens",
        "16000",
        "--decodes",
        "64",
        "--context-tokens",
        "1500",
        "--chunk",
        "512,1024,2048,4096,8192,none",
    ],
    "prefill": ["prefill", *S, "--prompt-tokens", "1500"],
    "utilization": ["utilization", *S, "--context-tokens", "1500", "--output-tokens-per-day", "10000000"],
    "kv-capacity": ["kv-capacity", *S, "--context-tokens", "8000"],
}


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    print(f"capplan analyze, fresh process per call, median and max of {n} runs (wall seconds)")
    for name, argv in CALLS.items():
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "planner.cli", "analyze", *argv], check=True, capture_output=True
            )
            times.append(time.perf_counter() - t0)
        print(f"  {name:16s} median {statistics.median(times):.3f} s   max {max(times):.3f} s")


if __name__ == "__main__":
    main()
