"""planner.slo.Slo: one set of p99 targets for the analytic capacity and the simulator's goodput."""

from __future__ import annotations

import numpy as np
import pydantic
import pytest

from planner.deployment import Deployment
from planner.errors import InvalidInput
from planner.latency import LatencyModel, WorkloadStats
from planner.simulate.metrics import goodput
from planner.slo import MAX_SLO_S, Slo
from planner.workload import Workload


def test_targets_are_validated_and_named() -> None:
    assert Slo(ttft_p99_s=0.5).itl_p99_s is None
    with pytest.raises(InvalidInput) as e:
        Slo.from_mapping({"itl_p99_s": -1.0})
    assert e.value.field == "slo.itl_p99_s"
    with pytest.raises(InvalidInput) as e:
        Slo.from_mapping({"ttft_p99_s": MAX_SLO_S * 2})
    assert e.value.field == "slo.ttft_p99_s" and "3600" in e.value.reason
    with pytest.raises(InvalidInput) as e:
        Slo.from_mapping({"e2el_p99_s": float("nan")})
    assert e.value.field == "slo.e2el_p99_s"
    with pytest.raises(InvalidInput) as e:
        Slo.from_mapping({})
    assert e.value.field == "slo" and "at least one target" in e.value.reason
    with pytest.raises(pydantic.ValidationError):
        Slo(ttft_p99_s=0.5, itl_ms=3)  # type: ignore[call-arg]


def test_goodput_judges_each_request_on_ttft_tpot_and_e2el() -> None:
    slo = Slo(ttft_p99_s=1.0, itl_p99_s=0.01, tpot_p99_s=0.05, e2el_p99_s=10.0)
    assert slo.goodput_limits_s() == {"ttft_s": 1.0, "tpot_s": 0.05, "e2el_s": 10.0}
    ttft = np.array([0.5, 1.5, 0.5, 0.5])
    tpot = np.array([0.01, 0.01, 0.06, 0.01])
    e2el = np.array([5.0, 5.0, 5.0, 11.0])
    g = goodput(ttft, tpot, e2el, slo, duration_s=2.0)
    assert g.good_requests == 1 and g.goodput_rps == 0.5 and g.good_fraction == 0.25
    assert g.slo == {"ttft_s": 1.0, "tpot_s": 0.05, "e2el_s": 10.0}
    # ITL is per token: it never fails a request by itself
    assert goodput(ttft, tpot, e2el, Slo(itl_p99_s=1e-6), 2.0).good_requests == 4


def test_the_analytic_capacity_needs_a_ttft_or_itl_target() -> None:
    r = Deployment(model="Qwen/Qwen3-8B", gpu="h100-sxm").resolve()
    w = Workload.from_mapping({"arrivals": {"requests_per_s": 1}, "input_tokens": 500, "output_tokens": 50})
    m = LatencyModel(r, WorkloadStats.of(w))
    with pytest.raises(InvalidInput) as e:
        m.capacity(Slo(tpot_p99_s=0.05))
    assert e.value.field == "slo"
    cap = m.capacity(Slo(ttft_p99_s=1.0, tpot_p99_s=0.05))  # the TPOT target is the simulator's
    assert cap.feasible and cap.to_dict()["slo"] == {"ttft_p99_ms": 1000.0, "itl_p99_ms": None}
