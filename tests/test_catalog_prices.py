"""GPU price lists: one source and one date per list, every price pinned to its transcription,
the catalog's price the default list's, and the lists a request may name."""

from __future__ import annotations

import datetime as dt
import json
from importlib import resources

import pytest

from planner.catalog.gpus import get_gpu, gpu_names
from planner.catalog.prices import DEFAULT_PRICE_LIST, fallback, get_price_list, price_list_names
from planner.errors import InvalidInput

PRICE_DIR = resources.files("planner.catalog") / "data" / "prices"
README = (PRICE_DIR / "README.md").read_text()

# The transcriptions the lists are made of, row by row (USD per GPU-hour, on demand, 1 GPU):
# tgarg01/silybench-data prices/gpu_hourly.yaml at commit 045df3bf56b8, rows checked 2026-09-25
# (RunPod "Secure Cloud" / "Community Cloud", Lambda "1x ...", Nebius "HGX ..."), and DigitalOcean's
# "Droplet Pricing" page validated 2026-05-28 (GPU Droplet L40s $1.57, MI300X $1.99).
SOURCES = {
    "runpod-secure-2026-09-25": {
        "a100-80gb-sxm": 1.59, "b200": 6.79, "h100-pcie": 2.89, "h100-sxm": 3.49, "h200-sxm": 4.59, "l40s": 1.09,
    },
    "runpod-community-2026-09-25": {
        "a100-80gb-sxm": 1.39, "b200": 5.98, "h100-pcie": 1.99, "h100-sxm": 2.69, "h200-sxm": 3.59, "l40s": 0.79,
    },
    "lambda-2026-09-25": {"b200": 6.99, "h100-pcie": 3.29, "h100-sxm": 4.29},
    "nebius-2026-09-25": {"b200": 7.15, "h100-sxm": 3.85, "h200-sxm": 4.5, "l40s": 1.55},
    "digitalocean-2026-05-28": {"l40s": 1.57, "mi300x": 1.99},
}  # fmt: skip


def test_every_list_is_pinned_to_its_transcription() -> None:
    assert price_list_names() == sorted(SOURCES)
    for name, want in SOURCES.items():
        lst = get_price_list(name)
        assert {g: p.usd_per_gpu_hour for g, p in lst.prices.items()} == want, name


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_one_source_one_date_catalog_gpus_only(name: str) -> None:
    lst = get_price_list(name)
    raw = json.loads((PRICE_DIR / f"{name}.json").read_text())
    assert raw["name"] == name and name.endswith(lst.checked)  # the date is part of the name
    dt.date.fromisoformat(lst.checked)
    assert lst.url.startswith("https://") and lst.source.strip() and lst.provider.strip()
    assert set(lst.prices) <= set(gpu_names())
    assert f"`{name}`" in README  # attributed


def test_the_catalog_price_is_the_default_lists_else_the_fallbacks() -> None:
    default = get_price_list(DEFAULT_PRICE_LIST)
    assert set(default.prices) == set(gpu_names()) - {"mi300x"}
    for gpu in gpu_names():
        spec = get_gpu(gpu)
        lst = default if gpu in default.prices else fallback(gpu, DEFAULT_PRICE_LIST)
        assert lst is not None and spec.price_list == lst.name
        assert spec.price == lst.prices[gpu].usd_per_gpu_hour
        assert spec.usd_per_gpu_hour.checked == lst.checked
        assert lst.url in spec.usd_per_gpu_hour.source and lst.name in spec.usd_per_gpu_hour.source


def test_fallback_prefers_the_default_then_the_newest() -> None:
    assert fallback("mi300x", DEFAULT_PRICE_LIST) == get_price_list("digitalocean-2026-05-28")
    assert fallback("h200-sxm", "lambda-2026-09-25") == get_price_list(DEFAULT_PRICE_LIST)
    # Without the default: the newest lists pricing the L40S are nebius and runpod-community (both
    # 2026-09-25, before DigitalOcean's 2026-05-28); the name breaks the tie.
    assert fallback("l40s", DEFAULT_PRICE_LIST) == get_price_list("nebius-2026-09-25")
    assert fallback("no-such-gpu", DEFAULT_PRICE_LIST) is None


def test_unknown_list_names_the_field_and_the_choices() -> None:
    with pytest.raises(InvalidInput) as exc:
        get_price_list("aws", "price_list")
    assert exc.value.field == "price_list"
    assert "unknown price list 'aws'; valid: digitalocean-2026-05-28, lambda-2026-09-25" in exc.value.reason
