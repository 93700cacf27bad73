"""`--verify` (planner/plan/verify.py): every part of the plan simulated at its hardest bucket, the
front end's cost included exactly as `capplan simulate` includes it, bounded and deterministic;
and the simulator pieces it needs (a weighted draw per request, pools of several configurations).
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from planner import api
from planner.deployment import Deployment
from planner.errors import InvalidInput
from planner.plan import plan
from planner.plan import verify as V
from planner.schema.inputs import SimulateRequest, build_workload
from planner.schema.plan_report import PlanReport
from planner.schema.plan_request import parse_plan_request
from planner.simulate.disagg import PoolPart, simulate_disaggregated, simulate_pools
from planner.simulate.router import Assigned, draw_parts
from planner.simulate.run import engine_config, kv_transfer, workload_requests
from planner.workload import Arrivals
from tests.plan_helpers import MIXED_WORKLOAD

ROOT = Path(__file__).resolve().parents[1]
CHAT = ROOT / "examples" / "chat.yaml"
WEEK = ROOT / "examples" / "week-forecast.yaml"


@pytest.fixture(scope="module")
def chat() -> PlanReport:
    return api.plan(yaml.safe_load(CHAT.read_text()), base_dir=CHAT.parent, workers=1, verify=True)


def test_the_front_end_is_counted_as_capplan_simulate_counts_it(chat: PlanReport) -> None:
    """The chat plan's one group, at its one bucket, is `capplan simulate` of its deployment at
    that rate with the same seed and count: the same figures to the bit, front end included
    (the profile's request_overhead_s: 52 ms on the H100 profile the plan uses)."""
    sim = chat.simulated
    assert sim is not None
    (g,) = sim.groups
    (dep,) = chat.deployments
    assert g.bucket == 0 and g.requests == 20_000 == V.part_size(40.0)  # 10 min at 40/s, capped
    req = parse_plan_request(yaml.safe_load(CHAT.read_text()))
    workload = build_workload(req.workload)
    deployment = Deployment(
        model=chat.model,
        gpu=dep.gpu,
        tp=dep.tensor_parallel_size,
        replicas=g.replicas[0],
        max_num_seqs=dep.max_num_seqs,
        max_num_batched_tokens=dep.max_num_batched_tokens,
        long_prefill_token_threshold=dep.long_prefill_token_threshold,
        gpu_memory_utilization=dep.gpu_memory_utilization,
    )
    rep = api.simulate(
        SimulateRequest(
            deployment=deployment,
            workload=workload.model_copy(
                update={"arrivals": Arrivals(requests_per_s=g.bucket_requests_per_s, burstiness=1.0)}
            ),
            requests=g.requests,
            seed=sim.seed,
            series=False,
        )
    )
    assert (g.ttft_p50_ms, g.ttft_p90_ms, g.ttft_p99_ms) == (
        rep.ttft_p50_ms,
        rep.ttft_p90_ms,
        rep.ttft_p99_ms,
    )
    assert (g.itl_p50_ms, g.itl_p90_ms, g.itl_p99_ms) == (rep.itl_p50_ms, rep.itl_p90_ms, rep.itl_p99_ms)
    resolved = Deployment(model=chat.model, gpu=dep.gpu).resolve()
    overhead_ms = resolved.replica.profile.request_overhead_s * 1e3
    assert overhead_ms > 0
    # without the front end every TTFT is that much shorter: the p99 moves by exactly it
    cfg = deployment.resolve()
    from planner.simulate.colocated import simulate

    reqs = workload_requests(
        workload.model_copy(update={"arrivals": Arrivals(requests_per_s=40.0, burstiness=1.0)}), 0, g.requests
    )
    bare = simulate(
        reqs, cfg.replica, engine_config(cfg, workload.prefix_cache_hit_fraction), replicas=g.replicas[0]
    )
    assert g.ttft_p99_ms == pytest.approx(bare.ttft.p99_s * 1e3 + overhead_ms, rel=1e-12)
    assert sim.slo_met == (g.ttft_p99_ms <= 500 and g.itl_p99_ms is not None and g.itl_p99_ms <= 50)


def test_a_bucket_past_the_peak_is_checked_where_it_presses_harder(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The week forecast, Poisson: one replica at night carries more per replica than the
    peak's; `--verify` checks every part at the bucket of its highest per-replica rate (Poisson:
    the latency model's p99s rise with the rate), and says which."""
    rep = api.plan(yaml.safe_load(WEEK.read_text()), base_dir=WEEK.parent, workers=1, verify=True)
    sim = rep.simulated
    assert sim is not None and rep.workload.burstiness == 1.0
    (g,) = sim.groups
    (dep,) = rep.deployments
    per_replica = [
        b.requests_per_s / n if n else 0.0 for b, n in zip(rep.buckets, dep.replicas_by_bucket, strict=True)
    ]
    top = max(per_replica)
    assert per_replica[g.bucket] == top and g.bucket != rep.workload.peak_bucket
    assert per_replica[rep.workload.peak_bucket] < top
    assert g.bucket == min(b for b, r in enumerate(per_replica) if r == top)  # ties: the earliest
    assert g.replicas == [dep.replicas_by_bucket[g.bucket]]
    assert g.bucket_requests_per_s == rep.buckets[g.bucket].requests_per_s == g.requests_per_s


def _capture(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """verify's arguments when a plan runs (the search context, the chosen points)."""
    seen: dict[str, Any] = {}
    real = V.verify

    def spy(ctx: Any, workload: Any, chosen: Any, replicas: Any, rates: Any) -> Any:
        seen.update(ctx=ctx, workload=workload, chosen=chosen)
        return real(ctx, workload, chosen, replicas, rates)

    monkeypatch.setattr(V, "verify", spy)
    return seen


def test_bursts_make_the_bucket_with_fewer_replicas_the_hardest(monkeypatch: pytest.MonkeyPatch) -> None:
    """CV² 20 arrivals, 20 req/s on 3 replicas (6.67 each, a third of the bursts each) or 6 req/s
    on 1 (6.0, every burst): the latency model and the simulator agree the lone replica is
    pressed harder, at the lower per-replica rate, and it is the bucket `--verify` checks."""
    wl = copy.deepcopy(MIXED_WORKLOAD)
    wl["arrivals"] = {
        "buckets": [{"duration_s": 3600, "requests_per_s": r} for r in (20.0, 6.0)],
        "burstiness": 0.05,
    }
    seen = _capture(monkeypatch)
    req = {
        "model": "Qwen/Qwen3-8B",
        "slo": {"ttft_p99_ms": 1000, "itl_p99_ms": 50},
        "workload": wl,
        "candidates": {"gpus": ["h100-sxm"], "tensor_parallel_sizes": [1], "disaggregation": "never"},
    }
    plan(req, workers=1, verify=True)
    ctx, workload, chosen = seen["ctx"], seen["workload"], seen["chosen"]
    (point,) = chosen
    replicas = {point.config.id: [3, 1]}
    checks = [
        c for b, r in enumerate((20.0, 6.0)) for c in V.checks_at(chosen, V.groups_of(chosen), replicas, r, b)
    ]
    assert all(c is not None for c in checks)
    judged = [V.judge(ctx, c) for c in checks if c is not None]
    rates = [j.check.members[0].requests_per_s_per_replica for j in judged]
    assert rates[0] > rates[1]
    assert judged[1].fraction > judged[0].fraction
    (hardest,) = V.hardest_checks(ctx, chosen, replicas, (20.0, 6.0))
    assert hardest.check.bucket == 1
    sims = [V.simulate_check(ctx, workload, j) for j in judged]
    assert sims[1].ttft_p99_ms is not None and sims[0].ttft_p99_ms is not None
    assert sims[1].ttft_p99_ms > sims[0].ttft_p99_ms


def test_verify_is_deterministic_and_bounded(chat: PlanReport) -> None:
    again = api.plan(yaml.safe_load(CHAT.read_text()), base_dir=CHAT.parent, workers=2, verify=True)
    assert again.simulated is not None and chat.simulated is not None
    assert json.dumps(again.simulated.model_dump(mode="json")) == json.dumps(
        chat.simulated.model_dump(mode="json")
    )
    assert [V.part_size(r) for r in (0.001, 3.0, 40.0, 1e6)] == [
        V.MIN_REQUESTS,
        2_000,
        20_000,
        V.MAX_REQUESTS,
    ]


def test_slo_met_reads_each_target() -> None:
    ctx = type("Ctx", (), {"ttft_p99_s": 0.5, "itl_p99_s": 0.05, "e2e_p99_s": None})()
    row = {"ttft_p99_ms": 499.0, "itl_p99_ms": 50.0, "e2e_p99_ms": 9e9}
    assert V._met(ctx, row)  # type: ignore[arg-type]
    assert not V._met(ctx, {**row, "ttft_p99_ms": 500.1})  # type: ignore[arg-type]
    assert not V._met(ctx, {**row, "ttft_p99_ms": None})  # type: ignore[arg-type]  (nothing measured)
    assert not V._met(ctx, {**row, "itl_p99_ms": 50.01})  # type: ignore[arg-type]
    assert V._met(ctx, {**row, "itl_p99_ms": None})  # type: ignore[arg-type]  (one-token answers)


# --- the simulator's pieces ------------------------------------------------------------------------


def test_draw_parts_follows_the_weights_and_the_seed() -> None:
    a = draw_parts(200_000, [1.0, 0.0, 3.0], (0, 1))
    assert np.array_equal(a, draw_parts(200_000, [1.0, 0.0, 3.0], (0, 1)))
    assert not np.array_equal(a, draw_parts(200_000, [1.0, 0.0, 3.0], (0, 2)))
    counts = np.bincount(a, minlength=3)
    assert counts[1] == 0
    # binomial: 200,000 draws at 1/4, sd 194: within 5 sd
    assert abs(counts[0] - 50_000) < 5 * math.sqrt(200_000 * 0.25 * 0.75)
    for bad in ([], [0.0, 0.0], [1.0, -1.0], [math.inf]):
        with pytest.raises(InvalidInput):
            draw_parts(10, bad, (0,))


def test_assigned_router_keeps_each_request_in_its_part() -> None:
    part = np.array([1, 0, 1, 1, 0, 1], dtype=np.int64)
    r = Assigned(part, [2, 3])  # engines 0-1: part 0; 2-4: part 1
    picks = [r.pick([], rid, 0.0) for rid in range(6)]
    assert picks == [2, 0, 3, 4, 1, 2]  # round robin within each part


def _pools() -> tuple[Any, Any, Any]:
    resolved = Deployment(model="Qwen/Qwen3-8B", gpu="h100-sxm").resolve()
    cfg = engine_config(resolved, 0.2)
    wl = build_workload(parse_plan_request(yaml.safe_load(CHAT.read_text())).workload)
    reqs = workload_requests(wl.model_copy(update={"arrivals": Arrivals(requests_per_s=8.0)}), 0, 2_000)
    return resolved, cfg, reqs


def test_a_pool_of_one_part_is_the_disaggregated_simulation() -> None:
    resolved, cfg, reqs = _pools()
    link = kv_transfer(resolved)
    one = simulate_disaggregated(reqs, resolved.replica, resolved.replica, cfg, cfg, prefill_replicas=2,
                                 decode_replicas=1, kv_transfer=link, request_overhead_s=0.05)  # fmt: skip
    pools = simulate_pools(reqs, [PoolPart(resolved.replica, cfg, 2)], [PoolPart(resolved.replica, cfg, 1)],
                           kv_transfer=link, request_overhead_s=0.05)  # fmt: skip
    assert np.array_equal(one.ttft_s, pools.ttft_s) and np.array_equal(one.e2el_s, pools.e2el_s)
    # the same hand-offs given per request
    xfer = np.asarray([link(p) for p in reqs.prompt_tokens.tolist()])
    per_request = simulate_pools(reqs, [PoolPart(resolved.replica, cfg, 2)], [PoolPart(resolved.replica, cfg, 1)],
                                 kv_transfer=xfer, request_overhead_s=0.05)  # fmt: skip
    assert np.array_equal(one.ttft_s, per_request.ttft_s)


def test_pools_of_two_parts_route_by_the_draw() -> None:
    """Two prefill parts drawn 1:3: each part's replicas see only their requests (the replica
    stats count them), and a draw sending everything to one part is that part alone."""
    resolved, cfg, reqs = _pools()
    n = len(reqs)
    drawn = draw_parts(n, [1.0, 3.0], (0, 2))
    res = simulate_pools(
        reqs,
        [PoolPart(resolved.replica, cfg, 1), PoolPart(resolved.replica, cfg, 2)],
        [PoolPart(resolved.replica, cfg, 1)],
        kv_transfer=kv_transfer(resolved),
        prefill_router=Assigned(drawn, [1, 2]),
    )
    prefill = [s for s in res.replicas if s.role == "prefill"]
    assert prefill[0].requests == int((drawn == 0).sum())
    assert sum(s.requests for s in prefill[1:]) == int((drawn == 1).sum())
    alone = simulate_pools(
        reqs,
        [PoolPart(resolved.replica, cfg, 1), PoolPart(resolved.replica, cfg, 2)],
        [PoolPart(resolved.replica, cfg, 1)],
        kv_transfer=kv_transfer(resolved),
        prefill_router=Assigned(np.ones(n, dtype=np.int64), [1, 2]),
    )
    only = simulate_disaggregated(reqs, resolved.replica, resolved.replica, cfg, cfg, prefill_replicas=2,
                                  kv_transfer=kv_transfer(resolved))  # fmt: skip
    assert np.array_equal(alone.ttft_s, only.ttft_s)
    with pytest.raises(InvalidInput):
        simulate_pools(reqs, [], [PoolPart(resolved.replica, cfg, 1)])
    with pytest.raises(InvalidInput):
        simulate_pools(reqs, [PoolPart(resolved.replica, cfg, 1)], [PoolPart(resolved.replica, cfg, 1)],
                       kv_transfer=np.zeros(3))  # fmt: skip


def test_a_mixed_disaggregated_plan_is_simulated_as_one_group() -> None:
    """Prefill pools on two GPU types (an H100 inventory cap): one group holding every pool
    configuration, all the traffic, its replicas at the bucket; each request's hand-off is its
    prefill configuration's."""
    req = {
        "model": "meta-llama/Llama-3.1-70B-Instruct",
        "slo": {"ttft_p99_ms": 2000, "itl_p99_ms": 40},
        "workload": {
            "name": "rag",
            "arrivals": {"requests_per_s": 20.0},
            "input_tokens": {
                "histogram": {
                    "edges": [256, 1024, 2048, 4096, 8192, 16384],
                    "weights": [0.15, 0.3, 0.3, 0.2, 0.05],
                }
            },
            "output_tokens": {"percentiles": {"p50": 250, "p90": 600, "p99": 1200}},
        },
        "candidates": {
            "gpus": ["h100-sxm", "h200-sxm"],
            "tensor_parallel_sizes": [2, 4],
            "mixed_gpu_types": True,
            "disaggregation": "always",
            "weight_dtype": "fp8",
            "kv_dtype": "fp8",
        },
        "inventory": {"h100-sxm": 20},
    }
    rep = plan(req, workers=1, verify=True)
    sim = rep.simulated
    assert sim is not None
    (g,) = sim.groups
    assert sorted(g.deployments) == sorted(d.id for d in rep.deployments)
    assert g.replicas == [
        next(d.replicas_by_bucket[0] for d in rep.deployments if d.id == i) for i in g.deployments
    ]
    assert g.requests_per_s == pytest.approx(20.0, rel=1e-12) and g.requests == V.part_size(20.0)
    assert g.ttft_p99_ms is not None and g.itl_p99_ms is not None


def test_grpc_verify_is_the_local_verify() -> None:
    """`Plan` with `verify` over gRPC: the same simulated groups as `api.plan(verify=True)`,
    byte for byte through the proto (two groups: the mixed plan)."""
    from grpc_helpers import running_server

    from planner.client import PlannerClient
    from tests.plan_helpers import MIXED

    local = api.plan(copy.deepcopy(MIXED), workers=1, verify=True)
    with running_server(workers=1) as (_, address), PlannerClient(address, timeout_s=120) as client:
        remote = client.plan(copy.deepcopy(MIXED), verify=True)
    assert local.simulated is not None and len(local.simulated.groups) == 2
    assert json.dumps(remote.model_dump(mode="json")) == json.dumps(local.model_dump(mode="json"))
