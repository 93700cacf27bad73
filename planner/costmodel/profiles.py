"""The profile registry: which profile a name means for a GPU, and the one default.

Names (`resolve_profile`):

* `theoretical`: the bare roofline (the seed article's numbers). Only when asked for.
* `calibrated`: the GPU's own measured profile, shipped under data/profiles/<gpu>.json (refused,
  naming the alternatives, for a GPU without one).
* `auto` (DEFAULT_PROFILE, for the library and every command alike): the GPU's own measured
  profile, else the nearest measured GPU's efficiencies, transferred: labelled
  "calibrated (transferred from <gpu>)" and carrying a `warning` the caller shows. `auto` never
  silently means the roofline: with no measured profile at all it is the roofline with a warning.
* anything else: a profile file (`capplan calibrate -o`); one fitted on another GPU is refused.

Nearest measured GPU (`nearest_measured_gpu`): the same architecture family first (the same
compute die and kernel stack: the efficiencies are ratios to each GPU's own datasheet peaks, so
they carry over to first order), then the same vendor, then any; among those, the closest in
memory bandwidth and dense bf16 FLOP rate (Euclidean distance of their logarithms); the name
breaks ties. So h100-pcie takes h100-sxm's profile, and mi300x (no AMD GPU measured) the H200's
(5.3 vs 4.8 TB/s, 1.31 vs 0.99 PFLOP/s: the closest pair). Every measured profile in the data
folder takes part: adding a file adds a source.
"""

from __future__ import annotations

import json
import math
from functools import cache
from importlib import resources
from typing import Any

from planner.catalog.gpus import GpuSpec, get_gpu
from planner.costmodel.profile import (
    BUILTIN_NAMES,
    THEORETICAL,
    Endpoint,
    Profile,
    load_profile_file,
    profile_from_data,
)
from planner.errors import InvalidInput

__all__ = [
    "BUILTIN_NAMES",
    "DEFAULT_PROFILE",
    "architecture",
    "builtin_profile",
    "measured_gpus",
    "nearest_measured_gpu",
    "resolve_profile",
    "transferred_profile",
]

DEFAULT_PROFILE = "auto"

# Architecture family by catalog-name prefix (longest match wins): GPUs of one family share a
# compute die generation and kernel stack.
_FAMILIES = (
    ("a100", "nvidia-ampere"),
    ("a10", "nvidia-ampere"),
    ("a30", "nvidia-ampere"),
    ("l40s", "nvidia-ada"),
    ("l40", "nvidia-ada"),
    ("l4", "nvidia-ada"),
    ("h100", "nvidia-hopper"),
    ("h200", "nvidia-hopper"),
    ("h20", "nvidia-hopper"),
    ("gh200", "nvidia-hopper"),
    ("b200", "nvidia-blackwell"),
    ("b300", "nvidia-blackwell"),
    ("gb200", "nvidia-blackwell"),
    ("mi300", "amd-cdna3"),
    ("mi325", "amd-cdna3"),
)


def architecture(gpu: GpuSpec) -> str:
    """The GPU's architecture family (`vendor-generation`), or its own name when unknown."""
    name = gpu.name.lower()
    best = max((p for p, _ in _FAMILIES if name.startswith(p)), key=len, default=None)
    return dict(_FAMILIES)[best] if best is not None else f"{gpu.vendor}-{name}"


def _profiles_dir() -> Any:
    return resources.files("planner.costmodel") / "data" / "profiles"


def measured_gpus() -> list[str]:
    """GPUs with their own shipped, measured profile (data/profiles/<gpu>.json)."""
    return sorted(e.name.removesuffix(".json") for e in _profiles_dir().iterdir() if e.name.endswith(".json"))


@cache
def _load_builtin(gpu_name: str) -> Profile:
    entry = _profiles_dir() / f"{gpu_name}.json"
    prof = profile_from_data(json.loads(entry.read_text()), f"built-in {entry.name}", "profile")
    if prof.gpu != gpu_name:
        raise InvalidInput("profile", f"built-in profile {entry.name} is for {prof.gpu}, not {gpu_name}")
    return prof


