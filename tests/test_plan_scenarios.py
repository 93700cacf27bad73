"""Scenario sets (issue #36; planner/forecast/scenarios.py, `capplan plan --scenarios`, the
Sweep RPC's `scenario_set`) and the service's bounds on a history workload (planner/server/
policy.py)."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest
import yaml
from grpc_helpers import running_server, stub

from planner import api
from planner.errors import InvalidInput
from planner.forecast.scenarios import apply, expand, parse_scenarios
from planner.server import convert, policy
from planner.server.policy import Limits
from planner.server.service_errors import LimitExceeded
from planner.v1 import planner_service_pb2 as pb
from tests.cli_helpers import run_cli
from tests.test_plan_history import PLAN, _csv, _points

SET = "quantiles=0.99,0.5 growth=0%,10%/month"


def test_the_set_is_quantiles_ascending_then_growth_as_written() -> None:
    qs, gs = parse_scenarios(SET)
    sets = expand(qs, gs, base_quantile=0.9, base_growth=None, field="--scenarios")
    assert [s.name for s in sets] == [
        "p50 growth none", "p50 growth 10%/month", "p99 growth none", "p99 growth 10%/month"
    ]  # fmt: skip
    assert [(s.quantile, s.growth) for s in sets][1] == (0.5, "10%/month")
    only_q = expand([0.5, 0.9], [], base_quantile=0.9, base_growth="2%/week", field="f")
    assert [(s.quantile, s.growth) for s in only_q] == [(0.5, "2%/week"), (0.9, "2%/week")]


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("p50,p90", "--scenarios"),
        ("quantiles=a,b", "--scenarios.quantiles"),
        ("quantiles=0.5 quantiles=0.9", "--scenarios.quantiles"),
        ("quantiles=1.5", "--scenarios.quantiles"),
        ("growth=0%,lots", "--scenarios.growth[1]"),
        ("growth=0%,none", "--scenarios.growth"),
        ("", "--scenarios"),
    ],
)
def test_bad_syntax_is_named(text: str, field: str) -> None:
    with pytest.raises(InvalidInput) as exc:
        qs, gs = parse_scenarios(text)
        expand(qs, gs, base_quantile=0.9, base_growth=None, field="--scenarios")
    assert exc.value.field == field, exc.value


def test_a_scenario_set_needs_a_history_workload() -> None:
    (s,) = expand([0.5], [], base_quantile=0.9, base_growth=None, field="f")
    with pytest.raises(InvalidInput) as exc:
        apply({**PLAN, "workload": {"arrivals": {"requests_per_s": 1}}}, s)
    assert exc.value.field == "workload"


def test_each_scenario_plan_equals_a_plain_plan_streamed_as_json_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _csv(tmp_path)
    forecast = {"horizon": "1d", "bucket": "1h", "method": "seasonal_naive"}
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text(
        yaml.safe_dump({**PLAN, "workload": {"history": "history.csv", "forecast": forecast}})
    )
    argv = [
        "plan",
        str(plan_file),
        "--workers",
        "1",
        "--json",
        "--scenarios",
        "quantiles=0.5,0.99 growth=0%,50%/day",
    ]
    rc, out, err = run_cli(argv, capsys)
    assert rc == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert [x["scenario"] for x in lines] == [
        "p50 growth none", "p50 growth 50%/day", "p99 growth none", "p99 growth 50%/day"
    ]  # fmt: skip
    peaks = []
    for x in lines:
        fc = {**forecast, "quantile": x["quantile"], **({"growth": x["growth"]} if x["growth"] else {})}
        plain = api.plan(
            {**PLAN, "workload": {"history": str(tmp_path / "history.csv"), "forecast": fc}}, workers=1
        )
        assert x["report"] == plain.model_dump(mode="json")
        peaks.append(x["report"]["workload"]["peak_requests_per_s"])
    assert peaks[0] < peaks[1] and peaks[0] < peaks[2]  # growth and a higher quantile both raise the peak
    rc, _, err = run_cli([*argv[:-1], "growth=fast"], capsys)
    assert rc == 2 and err.startswith("capplan: error: --scenarios.growth[0]:"), err


# --- the service ---------------------------------------------------------------------------------

HISTORY_PLAN = {**PLAN, "workload": {"history": {"points": _points()}, "forecast": {"horizon": "1d"}}}


def test_the_service_refuses_files_and_bounds_the_forecast() -> None:
    limits = Limits()
    policy.check("Plan", HISTORY_PLAN, limits)  # 3 weeks hourly: 504 x 368 units, admitted
    assert policy.forecast_units(HISTORY_PLAN["workload"]) == 504 * (168 + 200)
    with pytest.raises(InvalidInput) as exc:
        policy.check("Plan", {**PLAN, "workload": {"history": "/etc/passwd"}}, limits)
    assert exc.value.field == "workload.history.path"
    long = {**HISTORY_PLAN["workload"], "forecast": {"horizon": "400d"}}
    with pytest.raises(LimitExceeded) as lim:
        policy.check("Plan", {**PLAN, "workload": long}, limits)
    assert lim.value.field == "workload.forecast.horizon" and lim.value.got == 9600
    fine = {**HISTORY_PLAN["workload"], "forecast": {"horizon": "1d", "bucket": "5m"}}  # 6,037 x 2,216
    with pytest.raises(LimitExceeded) as lim:
        policy.check("Plan", {**PLAN, "workload": fine}, Limits(max_forecast_units=10_000_000))
    assert lim.value.field == "workload.history.points" and lim.value.got == 6037 * 2216


def test_sweep_expands_a_scenario_set_like_the_cli() -> None:
    plan = convert.to_message(HISTORY_PLAN, pb.PlanRequest)
    request = pb.SweepRequest(
        plan=plan, scenario_set=pb.ScenarioSet(quantiles=[0.9, 0.5], growth=["0%", "10%/week"])
    )
    with running_server(workers=1, limits=Limits()) as (_, address):
        channel, s = stub(address)
        answers = list(s.Sweep(request, timeout=120))
        with pytest.raises(grpc.RpcError) as e:
            list(s.Sweep(pb.SweepRequest(plan=plan, scenario_set=pb.ScenarioSet(growth=["x"])), timeout=30))
        channel.close()
    assert e.value.code() is grpc.StatusCode.INVALID_ARGUMENT and "scenario_set.growth[0]" in str(
        e.value.details()
    )
    assert sorted(a.name for a in answers) == sorted(
        ["p50 growth none", "p50 growth 10%/week", "p90 growth none", "p90 growth 10%/week"]
    )
    for a in answers:
        assert a.WhichOneof("result") == "report", a
    by_name = {a.name: a for a in answers}
    q, g = 0.5, "10%/week"
    local = api.plan(
        {
            **PLAN,
            "workload": {
                "history": {"points": _points()},
                "forecast": {"horizon": "1d", "quantile": q, "growth": g},
            },
        },
        workers=1,
    )
    remote = convert.report_from_response(
        convert.RPCS["Plan"], pb.PlanResponse(report=by_name["p50 growth 10%/week"].report)
    )
    assert json.dumps(remote.model_dump(mode="json")) == json.dumps(local.model_dump(mode="json"))
