"""Scenario sets: a forecast's quantiles x growth rates, one plan each (issue #36; `capplan plan
--scenarios`, the Sweep RPC's `scenario_set`; docs/forecast.md "Scenarios").

    quantiles=0.5,0.9,0.99 growth=0%,10%/month

Each scenario is the plan request with its `workload.forecast.quantile` and `.growth` replaced,
so a scenario's plan is exactly the plan of that request alone. Order: quantiles ascending, and
within each quantile the growth rates as written; names `p90 growth 10%/month` (`growth none`
for 0%). Either key may be left out (the request's own value); at most MAX_QUANTILES quantiles
and MAX_GROWTHS growth rates.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from planner.errors import InvalidInput, echo
from planner.forecast.base import MAX_QUANTILES, check_quantiles
from planner.forecast.growth import parse_growth

__all__ = ["MAX_GROWTHS", "Scenario", "apply", "expand", "parse_scenarios"]

MAX_GROWTHS = 16
NO_GROWTH = frozenset({"0%", "0", "none"})
_KEY = re.compile(r"^(quantiles|growth)=(.+)$")


@dataclass(frozen=True)
class Scenario:
    name: str
    quantile: float
    growth: str | None  # None: no growth


def parse_scenarios(text: str, field: str = "--scenarios") -> tuple[list[float], list[str]]:
    """`quantiles=0.5,0.9 growth=0%,10%/month` -> ([0.5, 0.9], ["0%", "10%/month"]); a key left
    out gives an empty list (the request's own value)."""
    quantiles: list[float] = []
    growths: list[str] = []
    seen: set[str] = set()
    for part in text.split():
        m = _KEY.match(part)
        if m is None:
            raise InvalidInput(
                field,
                f"expected quantiles=Q,Q,... and/or growth=G,G,... separated by spaces, got {echo(part)}",
            )
        key, values = m.group(1), [v for v in m.group(2).split(",")]
        if key in seen:
            raise InvalidInput(f"{field}.{key}", "given twice")
        seen.add(key)
        if key == "quantiles":
            try:
                quantiles = [float(v) for v in values]
            except ValueError:
                raise InvalidInput(
                    f"{field}.quantiles", f"expected numbers, got {echo(m.group(2))}"
                ) from None
        else:
            growths = values
    if not seen:
        raise InvalidInput(field, "give quantiles=... and/or growth=...")
    return quantiles, growths


def expand(
    quantiles: Sequence[float],
    growths: Sequence[str],
    *,
    base_quantile: float,
    base_growth: str | None,
    field: str,
) -> list[Scenario]:
    """The scenario set (module docstring); bad values are named `FIELD.quantiles` and
    `FIELD.growth[i]`."""
    qs = check_quantiles(list(quantiles), f"{field}.quantiles") if quantiles else (base_quantile,)
    if len(growths) > MAX_GROWTHS:
        raise InvalidInput(f"{field}.growth", f"give at most {MAX_GROWTHS} growth rates, got {len(growths)}")
    gs: list[str | None] = []
    for i, g in enumerate(growths):
        text = g.strip()
        if text.lower() in NO_GROWTH:
            gs.append(None)
            continue
        gs.append(parse_growth(text, f"{field}.growth[{i}]").text)
    if not gs:
        gs = [base_growth]
    if len(set(gs)) != len(gs):
        raise InvalidInput(f"{field}.growth", "each growth rate once")
    return [Scenario(f"p{q * 100:g} growth {g or 'none'}", q, g) for q in qs for g in gs]


def apply(plan_request: Mapping[str, Any], scenario: Scenario, field: str = "workload") -> dict[str, Any]:
    """The plan request with the scenario's quantile and growth in its history workload's
    forecast; a workload of another form is refused (a scenario set varies a forecast)."""
    request = copy.deepcopy(dict(plan_request))
    workload = request.get("workload")
    if not isinstance(workload, Mapping) or "history" not in workload:
        raise InvalidInput(field, "scenarios vary a forecast: give workload: {history: ..., forecast: {...}}")
    wl = dict(workload)
    spec = dict(wl.get("forecast") or {})
    spec["quantile"] = scenario.quantile
    spec.pop("growth", None)
    if scenario.growth is not None:
        spec["growth"] = scenario.growth
    wl["forecast"] = spec
    request["workload"] = wl
    return request


assert MAX_QUANTILES * MAX_GROWTHS <= 256  # a scenario set stays a few hundred plans at most
