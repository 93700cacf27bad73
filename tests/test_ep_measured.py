"""Expert parallelism priced from measured kernels (planner.costmodel.ep_measured): the shipped
table against the measured rows it is derived from, the measured ratio and all-to-all in steps
derived by hand, and every case off the table unchanged.

Measured rows: tests/data/aiconfigurator_moe_h100.csv (one fused-MoE layer, ms) and
tests/data/aiconfigurator_moe_a2a_h100.csv (DeepEP calls, us), both aiconfigurator 0.12.0's vLLM
0.24.0 tables for H100 SXM (their headers name the files). Qwen3-30B-A3B: L 48, E 128, k 8,
h 2048, experts of 3 x 2048 x 768 parameters (9,437,184 bytes in bf16).
"""

from __future__ import annotations

import csv
import importlib.util
import json
import math
import statistics
import sys
from pathlib import Path

import pytest

from planner.catalog.gpus import get_gpu
from planner.catalog.models import get_model
from planner.costmodel import expert_parallel, replica_coefficients
from planner.costmodel.ep_measured import all_to_all_measured, moe_term, table_note
from planner.costmodel.expert_parallel import ExpertParallel
from planner.costmodel.profile import THEORETICAL
from planner.costmodel.steptime import batch_time_s, decode_run_time_s, step_coefficients

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "planner" / "costmodel" / "data" / "expert_parallel" / "h100-sxm.json"
QWEN, MIXTRAL = "Qwen/Qwen3-30B-A3B", "mistralai/Mixtral-8x7B-v0.1"
EXPERT_BYTES = 3 * 2048 * 768 * 2


def _rows(name: str) -> list[dict[str, str]]:
    lines = (ROOT / "tests" / "data" / name).read_text().splitlines()
    return list(csv.DictReader(line for line in lines if not line.startswith("#")))


def _layer_ms(shape: str, tp: int, ep: int) -> dict[int, float]:
    return {
        int(r["num_tokens"]): float(r["latency_ms"])
        for r in _rows("aiconfigurator_moe_h100.csv")
        if (r["model"], int(r["moe_tp_size"]), int(r["moe_ep_size"]), r["distribution"])
        == (shape, tp, ep, "balanced")
    }


def test_table_rows_reproduce_the_measured_layers() -> None:
    """Every ratio of the shipped table is the measured EP layer over the measured TP layer of
    the same shape, size and token count (4 decimals); every shape and size measured both ways
    is in it (Qwen3-30B-A3B and Mixtral-8x7B at EP 2, 4, 8)."""
    table = json.loads(TABLE.read_text())
    shapes = {QWEN: "qwen3-30b-a3b", MIXTRAL: "mixtral-8x7b"}
    seen = set()
    for row in table["moe_layers"]:
        ep, tp = (
            _layer_ms(shapes[row["model"]], 1, row["ep_size"]),
            _layer_ms(shapes[row["model"]], row["ep_size"], 1),
        )
        assert row["tokens"] == sorted(ep) == sorted(tp) and len(row["tokens"]) == 27
        assert row["ep_over_tp"] == [round(ep[t] / tp[t], 4) for t in row["tokens"]]
        seen.add((row["model"], row["ep_size"]))
    assert seen == {(m, e) for m in shapes for e in (2, 4, 8)}
    # docs/expert-parallel.md's medians: Qwen EP 4 1.06x, Mixtral EP 8 1.66x
    q4 = next(r for r in table["moe_layers"] if (r["model"], r["ep_size"]) == (QWEN, 4))
    assert statistics.median(q4["ep_over_tp"]) == pytest.approx(1.06, abs=0.005)
    assert "Apache-2.0" in table["license"] and "aiconfigurator 0.12.0" in table["source"]


