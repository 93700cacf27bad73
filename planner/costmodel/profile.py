"""Hardware profiles: how far a real serving stack falls short of the roofline.

A profile describes a GPU and serving stack, not one model: efficiencies divide the datasheet
bandwidth and FLOP rates, and a fixed per-step overhead covers launches, scheduling and sampling.
`theoretical` (all 1, no overhead) reproduces the seed article's numbers exactly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from planner.errors import InvalidInput


class Profile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    gpu: str | None = None  # None: applies to any GPU (theoretical)
    eta_bandwidth: float = Field(default=1.0, gt=0, le=1)
    eta_matmul: float = Field(default=1.0, gt=0, le=1)
    eta_attention: float = Field(default=1.0, gt=0, le=1)
    step_overhead_s: float = Field(default=0.0, ge=0, le=1)
    source: str = ""


THEORETICAL = Profile(
    name="theoretical",
    source="Roofline bound: datasheet bandwidth and dense FLOP/s at 100%, no per-step overhead.",
)

BUILTIN_NAMES = ("theoretical", "calibrated")


def load_profile_file(path: str | Path, field: str = "profile") -> Profile:
    p = Path(path)
    try:
        data: Any = json.loads(p.read_text())
    except FileNotFoundError:
        raise InvalidInput(
            field, f"no such profile file: {path} (or use one of {', '.join(BUILTIN_NAMES)})"
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInput(field, f"cannot read profile {path}: {exc}") from None
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(x) for x in err["loc"]) or "(root)"
        raise InvalidInput(field, f"profile {path}: {loc}: {err['msg']}") from None


def resolve_profile(spec: str, gpu_name: str, field: str = "profile") -> Profile:
    """`theoretical`, `calibrated` (the built-in profile for this GPU) or a profile file path.
    A file made for another GPU is refused: its efficiencies describe different hardware."""
    if spec == "theoretical":
        return THEORETICAL
    if spec == "calibrated":
        from planner.costmodel.calibrated import builtin_calibrated

        return builtin_calibrated(gpu_name, field)
    prof = load_profile_file(spec, field)
    if prof.gpu is not None and prof.gpu != gpu_name:
        raise InvalidInput(field, f"profile {spec} was fitted on {prof.gpu}, not {gpu_name}")
    return prof
