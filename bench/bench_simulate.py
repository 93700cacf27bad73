"""Simulator speed: 100,000 requests through one vLLM V1 replica.

Two modes.

`--trace azure-conv-2023` (the figure docs/simulate.md quotes): the Azure LLM inference
conversation trace (19,366 requests in an hour) tiled to `--requests` requests (copies end to end,
each shifted by the trace's span plus one mean gap: the recorded gaps, lengths and per-minute
shape repeat), time-scaled to `--load` (default 0.6) of the analytic max stable rate of the
deployment, so the replica is busy all the time (its peak minutes reach ~0.9). Real cost model:
the step timer is `Deployment(--model, --gpu, --max-num-batched-tokens).resolve().replica` with
the theoretical profile (Qwen3-8B on one H100 SXM by default), KV cache and scheduler flags from
the deployment.

    python3 bench/bench_simulate.py --trace azure-conv-2023 [--requests 100000] [--load 0.6]

Without `--trace`, synthetic chat requests:

Lengths like the Azure LLM inference conversation trace (input mean ~1155 tokens, output mean
~211, both lognormal-ish); Poisson arrivals at 24/s, ~78% of the ~30.7/s at which this replica
saturates (KV-bound; found by scanning the rate: the replica steps continuously at any load, so
"busy" means load over capacity here); a toy roofline step timer for an 8B model on an H100
(defined here, so the benchmark does not move when the cost model does). Prints simulated
requests per wall-clock second (median of 3 runs).

    python bench/bench_simulate.py [--requests 100000] [--rate 24.0] [--runs 3] [--no-fast-forward]

Target: 100,000 requests in under 10 s on one core.

`--example FILE` (e.g. examples/chat-qwen3-8b-h100.yaml): the file's deployment (default
profile) serving `--requests` requests sampled lazily from its workload (a RequestStream: the
simulator holds a chunk of input at a time), the memory check of issue 8:

    python3 bench/bench_simulate.py --example examples/chat-qwen3-8b-h100.yaml --requests 1000000 --runs 1

Every mode prints the wall time of each run and the process's peak RSS (getrusage ru_maxrss,
imports and the cost model included).
"""

from __future__ import annotations

import argparse
import math
import resource
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from planner.simulate import SchedulerConfig, SimResult, Slo, simulate

WEIGHT_BYTES = 16.4e9
BANDWIDTH = 3.35e12  # B/s
KV_BYTES_PER_TOKEN = 147456
FLOPS_PER_TOKEN = 2 * 8.19e9
FLOPS = 989e12  # dense bf16 FLOP/s


class ToyRoofline:
    """max(bytes / bandwidth, FLOPs / peak) per step; weights read once per step."""

    def step_time_s(
        self, prefill_chunks: Sequence[tuple[int, int]], decode_count: int, decode_context_tokens_sum: int
    ) -> float:
        tokens = decode_count
        kv_tokens = decode_context_tokens_sum
        for chunk, offset in prefill_chunks:
            tokens += chunk
            kv_tokens += offset + chunk
        return max(
            (WEIGHT_BYTES + KV_BYTES_PER_TOKEN * kv_tokens) / BANDWIDTH, FLOPS_PER_TOKEN * tokens / FLOPS
        )

    def decode_run_time_s(self, decode_count: int, decode_context_tokens_sum: int, steps: int) -> float:
        """Sum over j < steps of max(a + b j, c): memory time grows by b each step, compute is flat."""
        if steps <= 0:
            return 0.0
        a = (WEIGHT_BYTES + KV_BYTES_PER_TOKEN * decode_context_tokens_sum) / BANDWIDTH
        b = KV_BYTES_PER_TOKEN * decode_count / BANDWIDTH
        c = FLOPS_PER_TOKEN * decode_count / FLOPS
        # first step where memory time reaches compute time
        split = 0 if a >= c else min(steps, math.ceil((c - a) / b))
        mem_steps = steps - split
        return split * c + mem_steps * a + b * (split + steps - 1) * mem_steps / 2.0


def workload(n: int, rate: float, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1.0 / rate, n))
    sigma_in, sigma_out = 1.0, 0.9
    prompt = rng.lognormal(math.log(1155) - sigma_in**2 / 2, sigma_in, n)
    output = rng.lognormal(math.log(211) - sigma_out**2 / 2, sigma_out, n)
    prompt = np.clip(np.rint(prompt), 1, 32768).astype(np.int64)
    output = np.clip(np.rint(output), 1, 4096).astype(np.int64)
    return arrival, prompt, output


def timed_runs(fn: Callable[[], SimResult], runs: int) -> tuple[list[float], SimResult]:
    walls = []
    result = None
    for _ in range(runs):
        t0 = time.perf_counter()
        result = fn()
        walls.append(time.perf_counter() - t0)
    assert result is not None
    return walls, result


