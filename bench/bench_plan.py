"""Wall time of `capplan plan` in-process (planner.plan.plan), imports excluded.

    python3 bench/bench_plan.py [RUNS] [--workers N] [--sweep N] [--case NAME ...]
                                  (default 5 runs, 2 workers, a sweep of 200 scenarios)

Cases (targets from issue 10, on the 2-core development machine):

* one-gpu: Qwen3-8B chat (examples/chat.yaml's workload), one GPU type (h100-sxm), TP 1/2/4/8,
  colocated and disaggregated, one bucket: under 200 ms.
* catalog-week: the whole GPU catalog x TP 1/2/4/8 x budgets x colocated/disaggregated, over 168
  hourly buckets (examples/week-forecast.yaml's diurnal week, reserved prices): under 3 s.
* bursty: examples/azure-code-bursty.yaml as it stands (two ten-minute buckets of a bursty trace,
  CV² ~168: each candidate's capacity per replica count, planner/plan/split.py); no target,
  measured for the per-bucket sizing's cost.

Each case runs cold (the capacity memo cleared before every run: every capacity computed, the
MILP solved; the worker processes are kept, as in a service) and warm (the same request again:
the capacities come from the memo, planner/plan/memo.py; the MILP, alternatives and report are
recomputed). Reported: median and max wall time, the CPU time of all processes (this one, the
workers, CBC: the machine is shared, and CPU time moves less with its load than wall time), and
where the time went in the median run (search: capacity screens and root-finds or memo hits;
milp: solvers.milp.solve; rest: alternatives, predictions, report). The targets are judged cold.

Then a budget sweep through planner.api.plan in this process: `--sweep` scenarios of the
one-gpu case, traffic growth x GPU price (the capacity inputs unchanged), with the memo cleared
once before it, against the same scenarios each cold: scenarios/s. The plans are checked equal.
"""

from __future__ import annotations

import argparse
import copy
import os
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from planner.plan import (  # noqa: E402
    capacity_pool,
    pipeline,
    plan,
)
from planner.plan.capacity_pool import CapacityPool  # noqa: E402
from planner.plan.memo import clear_memo, memo_info  # noqa: E402

TARGETS_S: dict[str, float | None] = {"one-gpu": 0.2, "catalog-week": 3.0, "bursty": None}


def cases() -> dict[str, dict[str, Any]]:
    chat = yaml.safe_load((ROOT / "examples" / "chat.yaml").read_text())
    week = yaml.safe_load((ROOT / "examples" / "week-forecast.yaml").read_text())
    one = copy.deepcopy(chat)
    one["candidates"] = {
        "gpus": ["h100-sxm"],
        "tensor_parallel_sizes": [1, 2, 4, 8],
        "disaggregation": "auto",
    }
    cat = copy.deepcopy(week)
    cat["candidates"] = {"tensor_parallel_sizes": [1, 2, 4, 8], "disaggregation": "auto"}
    bursty = yaml.safe_load((ROOT / "examples" / "azure-code-bursty.yaml").read_text())
    return {"one-gpu": one, "catalog-week": cat, "bursty": bursty}


