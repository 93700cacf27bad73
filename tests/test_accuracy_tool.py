"""tools/accuracy.py on a tiny configuration: its core functions run and give finite errors, and
the markdown renders. The full table (docs/accuracy.md) is not regenerated in CI."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parents[1] / "tools" / "accuracy.py"


def _load():
    spec = importlib.util.spec_from_file_location("accuracy_tool", TOOL)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["accuracy_tool"] = mod
    spec.loader.exec_module(mod)
    return mod


acc = _load()


def test_cells_on_a_few_hundred_requests() -> None:
    trace = acc.builtin_trace(acc.TRACE)
    case = acc.Case("Qwen/Qwen3-8B", "h100-sxm", "theoretical", 2048)
    r = case.resolve()
    syn = acc.synthetic_cell(case, 0.5, trace, count=300, resolved=r)
    rep = acc.trace_cell(case, 0.5, trace, count=300, resolved=r)
    for cell in (syn, rep):
        assert cell.requests == 300
        assert math.isfinite(cell.ttft_error) and math.isfinite(cell.itl_error)
        assert cell.analytic_ttft_p99_s > 0 and cell.sim_ttft_p99_s > 0
    assert syn.rate_rps == rep.rate_rps or abs(syn.rate_rps / syn.capacity_rps - 0.5) < 1e-9
    cap = acc.capacity_check(case, trace, count=400, resolved=r)
    assert math.isfinite(cap.error) and cap.simulated_rps > 0
    split = acc.wait_split(case, 0.5, trace, count=300, resolved=r)
    assert split.sim_residual_mean_s >= 0 and 0 <= split.sim_queued_fraction <= 1
    text = acc.render(acc.Report([syn, rep], [cap], [split], 300), "python3 tools/accuracy.py")
    assert "| Qwen3-8B h100-sxm theoretical, budget 2048 | 50% |" in text
    assert text.startswith("# Accuracy") and "python3 tools/accuracy.py" in text
