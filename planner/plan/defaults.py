"""What a plan request leaves unsaid, made explicit: which GPUs are candidates and what each
costs (docs/plan.md, "Defaults").

A plan compares GPUs, so every candidate needs the same standard of evidence and of price:

* Candidates. Unlisted (`candidates.gpus` unset): the catalog GPUs with their own measured
  profile (`auto`, `calibrated`), or every GPU with `theoretical` (all on the bare roofline, the
  same footing), or the GPU a profile file was fitted on; and of those, the ones the price list
  prices (or `pricing:` prices). `candidates.allow_transferred_profiles` adds, with `auto`, the
  GPUs timed by the nearest measured GPU's efficiencies. A GPU listed explicitly that `auto` could
  only time with a transferred profile is refused (InvalidInput naming the field and the flag):
  the user asked for that GPU, and a plan on borrowed efficiencies must be asked for knowingly.
* Prices. Each GPU's on-demand price is the request's `pricing:` entry, else the request's price
  list's (`price_list`, default planner.catalog.prices.DEFAULT_PRICE_LIST), else, for a GPU that
  list does not price and the request lists explicitly, the fallback list's, with a warning that
  the plan mixes price sources. The notes name the list.
* Availability. Each deployment (each pool) keeps at least `availability.min_replicas` (default
  2: a production service must survive a restart, an upgrade or a lost node) replicas in every
  bucket with demand, and `spare_replicas` beyond those its load needs (N+1 with 1); the MILP
  and the alternatives size with the rule (solvers.milp_data), the binding constraints say
  where it sets the count.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TypedDict

from planner.errors import InvalidInput
from planner.plan.planning import Planning
from planner.plan.solve import Prices
from planner.schema.plan_request import PlanRequest
from solvers.milp import MilpResult

__all__ = [
    "availability",
    "availability_binding",
    "candidate_gpus",
    "other_gpus",
    "price_note",
    "price_warnings",
    "prices",
]


def _profile_pool(req: PlanRequest, base: Path | None) -> list[str]:
    """The GPUs the request's profile times with the evidence a default candidate needs."""
    from planner.catalog.gpus import gpu_names
    from planner.costmodel.profiles import BUILTIN_NAMES, measured_gpus

    spec = req.profile
    if spec == "theoretical":
        return gpu_names()
    if spec == "calibrated" or (spec == "auto" and not req.candidates.allow_transferred_profiles):
        return measured_gpus()
    if spec in BUILTIN_NAMES:  # auto, transferred profiles allowed
        return gpu_names()
    from planner.costmodel.profile import load_profile_file
    from planner.schema.inputs import local_path

    fitted_on = load_profile_file(local_path(spec, base), "profile").gpu
    return gpu_names() if fitted_on is None else [fitted_on]


def _priced(req: PlanRequest, gpu: str) -> bool:
    from planner.catalog.prices import get_price_list

    over = req.pricing.get(gpu)
    return (over is not None and over.usd_per_gpu_hour is not None) or gpu in get_price_list(
        req.price_list
    ).prices


def _check_listed(req: PlanRequest, gpus: Sequence[str]) -> None:
    """A listed GPU that `auto` would time with another GPU's efficiencies: refused unless asked."""
    from planner.costmodel.profiles import measured_gpus, nearest_measured_gpu

    if req.profile != "auto" or req.candidates.allow_transferred_profiles:
        return
    for gpu in gpus:
        if gpu not in measured_gpus():
            near = nearest_measured_gpu(gpu)
            raise InvalidInput(
                "candidates.gpus",
                f"{gpu} has no measured profile: profile auto would time it with {near}'s efficiencies, "
                "transferred (larger errors than on a measured GPU); set "
                "candidates.allow_transferred_profiles: true to plan on it anyway (labelled, with a "
                "warning), pass a profile fitted on it (capplan calibrate), or use profile: theoretical",
            )


def candidate_gpus(req: PlanRequest, base: Path | None) -> tuple[list[str], list[str]]:
    """The GPUs the plan considers (sorted) and the notes that say why, when defaulted."""
    from planner.catalog.gpus import gpu_names

    listed = req.candidates.gpus
    if listed is not None:
        _check_listed(req, listed)
        for gpu in listed:
            _price_of(req, gpu)  # a GPU no list prices: the request's fault, said now
        return sorted(listed), []
    pool = _profile_pool(req, base)
    gpus = [g for g in pool if _priced(req, g)]
    if not gpus:
        raise InvalidInput(
            "candidates.gpus",
            f"no catalog GPU is both timed by profile {req.profile} and priced by price list {req.price_list}; "
            "list GPUs in candidates.gpus and price them in pricing:",
        )
    why = {
        "theoretical": "every catalog GPU (profile theoretical: all on the roofline)",
        "calibrated": "the GPUs with their own measured profile",
        "auto": "the GPUs with their own measured profile"
        if not req.candidates.allow_transferred_profiles
        else "every catalog GPU (measured or transferred profiles)",
    }.get(req.profile, f"the GPU profile {req.profile} was fitted on")
    note = f"candidates: {why} that price list {req.price_list} prices: {', '.join(gpus)}"
    left = [g for g in gpu_names() if g not in gpus]
    unpriced = [g for g in pool if g not in gpus]
    if unpriced:
        note += f"; not priced by it: {', '.join(unpriced)} (list them in candidates.gpus or price them in pricing:)"
    untimed = [g for g in left if g not in pool]
    if untimed and req.profile == "auto":
        note += (
            f"; no measured profile: {', '.join(untimed)} (candidates.allow_transferred_profiles: true adds "
            "them with a transferred profile)"
        )
    return gpus, [note]


