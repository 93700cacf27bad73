"""A plan served by several parts at once emits the router it assumes: `--emit k8s` ends with a
Gateway API HTTPRoute whose backendRef weights are the plan's capacity shares (rounded to parts
of 10,000 by largest remainder), valid against the HTTPRoute CRD schema. Replayed through
`capplan simulate` part by part, the emitted split meets the SLOs; the even split a plain Service
(or no router) gives does not. `--verify` simulates the same split."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import numpy as np
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from planner import api
from planner.cli import main
from planner.export import (
    GATEWAY_API_VERSION,
    GATEWAY_NAME,
    ROUTE_WEIGHT_TOTAL,
    VLLM_PORT,
    k8s_manifests,
    k8s_yaml,
    route_backends,
    route_weights,
)
from planner.schema.plan_report import PlanReport
from planner.simulate.router import draw_parts
from planner.simulate.run import workload_requests
from planner.workload import Arrivals, Workload
from tests.plan_helpers import MIXED, MIXED_SLO, MIXED_WORKLOAD

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "tests" / "data" / "gateway-api" / "httproute-v1.0.0.schema.json"
K8S_VERSION = "1.31.0"

WORKLOAD, SLO = MIXED_WORKLOAD, MIXED_SLO
REPLAY_REQUESTS = 24_000  # the peak's stream: ~2,200 of them reach the smaller part


@pytest.fixture(scope="module")
def mixed() -> PlanReport:
    rep = api.plan(copy.deepcopy(MIXED), workers=1, verify=True)
    assert {d.gpu for d in rep.deployments} == {"a100-80gb-sxm", "h100-sxm"}
    return rep


def _route(report: PlanReport) -> dict[str, Any]:
    (route,) = [d for d in k8s_manifests(report) if d["kind"] == "HTTPRoute"]
    return route


# --- the weights ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("capacities", "total", "weights"),
    [
        # exact shares x 10,000: 2,500 / 7,500
        ([1.0, 3.0], ROUTE_WEIGHT_TOTAL, [2500, 7500]),
        # 3,333.33 / 6,666.67: floors 3,333 + 6,666 leave 1, to the larger remainder (0.67)
        ([1.0, 2.0], ROUTE_WEIGHT_TOTAL, [3333, 6667]),
        # 3,333.33 each: floors leave 1, equal remainders, the earlier part takes it
        ([1.0, 1.0, 1.0], ROUTE_WEIGHT_TOTAL, [3334, 3333, 3333]),
        ([1.0, 1.0, 1.0], 10, [4, 3, 3]),
        ([0.0, 5.0], ROUTE_WEIGHT_TOTAL, [0, ROUTE_WEIGHT_TOTAL]),
    ],
)
def test_route_weights_by_hand(capacities: list[float], total: int, weights: list[int]) -> None:
    assert route_weights(capacities, total) == weights


@given(st.lists(st.floats(min_value=1e-6, max_value=1e6), min_size=1, max_size=12))
def test_route_weights_sum_to_the_total_within_one_part(capacities: list[float]) -> None:
    w = route_weights(capacities)
    assert sum(w) == ROUTE_WEIGHT_TOTAL and min(w) >= 0
    whole = math.fsum(capacities)
    for wi, c in zip(w, capacities, strict=True):
        assert abs(wi / ROUTE_WEIGHT_TOTAL - c / whole) < 1 / ROUTE_WEIGHT_TOTAL


# --- the manifest --------------------------------------------------------------------------------


def test_one_part_gets_no_route() -> None:
    chat = yaml.safe_load((ROOT / "examples" / "chat.yaml").read_text())
    rep = api.plan(chat, base_dir=ROOT / "examples", workers=1)
    assert len(route_backends(rep)) == 1
    assert [d["kind"] for d in k8s_manifests(rep)] == ["Deployment", "Service"] * len(rep.deployments)


def test_mixed_plan_emits_a_valid_weighted_httproute(mixed: PlanReport) -> None:
    docs = list(yaml.safe_load_all(k8s_yaml(mixed)))
    assert docs == k8s_manifests(mixed)
    for d in docs:
        if d["kind"] != "HTTPRoute":
            kubernetes_validate.validate(d, K8S_VERSION, strict=True)
    route = _route(mixed)
    jsonschema.validate(route, json.loads(SCHEMA.read_text()))
    assert route["apiVersion"] == GATEWAY_API_VERSION
    meta = route["metadata"]["name"]
    assert len(meta) <= 63 and meta.replace("-", "").isalnum() and meta == meta.lower()
    assert route["spec"]["parentRefs"] == [{"name": GATEWAY_NAME}]
    (rule,) = route["spec"]["rules"]
    services = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
    deployments = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}
    # Every backend is one of the emitted Services, on its port, and the weights are the plan's
    # capacity shares at the manifests' replicas: capacity per replica x replicas_peak.
    caps = []
    for ref in rule["backendRefs"]:
        assert ref["kind"] == "Service" and ref["group"] == "" and ref["port"] == VLLM_PORT
        assert services[ref["name"]]["spec"]["ports"][0]["port"] == VLLM_PORT
        plan = json.loads(deployments[ref["name"]]["metadata"]["annotations"]["capplan/plan"])
        dep = next(d for d in mixed.deployments if d.gpu == plan["gpu"])
        assert deployments[ref["name"]]["spec"]["replicas"] == dep.replicas_peak
        caps.append(dep.requests_per_s_per_replica * dep.replicas_peak)
    weights = [r["weight"] for r in rule["backendRefs"]]
    assert weights == route_weights(caps) and sum(weights) == ROUTE_WEIGHT_TOTAL
    assert len(weights) == len(mixed.deployments) == 2


def test_verify_simulates_the_routes_split(mixed: PlanReport) -> None:
    """One bucket, every deployment at its peak replicas: `--verify` sends each part the share
    the route's weights give it (to within the weights' rounding)."""
    sim = mixed.simulated
    assert sim is not None and len(sim.groups) == 2 and sim.slo_met
    weights = {r["name"]: r["weight"] for r in _route(mixed)["spec"]["rules"][0]["backendRefs"]}
    backends = {b.deployments: b.service for b in route_backends(mixed)}
    for g in sim.groups:
        assert g.bucket == 0 and g.bucket_requests_per_s == 40.0
        share = weights[backends[tuple(g.deployments)]] / ROUTE_WEIGHT_TOTAL
        assert abs(g.requests_per_s / 40.0 - share) < 1 / ROUTE_WEIGHT_TOTAL


# --- the split, replayed through `capplan simulate` ----------------------------------------------

FLAGS = {
    "--tensor-parallel-size": "tp",
    "--max-num-seqs": "max_num_seqs",
    "--max-num-batched-tokens": "max_num_batched_tokens",
    "--long-prefill-token-threshold": "long_prefill_token_threshold",
    "--gpu-memory-utilization": "gpu_memory_utilization",
}


def _deployment_of(doc: dict[str, Any], model: str) -> dict[str, Any]:
    """The simulate request's deployment from an emitted Deployment: the GPU from the plan
    annotation, the replicas, and the flags vLLM runs with."""
    plan = json.loads(doc["metadata"]["annotations"]["capplan/plan"])
    args = doc["spec"]["template"]["spec"]["containers"][0]["args"]
    out: dict[str, Any] = {"model": model, "gpu": plan["gpu"], "replicas": doc["spec"]["replicas"]}
    for flag, value in zip(args[::2], args[1::2], strict=True):
        if flag in FLAGS:
            out[FLAGS[flag]] = float(value) if flag == "--gpu-memory-utilization" else int(value)
    return out


def _replay(
    report: PlanReport, weights: dict[str, float], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> dict[str, dict[str, Any]]:
    """The peak's stream (40 req/s, seed 0) sent to each Service at random by `weights` (what a
    gateway's weighted backends do), each part replayed as a trace through `capplan simulate`
    on its emitted Deployment. The SimulateReport per Service."""
    docs = k8s_manifests(report)
    deployments = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}
    workload = Workload.model_validate({**WORKLOAD, "arrivals": Arrivals(requests_per_s=40.0)})
    reqs = workload_requests(workload, 0, count=REPLAY_REQUESTS)
    names = sorted(weights)
    part = draw_parts(len(reqs), [weights[n] for n in names], (0, 1))
    out = {}
    for k, name in enumerate(names):
        keep = np.flatnonzero(part == k)
        csv = tmp_path / f"{name}.csv"
        rows = zip(
            *(a[keep].tolist() for a in (reqs.arrival_s, reqs.prompt_tokens, reqs.output_tokens)), strict=True
        )
        csv.write_text(
            "TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(f"{t!r},{p},{o}\n" for t, p, o in rows)
        )
        spec = tmp_path / f"{name}.yaml"
        spec.write_text(
            yaml.safe_dump(
                {
                    "deployment": _deployment_of(deployments[name], report.model),
                    "workload": WORKLOAD,
                    "slo": SLO,
                }
            )
        )
        assert main(["simulate", str(spec), "--trace", str(csv), "--json"]) == 0
        out[name] = json.loads(capsys.readouterr().out)
    return out


def test_the_emitted_split_meets_the_slos_and_an_even_split_does_not(
    mixed: PlanReport, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    route = _route(mixed)
    weights = {r["name"]: float(r["weight"]) for r in route["spec"]["rules"][0]["backendRefs"]}
    for name, rep in _replay(mixed, weights, tmp_path, capsys).items():
        assert rep["ttft_p99_ms"] <= SLO["ttft_p99_ms"], name
        assert rep["itl_p99_ms"] <= SLO["itl_p99_ms"], name
    # Half the traffic each (two Services with no weights): the A100s, a tenth of the capacity,
    # get half the requests and fall behind.
    even = _replay(mixed, dict.fromkeys(weights, 1.0), tmp_path, capsys)
    missed = [
        n
        for n, rep in even.items()
        if rep["ttft_p99_ms"] > SLO["ttft_p99_ms"] and rep["itl_p99_ms"] > SLO["itl_p99_ms"]
    ]
    assert missed and all("a100" in n for n in missed)


def test_pools_beside_colocated_parts_route_through_their_proxys_service(mixed: PlanReport) -> None:
    """A plan with colocated parts and prefill/decode pools (the mixed plan's deployments and a
    P/D pair of another plan, put together): the pools' share goes to the Service of the proxy
    the operator runs, weighted by the smaller pool's capacity."""
    chat = yaml.safe_load((ROOT / "examples" / "chat.yaml").read_text())
    chat["candidates"] = {"gpus": ["h100-sxm"], "tensor_parallel_sizes": [1], "disaggregation": "always"}
    pd = api.plan(chat, base_dir=ROOT / "examples", workers=1)
    both = mixed.model_copy(update={"deployments": [*mixed.deployments, *pd.deployments]})
    docs = k8s_manifests(both)
    route = _route(both)
    jsonschema.validate(route, json.loads(SCHEMA.read_text()))
    (proxy,) = [d for d in docs if d["kind"] == "Service" and d["metadata"]["name"].endswith("-pd-proxy")]
    kubernetes_validate.validate(proxy, K8S_VERSION, strict=True)
    assert proxy["spec"]["selector"]["app.kubernetes.io/component"] == "pd-proxy"
    refs = route["spec"]["rules"][0]["backendRefs"]
    assert [r["name"] for r in refs][-1] == proxy["metadata"]["name"] and len(refs) == 3
    pools = {d.role: d.requests_per_s_per_replica * d.replicas_peak for d in pd.deployments}
    caps = [d.requests_per_s_per_replica * d.replicas_peak for d in mixed.deployments]
    assert [r["weight"] for r in refs] == route_weights([*caps, min(pools["prefill"], pools["decode"])])
