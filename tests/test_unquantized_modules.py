"""A checkpoint's unquantized modules (planner.catalog.checkpoints, planner.costmodel.unquantized):
the catalog list resolved against the model's shape, the bytes by hand, and today's figures
unchanged without catalog data."""

from __future__ import annotations

import dataclasses

import pytest

from planner.catalog.checkpoints import (
    MATRICES,
    Checkpoint,
    checkpoint_names,
    get_checkpoint,
    unquantized_layers,
)
from planner.catalog.gpus import get_gpu
from planner.catalog.models import get_model
from planner.costmodel.memory import memory_budget, replica_loaded_weight_bytes
from planner.costmodel.profiles import resolve_profile
from planner.costmodel.roofline import Replica
from planner.errors import InvalidInput

M405 = "meta-llama/Llama-3.1-405B-Instruct"
FP8_405 = "meta-llama/Llama-3.1-405B-Instruct-FP8"
H, INTER, L = 16384, 53248, 126


def _replica(checkpoint: str | None, pp: int = 1, profile: str = "profile") -> Replica:
    prof = resolve_profile("auto", "h100-sxm", profile)
    return Replica(get_model(M405), get_gpu("h100-sxm"), 8, "fp8", "bf16", prof, pp=pp, checkpoint=checkpoint)


def test_every_catalog_checkpoint_resolves_against_its_base_model() -> None:
    assert FP8_405 in checkpoint_names()
    for name in checkpoint_names():
        c = get_checkpoint(name)
        assert c is not None and c.source.startswith("https://huggingface.co/" + c.name + "/")
        assert not unquantized_layers(c, get_model(c.base_model)).empty


def test_metas_405b_fp8_keeps_attention_and_the_first_and_last_mlp() -> None:
    c = get_checkpoint(FP8_405.upper())  # case-insensitive, as Hugging Face ids are
    assert c is not None and c.quant_method == "fbgemm_fp8" and c.weight_dtype == "fp8"
    layers = unquantized_layers(c, get_model(M405))
    for m in ("q_proj", "k_proj", "v_proj", "o_proj"):
        assert layers.layers(m) == tuple(range(L))
    for m in ("gate_proj", "up_proj", "down_proj"):
        assert layers.layers(m) == (0, L - 1)


