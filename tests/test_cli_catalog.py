from __future__ import annotations

import json

import pytest

from planner.cli import main


def test_gpus_json_carries_sources(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "gpus", "--json"]) == 0
    gpus = {g["name"]: g for g in json.loads(capsys.readouterr().out)["gpus"]}
    assert gpus["h100-sxm"]["usd_per_gpu_hour"]["value"] == 4.29
    assert "Lambda" in gpus["h100-sxm"]["usd_per_gpu_hour"]["source"]


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
