"""What every use case of planner.api shares: the keyword checks (`base_dir`, flags, plan's
workers), catalog names or local files for models and profiles, and a deployment resolved on its
profile."""

from __future__ import annotations

import numbers
import os
from pathlib import Path
from typing import TYPE_CHECKING

from planner.errors import InvalidInput, echo
from planner.schema.inputs import local_path

if TYPE_CHECKING:
    from planner.costmodel.profile import Endpoint, Profile
    from planner.deployment import Deployment, ResolvedDeployment

BaseDir = str | Path | None

# Plan's worker processes: the CLI's --workers range.
MAX_PLAN_WORKERS = 64


def base_folder(base_dir: BaseDir) -> Path | None:
    """The `base_dir` keyword as a folder path: None, a str or an os.PathLike, else InvalidInput."""
    if base_dir is None:
        return None
    if not isinstance(base_dir, str | os.PathLike):
        raise InvalidInput(
            "base_dir", f"expected a folder path (str or Path) or None, got {type(base_dir).__name__}"
        )
    try:
        return Path(base_dir)
    except TypeError as exc:  # an os.PathLike whose __fspath__ returns no str
        raise InvalidInput("base_dir", f"not a path: {exc}") from None


def bool_keyword(value: object, name: str) -> bool:
    """A bool keyword: True or False only (a string "no" would read as true)."""
    if not isinstance(value, bool):
        raise InvalidInput(name, f"expected True or False, got {type(value).__name__} {echo(value)}")
    return value


def workers_keyword(value: object) -> int | None:
    """Plan's `workers` keyword: None (the default) or an integer in [1, MAX_PLAN_WORKERS]."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidInput(
            "workers",
            f"expected an integer in [1, {MAX_PLAN_WORKERS}] or None, got {type(value).__name__} {echo(value)}",
        )
    n = int(value)
    if not 1 <= n <= MAX_PLAN_WORKERS:
        raise InvalidInput("workers", f"must be in [1, {MAX_PLAN_WORKERS}], got {n:,}")
    return n


def model_ref(name: str, base: Path | None) -> str:
    """A catalog name as is; a config.json path taken from `base`."""
    from planner.catalog.models import model_names

    if name.lower() in {n.lower() for n in model_names()}:
        return name
    return local_path(name, base)


def profile_for(
    spec: str, gpu_name: str, base: Path | None, field: str = "profile", endpoint: Endpoint = "chat"
) -> Profile:
    from planner.costmodel.profiles import BUILTIN_NAMES, resolve_profile

    if spec not in BUILTIN_NAMES:
        spec = local_path(spec, base)  # read within planner.files.PROFILE's bounds
    return resolve_profile(spec, gpu_name, field, endpoint)


def resolve_deployment(
    deployment: Deployment, profile_spec: str, base: Path | None, endpoint: Endpoint = "chat"
) -> tuple[ResolvedDeployment, Profile]:
    """The deployment on its profile, the front end the workload's `endpoint`'s."""
    from planner.catalog.gpus import get_gpu
    from planner.costmodel.speculative import with_measured_acceptance

    gpu = get_gpu(deployment.gpu, "deployment.gpu")
    profile = profile_for(profile_spec, gpu.name, base, endpoint=endpoint)
    model = model_ref(deployment.model, base)
    if model != deployment.model:
        deployment = deployment.model_copy(update={"model": model})
    if deployment.speculative_decoding is not None:  # acceptance_from: a vllm bench result
        sd = with_measured_acceptance(deployment.speculative_decoding, base, "deployment.speculative_decoding")
        deployment = deployment.model_copy(update={"speculative_decoding": sd})
    return deployment.resolve(profile), profile


def no_rate_override(requests_per_s: float | None) -> None:
    if requests_per_s is not None:
        raise InvalidInput(
            "requests_per_s",
            "the workload is a closed loop (arrivals.concurrency); give its rate cap as workload.arrivals.requests_per_s",
        )