def builtin_profile(gpu_name: str, field: str = "profile") -> Profile:
    """The GPU's own measured profile; refused for a GPU without one."""
    if gpu_name not in measured_gpus():
        near = nearest_measured_gpu(gpu_name)
        alt = f"`auto` transfers {near}'s with a warning, " if near is not None else ""
        raise InvalidInput(
            field,
            f"no calibrated profile ships for {gpu_name} (measured: {', '.join(measured_gpus()) or 'none'}); "
            f"{alt}fit one with `capplan calibrate` and pass its file, or use theoretical",
        )
    try:
        return _load_builtin(gpu_name)
    except InvalidInput as exc:
        raise InvalidInput(field, exc.reason) from None


def _distance(a: GpuSpec, b: GpuSpec) -> float:
    bw = math.log(a.bandwidth / b.bandwidth)
    fl = math.log(a.matmul_flops("bf16") / b.matmul_flops("bf16"))
    return math.hypot(bw, fl)


def nearest_measured_gpu(gpu_name: str) -> str | None:
    """The measured GPU whose profile best stands in for `gpu_name`'s (module docstring); None
    when no GPU is measured. A measured GPU is its own nearest."""
    target = get_gpu(gpu_name, "deployment.gpu")
    family = architecture(target)

    def key(name: str) -> tuple[bool, bool, float, str]:
        g = get_gpu(name)
        return (architecture(g) != family, g.vendor != target.vendor, _distance(g, target), name)

    return min(measured_gpus(), key=key, default=None)


def transferred_profile(gpu_name: str, field: str = "profile") -> Profile:
    """The nearest measured GPU's efficiencies for `gpu_name`, labelled as transferred and
    carrying a warning; the roofline with a warning when nothing is measured."""
    source_gpu = nearest_measured_gpu(gpu_name)
    if source_gpu is None:
        return THEORETICAL.model_copy(
            update={
                "warning": f"no measured profile ships for any GPU: {gpu_name} is timed by the bare "
                "roofline (optimistic, often ~2x on capacity); fit one with `capplan calibrate`"
            }
        )
    src = builtin_profile(source_gpu, field)
    target, origin = get_gpu(gpu_name), get_gpu(source_gpu)
    same = architecture(target) == architecture(origin)
    why = (
        f"same {architecture(target)} architecture"
        if same
        else f"no {architecture(target)} GPU is measured; {source_gpu} is the closest in bandwidth and FLOP rate"
    )
    return src.model_copy(
        update={
            "name": f"calibrated (transferred from {source_gpu})",
            "gpu": gpu_name,
            "source": (
                f"Transferred, not measured: the {source_gpu} profile ({src.name}) applied to "
                f"{target.display_name} ({why}); efficiencies are ratios to each GPU's own datasheet "
                f"peaks. Origin: {src.source}"
            ),
            "warning": (
                f"no measured profile for {gpu_name}: using {source_gpu}'s efficiencies ({why}); "
                "expect larger errors than on a measured GPU; fit one with `capplan calibrate`"
            ),
        }
    )


def resolve_profile(spec: str, gpu_name: str, field: str = "profile", endpoint: Endpoint = "chat") -> Profile:
    """The profile `spec` means on `gpu_name` (module docstring), its front end the one of
    `endpoint` (Profile.for_endpoint: what a workload's `endpoint` selects); errors name `field`."""
    return _resolve_profile(spec, gpu_name, field).for_endpoint(endpoint)


def _resolve_profile(spec: str, gpu_name: str, field: str) -> Profile:
    if spec == "theoretical":
        return THEORETICAL
    if spec == "calibrated":
        return builtin_profile(gpu_name, field)
    if spec == "auto":
        if gpu_name in measured_gpus():
            return builtin_profile(gpu_name, field)
        return transferred_profile(gpu_name, field)
    prof = load_profile_file(spec, field)
    if prof.gpu is not None and prof.gpu != gpu_name:
        raise InvalidInput(field, f"profile {spec} was fitted on {prof.gpu}, not {gpu_name}")
    return prof