class Phases:
    """Wraps the pipeline's stages to time them."""

    def __init__(self) -> None:
        self.t: dict[str, float] = {}
        self._search = CapacityPool.search
        self._solve = pipeline.solve

    def __enter__(self) -> Phases:
        def search(*a: Any, **k: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return self._search(*a, **k)
            finally:
                self.t["search"] = self.t.get("search", 0.0) + time.perf_counter() - t0

        def solve(*a: Any, **k: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return self._solve(*a, **k)
            finally:
                self.t["milp"] = self.t.get("milp", 0.0) + time.perf_counter() - t0

        CapacityPool.search = search  # type: ignore[method-assign]
        pipeline.solve = solve
        return self

    def __exit__(self, *exc: object) -> None:
        CapacityPool.search = self._search  # type: ignore[method-assign]
        pipeline.solve = self._solve


def _cpu() -> float:
    """CPU seconds of this process, its finished children (CBC) and the live worker processes
    (read from /proc: they outlive each plan)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
    tick = os.sysconf("SC_CLK_TCK")
    for ex in capacity_pool._EXECUTORS.values():
        for pid in list(getattr(ex, "_processes", {}) or {}):
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


def run_case(name: str, request: dict[str, Any], runs: int, workers: int, cold: bool) -> bool:
    walls, phases = [], []
    report = None
    if not cold:
        plan(request, base_dir=ROOT / "examples", workers=workers)  # fill the memo
    for _ in range(runs):
        if cold:
            clear_memo()
        with Phases() as ph:
            c0 = _cpu()
            t0 = time.perf_counter()
            report = plan(request, base_dir=ROOT / "examples", workers=workers)
            wall = time.perf_counter() - t0
            cpu = _cpu() - c0
        walls.append(wall)
        phases.append({**ph.t, "wall": wall, "cpu": cpu})
    assert report is not None
    median = statistics.median(walls)
    mid = sorted(phases, key=lambda p: p["wall"])[len(phases) // 2]
    rest = mid["wall"] - mid.get("search", 0.0) - mid.get("milp", 0.0)
    s = report.search
    target = TARGETS_S[name]
    ok = target is None or median < target
    cpu = statistics.median(p["cpu"] for p in phases)
    label = f"{name} {'cold' if cold else 'warm'}"
    print(
        f"{label:<18} median {median * 1e3:7.0f} ms  max {max(walls) * 1e3:7.0f} ms  "
        + (f"target {target * 1e3:.0f} ms {'ok' if ok else 'MISSED'}" if target is not None else "no target")
        + f"  ({runs} runs, {workers} workers; CPU {cpu * 1e3:.0f} ms "
        f"in all processes; load average {os.getloadavg()[0]:.1f})"
    )
    print(
        f"{'':<18} search {mid.get('search', 0.0) * 1e3:.0f} ms ({s.configurations_evaluated} configurations), "
        f"milp {mid.get('milp', 0.0) * 1e3:.0f} ms ({s.candidates} candidates, {s.candidates_in_milp} in the model, "
        f"{s.milp_variables} variables), rest {rest * 1e3:.0f} ms; {report.workload.buckets} buckets; "
        f"{report.status} ${report.usd_per_month:,.0f}/month"
    )
    return ok


def sweep_scenarios(n: int) -> list[dict[str, Any]]:
    """Traffic growth x on-demand price of the one-gpu case: every scenario distinct, none
    changing a capacity input."""
    base = cases()["one-gpu"]
    out = []
    for i in range(n):
        s = copy.deepcopy(base)
        s["workload"]["arrivals"] = {"requests_per_s": round(5.0 * (1 + (i % 25) * 0.1), 3)}
        s["pricing"] = {"h100-sxm": {"usd_per_gpu_hour": 2.0 + (i // 25) * 0.125}}
        out.append(s)
    return out


def run_sweep(n: int, workers: int) -> None:
    items = sweep_scenarios(n)
    t0 = time.perf_counter()
    cold = []
    for s in items[: max(1, n // 10)]:  # a tenth of them cold: enough for the rate
        clear_memo()
        cold.append(plan(s, base_dir=ROOT / "examples", workers=workers).model_dump_json())
    cold_rate = len(cold) / (time.perf_counter() - t0)
    clear_memo()
    t0 = time.perf_counter()
    warm = [plan(s, base_dir=ROOT / "examples", workers=workers).model_dump_json() for s in items]
    warm_wall = time.perf_counter() - t0
    assert warm[: len(cold)] == cold, "a memo hit changed a plan"
    info = memo_info()
    print(
        f"sweep              {n} scenarios (rate x price), {workers} workers: cold {cold_rate:.1f} scenarios/s "
        f"({len(cold)} timed), memo {n / warm_wall:.1f} scenarios/s ({warm_wall:.2f} s; memo {info.entries} "
        f"entries, {info.hits} hits, {info.misses} misses); plans equal cold and warm"
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="?", type=int, default=5)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--sweep", type=int, default=200, help="scenarios (0: skip the sweep)")
    ap.add_argument(
        "--case", action="append", choices=sorted(TARGETS_S), help="only these cases (repeatable)"
    )
    args = ap.parse_args()
    plan(cases()["one-gpu"], base_dir=ROOT / "examples", workers=1)  # warm imports and catalogs
    ok = True
    for name, request in cases().items():
        if args.case and name not in args.case:
            continue
        for cold in (True, False):
            ok = run_case(name, request, args.runs, args.workers, cold) and ok
    if args.sweep:
        run_sweep(args.sweep, args.workers)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
