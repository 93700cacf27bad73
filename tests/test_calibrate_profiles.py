"""Profile files (round trip, corrupt or mismatched files refused with a clear error) and the
registry: built-in measured profiles, `auto` transferring the nearest measured GPU's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner.catalog.gpus import get_gpu, gpu_names
from planner.costmodel import profiles
from planner.costmodel.profile import (
    REQUIRED_FILE_FIELDS,
    THEORETICAL,
    Profile,
    load_profile_file,
    profile_to_json,
    save_profile_file,
)
from planner.costmodel.profiles import (
    DEFAULT_PROFILE,
    architecture,
    builtin_profile,
    measured_gpus,
    nearest_measured_gpu,
    resolve_profile,
)
from planner.deployment import Deployment
from planner.errors import InvalidInput

builtin_calibrated = builtin_profile


def test_every_shipped_profile_is_measured_on_its_own_gpu() -> None:
    shipped = measured_gpus()
    assert "h200-sxm" in shipped and "h100-pcie" not in shipped  # h100-pcie is transferred, not shipped
    for gpu in shipped:
        p = builtin_profile(gpu)
        assert p.gpu == gpu and p.warning is None
        assert "transferred" not in p.name.lower() and not p.source.startswith("Transferred")


@pytest.mark.parametrize(
    "prof", [builtin_calibrated("h200-sxm"), THEORETICAL, Profile(name="x", prefix_kv_passes=3.5)]
)
def test_profile_round_trips_through_a_file(tmp_path: Path, prof: Profile) -> None:
    path = tmp_path / "p.json"
    save_profile_file(prof, path)
    back = load_profile_file(path)
    assert back == prof
    assert profile_to_json(back) == path.read_text()
    if prof.gpu:
        assert resolve_profile(str(path), prof.gpu) == prof


def _write(tmp_path: Path, data: object, name: str = "p.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def _good() -> dict:
    return builtin_calibrated("h200-sxm").model_dump()


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="no such profile file"):
        resolve_profile(str(tmp_path / "nope.json"), "h200-sxm", "--profile")
    with pytest.raises(InvalidInput, match="is a directory"):
        resolve_profile(str(tmp_path), "h200-sxm", "--profile")


def test_corrupt_json(tmp_path: Path) -> None:
    path = _write(tmp_path, '{"name": "x", "eta_bandwidth": ')
    with pytest.raises(InvalidInput, match="cannot read profile") as exc:
        resolve_profile(str(path), "h200-sxm", "--profile")
    assert exc.value.field == "--profile"


@pytest.mark.parametrize("missing", REQUIRED_FILE_FIELDS)
def test_missing_field_is_named(tmp_path: Path, missing: str) -> None:
    data = _good()
    del data[missing]
    with pytest.raises(InvalidInput, match=f"missing field\\(s\\) {missing}"):
        resolve_profile(str(_write(tmp_path, data)), "h200-sxm")


def test_source_is_optional(tmp_path: Path) -> None:
    data = _good()
    del data["source"]
    assert resolve_profile(str(_write(tmp_path, data)), "h200-sxm").source == ""


def test_a_file_written_before_the_new_fields_keeps_its_meaning(tmp_path: Path) -> None:
    """The H200 profile as shipped before the per-query-head re-read, the phantom tokens, the
    activation passes and vLLM's vocabulary accounting: it loads, the new fields off, and times
    a chunked step as it did (34.1 passes over the KV bytes, written out here)."""
    from planner.catalog.models import get_model
    from planner.costmodel.roofline import Replica

    old = {
        "name": "h200-sxm-calibrated",
        "gpu": "h200-sxm",
        "eta_bandwidth": 0.6906483619593718,
        "eta_matmul": 0.6478398934202994,
        "eta_attention": 0.4337268034176005,
        "step_overhead_s": 0.0007803192833172375,
        "prefix_kv_passes": 34.145624866987106,
        "decode_attention_items_per_sm": 0.7968172681680341,
    }
    prof = resolve_profile(str(_write(tmp_path, old)), "h200-sxm")
    assert prof.prefix_query_kv_passes == prof.matmul_phantom_tokens == prof.activation_passes == 0.0
    assert not prof.sampled_logits
    q8 = get_model("Qwen/Qwen3-8B")
    step = Replica(q8, get_gpu("h200-sxm"), profile=prof).breakdown([(512, 15360)], 0, 0.0)
    assert step.prefix_reread_s == pytest.approx(
        34.145624866987106 * 15360 * 147_456 / (0.6906483619593718 * 4.8e12)
    )
    assert step.elementwise_s == 0.0
    # the vocabulary as the seed counts it: every token through the embedding and lm_head
    assert step.linear_flops == 2 * q8.active_params * 512


@pytest.mark.parametrize(
    ("key", "value", "msg"),
    [
        ("eta_matmul", 1.5, "eta_matmul"),
        ("eta_bandwidth", 0, "eta_bandwidth"),
        ("step_overhead_s", -1e-3, "step_overhead_s"),
        ("prefix_kv_passes", "many", "prefix_kv_passes"),
        ("surprise", 1, "surprise"),
    ],
)
def test_bad_values_are_named(tmp_path: Path, key: str, value: object, msg: str) -> None:
    data = _good()
    data[key] = value
    with pytest.raises(InvalidInput, match=msg):
        resolve_profile(str(_write(tmp_path, data)), "h200-sxm")


def test_not_an_object(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="expected a JSON object"):
        resolve_profile(str(_write(tmp_path, [1, 2])), "h200-sxm")


def test_profile_of_another_gpu_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, _good())
    with pytest.raises(InvalidInput, match="fitted on h200-sxm, not h100-sxm"):
        resolve_profile(str(path), "h100-sxm", "--profile")


def test_gpu_agnostic_file_applies_anywhere(tmp_path: Path) -> None:
    data = _good() | {"gpu": None}
    path = _write(tmp_path, data)
    assert resolve_profile(str(path), "l40s").eta_matmul == data["eta_matmul"]


def test_auto_is_the_default_and_never_silently_the_roofline() -> None:
    assert DEFAULT_PROFILE == "auto"
    assert Deployment(model="Qwen/Qwen3-8B", gpu="h200-sxm").resolve().replica.profile == resolve_profile(
        "auto", "h200-sxm"
    )
    for gpu in gpu_names():
        p = resolve_profile("auto", gpu)
        assert p.gpu == gpu and p != THEORETICAL
        if gpu in measured_gpus():
            assert p == resolve_profile("calibrated", gpu) and p.warning is None
        else:
            assert p.name.startswith("calibrated (transferred from ") and p.warning
    assert resolve_profile("theoretical", "mi300x") is THEORETICAL


@pytest.mark.parametrize(("gpu", "source"), [("h100-pcie", "h100-sxm"), ("mi300x", "h200-sxm")])
def test_auto_transfers_the_nearest_measured_gpu_and_says_so(gpu: str, source: str) -> None:
    """h100-pcie: the same Hopper family, and the H100 SXM is closer in bandwidth and FLOP rate
    than the H200 (2.0 vs 3.35 / 4.8 TB/s). mi300x: no AMD GPU is measured; the H200 is the
    closest in bandwidth (5.3 vs 4.8 TB/s) and FLOP rate (1307 vs 989 TFLOP/s)."""
    assert nearest_measured_gpu(gpu) == source
    p = resolve_profile("auto", gpu)
    origin = builtin_profile(source)
    assert p.name == f"calibrated (transferred from {source})" and p.gpu == gpu
    assert p.source.startswith("Transferred, not measured") and origin.source in p.source
    assert p.warning is not None and gpu in p.warning and source in p.warning
    for k in ("eta_bandwidth", "eta_matmul", "eta_attention", "step_overhead_s", "prefix_kv_passes"):
        assert getattr(p, k) == getattr(origin, k)
    r = Deployment(model="Qwen/Qwen3-8B", gpu=gpu).resolve()
    assert r.replica.profile == p  # the warning travels with the deployment


def test_calibrated_is_the_gpus_own_profile_only() -> None:
    with pytest.raises(InvalidInput) as e:
        resolve_profile("calibrated", "mi300x")
    assert e.value.field == "profile"
    assert "no calibrated profile ships for mi300x" in e.value.reason and "h200-sxm" in e.value.reason


def test_architecture_families() -> None:
    fam = {g: architecture(get_gpu(g)) for g in gpu_names()}
    assert fam["h100-sxm"] == fam["h100-pcie"] == fam["h200-sxm"] == "nvidia-hopper"
    assert fam["a100-80gb-sxm"] == "nvidia-ampere" and fam["l40s"] == "nvidia-ada"
    assert fam["b200"] == "nvidia-blackwell" and fam["mi300x"] == "amd-cdna3"


def test_transfers_pick_up_whatever_is_measured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The registry reads the data folder: with only the H200 and A100 measured, h100-pcie takes
    the H200's (same family) and l40s the A100's (no Ada GPU; the nearest NVIDIA one); a new
    file for h100-sxm takes over h100-pcie at once."""
    real = profiles._profiles_dir()
    for g in ("h200-sxm", "a100-80gb-sxm"):
        (tmp_path / f"{g}.json").write_text((real / f"{g}.json").read_text())
    monkeypatch.setattr(profiles, "_profiles_dir", lambda: tmp_path)
    assert measured_gpus() == ["a100-80gb-sxm", "h200-sxm"]
    assert nearest_measured_gpu("h100-pcie") == "h200-sxm"
    assert nearest_measured_gpu("l40s") == "a100-80gb-sxm"
    assert resolve_profile("auto", "h100-sxm").name == "calibrated (transferred from h200-sxm)"
    (tmp_path / "h100-sxm.json").write_text((real / "h100-sxm.json").read_text())
    assert nearest_measured_gpu("h100-pcie") == "h100-sxm"


def test_nothing_measured_is_the_roofline_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(profiles, "_profiles_dir", lambda: tmp_path)
    p = resolve_profile("auto", "h200-sxm")
    assert p.name == "theoretical" and p.warning and "roofline" in p.warning
