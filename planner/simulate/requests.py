"""Simulator input: requests as three aligned arrays (arrival, prompt tokens, output tokens)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from planner.errors import InvalidInput


@dataclass(frozen=True)
class SimRequest:
    arrival_s: float
    prompt_tokens: int
    output_tokens: int


@runtime_checkable
class RequestColumns(Protocol):
    """Anything carrying the three columns as arrays (e.g. a sampled workload)."""

    arrival_s: Any
    prompt_tokens: Any
    output_tokens: Any


@dataclass(frozen=True)
class RequestArrays:
    arrival_s: npt.NDArray[np.float64]
    prompt_tokens: npt.NDArray[np.int64]
    output_tokens: npt.NDArray[np.int64]

    def __len__(self) -> int:
        return int(self.arrival_s.shape[0])


RequestsLike = RequestArrays | RequestColumns | Sequence[SimRequest] | tuple[Any, Any, Any]


def as_request_arrays(requests: RequestsLike) -> RequestArrays:
    """Normalize and validate the accepted input shapes: a RequestArrays, an object with
    `arrival_s`/`prompt_tokens`/`output_tokens` array attributes, a (arrival, prompt, output)
    tuple of arrays, or a sequence of SimRequest-like objects."""
    if isinstance(requests, RequestArrays):
        cols: tuple[Any, Any, Any] = (requests.arrival_s, requests.prompt_tokens, requests.output_tokens)
    elif isinstance(requests, tuple) and len(requests) == 3 and not isinstance(requests[0], SimRequest):
        cols = (requests[0], requests[1], requests[2])
    elif isinstance(requests, RequestColumns) and not isinstance(requests, SimRequest):
        cols = (requests.arrival_s, requests.prompt_tokens, requests.output_tokens)
    else:
        seq = list(requests)  # type: ignore[arg-type]
        cols = (
            [r.arrival_s for r in seq],
            [r.prompt_tokens for r in seq],
            [r.output_tokens for r in seq],
        )
    arrival = np.asarray(cols[0], dtype=np.float64).reshape(-1)
    prompt_raw = np.asarray(cols[1])
    output_raw = np.asarray(cols[2])
    if not (arrival.shape == prompt_raw.reshape(-1).shape == output_raw.reshape(-1).shape):
        raise InvalidInput("requests", "arrival_s, prompt_tokens and output_tokens differ in length")
    for name, raw in (("prompt_tokens", prompt_raw), ("output_tokens", output_raw)):
        if raw.size and not np.all(np.asarray(raw, dtype=np.float64) == np.floor(raw)):
            raise InvalidInput(f"requests.{name}", "must be whole numbers of tokens")
    prompt = prompt_raw.astype(np.int64).reshape(-1)
    output = output_raw.astype(np.int64).reshape(-1)
    if arrival.size and not np.all(np.isfinite(arrival)):
        raise InvalidInput("requests.arrival_s", "must be finite")
    if prompt.size and int(prompt.min()) < 1:
        raise InvalidInput("requests.prompt_tokens", "every request needs at least one prompt token")
    if output.size and int(output.min()) < 1:
        raise InvalidInput("requests.output_tokens", "every request needs at least one output token")
    return RequestArrays(arrival, prompt, output)
