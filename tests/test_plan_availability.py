"""availability: {min_replicas, spare_replicas} (planner/plan/defaults.py, solvers.milp_data): at
least min_replicas of each deployment (each pool) in every bucket with demand, default 2 (a
production service survives a restart, an upgrade or a lost node); spare_replicas beyond those
whose capacity covers the demand (N+1 with 1). The MILP and the alternatives size with it."""

from __future__ import annotations

from typing import Any

import pytest
from test_plan import _with_rate, request, run
from test_plan_infeasible import _check_relaxations_plan

from planner.errors import InvalidInput

H100_USD = 3.49  # runpod-secure-2026-09-25
HOURS = 730.0  # a month; the forecast is one hour at a constant rate
TP1 = {"gpus": ["h100-sxm"], "tensor_parallel_sizes": [1]}


def _reps(rep: Any) -> list[list[int]]:
    return [d.replicas_by_bucket for d in rep.deployments]


def test_a_plan_that_needs_one_replica_keeps_two_by_default() -> None:
    """2 req/s of chat fits one H100 replica (~20 req/s within the SLOs). By default the plan
    holds two: 2 x $3.49 x 730 h = $5,095.40 a month; with min_replicas 1, one ($2,547.70) and a
    warning that it has no failover."""
    one = run(_with_rate(2.0, candidates=TP1, availability={"min_replicas": 1}))
    two = run(_with_rate(2.0, candidates=TP1))
    assert _reps(one) == [[1]] and _reps(two) == [[2]]
    assert one.usd_per_month == pytest.approx(1 * H100_USD * HOURS)
    assert two.usd_per_month == pytest.approx(2 * H100_USD * HOURS)
    (cid,) = [d.id for d in two.deployments]
    assert (
        f"availability.min_replicas: {cid} is held to 2 replicas in 1 of 1 buckets where its load needs fewer"
        in (two.binding_constraints)
    )
    assert any(
        w.startswith(f"{cid}: 1 replica in 1 of 1 buckets (availability.min_replicas: 1)")
        for w in one.warnings
    )
    assert not any("availability.min_replicas: 1" in w for w in two.warnings)


def test_spare_replicas_is_n_plus_one_in_every_bucket() -> None:
    """Buckets of 2, 40 and 0 req/s: spare_replicas 1 adds one replica to what the demand needs
    where there is demand (and none where there is none), so the bill grows by one GPU-hour per
    hour with demand."""
    req: dict[str, Any] = request(
        candidates={**TP1, "disaggregation": "never"}, availability={"min_replicas": 1}
    )
    req["workload"]["arrivals"] = {
        "buckets": [
            {"duration_s": 3600, "requests_per_s": 2.0},
            {"duration_s": 3600, "requests_per_s": 40.0},
            {"duration_s": 3600, "requests_per_s": 0.0},
        ]
    }
    base = run(req)
    spare = run({**req, "availability": {"min_replicas": 1, "spare_replicas": 1}})
    (b,), (s,) = _reps(base), _reps(spare)
    assert b[2] == 0 and s == [b[0] + 1, b[1] + 1, 0]
    assert base.usd_per_month is not None and spare.usd_per_month is not None
    assert spare.usd_per_month - base.usd_per_month == pytest.approx(2 * H100_USD * HOURS / 3)
    assert any(
        x.startswith("availability.spare_replicas: each deployment keeps 1 replica")
        for x in spare.binding_constraints
    )


def test_each_pool_of_a_disaggregated_plan_keeps_two() -> None:
    rep = run(_with_rate(2.0, candidates={**TP1, "disaggregation": "always"}))
    assert {d.role for d in rep.deployments} == {"prefill", "decode"}
    assert all(d.replicas_by_bucket == [2] for d in rep.deployments)


def test_the_alternatives_are_sized_with_the_same_rule() -> None:
    rep = run(_with_rate(2.0, candidates={"gpus": ["h100-sxm", "h200-sxm"], "tensor_parallel_sizes": [1, 2]}))
    feasible = [a for a in rep.alternatives if a.feasible]
    assert feasible and all(d.replicas_peak >= 2 for a in feasible for d in a.deployments)


def test_an_inventory_below_the_floor_is_answered_with_a_cap_that_plans() -> None:
    req = _with_rate(2.0, candidates=TP1, inventory={"h100-sxm": 1})
    rep = run(req)
    _check_relaxations_plan(req, rep)
    inf = rep.infeasibility
    assert inf is not None and inf.relaxed[0].field == "inventory.h100-sxm" and inf.relaxed[0].value == "2"


@pytest.mark.parametrize(
    ("availability", "field"),
    [
        ({"min_replicas": 0}, "availability.min_replicas"),
        ({"min_replicas": 1001}, "availability.min_replicas"),
        ({"spare_replicas": -1}, "availability.spare_replicas"),
        ({"spare_replicas": 1001}, "availability.spare_replicas"),
        ({"min_replicas": 2.5}, "availability.min_replicas"),
        ({"failover": True}, "availability.failover"),
    ],
)
def test_ranges_name_the_field(availability: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as exc:
        run(request(availability=availability))
    assert exc.value.field == field


def test_the_range_is_the_solvers() -> None:
    from planner.schema.plan_request import MAX_AVAILABILITY_REPLICAS
    from solvers.milp_data import MAX_SPARE_REPLICAS

    assert MAX_AVAILABILITY_REPLICAS == MAX_SPARE_REPLICAS
