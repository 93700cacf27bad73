"""Admission by cost (planner/server/policy.py) and the schema limits it shares with the solver
and the simulator: every over-limit request is refused before any work, naming its field (the
policy: LimitExceeded -> RESOURCE_EXHAUSTED with a QuotaFailure; the api and CLI: InvalidInput),
requests at a limit run, and the estimates bound what the planner and simulator really do."""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import api
from planner.errors import InvalidInput
from planner.schema.inputs import MAX_SIMULATED_REQUESTS
from planner.server import convert, policy
from planner.server.policy import Limits, plan_configurations, simulated_arrivals
from planner.server.service_errors import LimitExceeded
from planner.v1 import planner_service_pb2 as pb
from planner.workload import MAX_SAMPLES
from solvers.milp_data import MAX_BUCKETS
from tests.cli_helpers import run_cli, write
from tests.grpc_helpers import CHAT_PLAN, running_server, stub

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
CHAT = yaml.safe_load((EXAMPLES / "chat-qwen3-8b-h100.yaml").read_text())
LIMITS = Limits()


def _buckets(n: int, rate: float = 10.0, duration_s: float = 3600.0) -> list[dict[str, float]]:
    return [{"duration_s": duration_s, "requests_per_s": rate + i % 3} for i in range(n)]


def _plan(**candidates: Any) -> dict[str, Any]:
    return {**CHAT_PLAN, "candidates": {**CHAT_PLAN["candidates"], **candidates}}


def _plan_buckets(n: int) -> dict[str, Any]:
    return {**CHAT_PLAN, "workload": {**CHAT_PLAN["workload"], "arrivals": {"buckets": _buckets(n)}}}


def _sim(**fields: Any) -> dict[str, Any]:
    return {**copy.deepcopy(CHAT), **fields}


# (rpc, request, field refused, what it got): each one just over its limit.
OVER = [
    ("Plan", _plan_buckets(MAX_BUCKETS + 1), "workload.arrivals.buckets", MAX_BUCKETS + 1),
    # azure-conv-2023 spans 3,502 s: 0.39 s buckets are 8,979 of them
    ("Plan", {**CHAT_PLAN, "workload": {"trace": "azure-conv-2023", "bucket_s": 0.39}}, "workload.bucket_s", 8979),
    # issue 33's: 20,000 listed budgets (+ 2 to set max_num_seqs) colocated and prefill, 1 + 2 decode
    ("Plan", _plan(max_num_batched_tokens=list(range(64, 20_064))), "candidates", 2 * 20_002 + 3),
    # colocated only, listed max_num_seqs multiply: 5,000 budgets x 2 + 2
    ("Plan", _plan(max_num_batched_tokens=list(range(64, 5_064)), max_num_seqs=[8, 16], disaggregation="never"),
     "candidates", 10_002),
    ("Simulate", _sim(requests=LIMITS.max_simulated_requests + 1), "requests", LIMITS.max_simulated_requests + 1),
    # issue 33: a high rate x a long horizon (9.99/s x 1e5 s = 999,000 arrivals)
    ("Simulate", _sim(requests_per_s=9.99, horizon_s=1e5), "horizon_s", 999_000),
    ("Simulate", _sim(trace="azure-conv-2023", requests_per_s=100.0, horizon_s=2001.0), "horizon_s", 200_100),
    # one pass over 8,000 hourly buckets at ~11/s: ~3.2e8 arrivals
    ("Simulate", _sim(workload={**CHAT["workload"], "arrivals": {"buckets": _buckets(8000)}}), "requests", None),
    ("Evaluate", {**CHAT, "workload": {**CHAT["workload"], "arrivals": {"buckets": _buckets(MAX_BUCKETS + 1)}}},
     "workload.arrivals.buckets", MAX_BUCKETS + 1),
    ("Evaluate", {**CHAT, "workload": {**CHAT["workload"], "input_tokens": {"samples": [1] * (MAX_SAMPLES + 1)}}},
     "workload.input_tokens.samples", MAX_SAMPLES + 1),
]  # fmt: skip


@pytest.mark.parametrize(("rpc", "data", "field", "got"), OVER, ids=[f"{o[0]}:{o[2]}" for o in OVER])
def test_over_the_limit_is_refused_naming_the_field(
    rpc: str, data: dict[str, Any], field: str, got: int
) -> None:
    with pytest.raises(LimitExceeded) as e:
        policy.check(rpc, data, LIMITS)
    assert e.value.field == field
    assert e.value.got > e.value.limit
    if got is not None:
        assert e.value.got == got
    with pytest.raises(LimitExceeded) as e:  # a Sweep scenario's field carries its prefix
        policy.check(rpc, data, LIMITS, prefix="scenarios[3].plan")
    assert e.value.field == f"scenarios[3].plan.{field}"


