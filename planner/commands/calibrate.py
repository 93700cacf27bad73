"""`capplan calibrate MEASUREMENTS --model M --gpu G [-o PROFILE.json]`: fit a hardware profile.

Reads measured step times (the JSON `tools/measure_steps.py` writes, or the CSV described in
planner/costmodel/fit_data.py and docs/calibration.md), fits the profile's efficiencies, per-step
overhead and prefix re-read passes by least squares, prints every row's measured vs fitted time
and the MAPE, and writes the profile for `--profile PROFILE.json`. A fit the rows cannot pin is
refused, naming the parameter; so is a poor fit (MAPE over 25%, every parameter on its bounds)
unless `--force`. `planner.api.calibrate` fits; this writes the file. `--serving RUNS...` fits the
serving terms to real vLLM runs instead (planner/commands/calibrate_serving.py). Flag names and JSON keys are
a public contract.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from planner.commands import common as c
from planner.errors import InvalidInput, echo


def register(sub: Any) -> None:
    p = sub.add_parser(
        "calibrate",
        help="fit a hardware profile (efficiencies, per-step overhead) to measured step times",
        description="Fit a profile to step times measured on one GPU (tools/measure_steps.py JSON, "
        "or CSV with columns kind,tokens,batch,ctx,prompt,chunk,decodes,ms,worst_step_ms). "
        "See docs/calibration.md.",
    )
    p.add_argument(
        "measurements", nargs="?", metavar="MEASUREMENTS", help="measured step times: .json or .csv"
    )
    p.add_argument("--model", help="the model shape that was timed (catalog name or config.json)")
    p.add_argument("--gpu", help="catalog GPU the timings come from (e.g. h200-sxm)")
    p.add_argument(
        "--serving",
        nargs="+",
        metavar="RUNS",
        help="instead of step timings: fit the serving terms (per-step and per-sequence engine cost, "
        "front end per endpoint) to measured vLLM runs of one GPU (corpus, vllm bench serve JSON, "
        "GuideLLM files; docs/calibration.md)",
    )
    p.add_argument(
        "--base-profile",
        help="with --serving: the profile whose kernel terms stay fixed (default auto: the built-in one)",
    )
    p.add_argument(
        "--simulate",
        action="store_true",
        help="with --serving: predict the runs with the simulator instead of the analytic model",
    )
    p.add_argument("-o", "--output", help="write the fitted profile to this JSON file")
    p.add_argument("--name", help="profile name (default: GPU-calibrated)")
    p.add_argument(
        "--fix",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="hold a parameter at a value instead of fitting it (repeatable), "
        "e.g. --fix prefix_query_kv_passes=0 when there are no chunked_prefill rows",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="keep a fit whose MAPE is over 25%% or whose parameters all sit on their bounds",
    )
    c.add_json_flag(p)
    p.set_defaults(handler=_calibrate)


def _fixed(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InvalidInput("--fix", f"expected NAME=VALUE, got {echo(item)}")
        out[key.strip()] = value.strip()
    return out


def request_from_args(args: argparse.Namespace) -> tuple[dict[str, Any], c.Flags]:
    """The CalibrateRequest mapping of the flags, and which flag each field came from."""
    data: dict[str, Any] = {
        "measurements": {"path": args.measurements},
        "model": args.model,
        "gpu": args.gpu,
        "fix": _fixed(args.fix),
        "force": args.force,
    }
    if args.name is not None:
        data["name"] = args.name
    flags = c.Flags()
    for key, flag in (
        ("measurements", "MEASUREMENTS"),
        ("model", "--model"),
        ("gpu", "--gpu"),
        ("fix", "--fix"),
        ("name", "--name"),
        ("force", "--force"),
    ):
        flags.alias(key, flag)
    return data, flags


def _calibrate(args: argparse.Namespace) -> None:
    from planner import api
    from planner.costmodel.profile import save_profile_file

    if args.serving:
        from planner.commands.calibrate_serving import calibrate_serving

        return calibrate_serving(args)
    for value, flag in ((args.measurements, "MEASUREMENTS"), (args.model, "--model"), (args.gpu, "--gpu")):
        if value is None:
            raise InvalidInput(flag, "required (or fit serving runs with --serving RUNS...)")
    for value, flag in ((args.base_profile, "--base-profile"), (args.simulate or None, "--simulate")):
        if value is not None:
            raise InvalidInput(flag, "only with --serving RUNS...")

    if args.output:  # checked before the fit: a profile nobody can write is not worth computing
        from planner.files import check_output_file

        check_output_file(args.output, "--output")
    data, flags = request_from_args(args)
    with flags.named(), c.computing():
        report = api.calibrate(data)
    if args.output:
        save_profile_file(report.profile, args.output, "--output")
        report = report.model_copy(update={"output": args.output})

    def render(d: dict[str, Any]) -> str:
        rows = [
            [
                r["kind"],
                " ".join(
                    f"{k}={r[k]}" for k in ("tokens", "batch", "prompt", "chunk", "decodes", "ctx") if k in r
                ),
                r["quantity"],
                f"{r['measured_ms']:,.2f}",
                f"{r['fitted_ms']:,.2f}",
                f"{r['error_percent']:+.1f}%",
                f"{r['theoretical_ms']:,.2f}",
            ]
            for r in d["rows"]
        ]
        out = [
            f"{d['model']} on {d['gpu']}: {len(d['rows'])} timings from {d['measurements']}",
            c.table(
                ["kind", "shape", "quantity", "measured ms", "fitted ms", "error", "theoretical ms"], rows
            ),
            f"MAPE {d['mape_percent']:.1f}% (max {d['max_abs_error_percent']:.1f}%); "
            f"theoretical profile: MAPE {d['theoretical_mape_percent']:.1f}%",
            "parameters:",
        ]
        width = max((len(name) for name in d["parameters"]), default=0)
        for name, p in d["parameters"].items():
            if p["fixed"]:
                note = "fixed"
            else:
                se = p["std_error"]
                note = (f"+/- {se:.3g}" if se is not None and math.isfinite(se) else "") + (
                    f", independence {p['independence']:.2f}" if p["independence"] is not None else ""
                )
                if p["at_bound"]:
                    note += ", at its bound"
            out.append(f"  {name:{width}s}  {p['value']:.6g}  ({note.strip(', ')})")
        for what, ceil in d["ceilings"].items():
            out.append(
                f"measured ceiling {what} {ceil['value']:.4g} = {ceil['fraction_of_datasheet']:.2f} of the "
                f"datasheet (fitted efficiency {ceil['fitted_eta']:.2f})"
            )
        out.append(
            f"profile {d['profile']['name']} written to {d['output']}"
            if d["output"]
            else "profile not written (pass -o PROFILE.json); use it with --profile PROFILE.json"
        )
        return "\n".join(out)

    c.emit(report, args.json, render)
