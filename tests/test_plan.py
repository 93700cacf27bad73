"""capplan plan: the request schema, the plan's properties, its flags, its infeasible answers.

Small candidate sets (one or two GPU types, few TPs) and workers=1 keep each plan fast; the
properties hold for any candidate set. The MILP's own exactness (hand-solved optima, brute
force) is tested in tests/test_milp*.py.
"""

from __future__ import annotations

import copy
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from planner.deployment import Deployment, Disaggregation
from planner.errors import InvalidInput
from planner.latency import LatencyModel, Slo, WorkloadStats
from planner.plan import plan
from planner.schema.plan_report import PlanReport
from planner.schema.plan_request import parse_plan_request
from planner.workload import Workload

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

WORKLOAD: dict[str, Any] = {
    "name": "chat",
    "arrivals": {"requests_per_s": 20.0},
    "input_tokens": {"percentiles": {"p10": 150, "p50": 800, "p90": 2000, "p99": 4000, "max": 8000}},
    "output_tokens": {"pairs": [[100, 0.5], [300, 0.3], [800, 0.15], [2000, 0.05]]},
    "prefix_cache_hit_fraction": 0.2,
}


def request(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "model": "Qwen/Qwen3-8B",
        "slo": {"ttft_p99_ms": 500, "itl_p99_ms": 50},
        "workload": copy.deepcopy(WORKLOAD),
        "candidates": {"gpus": ["h100-sxm"], "tensor_parallel_sizes": [1, 2]},
    }
    base.update(over)
    return base


def run(req: dict[str, Any], **kw: Any) -> PlanReport:
    return plan(req, workers=kw.pop("workers", 1), **kw)


@pytest.fixture(scope="module")
def chat() -> PlanReport:
    return run(request())


