"""The schema's kinds (planner/schema/kinds.py) are the names the latency model's answers carry:
until planner/latency/results.py imports them too, its own Role and StabilityLimit must list the
same values, or a report would validate a role or limit the model never gives (or refuse one it
does)."""

from __future__ import annotations

from typing import get_args

from planner.latency import results
from planner.schema import kinds


def test_results_and_schema_name_the_same_roles_and_limits() -> None:
    assert get_args(results.Role) == get_args(kinds.Role) == ("colocated", "prefill", "decode")
    assert get_args(results.StabilityLimit) == get_args(kinds.StabilityLimit)


def test_a_binding_limit_is_an_slo_or_a_stability_limit() -> None:
    assert set(get_args(kinds.BindingLimit)) == {"ttft", "itl", *get_args(kinds.StabilityLimit)}
