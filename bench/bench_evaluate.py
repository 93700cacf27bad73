"""In-process cost of one latency evaluation plus a capacity root-find (planner.latency).

    python3 bench/bench_evaluate.py [RUNS]      (default 200)
    python3 bench/bench_evaluate.py --ab OTHER_TREE [ROUNDS]      (default 8 a worker pair)

Each run builds the model for a deployment and answers two questions, as a planner does for one
candidate: `evaluate()` at the workload's rate (steady state by root-finding, p50/p99 TTFT and
ITL, KV, cost, floors) and `capacity()` under TTFT and ITL p99 targets (stability boundary and
bracketed root-finding). Reported: median and p90 wall time over RUNS runs, for

* per candidate: `LatencyModel(resolved deployment, workload stats)` + evaluate + capacity, the
  workload's statistics built once (a planner evaluates many candidates on one workload);
* from scratch: also `Deployment.resolve()` and `WorkloadStats.of(workload)` every run.

The target is a median under 5 ms.

`--ab OTHER_TREE`: this checkout against another (a `git worktree` or `git archive` of an older
commit), per candidate, in two worker processes that take turns (ROUNDS rounds of 20 samples of
three candidates each), and that for AB_PAIRS fresh pairs of processes. Each side's figure is its
fastest sample: on a shared machine other load only ever adds time, so the minimum is the
reading least moved by it, and taking turns exposes both to the same host. A process can run a
few percent slower than another of the same code for its whole life, so the ratio printed is
the median over the pairs of each pair's ratio (each pair's shown too), with the rounds' 10th
percentiles' ratio as a second reading.
"""

from __future__ import annotations

import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from planner.deployment import Deployment
from planner.latency import CapacityResult, LatencyModel, Prediction, Slo, WorkloadStats
from planner.workload import Workload

DEPLOYMENT = Deployment(model="Qwen/Qwen3-8B", gpu="h100-sxm", replicas=2, max_num_batched_tokens=4096)
WORKLOAD = Workload.from_mapping(
    {
        "arrivals": {"requests_per_s": 12.0},
        "input_tokens": {"percentiles": {"p10": 150, "p50": 800, "p90": 2000, "p99": 4000, "max": 8000}},
        "output_tokens": {"pairs": [[100, 0.5], [300, 0.3], [800, 0.15], [2000, 0.05]]},
        "prefix_cache_hit_fraction": 0.2,
    }
)
SLO = Slo(ttft_p99_s=0.5, itl_p99_s=0.04)


def timed(fn: Callable[[], object], runs: int) -> list[float]:
    for _ in range(5):  # warm caches (imports, catalog look-ups, scipy)
        fn()
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def report(name: str, times: list[float]) -> float:
    ms = sorted(t * 1e3 for t in times)
    median = statistics.median(ms)
    p90 = ms[min(len(ms) - 1, int(0.9 * len(ms)))]
    print(f"{name:<44} median {median:6.2f} ms   p90 {p90:6.2f} ms   ({len(ms)} runs)")
    return median


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--ab":
        if len(sys.argv) < 3:
            print("usage: bench_evaluate.py --ab OTHER_TREE [ROUNDS]", file=sys.stderr)
            return 2
        return ab(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 8)
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    resolved = DEPLOYMENT.resolve()
    stats = WorkloadStats.of(WORKLOAD)

    def per_candidate() -> tuple[Prediction, CapacityResult]:
        m = LatencyModel(resolved, stats)
        return m.evaluate(), m.capacity(SLO)

    def from_scratch() -> tuple[Prediction, CapacityResult]:
        m = LatencyModel(DEPLOYMENT.resolve(), WorkloadStats.of(WORKLOAD))
        return m.evaluate(), m.capacity(SLO)

    pred, cap = per_candidate()
    assert pred.ttft_p99_s is not None and pred.itl_p99_s is not None
    print(
        f"{resolved.model.name} on {resolved.gpu.name} x{resolved.total_replicas}: "
        f"TTFT p99 {pred.ttft_p99_s * 1e3:.1f} ms, ITL p99 {pred.itl_p99_s * 1e3:.2f} ms at "
        f"{pred.requests_per_s:g} req/s; capacity {cap.max_requests_per_s_within_slo:.3f} req/s per replica "
        f"({cap.binding_limit})"
    )
    before = host_reference_ms()
    median = report("evaluate + capacity, per candidate", timed(per_candidate, runs))
    report("evaluate + capacity, from scratch", timed(from_scratch, runs))
    after = host_reference_ms()
    print("target: median < 5 ms:", "met" if median < 5.0 else "NOT met")
    print(
        f"host: sum(range(10**6)) best of 5 took {before:.1f} ms before, {after:.1f} ms after (this "
        "machine is shared: when these move, so do the medians; compare code by interleaved A/B)"
    )
    return 0


