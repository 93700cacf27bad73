"""`capplan report FILE.yaml -o DIR`: the plan of a plan file as five figures (PNG and SVG) and
one self-contained HTML page (planner/htmlreport/, docs/report.md). The file and the SLO,
time-limit and profile flags are `capplan plan`'s; the simulated figures are the plan's `--verify`
(same requests, same numbers). `--backtest BACKTEST.json` (`capplan forecast --backtest --json`)
adds the forecast figure (forecast vs actual vs planned capacity,
planner/htmlreport/forecast_figure.py); without FILE it is the only figure written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from planner.commands import common as c


def register(sub: Any) -> None:
    from planner.commands.plan import PLAN_SLO_FLAGS

    p = sub.add_parser(
        "report",
        help="plots (PNG, SVG) and an HTML page of a plan: cost curves, chunked prefill, capacity, cost, "
        "simulated latency; warnings, binding constraints, alternatives",
    )
    p.add_argument("file", metavar="FILE", nargs="?", help="a plan file (as `capplan plan`)")
    p.add_argument(
        "--backtest",
        metavar="BACKTEST.json",
        help="`capplan forecast --backtest --json` output: adds the forecast vs actual vs capacity figure",
    )
    p.add_argument("-o", "--output-dir", required=True, metavar="DIR", help="where the files go (created)")
    for flag, _, help_ in PLAN_SLO_FLAGS:
        p.add_argument(flag, help=help_)
    p.add_argument("--time-limit-s", help="MILP time limit in seconds (overrides solver.time_limit_s)")
    p.add_argument("--workers", help="processes answering capacity questions (default 2; 1: in-process)")
    c.add_profile_flag(p, "auto")
    p.set_defaults(handler=_report)


def _report(args: argparse.Namespace) -> None:
    """The output folder is checked before any work (planner.files.check_output_dir); a write
    that fails after the plan (a full disk) is one line naming -o."""
    from planner.commands.plan import _workers, request_from_args
    from planner.files import check_output_dir, write_error
    from planner.htmlreport import forecast_figure
    from planner.htmlreport.figures import build, write_files

    if args.file is None and args.backtest is None:
        from planner.errors import InvalidInput

        raise InvalidInput("FILE", "give a plan file, --backtest BACKTEST.json, or both")
    forecast = None
    if args.backtest is not None:
        forecast = forecast_figure.figure_data(forecast_figure.read_backtest(args.backtest))
    out_dir = check_output_dir(args.output_dir, "--output-dir")
    if args.file is None:
        assert forecast is not None
        try:
            files, _ = forecast_figure.write(forecast, Path(out_dir))
        except OSError as exc:
            raise write_error(out_dir, "--output-dir", exc) from None
        sys.stdout.write(
            f"backtest: wrote {len(files)} files to {args.output_dir}\n" + "".join(f"  {f}\n" for f in files)
        )
        return
    data, flags = request_from_args(args)
    workers = _workers(args.workers)
    with flags.named(), c.computing():
        plan, figures = build(data, base_dir=Path(args.file).parent, workers=workers)
        try:
            files = write_files(plan, figures, out_dir, forecast)
        except OSError as exc:
            raise write_error(out_dir, "--output-dir", exc) from None
    cost = "" if plan.usd_per_month is None else f", ${plan.usd_per_month:,.0f}/month"
    sys.stdout.write(
        f"{plan.model}: {plan.status}{cost}; wrote {len(files)} files to {args.output_dir}\n"
        + "".join(f"  {f}\n" for f in files)
    )
