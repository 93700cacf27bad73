"""ITL (docs/latency/itl.md): the quantiles of the steps a decoder sees between its tokens.
Decode-only steps (t_dec, or, where the decode count wanders, a lognormal of the other decodes
in the step, `decode_count.decode_company`) and the mixed steps of the step mix (`steps.step_mix`:
full chunks, last chunks alone or with company, a backlog's full steps), each step read with a
relative spread (`quantiles.tail_quantiles`).

Pure functions of named inputs returning immutable results; the state's stages
(`at_state.StateResults`) gather the step mix and hand one level's quantile vectors to the other
(`ItlLevel`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from planner.costmodel.steptime import StepCoefficients, step_time_s
from planner.latency.decode_count import DecodeCompany
from planner.latency.invariants import check_positive, check_time
from planner.latency.quantiles import SPREAD, tail_quantiles
from planner.latency.replica import Replica
from planner.latency.results import State
from planner.latency.slices import (
    SLICE_PROB_LIST,
    decode_slice_spread,
    lognormal_slice_list,
    lognormal_top_slice,
)

FloatArray = npt.NDArray[np.float64]

# The quantile levels ITL (and TTFT) report: p50 and p99.
LEVELS = np.array([0.5, 0.99])
# P(X > quantile) at each level.
TAIL_EPS = (1.0 - LEVELS).tolist()
# Below this share of mixed steps both p50 and p99 fall on decode-only steps (a tolerance: the
# p99 level's own tail mass, 1 - 0.99).
MIXED_NEGLIGIBLE = 0.01


class ItlLevel(NamedTuple):
    """One ITL quantile and the quantile vectors it computed on the way (the mixed steps alone,
    and with the decode-only slices; None where not needed), which the other level reuses."""

    itl_s: float
    mixed: FloatArray | None
    all_steps: FloatArray | None


def itl_level(
    *,
    level_index: int,
    decode_step_s: float,
    mixed_values: FloatArray,
    mixed_rates: FloatArray,
    decode_others: DecodeCompany | None,
    max_decodes: float,
    decode_step_of: Callable[[float], float],
    mixed: FloatArray | None = None,
    all_steps: FloatArray | None = None,
    mixed_rates_sum: float | None = None,
) -> ItlLevel:
    """Quantile LEVELS[level_index] of the steps a decoder sees: decode-only steps
    (`decode_others`' lognormal of other decodes, each timed by `decode_step_of`, capped at
    `max_decodes`; or `decode_step_s` when the count does not wander) and the mixed steps
    (`mixed_values`, their shares of all steps `mixed_rates`). Where the mixed steps alone reach
    the level above every decode-only step, the decode-only slices cannot move it (the tail
    there is the mixed steps'), and they are not timed. `mixed` and `all_steps`: the quantile
    vectors a previous level computed at the same state (reused, not recomputed);
    `mixed_rates_sum`: `mixed_rates`' sum where the caller has it (`Steps.rates_sum`)."""
    if not 0 <= level_index < LEVELS.size:
        raise IndexError(f"level_index {level_index} outside LEVELS")
    check_time("decode_step_s", decode_step_s)
    total = float(np.add.reduce(mixed_rates)) if mixed_rates_sum is None else mixed_rates_sum
    # >= 0, not NaN; inf where the state is past its stable range (a step that never ends: the
    # quantiles read inf and the capacity search steps back; a disaggregated plan reaches it)
    check_time("mixed steps' share", total)
    if decode_others is None:
        if total <= MIXED_NEGLIGIBLE:  # p99 and p50 both fall on decode-only steps
            return ItlLevel(decode_step_s, mixed, all_steps)
        if mixed is None:
            mixed = tail_quantiles(decode_step_s, mixed_values, mixed_rates, LEVELS, total=total)
        return ItlLevel(float(mixed[level_index]), mixed, all_steps)
    mean, sigma = decode_others
    top_count = min(lognormal_top_slice(sigma, mean) + 1.0, max_decodes)
    top = decode_step_of(top_count) * (1.0 + SPREAD)  # above every decode-only step
    if total >= TAIL_EPS[level_index]:
        if mixed is None:
            mixed = tail_quantiles(0.0, mixed_values, mixed_rates, LEVELS, total=total)
        q = float(mixed[level_index])
        if q >= top:
            return ItlLevel(q, mixed, all_steps)
    if all_steps is None:
        all_steps = _with_decode_slices(
            mixed_values=mixed_values, mixed_rates=mixed_rates, total=total, top_s=top,
            decode_others=decode_others, max_decodes=max_decodes, decode_step_of=decode_step_of,
        )  # fmt: skip
    return ItlLevel(float(all_steps[level_index]), mixed, all_steps)


def _with_decode_slices(
    *,
    mixed_values: FloatArray,
    mixed_rates: FloatArray,
    total: float,
    top_s: float,
    decode_others: DecodeCompany,
    max_decodes: float,
    decode_step_of: Callable[[float], float],
) -> FloatArray:
    """The quantiles with the decode-only slices: the level lies below `top_s` (the decode-only
    steps have mass there), where the mixed steps that start above it count whole: only those
    below take part. The count is a time average and a decoder's gaps come one per step: short
    steps come more often, so each slice's share of decode-only steps is probability / time."""
    mean, sigma = decode_others
    seen = [decode_step_of(min(c + 1.0, max_decodes)) for c in lognormal_slice_list(sigma, mean)]
    # every step finite and > 0 (each divides): the least > 0, and the sum finite (no inf, no NaN)
    check_positive("decode-only step", min(seen))
    check_positive("decode-only steps' sum", sum(seen))
    shares = [p / t for p, t in zip(SLICE_PROB_LIST, seen, strict=True)]
    scale = max(1.0 - total, 0.0) / sum(shares)
    below = mixed_values * (1.0 - SPREAD) < top_s
    values = np.concatenate((mixed_values[below], seen))
    rates = np.concatenate((mixed_rates[below], [w * scale for w in shares]))
    spread: float | FloatArray = SPREAD
    narrow = decode_slice_spread(seen)
    if narrow < SPREAD:
        spread = np.full(values.size, SPREAD)
        spread[-len(seen) :] = narrow
    return tail_quantiles(seen[0], values, rates, LEVELS, spread, total=max(total, 1.0))


def itl_worst_case_s(
    *,
    coefficients: StepCoefficients,
    full_share_tokens: float,
    prompt_p99_tokens: float,
    decodes: float,
    context_mean: float,
) -> float:
    """A decode step that carries a full budget at the p99 prompt's last chunk (engines with a
    prefill; a decode pool's worst step is its decode-only step)."""
    s_f = max(full_share_tokens, 1.0)
    offset = max(0.0, prompt_p99_tokens - s_f)
    return step_time_s(coefficients, s_f, offset, decodes, decodes * context_mean)


def itl_worst_at(replica: Replica, s: State, *, prompt_p99_tokens: float) -> float:
    """`itl_worst_case_s` at the state (a decode pool: its decode-only step)."""
    if not replica.has_prefill:
        return s.t_dec
    return itl_worst_case_s(
        coefficients=replica.step_coefficients, full_share_tokens=s.share_full,
        prompt_p99_tokens=prompt_p99_tokens, decodes=s.n_dec, context_mean=replica.decode_context_tokens,
    )  # fmt: skip
