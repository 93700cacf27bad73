"""Hardware profiles: how far a real serving stack falls short of the roofline.

A profile describes a GPU and serving stack, not one model: efficiencies divide the datasheet
bandwidth and FLOP rates, a fixed per-step overhead covers launches, scheduling and sampling, and
`prefix_kv_passes` charges chunked prefill for re-reading the prefix KV (see
docs/calibration.md). `theoretical` (all 1, no overhead, no re-reads) reproduces the seed
article's numbers exactly; every field added since defaults to the theoretical value.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from planner.errors import InvalidInput


class Profile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str = Field(min_length=1)
    gpu: str | None = None  # None: applies to any GPU (theoretical)
    eta_bandwidth: float = Field(default=1.0, gt=0, le=1)
    eta_matmul: float = Field(default=1.0, gt=0, le=1)
    eta_attention: float = Field(default=1.0, gt=0, le=1)
    step_overhead_s: float = Field(default=0.0, ge=0, le=1)
    # Extra passes over each prefill chunk's prefix KV per step, at the achieved bandwidth and
    # not hidden under the step's compute (0 = the roofline's single, overlapped read).
    prefix_kv_passes: float = Field(default=0.0, ge=0, le=1000)
    source: str = ""


THEORETICAL = Profile(
    name="theoretical",
    source="Roofline bound: datasheet bandwidth and dense FLOP/s at 100%, no per-step overhead.",
)

BUILTIN_NAMES = ("theoretical", "calibrated", "auto")

# What a profile file must spell out: every number, so a truncated or hand-mangled file is refused
# rather than silently filled with theoretical defaults. `source` is optional prose.
REQUIRED_FILE_FIELDS = tuple(k for k in Profile.model_fields if k != "source")


def profile_from_data(data: Any, what: str, field: str = "profile") -> Profile:
    """Validate parsed JSON as a complete profile; errors name `what` (a path) and the key."""
    if not isinstance(data, dict):
        raise InvalidInput(field, f"profile {what}: expected a JSON object, got {type(data).__name__}")
    missing = [k for k in REQUIRED_FILE_FIELDS if k not in data]
    if missing:
        raise InvalidInput(field, f"profile {what}: missing field(s) {', '.join(missing)}")
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(x) for x in err["loc"]) or "(root)"
        raise InvalidInput(field, f"profile {what}: {loc}: {err['msg']}") from None


def load_profile_file(path: str | Path, field: str = "profile") -> Profile:
    p = Path(path)
    try:
        data: Any = json.loads(p.read_text())
    except FileNotFoundError:
        raise InvalidInput(
            field, f"no such profile file: {path} (or use one of {', '.join(BUILTIN_NAMES)})"
        ) from None
    except IsADirectoryError:
        raise InvalidInput(field, f"profile {path} is a directory, not a JSON file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInput(field, f"cannot read profile {path}: {exc}") from None
    return profile_from_data(data, str(path), field)


def profile_to_json(profile: Profile) -> str:
    """The file format `load_profile_file` reads back: every field, floats at full precision."""
    return json.dumps(profile.model_dump(), indent=2) + "\n"


def save_profile_file(profile: Profile, path: str | Path, field: str = "-o") -> None:
    try:
        Path(path).write_text(profile_to_json(profile))
    except OSError as exc:
        raise InvalidInput(field, f"cannot write profile {path}: {exc.strerror or exc}") from None


def resolve_profile(spec: str, gpu_name: str, field: str = "profile") -> Profile:
    """`theoretical`, `calibrated` (the built-in profile for this GPU), `auto` (calibrated where
    one ships for this GPU, else theoretical: the planning default, so predictions are as
    realistic as the data allows and say which they used) or a profile file path.
    A file made for another GPU is refused: its efficiencies describe different hardware."""
    if spec == "theoretical":
        return THEORETICAL
    if spec == "auto":
        from planner.costmodel.calibrated import builtin_calibrated, builtin_gpus

        return builtin_calibrated(gpu_name, field) if gpu_name in builtin_gpus() else THEORETICAL
    if spec == "calibrated":
        from planner.costmodel.calibrated import builtin_calibrated

        return builtin_calibrated(gpu_name, field)
    prof = load_profile_file(spec, field)
    if prof.gpu is not None and prof.gpu != gpu_name:
        raise InvalidInput(field, f"profile {spec} was fitted on {prof.gpu}, not {gpu_name}")
    return prof
