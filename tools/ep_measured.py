"""Expert parallelism's measured terms for the cost model, from NVIDIA aiconfigurator's vLLM tables.

aiconfigurator 0.12.0 (https://github.com/ai-dynamo/aiconfigurator, Apache-2.0) ships vLLM 0.24.0
kernels timed on an H100 SXM node: fused-MoE layers under TP and under EP
(`systems/data/h100_sxm/moe/vllm/0.24.0/moe_perf.parquet`) and DeepEP's all-to-all
(`systems/data/h100_sxm/comm/vllm/0.24.0/moe_a2a_perf.parquet`). Two steps, both byte for byte:

    # 1. the measured rows, as test data (needs pyarrow and the unpacked aiconfigurator-core wheel:
    #    pip download aiconfigurator-core==0.12.0 --no-deps && unzip aiconfigurator_core-*.whl -d aic)
    python3 tools/ep_measured.py --extract aic/aiconfigurator_core
    # 2. the product's table from those rows (plain Python)
    python3 tools/ep_measured.py            # writes planner/costmodel/data/expert_parallel/h100-sxm.json
    python3 tools/ep_measured.py --check    # exit 1 if the committed table differs

Step 1 writes tests/data/aiconfigurator_moe_h100.csv (one MoE layer's ms per token count, for the
expert shapes of the catalog's MoE models, balanced routing; Qwen3-30B-A3B also skewed at TP 4 /
EP 4) and tests/data/aiconfigurator_moe_a2a_h100.csv (DeepEP high-throughput and low-latency
dispatch and combine, us per call, EP 8 in one node). Step 2 derives, per expert shape and EP
size measured under both EP and TP: the EP-over-TP ratio of the layer's time at each token count;
and for the all-to-all: the per-call floor (median of the low-latency kernels at <= 64 tokens, the
decode regime), and the bandwidth efficiency (the formula's bytes at the catalog's interconnect
bandwidth over the high-throughput kernels' time less that floor, median at >= 4,096 tokens,
where the floor is under a tenth of the call). planner.costmodel.ep_measured reads the table (docs/expert-parallel.md).
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

MOE_CSV = ROOT / "tests" / "data" / "aiconfigurator_moe_h100.csv"
A2A_CSV = ROOT / "tests" / "data" / "aiconfigurator_moe_a2a_h100.csv"
TABLE = ROOT / "planner" / "costmodel" / "data" / "expert_parallel" / "h100-sxm.json"
GPU = "h100-sxm"
SOURCE = (
    "NVIDIA aiconfigurator 0.12.0 (PyPI aiconfigurator-core==0.12.0, Apache-2.0), vLLM 0.24.0 tables of "
    "system h100_sxm: moe/vllm/0.24.0/moe_perf.parquet (bf16 Triton fused-MoE layers) and "
    "comm/vllm/0.24.0/moe_a2a_perf.parquet (DeepEP, EP 8 in one node); derived by tools/ep_measured.py "
    "from tests/data/aiconfigurator_moe_h100.csv and tests/data/aiconfigurator_moe_a2a_h100.csv"
)
# (name in the CSV, hidden, expert width, experts, top-k) -> capplan catalog model of that shape
SHAPES = {
    ("qwen3-30b-a3b", 2048, 768, 128, 8): "Qwen/Qwen3-30B-A3B",
    ("mixtral-8x7b", 4096, 14336, 8, 2): "mistralai/Mixtral-8x7B-v0.1",
}
# (shape name, moe_tp_size, moe_ep_size, distribution), in the CSV's order
MOE_GROUPS = [
    *[
        ("qwen3-30b-a3b", t, e, d)
        for t, e in ((1, 4), (4, 1))
        for d in ("balanced", "power_law_1.01", "power_law_1.2")
    ],
    *[("mixtral-8x7b", t, e, "balanced") for t, e in ((1, 2), (1, 4), (1, 8), (2, 1), (4, 1), (8, 1))],
    *[("qwen3-30b-a3b", t, e, "balanced") for t, e in ((1, 2), (2, 1), (1, 8), (8, 1))],
]
MOE_HEADER = """\
# One MoE layer's time, ms, on one H100 SXM (bf16 weights and activations, vLLM's Triton fused-MoE
# experts): rows of aiconfigurator 0.12.0's measured table for vLLM 0.24.0,
# aiconfigurator_core/systems/data/h100_sxm/moe/vllm/0.24.0/moe_perf.parquet (NVIDIA, Apache-2.0),
# filtered to the expert shapes of Qwen3-30B-A3B (TP 4 / EP 4, every routing distribution) and
# Mixtral-8x7B (TP and EP 2, 4, 8, balanced). Columns as in the source; num_tokens are the layer's tokens.
# Appended: Qwen3-30B-A3B TP and EP 2 and 8, balanced (tools/ep_measured.py --extract writes this file).
"""
MOE_COLUMNS = (
    "model,hidden_size,inter_size,num_experts,topk,moe_tp_size,moe_ep_size,distribution,num_tokens,latency_ms"
)
A2A_HEADER = """\
# DeepEP all-to-all in vLLM 0.24.0 on one H100 SXM node (EP 8), us per call: rows of aiconfigurator
# 0.12.0's aiconfigurator_core/systems/data/h100_sxm/comm/vllm/0.24.0/moe_a2a_perf.parquet (NVIDIA,
# Apache-2.0), backends deepep_ht (high-throughput, vLLM's deepep_high_throughput) and deepep_ll
# (low-latency, deepep_low_latency); num_tokens per rank. Written by tools/ep_measured.py --extract.
"""
A2A_COLUMNS = "comm_backend,phase,ep_size,hidden_size,topk,num_experts,num_tokens,latency_us"
A2A_BACKENDS = ("deepep_ht", "deepep_ll")
FLOOR_MAX_TOKENS = 64  # low-latency calls at or below this: the per-call floor
BANDWIDTH_MIN_TOKENS = 4096  # high-throughput calls at or above this: the bandwidth efficiency
ACTIVATION_BYTES = 2  # bf16 hidden states dispatched and combined


def extract(core: Path) -> None:
    """Step 1: the parquet rows as the two test-data CSVs (pyarrow imported here only)."""
    import pyarrow.parquet as pq

    data = core / "systems" / "data" / "h100_sxm"
    moe = pq.read_table(data / "moe" / "vllm" / "0.24.0" / "moe_perf.parquet").to_pylist()
    names = {(h, i, e, k): n for (n, h, i, e, k) in SHAPES}
    lines = [MOE_HEADER + MOE_COLUMNS]
    for name, tp, ep, dist in MOE_GROUPS:
        h, i, e, k = next(s[1:] for s in SHAPES if s[0] == name)
        rows = sorted(
            (r for r in moe if r["moe_dtype"] == "bfloat16" and (r["hidden_size"], r["inter_size"], r["num_experts"], r["topk"]) == (h, i, e, k)
             and (r["moe_tp_size"], r["moe_ep_size"], r["distribution"]) == (tp, ep, dist)),
            key=lambda r: r["num_tokens"],
        )  # fmt: skip
        assert names[(h, i, e, k)] == name and len(rows) == 27, (name, tp, ep, dist, len(rows))
        lines += [
            f"{name},{h},{i},{e},{k},{tp},{ep},{dist},{r['num_tokens']},{r['latency']:.6f}" for r in rows
        ]
    MOE_CSV.write_text("\n".join(lines) + "\n")
    a2a = pq.read_table(data / "comm" / "vllm" / "0.24.0" / "moe_a2a_perf.parquet").to_pylist()
    keys = ("comm_backend", "phase", "ep_size", "hidden_size", "topk", "num_experts", "num_tokens")
    kept = sorted(
        (r for r in a2a if r["comm_backend"] in A2A_BACKENDS), key=lambda r: tuple(r[c] for c in keys)
    )
    out = [A2A_HEADER + A2A_COLUMNS] + [
        ",".join(str(r[c]) for c in keys) + f",{r['latency']:.3f}" for r in kept
    ]
    A2A_CSV.write_text("\n".join(out) + "\n")


def read_csv(path: Path) -> list[dict[str, str]]:
    """A test-data CSV's rows (its '#' header lines skipped)."""
    lines = path.read_text().splitlines()
    return list(csv.DictReader(line for line in lines if not line.startswith("#")))