def test_extra_bytes_by_hand_tp8() -> None:
    """One more byte a weight (bf16 over fp8) for: q and o (H x H each, split over 8), k and v
    (one KV head of 128 a GPU: H x 128 each) in all 126 layers; gate, up, down (H x INTER, split
    over 8) in layers 0 and 125."""
    attention = L * (2 * H * H // 8 + 2 * H * 128)
    mlp = 2 * 3 * H * INTER // 8
    assert attention + mlp == 9_638_510_592  # 8.98 GiB
    base = replica_loaded_weight_bytes(_replica(None))
    assert replica_loaded_weight_bytes(_replica(FP8_405)) - base == pytest.approx(9_638_510_592, rel=1e-12)


def test_pipeline_stage_counts_its_own_layers() -> None:
    """TP 8 x PP 2: each stage of 63 layers holds its 63 layers' attention and one bf16 MLP (layer
    0 on the first stage, 125 on the last): the same extra bytes on both."""
    per_stage = 63 * (2 * H * H // 8 + 2 * H * 128) + 3 * H * INTER // 8
    base = replica_loaded_weight_bytes(_replica(None, pp=2))
    assert replica_loaded_weight_bytes(_replica(FP8_405, pp=2)) - base == pytest.approx(per_stage, rel=1e-12)


def test_without_catalog_data_nothing_moves() -> None:
    """No checkpoint, or one the catalog does not list: the format's figures, bit for bit."""
    for profile in ("profile", "theoretical"):
        plain, other = _replica(None, profile=profile), _replica("someone/else-FP8", profile=profile)
        assert other.unquantized is None
        assert replica_loaded_weight_bytes(other) == replica_loaded_weight_bytes(plain)
        assert other.coefficients == plain.coefficients
        assert other.weight_bytes_per_gpu == plain.weight_bytes_per_gpu
        assert memory_budget(other, 0.9, 2048, 256) == memory_budget(plain, 0.9, 2048, 256)


def test_step_reads_the_bf16_bytes_and_runs_their_gemms_at_the_bf16_rate() -> None:
    plain, ckpt = _replica(None), _replica(FP8_405)
    extra = replica_loaded_weight_bytes(ckpt) - replica_loaded_weight_bytes(plain)
    k0, k1 = plain.coefficients, ckpt.coefficients
    assert k1.weight_bytes - k0.weight_bytes == pytest.approx(extra, rel=1e-12)
    g, p = get_gpu("h100-sxm"), plain.profile
    bf16_weights = L * (2 * H * H / 8 + 2 * H * 128) + 2 * 3 * H * INTER / 8
    rate_fp8, rate_bf16 = g.matmul_flops("fp8") * p.eta_matmul, g.matmul_flops("bf16") * p.eta_matmul
    slower = 2 * bf16_weights * (1 / rate_bf16 - 1 / rate_fp8)
    assert k1.linear_s_per_token - k0.linear_s_per_token == pytest.approx(slower, rel=1e-9)
    assert k1.linear_flops_per_token == k0.linear_flops_per_token  # the same FLOPs, at another rate


def test_a_checkpoint_of_another_format_is_refused() -> None:
    r = Replica(get_model(M405), get_gpu("h100-sxm"), 8, "int4-awq", checkpoint=FP8_405)
    with pytest.raises(InvalidInput) as e:
        replica_loaded_weight_bytes(r)
    assert e.value.field == "weight_dtype" and "fp8 checkpoint" in e.value.reason


def _ckpt(*names: str) -> Checkpoint:
    return Checkpoint("x/y", M405, "fp8", "compressed-tensors", names, "https://huggingface.co/x/y/blob/main/config.json")


def test_lists_as_configs_write_them() -> None:
    """compressed-tensors' `re:` patterns, lm_head (bf16 already), and refusals: a name no module
    has, and fused shards that disagree (vLLM refuses such a checkpoint)."""
    m = get_model("meta-llama/Llama-3.1-8B-Instruct")
    got = unquantized_layers(_ckpt("lm_head", r"re:model\.layers\.(0|31)\.mlp\.(gate|up)_proj"), m)
    assert got.layers("gate_proj") == got.layers("up_proj") == (0, 31)
    assert all(got.layers(x) == () for x in MATRICES if x not in ("gate_proj", "up_proj"))
    assert unquantized_layers(_ckpt("lm_head", "re:.*lm_head"), m).empty
    # re.match, as vLLM: anchored at the start, not the end (this prefix names layer 1's four
    # attention projections)
    prefix = unquantized_layers(_ckpt(r"re:model\.layers\.1\.self_attn"), m)
    assert [prefix.layers(x) for x in MATRICES] == [(1,), (1,), (1,), (1,), (), (), ()]
    with pytest.raises(ValueError, match="names no module"):
        unquantized_layers(_ckpt("model.layers.32.self_attn.q_proj"), m)
    with pytest.raises(ValueError, match="some layers but not all shards"):
        unquantized_layers(_ckpt("model.layers.3.self_attn.q_proj"), m)


def test_moe_router_entries_change_nothing() -> None:
    m = get_model("Qwen/Qwen3-30B-A3B")
    assert unquantized_layers(_ckpt("re:.*mlp.gate$", "lm_head"), m).empty
    c = dataclasses.replace(_ckpt("model.layers.0.mlp.gate_proj"), base_model=m.name)
    with pytest.raises(ValueError, match="names no module"):
        unquantized_layers(c, m)


def test_evaluate_and_plan_read_the_checkpoint() -> None:
    """The checkpoint reaches the cost model from `deployment.checkpoint` (evaluate, simulate) and
    from `candidates.weight_checkpoints` at the plan's format (plan): its bf16 modules leave less
    KV and slow the steps. examples/llama405b-fp8-2x8-h100.yaml (TP 8 x PP 2, measured with
    `capplan plan`): 0.2816 req/s a replica with Meta's checkpoint, 0.9974 with an FP8 checkpoint
    the catalog does not list (the format alone); a checkpoint of another format is refused,
    named."""
    import yaml

    from planner import api
    from planner.deployment import Deployment

    def dep(checkpoint: str | None, dtype: str = "fp8") -> Deployment:
        return Deployment.model_validate(
            {"model": M405, "gpu": "h100-sxm", "tp": 8, "pipeline_parallel_size": 2, "weight_dtype": dtype,
             "max_model_len": 32768, "checkpoint": checkpoint}
        )  # fmt: skip

    plain, meta = dep(None).resolve(), dep(FP8_405).resolve()
    assert meta.replica.checkpoint == FP8_405 and plain.replica.checkpoint is None
    assert replica_loaded_weight_bytes(meta.replica) == replica_loaded_weight_bytes(_replica(FP8_405, pp=2))
    assert meta.kv.kv_cache_tokens < plain.kv.kv_cache_tokens
    with pytest.raises(InvalidInput) as e:
        dep(FP8_405, "int4-awq").resolve()
    assert e.value.field == "deployment.checkpoint" and "fp8 checkpoint" in e.value.reason

    from pathlib import Path

    req = yaml.safe_load((Path(__file__).parents[1] / "examples" / "llama405b-fp8-2x8-h100.yaml").read_text())
    with_meta = api.plan(req, workers=1)
    req["candidates"]["weight_checkpoints"] = {"fp8": "someone/else-FP8"}
    without = api.plan(req, workers=1)
    assert round(with_meta.deployments[0].requests_per_s_per_replica, 4) == 0.2816
    assert round(without.deployments[0].requests_per_s_per_replica, 4) == 0.9974
