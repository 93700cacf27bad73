"""GPU catalog data: every file validates, every number is sourced, and the derived
defaults (vLLM batching, fp8 fallback, compute-bound knee) come out as documented."""

from __future__ import annotations

import datetime as dt
import json
from importlib import resources

import pytest

from planner.catalog.gpus import GpuSpec, Sourced, _price, get_gpu, gpu_names
from planner.errors import InvalidInput

GPU_DIR = resources.files("planner.catalog") / "data" / "gpus"
GPU_FILES = sorted((e for e in GPU_DIR.iterdir() if e.name.endswith(".json")), key=lambda e: e.name)
SOURCED_FIELDS = {k for k, f in GpuSpec.model_fields.items() if f.annotation is Sourced}
OPTIONAL_SOURCED = {"fp4_dense_flops_per_s"}  # Blackwell's FP4 rate: only where the GPU has one
EXPECTED = {"a100-80gb-sxm", "b200", "h100-pcie", "h100-sxm", "h200-sxm", "l40s", "mi300x"}


def _sourced_fields(spec: GpuSpec) -> dict[str, Sourced]:
    return {k: v for k, v in spec if isinstance(v, Sourced)}


def test_catalog_holds_the_expected_gpus() -> None:
    assert {e.name.removesuffix(".json") for e in GPU_FILES} == EXPECTED
    assert gpu_names() == sorted(EXPECTED)


@pytest.mark.parametrize("entry", GPU_FILES, ids=lambda e: e.name)
def test_file_validates_and_name_matches_stem(entry) -> None:
    data = json.loads(entry.read_text())
    assert "usd_per_gpu_hour" not in data  # prices live in the price lists (test_catalog_prices.py)
    spec = GpuSpec.model_validate({**data, **_price(data["name"])})
    assert spec.name == entry.name.removesuffix(".json")
    assert spec.vendor in {"nvidia", "amd"}
    assert spec.display_name.strip()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_value_has_source_and_date(name: str) -> None:
    fields = _sourced_fields(get_gpu(name))
    assert set(fields) - OPTIONAL_SOURCED == SOURCED_FIELDS
    for field, s in fields.items():
        assert s.source.strip(), f"{name}.{field}: empty source"
        dt.date.fromisoformat(s.checked)  # a real calendar date, not just the pattern


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_rates_positive_and_fp8_at_least_bf16(name: str) -> None:
    g = get_gpu(name)
    for s in _sourced_fields(g).values():
        if s is not g.fp8_dense_flops_per_s:
            assert s.value is not None and s.value > 0
    assert g.bandwidth > 0
    assert g.bf16_dense_flops_per_s.value is not None and g.bf16_dense_flops_per_s.value > 0
    fp8 = g.fp8_dense_flops_per_s.value
    if fp8 is not None:
        assert fp8 >= g.bf16_dense_flops_per_s.value
    assert g.max_gpus_per_node == 8


def test_h100_sxm_compute_bound_knee_matches_seed_article() -> None:
    g = get_gpu("h100-sxm")
    assert round(g.matmul_flops("bf16") / g.bandwidth) == 295  # 989 TFLOPS / 3.35 TB/s


def test_unknown_gpu_is_invalid_input_listing_valid_names() -> None:
    with pytest.raises(InvalidInput) as ei:
        get_gpu("nope")
    assert ei.value.field == "gpu"
    for name in gpu_names():
        assert name in str(ei.value)


def test_lookup_is_case_insensitive() -> None:
    assert get_gpu("H100-SXM").name == "h100-sxm"


@pytest.mark.parametrize(
    ("name", "tokens", "seqs"),
    [
        ("h100-sxm", 8192, 1024),
        ("h200-sxm", 8192, 1024),
        ("b200", 8192, 1024),
        ("mi300x", 8192, 1024),
        ("a100-80gb-sxm", 2048, 256),
        ("l40s", 2048, 256),
    ],
)
def test_vllm_v1_default_batching(name: str, tokens: int, seqs: int) -> None:
    g = get_gpu(name)
    assert g.vllm_default_max_num_batched_tokens == tokens
    assert g.vllm_default_max_num_seqs == seqs


def test_a100_has_no_fp8_and_falls_back_to_bf16() -> None:
    g = get_gpu("a100-80gb-sxm")
    assert g.fp8_dense_flops_per_s.value is None
    assert "fp8" in g.fp8_dense_flops_per_s.source.lower()
    assert g.matmul_flops("fp8") == g.matmul_flops("bf16") == 312e12


def test_fp8_uses_fp8_rate_where_present() -> None:
    assert get_gpu("h100-sxm").matmul_flops("fp8") == 1979e12
