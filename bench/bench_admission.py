"""The cost of requests against the service's admission estimates (planner/server/policy.py):
seconds of one core per estimated unit, which the limits there are set from.

    python3 bench/bench_admission.py [--quick]

Plan (in-process, one worker, Qwen3-8B, constant 1000/200-token requests at 10/s): listed
budgets (`candidates.max_num_batched_tokens`, 100 / 1,000 / 5,000 values, one GPU, TP 1,
colocated), the default search over five measured GPUs x TP 1/2/4/8 with disaggregation, and
listed long_prefill_token_thresholds (40 x five GPUs x TP 1/2/4/8 over a year of hourly
buckets). Printed: wall seconds, the policy's estimated configurations, the configurations the
search evaluated, and seconds per estimated configuration (the limit, 10,000 estimated
configurations, is set from the worst: ~3 ms, ~30 s).

Simulate (examples/chat-qwen3-8b-h100.yaml, two H100 replicas): 10,000 / 50,000 / 200,000
requests within capacity (12/s) and overloaded (60/s). Printed: wall seconds, peak RSS and
microseconds per simulated request (the limit, 200,000 arrivals, is ~26 s at the worst: ~130 us).

Evaluate at the schema's largest workload (100,000 buckets, 1,000,000 length samples).

Figures on the shared 2-core development machine: budgets 1.3-2.7 ms a configuration (5,001 in
6.5 s), thresholds 25 s for 8,000 estimated (4,345 evaluated), the default search 0.6-0.9 s;
simulate 30-43 us a request within capacity (200,000 in 6.1 s), 130-150 us overloaded (200,000 in
26 s, 853 MiB); evaluate 1.1 s. `--quick` runs the small cases only.
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from planner import api  # noqa: E402
from planner.server.policy import plan_configurations, simulated_arrivals  # noqa: E402

MEASURED_GPUS = ["a100-80gb-sxm", "b200", "h100-sxm", "h200-sxm", "l40s"]


def _plan_request(candidates: dict[str, Any], buckets: int = 0) -> dict[str, Any]:
    arrivals: dict[str, Any] = {"requests_per_s": 10}
    if buckets:
        rates = [5 + (i * 7919 % 1000) / 10 for i in range(buckets)]
        arrivals = {"buckets": [{"duration_s": 3600, "requests_per_s": r} for r in rates]}
    return {
        "model": "Qwen/Qwen3-8B",
        "slo": {"ttft_p99_ms": 2000, "itl_p99_ms": 100},
        "workload": {"arrivals": arrivals, "input_tokens": {"constant": 1000}, "output_tokens": {"constant": 200}},
        "candidates": candidates,
    }


def _plans(quick: bool) -> list[tuple[str, dict[str, Any]]]:
    one = {"gpus": ["h100-sxm"], "tensor_parallel_sizes": [1], "disaggregation": "never"}
    cases = [
        (f"{n:,} listed budgets", _plan_request({**one, "max_num_batched_tokens": [512 + 16 * i for i in range(n)]}))
        for n in ((100, 1000) if quick else (100, 1000, 5000))
    ]
    every = {"gpus": MEASURED_GPUS, "tensor_parallel_sizes": [1, 2, 4, 8]}
    cases.append(("default search, 5 GPUs x 4 TPs", _plan_request(every)))
    if not quick:
        thresholds = {**every, "disaggregation": "never", "mixed_gpu_types": True,
                      "long_prefill_token_thresholds": [0] + [64 * i for i in range(1, 40)]}  # fmt: skip
        cases.append(("40 thresholds, 8,784 buckets", _plan_request(thresholds, buckets=8784)))
    return cases


def bench_plan(quick: bool) -> None:
    print("plan: case | wall s | estimated | evaluated | ms per estimated")
    api.plan(_plan_request({"gpus": ["h100-sxm"], "tensor_parallel_sizes": [1]}), workers=1)  # imports
    for label, req in _plans(quick):
        t = time.perf_counter()
        report = api.plan(req, workers=1)
        wall_s = time.perf_counter() - t
        est = plan_configurations(req)
        evaluated = report.search.configurations_evaluated
        print(f"  {label:34s} {wall_s:7.2f} {est:9,d} {evaluated:9,d} {1e3 * wall_s / est:7.2f}", flush=True)


def bench_simulate(quick: bool) -> None:
    chat = yaml.safe_load((ROOT / "examples" / "chat-qwen3-8b-h100.yaml").read_text())
    print("simulate: requests @ rate | wall s | peak RSS MiB | us per request")
    sizes = (10_000, 50_000) if quick else (10_000, 50_000, 200_000)
    for rate in (12.0, 60.0):
        for n in sizes:
            req = {**chat, "requests": n, "requests_per_s": rate}
            assert simulated_arrivals(req) == ("requests", n)
            t = time.perf_counter()
            api.simulate(req)
            wall_s = time.perf_counter() - t
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
            print(f"  {n:9,d} @ {rate:4.0f}/s {wall_s:7.2f} {rss:6d} {1e6 * wall_s / n:7.1f}", flush=True)


def bench_evaluate(quick: bool) -> None:
    rng = random.Random(0)
    nb, ns = (10_000, 100_000) if quick else (100_000, 1_000_000)
    wl = {
        "arrivals": {"buckets": [{"duration_s": 60, "requests_per_s": 1 + i % 7} for i in range(nb)]},
        "input_tokens": {"samples": [rng.randint(1, 4000) for _ in range(ns)]},
        "output_tokens": {"constant": 200},
    }
    req = {"deployment": {"model": "Qwen/Qwen3-8B", "gpu": "h100-sxm", "replicas": 2}, "workload": wl,
           "slo": {"ttft_p99_ms": 1000, "itl_p99_ms": 50}}  # fmt: skip
    t = time.perf_counter()
    api.evaluate(req)
    print(f"evaluate: {nb:,} buckets, {ns:,} samples: {time.perf_counter() - t:.2f} s")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="the small cases only")
    args = p.parse_args()
    bench_plan(args.quick)
    bench_simulate(args.quick)
    bench_evaluate(args.quick)


if __name__ == "__main__":
    main()
