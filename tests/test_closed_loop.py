"""Closed loops (`workload.arrivals.concurrency`, vllm bench serve --max-concurrency): the
simulator's C clients against a hand derivation, the analytic solution (planner/closed_loop.py)
against both, the rate cap, saturation, and bad input named by its field."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from planner import api
from planner import closed_loop as cl
from planner.costmodel.profiles import resolve_profile
from planner.deployment import Deployment, ResolvedDeployment
from planner.errors import InvalidInput
from planner.schema.inputs import build_workload
from planner.simulate.run import closed_loop_requests, run_closed_loop
from planner.workload import Workload
from tests.cli_helpers import run_cli

PROMPT, OUTPUT = 1000, 200
LENGTHS = {"input_tokens": {"constant": PROMPT}, "output_tokens": {"constant": OUTPUT}}
MIXED = {
    "input_tokens": {"pairs": [[200, 0.5], [2000, 0.5]]},
    "output_tokens": {"pairs": [[50, 0.5], [400, 0.5]]},
}
DEPLOYMENT = {"model": "Qwen/Qwen3-8B", "gpu": "h100-sxm"}
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "bench-closed-loop.yaml"


def _resolved(replicas: int = 1) -> ResolvedDeployment:
    profile = resolve_profile("auto", "h100-sxm", "profile")
    return Deployment(model="Qwen/Qwen3-8B", gpu="h100-sxm", replicas=replicas).resolve(profile)


def _workload(concurrency: int, lengths: dict[str, Any] = LENGTHS, **arrivals: Any) -> Workload:
    return Workload.from_mapping({"arrivals": {"concurrency": concurrency, **arrivals}, **lengths})


def _alone_s(r: ResolvedDeployment) -> float:
    """One request alone, by hand from the step timer: the front end, one prefill step of the whole
    prompt (it fits the 8192-token budget) that emits the first token, then OUTPUT - 1 decode
    steps of one sequence whose context grows from PROMPT + 1."""
    t = r.replica
    decode = math.fsum(t.step_time_s([], 1, PROMPT + i) for i in range(1, OUTPUT))
    return t.profile.request_overhead_s + t.step_time_s([(PROMPT, 0)], 0, 0) + decode


# --- the simulator ---------------------------------------------------------------------------


@pytest.mark.parametrize("replicas", [1, 2])
def test_one_client_sends_back_to_back_and_each_request_runs_alone(replicas: int) -> None:
    r = _resolved(replicas)
    alone = _alone_s(r)
    n = 20
    result, sent, _ = run_closed_loop(r, closed_loop_requests(_workload(1), 0, count=n), concurrency=1)
    assert result.completed == n
    assert max(abs(e - alone) for e in result.e2el_s) <= 1e-9 * alone
    # request k goes out when request k-1's answer is complete: k x alone
    assert all(abs(t - k * alone) <= 1e-9 * n * alone for k, t in enumerate(sent.arrival_s))
    # completed over the run, first send to last engine finish (n x alone less one front end)
    fe = r.replica.profile.request_overhead_s
    assert result.request_throughput_rps == pytest.approx(n / (n * alone - fe), rel=1e-9)


def test_never_more_than_c_requests_in_flight() -> None:
    result, sent, _ = run_closed_loop(
        _resolved(2), closed_loop_requests(_workload(8, MIXED), 3, count=400), concurrency=8
    )
    fe = _resolved().replica.profile.request_overhead_s
    done = result.finish_s + fe  # as the client sees it
    for t in sent.arrival_s[::37]:
        assert int(((sent.arrival_s <= t) & (done > t)).sum()) <= 8
    assert (sent.arrival_s[:8] == 0.0).all() and (sent.arrival_s[8:] > 0.0).all()


def test_same_request_same_report() -> None:
    req = {"deployment": DEPLOYMENT, "workload": _workload(6, MIXED).model_dump(), "requests": 300, "seed": 7}
    a, b = api.simulate(req), api.simulate(req)
    assert json.dumps(a.model_dump(mode="json")) == json.dumps(b.model_dump(mode="json"))


def test_rate_cap_binds_below_the_loops_rate() -> None:
    # 3/s is well below the ~13/s 32 clients reach: the requests come due at the cap.
    req = {
        "deployment": DEPLOYMENT,
        "workload": {"arrivals": {"concurrency": 32, "requests_per_s": 3.0}, **LENGTHS},
    }
    ev = api.evaluate(req).closed_loop
    assert ev is not None and ev.limited_by == "rate_cap" and ev.requests_per_s == 3.0
    sim = api.simulate({**req, "requests": 2000}).closed_loop
    assert sim is not None and sim.requests_per_s == pytest.approx(3.0, rel=0.06)  # Poisson sampling noise


def test_horizon_sends_until_it() -> None:
    rep = api.simulate({"deployment": DEPLOYMENT, "workload": _workload(4).model_dump(), "horizon_s": 30.0})
    assert rep.closed_loop is not None
    assert rep.input.span_s < 30.0 < rep.duration_s  # the last requests finish after the horizon


# --- the analytic solution -------------------------------------------------------------------


def test_one_client_analytic_is_one_request_alone() -> None:
    """At a vanishing rate the open-loop model's time in system is one request alone; C = 1 runs
    at 1 / that less the Poisson queueing the open-loop model adds at the loop's own rate
    (measured 1.9% here; a closed loop of one has none)."""
    r = _resolved()
    alone = _alone_s(r)
    sol, model = cl.solve_workload(r, _workload(1))
    w0 = cl.time_in_system_s(model.evaluate(1e-4, per_bucket=False), r.replica.profile.request_overhead_s)
    assert w0 == pytest.approx(alone, rel=1e-4)
    assert sol.limited_by == "concurrency" and not sol.saturated
    assert sol.in_flight == pytest.approx(1.0, rel=1e-9)
    assert 0.97 / alone <= sol.requests_per_s <= 1.0 / alone


def test_more_clients_than_the_stable_branch_holds_is_saturation() -> None:
    r = _resolved()
    sol, model = cl.solve_workload(r, _workload(5000))
    assert sol.saturated and sol.limited_by == "capacity"
    assert sol.requests_per_s == pytest.approx(
        model.max_stable_requests_per_s() * cl.EDGE_FRACTION, rel=1e-12
    )
    assert sol.in_flight is not None and sol.in_flight < 5000


# Analytic rate / simulated rate on a small grid (docs/simulate.md, "Closed loop"), measured:
#   constant 1000/200, 1 replica:  C=1 0.981, 4 0.992, 64 1.094
#   constant 1000/200, 2 replicas: C=1 0.990, 4 0.982, 64 1.051
#   mixed lengths, 1 replica:      C=16 1.067
# Below 1 at small C: the open-loop model's Poisson queueing, absent from a closed loop; above 1
# at large C: the model's own gap to the simulator under heavy decode batching.
GRID = [
    (1, 1, LENGTHS),
    (4, 1, LENGTHS),
    (64, 1, LENGTHS),
    (1, 2, LENGTHS),
    (4, 2, LENGTHS),
    (64, 2, LENGTHS),
    (16, 1, MIXED),
]
TOLERANCE = 0.12


@pytest.mark.parametrize(("concurrency", "replicas", "lengths"), GRID)
def test_analytic_rate_is_near_the_simulated_one(
    concurrency: int, replicas: int, lengths: dict[str, Any]
) -> None:
    r = _resolved(replicas)
    wl = _workload(concurrency, lengths)
    sol, _ = cl.solve_workload(r, wl)
    n = max(200, 50 * concurrency)
    result, _, _ = run_closed_loop(r, closed_loop_requests(wl, 0, count=n), concurrency=concurrency)
    assert sol.requests_per_s / result.request_throughput_rps == pytest.approx(1.0, abs=TOLERANCE)


# --- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arrivals", "field", "reason"),
    [
        ({"concurrency": 0}, "workload.arrivals.concurrency", "greater than or equal to 1"),
        ({"concurrency": 100_001}, "workload.arrivals.concurrency", "less than or equal to 100000"),
        ({"concurrency": 2.5}, "workload.arrivals.concurrency", "integer"),
        (
            {"concurrency": 4, "buckets": [{"duration_s": 60, "requests_per_s": 1}]},
            "workload.arrivals",
            "not buckets",
        ),
    ],
)
def test_bad_concurrency_is_named(arrivals: dict[str, Any], field: str, reason: str) -> None:
    for use in (api.evaluate, api.simulate):
        with pytest.raises(InvalidInput) as e:
            use({"deployment": DEPLOYMENT, "workload": {"arrivals": arrivals, **LENGTHS}})
        assert e.value.field == field and reason in e.value.reason


def test_what_does_not_take_a_closed_loop_says_so() -> None:
    req: dict[str, Any] = {"deployment": DEPLOYMENT, "workload": _workload(4).model_dump()}
    with pytest.raises(InvalidInput) as e:
        api.evaluate({**req, "requests_per_s": 5})
    assert e.value.field == "requests_per_s"
    with pytest.raises(InvalidInput) as e:
        api.simulate({**req, "trace": "azure-conv-2023"})
    assert e.value.field == "trace"
    with pytest.raises(InvalidInput) as e:
        build_workload(_workload(4))  # plan's path
    assert e.value.field == "workload.arrivals.concurrency"
    disagg = {**DEPLOYMENT, "disaggregated": {"prefill_replicas": 1, "decode_replicas": 1}}
    for use in (api.evaluate, api.simulate):
        with pytest.raises(InvalidInput) as e:
            use({**req, "deployment": disagg})
        assert e.value.field == "workload.arrivals.concurrency"


def test_cli_flag(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_cli(["evaluate", str(EXAMPLE), "--concurrency", "8"], capsys)
    assert rc == 0, err
    assert "closed loop: 8 clients:" in out
    rc, out, err = run_cli(["simulate", str(EXAMPLE), "--concurrency", "0"], capsys)
    assert rc != 0 and "--concurrency" in err


def test_a_horizon_past_the_request_cap_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    # without a rate cap the sends before a horizon are unknown until run: bounded by the cap
    monkeypatch.setattr(cl, "MAX_SIMULATED_REQUESTS", 50)
    req = {"deployment": DEPLOYMENT, "workload": _workload(4).model_dump(), "horizon_s": 600.0}
    with pytest.raises(InvalidInput) as e:
        api.simulate(req)
    assert e.value.field == "horizon_s" and "more than 50" in e.value.reason
    assert api.simulate({**req, "horizon_s": 5.0}).input.requests < 50
