"""Invariants the latency model's components assert at their boundaries: what one stage hands
the next is in range (probabilities in [0, 1], rates and times finite or, where the model says
so, infinite, never negative or NaN). A violation is a defect of the model, not bad input (inputs
are checked where they enter, `InvalidInput`), so it raises `ModelInvariantError`, an
AssertionError that `python -O` does not strip, naming the quantity and its value."""

from __future__ import annotations

import math


class ModelInvariantError(AssertionError):
    """A component of the latency model produced or received a value out of its range."""


def check_probability(name: str, value: float) -> float:
    """`value` if it is a probability (in [0, 1]), else ModelInvariantError."""
    if not 0.0 <= value <= 1.0:
        raise ModelInvariantError(f"{name} must be a probability in [0, 1], got {value!r}")
    return value


def check_rate(name: str, value: float) -> float:
    """`value` if it is finite and >= 0 (a rate, a count, a share of time), else the error."""
    if not (0.0 <= value < math.inf):
        raise ModelInvariantError(f"{name} must be finite and >= 0, got {value!r}")
    return value


def check_time(name: str, value: float) -> float:
    """`value` if it is a time >= 0, infinite allowed (an unstable queue's wait), NaN not."""
    if not value >= 0.0:
        raise ModelInvariantError(f"{name} must be a time >= 0 (inf allowed), got {value!r}")
    return value


def check_positive(name: str, value: float) -> float:
    """`value` if it is > 0 and finite: a count or scale something is divided by."""
    if not (0.0 < value < math.inf):
        raise ModelInvariantError(f"{name} must be finite and > 0 (it divides), got {value!r}")
    return value
