"""`capplan simulate`: the evaluate file run through the simulator. Happy paths (sampled workload,
trace replayed as recorded or time-scaled, disaggregated), the JSON contract, byte-identical
output for the same seed, bad input as one line naming the field (exit 2), and the glue in
planner/simulate/run.py."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import run_cli, write

from planner.deployment import Deployment
from planner.simulate.run import (
    engine_config,
    kv_transfer,
    run,
    scale_workload,
    tile,
    trace_requests,
    workload_requests,
)
from planner.traces import Trace
from planner.workload import Workload

TINY = """
deployment: {model: Qwen/Qwen3-8B, gpu: h100-sxm, max_num_batched_tokens: 2048}
workload:
  name: tiny
  arrivals: {requests_per_s: 4}
  input_tokens: {pairs: [[200, 0.5], [900, 0.5]]}
  output_tokens: {pairs: [[20, 0.7], [120, 0.3]]}
"""

DISAGG = """
deployment:
  model: Qwen/Qwen3-8B
  gpu: h100-sxm
  disaggregated: {prefill_replicas: 1, decode_replicas: 2, kv_transfer_bandwidth_bytes_per_s: 1.0e9}
workload:
  arrivals: {requests_per_s: 3}
  input_tokens: {constant: 1000}
  output_tokens: {constant: 50}
slo: {ttft_p99_ms: 2000, itl_p99_ms: 100}
"""

BUCKETED = """
deployment: {model: Qwen/Qwen3-8B, gpu: h100-sxm}
workload:
  arrivals:
    buckets: [{duration_s: 20, requests_per_s: 2}, {duration_s: 10, requests_per_s: 6}]
  input_tokens: {constant: 300}
  output_tokens: {constant: 10}
