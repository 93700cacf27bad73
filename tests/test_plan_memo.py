"""The capacity memo (planner/plan/memo.py): keyed by exactly the capacity inputs, bounded, and
invisible in the output (a plan from the memo is byte-for-byte the cold plan).

Small candidate sets and workers=1 keep each plan fast. No plan figure is pinned here: the
property is cold == warm, whatever the cost model computes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from test_plan import request as plan_request

from planner.plan import plan
from planner.plan.memo import CAPACITY_MEMO, Memo, capacity_key, clear_memo, memo_info


def request(**over: Any) -> dict[str, Any]:
    """test_plan's request, colocated only (the memo is about shapes, not pools)."""
    return plan_request(
        **{
            "candidates": {"gpus": ["h100-sxm"], "tensor_parallel_sizes": [1, 2], "disaggregation": "never"},
            **over,
        }
    )


def plan_json(req: dict[str, Any], workers: int = 1) -> str:
    return plan(req, workers=workers).model_dump_json()


def cold(req: dict[str, Any]) -> str:
    clear_memo()
    return plan_json(req)


@pytest.fixture(autouse=True)
def _fresh_memo() -> Any:
    clear_memo()
    yield
    clear_memo()


# --- what the key holds ----------------------------------------------------------------------------


def _with(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(r: dict[str, Any]) -> None:
        *head, last = path.split(".")
        d = r
        for k in head:
            d = d.setdefault(k, {})
        d[last] = value

    return change


RATE_ONLY = {
    "rate": _with("workload.arrivals.requests_per_s", 55.5),
    "buckets": _with(
        "workload.arrivals",
        {
            "buckets": [
                {"requests_per_s": 3.0, "duration_s": 3600},
                {"requests_per_s": 30.0, "duration_s": 7200},
            ]
        },
    ),
    "price": _with("pricing", {"h100-sxm": {"usd_per_gpu_hour": 1.23, "reserved_usd_per_gpu_hour": 0.9}}),
    "inventory": _with("inventory", {"h100-sxm": 3}),
    "headroom": _with("headroom", 0.5),
    "solver": _with("solver", {"time_limit_s": 2.0}),
    "name": _with("workload.name", "another"),
}

CAPACITY_INPUTS = {
    "ttft": _with("slo.ttft_p99_ms", 800),
    "itl": _with("slo.itl_p99_ms", 40),
    "e2e": _with("slo.e2e_p99_ms", 60000),
    "input lengths": _with("workload.input_tokens.percentiles.p99", 5000),
    "output lengths": _with(
        "workload.output_tokens.pairs", [[100, 0.6], [300, 0.2], [800, 0.15], [2000, 0.05]]
    ),
    "burstiness": _with("workload.arrivals.burstiness", 0.5),
    "prefix cache": _with("workload.prefix_cache_hit_fraction", 0.3),
    "kv dtype": _with("candidates.kv_dtype", "fp8"),
    "memory utilization": _with("candidates.gpu_memory_utilization", 0.85),
    "profile": _with("profile", "theoretical"),
    "model": _with("model", "meta-llama/Llama-3.1-8B-Instruct"),
}


def test_rates_prices_inventory_and_headroom_share_the_entries() -> None:
    base = request()
    first = plan_json(base)
    after_first = memo_info()
    assert after_first.entries > 0 and after_first.hits == 0
    for name, change in RATE_ONLY.items():
        other = request()
        change(other)
        plan_json(other)
        now = memo_info()
        assert now.entries == after_first.entries, name  # nothing new computed
        assert now.misses == after_first.misses, name
    assert memo_info().hits > 0
    assert plan_json(base) == first


@pytest.mark.parametrize("name", sorted(CAPACITY_INPUTS))
def test_any_capacity_input_misses(name: str) -> None:
    plan_json(request())
    before = memo_info()
    other = request()
    CAPACITY_INPUTS[name](other)
    plan_json(other)
    after = memo_info()
    assert after.misses > before.misses
    assert after.hits == before.hits  # not one answer of the first request reused


def test_key_is_per_gpu_and_ignores_the_other_gpus_profiles() -> None:
    from planner.latency import WorkloadStats
    from planner.plan.pipeline import _context
    from planner.schema.inputs import build_workload
    from planner.schema.plan_request import parse_plan_request

    def ctx(gpus: list[str], rate: float) -> Any:
        r = request()
        r["workload"]["arrivals"]["requests_per_s"] = rate
        req = parse_plan_request(r)
        stats = WorkloadStats.of(build_workload(req.workload, "workload", None))
        return _context(req, req.model, stats, gpus, None, 16384)

    one, two = ctx(["h100-sxm"], 20.0), ctx(["h100-sxm", "h200-sxm"], 33.0)
    assert capacity_key(one, "h100-sxm") == capacity_key(two, "h100-sxm")
    assert hash(capacity_key(one, "h100-sxm")) == hash(capacity_key(two, "h100-sxm"))
    assert capacity_key(two, "h100-sxm") != capacity_key(two, "h200-sxm")


# --- the output does not change --------------------------------------------------------------------


def test_warm_plan_is_byte_identical_to_cold() -> None:
    req = request(
        candidates={"gpus": ["h100-sxm"], "tensor_parallel_sizes": [1, 2], "disaggregation": "auto"}
    )
    a = cold(req)
    b = plan_json(req)  # every capacity from the memo
    assert memo_info().hits > 0
    assert a == b


def test_plans_in_any_order_equal_their_cold_plans() -> None:
    reqs = [request()]
    for change in (RATE_ONLY["rate"], RATE_ONLY["price"], CAPACITY_INPUTS["ttft"], RATE_ONLY["buckets"]):
        r = request()
        change(r)
        reqs.append(r)
    expected = [cold(r) for r in reqs]
    for order in ([0, 1, 2, 3, 4], [4, 3, 2, 1, 0], [2, 0, 4, 1, 3, 2, 0]):
        clear_memo()
        for i in order:
            assert plan_json(reqs[i]) == expected[i], (order, i)


def test_worker_processes_fill_the_same_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    from planner.plan import capacity_pool

    monkeypatch.setattr(capacity_pool, "IN_PROCESS_S", 0.0)  # a small plan's batches go to the workers too
    req = request()
    expected = cold(req)
    clear_memo()
    assert plan_json(req, workers=2) == expected
    filled = memo_info()
    assert filled.entries > 0
    assert plan_json(req, workers=1) == expected
    assert memo_info().misses == filled.misses


# --- bounded ---------------------------------------------------------------------------------------


def test_lru_keeps_at_most_max_entries() -> None:
    m = Memo(max_entries=2)
    m.put("a", 1)
    m.put("b", 2)
    assert m.get("a") == 1  # a is now the most recent
    m.put("c", 3)  # evicts b
    assert m.get("b") is None
    assert (m.get("a"), m.get("c")) == (1, 3)
    info = m.info()
    assert (info.entries, info.max_entries, info.hits, info.misses) == (2, 2, 3, 1)
    off = Memo(max_entries=0)
    off.put("a", 1)
    assert off.get("a") is None and off.info().entries == 0


def test_the_process_memo_is_bounded() -> None:
    assert 0 < CAPACITY_MEMO.max_entries <= 100_000
