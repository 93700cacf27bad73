"""Parameter counts come from config.json shapes; pinned to the publishers' stated sizes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from planner.catalog.models import get_model, model_names, spec_from_config
from planner.errors import InvalidInput

# (total, active) parameters as published on each model card, in billions
PUBLISHED = {
    "Qwen/Qwen3-8B": (8.19, 8.19),  # card: 8.2B; the seed article uses 8.19e9
    "Qwen/Qwen3-14B": (14.8, 14.8),  # card: 14.8B
    "Qwen/Qwen3-32B": (32.8, 32.8),
    "Qwen/Qwen3-30B-A3B": (30.5, 3.3),
    "meta-llama/Llama-3.1-8B-Instruct": (8.03, 8.03),
    "meta-llama/Llama-3.1-70B-Instruct": (70.6, 70.6),
    "meta-llama/Llama-3.1-405B-Instruct": (405.9, 405.9),  # card: 405B; HF safetensors: 406B
    "meta-llama/Meta-Llama-3-8B-Instruct": (8.03, 8.03),
    "mistralai/Mistral-7B-Instruct-v0.3": (7.25, 7.25),
    "mistralai/Mixtral-8x7B-v0.1": (46.7, 12.9),
}


def test_catalog_lists_the_issue_models() -> None:
    assert set(PUBLISHED) == set(model_names())


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_counts_match_the_model_cards(name: str) -> None:
    total, active = PUBLISHED[name]
    m = get_model(name)
    assert m.total_params / 1e9 == pytest.approx(total, rel=0.01)
    assert m.active_params / 1e9 == pytest.approx(active, rel=0.02)


def test_qwen3_8b_shape() -> None:
    m = get_model("qwen/qwen3-8b")  # case-insensitive
    assert m.total_params == pytest.approx(8.19e9, rel=0.01)
    # 2 (K and V) x 36 layers x 8 KV heads x 128 head_dim x 2 bytes
    assert m.kv_bytes_per_token() == 2 * 36 * 8 * 128 * 2 == 147_456
    assert m.kv_bytes_per_token("fp8") == 73_728
    assert m.weight_bytes("fp8") * 2 == m.weight_bytes("bf16")
    assert m.query_dim == 4096
    assert not m.is_moe


def test_kv_heads_split_then_replicate_under_tp() -> None:
    m = get_model("Qwen/Qwen3-30B-A3B")  # 4 KV heads, 48 layers, head_dim 128
    assert m.kv_bytes_per_token(tp=1) == 2 * 48 * 4 * 128 * 2
    assert m.kv_bytes_per_token(tp=2) == 2 * 48 * 2 * 128 * 2
    assert m.kv_bytes_per_token(tp=4) == 2 * 48 * 1 * 128 * 2
    assert m.kv_bytes_per_token(tp=8) == 2 * 48 * 1 * 128 * 2  # fewer KV heads than GPUs: replicated


def test_moe_experts_read_grow_with_batch() -> None:
    m = get_model("Qwen/Qwen3-30B-A3B")
    assert (m.num_experts, m.experts_per_token) == (128, 8)
    # one token touches exactly its 8 experts: the step reads the active parameters
    assert m.params_read(1) == pytest.approx(m.active_params)
    # four tokens, uniform routing: 128 (1 - (120/128)^4) distinct experts per layer
    touched = 128 * (1 - (120 / 128) ** 4)
    assert m.expected_experts_touched(4) == pytest.approx(touched)
    assert m.params_read(4) == pytest.approx(m.dense_params + 48 * touched * 3 * 2048 * 768)
    # a large batch reads (nearly) every expert
    assert m.params_read(4096) == pytest.approx(m.total_params, rel=1e-6)
    assert m.params_read(1) < m.params_read(8) < m.params_read(64) < m.total_params


def test_local_config_path(tmp_path: Path) -> None:
    src = json.loads((Path("planner/catalog/data/models/Qwen--Qwen3-8B.config.json")).read_text())
    f = tmp_path / "my-finetune.json"
    f.write_text(json.dumps(src))
    assert get_model(str(f)).total_params == get_model("Qwen/Qwen3-8B").total_params


def test_bad_models_name_the_field(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as e:
        get_model("no/such-model", "--model")
    assert e.value.field == "--model" and "Qwen/Qwen3-8B" in e.value.reason
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InvalidInput, match="cannot read"):
        get_model(str(bad))
    with pytest.raises(InvalidInput, match="x: num_hidden_layers: is missing"):
        spec_from_config("x", {"num_attention_heads": 8, "hidden_size": 512})
    with pytest.raises(InvalidInput, match="x: intermediate_size: is missing"):
        spec_from_config("x", {**_SMALL, "intermediate_size": None})
    with pytest.raises(InvalidInput, match="sliding-window"):
        spec_from_config(
            "gpt-oss",
            {
                "num_attention_heads": 8,
                "hidden_size": 512,
                "num_hidden_layers": 2,
                "intermediate_size": 512,
                "vocab_size": 10,
                "max_position_embeddings": 64,
                "layer_types": ["sliding_attention", "full_attention"],
            },
        )


def test_tp_must_shard_the_heads_as_vllm_requires() -> None:
    qwen = get_model("Qwen/Qwen3-8B")  # 32 query heads, 8 KV heads
    assert qwen.tp_error(1) is None and qwen.tp_error(2) is None and qwen.tp_error(8) is None
    assert "32 attention heads do not split evenly over 3 GPUs" in (qwen.tp_error(3) or "")
    moe = get_model("Qwen/Qwen3-30B-A3B")  # 32 query heads, 4 KV heads: replicated at TP 8
    assert moe.tp_error(8) is None
    odd = spec_from_config(
        "odd",
        {
            "num_attention_heads": 12,
            "num_key_value_heads": 4,
            "hidden_size": 768,
            "num_hidden_layers": 2,
            "intermediate_size": 1024,
            "vocab_size": 100,
            "max_position_embeddings": 64,
        },
    )
    assert "4 KV heads neither split over nor replicate across 6 GPUs" in (odd.tp_error(6) or "")


def test_cli_and_yaml_refuse_a_tp_that_does_not_shard(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from planner.cli import main

    argv = [
        "analyze",
        "prefill",
        "--model",
        "Qwen/Qwen3-8B",
        "--gpu",
        "h100-sxm",
        "--prompt-tokens",
        "10",
        "--tp",
        "3",
    ]
    assert main(argv) == 2
    assert capsys.readouterr().err.startswith("capplan: error: --tp: Qwen/Qwen3-8B's 32 attention heads")
    f = tmp_path / "d.yaml"
    f.write_text(
        "deployment: {model: Qwen/Qwen3-8B, gpu: h100-sxm, tp: 3}\n"
        "workload: {arrivals: {requests_per_s: 1}, input_tokens: {constant: 100}, output_tokens: {constant: 10}}\n"
    )
    assert main(["evaluate", str(f)]) == 2
    assert capsys.readouterr().err.startswith("capplan: error: deployment.tp: ")


_SMALL: dict[str, Any] = {
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "hidden_size": 512,
    "num_hidden_layers": 2,
    "intermediate_size": 1024,
    "vocab_size": 1000,
    "max_position_embeddings": 4096,
}


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("num_attention_heads", "abc", "num_attention_heads: must be a positive integer, got 'abc'"),
        ("num_attention_heads", "32", "num_attention_heads: must be a positive integer, got '32'"),
        ("num_hidden_layers", None, "num_hidden_layers: must be a positive integer, got None"),
        ("hidden_size", float("nan"), "hidden_size: must be a positive integer, got nan"),
        ("hidden_size", 512.0, "hidden_size: must be a positive integer, got 512.0"),
        ("vocab_size", -5, "vocab_size: must be a positive integer, got -5"),
        ("vocab_size", 0, "vocab_size: must be a positive integer, got 0"),
        ("num_hidden_layers", True, "num_hidden_layers: must be a positive integer, got True"),
        ("num_hidden_layers", 10**30, "num_hidden_layers: must be at most 1,000, got"),
        ("num_key_value_heads", 3, "num_key_value_heads: must divide num_attention_heads (8), got 3"),
        ("num_experts", -1, "num_experts: must be >= 0, got -1"),
        ("tie_word_embeddings", "yes", "tie_word_embeddings: must be true or false, got 'yes'"),
    ],
)
def test_config_values_are_validated_one_line_naming_the_key(key: str, value: Any, reason: str) -> None:
    with pytest.raises(InvalidInput) as e:
        spec_from_config("config.json", {**_SMALL, key: value}, "model")
    assert e.value.field == "model"
    assert str(e.value).startswith(f"model: config.json: {reason}")
    assert "\n" not in str(e.value)


def test_config_file_errors_are_one_line(tmp_path: Path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({**_SMALL, "num_attention_heads": "abc"}))
    with pytest.raises(InvalidInput) as e:
        get_model(str(cfg))
    assert str(e.value) == "model: config.json: num_attention_heads: must be a positive integer, got 'abc'"
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(InvalidInput, match="cannot read"):
        get_model(str(deep))
    with pytest.raises(InvalidInput, match="no such config file"):
        get_model("x" * 5000 + ".json")
    assert spec_from_config("ok", _SMALL).head_dim == 64
