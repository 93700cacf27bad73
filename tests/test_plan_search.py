"""The shape search (planner/plan/search.py) against an exhaustive evaluation of the same grid:
the budget screen drops exactly the configurations below the best so far and admits only those
that can beat it; the best is the grid's; dominance pruning keeps a replica that scales better
than linearly; near-ties are kept as runners-up.

Small grids of one GPU type and workers=1 keep it fast (~20 root-finds per shape).
"""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest
from plan_helpers import search_context
from test_plan import WORKLOAD

from planner.latency.slo_capacity import CAPACITY_PRECISION
from planner.plan.capacity import CapacityPoint, ReplicaConfig, SearchContext, evaluate_config
from planner.plan.search import (
    MAX_RUNNERS_UP,
    RUNNER_UP_SPAN,
    START_BUDGET,
    Shape,
    _order,
    prune_divisible,
    runners_up,
    search_shape,
)
from planner.schema.plan_request import parse_plan_request

DENSE = (512, 768, 1024, 1280, 1536, 2048, 3072, 4096)


def _context(slo: dict[str, float]) -> SearchContext:
    req = parse_plan_request(
        {
            "model": "Qwen/Qwen3-8B",
            "slo": slo,
            "workload": copy.deepcopy(WORKLOAD),
            "candidates": {"gpus": ["h100-sxm"]},
        }
    )
    return search_context(req, ["h100-sxm"])


SHAPES: list[tuple[dict[str, float], Shape]] = [
    ({"ttft_p99_ms": 500, "itl_p99_ms": 50}, Shape("h100-sxm", 1, "colocated", budgets=DENSE)),
    ({"ttft_p99_ms": 300, "itl_p99_ms": 30}, Shape("h100-sxm", 2, "colocated", budgets=DENSE)),
    ({"ttft_p99_ms": 200, "itl_p99_ms": 80}, Shape("h100-sxm", 2, "colocated", budgets=DENSE)),
    ({"ttft_p99_ms": 500, "itl_p99_ms": 50}, Shape("h100-sxm", 1, "prefill", budgets=(*DENSE, 8192))),
]


@pytest.mark.parametrize(("slo", "shape"), SHAPES)
def test_the_screen_is_exact_against_the_whole_grid(slo: dict[str, float], shape: Shape) -> None:
    """Every budget of the shape root-found on its own: the search's best is the grid's best (same
    root-find, so the same bits); a budget it screened out has less capacity than the best so far
    when it was screened; a budget it root-found after the first was admitted by the screen, so
    its capacity reaches the best so far within the root-find's precision (a screen at a lower
    rate admits budgets that cannot win: 7% lower capacity fails here)."""
    ctx = _context(slo)
    res = search_shape(ctx, shape)
    assert shape.budgets is not None
    grid = {b: evaluate_config(ctx, ReplicaConfig(shape.gpu, shape.tensor_parallel_size, shape.role, b, 0))
            for b in shape.budgets}  # fmt: skip
    feasible = [p.requests_per_s for p in grid.values() if p.feasible]
    assert res.best is not None and res.best.requests_per_s == max(feasible)
    found = {p.config.max_num_batched_tokens: p for p in res.points}
    incumbent: float | None = None
    for b in _order(shape.budgets, START_BUDGET[shape.role]):
        x = grid[b]
        if b not in found:
            assert incumbent is not None and x.requests_per_s < incumbent, (b, x.requests_per_s, incumbent)
            continue
        assert found[b].requests_per_s == x.requests_per_s
        if incumbent is not None:
            assert x.requests_per_s >= incumbent * (1.0 - CAPACITY_PRECISION), (
                b,
                x.requests_per_s,
                incumbent,
            )
        if x.feasible and (incumbent is None or x.requests_per_s > incumbent):
            incumbent = x.requests_per_s
    assert res.screened == len(shape.budgets) - len(found)
    # the near-ties the root-finds' precision cannot rank are kept, nearest first
    near = [p for p in res.points if p.feasible and p.config != res.best.config
            and p.requests_per_s * (1 + RUNNER_UP_SPAN) > res.best.requests_per_s]  # fmt: skip
    assert {p.config for p in res.runners_up} == {
        p.config for p in sorted(near, key=lambda p: -p.requests_per_s)[:MAX_RUNNERS_UP]
    }


def _point(gpu: str, tp: int, rate: float, role: str = "colocated", budget: int = 2048) -> CapacityPoint:
    cfg = ReplicaConfig(gpu, tp, role, budget, 64)  # type: ignore[arg-type]
    return CapacityPoint(cfg, True, True, rate, "itl", "", 1.0, 1.0, None, None, 2 * rate, 1, 1, None, None)


def test_prune_divisible_keeps_a_replica_that_scales_better_than_linearly() -> None:
    """TP2 with more than twice TP1's capacity serves more on the same two GPUs than two TP1
    replicas: kept. TP2 with exactly (or less than) twice: two TP1 replicas do its job, dropped; a
    TP4 is judged against TP1 (m = 4) and TP2 (m = 2) alike; other GPU types and roles never
    compete."""
    one = _point("h100-sxm", 1, 10.0)
    kept, dropped = prune_divisible([one, _point("h100-sxm", 2, 20.5)])
    assert dropped == 0 and len(kept) == 2
    kept, dropped = prune_divisible([one, _point("h100-sxm", 2, 20.0)])
    assert dropped == 1 and kept == [one]
    kept, dropped = prune_divisible([one, _point("h100-sxm", 2, 19.0), _point("h100-sxm", 4, 41.0)])
    assert dropped == 1 and [p.config.tensor_parallel_size for p in kept] == [1, 4]
    two = _point("h100-sxm", 2, 25.0)
    kept, dropped = prune_divisible([one, two, _point("h100-sxm", 4, 49.0)])  # 2 x TP2 = 50 >= 49
    assert dropped == 1 and kept == [one, two]
    kept, dropped = prune_divisible(
        [one, _point("h200-sxm", 2, 15.0), _point("h100-sxm", 2, 15.0, "prefill")]
    )
    assert dropped == 0


def test_runners_up_are_the_near_ties_nearest_first_and_bounded() -> None:
    """Within RUNNER_UP_SPAN below the best (its root-find's first miss could be above the best's
    capacity): kept, nearest first, at most MAX_RUNNERS_UP; further below, or a capacity a
    stability limit sets exactly: not."""
    best = _point("h100-sxm", 1, 10.0, budget=8192)
    edge = 10.0 / (1 + RUNNER_UP_SPAN)
    near = [
        _point("h100-sxm", 1, edge * (1 + 1e-4 * (k + 1)), budget=256 * (k + 1))
        for k in range(MAX_RUNNERS_UP + 2)
    ]
    far = _point("h100-sxm", 1, edge, budget=16384)
    stable = replace(_point("h100-sxm", 1, 9.999, budget=16128), binding_limit="max_num_seqs")
    got = runners_up(best, [best, far, stable, *near])
    assert [p.config.max_num_batched_tokens for p in got] == [
        256 * k for k in range(MAX_RUNNERS_UP + 2, 2, -1)
    ]
    assert runners_up(None, near) == ()
