"""The sizing MILP (solvers.milp): hand-solved optima, brute force, properties, diagnosis.

Every expected number here is derived in the comments next to it, or by the brute-force
enumeration below (which shares no code with the solver: it tries every replica count in a box and
every reserved count, and checks coverage and caps itself).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from typing import Any

import numpy as np
import pulp
import pytest
from milp_brute import brute_force

from solvers import milp, milp_bucketwise, milp_model, milp_solver
from solvers.milp import (
    Bucket,
    Candidate,
    MilpData,
    MilpResult,
    Resource,
    build,
    prune_dominated,
    solve,
    solve_model,
)
from solvers.milp_buckets import better_elsewhere
from solvers.milp_data import LIMIT_PREFIX, MAX_BUCKETS
from solvers.milp_model import run_model
from solvers.milp_solver import log_bound, read_status

# ---------------------------------------------------------------------------------------------
# Helpers


def one_bucket(demand: float, resources, candidates, **kw) -> MilpData:
    return MilpData((Bucket(demand, 1.0),), tuple(resources), tuple(candidates), **kw)


def coverage(data: MilpData, result: MilpResult) -> list[float]:
    """Per bucket: colocated capacity + min(prefill, decode capacity) in the result."""
    out = []
    for b in range(len(data.buckets)):
        cap = {"colocated": 0.0, "prefill": 0.0, "decode": 0.0}
        for c in data.candidates:
            cap[c.pool] += c.capacity_per_s * result.replicas[c.id][b]
        out.append(cap["colocated"] + min(cap["prefill"], cap["decode"]))
    return out


def usd(value: float | None) -> float:
    assert value is not None
    return value


def same_answer(a: MilpResult, b: MilpResult) -> bool:
    return (a.status, a.objective_usd, a.replicas, a.reserved, a.on_demand, a.selected, a.binding) == (
        b.status,
        b.objective_usd,
        b.replicas,
        b.reserved,
        b.on_demand,
        b.selected,
        b.binding,
    )


# ---------------------------------------------------------------------------------------------
# Tiny problems solved by hand


def test_mix_beats_one_configuration_by_hand():
    # Demand 10/s for 1 h. A: 3/s on 1 unit of "a" at $2/h. B: 7/s on 2 units of "b" at $1.5/h
    # per unit, i.e. $3/h a replica. Mixed, cost 2*xA + 3*xB with 3*xA + 7*xB >= 10:
    #   (xA, xB) = (4,0) $8, (0,2) $6, (1,1) $5, (2,1) $7, (3,0) covers 9 only. Optimum $5 at (1,1).
    # One configuration: A alone needs ceil(10/3) = 4 -> $8; B alone ceil(10/7) = 2 -> $6: B, $6.
    res = (Resource("a", 2.0), Resource("b", 1.5))
    cands = (Candidate("A", "a", 1, 3.0), Candidate("B", "b", 2, 7.0))
    mixed = solve(one_bucket(10.0, res, cands, single_config=False))
    assert mixed.status == "OPTIMAL"
    assert mixed.objective_usd == pytest.approx(5.0)
    assert mixed.replicas == {"A": (1,), "B": (1,)}
    assert mixed.used == {"a": (1,), "b": (2,)}
    assert mixed.selected == ("A", "B")
    # 3 + 7 = 10 exactly: the demand row has no slack; both resources' units rows hold.
    assert mixed.binding == ("demand_b0", "units_a_b0", "units_b_b0")
    single = solve(one_bucket(10.0, res, cands, single_config=True))
    assert single.status == "OPTIMAL"
    assert single.objective_usd == pytest.approx(6.0)
    assert single.replicas == {"A": (0,), "B": (2,)}
    assert single.selected == ("B",)


def test_reserved_units_break_even_by_hand():
    # One resource: on-demand $2.5/h, reserved $1.5/h (billed all 3 hours). Candidate: 1 unit,
    # 1/s. Buckets of 1 h need 4, 1, 1 units. cost(r) = 1.5*3*r + 2.5*sum max(0, g_b - r):
    #   r=0: 2.5*6 = 15; r=1: 4.5 + 2.5*3 = 12; r=2: 9 + 2.5*2 = 14; r=4: 18.
    # A reserved unit pays when busy >= 4.5/2.5 = 1.8 of the 3 hours: only the first one is. r=1, $12.
    data = MilpData(
        tuple(Bucket(d, 1.0) for d in (4.0, 1.0, 1.0)),
        (Resource("gpu", 2.5, reserved_usd_per_hour=1.5),),
        (Candidate("c", "gpu", 1, 1.0),),
    )
    for reduce in (True, False):
        out = solve(data, reduce=reduce)
        assert out.status == "OPTIMAL"
        assert out.objective_usd == pytest.approx(12.0)
        assert out.reserved == {"gpu": 1}
        assert out.on_demand == {"gpu": (3, 0, 0)}
        # bill rate per hour: reserved 1.5 + 3 on-demand * 2.5 = 9, then 1.5, 1.5 (sums to 12).
        assert out.usd_per_hour == pytest.approx((9.0, 1.5, 1.5))


def test_reserved_never_bought_when_it_cannot_pay():
    # Same candidate, demand 3 in one bucket of 1 h out of a 4 h horizon (others idle):
    # a reserved unit costs 1.5*4 = 6 > 2.5 on-demand for its single busy hour. r = 0, $7.5.
    data = MilpData(
        (Bucket(3.0, 1.0), Bucket(0.0, 3.0)),
        (Resource("gpu", 2.5, reserved_usd_per_hour=1.5),),
        (Candidate("c", "gpu", 1, 1.0),),
    )
    out = solve(data)
    assert (out.objective_usd, out.reserved["gpu"]) == (pytest.approx(7.5), 0)


def test_inventory_cap_forces_a_second_type_by_hand():
    # Demand 14/s, 1 h. H: 5/s on 1 unit of "h" ($2/h, at most 2 units). L: 2/s on 1 unit of "l"
    # ($1.5/h, no cap). One configuration: H needs ceil(14/5) = 3 > 2 units (infeasible), so
    # L alone: 7 units, $10.5. Mixed, with h <= 2: h=2 covers 10, L covers 4 with 2 -> 4 + 3 = $7;
    # h=1: L needs ceil(9/2) = 5 -> 2 + 7.5 = $9.5; h=0: $10.5. Optimum $7 with h at its cap.
    res = (Resource("h", 2.0, inventory=2), Resource("l", 1.5))
    cands = (Candidate("H", "h", 1, 5.0), Candidate("L", "l", 1, 2.0))
    single = solve(one_bucket(14.0, res, cands))
    assert (single.status, single.objective_usd, single.selected) == ("OPTIMAL", pytest.approx(10.5), ("L",))
    mixed = solve(one_bucket(14.0, res, cands, single_config=False))
    assert mixed.status == "OPTIMAL"
    assert mixed.objective_usd == pytest.approx(7.0)
    assert mixed.replicas == {"H": (2,), "L": (2,)}
    assert "inventory_h_b0" in mixed.binding
    assert "demand_b0" in mixed.binding  # 10 + 4 = 14: no spare


def test_disaggregated_pair_sized_together_by_hand():
    # Demand 12/s, 1 h, one resource at $1/unit-h. Colocated C: 2/s per unit -> 6 units, $6.
    # Group g: prefill P 10/s and decode D 4/s, 1 unit each: ceil(12/10) + ceil(12/4) = 2 + 3 = 5
    # units, $5. Group g2 has a cheaper decode (D2: 6/s) but no prefill: unusable alone.
    # One configuration: the (P, D) pair, $5 (C alone is $6).
    # Mixed: minimize xC + xP + xD + xD2 with 2 xC + min(10 xP, 4 xD + 6 xD2) >= 12:
    #   xP=2, xD2=2 -> min(20, 12) = 12 with 4 units ($4). Three units never cover 12: with xC=0
    #   the pools need xP >= 2 and decode >= 12 (2 units); xC=1 leaves 2 units for pools worth
    #   at most min(10, 6) = 6 < 10; xC=2 leaves one unit, a lone pool serves nothing; xC=3: 6.
    res = (Resource("u", 1.0),)
    cands = (
        Candidate("C", "u", 1, 2.0),
        Candidate("P", "u", 1, 10.0, pool="prefill", group="g"),
        Candidate("D", "u", 1, 4.0, pool="decode", group="g"),
        Candidate("D2", "u", 1, 6.0, pool="decode", group="g2"),
    )
    single = solve(one_bucket(12.0, res, cands))
    assert single.status == "OPTIMAL"
    assert single.objective_usd == pytest.approx(5.0)
    assert single.selected == ("P", "D")
    assert (single.replicas["P"], single.replicas["D"], single.replicas["C"]) == ((2,), (3,), (0,))
    full = solve(one_bucket(12.0, res, cands), reduce=False)
    assert full.objective_usd == pytest.approx(5.0) and full.selected == ("P", "D")
    mixed = solve(one_bucket(12.0, res, cands, single_config=False))
    assert mixed.status == "OPTIMAL"
    assert mixed.objective_usd == pytest.approx(4.0)
    assert coverage(one_bucket(12.0, res, cands), mixed)[0] >= 12.0


def test_headroom_raises_the_need():
    # 10/s at 4/s per $1 unit: ceil(10/4) = 3 units, $3. With 25% headroom the need is 12.5/s:
    # ceil(12.5/4) = 4 units, $4.
    res = (Resource("u", 1.0),)
    cands = (Candidate("c", "u", 1, 4.0),)
    assert solve(one_bucket(10.0, res, cands)).objective_usd == pytest.approx(3.0)
    assert solve(one_bucket(10.0, res, cands, headroom=0.25)).objective_usd == pytest.approx(4.0)


def test_exact_multiples_do_not_round_up():
    # 0.3 * 3 = 0.8999999999999999 in floating point; a need of 0.9 over a capacity of 0.3 is
    # 3 replicas, not 4 (coverage is judged within a relative 1e-9).
    res = (Resource("u", 1.0),)
    out = solve(one_bucket(0.9, res, (Candidate("c", "u", 1, 0.3),)))
    assert out.replicas["c"] == (3,)


# ---------------------------------------------------------------------------------------------
# Infeasibility and its diagnosis


def test_inventory_infeasible_names_the_cap_and_the_numbers():
    # One resource capped at 8 units; 1/s per unit. Bucket 3 needs 12/s -> 12 units > 8.
    # Buckets 0-2 (4, 8, 6) fit. The diagnosis: demand_b3 needs 12/s, at most 8/s can be served;
    # inventory_h200-sxm_b3 needs 12 units, cap 8.
    data = MilpData(
        tuple(Bucket(d, 1.0) for d in (4.0, 8.0, 6.0, 12.0)),
        (Resource("h200-sxm", 3.0, reserved_usd_per_hour=2.0, inventory=8),),
        (Candidate("h200/tp1", "h200-sxm", 1, 1.0),),
    )
    out = solve(data)
    assert out.status == "INFEASIBLE"
    assert out.objective_usd is None
    by_name = {v.constraint: v for v in out.infeasibility}
    assert set(by_name) == {"demand_b3", "inventory_h200-sxm_b3"}
    assert (by_name["demand_b3"].needed, by_name["demand_b3"].limit, by_name["demand_b3"].unit) == (
        pytest.approx(12.0),
        pytest.approx(8.0),
        "per_s",
    )
    inv = by_name["inventory_h200-sxm_b3"]
    assert (inv.needed, inv.limit, inv.unit) == (12.0, 8.0, "units")
    assert solve(data, reduce=False).status == "INFEASIBLE"


def test_mixed_infeasible_reports_the_most_the_caps_serve():
    # Two capped resources: "a" (3 units, 2/s each, in replicas of 1) and "b" (4 units, 5/s per
    # 2-unit replica). At most 3*2 + 2*5 = 16/s. Demand 20/s in bucket 1 (bucket 0: 10/s fits).
    # Alone, "a" would need ceil(20/2) = 10 units (cap 3), "b" 2*ceil(20/5) = 8 units (cap 4).
    data = MilpData(
        (Bucket(10.0, 1.0), Bucket(20.0, 1.0)),
        (Resource("a", 1.0, inventory=3), Resource("b", 1.0, inventory=4)),
        (Candidate("A", "a", 1, 2.0), Candidate("B", "b", 2, 5.0)),
        single_config=False,
    )
    out = solve(data)
    assert out.status == "INFEASIBLE"
    by_name = {v.constraint: v for v in out.infeasibility}
    assert set(by_name) == {"demand_b1", "inventory_a_b1", "inventory_b_b1"}
    assert by_name["demand_b1"].limit == pytest.approx(16.0)
    assert by_name["inventory_a_b1"].needed == 10.0
    assert by_name["inventory_b_b1"].needed == 8.0


def test_no_complete_configuration_is_one_config():
    # Only a prefill candidate: one configuration cannot be formed at all.
    data = one_bucket(
        5.0, (Resource("u", 1.0),), (Candidate("P", "u", 1, 10.0, pool="prefill"),), single_config=True
    )
    out = solve(data)
    assert out.status == "INFEASIBLE"
    assert [v.constraint for v in out.infeasibility] == ["one_config"]
    mixed = solve(replace(data, single_config=False))
    assert mixed.status == "INFEASIBLE"
    assert [v.constraint for v in mixed.infeasibility] == ["decode_demand_b0"]


# ---------------------------------------------------------------------------------------------
# Brute force on random small problems


def random_problem(rng: np.random.Generator, single_config: bool, pools_forced: bool = False) -> MilpData:
    n_t = int(rng.integers(1, 3))
    resources = []
    for t in range(n_t):
        od = float(rng.integers(4, 21)) / 4
        reserved = None if rng.random() < 0.3 else round(od * float(rng.uniform(0.3, 0.9)), 2)
        cap = None if rng.random() < 0.5 else int(rng.integers(2, 9))
        resources.append(Resource(f"t{t}", od, reserved, cap))
    pools = ["colocated", "prefill", "decode"]
    cands = []
    for k in range(int(rng.integers(2, 4))):
        pool = pools[int(rng.integers(0, 3))] if rng.random() < 0.6 else "colocated"
        if pools_forced:  # a prefill and a decode candidate always, a third of any pool
            pool = ("prefill", "decode", pools[int(rng.integers(0, 3))])[k]
        cands.append(
            Candidate(
                f"c{k}",
                f"t{int(rng.integers(0, n_t))}",
                int(rng.integers(1, 3)),
                float(rng.integers(10, 61)) / 10,
                pool,
                f"g{int(rng.integers(0, 2))}",
            )
        )
    buckets = [
        Bucket(float(rng.integers(0, 21)) / 2, float(rng.integers(1, 7)) / 2)
        for _ in range(int(rng.integers(1, 3)))
    ]
    headroom = 0.1 if rng.random() < 0.5 else 0.0
    return MilpData(
        tuple(buckets), tuple(resources), tuple(cands), headroom=headroom, single_config=single_config
    )


@pytest.mark.parametrize(
    ("seed", "pools_forced"), [(s, False) for s in range(12)] + [(s, True) for s in range(6)]
)
def test_matches_brute_force(seed, pools_forced):
    rng = np.random.default_rng(seed + 1000 * pools_forced)
    for single in (True, False):
        data = random_problem(rng, single, pools_forced)
        expected = brute_force(data)
        for reduce in (True, False):
            out = solve(data, reduce=reduce)
            if expected is None:
                assert out.status == "INFEASIBLE", (seed, single, reduce)
            else:
                assert out.status == "OPTIMAL", (seed, single, reduce)
                assert out.objective_usd == pytest.approx(expected, abs=1e-6), (seed, single, reduce)
                check_solution(data, out)


def check_solution(data: MilpData, out: MilpResult) -> None:
    """Properties every answer has: buckets covered with headroom, caps kept, the bill adds up."""
    for b, have in enumerate(coverage(data, out)):
        assert have >= data.buckets[b].demand_per_s * (1 + data.headroom) * (1 - 1e-9)
    for res in data.resources:
        if res.inventory is not None:
            assert max(out.used[res.name]) <= res.inventory
            assert out.reserved[res.name] <= res.inventory
        for b in range(len(data.buckets)):
            assert out.on_demand[res.name][b] == max(0, out.used[res.name][b] - out.reserved[res.name])
    bill = sum(rate * b.hours for rate, b in zip(out.usd_per_hour, data.buckets, strict=True))
    assert out.objective_usd == pytest.approx(bill)
    if data.single_config:
        pools = sorted(c.pool for c in data.candidates if c.id in out.selected)
        assert pools in (["colocated"], ["decode", "prefill"])


@pytest.mark.parametrize("seed", range(6))
def test_more_demand_never_costs_less(seed):
    rng = np.random.default_rng(100 + seed)
    for single in (True, False):
        data = random_problem(rng, single)
        base = solve(data)
        more = solve(
            replace(
                data, buckets=tuple(replace(b, demand_per_s=b.demand_per_s * 1.3 + 0.5) for b in data.buckets)
            )
        )
        if base.status == "INFEASIBLE":
            assert more.status == "INFEASIBLE"
        elif more.status == "OPTIMAL":
            assert usd(more.objective_usd) >= usd(base.objective_usd) - 1e-9


# ---------------------------------------------------------------------------------------------
# Mixed over many buckets (solved bucket-wise): the bound and the answer bracket the optimum


def separable_optimum(data: MilpData) -> float | None:
    """Exact optimum of a mixed problem by enumeration that uses its structure: for each vector
    of reserved units, every bucket independently takes its cheapest covering replica counts in a
    box (0..ceil(need/c)+1 each); the best vector wins. None if some bucket cannot be covered."""
    cands, res = data.candidates, data.resources
    need = [b.demand_per_s * (1 + data.headroom) for b in data.buckets]
    per_bucket = []  # (used units per resource, valid) per bucket, over all combos
    for n in need:
        combos = np.array(
            list(itertools.product(*[range(math.ceil(n / c.capacity_per_s) + 2) for c in cands]))
        )
        cap = {p: np.zeros(len(combos)) for p in ("colocated", "prefill", "decode")}
        for k, c in enumerate(cands):
            cap[c.pool] += c.capacity_per_s * combos[:, k]
        valid = cap["colocated"] + np.minimum(cap["prefill"], cap["decode"]) >= n * (1 - 1e-9)
        used = np.array(
            [
                sum(c.units_per_replica * combos[:, k] for k, c in enumerate(cands) if c.resource == r.name)
                + 0 * combos[:, 0]
                for r in res
            ]
        )
        for t, r in enumerate(res):
            if r.inventory is not None:
                valid &= used[t] <= r.inventory
        if not valid.any():
            return None
        per_bucket.append(used[:, valid])
    peak = [max(int(u[t].max()) for u in per_bucket) for t in range(len(res))]
    ranges = [
        range(peak[t] + 1) if r.reserved_usd_per_hour is not None else range(1) for t, r in enumerate(res)
    ]
    od = np.array([r.on_demand_usd_per_hour for r in res])
    best = math.inf
    for rv in itertools.product(*ranges):
        rv_arr = np.array(rv)
        cost = sum((r.reserved_usd_per_hour or 0.0) * data.total_hours * rv[t] for t, r in enumerate(res))
        for used, bucket in zip(per_bucket, data.buckets, strict=True):
            cost += bucket.hours * float((od @ np.maximum(used - rv_arr[:, None], 0)).min())
        best = min(best, cost)
    return best


def random_many_buckets(rng: np.random.Generator, priced: bool) -> MilpData:
    resources = [
        Resource(
            f"t{t}",
            1.0 + 1.5 * t,
            round((0.5 + 0.2 * t) * (1.0 + 1.5 * t), 2) if priced else None,
            None if t == 0 else 6,
        )
        for t in range(2)
    ]
    resources.append(Resource("t2", 1.2))  # no cap, no reserved price: its "slow" replica is
    # beaten in every bucket by "small" (more capacity for $1 < $1.2), see solvers.milp_buckets.better_elsewhere
    cands = [
        Candidate("slow", "t2", 1, round(float(rng.uniform(0.5, 0.75)), 2)),
        Candidate("small", "t0", 1, round(float(rng.uniform(0.8, 1.5)), 2)),
        Candidate("big", "t1", 2, round(float(rng.uniform(3.0, 5.0)), 2)),
        Candidate("pre", "t1", 1, round(float(rng.uniform(3.0, 6.0)), 2), pool="prefill"),
        Candidate("dec", "t0", 1, round(float(rng.uniform(1.5, 3.0)), 2), pool="decode"),
    ]
    demand = [round(float(rng.uniform(0.5, 6.0)), 2) + 0.001 * b for b in range(12)]  # all distinct
    return MilpData(
        tuple(Bucket(d, 1.0) for d in demand), tuple(resources), tuple(cands), single_config=False
    )


@pytest.mark.parametrize("seed", range(3))
def test_bucketwise_bound_and_answer_bracket_the_optimum(seed, monkeypatch):
    monkeypatch.setattr(milp, "ATTEMPT_MAX_REPLICAS", 0)  # no attempt as one model first
    rng = np.random.default_rng(50 + seed)
    for priced in (False, True):
        data = random_many_buckets(rng, priced)
        exact = separable_optimum(data)
        out = solve(data)
        assert out.stats.method == "bucketwise"
        assert exact is not None
        check_solution(data, out)
        if not priced:  # no reserved units to guess: buckets are independent, the answer exact
            assert out.status == "OPTIMAL"
            assert out.objective_usd == pytest.approx(exact, abs=1e-6)
        else:
            assert usd(out.best_bound_usd) <= exact + 1e-6 <= usd(out.objective_usd) + 2e-6
            if out.status == "FEASIBLE":
                objective, bound = usd(out.objective_usd), usd(out.best_bound_usd)
                assert out.gap == pytest.approx((objective - bound) / objective)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("box", [True, False], ids=["reserved-box", "one-model"])
def test_few_replicas_are_proved_as_one_model(seed, box, monkeypatch):
    # The same instances need at most 8 replicas of the largest candidate in any bucket. Without
    # reserved prices the bucket-wise answer is exact. With them, the few reserved vectors a
    # cheaper plan could hold are each sized and proved (milp_bucketwise._box_bound); without
    # that box (RESERVED_BOX 0) a gap is left, and the whole model, warm started from the answer
    # (solvers.milp._attempt), proves the brute-force optimum within ATTEMPT_NODES nodes.
    if not box:
        monkeypatch.setattr(milp_bucketwise, "RESERVED_BOX", 0)
    rng = np.random.default_rng(50 + seed)
    for priced in (False, True):
        data = random_many_buckets(rng, priced)
        assert milp._few_replicas(data)
        out = solve(data)
        assert out.stats.method == ("milp" if priced and not box else "bucketwise")
        if priced and box:
            assert out.stats.bound_source == "reserved_box"
        assert out.status == "OPTIMAL"
        check_solution(data, out)
        assert out.objective_usd == pytest.approx(separable_optimum(data), abs=1e-6)
        assert same_answer(out, solve(data))


def test_an_attempt_cut_by_time_is_discarded(monkeypatch):
    # A time-limited attempt would make the plan depend on the machine's speed: run_model says
    # when the solver stopped on time, and solve() then keeps the bucket-wise answer as if it
    # had not tried.
    rng = np.random.default_rng(50)
    random_many_buckets(rng, False)
    data = random_many_buckets(rng, True)  # seed 50's priced instance: the attempt proves it
    monkeypatch.setattr(milp_bucketwise, "RESERVED_BOX", 0)  # else the bucket-wise path proves it
    real_run = milp_model.run_model  # solve() reads it there when it runs a model
    attempts = []

    def on_time(*a, **k):
        attempts.append(k.get("max_nodes"))
        return replace(real_run(*a, **k), status="FEASIBLE", timed_out=True)

    monkeypatch.setattr(milp_model, "run_model", on_time)
    out = solve(data)
    assert attempts == [milp.ATTEMPT_NODES]
    assert out.stats.method == "bucketwise"
    assert out.status == "FEASIBLE"
    monkeypatch.setattr(milp_model, "run_model", real_run)
    monkeypatch.setattr(milp, "ATTEMPT_MAX_REPLICAS", 0)  # no attempt at all: the same answer
    assert same_answer(out, solve(data))


def random_bucket_models(seed: int) -> list[tuple[MilpData, list[int]]]:
    """Seeded one-bucket problems with reserved units fixed (what the bucket-wise path solves):
    two or three resources, colocated and split pools, caps, 1-40 replicas."""
    rng = np.random.default_rng(900 + seed)
    out = []
    for _ in range(8):
        n_t = int(rng.integers(2, 4))
        res = tuple(
            Resource(
                f"t{t}", round(float(rng.uniform(1, 5)), 2), None, None if t else int(rng.integers(4, 20))
            )
            for t in range(n_t)
        )
        cands = tuple(
            Candidate(f"c{k}", f"t{int(rng.integers(n_t))}", int(rng.choice([1, 2, 4])),
                      round(float(rng.uniform(0.5, 8.0)), 3), str(rng.choice(["colocated", "prefill", "decode"])))
            for k in range(int(rng.integers(3, 8)))
        )  # fmt: skip
        data = one_bucket(round(float(rng.uniform(1.0, 40.0)), 2), res, cands, single_config=False)
        out.append((data, [int(rng.integers(0, 6)) for _ in range(n_t)]))
    return out


@pytest.mark.parametrize("seed", range(3))
def test_highs_finds_the_cbc_optimum_of_each_bucket(seed, monkeypatch):
    # The bucket-wise path solves its one-bucket models with HiGHS through PuLP; CBC (the
    # fallback, solvers.milp_solver.SOLVER = "cbc") on the same PuLP model is the reference.
    assert milp_solver.SOLVER == "highs"
    for data, reserved in random_bucket_models(seed):
        highs = run_model(build(data, _reserved=reserved), 10.0)
        monkeypatch.setattr(milp_solver, "SOLVER", "cbc")
        cbc = run_model(build(data, _reserved=reserved), 10.0)
        monkeypatch.setattr(milp_solver, "SOLVER", "highs")
        assert highs.status == cbc.status
        if cbc.status != "OPTIMAL":
            assert cbc.status == "INFEASIBLE"
            continue
        assert highs.x is not None and cbc.x is not None
        costs = []
        for raw in (highs, cbc):
            assert raw.x is not None
            xs = raw.x
            caps = {p: sum(c.capacity_per_s * xs[k, 0] for k, c in enumerate(data.candidates) if c.pool == p)
                    for p in ("colocated", "prefill", "decode")}  # fmt: skip
            assert caps["colocated"] + min(caps["prefill"], caps["decode"]) >= data.need_per_s(0) * (1 - 1e-9)
            bill = 0.0
            for t, r in enumerate(data.resources):
                used = sum(c.units_per_replica * xs[k, 0] for k, c in enumerate(data.candidates)
                           if c.resource == r.name)  # fmt: skip
                assert r.inventory is None or max(used, reserved[t]) <= r.inventory
                bill += r.on_demand_usd_per_hour * max(0, used - reserved[t])
            costs.append(bill)
        assert costs[0] == pytest.approx(costs[1], abs=1e-9)


# ---------------------------------------------------------------------------------------------
# A bigger, realistic-shaped problem: reductions vs the full model, time limit, determinism


def fleet(n_types: int, n_buckets: int, single: bool, time_limit_s: float = 30.0) -> MilpData:
    """Resource types x TP {1, 2, 4} x 2 budgets x 3 pools; a daily-cycle demand; seeded."""
    rng = np.random.default_rng(7)
    resources, cands = [], []
    for t in range(n_types):
        od = 1.0 + 1.2 * t
        resources.append(Resource(f"gpu{t}", od, round(0.6 * od, 2), 24 if t == n_types - 1 else None))
        for tp in (1, 2, 4):
            for j, bf in enumerate((0.8, 1.0)):
                for pool, pf in (("colocated", 1.0), ("prefill", 1.7), ("decode", 1.35)):
                    cap = round((1.0 + 1.1 * t) * tp**0.85 * bf * pf * float(rng.uniform(0.9, 1.1)), 3)
                    cands.append(Candidate(f"gpu{t}/tp{tp}/b{j}/{pool}", f"gpu{t}", tp, cap, pool, f"gpu{t}"))
    demand = [
        round(6 + 20 * (0.5 - 0.5 * math.cos(2 * math.pi * h / 24)) + float(rng.uniform(0, 2)), 2)
        for h in range(n_buckets)
    ]
    return MilpData(
        tuple(Bucket(d, 1.0) for d in demand),
        tuple(resources),
        tuple(cands),
        headroom=0.1,
        single_config=single,
        time_limit_s=time_limit_s,
    )


def _fast_and_full(data: MilpData) -> tuple[Any, Any]:
    """The solve with every reduction and the full model's, both OPTIMAL at the same cost."""
    fast = solve(data)
    full = solve(data, reduce=False)
    assert fast.status == full.status == "OPTIMAL"
    assert fast.objective_usd == pytest.approx(full.objective_usd, abs=1e-6)
    return fast, full


