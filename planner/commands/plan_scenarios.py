"""`capplan plan FILE --scenarios "quantiles=0.5,0.9,0.99 growth=0%,10%/month"`: one plan per
scenario of a forecast (planner/forecast/scenarios.py, docs/forecast.md "Scenarios"), printed
as each finishes: the summary under a `== NAME ==` line, or with `--json` one JSON line per
scenario (`{"scenario", "quantile", "growth", "report"}`). With `--server` the scenarios go
to the service's Sweep (answers in the order they finish). The plan file's workload must be a
history form (`workload: {history: ..., forecast: {...}}`).

Why here and not `capplan forecast --plan`: the scenarios are plans (the plan file's model,
SLOs and candidates, the plan's exit status), and `capplan forecast` prints requests, not plans.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from planner.commands import common as c


def scenario_requests(data: dict[str, Any], text: str) -> list[tuple[Any, dict[str, Any]]]:
    """(scenario, plan request) pairs in the set's order; bad syntax named `--scenarios...`."""
    from planner.forecast.scenarios import apply, expand, parse_scenarios
    from planner.schema.history_workload import ForecastSpec

    quantiles, growths = parse_scenarios(text)
    wl = data.get("workload")
    spec = wl.get("forecast") if isinstance(wl, dict) else None
    base = ForecastSpec.model_validate(spec) if isinstance(spec, dict) else ForecastSpec()
    sets = expand(
        quantiles, growths, base_quantile=base.quantile, base_growth=base.growth, field="--scenarios"
    )
    return [(s, apply(data, s)) for s in sets]


def _local(
    pairs: list[tuple[Any, dict[str, Any]]], base: Path, args: argparse.Namespace, workers: int | None
) -> Iterator[tuple[Any, Any]]:
    from planner import api

    for s, request in pairs:
        with c.computing():
            report = api.plan(request, base_dir=base, verify=args.verify, workers=workers)
        yield s, report


def _remote(pairs: list[tuple[Any, dict[str, Any]]], base: Path, server: str) -> Iterator[tuple[Any, Any]]:
    import os

    from planner.client import PlannerClient
    from planner.schema.plan_request import parse_plan_request

    by_name = {s.name: s for s, _ in pairs}
    sent = []
    for s, request in pairs:
        parsed = parse_plan_request(request)
        parsed = parsed.model_copy(update={"workload": _inline(parsed.workload, base)})
        sent.append((s.name, parsed))
    token = os.environ.get("CAPPLAN_AUTH_TOKEN")
    with PlannerClient([a.strip() for a in server.split(",")], timeout_s=None, auth_token=token) as client:
        for result in client.sweep(sent):
            if result.error is not None:
                raise result.error
            yield by_name[result.name], result.report


def _inline(workload: Any, base: Path) -> Any:
    """A history file is read here and forecast (the service reads no files), as a trace is."""
    from planner.schema.history_workload import HistoryWorkload
    from planner.schema.inputs import build_workload

    if isinstance(workload, HistoryWorkload) and workload.history.path is not None:
        return build_workload(workload, "workload", base)
    return workload


def run(
    args: argparse.Namespace,
    data: dict[str, Any],
    flags: c.Flags,
    workers: int | None,
    render: Callable[[dict[str, Any]], str],
    no_plan: Sequence[str],
) -> int:
    """Plan each scenario and print it as it finishes (module docstring); `render` and
    `no_plan` are capplan plan's summary and no-plan statuses."""
    from planner.errors import InvalidInput

    if args.emit is not None:
        raise InvalidInput("--emit", "one plan's manifests; with --scenarios drop --emit")
    base = Path(args.file).parent
    with flags.named():
        pairs = scenario_requests(data, args.scenarios)
        answers = _remote(pairs, base, args.server) if args.server else _local(pairs, base, args, workers)
        failed = 0
        for s, report in answers:
            failed += report.status in no_plan
            if args.json:
                line = {"scenario": s.name, "quantile": s.quantile, "growth": s.growth,
                        "report": report.model_dump(mode="json")}  # fmt: skip
                sys.stdout.write(json.dumps(line) + "\n")
            else:
                sys.stdout.write(f"== {s.name} ==\n{render(report.model_dump(mode='json'))}\n\n")
            sys.stdout.flush()
    return c.EXIT_NO_PLAN if failed else c.EXIT_OK