def report(requests: int, walls: list[float], result: SimResult) -> None:
    rep = result.replicas[0]
    print(
        f"simulated={result.duration_s:.0f}s busy={rep.busy_fraction:.1%} steps={rep.steps} "
        f"peak_kv={rep.peak_kv_fraction:.1%} preemptions={result.preemptions} max_queue={result.max_queue_length}"
    )
    print(
        f"ttft_p50={result.ttft.p50_s * 1e3:.1f}ms ttft_p99={result.ttft.p99_s * 1e3:.1f}ms "
        f"itl_p50={result.itl.p50_s * 1e3:.2f}ms itl_p99={result.itl.p99_s * 1e3:.2f}ms "
        f"tpot_p99={result.tpot.p99_s * 1e3:.2f}ms"
    )
    wall = statistics.median(walls)
    print(f"wall runs: {', '.join(f'{w:.2f}s' for w in walls)}")
    print(f"peak RSS: {peak_rss_mib():,.0f} MiB (whole process)")
    print(
        f"CPU time: {resource.getrusage(resource.RUSAGE_SELF).ru_utime:,.1f} s user (whole process, all runs)"
    )
    print(f"simulated requests per second: {requests / wall:,.0f} (median of {len(walls)})")
    print(f"target: {requests:,} requests in under 10 s:", "met" if wall < 10.0 else "NOT met")


def peak_rss_mib() -> float:
    """Peak resident set size of this process so far (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (2**20 if sys.platform == "darwin" else 2**10)


def example_mode(args: argparse.Namespace) -> None:
    import yaml

    from planner.deployment import Deployment
    from planner.simulate.run import run, workload_stream
    from planner.workload import Workload

    data = yaml.safe_load(Path(args.example).read_text())
    resolved = Deployment.from_mapping(data["deployment"], "deployment").resolve()
    wl = Workload.from_mapping(data["workload"], "workload")
    print(
        f"{args.example}: requests={args.requests:,} (sampled lazily, seed {args.seed}) "
        f"rate={wl.arrivals.mean_requests_per_s:g}/s {resolved.model.name} on {resolved.gpu.name} "
        f"x{resolved.replicas} budget={resolved.max_num_batched_tokens} kv_blocks={resolved.kv.kv_cache_blocks}"
    )
    print(f"peak RSS before simulating: {peak_rss_mib():,.0f} MiB")

    def once() -> SimResult:
        stream = workload_stream(wl, args.seed, count=args.requests)
        return run(
            resolved,
            stream,
            prefix_cache_hit_fraction=wl.prefix_cache_hit_fraction,
            fast_forward=not args.no_fast_forward,
        )

    walls, result = timed_runs(once, args.runs)
    report(args.requests, walls, result)


def trace_mode(args: argparse.Namespace) -> None:
    from planner.deployment import Deployment
    from planner.latency import LatencyModel, WorkloadStats
    from planner.simulate.run import run, trace_requests
    from planner.traces import builtin_trace

    trace = builtin_trace(args.trace)
    resolved = Deployment(
        model=args.model, gpu=args.gpu, max_num_batched_tokens=args.max_num_batched_tokens
    ).resolve()
    cap = LatencyModel(resolved, WorkloadStats.of(trace.to_workload())).max_stable_requests_per_s()
    rate = args.load * cap
    reqs = trace_requests(trace, "scaled", rate, count=args.requests)
    print(
        f"{args.trace} x{args.requests / trace.num_requests:.2f} tiled: requests={len(reqs)} "
        f"rate={rate:.2f}/s ({args.load:.0%} of the analytic max stable {cap:.2f}/s) "
        f"{resolved.model.name} on {resolved.gpu.name} budget={resolved.max_num_batched_tokens} "
        f"kv_blocks={resolved.kv.kv_cache_blocks}"
    )
    walls, result = timed_runs(lambda: run(resolved, reqs, fast_forward=not args.no_fast_forward), args.runs)
    report(len(reqs), walls, result)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--rate", type=float, default=24.0, help="arrivals per second (saturation ~30.7/s)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-fast-forward", action="store_true")
    ap.add_argument("--trace", help="a built-in trace (azure-conv-2023): the real-cost-model mode")
    ap.add_argument("--load", type=float, default=0.6, help="--trace: mean rate / analytic max stable rate")
    ap.add_argument("--model", default="Qwen/Qwen3-8B")
    ap.add_argument("--gpu", default="h100-sxm")
    ap.add_argument("--max-num-batched-tokens", type=int, default=8192)
    ap.add_argument("--example", help="an evaluate/simulate YAML: its deployment on requests sampled from it")
    args = ap.parse_args()
    if args.example is not None:
        example_mode(args)
        return
    if args.trace is not None:
        trace_mode(args)
        return

    reqs = workload(args.requests, args.rate, args.seed)
    # H100 80 GB at 0.9 utilization minus weights: ~400k KV tokens; vLLM's H100 defaults.
    cfg = SchedulerConfig(kv_cache_blocks=25_000, max_num_seqs=1024, max_num_batched_tokens=8192)
    timer = ToyRoofline()
    print(
        f"requests={args.requests} rate={args.rate}/s input_mean={reqs[1].mean():.0f} "
        f"output_mean={reqs[2].mean():.0f} (toy roofline timer)"
    )
    walls, result = timed_runs(
        lambda: simulate(
            reqs, timer, cfg, slo=Slo(ttft_p99_s=2.0, tpot_p99_s=0.05), fast_forward=not args.no_fast_forward
        ),
        args.runs,
    )
    report(args.requests, walls, result)


if __name__ == "__main__":
    main()