AT = [
    ("Plan", _plan_buckets(MAX_BUCKETS)),
    ("Plan", {**CHAT_PLAN, "workload": {"trace": "azure-conv-2023", "bucket_s": 0.4}}),  # 8,755 buckets
    (
        "Plan",
        _plan(max_num_batched_tokens=list(range(64, 5_063)), max_num_seqs=[8, 16], disaggregation="never"),
    ),
    ("Simulate", _sim(requests=LIMITS.max_simulated_requests)),
    ("Simulate", _sim(requests_per_s=10.0, horizon_s=LIMITS.max_simulated_requests / 10.0)),
    ("Evaluate", {**CHAT, "workload": {**CHAT["workload"], "input_tokens": {"samples": [1] * MAX_SAMPLES}}}),
]


@pytest.mark.parametrize(("rpc", "data"), AT, ids=[a[0] for a in AT])
def test_at_the_limit_is_admitted(rpc: str, data: dict[str, Any]) -> None:
    policy.check(rpc, data, LIMITS)
    if rpc == "Plan" and "max_num_batched_tokens" in data["candidates"]:
        assert plan_configurations(data) == LIMITS.max_candidate_configs  # exactly at it


@settings(max_examples=200, deadline=None)
@given(
    rate=st.floats(1e-3, 1e6, allow_nan=False),
    horizon_s=st.floats(1e-3, 1e7, allow_nan=False),
    limit=st.integers(1, 10**7),
)
def test_a_horizon_is_admitted_iff_its_arrivals_fit(rate: float, horizon_s: float, limit: int) -> None:
    data = _sim(requests_per_s=rate, horizon_s=horizon_s)
    expected = math.ceil(rate * horizon_s)
    assert simulated_arrivals(data) == ("horizon_s", expected)
    limits = Limits(max_simulated_requests=limit)
    if expected > limit:
        with pytest.raises(LimitExceeded, match=r"^horizon_s: "):
            policy.check("Simulate", data, limits)
    else:
        policy.check("Simulate", data, limits)


def test_a_closed_loop_horizon_without_a_rate_cap_is_refused_by_its_horizon() -> None:
    closed = {**copy.deepcopy(CHAT["workload"]), "arrivals": {"concurrency": 8}}
    data = _sim(workload=closed, horizon_s=10.0)
    data.pop("requests_per_s", None)
    assert simulated_arrivals(data) == ("horizon_s", MAX_SIMULATED_REQUESTS)
    with pytest.raises(LimitExceeded, match=r"^horizon_s: "):
        policy.check("Simulate", data, LIMITS)
    capped = {**closed, "arrivals": {"concurrency": 8, "requests_per_s": 2.0}}
    assert simulated_arrivals(_sim(workload=capped, horizon_s=10.0)) == ("horizon_s", 20)


# --- the estimates bound the real work ----------------------------------------------------------

PLANS = [
    _plan(),  # the defaults: auto disaggregation, the budget search
    _plan(max_num_batched_tokens=[512, 1024, 2048, 4096, 8192], disaggregation="never"),
    _plan(max_num_batched_tokens=[1024, 4096], max_num_seqs=[32, 64, 128]),
    _plan(tensor_parallel_sizes=[1, 2], long_prefill_token_thresholds=[0, 512, 2048], disaggregation="never"),
]


@pytest.mark.parametrize("data", PLANS)
def test_the_plan_estimate_bounds_the_configurations_evaluated(data: dict[str, Any]) -> None:
    report = api.plan(data, workers=1)
    assert 0 < report.search.configurations_evaluated <= plan_configurations(data)


@pytest.mark.parametrize(
    "fields",
    [
        {"requests_per_s": 20.0, "horizon_s": 100.0},
        {"workload": {**CHAT["workload"], "arrivals": {"buckets": _buckets(3, rate=2.0, duration_s=300.0)}}},
        {"trace": "azure-code-2023"},
        {"trace": "azure-code-2023", "requests_per_s": 10.0, "horizon_s": 200.0},
    ],
)
def test_the_simulate_estimate_is_the_arrivals_simulated(fields: dict[str, Any]) -> None:
    data = _sim(**fields)
    _, estimate = simulated_arrivals(data)
    got = api.simulate(data).input.requests
    assert abs(got - estimate) <= 5 * math.sqrt(estimate) + 2  # Poisson (or tiled) arrivals


# --- the api and the CLI refuse what the solver and simulator cannot do, naming the field --------


def test_a_plan_over_the_milps_buckets_is_refused_at_validation() -> None:
    with pytest.raises(InvalidInput, match=r"8,785 buckets .* a plan sizes at most 8,784") as e:
        api.plan(_plan_buckets(MAX_BUCKETS + 1), workers=1)
    assert e.value.field == "workload.arrivals.buckets"


