"""GPU price lists: one file per list under data/prices/ (its README names the sources).

A price list is one provider's offer read on one date, and the catalog GPUs it prices in USD per
GPU-hour on demand. A plan compares GPUs by their prices, so it prices them from one list
(`price_list` in a plan request, DEFAULT_PRICE_LIST unless asked); a GPU that list does not price
is left out of the default candidates, and one the request lists anyway is priced from another
list with a warning that the plan mixes price sources (planner/plan/defaults.py). The catalog's
own `usd_per_gpu_hour` (what `evaluate` and `analyze` charge unless told) is the default list's
price, else the `fallback` list's.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from planner.errors import InvalidInput, echo

__all__ = [
    "DEFAULT_PRICE_LIST",
    "ListedPrice",
    "PriceList",
    "fallback",
    "get_price_list",
    "price_list_names",
]

DEFAULT_PRICE_LIST = "runpod-secure-2026-09-25"
MAX_LISTED_USD_PER_GPU_HOUR = 1000.0  # the request's pricing range (planner.schema.inputs)


class ListedPrice(BaseModel):
    """One GPU's price on a list, and the product the provider sells it as."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
    usd_per_gpu_hour: float = Field(gt=0, le=MAX_LISTED_USD_PER_GPU_HOUR)
    product: str = Field(min_length=1)


class PriceList(BaseModel):
    """One source, one date, the GPUs it prices (catalog names)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    provider: str = Field(min_length=1)
    offer: str = Field(min_length=1)
    url: str = Field(pattern=r"^https://")
    checked: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")
    source: str = Field(min_length=1)
    note: str = ""
    prices: dict[str, ListedPrice] = Field(min_length=1)

    def title(self) -> str:
        """How a report names the list: `runpod-secure-2026-09-25 (RunPod, Secure Cloud ...,
        https://..., checked 2026-09-25)`."""
        return f"{self.name} ({self.provider}, {self.offer}, {self.url}, checked {self.checked})"

    def source_of(self, gpu: str) -> str:
        """Where `gpu`'s price comes from, in a catalog entry's words."""
        p = self.prices[gpu]
        note = f". {self.note}" if self.note else ""
        return (
            f"price list {self.name}: {self.provider}, {p.product}, ${p.usd_per_gpu_hour:g}/GPU-hour "
            f"({self.url}); {self.source}{note}"
        )


def _dir() -> Any:
    return resources.files("planner.catalog") / "data" / "prices"


@cache
def _all() -> dict[str, PriceList]:
    out: dict[str, PriceList] = {}
    for entry in sorted(_dir().iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".json"):
            lst = PriceList.model_validate(json.loads(entry.read_text()))
            if lst.name != entry.name.removesuffix(".json"):
                raise ValueError(f"price list {entry.name} is named {echo(lst.name)}")
            out[lst.name] = lst
    return out


def price_list_names() -> list[str]:
    return sorted(_all())


def get_price_list(name: str, field: str = "price_list") -> PriceList:
    try:
        return _all()[name.lower()]
    except KeyError:
        raise InvalidInput(
            field, f"unknown price list {echo(name)}; valid: {', '.join(price_list_names())}"
        ) from None


def fallback(gpu: str, exclude: str) -> PriceList | None:
    """The list that prices `gpu` when `exclude` (the list asked for) does not: the default list,
    else the most recently checked, then by name; None when no list prices it."""
    have = [lst for lst in _all().values() if lst.name != exclude and gpu in lst.prices]
    if not have:
        return None
    return min(have, key=lambda lst: (lst.name != DEFAULT_PRICE_LIST, _days_ago(lst.checked), lst.name))


def _days_ago(checked: str) -> int:
    """Sorts newer first without a clock: minus the date's ordinal."""
    import datetime as dt

    return -dt.date.fromisoformat(checked).toordinal()
