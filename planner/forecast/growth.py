"""Traffic growth applied to a forecast: `10%/month` compounds from the end of the history (the
bucket h after it is multiplied by 1.1^((h + 0.5) bucket_s / 30 days), its middle); a bare
factor (`1.5`, `x1.5`) multiplies every bucket. Rates in -100% .. +1000% per unit, factors in
0 .. 100."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from planner.errors import InvalidInput, echo
from planner.forecast.base import DAY_S, FloatArray

PER_UNIT_S = {"day": DAY_S, "week": 7 * DAY_S, "month": 30 * DAY_S, "year": 365 * DAY_S}
_RATE = re.compile(r"^\s*([+-]?\d+(?:\.\d+)?)\s*%\s*/\s*(day|week|month|year)\s*$")
_FACTOR = re.compile(r"^\s*x?\s*(\d+(?:\.\d+)?)\s*$")
MAX_RATE_PCT = 1000.0
MAX_FACTOR = 100.0


@dataclass(frozen=True)
class Growth:
    text: str
    factor: float | None = None  # flat multiplier
    rate: float | None = None  # fractional growth per `per_s`
    per_s: float | None = None


def parse_growth(text: str, field: str = "--growth") -> Growth:
    m = _RATE.match(text)
    if m:
        pct = float(m.group(1))
        if not -100.0 < pct <= MAX_RATE_PCT:
            raise InvalidInput(field, f"a rate must be in (-100%, {MAX_RATE_PCT:g}%] per unit, got {pct:g}%")
        return Growth(text.strip(), rate=pct / 100.0, per_s=PER_UNIT_S[m.group(2)])
    m = _FACTOR.match(text)
    if m:
        factor = float(m.group(1))
        if not (math.isfinite(factor) and 0.0 < factor <= MAX_FACTOR):
            raise InvalidInput(field, f"a factor must be in (0, {MAX_FACTOR:g}], got {factor:g}")
        return Growth(text.strip(), factor=factor)
    raise InvalidInput(
        field,
        f"expected a rate like 10%/month (day, week, month, year) or a factor like 1.5, got {echo(text)}",
    )


def growth_factors(growth: Growth, horizon: int, bucket_s: float) -> FloatArray:
    if growth.factor is not None:
        return np.full(horizon, growth.factor)
    assert growth.rate is not None and growth.per_s is not None
    mid_s = (np.arange(horizon, dtype=np.float64) + 0.5) * bucket_s
    return np.power(1.0 + growth.rate, mid_s / growth.per_s)


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$")
_UNIT_S = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": DAY_S, "w": 7 * DAY_S}
MAX_DURATION_S = 10 * 365 * DAY_S


def parse_duration_s(text: str, field: str) -> float:
    """`30d`, `1h`, `90m`, `2w`, `3600s` -> seconds, in (0, 10 years]."""
    m = _DURATION.match(text)
    if not m:
        raise InvalidInput(field, f"expected a duration like 30d, 1h, 15m, 2w or 3600s, got {echo(text)}")
    seconds = float(m.group(1)) * _UNIT_S[m.group(2)]
    if not 0.0 < seconds <= MAX_DURATION_S:
        raise InvalidInput(field, f"must be in (0, 10 years], got {echo(text)}")
    return seconds
