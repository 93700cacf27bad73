"""The shipped H200 profile: fitted to our own measurements, regenerated with
`python -m planner.costmodel.calibrated [DIR]`; and the names this module used to hold.

The fit is planner.costmodel.fitting's; which profile a name means (the registry, the
built-in files, transfers to unmeasured GPUs) is planner.costmodel.profiles'. Both are
re-exported here under their historical names for callers that import them from here.
"""

from __future__ import annotations

import hashlib
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from planner.costmodel.fitting import (
    BOUNDS,
    HINTS,
    MAX_FIT_MAPE,
    MIN_INDEPENDENCE,
    NOISE_FLOOR,
    PARAMETERS,
    SCALES,
    STARTS,
    Calibration,
    Observation,
    ParameterReport,
    Predictor,
    UnderdeterminedFit,
    check_gpu_matches,
    check_model_matches,
    fit_profile,
    linear_layers_time_s,
    mape,
    observations,
    predict,
)
from planner.costmodel.profile import profile_to_json
from planner.costmodel.profiles import builtin_profile as builtin_calibrated
from planner.costmodel.profiles import measured_gpus as builtin_gpus

__all__ = [
    "BOUNDS",
    "FITTED_GPU",
    "FITTED_MEASUREMENTS",
    "FITTED_MODEL",
    "HINTS",
    "MAX_FIT_MAPE",
    "MIN_INDEPENDENCE",
    "NOISE_FLOOR",
    "PARAMETERS",
    "SCALES",
    "STARTS",
    "Calibration",
    "Observation",
    "ParameterReport",
    "Predictor",
    "UnderdeterminedFit",
    "builtin_calibrated",
    "builtin_gpus",
    "check_gpu_matches",
    "check_model_matches",
    "fit_builtin",
    "fit_profile",
    "linear_layers_time_s",
    "mape",
    "observations",
    "predict",
    "write_builtin_profiles",
]

FITTED_GPU = "h200-sxm"
FITTED_MEASUREMENTS = "h200_qwen3_8b_shape.json"
FITTED_MODEL = "Qwen/Qwen3-8B"


def _measurements_dir() -> Any:
    return resources.files("planner.costmodel") / "data" / "measurements"


# --- regenerating the built-in files ------------------------------------------------------------


def fit_builtin() -> Calibration:
    """The shipped h200-sxm fit, from the shipped measurements."""
    from planner.catalog.gpus import get_gpu
    from planner.catalog.models import get_model
    from planner.costmodel.fit_data import parse_json

    entry = _measurements_dir() / FITTED_MEASUREMENTS
    text = entry.read_text()
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    meas = parse_json(text, FITTED_MEASUREMENTS)
    return fit_profile(
        meas,
        get_model(FITTED_MODEL),
        get_gpu(FITTED_GPU),
        name=f"{FITTED_GPU}-calibrated",
        source_label=f"planner/costmodel/data/measurements/{FITTED_MEASUREMENTS} (sha256 {digest}...)",
    )


def write_builtin_profiles(directory: str | Path) -> list[Path]:
    """Write the H200 profile fitted here (the other GPUs' come from
    tools/profiles_from_aiconfigurator.py)."""
    path = Path(directory) / f"{FITTED_GPU}.json"
    path.write_text(profile_to_json(fit_builtin().profile))
    return [path]


if __name__ == "__main__":  # python -m planner.costmodel.calibrated [DIR]
    target = sys.argv[1] if len(sys.argv) > 1 else str(Path(__file__).parent / "data" / "profiles")
    for p in write_builtin_profiles(target):
        print(p)
