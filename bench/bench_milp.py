"""Wall time of the sizing MILP (solvers.milp) on synthetic but realistic instances.

    python3 bench/bench_milp.py [RUNS] [--full] [--plan] [--year] [--cbc] [--only a,b1,bm,c,cn,y,yb]
        default 5 runs; --full adds (b) without the reductions (about 30 s); --plan adds (c) and
        (cn); --year adds (y) and (yb) (one run each, about 25 s); --cbc runs every case chosen
        with CBC (the fallback solver) too, for the comparison; --only runs those cases alone

(a) one resource type, one bucket, 50 candidates (TP x budget x max_num_seqs-like variants, all
    colocated): the "one GPU type, one bucket" planner case; target under 200 ms for the whole
    plan, of which this is the solver's share.
(b) 7 resource types x TP {1,2,4,8} x 8 token budgets x {colocated, prefill, decode} = 672
    candidates over 168 hourly buckets (a week with a daily cycle, weekday/weekend levels and
    seeded noise, so every bucket differs), reserved and on-demand prices, one inventory cap;
    single configuration (the planner's default) and mixed (Mélange-style). Target for the whole
    plan (candidates + MILP): under 3 s on 2 cores. Mixed over 168 buckets goes bucket-wise (LP
    bound, then HiGHS on each bucket): it takes seconds, and its time limit (30 s here, the
    planner's default is 10 s) bounds it.

(c) `--plan`: the sizing problem `capplan plan` hands the solver for bench/bench_plan.py's
    catalog-week request (examples/week-forecast.yaml's diurnal week, 7 GPU types, TP 1/2/4/8,
    colocated and disaggregated) with `candidates.mixed_gpu_types: true`: 26 candidates, 168
    buckets of 15 distinct levels, reserved prices on two types. Built once through
    planner.plan.plan (the capacity search, a few seconds, is not timed). (cn): the same with 5%
    seeded noise on every hour's rate (a forecast model's week: 165 distinct levels).

(y) `--year`: (b)'s candidates (the 21 that survive pruning), mixed, over 8,760 distinct hourly buckets (a year of (b)'s week
    with fresh 5% noise on every hour), at the planner's default time limit of 10 s: the whole
    solve must answer within the limit plus 1 s. (yb): the same with every candidate's capacity
    its own in each bucket (bursty traffic: a replica's capacity grows with the load it shares,
    0.75-1.0 of its nominal one here), so that no bucket is merged or sized by another's answer.

Prices $1-6 per unit-hour (reserved about 0.6x), capacities 0.5-70 requests/s: the numbers are
made up to have the right orders of magnitude, the instance shape is what matters here. Reported:
median (and max) wall time of `solve()` over RUNS runs (one for (y), (yb)), its build and solver
parts, which solver ran (HiGHS through PuLP, or CBC with --cbc), and the model size after
reductions next to the size without them.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from solvers import milp_solver
from solvers.milp import Bucket, Candidate, MilpData, MilpResult, Resource, prune_dominated, solve

# name, on-demand $/unit-h, reserved $/unit-h, relative speed per unit, inventory cap
TYPES = (
    ("l4", 1.00, 0.60, 1.0, None),
    ("a10g", 1.20, 0.75, 1.2, None),
    ("l40s", 1.90, 1.15, 2.2, None),
    ("a100-40gb", 2.60, 1.60, 3.0, None),
    ("a100-80gb", 3.40, 2.05, 3.3, None),
    ("h100-sxm", 4.50, 2.70, 6.0, 64),
    ("h200-sxm", 5.90, 3.50, 7.5, None),
)
TPS = (1, 2, 4, 8)
BUDGET_FACTOR = (0.55, 0.70, 0.85, 0.95, 1.00, 0.97, 0.90, 0.80)  # 512 .. 16384 tokens
POOL_FACTOR = {"colocated": 1.0, "prefill": 1.7, "decode": 1.35}


def week_demand(seed: int = 0) -> list[float]:
    """168 hourly rates (requests/s): a daily cycle (trough 4 am, peak 3 pm), weekends at 60%,
    and 5% seeded noise, so no two hours are equal."""
    rng = np.random.default_rng(seed)
    out = []
    for h in range(168):
        day, hour = divmod(h, 24)
        cycle = 0.5 - 0.5 * math.cos(2 * math.pi * (hour - 3) / 24)
        level = 1.0 if day < 5 else 0.6
        out.append(float(level * (15.0 + 105.0 * cycle) * (1.0 + 0.05 * rng.standard_normal())))
    return out


def instance_b(single_config: bool, seed: int = 0) -> MilpData:
    rng = np.random.default_rng(seed + 1)
    resources = tuple(Resource(n, od, rs, cap) for n, od, rs, _, cap in TYPES)
    cands = []
    for name, _, _, speed, _ in TYPES:
        for tp in TPS:
            for j, bf in enumerate(BUDGET_FACTOR):
                for pool, pf in POOL_FACTOR.items():
                    cap = 0.9 * speed * tp**0.85 * bf * pf * float(rng.uniform(0.95, 1.05))
                    cands.append(Candidate(f"{name}/tp{tp}/b{j}/{pool}", name, tp, round(cap, 4), pool, name))
    buckets = tuple(Bucket(d, 1.0) for d in week_demand(seed))
    return MilpData(
        buckets, resources, tuple(cands), headroom=0.1, single_config=single_config, time_limit_s=30.0
    )


def instance_a(seed: int = 0) -> MilpData:
    rng = np.random.default_rng(seed + 2)
    cands = []
    for i in range(50):
        tp = TPS[i % 4]
        cap = 6.0 * tp**0.85 * float(rng.uniform(0.5, 1.0))
        cands.append(Candidate(f"h100/tp{tp}/v{i}", "h100-sxm", tp, round(cap, 4)))
    return MilpData((Bucket(37.0, 1.0),), (Resource("h100-sxm", 4.5, 2.7),), tuple(cands), headroom=0.1)


def instance_y(bursty: bool, seed: int = 0) -> MilpData:
    """(y) / (yb): see the module docstring."""
    b = instance_b(False, seed)
    week = np.array(week_demand(seed))
    rng = np.random.default_rng(seed + 3)
    demand = week[np.arange(8760) % 168] * (1.0 + 0.05 * rng.standard_normal(8760))
    demand = np.maximum(demand, 0.5)
    cands, _ = prune_dominated(b.candidates, respect_groups=False)  # 672 x 8,760 is over MAX_CELLS
    if bursty:
        factor = 0.75 + 0.25 * np.sqrt(demand / demand.max())
        cands = tuple(
            replace(c, capacity_by_bucket_per_s=tuple(float(v) for v in c.capacity_per_s * factor))
            for c in cands
        )
    buckets = tuple(Bucket(float(d), 1.0) for d in demand)
    return replace(b, buckets=buckets, candidates=cands, time_limit_s=10.0)


def timed(data: MilpData, runs: int, **kw: bool) -> tuple[list[float], MilpResult]:
    times = []
    result = solve(data, **kw)  # warm imports and the CBC binary's page cache
    if runs == 0:  # the first run is the measurement (the long cases)
        return [result.solve_time_s], result
    for _ in range(runs):
        t0 = time.perf_counter()
        result = solve(data, **kw)
        times.append(time.perf_counter() - t0)
    return times, result


def report(label: str, times: list[float], result: MilpResult) -> None:
    s = result.stats
    cost = "no solution" if result.objective_usd is None else f"${result.objective_usd:,.2f}"
    if result.gap is not None:
        cost += f" (gap {result.gap:.2%} to the bound ${result.best_bound_usd:,.2f})"
    print(
        f"{label} [{milp_solver.SOLVER}]: median {statistics.median(times) * 1e3:.0f} ms "
        f"(max {max(times) * 1e3:.0f} ms), last run build {s.build_s * 1e3:.0f} ms, solver "
        f"{s.solver_s * 1e3:.0f} ms ({s.method}); {result.status} "
        f"{cost}; model {s.variables} variables, {s.constraints} constraints "
        f"({s.candidates_in_model}/{s.candidates_in} candidates: {s.candidates_pruned} dominated, "
        f"{s.options_evaluated} single configurations costed; "
        f"{s.buckets_in_model}/{s.buckets_in} buckets); selected {', '.join(result.selected)}"
    )


def instance_c() -> MilpData:
    """The MilpData planner.plan.plan builds for the mixed catalog-week request (see (c))."""
    import copy

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_plan import ROOT, cases

    from planner.plan import pipeline, plan

    request = copy.deepcopy(cases()["catalog-week"])
    request["candidates"]["mixed_gpu_types"] = True
    seen: list[MilpData] = []
    real = pipeline.solve

    def keep(data: MilpData, *a: object, **k: object) -> MilpResult:
        seen.append(data)
        return real(data)

    pipeline.solve = keep
    try:
        plan(request, base_dir=ROOT / "examples", workers=1)
    finally:
        pipeline.solve = real
    return seen[0]


def noisy(data: MilpData, seed: int = 0) -> MilpData:
    """`data` with 5% seeded noise on every bucket's demand."""
    rng = np.random.default_rng(seed)
    buckets = tuple(
        Bucket(round(b.demand_per_s * float(1 + 0.05 * rng.standard_normal()), 3), b.hours)
        for b in data.buckets
    )
    return replace(data, buckets=buckets)