def test_table_all_to_all_reproduces_the_measured_calls() -> None:
    """The floor: the median low-latency DeepEP call at <= 64 tokens per rank, per direction; the
    efficiency: 8 routed copies x h x 2 bytes x 7/8 per token at EP 8 over 450 GB/s, divided by
    the high-throughput call's time less that floor, median over the calls of >= 4,096 tokens."""
    rows, a2a = _rows("aiconfigurator_moe_a2a_h100.csv"), json.loads(TABLE.read_text())["all_to_all"]
    eff = []
    for phase in ("dispatch", "combine"):
        small = [float(r["latency_us"]) for r in rows
                 if (r["comm_backend"], r["phase"]) == ("deepep_ll", phase) and int(r["num_tokens"]) <= 64]  # fmt: skip
        floor_us = statistics.median(small)
        assert a2a["floor_s_per_call"][phase] == pytest.approx(floor_us * 1e-6, abs=1e-12)
        for r in rows:
            if (r["comm_backend"], r["phase"]) == ("deepep_ht", phase) and int(r["num_tokens"]) >= 4096:
                sent = int(r["num_tokens"]) * int(r["topk"]) * int(r["hidden_size"]) * 2 * 7 / 8
                eff.append(sent / 450e9 / ((float(r["latency_us"]) - floor_us) * 1e-6))
    assert a2a["bandwidth_efficiency"] == pytest.approx(statistics.median(eff), abs=5e-5)
    # the figures the docs quote: floors of 66 and 52 us per call (the catalog's latency: 8 us),
    # DeepEP moving its bytes at about 0.61 of the catalog's bandwidth
    assert (
        round(a2a["floor_s_per_call"]["dispatch"] * 1e6),
        round(a2a["floor_s_per_call"]["combine"] * 1e6),
    ) == (66, 52)
    assert round(a2a["bandwidth_efficiency"], 2) == 0.61


def test_the_tool_regenerates_the_table_byte_for_byte() -> None:
    spec = importlib.util.spec_from_file_location("ep_measured_tool", ROOT / "tools" / "ep_measured.py")
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    sys.modules["ep_measured_tool"] = tool
    spec.loader.exec_module(tool)
    assert tool.table() == TABLE.read_text()


def test_measured_ratio_in_a_prefill_step_by_hand() -> None:
    """Qwen3-30B-A3B, EP 4 over TP 4 on H100 (theoretical profile), one 4,096-token prefill: the
    hottest GPU holds 32 of 128 experts, 48 x 32 x 9,437,184 bytes, all read at 4,096 tokens
    (1 - (120/128)^4096); its expert GEMMs, 2 x 48 x 8 x 4,718,592 / 4 FLOPs a token, take 3.76 ms
    at 989 TFLOP/s, less than reading the experts (4.33 ms at 3.35 TB/s). The measured layer
    ratio at 4,096 tokens (a table point) scales that memory time: EP - TP = (rho - 1) x it."""
    q, gpu = get_model(QWEN), get_gpu("h100-sxm")
    rho = _layer_ms("qwen3-30b-a3b", 1, 4)[4096] / _layer_ms("qwen3-30b-a3b", 4, 1)[4096]
    tp4 = step_coefficients(q, gpu, THEORETICAL, 4)
    ep4 = step_coefficients(q, gpu, THEORETICAL, 4, ep=ExpertParallel())
    t = 4096.0
    read_s = 48 * 32 * EXPERT_BYTES * (1 - (120 / 128) ** t) / gpu.bandwidth
    gemm_s = 2 * 48 * 8 * 4_718_592 / 4 * t / gpu.matmul_flops("bf16")
    assert read_s > gemm_s
    excess = batch_time_s(ep4, 0, 0.0, t, t * t / 2, t) - batch_time_s(tp4, 0, 0.0, t, t * t / 2, t)
    assert excess == pytest.approx((round(rho, 4) - 1) * read_s, rel=1e-9)
    assert round(rho, 4) == 1.0619  # 6% on the MoE layers' time


def test_ratio_interpolates_in_log_tokens_and_decode_runs_pay_it() -> None:
    """Between table points the ratio is linear in log tokens; beyond the ends, the end value. A
    decode run of n sequences pays the n-token excess every step (`decode_run_time_s` summed in
    closed form agrees with its steps one by one)."""
    q, gpu = get_model(QWEN), get_gpu("h100-sxm")
    m = moe_term(q, "h100-sxm", "bf16", 4, 1, 0.5)
    assert m is not None
    row = next(
        r for r in json.loads(TABLE.read_text())["moe_layers"] if (r["model"], r["ep_size"]) == (QWEN, 4)
    )
    i = row["tokens"].index(4096)  # the next point: 6,144
    t0, t1, r0, r1 = row["tokens"][i], row["tokens"][i + 1], row["ep_over_tp"][i], row["ep_over_tp"][i + 1]
    t = math.sqrt(t0 * t1)  # halfway in log tokens
    assert m.ratio(t) == pytest.approx((r0 + r1) / 2, rel=1e-12)
    assert (m.ratio(0.3), m.ratio(1e6)) == (row["ep_over_tp"][0], row["ep_over_tp"][-1])
    ep4 = step_coefficients(q, gpu, THEORETICAL, 4, ep=ExpertParallel())
    steps = [batch_time_s(ep4, 64, 64 * (500.0 + 64 * j / 64), 0.0, 0.0, 0.0) for j in range(10)]
    assert decode_run_time_s(ep4, 64, 64 * 500.0, 10) == pytest.approx(sum(steps), rel=1e-9)