def moe_ratios(rows: list[dict[str, str]]) -> list[dict[str, Any]]:
    """Per expert shape and EP size measured both ways (balanced routing): tokens and EP/TP ratios."""
    by: dict[tuple[str, int, int], dict[int, float]] = {}
    for r in rows:
        if r["distribution"] == "balanced":
            key = (r["model"], int(r["moe_tp_size"]), int(r["moe_ep_size"]))
            by.setdefault(key, {})[int(r["num_tokens"])] = float(r["latency_ms"])
    out = []
    for shape, model in SHAPES.items():
        sizes = sorted(e for (n, t, e) in by if n == shape[0] and t == 1 and e > 1 and (n, e, 1) in by)
        for e in sizes:
            ep, tp = by[(shape[0], 1, e)], by[(shape[0], e, 1)]
            tokens = sorted(ep)
            assert tokens == sorted(tp), (shape, e)
            out.append({
                "model": model, "hidden_size": shape[1], "intermediate_size": shape[2],
                "num_experts": shape[3], "experts_per_token": shape[4], "ep_size": e,
                "tokens": tokens, "ep_over_tp": [round(ep[t] / tp[t], 4) for t in tokens],
            })  # fmt: skip
    return out


def all_to_all(rows: list[dict[str, str]]) -> dict[str, Any]:
    """The DeepEP per-call floor per direction and the bandwidth efficiency (module docstring)."""
    from planner.catalog.gpus import get_gpu  # here: --extract runs without capplan's dependencies

    bw = get_gpu(GPU).interconnect_bandwidth
    floor: dict[str, float] = {}
    efficiency = []
    for phase in ("dispatch", "combine"):
        small = [float(r["latency_us"]) for r in rows if r["comm_backend"] == "deepep_ll" and r["phase"] == phase
                 and int(r["num_tokens"]) <= FLOOR_MAX_TOKENS]  # fmt: skip
        floor[phase] = round(statistics.median(small) * 1e-6, 10)
        for r in rows:
            if (
                r["comm_backend"] == "deepep_ht"
                and r["phase"] == phase
                and int(r["num_tokens"]) >= BANDWIDTH_MIN_TOKENS
            ):
                e_p = int(r["ep_size"])
                sent = (
                    int(r["num_tokens"])
                    * int(r["topk"])
                    * int(r["hidden_size"])
                    * ACTIVATION_BYTES
                    * (e_p - 1)
                    / e_p
                )
                # the time beyond the floor: the model charges floor + bytes / (bandwidth x efficiency)
                efficiency.append(sent / bw / (float(r["latency_us"]) * 1e-6 - floor[phase]))
    return {
        "ep_size": 8,
        "floor_s_per_call": floor,
        "bandwidth_efficiency": round(statistics.median(efficiency), 4),
        "floor_from": f"deepep_ll, median of the calls at <= {FLOOR_MAX_TOKENS} tokens per rank",
        "bandwidth_from": (
            f"deepep_ht at >= {BANDWIDTH_MIN_TOKENS} tokens per rank: k h 2 (E_p - 1)/E_p bytes a token at the "
            f"catalog's {bw / 1e9:g} GB/s over the measured time less the floor, median of {len(efficiency)} calls"
        ),
    }


def table() -> str:
    """Step 2: the product's table as JSON text."""
    doc = {
        "gpu": GPU,
        "source": SOURCE,
        "license": "Apache-2.0 (NVIDIA CORPORATION & AFFILIATES); derived figures only",
        "moe_layers": moe_ratios(read_csv(MOE_CSV)),
        "all_to_all": all_to_all(read_csv(A2A_CSV)),
    }
    return json.dumps(doc, indent=1) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--extract", type=Path, help="unpacked aiconfigurator_core package: rewrite the test-data CSVs"
    )
    p.add_argument("--check", action="store_true", help="exit 1 if the committed table differs")
    a = p.parse_args()
    if a.extract:  # step 1 alone: it may run where capplan's dependencies are not installed
        extract(a.extract)
        return 0
    text = table()
    if a.check:
        same = TABLE.exists() and TABLE.read_text() == text
        print(f"{TABLE.relative_to(ROOT)}: {'unchanged' if same else 'differs'}")
        return 0 if same else 1
    TABLE.parent.mkdir(parents=True, exist_ok=True)
    TABLE.write_text(text)
    print(f"wrote {TABLE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