def other_gpus(req: PlanRequest, listed: Sequence[str]) -> list[str]:
    """Catalog GPUs outside `listed` that the request could add to candidates.gpus as it is (a
    profile of the same standard, a price from its list): the ones an answer may suggest. None
    with a profile file (fitted on one GPU)."""
    pool = _profile_pool(req, None) if req.profile in ("auto", "calibrated", "theoretical") else []
    return [g for g in pool if g not in listed and _priced(req, g)]


def _price_of(req: PlanRequest, gpu: str) -> tuple[float, str | None]:
    """On-demand USD per GPU-hour of `gpu` and the list it comes from (None: `pricing:`)."""
    from planner.catalog.prices import fallback, get_price_list

    over = req.pricing.get(gpu)
    if over is not None and over.usd_per_gpu_hour is not None:
        return over.usd_per_gpu_hour, None
    lst = get_price_list(req.price_list)
    if gpu not in lst.prices:
        other = fallback(gpu, lst.name)
        if other is None:
            raise InvalidInput(
                f"pricing.{gpu}.usd_per_gpu_hour", f"no price list prices {gpu}: give its price"
            )
        lst = other
    return lst.prices[gpu].usd_per_gpu_hour, lst.name


def prices(req: PlanRequest, gpus: Sequence[str]) -> list[Prices]:
    """Each GPU's bill: the on-demand price (above), the request's reserved price and cap."""
    out = []
    for gpu in sorted(gpus):
        over = req.pricing.get(gpu)
        out.append(
            Prices(
                gpu=gpu,
                usd_per_gpu_hour=_price_of(req, gpu)[0],
                reserved_usd_per_gpu_hour=None if over is None else over.reserved_usd_per_gpu_hour,
                inventory=req.inventory.get(gpu),
            )
        )
    return out


def _sources(req: PlanRequest, gpus: Sequence[str]) -> dict[str | None, list[str]]:
    out: dict[str | None, list[str]] = {}
    for gpu in sorted(gpus):
        out.setdefault(_price_of(req, gpu)[1], []).append(gpu)
    return out


def price_note(req: PlanRequest, gpus: Sequence[str]) -> str:
    """Where the plan's prices come from: the list (provider, offer, page, date), overrides."""
    from planner.catalog.prices import get_price_list

    by = _sources(req, gpus)
    parts = [f"prices: price list {get_price_list(req.price_list).title()}"]
    if None in by:
        parts.append(f"pricing: sets {', '.join(by[None])}")
    for name, gs in sorted((k, v) for k, v in by.items() if k is not None and k != req.price_list):
        parts.append(f"{', '.join(gs)} from price list {get_price_list(name).title()}")
    return "; ".join(parts)


def price_warnings(req: PlanRequest, gpus: Sequence[str]) -> list[str]:
    """A plan that compares GPUs priced from different lists (providers, dates) says so."""
    from planner.catalog.prices import get_price_list

    by = {k: v for k, v in _sources(req, gpus).items() if k is not None}
    if len(by) < 2:
        return []
    parts = [
        f"{', '.join(gs)} from {name} ({get_price_list(name).provider}, checked {get_price_list(name).checked})"
        for name, gs in sorted(by.items())
    ]
    return [
        "the plan mixes price sources: "
        + "; ".join(parts)
        + f". {req.price_list} does not price every listed GPU, so GPUs are compared at different providers' "
        "prices; set pricing: for each of them to compare like with like"
    ]


class AvailabilityKeywords(TypedDict):
    min_replicas: int
    spare_replicas: int


def availability(req: PlanRequest) -> AvailabilityKeywords:
    """The request's availability rule as planner.plan.solve.milp_data's keywords: every
    deployment (each pool) in use keeps at least `min_replicas` replicas in each bucket with
    demand, and `spare_replicas` beyond those whose capacity covers it (solvers.milp_data)."""
    a = req.availability
    return AvailabilityKeywords(min_replicas=a.min_replicas, spare_replicas=a.spare_replicas)


def availability_binding(pl: Planning, result: MilpResult) -> list[str]:
    """Where the availability rule, not the demand, sets a deployment's replicas: the buckets
    with demand where it holds exactly `min_replicas` though its load needs fewer (one
    configuration serves the whole demand, each pool of a disaggregated one too; in a mixed
    plan the buckets it sits at the floor), and the spare replicas kept."""
    from planner.plan.planning import replicas_at

    a, rates = pl.req.availability, pl.forecast.rates_per_s
    out = []
    mixed = pl.req.candidates.mixed_gpu_types
    for cid, reps in sorted(result.replicas.items()):
        p = pl.by_id.get(cid)
        if p is None or a.min_replicas <= 1:
            continue
        floor = [
            b
            for b, n in enumerate(reps)
            if rates[b] > 0
            and n == a.min_replicas
            and (mixed or replicas_at(rates[b] * (1.0 + pl.req.headroom), p) + a.spare_replicas < n)
        ]
        if floor:
            what = "holds" if mixed else "is held to"
            out.append(
                f"availability.min_replicas: {cid} {what} {a.min_replicas} replicas in {len(floor)} of "
                f"{len(rates)} buckets{'' if mixed else ' where its load needs fewer'}"
            )
    if a.spare_replicas > 0:
        out.append(
            f"availability.spare_replicas: each deployment keeps {a.spare_replicas} replica"
            f"{'s' if a.spare_replicas > 1 else ''} beyond those its load needs in every bucket with demand"
        )
    return out