def test_fast_path_agrees_with_the_full_model():
    data = fleet(3, 24, single=True)
    fast, full = _fast_and_full(data)
    assert fast.stats.candidates_in_model < full.stats.candidates_in_model
    check_solution(data, fast)
    check_solution(data, full)


def test_mixed_reductions_agree_with_the_full_model():
    data = fleet(2, 4, single=False)
    fast, _ = _fast_and_full(data)
    single = solve(replace(data, single_config=True))
    assert usd(fast.objective_usd) <= usd(single.objective_usd) + 1e-9  # a mix can always be one config


def test_equal_buckets_merge_without_changing_the_answer():
    # A week of a repeated day: 24 distinct demands over 168 buckets.
    day = fleet(3, 24, single=True)
    week = replace(day, buckets=day.buckets * 7)
    merged = solve(week)
    assert merged.stats.buckets_in_model == 24
    assert merged.objective_usd == pytest.approx(7 * usd(solve(day).objective_usd))
    assert merged.replicas == {k: v * 7 for k, v in solve(day).replicas.items()}


def test_time_limit_is_honoured_with_a_gap():
    # Mixed, 72 buckets, reserved prices: solved bucket-wise, and not provable within 1 s (the
    # reserved units are chosen from the LP, the gap is to the LP bound).
    data = fleet(4, 72, single=False, time_limit_s=1.0)
    out = solve(data)
    assert out.stats.method == "bucketwise"
    assert out.status == "FEASIBLE"
    assert out.solve_time_s < 1.0 + 5.0
    check_solution(data, out)
    assert out.gap is not None and out.gap > 0
    objective, bound = usd(out.objective_usd), usd(out.best_bound_usd)
    assert bound <= objective
    assert out.gap == pytest.approx((objective - bound) / objective)
    assert out.stats.bound_source == "lp_relaxation"


