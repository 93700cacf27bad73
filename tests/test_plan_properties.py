"""The plan's cost is monotone in what the request asks (docs/plan.md, "Properties"): a harder
request never costs less. Hypothesis draws small requests (one or two GPU types, TP 1/2, listed
budgets and `max_num_seqs`, so every configuration of the space is either root-found or screened
out exactly, and the plan is the exact optimum over them); each property plans a request and a
harder twin (more traffic in one bucket, a tighter SLO, a higher price, a lower inventory cap,
fewer candidates) and checks cost(harder) >= cost(request). Derandomized (tests/conftest.py);
the capacity memo is shared across the examples, so each twin mostly reuses its root-finds.

Then the audit's cases, pinned: ITL 27 ms costing more than 26 ms on examples/chat.yaml's
request at 50.69 req/s; a cheaper plan the budget screen and the root-find's precision lost
(a brute force over the same grid with exact replica counts finds it).
"""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from plan_helpers import search_context
from test_plan import EXAMPLES, WORKLOAD

from planner.plan import plan
from planner.schema.plan_report import PlanReport

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])

BUDGETS = [1024, 2048, 4096]
SEQS = [64, 256]


@st.composite
def requests(draw: st.DrawFn) -> dict[str, Any]:
    """A small request: 1-3 buckets of 2-120 req/s, Poisson or bursty (CV² 2 or 20: each bucket
    sized at its replicas' share, planner/plan/split.py), SLOs from the range chat services use,
    one or two GPU types at TP 1/2 over a listed grid, colocated or disaggregated when cheaper."""
    n = draw(st.integers(1, 3))
    rates = [draw(st.floats(2.0, 120.0).map(lambda r: round(r, 2))) for _ in range(n)]
    w = copy.deepcopy(WORKLOAD)
    w["arrivals"] = {
        "buckets": [{"duration_s": 3600, "requests_per_s": r} for r in rates],
        "burstiness": draw(st.sampled_from([1.0, 1.0, 0.5, 0.05])),
    }
    gpus = draw(st.sampled_from([["h100-sxm"], ["h200-sxm"], ["h100-sxm", "h200-sxm"]]))
    return {
        "model": "Qwen/Qwen3-8B",
        "slo": {
            "ttft_p99_ms": draw(st.sampled_from([200, 300, 500, 1000, 2000])),
            "itl_p99_ms": draw(st.sampled_from([20, 25, 30, 40, 50, 80])),
        },
        "workload": w,
        "candidates": {
            "gpus": gpus,
            "tensor_parallel_sizes": draw(st.sampled_from([[1], [2], [1, 2]])),
            "max_num_batched_tokens": BUDGETS,
            "max_num_seqs": SEQS,
            "disaggregation": draw(st.sampled_from(["never", "auto"])),
        },
        "headroom": 0.1,
    }


def cost(req: dict[str, Any]) -> float:
    """The plan's bill per month (inf: infeasible)."""
    rep = plan(req, workers=1)
    if rep.status == "INFEASIBLE":
        return math.inf
    assert rep.usd_per_month is not None and rep.status == "OPTIMAL", (rep.status, rep.infeasibility)
    return rep.usd_per_month


def harder(base: dict[str, Any], change: Any) -> tuple[float, float]:
    twin = copy.deepcopy(base)
    change(twin)
    return cost(base), cost(twin)


@SETTINGS
@given(req=requests(), bucket=st.integers(0, 2), more=st.floats(1.001, 1.6))
def test_more_traffic_in_one_bucket_never_costs_less(req: dict[str, Any], bucket: int, more: float) -> None:
    buckets = req["workload"]["arrivals"]["buckets"]

    def change(r: dict[str, Any]) -> None:
        b = r["workload"]["arrivals"]["buckets"][bucket % len(buckets)]
        b["requests_per_s"] = round(b["requests_per_s"] * more, 3)

    a, b = harder(req, change)
    assert b >= a, (a, b)


def _poisson(req: dict[str, Any]) -> dict[str, Any]:
    """A bursty stream's candidates are each shape's best at the whole stream's burstiness (and
    its near-ties): an SLO or a listed budget can change which configuration that is, and at the
    lower per-replica burstiness of a pool another one can serve more (docs/plan.md, "Bursty
    arrivals"). The SLO and within-shape properties are exact for a one-capacity stream."""
    req["workload"]["arrivals"]["burstiness"] = 1.0
    return req


@SETTINGS
@given(
    req=requests().map(_poisson),
    which=st.sampled_from(["ttft_p99_ms", "itl_p99_ms"]),
    tighter=st.floats(0.6, 0.99),
)
def test_a_tighter_slo_never_costs_less(req: dict[str, Any], which: str, tighter: float) -> None:
    def change(r: dict[str, Any]) -> None:
        r["slo"][which] = round(r["slo"][which] * tighter, 3)

    a, b = harder(req, change)
    assert b >= a, (a, b)


