from __future__ import annotations

import json

import pytest

from planner.cli import main


def test_gpus_json_carries_sources(capsys: pytest.CaptureFixture[str]) -> None:
    """Prices come from the default price list: RunPod's Secure Cloud page as transcribed on
    2026-09-25 (H100 SXM $3.49); the MI300X, which that list does not price, from DigitalOcean's."""
    assert main(["catalog", "gpus", "--json"]) == 0
    gpus = {g["name"]: g for g in json.loads(capsys.readouterr().out)["gpus"]}
    h100 = gpus["h100-sxm"]
    assert h100["usd_per_gpu_hour"]["value"] == 3.49 and h100["usd_per_gpu_hour"]["checked"] == "2026-09-25"
    assert h100["price_list"] == "runpod-secure-2026-09-25"
    assert (
        "RunPod" in h100["usd_per_gpu_hour"]["source"]
        and "runpod.io/pricing" in h100["usd_per_gpu_hour"]["source"]
    )
    assert gpus["mi300x"]["price_list"] == "digitalocean-2026-05-28"
    assert gpus["mi300x"]["usd_per_gpu_hour"]["value"] == 1.99


def test_gpus_text_names_the_price_lists_and_the_default_candidates(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["catalog", "gpus"]) == 0
    out = capsys.readouterr().out
    assert "$/GPU-h: price list runpod-secure-2026-09-25 (RunPod, " in out and "checked 2026-09-25)" in out
    assert "  mi300x: not on it; from digitalocean-2026-05-28 (DigitalOcean, " in out
    assert "lambda-2026-09-25" in out.split("other price lists", 1)[1]
    line = next(x for x in out.splitlines() if x.startswith("`capplan plan` candidates by default"))
    assert line.endswith(
        "list: a100-80gb-sxm, b200, h100-sxm, h200-sxm, l40s; h100-pcie, mi300x: transferred profiles, only "
        "with candidates.allow_transferred_profiles"
    )


def test_moe_expert_reads(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["catalog", "models", "--model", "mistralai/Mixtral-8x7B-v0.1", "--batch", "1,2", "--json"]) == 0
    )
    data = json.loads(capsys.readouterr().out)
    reads = data["expert_reads"]
    # 8 experts, 2 per token: one token touches 2, two tokens 8 (1 - (6/8)^2) = 3.5 per layer
    assert reads[0]["experts_touched_per_layer"] == pytest.approx(2.0)
    assert reads[1]["experts_touched_per_layer"] == pytest.approx(3.5)
    assert reads[0]["params_read"] == data["models"][0]["active_params"]


def test_unknown_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "gpus", "--gpu", "tpu"]) == 2
    assert capsys.readouterr().err.startswith("capplan: error: --gpu: unknown GPU 'tpu'")
