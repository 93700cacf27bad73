"""The fast paths of solvers.milp.solve against the reference formulation, on small seeded
random instances.

The reference is `solve(data, reduce=False)` with the fallback solver (`reference`): the model of
solvers.milp_model exactly as the docstring writes it, over every candidate and every original
bucket, solved by CBC to proved optimality (no pruning, no merging, no closed form, no attempt,
no bucket-wise split, and not the solver the fast paths use, HiGHS).
The fast path must find the same optimum: equal cost when it says OPTIMAL, and a bound and a plan
that bracket it when it says FEASIBLE. The instances are shaped to reach every path: more than
MONOLITHIC_MAX_BUCKETS distinct buckets (so mixed problems go through the attempt or the
bucket-wise path), TP multiples that prune_dominated drops, repeated buckets that merge, caps,
reserved prices and split pools.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from milp_helpers import cbc_reference

from solvers import milp, milp_buckets, milp_bucketwise
from solvers.milp import Bucket, Candidate, MilpData, MilpResult, Resource, prune_dominated, solve


def random_instance(seed: int, single_config: bool, priced: bool) -> MilpData:
    rng = np.random.default_rng(1000 + seed)
    resources = []
    cands = []
    for t in range(2):
        od = round(float(rng.uniform(1.0, 4.0)), 2)
        reserved = round(od * float(rng.uniform(0.5, 0.8)), 2) if priced else None
        resources.append(Resource(f"g{t}", od, reserved, None if t == 0 else int(rng.integers(6, 12))))
        for pool in ("colocated", "prefill", "decode"):
            base = float(rng.uniform(1.0, 3.0))
            for tp in (1, 2, 4):  # capacity per unit falls with TP: the larger ones are often multiples
                cap = round(base * tp ** float(rng.uniform(0.8, 1.05)), 3)
                cands.append(Candidate(f"g{t}/tp{tp}/{pool}", f"g{t}", tp, cap, pool, f"g{t}"))
    levels = [round(float(rng.uniform(0.5, 7.0)), 2) + 0.001 * i for i in range(10)]  # distinct
    demand = levels + levels[:2]  # 12 buckets, 10 distinct: two merge
    return MilpData(
        tuple(Bucket(d, float(rng.choice([1.0, 2.0]))) for d in demand),
        tuple(resources),
        tuple(cands),
        headroom=0.1,
        single_config=single_config,
        time_limit_s=60.0,
    )


def bill(data: MilpData, out: MilpResult) -> float:
    """The plan's bill recomputed from its replicas and reserved units (and its caps and
    coverage checked), without the solver's code."""
    total = 0.0
    for b, bucket in enumerate(data.buckets):
        cap = {"colocated": 0.0, "prefill": 0.0, "decode": 0.0}
        for c in data.candidates:
            cap[c.pool] += c.capacity_per_s * out.replicas[c.id][b]
        assert cap["colocated"] + min(cap["prefill"], cap["decode"]) >= data.need_per_s(b) * (1 - 1e-6)
        for r in data.resources:
            used = sum(
                c.units_per_replica * out.replicas[c.id][b] for c in data.candidates if c.resource == r.name
            )
            held = max(used, out.reserved[r.name])
            assert r.inventory is None or held <= r.inventory
            total += bucket.hours * r.on_demand_usd_per_hour * (used - min(used, out.reserved[r.name]))
    for r in data.resources:
        total += (r.reserved_usd_per_hour or 0.0) * data.total_hours * out.reserved[r.name]
    return total


def agree(data: MilpData, fast: MilpResult, ref: MilpResult) -> None:
    assert ref.status == "OPTIMAL"
    assert ref.objective_usd is not None and fast.objective_usd is not None
    assert bill(data, ref) == pytest.approx(ref.objective_usd, abs=1e-6)
    assert bill(data, fast) == pytest.approx(fast.objective_usd, abs=1e-6)
    if fast.status == "OPTIMAL":
        assert fast.objective_usd == pytest.approx(ref.objective_usd, abs=1e-6)
    else:
        assert fast.status == "FEASIBLE"
        assert fast.best_bound_usd is not None
        assert fast.best_bound_usd <= ref.objective_usd + 1e-6 <= fast.objective_usd + 2e-6


@pytest.mark.parametrize("seed", range(4))
def test_mixed_fast_path_finds_the_reference_optimum(seed):
    data = random_instance(seed, single_config=False, priced=seed % 2 == 0)
    assert len({b.demand_per_s for b in data.buckets}) > milp.MONOLITHIC_MAX_BUCKETS
    fast = solve(data)
    agree(data, fast, cbc_reference(data))
    # Few replicas: without reserved prices the bucket-wise path is exact (odd seeds); with them
    # the few reserved vectors a cheaper plan could hold are each sized and proved (the box), or
    # the whole model, warm started, closes the gap within ATTEMPT_NODES nodes.
    assert fast.status == "OPTIMAL"
    assert fast.stats.method in (("milp", "bucketwise") if seed % 2 == 0 else ("bucketwise",))
    assert fast.stats.candidates_in_model < len(data.candidates)
    assert fast.stats.buckets_in_model == 10