def test_a_monolithic_time_limit_reads_feasible_with_the_solver_bound():
    # One model, 8 buckets, mixed: HiGHS does not close the gap in 0.5 s (here: 0.26% left);
    # the answer is its best solution with its best bound, and the gap between them.
    data = fleet(4, 8, single=False, time_limit_s=0.5)
    out = solve(data)
    assert out.stats.method == "milp"
    assert out.status in ("FEASIBLE", "OPTIMAL")
    check_solution(data, out)
    if out.status == "FEASIBLE":
        assert out.stats.bound_source == "solver"
        objective, bound = usd(out.objective_usd), usd(out.best_bound_usd)
        assert bound < objective
        assert out.gap == pytest.approx((objective - bound) / objective)


def test_better_elsewhere_only_for_uncapped_rivals_and_unreserved_losers():
    res = (
        Resource("cheap", 1.0),
        Resource("dear", 3.0, reserved_usd_per_hour=2.0),
        Resource("capped", 0.5, inventory=4),
    )
    cands = (
        Candidate("A", "cheap", 1, 2.0),  # $1 a replica for 2/s
        Candidate("B", "dear", 1, 1.0),  # $3 for 1/s: beaten by A unless "dear" holds reserved units
        Candidate("C", "capped", 1, 3.0),  # beats A on paper, but its resource is capped
        Candidate("P", "dear", 1, 1.0, pool="prefill"),  # another pool: never compared with A
    )
    data = one_bucket(1.0, res, cands, single_config=False)
    assert better_elsewhere(data, np.array([0, 0, 0])) == {1: 0}
    assert better_elsewhere(data, np.array([0, 2, 0])) == {}


