"""vLLM's front end per request (Profile.request_overhead_s): a constant on every TTFT, in the
analytic model and the simulator alike, that moves no step. Derived from published runs in
tests/test_kernel_profiles.py; checked against their TTFTs in tests/test_published_runs.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner.costmodel.profiles import resolve_profile
from planner.deployment import Deployment, Disaggregation
from planner.latency import LatencyModel, Slo, WorkloadStats
from planner.workload import Workload

WORKLOAD = Workload.from_mapping(
    {
        "arrivals": {"requests_per_s": 4.0},
        "input_tokens": {"percentiles": {"p10": 150, "p50": 800, "p90": 2000, "p99": 4000, "max": 8000}},
        "output_tokens": {"constant": 200},
    }
)


def _models(overhead_s: float, disaggregated: bool = False) -> tuple[LatencyModel, LatencyModel]:
    prof = resolve_profile("calibrated", "h100-sxm")
    if disaggregated:
        dep = Deployment(
            model="Qwen/Qwen3-8B",
            gpu="h100-sxm",
            disaggregated=Disaggregation(prefill_replicas=1, decode_replicas=1),
        )
    else:
        dep = Deployment(model="Qwen/Qwen3-8B", gpu="h100-sxm")
    stats = WorkloadStats.of(WORKLOAD)
    with_front = LatencyModel(dep.resolve(prof.model_copy(update={"request_overhead_s": overhead_s})), stats)
    without = LatencyModel(dep.resolve(prof.model_copy(update={"request_overhead_s": 0.0})), stats)
    return with_front, without


@pytest.mark.parametrize("disaggregated", [False, True])
def test_the_front_end_shifts_every_ttft_quantile_and_nothing_else(disaggregated: bool) -> None:
    a, b = _models(0.050, disaggregated)
    pa, pb = a.evaluate(), b.evaluate()
    assert pa.ttft_p50_s == pytest.approx(pb.ttft_p50_s + 0.050, rel=1e-9)
    assert pa.ttft_p99_s == pytest.approx(pb.ttft_p99_s + 0.050, rel=1e-9)
    assert pa.itl_p50_s == pb.itl_p50_s and pa.itl_p99_s == pb.itl_p99_s
    assert a.max_stable_requests_per_s() == b.max_stable_requests_per_s()


def test_a_ttft_target_loses_exactly_the_front_end() -> None:
    """Capacity under a TTFT target T with the front end equals capacity under T - 50 ms without
    it (the TTFT-bound root-find sees the same curve shifted)."""
    a, b = _models(0.050)
    got = a.capacity(Slo(ttft_p99_s=0.400)).max_requests_per_s_within_slo
    want = b.capacity(Slo(ttft_p99_s=0.350)).max_requests_per_s_within_slo
    assert got == pytest.approx(want, rel=1e-3)
    assert got < b.capacity(Slo(ttft_p99_s=0.400)).max_requests_per_s_within_slo


def test_profile_files_without_the_field_mean_no_front_end(tmp_path: Path) -> None:
    shipped = json.loads(resolve_profile("calibrated", "h100-sxm").model_dump_json())
    assert shipped["request_overhead_s"] > 0
    del shipped["request_overhead_s"]
    shipped["warning"] = None
    path = tmp_path / "old.json"
    path.write_text(json.dumps({k: v for k, v in shipped.items() if v is not None}))
    assert resolve_profile(str(path), "h100-sxm").request_overhead_s == 0.0
    assert resolve_profile("theoretical", "h100-sxm").request_overhead_s == 0.0
