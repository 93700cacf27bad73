"""The measured GEMM efficiency of quantized formats relative to bf16, from NVIDIA aiconfigurator's
vLLM GEMM tables (the source of planner/costmodel/data/kernels; Apache-2.0):

    pip install -e '.[profiles]'          # aiconfigurator==0.12.0 (pandas, pyarrow)
    python3 tools/quantized_gemm_efficiency.py

For each GPU and quantized `gemm_dtype` its vLLM database holds, over the compute-bound shapes
(m, n, k >= 4096) timed in both that dtype and bf16: (achieved FLOP/s / the catalog's dense
tensor-core rate of the dtype) / (the same for bf16), the median. planner/catalog/quantization.py
`MEASURED_GEMM_EFFICIENCY` holds what it printed. Its tables (0.12.0) time bf16, fp8, fp8_block
and (B200) nvfp4 GEMMs; no int4 weight-only (Marlin) or int8 GEMM.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planner.catalog.gpus import get_gpu

SYSTEMS = {"h100-sxm": "h100_sxm", "b200": "b200_sxm"}  # GPUs whose tables time quantized GEMMs
RATE_OF = {"fp8": "fp8", "nvfp4": "nvfp4"}  # aiconfigurator gemm_dtype -> capplan weight_dtype
MIN_DIM = 4096


def efficiencies() -> list[tuple[str, str, float, int]]:
    """(gpu, weight_dtype, median relative efficiency, shapes)."""
    import pandas as pd  # the profiles extra

    spec_ = importlib.util.find_spec("aiconfigurator_core")  # its data, not its extension
    if spec_ is None or not spec_.submodule_search_locations:
        raise SystemExit("aiconfigurator_core is not installed: pip install -e '.[profiles]'")
    root = Path(next(iter(spec_.submodule_search_locations))) / "systems" / "data"
    out = []
    for gpu, system in SYSTEMS.items():
        (path,) = sorted((root / system / "gemm" / "vllm").glob("*/gemm_perf.parquet"))[-1:]
        d = pd.read_parquet(path)
        spec = get_gpu(gpu)
        bf16 = d[d.gemm_dtype == "bfloat16"].set_index(["m", "n", "k"]).latency
        for dtype, fmt in RATE_OF.items():
            q = d[d.gemm_dtype == dtype].set_index(["m", "n", "k"]).latency
            j = pd.concat({"bf16": bf16, "q": q}, axis=1).dropna().reset_index()
            j = j[(j.m >= MIN_DIM) & (j.n >= MIN_DIM) & (j.k >= MIN_DIM)]
            if j.empty:
                continue
            flop = 2.0 * j.m * j.n * j.k
            eff_q = flop / (j.q * 1e-3) / spec.matmul_flops(fmt)
            eff_bf16 = flop / (j.bf16 * 1e-3) / spec.matmul_flops("bf16")
            out.append((gpu, fmt, float((eff_q / eff_bf16).median()), len(j)))
    return out


def main() -> int:
    for gpu, fmt, ratio, n in efficiencies():
        print(f"{gpu} {fmt}: {ratio:.4f} of its rate relative to bf16's ({n} shapes, m, n, k >= {MIN_DIM})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