# A worker of `--ab`: loads bench_evaluate.py from its tree (argv[1], with that tree first on the
# path), then per line read (a sample count) prints its fastest and 10th-percentile sample, ms.
_AB_WORKER = """
import importlib.util, sys, time
spec = importlib.util.spec_from_file_location("bench_evaluate_ab", sys.argv[1])
b = importlib.util.module_from_spec(spec)
spec.loader.exec_module(b)
resolved, stats = b.DEPLOYMENT.resolve(), b.WorkloadStats.of(b.WORKLOAD)
def candidate():
    m = b.LatencyModel(resolved, stats)
    m.evaluate(), m.capacity(b.SLO)
for _ in range(30):
    candidate()
for line in sys.stdin:
    ms = []
    for _ in range(int(line)):
        t0 = time.perf_counter()
        candidate(); candidate(); candidate()
        ms.append((time.perf_counter() - t0) / 3 * 1e3)
    ms.sort()
    print(ms[0], ms[len(ms) // 10], flush=True)
"""
AB_SAMPLES = 20  # samples per round, each three candidates
AB_PAIRS = 5  # fresh worker pairs, the reported ratio their median


def ab(other_tree: str, rounds: int, pairs: int = AB_PAIRS) -> int:
    """Interleaved best-of A/B of the per-candidate work, this tree against `other_tree`: `pairs`
    fresh pairs of worker processes (a process can run a few percent slower than another of the
    same code for its whole life: memory layout, hash seeds), each taking `rounds` turns; per
    pair the ratio of the two fastest samples, and their median over the pairs."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    other = os.path.abspath(other_tree)
    if not os.path.isfile(os.path.join(other, "bench", "bench_evaluate.py")):
        print(f"--ab: {other} has no bench/bench_evaluate.py", file=sys.stderr)
        return 2
    ratios, p10_ratios = [], []
    for _ in range(max(pairs, 1)):
        readings = _ab_pair((other, here), max(rounds, 1))
        (old_min, new_min), (old_p10, new_p10) = (
            tuple(min(r[0] for r in side) for side in readings),
            tuple(statistics.median(r[1] for r in side) for side in readings),
        )
        ratios.append(new_min / old_min)
        p10_ratios.append(new_p10 / old_p10)
    print(
        f"per candidate, this tree over {other}: fastest-sample ratio, median of {len(ratios)} process pairs "
        f"{statistics.median(ratios):.4f} (each: {', '.join(f'{r:.4f}' for r in ratios)})"
    )
    print(
        f"rounds' 10th percentile ratio, median of the pairs: {statistics.median(p10_ratios):.4f} ({rounds} rounds a pair)"
    )
    return 0


def _ab_pair(trees: tuple[str, str], rounds: int) -> list[list[tuple[float, float]]]:
    """One pair of workers (`trees`: the other tree, this one) taking turns for `rounds` rounds:
    each side's (fastest, 10th percentile) sample per round, ms."""
    workers = []
    for tree in trees:
        env = {**os.environ, "PYTHONPATH": tree}
        argv = [sys.executable, "-c", _AB_WORKER, os.path.join(tree, "bench", "bench_evaluate.py")]
        workers.append(
            subprocess.Popen(
                argv, cwd=tree, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
            )
        )
    readings: list[list[tuple[float, float]]] = [[], []]
    try:
        for i in range(rounds):
            for side in (0, 1) if i % 2 == 0 else (1, 0):
                w = workers[side]
                assert w.stdin is not None and w.stdout is not None
                w.stdin.write(f"{AB_SAMPLES}\n")
                w.stdin.flush()
                best, p10 = (float(x) for x in w.stdout.readline().split())
                readings[side].append((best, p10))
    finally:
        for w in workers:
            if w.stdin is not None:
                w.stdin.close()
            w.wait()
    return readings


def host_reference_ms() -> float:
    """A pure-Python loop's best of five, in ms: the host's own speed at the time of a reading
    (on 2026-12-01 it read 17-30 ms between consecutive runs on this 2-core machine)."""
    best = math.inf
    for _ in range(5):
        t0 = time.perf_counter()
        sum(range(10**6))
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


if __name__ == "__main__":
    sys.exit(main())
