"""`capplan validate RUNS... [--corpus]`: capplan's prediction for each measured vLLM serving run
beside what the run measured, the signed error per figure, MAPE per GPU per figure kind, and for a
bench `capplan plan --emit bench` emitted, whether the plan's promise held.

RUNS are files capplan reads (docs/measurements.md): the corpus format, `vllm bench serve
--save-result` JSON, GuideLLM reports. `--corpus` adds the built-in corpus. The prediction is the
analytic model's, or the simulator's with `--simulate` (planner/measurements/prediction.py says
what each run becomes); scoring: planner/measurements/scoring.py. Reference: docs/measurements.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from planner.commands import common as c

if TYPE_CHECKING:
    from planner.measurements.scoring import Mape
    from planner.measurements.serving_run import ServingRun

_LATENCY_UNIT = {"ttft_p50", "ttft_p99", "tpot_p50", "itl_p50", "itl_p99"}


def register(sub: Any) -> None:
    p = sub.add_parser(
        "validate",
        help="capplan's predictions beside measured vLLM serving runs: error per figure, MAPE per GPU",
    )
    p.add_argument(
        "runs",
        nargs="*",
        metavar="RUNS",
        help="serving-run files: the corpus format, vllm bench serve --save-result JSON, GuideLLM reports",
    )
    p.add_argument("--corpus", action="store_true", help="also validate the built-in corpus of public runs")
    p.add_argument(
        "--simulate",
        action="store_true",
        help="predict with the discrete-event simulator (bursts run exactly) instead of the analytic model",
    )
    c.add_profile_flag(p, "auto")
    c.add_json_flag(p)
    p.set_defaults(handler=_validate)


def read_runs(paths: list[str], corpus: bool) -> list[ServingRun]:
    """Every run of the files (in order), then the built-in corpus's; a file that holds no
    serving run (a /metrics scrape, a start-up log) is refused by name."""
    from planner.errors import InvalidInput
    from planner.measurements import builtin_corpus, detect_and_read

    if not paths and not corpus:
        raise InvalidInput("RUNS", "give serving-run files, or --corpus for the built-in corpus")
    runs: list[ServingRun] = []
    for path in paths:
        reading = detect_and_read(path, field="RUNS")
        if not reading.runs:
            raise InvalidInput("RUNS", f"{path}: a {reading.kind} holds no serving run to validate")
        runs.extend(reading.runs)
    if corpus:
        runs.extend(builtin_corpus())
    return runs


def report(runs: list[ServingRun], profile: str, simulate: bool) -> dict[str, Any]:
    """The JSON `--json` prints: each run's score and MAPE per GPU per figure kind, for the
    releases the built-in profiles model and, apart, for runs on releases before vLLM 0.6."""
    from planner.measurements.scoring import mape_by_gpu, score_runs

    scores = score_runs(runs, profile, simulate=simulate)
    return {
        "profile": profile,
        "method": "simulator" if simulate else "analytic",
        "runs": [s.to_dict() for s in scores],
        "mape_by_gpu": _mape_dict(mape_by_gpu(scores)),
        "mape_by_gpu_pre_0_6": _mape_dict(mape_by_gpu(scores, "pre-0.6")),
    }


def _mape_dict(mape: dict[str, dict[str, Mape]]) -> dict[str, dict[str, dict[str, Any]]]:
    return {gpu: {f: m.to_dict() for f, m in figs.items()} for gpu, figs in mape.items()}


def _validate(args: argparse.Namespace) -> None:
    profile = c.cwd_path(args.profile, ("theoretical", "calibrated", "auto")) or "auto"
    runs = read_runs(list(args.runs), args.corpus)
    with c.computing():
        out = report(runs, profile, args.simulate)
    if args.json:
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
    else:
        sys.stdout.write(render(out) + "\n")


def _value(figure: str, x: float | None) -> str:
    if x is None:
        return "n/a"
    return f"{x * 1e3:,.1f} ms" if figure in _LATENCY_UNIT else f"{x:,.0f} tok/s"


def _run_lines(s: dict[str, Any]) -> list[str]:
    head = f"{s['run_id']}: {s['model']} on {s['gpu']}, {s['load']} load, {s['method']}"
    head += f" (profile {s['profile']})" if s["profile"] else ""
    head += "; vLLM before 0.6, scored apart" if s["release_era"] == "pre-0.6" else ""
    if s["no_prediction"]:
        return [head, f"  no prediction: {s['no_prediction']}"]
    rows = [
        [
            e["figure"],
            _value(e["figure"], e["predicted"]),
            _value(e["figure"], e["measured"]),
            "n/a" if e["error_pct"] is None else f"{e['error_pct']:+.1f}%",
        ]
        for e in s["errors"]
    ]
    lines = [
        head,
        *("  " + ln for ln in c.table(["figure", "predicted", "measured", "error"], rows).split("\n")),
    ]
    for p in s["promise"]:
        verdict = "held" if p["held"] else "BROKEN"
        lines.append(
            f"  plan's promise {p['figure']} <= {p['promised_s'] * 1e3:,.1f} ms: measured "
            f"{p['measured_s'] * 1e3:,.1f} ms, {verdict}"
        )
    return lines


def mape_table(mape: dict[str, dict[str, Mape]] | dict[str, dict[str, dict[str, Any]]]) -> str:
    """MAPE per group (rows) per figure kind (columns): `x.x% (runs)`."""
    from planner.measurements.scoring import FIGURES

    def cell(m: Any) -> str:
        d = m if isinstance(m, dict) else m.to_dict()
        return f"{d['mape_pct']:.1f}% ({d['runs']})"

    kinds = [f for f in FIGURES if any(f in figs for figs in mape.values())]
    rows = [[group, *(cell(figs[f]) if f in figs else "-" for f in kinds)] for group, figs in mape.items()]
    return c.table(["gpu", *kinds], rows)


def render(out: dict[str, Any]) -> str:
    lines: list[str] = []
    for s in out["runs"]:
        lines += [*_run_lines(s), ""]
    lines.append(f"MAPE per GPU ({out['method']}, profile {out['profile']}; runs scored in parentheses):")
    lines.append(mape_table(out["mape_by_gpu"]) if out["mape_by_gpu"] else "  no run scored")
    if out["mape_by_gpu_pre_0_6"]:
        lines.append(
            "MAPE per GPU, runs on vLLM releases before 0.6 (CPU-side costs the built-in profiles "
            "do not model; not in the figures above):"
        )
        lines.append(mape_table(out["mape_by_gpu_pre_0_6"]))
    held = [p["held"] for s in out["runs"] for p in s["promise"]]
    if held:
        lines.append(f"plan's promises: {sum(held)} of {len(held)} held")
    return "\n".join(lines)
