"""Plan requests shared by tests of several parts (verify, export, report)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

# The audit's kind of mixed-GPU case: an inventory cap on the faster GPU forces a mix with a
# slower one (TTFT p99 2 s, ITL 50 ms, the chat workload at 40 req/s, Poisson). The plan: 3
# A100s (b8192, 16 seqs, 1.37 req/s each) beside 2 H100s (20.3 req/s each).
MIXED_WORKLOAD: dict[str, Any] = {
    "name": "chat",
    "arrivals": {"requests_per_s": 40.0},
    "input_tokens": {"percentiles": {"p10": 150, "p50": 800, "p90": 2000, "p99": 4000, "max": 8000}},
    "output_tokens": {"pairs": [[100, 0.5], [300, 0.3], [800, 0.15], [2000, 0.05]]},
    "prefix_cache_hit_fraction": 0.2,
}
MIXED_SLO: dict[str, Any] = {"ttft_p99_ms": 2000, "itl_p99_ms": 50}
MIXED: dict[str, Any] = {
    "model": "Qwen/Qwen3-8B",
    "slo": MIXED_SLO,
    "workload": MIXED_WORKLOAD,
    "candidates": {
        "gpus": ["a100-80gb-sxm", "h100-sxm"],
        "tensor_parallel_sizes": [1],
        "mixed_gpu_types": True,
        "disaggregation": "never",
    },
    "inventory": {"h100-sxm": 2},
}


def search_context(req: Any, gpus: list[str]) -> Any:
    """The SearchContext `planner.plan.plan` builds for `req` (a mapping or a PlanRequest), over
    `gpus`: what tests of the search and the sizing ask the capacity questions with."""
    from planner.catalog.models import get_model
    from planner.latency import WorkloadStats
    from planner.plan import pipeline
    from planner.plan.flags import plan_max_model_len
    from planner.schema.inputs import build_workload
    from planner.schema.plan_request import parse_plan_request

    r = parse_plan_request(req)
    w = build_workload(r.workload, "workload", None)
    length = plan_max_model_len(r.max_model_len, w, get_model(r.model))
    return pipeline._context(r, r.model, WorkloadStats.of(w), gpus, None, length)


EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def chat_request(**candidates: Any) -> dict[str, Any]:
    """examples/chat.yaml as a mapping; `candidates` given replaces its candidates block."""
    data = yaml.safe_load((EXAMPLES / "chat.yaml").read_text())
    if candidates:
        data["candidates"] = candidates
    return data
