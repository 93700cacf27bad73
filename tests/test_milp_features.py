"""The sizing MILP's per-bucket capacities, availability rule (min_replicas, spare_replicas) and
incompatible pairs (solvers.milp_data's docstring): hand-solved cases, and every path (closed
form, one model, bucket by bucket, the full model by HiGHS and by CBC) against the enumeration of
tests/milp_brute.py on small seeded instances.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from milp_brute import brute_force, plan_ok
from milp_helpers import cbc_reference

from solvers import milp
from solvers.milp import Bucket, Candidate, MilpData, Resource, build, prune_dominated, solve
from solvers.milp_data import LIMIT_PREFIX
from solvers.milp_fastpath import evaluate_options


def one_bucket(demand: float, resources, candidates, **kw) -> MilpData:
    return MilpData((Bucket(demand, 1.0),), tuple(resources), tuple(candidates), **kw)


# ---------------------------------------------------------------------------------------------
# By hand


def test_spare_replica_by_hand():
    # Demand 10/s, 1 h, $1 per unit-hour. A: 4/s on 1 unit; B: 9/s on 2 units.
    # Without spares: A needs ceil(10/4) = 3 ($3); B needs 2 ($4). One configuration: A, $3.
    # N+1 (spare 1): A needs ceil(10/4) + 1 = 4 ($4); B needs 2 + 1 = 3 ($6): A, $4.
    # Mixed with a spare: each deployment in use loses a replica's worth, so A alone (4 x 4 -
    # 4 = 12 >= 10, $4) beats any mix (A 1 + B: A's one replica serves 0 once down, B needs 3).
    res = (Resource("u", 1.0),)
    cands = (Candidate("A", "u", 1, 4.0), Candidate("B", "u", 2, 9.0))
    assert solve(one_bucket(10.0, res, cands)).objective_usd == pytest.approx(3.0)
    for single in (True, False):
        out = solve(one_bucket(10.0, res, cands, spare_replicas=1, single_config=single))
        assert (out.status, out.objective_usd, out.replicas) == (
            "OPTIMAL",
            pytest.approx(4.0),
            {"A": (4,), "B": (0,)},
        )


def test_min_replicas_by_hand():
    # Demand 3/s and 0/s (1 h each); A: 4/s on 1 unit at $1. One replica covers 3/s, but
    # min_replicas 2 asks for 2 where there is demand, none where there is none: $2.
    data = MilpData((Bucket(3.0, 1.0), Bucket(0.0, 1.0)), (Resource("u", 1.0),), (Candidate("A", "u", 1, 4.0),),
                    min_replicas=2)  # fmt: skip
    for single in (True, False):
        out = solve(replace(data, single_config=single))
        assert (out.objective_usd, out.replicas["A"]) == (pytest.approx(2.0), (2, 0))
    # Mixed, with C (1/s on 1 unit of "v" at $0.2) too: C alone 3 x $0.2 = $0.6; A alone 2 x $1;
    # both in use would take 2 of each ($2.4). C, $0.6.
    cheap = replace(data, resources=(Resource("u", 1.0), Resource("v", 0.2)),
                    candidates=(*data.candidates, Candidate("C", "v", 1, 1.0)), single_config=False)  # fmt: skip
    out = solve(cheap)
    assert (out.objective_usd, out.replicas) == (pytest.approx(0.6), {"A": (0, 0), "C": (3, 0)})


def test_serve_min_binds_and_is_named():
    # Mixed, min_replicas 3: A (4/s) covers 3/s with one replica but must hold 3.
    data = one_bucket(3.0, (Resource("u", 1.0),), (Candidate("A", "u", 1, 4.0),), single_config=False,
                      min_replicas=3)  # fmt: skip
    model = build(data)
    assert {"serve_max_A_b0", "serve_min_A_b0"} <= set(model.constraints)
    out = solve(data)
    assert out.replicas == {"A": (3,)}
    assert "serve_min_A_b0" in out.binding


def test_incompatible_pair_by_hand():
    # Demand 10/s, $1 per unit-hour. Prefill P4 (TP4, 40/s, 4 units) and P1 (TP1, 8/s); decode D1
    # (TP1, 10/s) and D4 (TP4, 30/s). Cheapest pair: P4 needs 1 replica = 4 units... P1 2 + D1 1
    # = 3 units ($3) beats P4 + D1 (5). With (P1, D1) incompatible (as NIXL's TP rule would
    # not do, but any pair may be named): P1 2 + D4 1 = 6; P4 1 + D1 1 = 5: $5.
    res = (Resource("u", 1.0),)
    cands = (
        Candidate("P4", "u", 4, 40.0, pool="prefill"),
        Candidate("P1", "u", 1, 8.0, pool="prefill"),
        Candidate("D1", "u", 1, 10.0, pool="decode"),
        Candidate("D4", "u", 4, 30.0, pool="decode"),
    )
    data = one_bucket(10.0, res, cands)
    assert solve(data).objective_usd == pytest.approx(3.0)
    banned = replace(data, incompatible_pairs=(("P1", "D1"),))
    for single in (True, False):
        out = solve(replace(banned, single_config=single))
        assert (out.status, out.objective_usd) == ("OPTIMAL", pytest.approx(5.0))
        assert out.replicas["P4"] == (1,) and out.replicas["D1"] == (1,)
        assert "incompatible_P1_D1" in out.binding  # one of the pair is in use
    assert "incompatible_P1_D1" in build(replace(banned, single_config=False)).constraints
    assert "incompatible_P1_D1" in build(banned).constraints


def test_per_bucket_capacity_by_hand():
    # Two buckets of 10/s, 1 h, $1 per unit. A serves 5/s in bucket 0 and 2.5/s in bucket 1
    # (bursty: fewer replicas share less smoothly): 2 + 4 replicas, $6. B serves 3.6/s in both:
    # 3 + 3, $6. Mixed: bucket 0 A 2 ($2; B 3 or A 1 + B 2 cost $3), bucket 1 B 3 ($3; A 1 + B 2
    # covers 9.7 only, A 2 + B 2 or A 4 cost $4): $5.
    res = (Resource("u", 1.0),)
    cands = (
        Candidate("A", "u", 1, 5.0, capacity_by_bucket_per_s=(5.0, 2.5)),
        Candidate("B", "u", 1, 3.6),
    )
    data = MilpData((Bucket(10.0, 1.0), Bucket(10.0, 1.0)), res, cands)
    single = solve(data)
    assert single.objective_usd == pytest.approx(6.0)
    mixed = solve(replace(data, single_config=False))
    assert (mixed.objective_usd, mixed.replicas) == (pytest.approx(5.0), {"A": (2, 0), "B": (0, 3)})
    # Equal demand, unequal capacities: the buckets are not merged.
    assert mixed.stats.buckets_in_model == 2


# ---------------------------------------------------------------------------------------------
# Reductions (the first two: cases a mutation audit found no test for)


def test_a_configuration_that_fills_an_inventory_cap_exactly_is_feasible():
    # Demand 4/s, 1 h. A: 1/s on 1 unit of "h" ($1/h, at most 4 units): exactly 4 units, $4.
    # B: 1/s on 1 unit of "l" ($2/h, no cap): $8. The closed form must cost A at $4 (a cap
    # filled is a cap kept), not as infeasible (which leaves B: the bill doubled, still OPTIMAL).
    res = (Resource("h", 1.0, inventory=4), Resource("l", 2.0))
    cands = (Candidate("A", "h", 1, 1.0), Candidate("B", "l", 1, 1.0))
    for single in (True, False):
        out = solve(one_bucket(4.0, res, cands, single_config=single))
        assert (out.status, out.objective_usd, out.selected) == ("OPTIMAL", pytest.approx(4.0), ("A",))
        assert "inventory_h_b0" in out.binding
    options = evaluate_options(one_bucket(4.0, res, cands), [(0,), (1,)])
    assert [o.cost_usd for o in options] == [pytest.approx(4.0), pytest.approx(8.0)]


def test_pruning_keeps_a_tp_size_that_scales_better_than_linearly():
    # TP2 serving more than twice TP1 (7 > 2 x 3) covers 7/s on 2 units where TP1 needs 3 units:
    # it must survive pruning (and it is the optimum at 7/s); TP2 at 5.9 (< 6) is dominated.
    res = (Resource("h", 1.0),)
    tp1, tp2 = Candidate("tp1", "h", 1, 3.0), Candidate("tp2", "h", 2, 7.0)
    assert prune_dominated((tp1, tp2)) == ((tp1, tp2), 0)
    assert prune_dominated((tp1, replace(tp2, capacity_per_s=5.9))) == ((tp1,), 1)
    for single in (True, False):
        out = solve(one_bucket(7.0, res, (tp1, tp2), single_config=single))
        assert (out.objective_usd, out.replicas) == (pytest.approx(2.0), {"tp1": (0,), "tp2": (1,)})


def test_dominance_is_judged_bucket_by_bucket():
    # tp2 has more than twice tp1's capacity in bucket 0 only: it survives; tp2-slow is below
    # twice tp1's everywhere: dropped.
    cands = (
        Candidate("tp1", "h", 1, 3.0, capacity_by_bucket_per_s=(3.0, 3.0)),
        Candidate("tp2", "h", 2, 5.0, capacity_by_bucket_per_s=(6.5, 5.0)),
        Candidate("tp2-slow", "h", 2, 5.0, capacity_by_bucket_per_s=(5.9, 5.0)),
    )
    kept, n = prune_dominated(cands)
    assert [c.id for c in kept] == ["tp1", "tp2"] and n == 1


def test_dominance_keeps_a_rival_with_fewer_conflicts_only():
    # "big" dominates "small-in-pair" on capacity, but it is incompatible with decode D while the
    # other is not: replacing one by the other could break the pair rule, so both stay.
    cands = (
        Candidate("big", "h", 1, 9.0, pool="prefill"),
        Candidate("small", "h", 1, 5.0, pool="prefill"),
        Candidate("D", "h", 1, 5.0, pool="decode"),
    )
    assert prune_dominated(cands, incompatible_pairs=[("big", "D")])[1] == 0
    assert prune_dominated(cands, incompatible_pairs=[("small", "D")])[1] == 1
    assert prune_dominated(cands)[1] == 1


def test_replica_limit_counts_each_buckets_own_capacity():
    ok = Candidate("c", "u", 1, 1.0, capacity_by_bucket_per_s=(1.0, 1.0))
    MilpData((Bucket(1000.0, 1.0), Bucket(1.0, 1.0)), (Resource("u", 1.0),), (ok,))
    slow = replace(ok, capacity_by_bucket_per_s=(1e-3, 1.0))  # 1e6 replicas in bucket 0
    with pytest.raises(ValueError, match=f"replicas per bucket {LIMIT_PREFIX}"):
        MilpData((Bucket(1000.0, 1.0), Bucket(1.0, 1.0)), (Resource("u", 1.0),), (slow,))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: replace(d, candidates=(replace(d.candidates[0], capacity_by_bucket_per_s=(1.0, 2.0)),)),
         "candidates[0].capacity_by_bucket_per_s has 2 values, one per bucket wanted (1)"),
        (lambda d: replace(d, candidates=(replace(d.candidates[0], capacity_by_bucket_per_s=(0.0,)),)),
         "candidates[0].capacity_by_bucket_per_s[0] must be > 0"),
        (lambda d: replace(d, candidates=(replace(d.candidates[0], capacity_by_bucket_per_s=(float("inf"),)),)),
         "candidates[0].capacity_by_bucket_per_s[0] must be finite"),
        (lambda d: replace(d, candidates=(replace(d.candidates[0], capacity_by_bucket_per_s=(True,)),)),
         "candidates[0].capacity_by_bucket_per_s[0] must be a number"),
        (lambda d: replace(d, min_replicas=-1), "min_replicas must be >= 0"),
        (lambda d: replace(d, spare_replicas=1001), f"spare_replicas {LIMIT_PREFIX} 1000"),
        (lambda d: replace(d, spare_replicas=1.0), "spare_replicas must be an integer"),
        (lambda d: replace(d, incompatible_pairs=(("c", "x"),)), "incompatible_pairs[0][1] 'x' is not a candidate id"),
        (lambda d: replace(d, incompatible_pairs=(("c", "c"),)), "incompatible_pairs[0] pairs 'c' with itself"),
        (lambda d: replace(d, incompatible_pairs=("cd",)), "incompatible_pairs[0] must be a pair of candidate ids"),
    ],
)  # fmt: skip
def test_bad_new_input_names_the_field(change, message):
    good = one_bucket(1.0, (Resource("u", 1.0),), (Candidate("c", "u", 1, 1.0), Candidate("d", "u", 1, 2.0)))
    with pytest.raises(ValueError) as err:
        change(good)
    assert message in str(err.value)


# ---------------------------------------------------------------------------------------------
# Against the enumeration


def random_featured(rng: np.random.Generator, single_config: bool) -> MilpData:
    """1-2 resources, 3 candidates (a prefill and a decode among them half the time), 1-2 buckets;
    per-bucket capacities, min_replicas 0-2, spare 0-1 and an incompatible pair, each at random."""
    n_t = int(rng.integers(1, 3))
    resources = []
    for t in range(n_t):
        od = float(rng.integers(4, 13)) / 4
        reserved = None if rng.random() < 0.5 else round(od * float(rng.uniform(0.4, 0.9)), 2)
        cap = None if rng.random() < 0.6 else int(rng.integers(3, 9))
        resources.append(Resource(f"t{t}", od, reserved, cap))
    n_b = int(rng.integers(1, 3))
    pools = (
        ("prefill", "decode", "colocated") if rng.random() < 0.5 else ("colocated", "colocated", "prefill")
    )
    cands = []
    for k, pool in enumerate(pools):
        base = float(rng.integers(20, 41)) / 10
        by_bucket = None
        if rng.random() < 0.5:
            by_bucket = tuple(round(base * float(rng.uniform(0.8, 1.2)), 2) for _ in range(n_b))
        cands.append(Candidate(f"c{k}", f"t{int(rng.integers(0, n_t))}", int(rng.integers(1, 3)), base, pool, "g",
                               by_bucket))  # fmt: skip
    pairs: tuple[tuple[str, str], ...] = ()
    if rng.random() < 0.5:
        pairs = (("c0", "c1"),)
    buckets = tuple(Bucket(float(rng.integers(0, 11)) / 2, float(rng.integers(1, 5)) / 2) for _ in range(n_b))
    return MilpData(buckets, tuple(resources), tuple(cands), headroom=0.1 if rng.random() < 0.3 else 0.0,
                    single_config=single_config, min_replicas=int(rng.integers(0, 3)),
                    spare_replicas=int(rng.integers(0, 2)), incompatible_pairs=pairs)  # fmt: skip


@pytest.mark.parametrize("seed", range(16))
def test_features_match_brute_force(seed):
    rng = np.random.default_rng(7000 + seed)
    for single in (True, False):
        data = random_featured(rng, single)
        expected = brute_force(data)
        for out in (solve(data), solve(data, reduce=False), cbc_reference(data)):
            if expected is None:
                assert out.status == "INFEASIBLE", (seed, single)
                continue
            assert out.status == "OPTIMAL", (seed, single, out.stats.method)
            assert out.objective_usd == pytest.approx(expected, abs=1e-6), (seed, single, out.stats.method)
            assert plan_ok(data, out.replicas, out.reserved) == pytest.approx(expected, abs=1e-6)


def many_featured(seed: int, priced: bool) -> MilpData:
    """Mixed, 12 distinct buckets (the bucket-wise path), per-bucket capacities on some
    candidates, N+1 and a minimum of 2, an incompatible prefill/decode pair (each side keeps a
    partner, so the pair stays in the model)."""
    rng = np.random.default_rng(8000 + seed)
    resources = (
        Resource("a", 1.0, 0.6 if priced else None),
        Resource("b", 1.6, 1.0 if priced else None, 10),
    )
    demand = [round(float(rng.uniform(1.0, 9.0)), 2) + 0.001 * b for b in range(12)]
    burst = [0.8 + 0.2 * d / 9.0 for d in demand]
    cands = (
        Candidate("a/col", "a", 1, 2.0, capacity_by_bucket_per_s=tuple(round(2.0 * f, 3) for f in burst)),
        Candidate("b/col", "b", 2, 6.5),
        Candidate("a/pre", "a", 1, 5.0, pool="prefill"),
        Candidate("b/pre", "b", 2, 12.0, pool="prefill"),
        Candidate("a/dec", "a", 1, 3.0, pool="decode"),
        Candidate("b/dec", "b", 2, 7.0, pool="decode"),
    )
    return MilpData(tuple(Bucket(d, 1.0) for d in demand), resources, cands, single_config=False,
                    min_replicas=2, spare_replicas=1, incompatible_pairs=(("b/pre", "a/dec"),))  # fmt: skip


@pytest.mark.parametrize("seed", range(3))
def test_bucketwise_path_with_the_new_rules_brackets_the_reference(seed, monkeypatch):
    monkeypatch.setattr(milp, "ATTEMPT_MAX_REPLICAS", 0)  # the bucket-wise answer as it is
    for priced in (False, True):
        data = many_featured(seed, priced)
        fast = solve(data)
        assert fast.stats.method == "bucketwise"
        assert fast.stats.candidates_in_model == 6  # nothing dominated, nothing unpairable
        ref = cbc_reference(data)
        assert ref.status == "OPTIMAL"
        assert plan_ok(data, fast.replicas, fast.reserved) == pytest.approx(fast.objective_usd, abs=1e-6)
        if fast.status == "OPTIMAL":
            assert fast.objective_usd == pytest.approx(ref.objective_usd, abs=1e-6)
        else:
            assert fast.best_bound_usd <= ref.objective_usd + 1e-6 <= fast.objective_usd + 2e-6
        again = solve(data)
        assert (again.objective_usd, again.replicas, again.best_bound_usd) == (
            fast.objective_usd, fast.replicas, fast.best_bound_usd)  # fmt: skip


def test_the_planner_adapter_passes_the_new_data_through():
    # planner.plan.solve.milp_data: off by default (today's problem), each one passed as given.
    from types import SimpleNamespace

    from planner.plan.solve import Forecast, Prices, milp_data

    def point(
        cid: str, tp: int, rate: float, role: str = "colocated", by_bucket: Any = None
    ) -> SimpleNamespace:
        # gpus: a replica's GPUs (TP x PP; no PP here), what the MILP sizes by
        return SimpleNamespace(config=SimpleNamespace(id=cid, gpu="h100", tensor_parallel_size=tp, gpus=tp, role=role),
                               requests_per_s=rate, capacity_by_bucket_per_s=by_bucket)  # fmt: skip

    points = [
        point("tp1", 1, 4.0),
        point("tp2", 2, 9.0),
        point("p", 1, 6.0, "prefill"),
        point("d", 1, 5.0, "decode"),
    ]
    forecast = Forecast((10.0, 5.0), (3600.0, 3600.0))
    prices = [Prices("h100", 1.0, None, None)]
    base = milp_data(points, forecast, prices, 0.0, False, 10.0, None)
    assert (base.min_replicas, base.spare_replicas, base.incompatible_pairs) == (0, 0, ())
    assert all(c.capacity_by_bucket_per_s is None for c in base.candidates)
    points[0] = point("tp1", 1, 4.0, by_bucket=(4.0, 3.0))
    more = milp_data(points, forecast, prices, 0.0, False, 10.0, None,
                     min_replicas=2, spare_replicas=1, incompatible_pairs=[("p", "d")])  # fmt: skip
    assert more.candidates[0].capacity_by_bucket_per_s == (4.0, 3.0)
    assert more.candidates[1].capacity_by_bucket_per_s is None
    assert (more.min_replicas, more.spare_replicas, more.incompatible_pairs) == (2, 1, (("p", "d"),))
    assert solve(more).objective_usd is not None
