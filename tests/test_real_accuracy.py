"""capplan against real vLLM, pinned: MAPE per GPU per figure kind on the built-in corpus with the
built-in profiles (`capplan validate --corpus`), for the analytic model and the simulator, as
tools/real_accuracy.py computes them and docs/accuracy.md ("Against real vLLM") prints them; runs
on vLLM releases before 0.6 apart (PRE_0_6; docs/measurements.md, "Release era").

The pins are today's figures, far from the issue's targets (TPOT p50 <= 10%, TTFT p50 <= 25%,
saturation throughput <= 20% per GPU) on saturation throughput, every run of which is a GPUStack
burst: their H100 is a slow rig (its prefill-bound bursts run at 37-49% of the H100 profile's
compute, where its A100 bursts run at 82-92% of the A100's; docs/measurements.md, "Slow rigs"),
and the model lacks the front end's per-request CPU time, serial in a burst (the 4-token bursts:
+45% to +352%), and part of vLLM's FP8 path on an A100 (FP8 Marlin's GEMMs are priced from
kernel measurements by tokens, planner.catalog.quantization.marlin_points; the burst is still
+67%, its measured median ITL 3.6x bf16's).
A burst lasts as long as its longest response: the prediction runs a ShareGPT burst at the
shipped ShareGPT length sample and adds the burst's tail (planner/measurements/burst.py).
A change that worsens a pinned figure by more than TOLERANCE_PCT (percentage points: rounding
and float noise, not a real change) fails; one that improves it passes (update the pin then). A
corpus that gains runs changes the figures: re-pin from `python3 tools/real_accuracy.py`.
"""

from __future__ import annotations

import pytest
from tool_helpers import load_tool

from planner.measurements.scoring import mape_by_gpu

ra = load_tool("real_accuracy.py", "real_accuracy_tool")

TOLERANCE_PCT = 0.5
# MAPE % (runs scored) per GPU per figure kind, from `python3 tools/real_accuracy.py`.
ANALYTIC: dict[str, dict[str, tuple[float, int]]] = {
    "a100-80gb-sxm": {"saturation_throughput": (26.7, 6)},
    "h100-sxm": {
        "ttft_p50": (4.2, 4),
        "ttft_p99": (33.1, 4),
        "tpot_p50": (1.2, 4),
        "itl_p50": (1.1, 4),
        "itl_p99": (46.4, 4),
        "throughput": (6.0, 4),
        "saturation_throughput": (116.9, 10),
    },
    "h200-sxm": {
        "ttft_p50": (5.4, 8),
        "ttft_p99": (20.5, 8),
        "tpot_p50": (8.7, 8),
        "itl_p50": (7.2, 8),
        "itl_p99": (45.4, 8),
        "throughput": (3.4, 8),
    },
}
SIMULATOR: dict[str, dict[str, tuple[float, int]]] = {
    "a100-80gb-sxm": {"saturation_throughput": (33.4, 6)},
    "h100-sxm": {
        "ttft_p50": (20.0, 4),
        "ttft_p99": (31.5, 4),
        "tpot_p50": (1.5, 4),
        "itl_p50": (1.3, 4),
        "itl_p99": (48.6, 4),
        "throughput": (4.8, 4),
        "saturation_throughput": (119.5, 9),  # one 32k-token burst does not fit the modelled KV cache
    },
    "h200-sxm": {
        "ttft_p50": (4.0, 8),
        "ttft_p99": (18.8, 8),
        "tpot_p50": (8.7, 8),
        "itl_p50": (7.2, 8),
        "itl_p99": (45.1, 8),
        "throughput": (5.2, 8),
    },
}


# Runs on releases before vLLM 0.6 (ServingRun.release_era), scored apart: (analytic, simulator).
PRE_0_6: dict[str, dict[str, tuple[tuple[float, int], tuple[float, int]]]] = {
    "h100-sxm": {"saturation_throughput": ((100.0, 14), (124.8, 14))},
}


def _era_pins(i: int) -> dict[str, dict[str, tuple[float, int]]]:
    return {gpu: {k: v[i] for k, v in figs.items()} for gpu, figs in PRE_0_6.items()}


@pytest.mark.parametrize(
    ("simulate", "era", "pins"),
    [
        (False, "modelled", ANALYTIC),
        (True, "modelled", SIMULATOR),
        (False, "pre-0.6", _era_pins(0)),
        (True, "pre-0.6", _era_pins(1)),
    ],
    ids=["analytic", "simulator", "analytic-pre-0.6", "simulator-pre-0.6"],
)
def test_mape_per_gpu_no_worse_than_pinned(
    simulate: bool, era: str, pins: dict[str, dict[str, tuple[float, int]]]
) -> None:
    got = mape_by_gpu(ra.scores(simulate), era)
    assert set(got) == set(pins)
    worse = []
    for gpu, figures in pins.items():
        assert set(got[gpu]) == set(figures), gpu
        for kind, (pinned_pct, runs) in figures.items():
            m = got[gpu][kind]
            assert m.runs == runs, (gpu, kind)
            if m.mape_pct > pinned_pct + TOLERANCE_PCT:
                worse.append(f"{gpu} {kind}: {m.mape_pct:.1f}% > pinned {pinned_pct}%")
    assert not worse, worse


def test_docs_section_is_current() -> None:
    """docs/accuracy.md's "Against real vLLM" is what the tool writes today."""
    assert ra.main(["--check"]) == 0


def test_section_replaces_itself() -> None:
    section = f"{ra.START}\n## Against real vLLM\nnew\n{ra.END}\n"
    doc = f"# A\n\n{ra.START}\nold\n{ra.END}\n\n## After\n"
    assert ra.with_section(doc, section) == f"# A\n\n{section}\n## After\n"
    assert ra.with_section("# A\n", section) == f"# A\n\n{section}"