@SETTINGS
@given(req=requests(), gpu=st.sampled_from(["h100-sxm", "h200-sxm"]), dearer=st.floats(1.01, 2.0))
def test_a_higher_price_never_costs_less(req: dict[str, Any], gpu: str, dearer: float) -> None:
    from planner.catalog.gpus import get_gpu

    def change(r: dict[str, Any]) -> None:
        r["pricing"] = {gpu: {"usd_per_gpu_hour": round(get_gpu(gpu).price * dearer, 4)}}

    a, b = harder(req, change)
    assert b >= a, (a, b)


@SETTINGS
@given(req=requests(), cap=st.integers(1, 12))
def test_a_lower_inventory_cap_never_costs_less(req: dict[str, Any], cap: int) -> None:
    gpu = req["candidates"]["gpus"][0]
    req["inventory"] = {gpu: cap + 1}

    def change(r: dict[str, Any]) -> None:
        r["inventory"] = {gpu: cap}

    a, b = harder(req, change)
    assert b >= a, (a, b)


@SETTINGS
@given(req=requests(), drop=st.sampled_from(["tp", "gpu", "budget", "seqs", "disaggregation"]))
def test_fewer_candidates_never_cost_less(req: dict[str, Any], drop: str) -> None:
    c = req["candidates"]
    if drop in ("budget", "seqs"):
        _poisson(req)  # within a shape: see _poisson; GPU types, TPs and roles drop whole shapes

    def change(r: dict[str, Any]) -> None:
        rc = r["candidates"]
        if drop == "tp" and len(c["tensor_parallel_sizes"]) > 1:
            rc["tensor_parallel_sizes"] = rc["tensor_parallel_sizes"][1:]
        elif drop == "gpu" and len(c["gpus"]) > 1:
            rc["gpus"] = rc["gpus"][:1]
        elif drop == "budget":
            rc["max_num_batched_tokens"] = BUDGETS[:2]
        elif drop == "seqs":
            rc["max_num_seqs"] = SEQS[1:]
        else:
            rc["disaggregation"] = "never"

    a, b = harder(req, change)
    assert b >= a, (a, b)


# --- exact over the grid -------------------------------------------------------------------------------

GRID_BUDGETS = [512, 1024, 1536, 2048, 3072, 4096]
GRID_SEQS = [64, 128, 256]


def _grid_request(rates: list[float], ttft: float, itl: float, tps: list[int]) -> dict[str, Any]:
    w = copy.deepcopy(WORKLOAD)
    w["arrivals"] = {"buckets": [{"duration_s": 3600, "requests_per_s": r} for r in rates]}
    return {
        "model": "Qwen/Qwen3-8B",
        "slo": {"ttft_p99_ms": ttft, "itl_p99_ms": itl},
        "workload": w,
        "candidates": {
            "gpus": ["h100-sxm"],
            "tensor_parallel_sizes": tps,
            "disaggregation": "never",
            "max_num_batched_tokens": GRID_BUDGETS,
            "max_num_seqs": GRID_SEQS,
        },
        "headroom": 0.1,
        "availability": {"min_replicas": 1},  # the search's optimum, not the availability floor's
    }


def brute_force_gpu_hours(req: dict[str, Any]) -> float:
    """The fewest GPU-hours any one configuration of the grid serves the buckets with, each
    bucket's replica count exact: the fewest n at which the configuration meets the SLOs at
    need / n (one steady state each, from the root-found capacity's count downwards)."""
    from planner.plan.capacity import ReplicaConfig, build, meets_at
    from planner.plan.capacity_pool import CapacityPool

    ctx = search_context(req, ["h100-sxm"])
    needs = [b["requests_per_s"] * 1.1 for b in req["workload"]["arrivals"]["buckets"]]
    cfgs = [ReplicaConfig("h100-sxm", tp, "colocated", b, s) for tp in req["candidates"]["tensor_parallel_sizes"]
            for b in GRID_BUDGETS for s in GRID_SEQS if s <= b]  # fmt: skip
    best = math.inf
    with CapacityPool(ctx, 1) as pool:
        for cfg, p in zip(cfgs, pool.evaluate(cfgs), strict=True):
            if not p.feasible:
                continue
            built, hours = build(ctx, cfg), 0.0
            for need in needs:
                n = math.ceil(need * (1 - 1e-9) / p.requests_per_s)
                while n > 1 and meets_at(ctx, cfg, need / (n - 1), built):
                    n -= 1
                hours += n * cfg.tensor_parallel_size
            best = min(best, hours)
    return best


@SETTINGS
@given(
    rates=st.lists(st.floats(5.0, 300.0).map(lambda r: round(r, 2)), min_size=1, max_size=2),
    ttft=st.sampled_from([200, 300, 500, 1000, 2000]),
    itl=st.sampled_from([20, 25, 30, 40, 50, 80]),
    tps=st.sampled_from([[1], [2], [1, 2]]),
)
def test_the_plan_is_the_brute_force_optimum_of_its_grid(
    rates: list[float], ttft: float, itl: float, tps: list[int]
) -> None:
    """One GPU type, colocated, a listed grid: the plan's GPU-hours are a brute force's over every
    configuration of the grid with exact replica counts (a plan can only tie it: the brute force
    is the optimum over the same candidates)."""
    req = _grid_request(rates, ttft, itl, tps)
    rep = plan(req, workers=1)
    if rep.status == "INFEASIBLE":
        assert brute_force_gpu_hours(req) == math.inf
        return
    assert rep.status == "OPTIMAL"
    assert sum(b.gpus for b in rep.buckets) == brute_force_gpu_hours(req)