# --- the request ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"candidates": {"tensor_parallel_sizes": [1, 99]}}, "candidates.tensor_parallel_sizes[1]"),
        ({"candidates": {"gpus": ["h100-sxm", "h900"]}}, "candidates.gpus"),
        ({"candidates": {"disaggregation": "sometimes"}}, "candidates.disaggregation"),
        ({"candidates": {"max_num_batched_tokens": [32]}}, "candidates.max_num_batched_tokens[0]"),
        ({"slo": {}}, "slo"),
        ({"slo": {"ttft_p99_ms": -1}}, "slo.ttft_p99_ms"),
        ({"headroom": 11}, "headroom"),
        ({"inventory": {"h100-sxm": -1}}, "inventory"),
        ({"pricing": {"h100-sxm": {"usd_per_gpu_hour": 0}}}, "pricing.h100-sxm.usd_per_gpu_hour"),
        ({"solver": {"time_limit_s": 0}}, "solver.time_limit_s"),
        ({"workload": {"arrivals": {"requests_per_s": -3}}}, "workload"),
        ({"tensor_parallel_size": 2}, "tensor_parallel_size"),
    ],
)
def test_bad_input_names_the_field(change: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as exc:
        run(request(**change))
    assert exc.value.field.startswith(field), exc.value.field


def test_request_defaults_are_documented_ranges() -> None:
    req = parse_plan_request(request(candidates={}))
    assert req.candidates.gpus is None  # the whole catalog
    assert req.candidates.tensor_parallel_sizes == (1, 2, 4, 8)
    assert req.candidates.disaggregation == "auto"
    assert req.headroom == 0.1
    schema = type(req).model_json_schema()
    assert "3.6e6" in json.dumps(schema)  # ranges are in the descriptions


def test_unknown_model_is_the_requests_fault() -> None:
    with pytest.raises(InvalidInput) as exc:
        run(request(model="no/such-model"))
    assert exc.value.field == "model"


# --- the plan ------------------------------------------------------------------------------------


def _pool_capacity(dep: Deployment, role: str, workload: dict[str, Any], slo: Slo, profile: Any) -> float:
    model = LatencyModel(dep.resolve(profile), WorkloadStats.of(Workload.from_mapping(workload)))
    pools = model.capacity(slo).pools
    (pool,) = [p for name, p in pools.items() if name == role]
    return float(pool.requests_per_s_per_replica)


def _deployment_from_args(model: str, gpu: str, role: str, args: list[str]) -> Deployment:
    """The vLLM flags read back, independently of the planner's own builder."""
    flags = dict(zip(args[::2], args[1::2], strict=True))
    kw: dict[str, Any] = {
        "model": model,
        "gpu": gpu,
        "tp": int(flags.pop("--tensor-parallel-size")),
        "max_num_batched_tokens": int(flags.pop("--max-num-batched-tokens")),
        "max_num_seqs": int(flags.pop("--max-num-seqs")),
        "gpu_memory_utilization": float(flags.pop("--gpu-memory-utilization")),
        "long_prefill_token_threshold": int(flags.pop("--long-prefill-token-threshold", "0")),
        "max_model_len": int(flags.pop("--max-model-len")),
    }
    if flags.pop("--quantization", None) == "fp8":
        kw["weight_dtype"] = "fp8"
    if flags.pop("--kv-cache-dtype", None) == "fp8":
        kw["kv_dtype"] = "fp8"
    if role != "colocated":
        assert json.loads(flags.pop("--kv-transfer-config"))["kv_connector"] == "NixlConnector"
        kw["disaggregated"] = Disaggregation(prefill_replicas=1, decode_replicas=1)
    assert not flags, f"flags the test does not know: {flags}"
    return Deployment(**kw)


@pytest.mark.parametrize("disaggregation", ["never", "always"])
def test_vllm_args_are_the_modelled_operating_point(disaggregation: str) -> None:
    """The flags a plan prints, read back into a deployment, give exactly the capacity the plan
    sized with (a known weakness of tools whose flags differ from their modelled point)."""
    from planner.costmodel.profiles import resolve_profile

    cands = {"gpus": ["h100-sxm"], "tensor_parallel_sizes": [1, 2], "disaggregation": disaggregation}
    rep = run(request(candidates=cands))
    assert rep.status == "OPTIMAL"
    slo = Slo(ttft_p99_s=0.5, itl_p99_s=0.05)
    for d in rep.deployments:
        dep = _deployment_from_args(rep.model, d.gpu, d.role, d.vllm_args)
        assert d.vllm_command.split()[:3] == ["vllm", "serve", rep.model]
        assert dep.max_num_seqs == d.max_num_seqs and dep.max_num_batched_tokens == d.max_num_batched_tokens
        cap = _pool_capacity(dep, d.role, WORKLOAD, slo, resolve_profile("auto", d.gpu))
        assert cap == pytest.approx(d.requests_per_s_per_replica, rel=1e-12)
        assert dep.max_num_seqs <= dep.max_num_batched_tokens  # vLLM refuses the opposite


def test_long_prefill_threshold_flag_only_where_used() -> None:
    cands = {"gpus": ["h100-sxm"], "tensor_parallel_sizes": [1], "disaggregation": "never",
             "long_prefill_token_thresholds": [0, 256]}  # fmt: skip
    rep = run(request(candidates=cands))
    for d in rep.deployments:
        has = "--long-prefill-token-threshold" in d.vllm_args
        assert has == (d.long_prefill_token_threshold > 0)
    assert rep.search.candidates >= 1


def _covered(rep: PlanReport, headroom: float) -> None:
    """Every bucket's demand x (1 + headroom) fits the SLO capacity of what serves it."""
    for b, bucket in enumerate(rep.buckets):
        cap = {"colocated": 0.0, "prefill": 0.0, "decode": 0.0}
        for d in rep.deployments:
            cap[d.role] += d.requests_per_s_per_replica * d.replicas_by_bucket[b]
        served = cap["colocated"] + min(cap["prefill"], cap["decode"])
        assert served >= bucket.requests_per_s * (1 + headroom) * (1 - 1e-9), (b, served)


def test_plan_fields(chat: PlanReport) -> None:
    assert chat.status == "OPTIMAL"
    assert chat.deployments and chat.gpus
    d = chat.deployments[0]
    assert d.replicas_peak == max(d.replicas_by_bucket) >= 1
    assert chat.gpu_count_peak == sum(d.replicas_peak * d.tensor_parallel_size for d in chat.deployments)
    assert chat.usd_per_hour_peak is not None
    assert chat.usd_per_month == pytest.approx(chat.usd_per_hour_peak * 730)  # one constant bucket
    # the whole bill over each kind of token: $/h over tokens per hour
    tokens_h = 20.0 * 3600 * chat.workload.mean_output_tokens
    assert chat.usd_per_million_output_tokens == pytest.approx(chat.usd_per_hour_peak / tokens_h * 1e6)
    assert chat.predicted is not None and chat.predicted.ttft_p99_ms is not None
    assert chat.predicted.ttft_p99_ms <= 500 and chat.predicted.itl_p99_ms is not None
    assert chat.predicted.itl_p99_ms <= 50
    assert chat.disaggregation_reason
    assert {a.kind for a in chat.alternatives} >= {"vllm_defaults", "disaggregation"}
    assert chat.binding_constraints[0].startswith(d.id)
    assert chat.search.configurations_evaluated >= chat.search.candidates >= chat.search.candidates_in_milp
    _covered(chat, 0.1)
    assert not any("least right" in w for w in chat.warnings)  # Poisson arrivals: no burst warning


def test_same_request_same_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    from planner.plan import capacity_pool

    monkeypatch.setattr(capacity_pool, "IN_PROCESS_S", 0.0)  # workers=2 hands the batches to the workers
    req = request(candidates={"gpus": ["h100-sxm", "h200-sxm"], "tensor_parallel_sizes": [1, 2]})
    a = json.dumps(run(req).model_dump(mode="json"))
    b = json.dumps(run(req, workers=2).model_dump(mode="json"))
    assert a == b


def _with_rate(rate: float, **over: Any) -> dict[str, Any]:
    req = request(**over)
    req["workload"]["arrivals"] = {"requests_per_s": rate}
    return req


EXACT = {"gpus": ["h100-sxm"], "tensor_parallel_sizes": [1, 2], "max_num_batched_tokens": [1024, 2048, 4096],
         "max_num_seqs": [64, 256], "disaggregation": "never"}  # fmt: skip


def _cost(rep: PlanReport) -> float:
    assert rep.usd_per_month is not None, rep.infeasibility
    return rep.usd_per_month


def test_more_traffic_never_lowers_cost() -> None:
    costs = [_cost(run(_with_rate(r))) for r in (2.0, 10.0, 25.0, 60.0)]
    assert costs == sorted(costs), costs
    exact = [_cost(run(_with_rate(r, candidates=EXACT))) for r in (5.0, 30.0, 70.0)]
    assert exact == sorted(exact), exact


@pytest.mark.parametrize("space", [EXACT, {"gpus": ["h100-sxm"], "tensor_parallel_sizes": [1, 2]}])
def test_looser_slo_never_raises_cost(space: dict[str, Any]) -> None:
    """Exact on a listed search space (every configuration's capacity rises with the target);
    the automatic search is checked on the same ladder."""
    costs = []
    for ttft, itl in ((300, 30), (500, 50), (1000, 100), (3000, 200)):
        rep = run(_with_rate(60.0, slo={"ttft_p99_ms": ttft, "itl_p99_ms": itl}, candidates=space))
        assert rep.status == "OPTIMAL"
        costs.append(_cost(rep))
    assert costs == sorted(costs, reverse=True), costs


def test_inventory_caps_are_never_exceeded_and_buckets_covered() -> None:
    rates = [5.0, 30.0, 60.0, 12.0]
    req = request(
        candidates={"gpus": ["h100-sxm", "h200-sxm"], "tensor_parallel_sizes": [1], "mixed_gpu_types": True},
        inventory={"h100-sxm": 2},
    )
    req["workload"]["arrivals"] = {"buckets": [{"duration_s": 3600, "requests_per_s": r} for r in rates]}
    rep = run(req)
    assert rep.status == "OPTIMAL"
    for g in rep.gpus:
        if g.gpu == "h100-sxm":
            assert g.peak <= 2
            assert all(g.reserved + od <= 2 for od in g.on_demand_by_bucket)
    assert len(rep.buckets) == 4
    _covered(rep, 0.1)
    assert {g.gpu for g in rep.gpus} == {"h100-sxm", "h200-sxm"}  # the cap on the cheaper one forces a mix


def test_mixing_never_costs_more() -> None:
    over = {"inventory": {"h100-sxm": 1}}
    single = run(
        _with_rate(60.0, candidates={"gpus": ["h100-sxm", "h200-sxm"], "tensor_parallel_sizes": [1]}, **over)
    )
    mixed = run(_with_rate(60.0, candidates={"gpus": ["h100-sxm", "h200-sxm"], "tensor_parallel_sizes": [1],
                                             "mixed_gpu_types": True}, **over))  # fmt: skip
    assert single.usd_per_month is not None and mixed.usd_per_month is not None
    assert mixed.usd_per_month <= single.usd_per_month


def test_reserved_gpus_hold_the_base_load() -> None:
    """A week-like forecast: with a reserved price below on-demand, the MILP reserves what the
    quiet hours need and rents the peaks; the bill is reserved x all hours + on-demand x hours used."""
    rates = [4.0] * 12 + [40.0] * 12
    req = request(pricing={"h100-sxm": {"usd_per_gpu_hour": 4.0, "reserved_usd_per_gpu_hour": 2.5}})
    req["workload"]["arrivals"] = {"buckets": [{"duration_s": 3600, "requests_per_s": r} for r in rates]}
    rep = run(req)
    (g,) = rep.gpus
    assert g.reserved >= 1
    bill = sum(b.usd_per_hour * b.duration_s / 3600 for b in rep.buckets)
    expected = g.reserved * 2.5 * 24 + sum(4.0 * od for od in g.on_demand_by_bucket)
    assert bill == pytest.approx(expected)
    assert rep.usd_per_month == pytest.approx(bill / 24 * 730)


def test_e2e_target_lowers_colocated_capacity() -> None:
    """E2E p99 ~ TTFT p99 + (p99 answer - 1) x the mean decode step: a tighter target caps each
    replica lower (binding 'e2e') and never makes the plan cheaper; below the idle floor it is
    an infeasible answer naming the field."""
    costs = []
    for e2e in (None, 30000, 15000):
        slo = {"ttft_p99_ms": 500, "itl_p99_ms": 50, **({"e2e_p99_ms": e2e} if e2e else {})}
        rep = run(_with_rate(40.0, slo=slo))
        costs.append(_cost(rep))
        assert rep.predicted is not None and rep.predicted.e2e_p99_ms is not None
        if e2e is not None:
            assert rep.predicted.e2e_p99_ms <= e2e
            assert {d.binding_limit for d in rep.deployments} == {"e2e"}
            assert not rep.disaggregated
    assert costs == sorted(costs), costs
    rep = run(request(slo={"ttft_p99_ms": 500, "itl_p99_ms": 50, "e2e_p99_ms": 2000}))
    assert rep.status == "INFEASIBLE" and rep.infeasibility is not None
    assert rep.infeasibility.constraint == "slo.e2e_p99_ms"
    assert "below the" in rep.infeasibility.reason


def test_the_e2e_edge_is_the_bisections_to_one_percent() -> None:
    """The E2E-bound rate (`_within_e2e`, Brent as the SLO capacity: 1e-3 of the rate, then 1%
    of the answer) against a literal reference: 40 bisections of the rate on E2E(rate) <=
    target. The answer meets the target and sits within 1% below the reference's edge."""
    import types

    from planner.plan.capacity import _within_e2e, e2e_estimate_s

    w = Workload.model_validate(
        {
            "arrivals": {"requests_per_s": 1.0},
            "input_tokens": {"percentiles": {"p10": 150, "p50": 800, "p90": 2000, "p99": 4000, "max": 8000}},
            "output_tokens": {"pairs": [[100, 0.5], [300, 0.3], [800, 0.15], [2000, 0.05]]},
        }
    )
    model = LatencyModel(Deployment(model="Qwen/Qwen3-8B", gpu="h100-sxm").resolve(), WorkloadStats.of(w))
    engine = model.engines["colocated"]
    ctx = types.SimpleNamespace(e2e_p99_s=20.0, stats=model.stats, speculative=None)

    def e2e(lam: float) -> float:
        solved = engine.solve(lam)
        assert solved is not None
        p = engine.point(solved[0])
        return e2e_estimate_s(ctx, p.ttft_p99_s, p.mean_step_s)  # type: ignore[arg-type]

    top = engine.boundary().lam_max
    rate, at, binding, ok, reason = _within_e2e(ctx, model, top, None, "compute")  # type: ignore[arg-type]
    assert ok and binding == "e2e" and reason == "" and at is not None
    lo, hi = 0.0, top * (1.0 - 1e-9)
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if e2e(mid) <= 20.0 else (lo, mid)
    assert 0.0 < lo < 0.9 * top  # the target binds well inside the stable range
    assert e2e(rate) <= 20.0
    assert 0.99 * lo <= rate <= lo


# --- infeasible answers --------------------------------------------------------------------------


def test_itl_below_the_floor_names_the_floor_and_a_gpu_that_reaches_it() -> None:
    rep = run(request(slo={"ttft_p99_ms": 500, "itl_p99_ms": 4},
                      candidates={"gpus": ["h100-sxm"], "tensor_parallel_sizes": [1]}))  # fmt: skip
    assert rep.status == "INFEASIBLE" and rep.infeasibility is not None
    inf = rep.infeasibility
    assert inf.constraint == "slo.itl_p99_ms"
    assert "ITL p99 of 4 ms is below the" in inf.reason and "floor of Qwen/Qwen3-8B on h100-sxm" in inf.reason
    assert "reaches" in inf.reason  # another catalog GPU goes lower
    assert inf.relaxation.startswith("slo.itl_p99_ms >= ")
    assert not rep.deployments and rep.usd_per_month is None


def test_a_peak_beyond_the_replicas_a_plan_sizes_is_an_answer_not_a_crash() -> None:
    """1e6 req/s of 30,000-token prompts and 4,000-token answers: no H100 replica serves a
    request per second within the SLOs, so every candidate needs over 100,000 replicas at the
    peak (MilpData's limit; the plan raised its ValueError, found by the CLI fuzzer's
    exploration mode). The answer is INFEASIBLE, naming the candidate of the most capacity,
    the replicas it would need (ceil(peak x 1.1 / its capacity)) and the demand a plan of it
    can take (100,000 x its capacity / 1.1)."""
    req = request(
        slo={"ttft_p99_ms": 20000, "itl_p99_ms": 100},
        candidates={"gpus": ["h100-sxm"], "tensor_parallel_sizes": [8], "disaggregation": "never"},
    )
    req["workload"] = {
        "arrivals": {"requests_per_s": 1e6},
        "input_tokens": {"constant": 30000},
        "output_tokens": {"constant": 4000},
    }
    rep = run(req)
    assert rep.status == "INFEASIBLE" and rep.infeasibility is not None
    inf = rep.infeasibility
    assert inf.constraint == "max_replicas_per_bucket"
    m = re.search(r"needs ([\d,]+) replicas of h100-sxm/tp8/colocated/\S+ \(([\d.]+) req/s each", inf.reason)
    assert m is not None, inf.reason
    need, cap = int(m.group(1).replace(",", "")), float(m.group(2))  # cap printed to 4 digits
    assert 0.1 < cap < 10.0 and need > 100_000
    assert need * cap == pytest.approx(1e6 * 1.1, rel=1e-3)
    assert inf.reason.endswith("more than the 100,000 replicas per bucket a plan sizes")
    part = re.search(r"parts of at most ([\d.e+]+) req/s at the peak", inf.relaxation)
    assert part is not None and float(part.group(1)) == pytest.approx(100_000 * cap / 1.1, rel=1e-3)
    assert not rep.deployments and rep.usd_per_month is None


def test_candidates_beyond_the_replicas_a_plan_sizes_leave_the_milp() -> None:
    """1e6 req/s of chat at TTFT p99 200 ms / ITL p99 20 ms: some configurations need over
    100,000 replicas at the peak, others fewer. Those leave the candidates (the plan raised
    MilpData's ValueError, alternatives included); the plan is sized from the rest."""
    rep = run(
        _with_rate(
            1e6,
            slo={"ttft_p99_ms": 200, "itl_p99_ms": 20},
            candidates={"gpus": ["h100-sxm"], "tensor_parallel_sizes": [1, 2], "disaggregation": "never"},
        )
    )
    assert rep.status == "OPTIMAL" and rep.deployments
    assert all(d.replicas_peak <= 100_000 for d in rep.deployments)
    (defaults,) = [a for a in rep.alternatives if a.kind == "vllm_defaults"]
    assert not defaults.feasible
    assert re.fullmatch(r"vLLM's defaults need [\d,]+ replicas at the peak, more than the 100,000 a plan sizes",
                        defaults.reason)  # fmt: skip


def test_inventory_answer_says_how_many_are_needed() -> None:
    rep = run(_with_rate(60.0, inventory={"h100-sxm": 1},
                         candidates={"gpus": ["h100-sxm"], "tensor_parallel_sizes": [1]}))  # fmt: skip
    assert rep.status == "INFEASIBLE" and rep.infeasibility is not None
    assert rep.infeasibility.reason.startswith("needs ")
    assert rep.infeasibility.reason.endswith("h100-sxm at peak, inventory allows 1")
    assert "inventory.h100-sxm >=" in rep.infeasibility.relaxation


def test_model_that_fits_nowhere() -> None:
    rep = run(request(model="meta-llama/Llama-3.1-70B-Instruct",
                      candidates={"gpus": ["l40s"], "tensor_parallel_sizes": [1]}))  # fmt: skip
    assert rep.status == "INFEASIBLE" and rep.infeasibility is not None
    assert rep.infeasibility.constraint == "candidates"
    assert rep.search.unfit


# --- verification, examples, schema ---------------------------------------------------------------


def test_verify_simulates_every_part() -> None:
    """One bucket, one deployment: one group at bucket 0 (tests/test_plan_verify.py has the rest)."""
    rep = run(_with_rate(5.0), verify=True)
    sim = rep.simulated
    assert sim is not None and sim.requests >= 2000
    assert sim.ttft_p99_ms is not None and sim.itl_p99_ms is not None
    assert sim.slo_met == (sim.ttft_p99_ms <= 500 and sim.itl_p99_ms <= 50)
    (g,) = sim.groups
    assert g.bucket == 0 and g.deployments == [d.id for d in rep.deployments] and g.requests == sim.requests


PLAN_EXAMPLES = [
    "chat.yaml",
    "rag-long-prompts.yaml",
    "offline-batch.yaml",
    "internal-tool-low-traffic.yaml",
    "azure-code-bursty.yaml",
    "week-forecast.yaml",
]


@pytest.mark.parametrize("name", PLAN_EXAMPLES)
def test_each_example_plans(name: str) -> None:
    path = EXAMPLES / name
    rep = plan(yaml.safe_load(path.read_text()), base_dir=path.parent)
    assert rep.status in ("OPTIMAL", "FEASIBLE"), rep.infeasibility
    assert rep.deployments and rep.usd_per_month is not None and math.isfinite(rep.usd_per_month)


SCHEMA_FIELDS = {
    "PlanReport": [
        "status", "model", "slo", "workload", "deployments", "gpus", "gpu_count_peak", "usd_per_hour_peak",
        "usd_per_month", "usd_per_million_output_tokens", "usd_per_million_input_tokens", "predicted",
        "simulated", "disaggregated", "disaggregation_reason", "binding_constraints", "alternatives",
        "warnings", "notes", "infeasibility", "profiles", "buckets", "search", "solver", "served_model",
    ],
    "PlanDeployment": [
        "id", "gpu", "tensor_parallel_size", "role", "replicas_peak", "replicas_by_bucket",
        "max_num_batched_tokens", "max_num_seqs", "long_prefill_token_threshold", "gpu_memory_utilization",
        "weight_dtype", "kv_dtype", "vllm_args", "vllm_command", "requests_per_s_per_replica",
        "binding_limit", "usd_per_gpu_hour", "profile", "at_peak", "lora", "pipeline_parallel_size",
        "expert_parallel", "speculative_decoding",
    ],
    "Predicted": ["requests_per_s", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "e2e_p99_ms"],
    "Simulated": ["requests", "seed", "ttft_p99_ms", "itl_p99_ms", "slo_met", "groups"],
    "SimulatedGroup": [
        "deployments", "replicas", "bucket", "bucket_requests_per_s", "requests_per_s", "predicted_slo_fraction",
        "requests", "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p90_ms", "itl_p99_ms",
        "e2e_p99_ms", "predicted_ttft_p50_ms", "predicted_ttft_p99_ms", "predicted_itl_p50_ms",
        "predicted_itl_p99_ms", "predicted_e2e_p99_ms", "slo_met",
    ],
    "Alternative": [
        "kind", "label", "feasible", "usd_per_month", "usd_per_hour_peak", "delta_usd_per_month",
        "delta_fraction", "gpu_count_peak", "deployments", "reason",
    ],
    "Infeasibility": ["constraint", "reason", "relaxation", "relaxed"],
    "RelaxedPlan": [
        "field", "value", "status", "usd_per_month", "usd_per_hour_peak", "gpu_count_peak", "deployments",
    ],
}  # fmt: skip


def test_json_schema_is_stable() -> None:
    """The --json contract (and the proto that mirrors it): fields in this order. A change here
    is a change to every client."""
    schema = PlanReport.model_json_schema()
    defs = schema["$defs"]
    assert list(schema["properties"]) == SCHEMA_FIELDS["PlanReport"]
    for name, fields in SCHEMA_FIELDS.items():
        if name != "PlanReport":
            assert list(defs[name]["properties"]) == fields, name


def test_cli_prints_the_plan_and_its_flags(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from tests.cli_helpers import run_cli

    p = tmp_path / "plan.yaml"
    p.write_text(yaml.safe_dump(request()))
    rc, out, err = run_cli(["plan", str(p), "--workers", "1"], capsys)
    assert rc == 0, err
    assert "vllm serve Qwen/Qwen3-8B --tensor-parallel-size" in out and "$/month" in out
    rc, out, _ = run_cli(["plan", str(p), "--json", "--workers", "1", "--slo-itl-p99-ms", "80"], capsys)
    assert rc == 0 and json.loads(out)["slo"]["itl_p99_ms"] == 80
    rc, _, err = run_cli(["plan", str(p), "--slo-ttft-p99-ms", "-5"], capsys)
    assert rc == 2 and err.startswith("capplan: error: --slo-ttft-p99-ms:")
