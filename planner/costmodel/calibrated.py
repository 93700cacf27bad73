"""Built-in calibrated profiles, one per GPU, shipped under data/profiles/<gpu>.json."""

from __future__ import annotations

import json
from importlib import resources

from planner.costmodel.profile import Profile
from planner.errors import InvalidInput


def builtin_calibrated(gpu_name: str, field: str = "profile") -> Profile:
    entry = resources.files("planner.costmodel") / "data" / "profiles" / f"{gpu_name}.json"
    if not entry.is_file():
        raise InvalidInput(
            field,
            f"no calibrated profile ships for {gpu_name}; fit one with `capplan calibrate` "
            "and pass its file, or use theoretical",
        )
    return Profile.model_validate(json.loads(entry.read_text()))