@pytest.mark.parametrize("seed", range(4))
def test_bucketwise_path_finds_the_reference_optimum(seed, monkeypatch):
    # Without reserved prices the buckets are independent: bucket by bucket (HiGHS) is exact.
    # With them, the bucket-wise answer and its bound bracket the reference optimum.
    monkeypatch.setattr(milp, "ATTEMPT_MAX_REPLICAS", 0)
    data = random_instance(seed, single_config=False, priced=seed % 2 == 1)
    fast = solve(data)
    assert fast.stats.method == "bucketwise"
    ref = cbc_reference(data)
    agree(data, fast, ref)
    if seed % 2 == 0:
        assert fast.status == "OPTIMAL"
    again = solve(data)  # the same answer, to the last replica and the bound
    assert (again.status, again.objective_usd, again.best_bound_usd, again.replicas, again.reserved) == (
        fast.status,
        fast.objective_usd,
        fast.best_bound_usd,
        fast.replicas,
        fast.reserved,
    )


@pytest.mark.parametrize("seed", range(3))
def test_single_configuration_fast_path_finds_the_reference_optimum(seed):
    data = random_instance(seed, single_config=True, priced=True)
    fast = solve(data)
    agree(data, fast, cbc_reference(data))
    assert fast.status == "OPTIMAL"


def test_pruned_multiples_never_carry_the_optimum():
    # Every candidate prune_dominated drops (m copies of a kept one: no more units, no less
    # capacity) can be taken out of the reference model without raising its optimum.
    for seed in range(4):
        data = random_instance(seed, single_config=False, priced=True)
        kept, n = prune_dominated(data.candidates, respect_groups=False)
        assert n > 0
        narrow = MilpData(data.buckets, data.resources, kept, data.headroom, False, data.time_limit_s)
        full = cbc_reference(data)
        pruned = cbc_reference(narrow)
        assert full.status == pruned.status == "OPTIMAL"
        assert pruned.objective_usd == pytest.approx(full.objective_usd, abs=1e-6)


def test_buckets_covered_by_a_smaller_proved_answer_are_not_solved_again(monkeypatch):
    # size_buckets goes up the needs and reuses a proved answer for every bigger need it still
    # covers (solvers.milp_bucketwise): fewer HiGHS runs than buckets, the same optimum.
    monkeypatch.setattr(milp, "ATTEMPT_MAX_REPLICAS", 0)
    calls = []
    real = milp_buckets.run_model

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(milp_buckets, "run_model", counted)
    data = random_instance(0, single_config=False, priced=False)
    fast = solve(data)
    assert fast.stats.method == "bucketwise"
    assert 0 < len(calls) < fast.stats.buckets_in_model
    agree(data, fast, cbc_reference(data))
    assert fast.status == "OPTIMAL"


@pytest.mark.parametrize("seed", range(4))
def test_reserved_rate_bound_never_exceeds_the_reference_optimum(seed, monkeypatch):
    # solvers.milp_bucketwise.reserved_rate_bound: each bucket alone, every GPU at
    # min(reserved, on-demand) per hour. A lower bound on any plan (its docstring's proof), so
    # never above the reference optimum; its answers cover each bucket within the caps.
    data = random_instance(seed, single_config=False, priced=True)
    ref = cbc_reference(data)
    assert ref.status == "OPTIMAL" and ref.objective_usd is not None
    labels = tuple((b,) for b in range(len(data.buckets)))
    plan = np.array([[ref.replicas[c.id][b] for b in range(len(data.buckets))] for c in data.candidates])
    bound = milp_bucketwise.reserved_rate_bound(
        data, labels, data.candidates, plan, None, time.perf_counter() + 60
    )
    assert bound is not None
    assert 0 < bound <= ref.objective_usd + 1e-6

    # A bound already at the plan's own cost cannot be beaten: skipped before any solve.
    def no_solve(*a, **k):
        raise AssertionError("solved although it could not beat the known bound")

    monkeypatch.setattr(milp_bucketwise, "size_buckets", no_solve)
    deadline = time.perf_counter() + 60
    assert (
        milp_bucketwise.reserved_rate_bound(data, labels, data.candidates, plan, ref.objective_usd, deadline)
        is None
    )


def test_reserved_rate_bound_proves_a_plan_without_reserved_gpus(monkeypatch):
    # "spot" (no reserved price, $1/h for 2/s: $0.50 per 1/s) beats "dear" even at its reserved
    # rate ($2/h for 2.5/s: $0.80 per 1/s), so no plan holds reserved GPUs; the LP relaxation
    # still leaves a gap (fractional replicas), the reserved-rate bound closes it: OPTIMAL.
    monkeypatch.setattr(milp, "ATTEMPT_MAX_REPLICAS", 0)
    resources = (Resource("spot", 1.0), Resource("dear", 3.0, 2.0, 4))
    cands = (
        Candidate("spot/c", "spot", 1, 2.0),
        Candidate("dear/c", "dear", 1, 2.5),
        Candidate("dear/p", "dear", 1, 5.0, pool="prefill"),
        Candidate("spot/d", "spot", 1, 3.0, pool="decode"),
    )
    demand = [0.7 + 0.9 * b for b in range(12)]
    data = MilpData(tuple(Bucket(d, 1.0) for d in demand), resources, cands, single_config=False)
    fast = solve(data)
    assert fast.stats.method == "bucketwise"
    # the reserved vectors a cheaper plan could hold are few ("dear" 0..1): each sized and proved
    assert (fast.status, fast.stats.bound_source) == ("OPTIMAL", "reserved_box")
    monkeypatch.setattr(milp_bucketwise, "RESERVED_BOX", 0)
    fast = solve(data)
    assert (fast.status, fast.stats.bound_source) == ("OPTIMAL", "reserved_rate")
    agree(data, fast, cbc_reference(data))
    assert fast.reserved == {"spot": 0, "dear": 0}
