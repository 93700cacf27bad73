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
import statistics
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "planner" / "costmodel" / "data" / "expert_parallel" / "h100-sxm.json"
QWEN, MIXTRAL = "Qwen/Qwen3-30B-A3B", "mistralai/Mixtral-8x7B-v0.1"


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
