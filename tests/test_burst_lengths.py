"""A burst's lengths and its tail (planner/measurements/dataset_lengths.py, burst.py): the shipped
ShareGPT length sample is the published one, scaled to a run's mean; the tail's drain is the
hand-derived sum of decode steps; a ShareGPT burst is predicted at the sample, an open loop at
its means, a run with per-request lengths at those."""

from __future__ import annotations

import json
from importlib import resources

import numpy as np
import pytest

from planner.costmodel.profiles import resolve_profile
from planner.deployment import Deployment
from planner.latency import LatencyModel, WorkloadStats
from planner.latency.replica import Replica, decode_step_s
from planner.measurements import builtin_corpus
from planner.measurements.burst import burst_tail_s, running_share
from planner.measurements.dataset_lengths import dataset_lengths, dataset_sample, scaled_sample
from planner.measurements.prediction import predict_run, run_workload
from planner.measurements.serving_run import PerRequest
from planner.workload import Arrivals, LengthDistribution, Workload


def _run(run_id: str):  # type: ignore[no-untyped-def]
    (run,) = [r for r in builtin_corpus() if r.id == run_id]
    return run


def test_the_sharegpt_sample_is_the_published_one() -> None:
    """The arrays of Lambda's 640-prompt result file: they sum to its total_input_tokens (129,604)
    and total_output_tokens (125,571); its 37 zero-length outputs (a request ended at its first
    token) read as 1 token."""
    doc = json.loads(
        (resources.files("planner") / "data" / "lengths" / "sharegpt-vllm-bench.json").read_text()
    )
    assert "61d4f034f3081a263e5c25f1ae7f9c5312afebd2" in doc["source"]["url"]
    assert (len(doc["input_lens"]), sum(doc["input_lens"])) == (640, 129_604)
    assert (len(doc["output_lens"]), sum(doc["output_lens"])) == (640, 125_571)
    out = dataset_sample("sharegpt", "output")
    assert out is not None and min(out) == 1 and sum(out) == 125_571 + 37
    assert dataset_sample("sonnet", "output") is None and dataset_lengths(None, "input", 100.0) is None


def test_a_scaled_sample_keeps_its_shape_at_the_run_mean() -> None:
    sample = (1, 3, 6)  # mean 10/3; x 3: (3, 9, 18), mean 10
    assert scaled_sample(sample, 10.0) == (3, 9, 18)
    dist = dataset_lengths("sharegpt", "output", 201.6)
    assert dist is not None and dist.mean() == pytest.approx(201.6, abs=0.5)
    base = np.asarray(dataset_sample("sharegpt", "output"), dtype=float)
    assert dist.std() / dist.mean() == pytest.approx(base.std() / base.mean(), rel=0.01)


def test_the_running_share_fresh_and_queued() -> None:
    """Outputs of 11 or 21 tokens (10 or 20 decode steps), half each. All at once: everyone runs
    until step 10, half until step 20. Fed by a queue (the equilibrium residual): constant 11
    tokens leave (10 - k) / 10 running after k steps."""
    two = LengthDistribution(pairs=((11, 0.5), (21, 0.5)))
    k = np.arange(22, dtype=float)
    expected = np.where(k < 10, 1.0, np.where(k < 20, 0.5, 0.0))
    assert running_share(two, k, queued=False) == pytest.approx(expected)
    const = LengthDistribution(constant=11)
    assert running_share(const, np.arange(11, dtype=float), queued=True) == pytest.approx(
        (10 - np.arange(11)) / 10
    )


def _replica(seats: int) -> Replica:
    wl = Workload(
        arrivals=Arrivals(requests_per_s=1.0),
        input_tokens=LengthDistribution(constant=200),
        output_tokens=LengthDistribution(constant=200),
    )
    dep = Deployment(model="Qwen/Qwen3-8B", gpu="h100-sxm", max_num_seqs=seats)
    resolved = dep.resolve(resolve_profile("auto", "h100-sxm", "profile"))
    return LatencyModel(resolved, WorkloadStats.of(wl)).engines["colocated"].replica


def test_the_tail_is_the_drain_less_its_tokens_at_a_full_pace() -> None:
    """100 prompts, all seated (max_num_seqs 256): the two-point outputs above drain as 10 steps
    of 100 sequences and 10 of 50; the closed loop had counted their 1,500 decode steps at 100 a
    step, 15 steps of 100. Tail = 10 step(50) - 5 step(100). A constant length has none."""
    r = _replica(256)
    assert r.decode_cap >= 100
    two = LengthDistribution(pairs=((11, 0.5), (21, 0.5)))
    hand = 10 * decode_step_s(r, 50.0) - 5 * decode_step_s(r, 100.0)
    assert hand > 0.0
    assert burst_tail_s(r, two, 100) == pytest.approx(hand, rel=1e-9)
    assert burst_tail_s(r, LengthDistribution(constant=200), 100) == 0.0


def test_a_queued_burst_drains_from_the_equilibrium_residual() -> None:
    """1,000 prompts, 64 seats: 64 sequences at constant 11 tokens drain 64 (10 - k) / 10 a step
    (k = 0..9, rounded, at least 1); the closed loop counted 5.5 steps of 64 for them."""
    r = _replica(64)
    assert r.decode_cap == 64
    const = LengthDistribution(constant=11)
    drain = sum(decode_step_s(r, float(max(round(64 * (10 - k) / 10), 1))) for k in range(10))
    assert burst_tail_s(r, const, 1_000) == pytest.approx(drain - 5.5 * decode_step_s(r, 64.0), rel=1e-9)


def test_a_sharegpt_burst_runs_at_the_sample_an_open_loop_at_its_means() -> None:
    burst = _run("gpustack-qwen3-32b-a100-80gb-sxm-sharegpt-1000")
    wl = run_workload(burst).workload
    assert wl.output_tokens.samples is not None and wl.input_tokens.samples is not None
    assert wl.output_tokens.mean() == pytest.approx(burst.mean_output_tokens, abs=0.5)
    pred = predict_run(burst, "auto")
    assert any("tail" in n for n in pred.notes)
    at_means = burst.model_copy(update={"load": burst.load.model_copy(update={"dataset": "other"})})
    assert run_workload(at_means).workload.output_tokens.constant is not None
    no_tail = predict_run(at_means, "auto").output_throughput_tok_s
    assert pred.output_throughput_tok_s is not None and no_tail is not None
    assert pred.output_throughput_tok_s < no_tail
    open_loop = _run("doks-llama31-70b-fp8-h200-sharegpt-rate-1p0")
    assert run_workload(open_loop).workload.output_tokens.constant is not None


def test_a_run_with_per_request_lengths_runs_at_them() -> None:
    run = _run("doks-llama31-70b-fp8-h200-sharegpt-rate-1p0")
    detailed = PerRequest(input_lens=[100, 300], output_lens=[0, 50], ttfts_s=[0.1, 0.1], itls_s=[[], [0.01]])
    kept = run.model_copy(update={"measured": run.measured.model_copy(update={"per_request": detailed})})
    wl = run_workload(kept).workload
    assert wl.input_tokens.samples == (100, 300) and wl.output_tokens.samples == (1, 50)