def test_a_plan_at_the_milps_buckets_runs() -> None:
    data = {**_plan_buckets(MAX_BUCKETS), "candidates": {"gpus": ["h100-sxm"], "tensor_parallel_sizes": [1],
                                                          "disaggregation": "never"}}  # fmt: skip
    report = api.plan(data, workers=1)
    assert report.status in ("OPTIMAL", "FEASIBLE")
    assert len(report.buckets) == MAX_BUCKETS


def test_the_cli_refuses_a_huge_horizon_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(tmp_path, json.dumps(CHAT))
    rc, _, err = run_cli(["simulate", str(f), "--horizon-s", "1e6", "--json"], capsys)
    assert rc == 2
    assert err.startswith("capplan: error: --horizon-s: about 1.2e+07 requests"), err  # the flag given
    assert f"{MAX_SIMULATED_REQUESTS:,}" in err
    f = write(tmp_path, json.dumps(_sim(horizon_s=1e6)))
    rc, _, err = run_cli(["simulate", str(f), "--json"], capsys)
    assert rc == 2
    assert err.startswith("capplan: error: horizon_s: about 1.2e+07 requests"), err


def test_the_cli_refuses_a_plan_over_the_milps_buckets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = write(tmp_path, json.dumps(_plan_buckets(MAX_BUCKETS + 1)))
    rc, _, err = run_cli(["plan", str(f), "--json", "--workers", "1"], capsys)
    assert rc == 2
    assert err.startswith("capplan: error: workload.arrivals.buckets"), err


# --- over gRPC ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def raw() -> Iterator[Any]:
    with running_server(workers=1) as (_, addr):
        channel, s = stub(addr)
        yield s
        channel.close()


def _quota(err: grpc.RpcError) -> list[tuple[str, str]]:
    status = rpc_status.from_call(err)
    assert status is not None
    qf = error_details_pb2.QuotaFailure()
    assert status.details[0].Unpack(qf)
    return [(v.subject, v.description) for v in qf.violations]


GRPC_OVER = [o for o in OVER if o[0] != "Evaluate" or o[2] != "workload.input_tokens.samples"]  # 4 MiB+


@pytest.mark.parametrize(
    ("rpc", "data", "field", "got"), GRPC_OVER, ids=[f"{o[0]}:{o[2]}" for o in GRPC_OVER]
)
def test_over_grpc_over_the_limit_is_resource_exhausted(
    raw: Any, rpc: str, data: dict[str, Any], field: str, got: int
) -> None:
    with pytest.raises(grpc.RpcError) as e:
        getattr(raw, rpc)(convert.to_message(data, convert.RPCS[rpc].request), timeout=10)
    assert e.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED, e.value.details()
    assert _quota(e.value)[0][0] == field


def test_over_grpc_a_plan_at_the_milps_buckets_runs(raw: Any) -> None:
    data = {**_plan_buckets(MAX_BUCKETS), "candidates": {"gpus": ["h100-sxm"], "tensor_parallel_sizes": [1],
                                                          "disaggregation": "never"}}  # fmt: skip
    answer = raw.Plan(convert.to_message(data, pb.PlanRequest), timeout=60)
    assert len(answer.report.buckets) == MAX_BUCKETS


def test_whole_plans_a_request_asks_for_multiply_its_configurations() -> None:
    """Each weight format listed, EP's second plan (the TP split) and each speculative k is a
    search of its own (planner/plan/pipeline.py, ep_variants.py, speculative_k.py): 2 formats x
    2 x 3 ks = 12 times the one plan's configurations; speculative_decoding alone tries k = 0..5
    (6), or its own k (1)."""
    base = _plan(tensor_parallel_sizes=[1, 2])
    one = plan_configurations(base)
    eagle = {"method": "eagle3", "acceptance_rate": 0.6}
    many = {
        **_plan(tensor_parallel_sizes=[1, 2], weight_dtypes=["bf16", "fp8"], expert_parallel=True,
                num_speculative_tokens=[0, 1, 2]),
        "speculative_decoding": eagle,
    }  # fmt: skip
    assert plan_configurations(many) == 12 * one
    assert plan_configurations({**base, "speculative_decoding": eagle}) == 6 * one
    assert plan_configurations({**base, "speculative_decoding": {**eagle, "num_speculative_tokens": 3}}) == one
    over = {**_plan(weight_dtypes=["bf16", "fp8", "int8"], max_num_batched_tokens=list(range(64, 2_000)))}
    with pytest.raises(policy.LimitExceeded) as e:
        policy.check("Plan", over, LIMITS)
    assert e.value.field == "candidates"
