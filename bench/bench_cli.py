"""`capplan` as a user runs it from a shell: a fresh process per call.

python3 bench/bench_cli.py [N]

1. CPU of whole commands (user + sys of the process and of its children: the capacity pool's
   worker processes, a CBC run), median of N, as seconds and as a ratio to `python -c pass` (the
   interpreter's own start, which the ratio takes out of the machine's speed). The target
   (issue 32): `capplan plan examples/chat.yaml` under 0.5 s of CPU on the 2-core dev machine.
2. Wall time of `capplan analyze` calls, median and max of N.

Bytecode is cached first (one warm-up call each, PYTHONDONTWRITEBYTECODE unset), as for an
installed package; each call then starts cold otherwise (no memo survives a process).
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED")}

STARTUP = {
    "capplan --help": ["--help"],
    "capplan catalog gpus": ["catalog", "gpus"],
    "capplan plan examples/chat.yaml": ["plan", "examples/chat.yaml"],
    "capplan plan examples/chat.yaml --json": ["plan", "examples/chat.yaml", "--json"],
}
TARGET_CPU_S = {"capplan plan examples/chat.yaml": 0.5}

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


def cpu_s(argv: Sequence[str]) -> float:
    """User + sys CPU seconds of one process run to its end, its waited-for children included."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, check=True, capture_output=True, cwd=ROOT, env=ENV)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def median_cpu_s(argv: Sequence[str], n: int) -> float:
    cpu_s(argv)  # warm-up: bytecode written, files in the page cache
    return statistics.median(cpu_s(argv) for _ in range(n))


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    capplan = [sys.executable, "-m", "planner.cli"]
    base = median_cpu_s([sys.executable, "-c", "pass"], n)
    print(f"CPU of a whole process and its children, median of {n} (python -c pass: {base:.3f} s)")
    for name, argv in STARTUP.items():
        got = median_cpu_s([*capplan, *argv], n)
        target = TARGET_CPU_S.get(name)
        goal = "" if target is None else f"   target {target:.2f} s: {'met' if got < target else 'NOT met'}"
        print(f"  {name:42s} {got:.3f} s   x{got / base:5.1f} python -c pass{goal}")
    print(f"capplan analyze, fresh process per call, median and max of {n} runs (wall seconds)")
    for name, argv in CALLS.items():
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            subprocess.run([*capplan, "analyze", *argv], check=True, capture_output=True, cwd=ROOT, env=ENV)
            times.append(time.perf_counter() - t0)
        print(f"  {name:16s} median {statistics.median(times):.3f} s   max {max(times):.3f} s")


if __name__ == "__main__":
    main()
