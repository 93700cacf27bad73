"""Profile files: round trip, corrupt or mismatched files refused with a clear error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner.costmodel.calibrated import builtin_calibrated, builtin_gpus
from planner.costmodel.profile import (
    REQUIRED_FILE_FIELDS,
    THEORETICAL,
    Profile,
    load_profile_file,
    profile_to_json,
    resolve_profile,
    save_profile_file,
)
from planner.errors import InvalidInput


def test_builtin_gpus() -> None:
    assert builtin_gpus() == ["h100-pcie", "h100-sxm", "h200-sxm"]


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


def test_auto_profile_is_calibrated_where_one_ships_else_theoretical() -> None:
    from planner.costmodel.profile import THEORETICAL, resolve_profile

    assert resolve_profile("auto", "h200-sxm") == resolve_profile("calibrated", "h200-sxm")
    assert resolve_profile("auto", "h100-sxm").name == "h100-sxm-transferred-from-h200-sxm"
    assert resolve_profile("auto", "l40s") is THEORETICAL
    assert resolve_profile("auto", "a100-80gb-sxm") is THEORETICAL
