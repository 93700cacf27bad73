"""The cheap feasibility screen (planner/costmodel/feasibility.py) counts memory as
Deployment.resolve sizes the KV cache (planner.costmodel.memory.memory_budget): a deployment the
screen passes resolves to at least one KV block, and one it refuses names the field at fault."""

from __future__ import annotations

import pytest

from planner.catalog.gpus import get_gpu
from planner.catalog.models import get_model
from planner.costmodel.feasibility import feasibility
from planner.costmodel.profile import THEORETICAL
from planner.costmodel.profiles import resolve_profile
from planner.deployment import Deployment
from planner.errors import InvalidInput

QWEN32 = "Qwen/Qwen3-32B"


def test_qwen3_32b_on_one_h100_at_0_84_has_no_kv_under_vllms_budget() -> None:
    # Hand derivation (numbers from planner.costmodel.memory, docs/kv-capacity.md), one H100 at
    # gpu_memory_utilization 0.84 with vLLM's defaults (8192 tokens, 1024 sequences):
    #   vLLM: 79.19 GiB reported x 0.84 = 66.52 - weights 61.03 - profile-run peak 5.64
    #         - non-torch 0.13 = -0.29 GiB: no block, vLLM refuses to start;
    #   the seed's estimate the screen used: 80 x 0.84 = 67.2 - 61.02 - 1.5 reserve
    #         - 1.67 activations = +3.0 GiB, so the screen passed what resolve then refused.
    model, gpu = get_model(QWEN32), get_gpu("h100-sxm")
    why = feasibility(model, gpu, 1, gpu_memory_utilization=0.84)
    assert [w.field for w in why] == ["tp"]
    assert "activations of a 8192-token step (5.6 GiB)" in why[0].reason
    # The theoretical profile keeps the seed's budget: there the same deployment fits.
    assert feasibility(model, gpu, 1, gpu_memory_utilization=0.84, profile=THEORETICAL) == []

    with pytest.raises(InvalidInput) as exc:
        Deployment(model=QWEN32, gpu="h100-sxm", gpu_memory_utilization=0.84).resolve("auto")
    assert exc.value.field == "deployment.tp"
    assert exc.value.reason == why[0].reason

    given = feasibility(model, gpu, 1, max_num_batched_tokens=8192, gpu_memory_utilization=0.84)
    assert [w.field for w in given] == ["max_num_batched_tokens"]


@pytest.mark.parametrize("profile", ["auto", "theoretical"])
@pytest.mark.parametrize("gpu", ["h100-sxm", "h100-pcie", "l40s"])
def test_the_screen_passes_exactly_what_resolves(gpu: str, profile: str) -> None:
    # Sweep gpu_memory_utilization across the edge for a model that nearly fills each GPU.
    g = get_gpu(gpu)
    prof = resolve_profile(profile, gpu)
    model = get_model(QWEN32)
    for i in range(50, 100):
        util = i / 100
        dep = Deployment(
            model=QWEN32, gpu=gpu, tp=1 if g.memory > 60 * 2**30 else 2, gpu_memory_utilization=util
        )
        screen = feasibility(model, g, dep.tp, gpu_memory_utilization=util, profile=prof)
        try:
            blocks = dep.resolve(prof).kv.kv_cache_blocks
        except InvalidInput as exc:
            assert screen, f"{util}: resolve refused ({exc}) what the screen passed"
            assert exc.reason == screen[0].reason
        else:
            assert screen == [], f"{util}: the screen refused what resolves to {blocks} blocks"
            assert blocks >= 1
