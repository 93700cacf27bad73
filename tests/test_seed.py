"""Theoretical mode reproduces every number the seed article prints, through the Python API and
through `capplan analyze --json`.

Tolerance: half a unit of the printed digit, plus 1e-4 relative because the article rounds the
parameter count to 8.19e9 while the catalog computes 8.1907e9 from config.json (9e-5 apart).
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from planner.catalog.gpus import get_gpu
from planner.catalog.models import get_model
from planner.catalog.prices import get_price_list
from planner.cli import main
from planner.costmodel import analyses
from planner.costmodel.roofline import Replica
from planner.workload import LengthDistribution

BASE = ["--model", "Qwen/Qwen3-8B", "--gpu", "h100-sxm", "--profile", "theoretical", "--json"]
PRICE = ["--usd-per-gpu-hour", "4.29"]


def printed(ours: float, shown: float, decimals: int) -> None:
    tol = 0.5 * 10.0**-decimals + 1e-4 * abs(shown)
    assert abs(ours - shown) <= tol, f"{ours} does not print as {shown} ({decimals} decimals)"


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["analyze", *argv]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def replica() -> Replica:
    return Replica(get_model("Qwen/Qwen3-8B"), get_gpu("h100-sxm"))


def test_setup_matches_catalog(seed: dict[str, Any], replica: Replica) -> None:
    s = seed["setup"]
    assert replica.model.total_params == pytest.approx(s["params"], rel=1e-3)
    assert replica.kv_bytes_per_token == s["kv_bytes_per_token"]
    assert replica.model.layers == s["layers"]
    assert replica.model.query_dim == s["query_heads_times_head_dim"]
    assert replica.gpu.bandwidth == s["hbm_bandwidth_bytes_per_s"]
    assert replica.gpu.matmul_flops("bf16") == s["bf16_dense_flops"]
    # the seed's $4.29 is Lambda's 1x H100 SXM (the catalog's default list is RunPod's)
    assert get_price_list("lambda-2026-09-25").prices["h100-sxm"].usd_per_gpu_hour == s["usd_per_gpu_hour"]
    assert s["hours_per_month"] == analyses.HOURS_PER_MONTH
    assert round(replica.compute_knee_tokens) == seed["compute_bound_knee_tokens_per_step"]


def _check_sweep(rows: list[dict[str, Any]], seed: dict[str, Any]) -> None:
    want = seed["decode_concurrency_sweep"]
    assert [r["concurrency"] for r in rows] == [w["concurrency"] for w in want]
    for r, w in zip(rows, want, strict=True):
        printed(r["step_ms"], w["step_ms"], 2)
        printed(r["user_tokens_per_s"], w["user_tokens_per_s"], 0)
        printed(r["gpu_tokens_per_s"], w["gpu_tokens_per_s"], 0)
        printed(r["usd_per_million_output_tokens"], w["usd_per_million_output_tokens"], 2)
        assert r["bound"] == "memory"
        assert r["fits_in_memory"] is True  # 256 x 1,500 tokens fit an H100's KV cache


def test_concurrency_sweep(
    seed: dict[str, Any], replica: Replica, capsys: pytest.CaptureFixture[str]
) -> None:
    ns = [w["concurrency"] for w in seed["decode_concurrency_sweep"]]
    _check_sweep(analyses.concurrency_sweep(replica, 1500, ns, 4.29)["rows"], seed)
    out = cli(
        capsys,
        "concurrency",
        *BASE,
        *PRICE,
        "--context-tokens",
        "1500",
        "--concurrency",
        ",".join(map(str, ns)),
    )
    _check_sweep(out["rows"], seed)


def _check_static(out: dict[str, Any], seed: dict[str, Any]) -> None:
    want = seed["static_batching"]
    printed(out["mean_output_tokens"], want["mean_output_tokens"], 0)
    for r, w in zip(out["rows"], want["rows"], strict=True):
        assert r["batch"] == w["batch"]
        printed(r["expected_longest_tokens"], w["expected_longest_tokens"], 0)
        printed(r["slot_utilization"], w["slot_utilization"], 3)
        printed(r["usd_per_million_output_tokens"], w["usd_per_million_output_tokens"], 2)
    printed(
        out["rows"][-1]["continuous_usd_per_million_output_tokens"],
        want["continuous_32_usd_per_million_output_tokens"],
        2,
    )


def test_static_batching(seed: dict[str, Any], replica: Replica, capsys: pytest.CaptureFixture[str]) -> None:
    pairs = [(int(t), float(p)) for t, p in seed["static_batching"]["output_length_distribution"]]
    dist = LengthDistribution(pairs=pairs)
    _check_static(analyses.static_batching(replica, 1500, [8, 32], dist, 4.29), seed)
    lengths = ",".join(f"{t}:{p}" for t, p in pairs)
    out = cli(
        capsys,
        "static-batching",
        *BASE,
        *PRICE,
        "--context-tokens",
        "1500",
        "--batch",
        "8,32",
        "--output-lengths",
        lengths,
    )
    _check_static(out, seed)
    # the article's aside: 1 - 0.95^32 of batches of 32 hold a 2,000-token answer
    assert pytest.approx(0.81, abs=0.005) == 1 - 0.95**32


def _check_chunked(rows: list[dict[str, Any]], seed: dict[str, Any]) -> None:
    want = seed["chunked_prefill"]["rows"]
    for r, w in zip(rows, want, strict=True):
        assert r["chunk_tokens"] == w["token_budget"]
        assert r["steps"] == w["steps"]
        printed(r["prompt_prefill_ms"], w["prompt_prefill_ms"], 0)
        printed(r["worst_itl_ms"], w["worst_itl_ms"], 1)


def test_chunked_prefill(seed: dict[str, Any], replica: Replica, capsys: pytest.CaptureFixture[str]) -> None:
    cp = seed["chunked_prefill"]
    sizes = [w["token_budget"] for w in cp["rows"]]
    rows = analyses.chunked_prefill(
        replica, cp["prompt_tokens"], cp["running_decodes"], cp["decode_context_tokens"], sizes
    )["rows"]
    _check_chunked(rows, seed)
    chunk_flag = ",".join("none" if s is None else str(s) for s in sizes)
    out = cli(
        capsys,
        "chunked-prefill",
        *BASE,
        "--prompt-tokens",
        "16000",
        "--decodes",
        "64",
        "--context-tokens",
        "1500",
        "--chunk",
        chunk_flag,
    )
    assert out["reading"] == "chunk"
    _check_chunked(out["rows"], seed)
    # the budget that gives each chunk under vLLM V1 (decodes are inside the budget)
    assert out["rows"][0]["max_num_batched_tokens"] == 512 + 64


def test_budget_reading_takes_decodes_out_of_the_chunk(replica: Replica) -> None:
    # V1: a 2,048 budget with 64 decodes leaves 1,984 prompt tokens a step: ceil(16000/1984) = 9 steps
    rows = analyses.chunked_prefill(replica, 16000, 64, 1500, [2048], reading="budget")["rows"]
    assert rows[0]["chunk_tokens"] == 1984
    assert rows[0]["steps"] == math.ceil(16000 / 1984) == 9
    assert rows[0]["max_num_batched_tokens"] == 2048


def test_prefill(seed: dict[str, Any], replica: Replica, capsys: pytest.CaptureFixture[str]) -> None:
    want = seed["prefill_throughput"]
    for out in (
        analyses.prefill(replica, 1500, 4.29),
        cli(capsys, "prefill", *BASE, *PRICE, "--prompt-tokens", "1500"),
    ):
        assert round(out["tokens_per_s"], -2) == want["tokens_per_s"]  # "about 58,800"
        printed(out["usd_per_million_input_tokens"], want["usd_per_million_input_tokens"], 2)
        assert out["bound"] == "compute"


def test_long_context(seed: dict[str, Any], replica: Replica, capsys: pytest.CaptureFixture[str]) -> None:
    want = seed["long_context"]
    out = cli(capsys, "concurrency", *BASE, *PRICE, "--context-tokens", "8000", "--concurrency", "32,64")
    printed(out["rows"][0]["usd_per_million_output_tokens"], want["usd_per_million_output_tokens"], 2)
    assert out["rows"][0]["fits_in_memory"] is True
    assert out["rows"][1]["fits_in_memory"] is False  # "64 do not even fit on one card"
    # "2.3x" the 1,500-token cost at the same concurrency
    short = analyses.concurrency_sweep(replica, 1500, [32], 4.29)["rows"][0]["usd_per_million_output_tokens"]
    assert out["rows"][0]["usd_per_million_output_tokens"] / short == pytest.approx(2.3, abs=0.05)


def test_low_utilization(seed: dict[str, Any], replica: Replica, capsys: pytest.CaptureFixture[str]) -> None:
    want = seed["low_utilization"]
    for out in (
        analyses.utilization(replica, 1500, want["output_tokens_per_day"], 4.29),
        cli(
            capsys,
            "utilization",
            *BASE,
            *PRICE,
            "--context-tokens",
            "1500",
            "--output-tokens-per-day",
            "10000000",
        ),
    ):
        printed(out["usd_per_million_output_tokens"], want["usd_per_million_output_tokens"], 2)
        printed(out["usd_per_month"], 3132, 0)  # "3,132 dollars a month"
        printed(out["floor_usd_per_million_output_tokens"], 0.17, 2)
        # the article says "60x" for 10.30 / 0.17 = 60.6: it truncates
        assert int(out["times_floor"]) == want["times_theoretical_floor"]