@pytest.mark.parametrize(
    ("rates", "ttft", "itl", "tps", "before"),
    [
        # Reconstructed by that brute force over random requests. The screen at 1.01 x the best so
        # far and a budget kept only with 1% more capacity cost these plans 6 GPUs instead of 5 and
        # 30 instead of 29 (3.4%); the search before the exact screen still gives 6 and 30 with the
        # latency model of today (checked on the tree before it).
        ([60.04], 300, 20, [1, 2], 6),
        ([264.32], 200, 50, [1], 30),
        # With the exact screen, counts from the root-found capacities still cost these a replica
        # (6 for 5, 35 for 34): the need / n they needed lay within the root-find's precision
        # (the first at 47.6 req/s, where the latency model of today puts that edge).
        ([47.6], 200, 80, [1], 6),
        ([143.92], 200, 25, [1], 35),
    ],
)
def test_the_audits_cheaper_plans_are_found(
    rates: list[float], ttft: float, itl: float, tps: list[int], before: int
) -> None:
    req = _grid_request(rates, ttft, itl, tps)
    rep = plan(req, workers=1)
    gpus = sum(b.gpus for b in rep.buckets)
    assert gpus == brute_force_gpu_hours(req) < before


# --- the audit's cases ---------------------------------------------------------------------------------


def _chat(itl_ms: float, rate: float) -> dict[str, Any]:
    req = yaml.safe_load((EXAMPLES / "chat.yaml").read_text())
    req["slo"]["itl_p99_ms"] = itl_ms
    req["workload"]["arrivals"]["requests_per_s"] = rate
    req["candidates"] = {"gpus": ["h100-sxm"], "tensor_parallel_sizes": [1, 2], "disaggregation": "never"}
    return req


def _gpus(rep: PlanReport) -> int:
    return sum(d.replicas_peak * d.tensor_parallel_size for d in rep.deployments)


def test_itl_27_ms_costs_no_more_than_26() -> None:
    """examples/chat.yaml at 50.69 req/s (55.76 with headroom): at ITL 26 ms h100-sxm TP1, budget
    768, 250 seqs, carries 18.595 req/s, 3 replicas; at 27 ms the search lowered `max_num_seqs`
    to 192 (its capacity held within 0.1%: 18.575) and 3 x 18.575 = 55.72 missed the need by
    0.07%, so the plan took 4 replicas, 33% more than at the tighter target. Now the
    configuration the lowering replaced is a runner-up, checked at need / 3 = 18.586 req/s
    (where the root-find's precision left it open): it meets the SLOs there."""
    at26, at27 = plan(_chat(26, 50.69), workers=1), plan(_chat(27, 50.69), workers=1)
    assert _gpus(at26) == 3
    assert at27.usd_per_month is not None and at26.usd_per_month is not None
    assert at27.usd_per_month <= at26.usd_per_month
    assert _gpus(at27) == 3


def test_itl_sweep_is_monotone() -> None:
    costs = [plan(_chat(itl, 50.69), workers=1).usd_per_month for itl in (24, 25, 26, 27, 28, 30)]
    assert all(c is not None for c in costs)
    assert costs == sorted(costs, reverse=True), costs  # type: ignore[type-var]


def test_the_recheck_never_raises_the_bill_and_is_the_same_whatever_the_workers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Mixed GPU types over three buckets (the MILP's own answer, then its candidates refined at
    the rates where one replica fewer would do): the answer after the re-check costs no more than
    the MILP's first, and the plan is the same bytes with 1 or 2 workers and a cold or warm memo."""
    from planner.plan import pipeline, recheck
    from planner.plan.memo import clear_memo

    seen: list[tuple[float, float]] = []
    real = recheck.exact_answer

    def spy(pl: Any, data: Any, result: Any, build: Any, solve: Any) -> Any:
        out = real(pl, data, result, build, solve)
        seen.append((result.objective_usd, out.result.objective_usd))
        return out

    monkeypatch.setattr(pipeline, "exact_answer", spy)
    w = copy.deepcopy(WORKLOAD)
    w["arrivals"] = {"buckets": [{"duration_s": 3600, "requests_per_s": r} for r in (17.3, 51.9, 88.4)]}
    req = {
        "model": "Qwen/Qwen3-8B",
        "slo": {"ttft_p99_ms": 500, "itl_p99_ms": 40},
        "workload": w,
        "candidates": {
            "gpus": ["h100-sxm", "h200-sxm"],
            "tensor_parallel_sizes": [1, 2],
            "mixed_gpu_types": True,
        },
        "inventory": {"h200-sxm": 3},
    }
    clear_memo()
    cold = plan(req, workers=1).model_dump_json()
    assert plan(req, workers=2).model_dump_json() == cold
    clear_memo()
    assert plan(req, workers=2).model_dump_json() == cold
    assert seen and all(after <= before for before, after in seen)
