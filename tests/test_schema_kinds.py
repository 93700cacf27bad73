"""The schema's kinds (planner/schema/kinds.py) are the names the latency model's answers carry:
a binding limit is an SLO or a stability limit, so a report validates exactly the limits the
model gives."""

from __future__ import annotations

from typing import get_args

from planner.schema import kinds


def test_a_binding_limit_is_an_slo_or_a_stability_limit() -> None:
    assert set(get_args(kinds.BindingLimit)) == {"ttft", "itl", *get_args(kinds.StabilityLimit)}
