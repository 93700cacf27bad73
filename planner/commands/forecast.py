"""`capplan forecast HISTORY --horizon 30d --bucket 1h`: request rates forecast from observed traffic
(planner/forecast/, docs/forecast.md), printed as the `workload:` block `capplan plan` takes
(YAML, or `--json`); with `--plan FILE` the whole plan request (the file's model, SLOs,
candidates and prices, its workload's arrivals replaced by the forecast and its lengths by the
history's where the history has them). `--backtest`: the rolling-origin backtest in dollars
(planner/forecast/backtest.py) of each method x quantile through the real planner, as a table
or `--json`. Notes (gaps interpolated, fallbacks, growth) go to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from planner.commands import common as c


def register(sub: Any) -> None:
    p = sub.add_parser(
        "forecast",
        help="forecast request rates from observed traffic: a workload for `capplan plan`, or a backtest in dollars",
        description="Forecast request rates per bucket from a traffic history (daily and weekly seasons, "
        "trend, quantiles) and print the workload `capplan plan` takes; --backtest scores each method's "
        "plans against the traffic that came.",
    )
    p.add_argument(
        "history", metavar="HISTORY", help="a traffic history file (docs/forecast.md: History formats)"
    )
    p.add_argument("--format", help="the history's format (default: detected from the content)")
    p.add_argument("--bucket", default="1h", help="bucket width: 1h (default), 15m, 1d ...; divides a day")
    p.add_argument("--horizon", default="7d", help="how far ahead: 30d, 2w, 48h ... (default 7d)")
    p.add_argument(
        "--quantile", default="0.9", help="the quantile whose rates the workload takes (default 0.9)"
    )
    p.add_argument(
        "--growth", help="traffic growth: 10%%/month (day, week, month, year) or a factor like 1.5"
    )
    p.add_argument(
        "--method",
        default="mstl",
        help="mstl (default), conformal, ets, seasonal_peak, seasonal_naive, last_week_peak",
    )
    p.add_argument(
        "--plan", metavar="FILE", help="a plan file: print the whole plan request (needed by --backtest)"
    )
    p.add_argument(
        "--backtest", action="store_true", help="rolling-origin backtest of --methods x --quantiles"
    )
    p.add_argument("--methods", help="backtest: comma-separated methods (default: all)")
    p.add_argument("--quantiles", default="0.5,0.9,0.99", help="backtest: comma-separated quantiles")
    p.add_argument("--origin-step", default="7d", help="backtest: time between origins (default 7d)")
    p.add_argument(
        "--test-span", help="backtest: time each fold tests after its origin (default: --origin-step)"
    )
    p.add_argument(
        "--min-train", default="14d", help="backtest: history before the first origin (default 14d)"
    )
    c.add_json_flag(p)
    p.set_defaults(handler=_forecast)


def _floats(text: str, flag: str) -> list[float]:
    from planner.errors import InvalidInput, echo

    try:
        return [float(x) for x in c.split_list(text) or []]
    except ValueError:
        raise InvalidInput(flag, f"expected comma-separated numbers, got {echo(text)}") from None


def _read(args: argparse.Namespace) -> Any:
    from planner.forecast.growth import parse_duration_s
    from planner.history.reader import read_history

    bucket_s = parse_duration_s(args.bucket, "--bucket")
    return read_history(args.history, bucket_s=bucket_s, format=args.format, field="history")


def _plan_file(args: argparse.Namespace) -> dict[str, Any] | None:
    from planner.schema.inputs import read_mapping_file

    if args.plan is None:
        return None
    return dict(read_mapping_file(args.plan, "model:, slo: and workload:"))


def _forecast(args: argparse.Namespace) -> int:
    if args.backtest:
        return _backtest(args)
    from planner.forecast.backtest import with_workload
    from planner.forecast.from_history import forecast_workload
    from planner.forecast.growth import parse_duration_s

    series = _read(args)
    plan_request = _plan_file(args)
    quantile = _floats(args.quantile, "--quantile")
    if len(quantile) != 1:
        from planner.errors import InvalidInput

        raise InvalidInput("--quantile", "one quantile (the backtest takes several: --quantiles)")
    horizon_s = parse_duration_s(args.horizon, "--horizon")
    with c.computing():
        fw = forecast_workload(
            series, horizon_s=horizon_s, quantile=quantile[0], method=args.method, growth=args.growth
        )
    block, fc, notes = fw.block, fw.forecast, fw.notes
    out = {"workload": block} if plan_request is None else with_workload(plan_request, block)
    for note in notes:
        print(f"capplan forecast: {note}", file=sys.stderr)
    if args.json:
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
    else:
        sys.stdout.write(_yaml(out, fc.method, quantile[0], series.source))
    return c.EXIT_OK


def _yaml(out: dict[str, Any], method: str, quantile: float, source: str) -> str:
    """Block YAML with each bucket on one line (a 720-bucket month stays readable)."""
    import yaml

    class _Dumper(yaml.SafeDumper):
        pass

    def _flow_bucket(dumper: yaml.SafeDumper, data: dict[str, Any]) -> Any:
        flow = set(data) <= {"duration_s", "requests_per_s", "edges", "counts"}
        return dumper.represent_mapping("tag:yaml.org,2002:map", data, flow_style=flow or None)

    _Dumper.add_representer(dict, _flow_bucket)
    head = f"# capplan forecast: {method} at quantile {quantile:g} of {' '.join(source.split())}\n"
    return head + yaml.dump(out, Dumper=_Dumper, sort_keys=False, width=2**16, allow_unicode=True)


def _backtest(args: argparse.Namespace) -> int:
    from planner.errors import InvalidInput
    from planner.forecast.backtest import DEFAULT_METHODS, Origins, as_json, backtest
    from planner.forecast.growth import parse_duration_s

    if args.plan is None:
        raise InvalidInput(
            "--plan", "the backtest plans each forecast: give the plan file (model, slo, candidates)"
        )
    series = _read(args)
    plan_request = _plan_file(args)
    assert plan_request is not None
    methods = c.split_list(args.methods) or list(DEFAULT_METHODS)
    quantiles = _floats(args.quantiles, "--quantiles")
    from planner.forecast.base import check_quantiles

    qs = check_quantiles(quantiles, "--quantiles")
    step_s = parse_duration_s(args.origin_step, "--origin-step")
    origins = Origins(
        step_s=step_s,
        test_s=step_s if args.test_span is None else parse_duration_s(args.test_span, "--test-span"),
        min_train_s=parse_duration_s(args.min_train, "--min-train"),
    )
    with c.computing():
        scores = backtest(
            series,
            plan_request,
            methods=methods,
            quantiles=qs,
            base_dir=Path(args.plan).parent,
            origins=origins,
        )
    if args.json:
        sys.stdout.write(json.dumps(as_json(series, scores), indent=2) + "\n")
        return c.EXIT_OK
    rows = [
        [
            s.method,
            f"{s.quantile:g}",
            str(s.folds),
            f"{s.gpu_hours:,.0f}",
            f"{s.hours_at_risk:,.0f}",
            f"${s.usd:,.0f}",
            "n/a" if s.usd_per_million_tokens is None else f"${s.usd_per_million_tokens:,.3f}",
            str(s.plans_failed),
        ]
        for s in scores
    ]
    headers = ["method", "quantile", "folds", "GPU-hours", "hours at risk", "cost", "$/1M tokens", "failed"]
    sys.stdout.write(c.table(headers, rows) + "\n")
    return c.EXIT_OK