def run_cases(want: set[str], runs: int) -> None:
    if "a" in want:
        report("(a) 1 type, 1 bucket, 50 candidates", *timed(instance_a(), max(runs, 20)))
    for single, key in ((True, "b1"), (False, "bm")):
        if key in want:
            b = instance_b(single)
            label = "single configuration" if single else "mixed"
            report(f"(b) 7 types x 4 TP x 8 budgets x 3 pools, 168 buckets, {label}", *timed(b, runs))
    if want & {"c", "cn"}:
        c = instance_c()
        if "c" in want:
            report("(c) capplan plan's mixed catalog-week problem", *timed(c, max(runs, 20)))
        if "cn" in want:
            report("(cn) the same, 5% noise on every hour", *timed(noisy(c), max(runs, 20)))
    for bursty, key in ((False, "y"), (True, "yb")):
        if key in want:
            y = instance_y(bursty)
            label = "capacities per bucket" if bursty else "one capacity each"
            times, result = timed(y, 0)
            report(
                f"({key}) (b)'s candidates, mixed, 8,760 distinct buckets, {label}, limit 10 s", times, result
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="?", type=int, default=5)
    parser.add_argument("--full", action="store_true", help="(b) without the reductions too (~30 s)")
    parser.add_argument(
        "--plan", action="store_true", help="(c) and (cn): the planner's mixed catalog-week problem"
    )
    parser.add_argument("--year", action="store_true", help="(y) and (yb): 8,760 distinct buckets (~25 s)")
    parser.add_argument("--cbc", action="store_true", help="every case with CBC too (the fallback solver)")
    parser.add_argument(
        "--only", default="", help="comma-separated cases among a, b1 (single), bm (mixed), c, cn, y, yb"
    )
    args = parser.parse_args()
    runs = args.runs
    only = set(filter(None, args.only.split(",")))
    default = {"a", "b1", "bm"}
    if args.plan:
        only = only | {"c", "cn"} if only else default | {"c", "cn"}
    if args.year:
        only = only | {"y", "yb"} if only else default | {"y", "yb"}
    want = only or default
    run_cases(want, runs)
    if args.cbc:
        highs = milp_solver.SOLVER
        milp_solver.SOLVER = "cbc"
        try:
            run_cases(want, runs)
        finally:
            milp_solver.SOLVER = highs
    if args.full:  # ~30 s: what the reductions save
        b = instance_b(True)
        t, r = timed(b, 1, reduce=False)
        report("(b) single configuration without reductions (full model)", t, r)


if __name__ == "__main__":
    main()
