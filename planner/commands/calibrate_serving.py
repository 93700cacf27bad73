"""`capplan calibrate --serving RUNS... [--base-profile P] [-o FILE] [--simulate] [--force]`:
fit a profile's serving terms (per-step and per-sequence engine cost, the front end per
endpoint, and the rig's compute share where the runs include a burst) to measured vLLM runs of one GPU, the base profile's kernel terms fixed
(planner/measurements/serving_fit.py). Prints each run's figures before and after the fit,
the MAPE per figure kind, and writes the profile `evaluate`, `simulate` and `plan` take with
`--profile FILE`. A fit missing the runs by more than 25% on average is refused unless
`--force`."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from planner.commands import common as c
from planner.errors import InvalidInput

_LATENCY = {"ttft_p50", "tpot_p50"}


def calibrate_serving(args: argparse.Namespace) -> None:
    """The handler `capplan calibrate` hands `--serving` to."""
    from planner.commands.validate import read_runs
    from planner.costmodel.profile import save_profile_file
    from planner.costmodel.profiles import resolve_profile
    from planner.measurements.serving_fit import fit_serving

    if args.measurements is not None:
        raise InvalidInput("MEASUREMENTS", "give step timings or --serving runs, not both")
    if args.fix:
        raise InvalidInput(
            "--fix", "the serving fit holds the base profile's kernel terms; --fix is the kernel fit's"
        )
    if args.output:
        from planner.files import check_output_file

        check_output_file(args.output, "--output")
    runs = read_runs(list(args.serving), corpus=False)
    gpus = sorted({str(r.settings.gpu) for r in runs})
    if args.gpu is not None and gpus != [args.gpu]:
        raise InvalidInput("--gpu", f"the runs are on {', '.join(gpus)}, not {args.gpu}")
    if len(gpus) != 1:
        raise InvalidInput("--serving", f"runs of one GPU, got {', '.join(gpus)}: fit each GPU apart")
    spec = c.cwd_path(args.base_profile, ("theoretical", "calibrated", "auto")) or "auto"
    base = resolve_profile(spec, gpus[0], "--base-profile")
    with c.computing():
        fit = fit_serving(
            runs, base, simulate=args.simulate, force=args.force, name=args.name, field="--serving"
        )
    if args.output:
        save_profile_file(fit.profile, args.output, "--output")
    out = fit.to_dict() | {"output": args.output}
    sys.stdout.write((json.dumps(out, indent=2) if args.json else render(out)) + "\n")


def _value(figure: str, x: float | None) -> str:
    if x is None:
        return "n/a"
    return f"{x * 1e3:,.1f} ms" if figure in _LATENCY else f"{x:,.0f} tok/s"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.1f}%"


def render(d: dict[str, Any]) -> str:
    rows = [
        [
            r["run_id"],
            f,
            _value(f, v["measured"]),
            _value(f, v["before"]),
            _pct(v["error_before_pct"]),
            _value(f, v["after"]),
            _pct(v["error_after_pct"]),
        ]
        for r in d["runs"]
        for f, v in r["figures"].items()
    ]
    out = [
        f"{len(d['runs'])} runs, forward model: the {d['method']}",
        c.table(["run", "figure", "measured", "before", "error", "after", "error"], rows),
        "MAPE before -> after: "
        + ", ".join(
            f"{f} {d['mape_before_pct'][f]:.1f}% -> {d['mape_after_pct'][f]:.1f}%"
            for f in d["mape_after_pct"]
        ),
        f"fit MAPE {d['fit_mape_pct']:.1f}% (refused over {d['max_fit_mape_pct']:.0f}% unless --force)",
        "serving terms:",
    ]
    for name, p in d["parameters"].items():
        value = f"{p['value']:.3g} x the base's compute" if "value" in p else f"{1e3 * p['value_s']:.4g} ms"
        out.append(f"  {name:22s} {value}  ({'fitted' if p['fitted'] else 'held at the base'})")
    out.append(
        f"profile {d['profile']['name']} written to {d['output']}"
        if d["output"]
        else "profile not written (pass -o PROFILE.json); use it with --profile PROFILE.json"
    )
    return "\n".join(out)