def test_measured_all_to_all_in_a_dp_step() -> None:
    """DP 4 x TP 1 on H100: 2,359,296 bytes a token over 450 GB/s x the measured efficiency, and
    48 layers x (dispatch + combine floors) a step, in place of 96 x the catalog's 8 us."""
    q, gpu = get_model(QWEN), get_gpu("h100-sxm")
    a2a = json.loads(TABLE.read_text())["all_to_all"]
    k = step_coefficients(q, gpu, THEORETICAL, 1, ep=ExpertParallel(data_parallel_size=4))
    assert k.allreduce_s_per_token == pytest.approx(
        2_359_296 / (450e9 * a2a["bandwidth_efficiency"]), rel=1e-12
    )
    floors = a2a["floor_s_per_call"]["dispatch"] + a2a["floor_s_per_call"]["combine"]
    assert k.allreduce_s == pytest.approx(48 * floors, rel=1e-12)
    # the layer ratio at E_p 4 reads the group's tokens: 1,024 a rank are 4,096 in each MoE layer
    row = next(
        r for r in json.loads(TABLE.read_text())["moe_layers"] if (r["model"], r["ep_size"]) == (QWEN, 4)
    )
    assert k.ep_moe is not None
    assert k.ep_moe.ratio(1024) == pytest.approx(row["ep_over_tp"][row["tokens"].index(4096)], rel=1e-12)


@pytest.mark.parametrize(
    ("model", "gpu", "tp", "dtype", "ep"),
    [
        (QWEN, "h100-sxm", 4, "bf16", None),  # EP off
        (QWEN, "h200-sxm", 4, "bf16", ExpertParallel()),  # GPU without tables
        (QWEN, "h100-sxm", 4, "fp8", ExpertParallel()),  # weights the tables did not time
        (QWEN, "a100-80gb-sxm", 1, "bf16", ExpertParallel(data_parallel_size=4)),
        ("Qwen/Qwen3-8B", "h100-sxm", 2, "bf16", None),  # dense
    ],
)
def test_off_table_steps_unchanged_bit_for_bit(
    model: str, gpu: str, tp: int, dtype: str, ep: ExpertParallel | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Off the table the coefficients and step times are those with no table at all, exactly."""
    m, g = get_model(model), get_gpu(gpu)
    with_table = step_coefficients(m, g, THEORETICAL, tp, dtype, ep=ep)  # type: ignore[arg-type]
    monkeypatch.setattr(replica_coefficients, "moe_term", lambda *a: None)
    monkeypatch.setattr(expert_parallel, "all_to_all_measured", lambda *a: None)
    without = step_coefficients(m, g, THEORETICAL, tp, dtype, ep=ep)  # type: ignore[arg-type]
    assert with_table == without and with_table.ep_moe is None
    for n, s, c in ((1, 1000.0, 0.0), (64, 64_000.0, 0.0), (8, 8000.0, 2048.0)):
        assert batch_time_s(with_table, n, s, c, c * c / 2, c) == batch_time_s(without, n, s, c, c * c / 2, c)


def test_measured_or_roofline_is_named() -> None:
    q, mx = get_model(QWEN), get_model(MIXTRAL)
    assert "measured kernels" in table_note(q, "h100-sxm", "bf16", 4)
    assert "roofline" in table_note(q, "h200-sxm", "bf16", 4)
    assert "roofline" in table_note(mx, "h100-sxm", "bf16", 3)  # EP 3 was not timed
    assert all_to_all_measured("h200-sxm") is None