def test_same_data_same_answer():
    data = fleet(3, 24, single=True)
    assert same_answer(solve(data), solve(data))
    mixed = fleet(2, 4, single=False)
    assert same_answer(solve(mixed), solve(mixed))


# ---------------------------------------------------------------------------------------------
# Pieces: pruning, the built model, CBC's output readers, validation


def test_prune_keeps_small_replicas_and_drops_dominated():
    cands = (
        Candidate("tp1", "h", 1, 3.0),  # worse per unit than tp2, but a smaller step: kept
        Candidate("tp2", "h", 2, 8.0),
        Candidate("tp2-slow", "h", 2, 7.0),  # same units, less capacity: pruned
        Candidate("tp4", "h", 4, 7.5),  # more units, less capacity than tp2: pruned
        Candidate("tp2-copy", "h", 2, 8.0),  # identical to tp2: the first is kept
        Candidate("other", "l", 4, 7.5),  # another resource: never compared
        Candidate("pre", "h", 4, 2.0, pool="prefill", group="g1"),
        Candidate("pre2", "h", 4, 1.0, pool="prefill", group="g2"),  # another group: kept...
    )
    kept, n = prune_dominated(cands)
    assert [c.id for c in kept] == ["tp1", "tp2", "other", "pre", "pre2"]
    assert n == 3
    kept, n = prune_dominated(cands, respect_groups=False)  # ...unless groups do not matter
    assert [c.id for c in kept] == ["tp1", "tp2", "other", "pre"]
    assert n == 4