"""

# 40 requests, one every 0.5 s except a burst of five at t = 10 s (seconds timestamps).
TRACE_ROWS = [
    (0.5 * i if i < 20 else 10.0 + 0.01 * (i - 20) if i < 25 else 0.5 * i, 100 + 37 * i, 5 + i % 7)
    for i in range(40)
]

SIM_KEYS = {
    "deployment",
    "input",
    "mode",
    "requests",
    "completed",
    "duration_s",
    "ttft",
    "itl",
    "tpot",
    "e2el",
    "goodput",
    "preemptions",
    "peak_kv_blocks",
    "peak_kv_fraction",
    "max_queue_length",
    "replicas",
    "series",
    "ttft_p50_ms",
    "ttft_p90_ms",
    "ttft_p99_ms",
    "itl_p50_ms",
    "itl_p90_ms",
    "itl_p99_ms",
    "tpot_p99_ms",
    "e2el_p99_ms",
    "slo",
    "slo_met",
}


cli = run_cli


def trace_csv(tmp_path: Path) -> Path:
    p = tmp_path / "trace.csv"
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"] + [f"{t},{c},{g}" for t, c, g in TRACE_ROWS]
    p.write_text("\n".join(lines) + "\n")
    return p


def sim_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    rc, out, err = cli([*argv, "--json"], capsys)
    assert rc == 0, err
    return json.loads(out)


# --- happy paths -----------------------------------------------------------------------------


def test_text_output_on_a_tiny_workload(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(tmp_path, TINY)
    rc, out, err = cli(
        [
            "simulate",
            str(f),
            "--requests",
            "150",
            "--slo-ttft-p99-ms",
            "500",
            "--slo-tpot-p99-ms",
            "40",
            "--series",
        ],
        capsys,
    )
    assert rc == 0, err
    for text in (
        "TTFT",
        "ITL",
        "TPOT",
        "E2E",
        "p99",
        "goodput (TTFT <= 500 ms, TPOT <= 40 ms)",
        "preemptions",
    ):
        assert text in out
    assert "workload tiny sampled with seed 0: 150" in out
    assert "per minute" in out and "arrivals" in out
    assert err == ""


def test_json_keys_and_consistency(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(tmp_path, TINY)
    d = sim_json(["simulate", str(f), "--requests", "200", "--slo-ttft-p99-ms", "800", "--seed", "3"], capsys)
    assert set(d) >= SIM_KEYS
    assert d["mode"] == "colocated" and d["requests"] == d["completed"] == 200
    assert d["input"]["source"] == "workload" and d["input"]["seed"] == 3 and d["input"]["requests"] == 200
    assert d["deployment"]["max_num_batched_tokens"] == 2048 and d["deployment"]["kv_cache_blocks"] > 0
    assert d["ttft_p99_ms"] == pytest.approx(d["ttft"]["p99_s"] * 1e3)
    assert 0 < d["ttft_p50_ms"] <= d["ttft_p90_ms"] <= d["ttft_p99_ms"]
    assert 0 < d["itl_p50_ms"] <= d["itl_p99_ms"]
    gp = d["goodput"]
    assert gp["slo"]["ttft_s"] == pytest.approx(0.8) and 0 <= gp["good_requests"] <= 200
    assert d["slo"]["ttft_p99_ms"] == 800 and d["slo_met"]["ttft_p99"] == (d["ttft_p99_ms"] <= 800)
    assert sum(d["series"]["arrivals"]) == 200 and sum(d["series"]["completions"]) == 200
    assert d["max_queue_length"] >= 1 and 0 < d["peak_kv_fraction"] <= 1


def test_same_seed_is_byte_identical_across_runs(tmp_path: Path) -> None:
    f = write(tmp_path, TINY)
    argv = [sys.executable, "-m", "planner.cli", "simulate", str(f), "--requests", "300", "--seed", "7"]
    outs = [subprocess.run(argv, capture_output=True, check=True).stdout for _ in range(2)]
    assert outs[0] == outs[1] and outs[0]
    js = [subprocess.run([*argv, "--json"], capture_output=True, check=True).stdout for _ in range(2)]
    assert js[0] == js[1]
    other = subprocess.run([*argv[:-1], "8", "--json"], capture_output=True, check=True).stdout
    assert other != js[0]


def test_default_amount_is_one_pass_over_the_buckets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = write(tmp_path, BUCKETED)
    d = sim_json(["simulate", str(f)], capsys)
    span = d["input"]["span_s"]
    assert span < 30.0 and d["requests"] > 40  # ~100 expected in the 30 s series
    d2 = sim_json(["simulate", str(f), "--horizon-s", "10"], capsys)
    assert d2["requests"] < d["requests"] and d2["input"]["span_s"] < 10.0


def test_requests_per_s_rescales_the_workload(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(tmp_path, TINY)
    d = sim_json(["simulate", str(f), "--requests", "400", "--requests-per-s", "12"], capsys)
    assert d["input"]["mean_requests_per_s_target"] == 12
    assert d["input"]["mean_requests_per_s"] == pytest.approx(12, rel=0.2)


def test_trace_replay_recorded_vs_scaled(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    yaml = write(tmp_path, TINY)
    csv = trace_csv(tmp_path)
    rec = sim_json(["simulate", str(yaml), "--trace", str(csv)], capsys)
    assert rec["input"]["source"] == "trace" and rec["input"]["replay"] == "recorded"
    assert rec["requests"] == 40 and rec["input"]["span_s"] == pytest.approx(19.5)
    assert rec["input"]["mean_input_tokens"] == pytest.approx(np.mean([c for _, c, _ in TRACE_ROWS]))
    sc = sim_json(
        ["simulate", str(yaml), "--trace", str(csv), "--replay", "scaled", "--requests-per-s", "20"], capsys
    )
    assert sc["input"]["replay"] == "scaled" and sc["requests"] == 40
    # time-scaled: 40 requests at a mean of 20/s span 2 s; the lengths are the trace's
    assert sc["input"]["span_s"] == pytest.approx(40 / 20, rel=1e-9)
    assert sc["input"]["mean_input_tokens"] == rec["input"]["mean_input_tokens"]
    assert sc["ttft_p99_ms"] >= rec["ttft_p99_ms"]  # 10x the rate: more queueing, never less
    # --requests-per-s alone implies --replay scaled
    implied = sim_json(["simulate", str(yaml), "--trace", str(csv), "--requests-per-s", "20"], capsys)
    assert implied["input"]["replay"] == "scaled" and implied["ttft"] == sc["ttft"]
    # past its end the trace is tiled
    tiled = sim_json(["simulate", str(yaml), "--trace", str(csv), "--requests", "100"], capsys)
    assert tiled["requests"] == 100 and tiled["input"]["span_s"] > 2 * 19.5


def test_builtin_trace_window(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    yaml = write(tmp_path, TINY)
    d = sim_json(["simulate", str(yaml), "--trace", "azure-conv-2023", "--horizon-s", "60"], capsys)
    assert d["input"]["name"] == "azure-conv-2023" and d["input"]["trace_requests"] == 19_366
    assert 100 < d["requests"] < 400 and d["input"]["span_s"] < 60


def test_disaggregated_deployment(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(tmp_path, DISAGG)
    d = sim_json(["simulate", str(f), "--requests", "120", "--router", "least_outstanding_tokens"], capsys)
    assert d["mode"] == "disaggregated" and d["deployment"]["router"] == "least_outstanding_tokens"
    roles = [r["role"] for r in d["replicas"]]
    assert roles == ["prefill", "decode", "decode"]
    # TTFT includes the KV transfer of 1000 tokens over a 1 GB/s link
    r = Deployment.from_mapping(
        {
            "model": "Qwen/Qwen3-8B",
            "gpu": "h100-sxm",
            "disaggregated": {
                "prefill_replicas": 1,
                "decode_replicas": 2,
                "kv_transfer_bandwidth_bytes_per_s": 1e9,
            },
        }
    ).resolve()
    assert d["ttft"]["p50_s"] > kv_transfer(r)(1000) > 0.1
    # the YAML's slo: TTFT p99 is a goodput objective; ITL p99 is checked on the p99
    assert d["goodput"]["slo"]["ttft_s"] == pytest.approx(2.0)
    assert d["slo"]["itl_p99_ms"] == 100 and d["slo_met"]["itl_p99"] is (d["itl_p99_ms"] <= 100)
    rc, text, err = cli(["simulate", str(f), "--requests", "60"], capsys)
    assert rc == 0, err
    assert "1 prefill + 2 decode replicas" in text and "prefill 0" in text and "SLO: TTFT p99" in text


def test_every_example_simulates(capsys: pytest.CaptureFixture[str]) -> None:
    root = Path(__file__).resolve().parent.parent / "examples"
    for path in sorted(root.glob("*.yaml")):
        if "\ndeployment:" not in "\n" + path.read_text():
            continue  # a plan request: it asks for a deployment
        d = sim_json(["simulate", str(path), "--requests", "100"], capsys)
        assert d["completed"] == 100, path.name


# --- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        (["--requests", "0"], "--requests"),
        (["--requests", "ten"], "--requests"),
        (["--horizon-s", "-3"], "--horizon-s"),
        (["--requests", "10", "--horizon-s", "10"], "--horizon-s"),
        (["--seed", "-1"], "--seed"),
        (["--seed", "x"], "--seed"),
        (["--router", "random"], "--router"),
        (["--replay", "scaled"], "--replay"),
        (["--trace", "azure-conv-2023", "--replay", "backwards"], "--replay"),
        (["--trace", "azure-conv-2023", "--replay", "scaled"], "--requests-per-s"),
        (["--trace", "azure-conv-2023", "--replay", "recorded", "--requests-per-s", "3"], "--requests-per-s"),
        (["--trace", "no-such-trace.csv"], "--trace"),
        (["--requests-per-s", "0"], "--requests-per-s"),
        (["--slo-ttft-p99-ms", "-5"], "--slo-ttft-p99-ms"),
        (["--slo-tpot-p99-ms", "nan"], "--slo-tpot-p99-ms"),
        (["--slo-e2e-p99-ms", "fast"], "--slo-e2e-p99-ms"),
        (["--profile", "nope.json"], "--profile"),
    ],
)
def test_bad_flags_name_the_flag(
    extra: list[str], field: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = write(tmp_path, TINY)
    rc, out, err = cli(["simulate", str(f), *extra], capsys)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"capplan: error: {field}:"), err


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("deployment: {model: Qwen/Qwen3-8B, gpu: h100-sxm}\n", "workload"),
        (TINY.replace("requests_per_s: 4", "requests_per_s: -4"), "workload.arrivals.requests_per_s"),
        (TINY.replace("gpu: h100-sxm", "gpu: tpu-v9"), "deployment.gpu"),
        (
            TINY.replace("max_num_batched_tokens: 2048", "max_num_batched_tokens: 2048, bogus: 1"),
            "deployment.bogus",
        ),
        # a prompt longer than the model's context (and a replica's KV cache)
        (TINY.replace("[900, 0.5]", "[3000000, 0.5]"), "workload"),
    ],
)
def test_bad_yaml_names_the_field(
    text: str, field: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = write(tmp_path, text)
    rc, out, err = cli(["simulate", str(f), "--requests", "20"], capsys)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"capplan: error: {field}:"), err


def test_bad_trace_rows_name_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(tmp_path, TINY)
    bad = tmp_path / "bad.csv"
    bad.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n0,10,5\n1,ten,5\n")
    rc, _, err = cli(["simulate", str(f), "--trace", str(bad)], capsys)
    assert rc == 2 and err.startswith("capplan: error: --trace:line 3.ContextTokens:"), err
    big = tmp_path / "big.csv"
    big.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n0,10,5\n1,3000000,5\n")
    rc, _, err = cli(["simulate", str(f), "--trace", str(big)], capsys)
    assert rc == 2 and err.startswith("capplan: error: --trace: request 1 has a 3,000,000-token prompt"), err


def test_missing_file(capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = cli(["simulate", "/no/such/file.yaml"], capsys)
    assert rc == 2 and err.startswith("capplan: error: /no/such/file.yaml: no such file")


# --- glue ------------------------------------------------------------------------------------


def test_tile_repeats_with_shifted_timestamps() -> None:
    t = np.array([0.0, 1.0, 3.0])
    reqs = tile((t, [1, 2, 3], [4, 5, 6]), count=7)
    assert len(reqs) == 7
    # period = span (3) + mean gap (1.5)
    np.testing.assert_allclose(reqs.arrival_s, [0, 1, 3, 4.5, 5.5, 7.5, 9.0])
    assert reqs.prompt_tokens.tolist() == [1, 2, 3, 1, 2, 3, 1]
    by_horizon = tile((t, [1, 2, 3], [4, 5, 6]), horizon_s=6.0)
    assert by_horizon.arrival_s.max() < 6.0 and len(by_horizon) == 5


def test_trace_requests_scaled_keeps_lengths_and_order() -> None:
    tr = Trace.from_arrays(
        np.array([0.0, 2.0, 3.0, 10.0]), np.array([5, 6, 7, 8]), np.array([1, 2, 3, 4]), "t"
    )
    rec = trace_requests(tr)
    assert rec.arrival_s.tolist() == [0.0, 2.0, 3.0, 10.0]
    sc = trace_requests(tr, "scaled", 4.0)
    assert sc.prompt_tokens.tolist() == [5, 6, 7, 8]
    assert sc.arrival_s[-1] == pytest.approx(1.0)  # 4 requests at 4/s: the 10 s span becomes 1 s
    with pytest.raises(ValueError, match="requests_per_s"):
        trace_requests(tr, "scaled")
    with pytest.raises(ValueError, match="requests_per_s"):
        trace_requests(tr, "recorded", 2.0)


def test_scale_workload_keeps_the_bucket_shape() -> None:
    wl = Workload.from_mapping(
        {
            "arrivals": {
                "buckets": [{"duration_s": 60, "requests_per_s": 1}, {"duration_s": 60, "requests_per_s": 3}],
                "burstiness": 0.5,
            },
            "input_tokens": {"constant": 100},
            "output_tokens": {"constant": 10},
        }
    )
    s = scale_workload(wl, 6.0)
    assert s.arrivals.mean_requests_per_s == pytest.approx(6.0)
    assert [b.requests_per_s for b in s.arrivals.buckets or ()] == pytest.approx([3.0, 9.0])
    assert s.arrivals.burstiness == 0.5 and s.input_tokens == wl.input_tokens


def test_run_matches_the_engine_config() -> None:
    r = Deployment(model="Qwen/Qwen3-8B", gpu="h100-sxm", replicas=2, max_num_batched_tokens=4096).resolve()
    cfg = engine_config(r, 0.25)
    assert cfg.kv_cache_blocks == r.kv.kv_cache_blocks and cfg.max_num_batched_tokens == 4096
    assert cfg.prefix_cache_hit_fraction == 0.25
    wl = Workload.from_mapping(
        {
            "arrivals": {"requests_per_s": 5},
            "input_tokens": {"constant": 500},
            "output_tokens": {"constant": 20},
        }
    )
    reqs = workload_requests(wl, 1, count=50)
    res = run(r, reqs)
    assert res.completed == 50 and len(res.replicas) == 2
    assert all(math.isfinite(x) for x in (res.ttft.p99_s, res.itl.p99_s))


def test_profile_defaults_like_evaluate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(tmp_path, TINY)
    rc, out, _ = cli(["simulate", str(f), "--requests", "50", "--json"], capsys)
    assert rc == 0
    simulated = json.loads(out)["deployment"]["profile"]
    rc, out, _ = cli(["evaluate", str(f), "--json"], capsys)
    assert rc == 0
    # both default to the registry's auto: a measured profile where one exists for the GPU
    assert json.loads(out)["deployment"]["profile"] == simulated != "theoretical"
