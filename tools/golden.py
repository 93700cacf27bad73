"""The latency model's golden predictions: every figure `evaluate` reports and the figures the
plan search reads from `LatencyModel` (max stable rate and its binding limit per pool, floors,
capacities within SLOs), over

* the accuracy grid (tools/accuracy.py): its configurations and loads, the analytic side only
  (synthetic spread and constant lengths, the bursty grid, the trace's peak minute);
* the examples: `api.evaluate` on every example with a `deployment:`, `api.plan` (one worker, no
  verification) on every example with `candidates:`.

    python3 tools/golden.py --write     regenerate tests/golden/predictions.json
    python3 tools/golden.py --check     compare against it (exit 1 and the differences if any)

The file is a regression gate, not an accuracy check: it says whether a change to the model
moved any prediction (beyond GOLDEN_RTOL relative), so a refactor can prove it moved none and a
modelling change lists what it moved. Accuracy against the simulator is docs/accuracy.md's job.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GOLDEN_PATH = ROOT / "tests" / "golden" / "predictions.json"
EXAMPLES = ROOT / "examples"
# Two floats agree when they differ by at most this share of the larger (a refactor that
# reorders a sum moves the last bits; a modelling change moves far more).
GOLDEN_RTOL = 1e-9
# The SLOs each accuracy cell's capacity is found for: the examples' chat targets, a loose pair
# (the stability limit binds), a tight pair (TTFT binds near the floor).
SLOS_S = ((0.5, 0.05), (5.0, 0.2), (0.15, 0.03))


def _accuracy() -> ModuleType:
    """tools/accuracy.py (not a package) as a module, for its grid and its workload readings."""
    name = "accuracy_tool"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / "accuracy.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _model_figures(model: Any, requests_per_s: float | None, per_bucket: bool) -> dict[str, Any]:
    """What evaluate prints and what the plan search reads, for one model at one rate."""
    from planner.latency import Slo

    out: dict[str, Any] = {
        "prediction": model.evaluate(requests_per_s, per_bucket=per_bucket).to_dict(),
        "max_stable_requests_per_s": model.max_stable_requests_per_s(),
        "boundaries": {
            role: {"requests_per_s_per_replica": b.lam_max, "binding": b.binding}
            for role, b in sorted(model.boundaries().items())
        },
        "floors": model.floors().to_dict(),
        "capacities": {},
    }
    for ttft_s, itl_s in SLOS_S:
        cap = model.capacity(Slo(ttft_p99_s=ttft_s, itl_p99_s=itl_s)).to_dict()
        out["capacities"][f"ttft {ttft_s} s, itl {itl_s} s"] = cap
    return out


def accuracy_grid() -> dict[str, Any]:
    """The accuracy grid's cells, analytic side: each configuration and workload reading at each
    load of tools/accuracy.py, keyed by a label naming them."""
    from planner.latency import LatencyModel, WorkloadStats
    from planner.simulate.run import scale_workload

    acc = _accuracy()
    trace = acc.builtin_trace(acc.TRACE)
    out: dict[str, Any] = {}

    def cells(case: Any, source: str, base: Any, loads: Sequence[float]) -> None:
        r = case.resolve()
        cap = LatencyModel(r, WorkloadStats.of(base)).max_stable_requests_per_s()
        for load in loads:
            model = LatencyModel(r, WorkloadStats.of(scale_workload(base, load * cap)))
            out[f"{case.label} | {source} | load {load}"] = _model_figures(model, None, False)

    for case in acc.CASES:
        for lengths in acc.LENGTHS:
            cells(case, f"synthetic {lengths}", acc.stationary_workload(trace, lengths), acc.LOADS)
        for load in acc.TRACE_LOADS:
            r = case.resolve()
            cap = LatencyModel(r, WorkloadStats.of(trace.to_workload())).max_stable_requests_per_s()
            _, rates = trace.bucket_rates(60.0)
            scaled = trace.time_scaled(load * cap / (float(rates.max()) / trace.mean_requests_per_s))
            model = LatencyModel(r, WorkloadStats.of(scaled.to_workload()))
            out[f"{case.label} | trace | load {load}"] = _model_figures(model, None, False)
    for case in acc.bursty_cases():
        for k in acc.BURSTINESS:
            cells(case, f"bursty k={k}", acc.bursty_workload(trace, k), acc.BURSTY_LOADS)
    return out


def examples() -> dict[str, Any]:
    """`api.evaluate` / `api.plan` on each example, as the CLI reads it (the report's JSON)."""
    from planner import api
    from planner.schema.inputs import read_mapping_file

    out: dict[str, Any] = {}
    for path in sorted(EXAMPLES.glob("*.yaml")):
        data = read_mapping_file(str(path))
        if "deployment" in data:
            out[f"evaluate {path.name}"] = api.evaluate(data, base_dir=EXAMPLES).model_dump(mode="json")
        else:
            report = api.plan(data, base_dir=EXAMPLES, workers=1)
            out[f"plan {path.name}"] = report.model_dump(mode="json")
    return out


def predictions() -> dict[str, Any]:
    return {"accuracy_grid": accuracy_grid(), "examples": examples()}


def dumps(data: dict[str, Any]) -> str:
    """Canonical text: sorted keys, floats as Python's shortest repr (NaN and inf as JSON's
    extensions), so the same predictions give the same bytes."""
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def differences(golden: Any, now: Any, path: str = "") -> Iterator[str]:
    """Each place `now` departs from `golden`: a key added or removed, a type or string changed,
    a float beyond GOLDEN_RTOL relative (NaN equals NaN)."""
    if isinstance(golden, dict) and isinstance(now, dict):
        for key in sorted(set(golden) | set(now)):
            where = f"{path}.{key}" if path else key
            if key not in now:
                yield f"{where}: removed"
            elif key not in golden:
                yield f"{where}: added"
            else:
                yield from differences(golden[key], now[key], where)
    elif isinstance(golden, list) and isinstance(now, list):
        if len(golden) != len(now):
            yield f"{path}: {len(golden)} items, now {len(now)}"
        for i, (a, b) in enumerate(zip(golden, now, strict=False)):
            yield from differences(a, b, f"{path}[{i}]")
    elif _number(golden) and _number(now):
        if not _close(float(golden), float(now)):
            yield f"{path}: {golden!r} -> {now!r}"
    elif type(golden) is not type(now) or golden != now:
        yield f"{path}: {golden!r} -> {now!r}"


def _number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _close(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= GOLDEN_RTOL * max(abs(a), abs(b))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help=f"regenerate {GOLDEN_PATH.relative_to(ROOT)}")
    mode.add_argument("--check", action="store_true", help="compare the model's predictions with the file")
    args = ap.parse_args(argv)
    now = predictions()
    if args.write:
        GOLDEN_PATH.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN_PATH.write_text(dumps(now))
        print(f"wrote {GOLDEN_PATH.relative_to(ROOT)}")
        return 0
    diffs = list(differences(json.loads(GOLDEN_PATH.read_text()), json.loads(dumps(now))))
    for line in diffs:
        print(line)
    print(f"{len(diffs)} differences" if diffs else "predictions unchanged")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