def test_every_constraint_is_named():
    data = MilpData(
        (Bucket(4.0, 1.0), Bucket(2.0, 2.0)),
        (Resource("h100-sxm", 4.0, reserved_usd_per_hour=2.5, inventory=16),),
        (
            Candidate("col", "h100-sxm", 1, 2.0),
            Candidate("p", "h100-sxm", 1, 5.0, pool="prefill", group="g"),
            Candidate("d", "h100-sxm", 1, 3.0, pool="decode", group="g"),
        ),
    )
    model = build(data)
    names = set(model.constraints)
    for b in (0, 1):
        assert {
            f"demand_b{b}",
            f"colocated_demand_b{b}",
            f"prefill_demand_b{b}",
            f"decode_demand_b{b}",
            f"units_h100-sxm_b{b}",
            f"inventory_h100-sxm_b{b}",
            f"select_col_b{b}",
            f"select_p_b{b}",
            f"select_d_b{b}",
        } <= names
    assert {"one_config", "pair_g"} <= names
    assert len(names) == len(model.problem.constraints())
    out = solve_model(model)
    assert out.status == "OPTIMAL"
    # col: 2 + 1 replicas; pair: 1+2 (b0) and 1+1 (b1) units. Reserved $2.5*3 h = $7.5 vs
    # on-demand: for col, g = (2, 1): r=0: 4*(2*1 + 1*2) = 16; r=1: 7.5 + 4*1 = 11.5; r=2: 15.
    # Pair g = (3, 2): r=0: 4*(3 + 4) = 28; r=2: 15 + 4*1 = 19; r=3: 22.5. Col, $11.5.
    assert out.objective_usd == pytest.approx(11.5)
    assert out.selected == ("col",)


