"""Simulator input: requests as three aligned arrays (arrival, prompt tokens, output tokens), or
a lazy stream of such chunks in arrival order (`RequestStream`), so a simulation of millions of
requests need not hold its whole input."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
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
    try:
        arrival = np.asarray(cols[0], dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise InvalidInput("requests.arrival_s", "must be numbers of seconds") from None
    prompt = _tokens(cols[1], "prompt_tokens")
    output = _tokens(cols[2], "output_tokens")
    if not (arrival.shape == prompt.shape == output.shape):
        raise InvalidInput("requests", "arrival_s, prompt_tokens and output_tokens differ in length")
    if arrival.size and not np.all(np.isfinite(arrival)):
        raise InvalidInput("requests.arrival_s", "must be finite")
    if prompt.size and int(prompt.min()) < 1:
        raise InvalidInput("requests.prompt_tokens", "every request needs at least one prompt token")
    if output.size and int(output.min()) < 1:
        raise InvalidInput("requests.output_tokens", "every request needs at least one output token")
    return RequestArrays(arrival, prompt, output)


# Per-request token counts beyond this are refused (the longest context windows are 10M tokens;
# it also keeps every sum of tokens far from int64 overflow).
MAX_REQUEST_TOKENS = 10_000_000


def _tokens(raw: Any, name: str) -> npt.NDArray[np.int64]:
    try:
        f = np.asarray(raw, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise InvalidInput(f"requests.{name}", "must be whole numbers of tokens") from None
    whole = np.isfinite(f) & (f == np.floor(f))
    ok = whole & (f <= MAX_REQUEST_TOKENS)
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        why = "a whole number" if not whole[i] else f"at most {MAX_REQUEST_TOKENS:,}"
        raise InvalidInput(f"requests.{name}", f"must be {why} of tokens; request {i} has {f[i]:g}")
    a = np.asarray(raw)
    return (a if a.dtype.kind in "iu" else f).astype(np.int64).reshape(-1)


class RequestStream:
    """Requests produced lazily, in arrival order, one chunk (anything `as_request_arrays`
    takes) at a time: a workload sampled or a trace tiled without materializing millions of
    requests. Iterate once; each chunk is validated (finite, arrivals non-decreasing within and
    across chunks). While iterating, `count`, `first_arrival_s`, `last_arrival_s`,
    `prompt_tokens_sum` and `output_tokens_sum` describe what has gone by (a report's input
    summary). `collect()` concatenates what is left into one RequestArrays."""

    def __init__(self, chunks: Iterable[Any], field: str = "requests") -> None:
        self._chunks = iter(chunks)
        self.field = field
        self.count = 0
        self.first_arrival_s = math.nan
        self.last_arrival_s = math.nan
        self.prompt_tokens_sum = 0
        self.output_tokens_sum = 0

    def __iter__(self) -> Iterator[RequestArrays]:
        for raw in self._chunks:
            chunk = as_request_arrays(raw)
            n = len(chunk)
            if n == 0:
                continue
            t = chunk.arrival_s
            if n > 1 and not bool(np.all(t[1:] >= t[:-1])):
                raise InvalidInput(f"{self.field}.arrival_s", "a stream's arrivals must be in time order")
            if self.count and not t[0] >= self.last_arrival_s:
                raise InvalidInput(f"{self.field}.arrival_s", "a stream's chunks must follow in time order")
            if not self.count:
                self.first_arrival_s = float(t[0])
            self.count += n
            self.last_arrival_s = float(t[-1])
            self.prompt_tokens_sum += int(chunk.prompt_tokens.sum())
            self.output_tokens_sum += int(chunk.output_tokens.sum())
            yield chunk

    def collect(self) -> RequestArrays:
        parts = list(self)
        if not parts:
            return RequestArrays(np.empty(0), np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64))
        return RequestArrays(
            np.concatenate([p.arrival_s for p in parts]),
            np.concatenate([p.prompt_tokens for p in parts]),
            np.concatenate([p.output_tokens for p in parts]),
        )


def within_context(reqs: RequestArrays, max_model_len: int, first_id: int = 0) -> tuple[RequestArrays, int]:
    """The requests as vLLM serves them under `max_model_len` (0: no limit): a prompt must leave
    room for an output token (vLLM refuses a prompt of max_model_len tokens or more: InvalidInput
    naming the request, `first_id` + its index), and generation stops at max_model_len (finish
    reason "length"): each output cut to max_model_len - prompt. Returns the requests and how
    many outputs were cut."""
    if max_model_len <= 0 or not len(reqs):
        return reqs, 0
    prompt, output = reqs.prompt_tokens, reqs.output_tokens
    over = prompt >= max_model_len
    if over.any():
        i = int(np.argmax(over))
        raise InvalidInput(
            "requests",
            f"request {first_id + i} has a {int(prompt[i]):,}-token prompt; the model's context "
            f"(max_model_len) is {max_model_len:,} tokens and vLLM refuses a prompt that leaves no "
            "room for an output token",
        )
    room = max_model_len - prompt
    cut = int(np.count_nonzero(output > room))
    if not cut:
        return reqs, 0
    return RequestArrays(reqs.arrival_s, prompt, np.minimum(output, room)), cut