def test_cbc_log_bound_and_status_readers():
    # Lines as CBC 2.10 prints them (see the PuLP 3.3 runs noted in solvers/milp_model.py).
    partial = (
        "Cbc0010I After 0 nodes, 1 on tree, 14.026 best solution, best possible 0.024682053 (0.43 seconds)\n"
        "Cbc0005I Partial search - best objective 14.026 (best possible 0.024682053), took 5533 iterations\n"
    )
    assert log_bound(partial, 14.026) == pytest.approx(0.024682053)
    assert log_bound(
        "Cbc0011I Exiting as integer gap of 9.6076679 less than 1e-10 or 20%", 340.4
    ) == pytest.approx(340.4 - 9.6076679)
    assert log_bound("Cbc0005I Partial search - best objective 1e+50 (best possible 1e+50)", 0.0) is None
    # A search run to the end: its progress lines' "best possible" is not the final bound.
    done = "Cbc0010I After 0 nodes, 1 on tree, 25.2 best solution, best possible 25.066252 (0.06 seconds)\n"
    assert (
        log_bound(
            done + "Cbc0001I Search completed - best objective 25.2\nResult - Optimal solution found", 25.2
        )
        is None
    )

    class Stub:
        def __init__(self, status, sol):
            self.status, self.sol_status = status, sol

    assert read_status(Stub(pulp.LpStatusOptimal, pulp.LpSolutionOptimal)) == "OPTIMAL"
    assert read_status(Stub(pulp.LpStatusOptimal, pulp.LpSolutionIntegerFeasible)) == "FEASIBLE"
    assert read_status(Stub(pulp.LpStatusNotSolved, pulp.LpSolutionNoSolutionFound)) == "NO_SOLUTION"
    assert read_status(Stub(pulp.LpStatusInfeasible, pulp.LpSolutionInfeasible)) == "INFEASIBLE"
    with pytest.raises(RuntimeError):
        read_status(Stub(pulp.LpStatusUndefined, pulp.LpSolutionInfeasible))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda d: replace(d, buckets=(Bucket(float("nan"), 1.0),)),
            "buckets[0].demand_per_s must be finite",
        ),
        (lambda d: replace(d, buckets=(Bucket(1.0, 0.0),)), "buckets[0].hours must be > 0"),
        (lambda d: replace(d, headroom=-0.1), "headroom must be >= 0"),
        (lambda d: replace(d, candidates=(Candidate("x", "nope", 1, 1.0),)), "candidates[0].resource 'nope'"),
        (lambda d: replace(d, candidates=d.candidates * 2), "candidates[1].id 'c' repeats candidates[0]"),
        (lambda d: replace(d, candidates=(Candidate("x", "u", 1, 1.0, pool="both"),)), "candidates[0].pool"),
        (lambda d: replace(d, candidates=(Candidate("x", "u", 0, 1.0),)), "candidates[0].units_per_replica"),
        (lambda d: replace(d, resources=(Resource("u", -1.0),)), "resources[0].on_demand_usd_per_hour"),
        (lambda d: replace(d, resources=(Resource("u", 1.0, inventory=-1),)), "resources[0].inventory"),
        (lambda d: replace(d, time_limit_s=0.0), "time_limit_s must be > 0"),
        (
            lambda d: replace(d, buckets=(Bucket(1.0, 1.0),) * (MAX_BUCKETS + 1)),
            f"buckets count {LIMIT_PREFIX}",
        ),
        (
            lambda d: replace(d, candidates=(Candidate("x", "u", 1, 1e-6),)),
            f"replicas per bucket {LIMIT_PREFIX}",
        ),
    ],
)
def test_bad_input_names_the_field(change, message):
    good = one_bucket(1.0, (Resource("u", 1.0),), (Candidate("c", "u", 1, 1.0),))
    with pytest.raises(ValueError) as err:
        change(good)
    assert message in str(err.value)
