"""What one replica's latency model is computed from: its step-time coefficients, its workload's
moments and its scheduler's limits, as named plain floats and small arrays, built once per engine
(`replica_of`) and read by every component (`steady`, `stability`, `steps`). Immutable: a
component that needs something derived from a state takes the state, not this.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from planner.costmodel.steptime import StepCoefficients, step_time_s
from planner.latency.results import State
from planner.latency.stats import WorkloadStats
from planner.scheduler_config import SchedulerConfig
from planner.schema.kinds import Role

FloatArray = npt.NDArray[np.float64]

# Representatives of a prompt's full chunks: exact up to this many chunks, else group midpoints
# (exact for step times affine in the chunk index; `steady.chunks`).
CHUNK_GROUPS = 4
# Prompt-length CV at which the company's count atoms have faded into the lognormal (a modelling
# choice: alike prompts share steps as whole prompts, spread ones as tokens; docs/latency.md,
# "Steps and company"). `atom_weight` = 1 - CV / ATOM_CV.
ATOM_CV = 0.5
# Chunk counts are ceil(Pe / share - CHUNK_ROUNDING): a tolerance so that a prompt of exactly j
# shares is j chunks despite the division's rounding.
CHUNK_ROUNDING = 1e-9
# 0 .. CHUNK_GROUPS - 1 and their midpoints, shared by every replica (read-only)
_GROUP_INDEX = np.arange(CHUNK_GROUPS, dtype=np.float64)
_GROUP_MIDPOINTS = np.arange(CHUNK_GROUPS, dtype=np.float64) + 0.5
_GROUP_INDEX.flags.writeable = False
_GROUP_MIDPOINTS.flags.writeable = False


@dataclass(frozen=True, eq=False, slots=True)
class Replica:
    """One replica in a role, as the model reads it (units in the names; per step, per token)."""

    step_coefficients: StepCoefficients  # the roofline step-time model (`costmodel.steptime`)
    stats: WorkloadStats
    role: Role
    has_decode: bool  # the replica runs decode steps (colocated with outputs, decode pool)
    has_prefill: bool  # prompts arrive at it (colocated, prefill pool)
    decode_steps: float  # E[output - 1] (/ E with speculative decoding) per request where it decodes, else 0
    arrival_cv2: float  # the arrival gaps' CV^2 (per replica)
    gap_shape: float  # the arrival gaps as a gamma's shape, 1 / c_a^2 (1 without spread)
    decode_context_tokens: float  # a decode's mean context (step-weighted)
    half_block_tokens: float  # the mean unfilled tail of a sequence's last KV block
    prompt_probs: FloatArray  # the prompt support's probabilities
    prefill_tokens: FloatArray  # tokens computed per prompt of the support (after cache hits)
    cached_tokens: FloatArray  # its prefix-cache hits (the first chunk's offset)
    longest_prefill_tokens: float
    mean_prefill_tokens: float
    mean_cached_tokens: float
    token_mean_prefill_tokens: float  # E[Pe^2] / E[Pe]: the prompt a computed token is in
    prefill_attention_context: float  # a computed token's mean attention context
    cached_per_computed: float  # E[p0] / E[Pe]: cached tokens re-read per computed one
    prompt_kv_tokens: FloatArray  # KV a prompt holds mid-prefill: p0 + Pe / 2 + half a block
    prefill_kappa: float  # E[X] E[X^3] / E[X^2]^2 of the prefill tokens
    budget_tokens: float  # max_num_batched_tokens
    # tokens of the budget one decode takes: 1, or k + 1 with speculative decoding (its last
    # token and k guesses, all scheduled: vLLM's num_scheduled_tokens per request)
    decode_budget_tokens: float
    seats: float  # max_num_seqs
    kv_cache_tokens: float
    chunk_threshold_tokens: float  # long_prefill_token_threshold (0: off)
    decode_cap: float  # the most decodes a step holds: seats, the KV cache, the budget
    atom_weight: float  # how far prompts are alike (1 - CV / ATOM_CV, at least 0)
    shares_steps: bool  # whole prompts share steps (`steady.shared_rate`)
    count_dispersion: float  # the steps' chain's count: Poisson (1) or negative binomial (c_a^2)
    chunk_group_index: FloatArray  # 0 .. CHUNK_GROUPS - 1
    chunk_group_midpoints: FloatArray  # 0.5 .. CHUNK_GROUPS - 0.5
    ones_column: FloatArray  # (I, 1) ones: one chunk per prompt
    cached_column: FloatArray  # (I, 1) cached tokens


def room_beside(
    *, budget_share_tokens: float, mean_chunks: float, own_share_tokens: float, mean_prefill_tokens: float
) -> float:
    """The budget left beside a prompt's mean last chunk, s_f - r (r = E[Pe] - (E[k] - 1) s_own,
    the rest after its full chunks): what prompts arriving after it can fill of its step."""
    last = mean_prefill_tokens - (mean_chunks - 1.0) * max(own_share_tokens, 1.0)
    return max(max(budget_share_tokens, 1.0) - last, 0.0)


def room_after_tokens(replica: Replica, state: State) -> float:
    """`room_beside` at a state: the budget left beside a prompt's mean last chunk, what the
    prompts that arrive after it during the step under way can fill of its step."""
    return room_beside(
        budget_share_tokens=state.share_full,
        mean_chunks=state.mean_chunks,
        own_share_tokens=state.share_own,
        mean_prefill_tokens=replica.mean_prefill_tokens,
    )


def decode_step_s(replica: Replica, decodes: float) -> float:
    """A decode-only step of `decodes` decodes (scalar: cheaper than numpy on a few values)."""
    return step_time_s(replica.step_coefficients, 0.0, 0.0, decodes, decodes * replica.decode_context_tokens)


def full_service_s(replica: Replica, state: State) -> float:
    """A prompt's mean service in the prefill queue at a state: E[Pe] / s_f full steps."""
    return replica.mean_prefill_tokens * state.t_full / max(state.share_full, 1.0)


def replica_of(
    coefficients: StepCoefficients, stats: WorkloadStats, config: SchedulerConfig, role: Role
) -> Replica:
    """The replica's inputs, derived once from its coefficients, workload and scheduler."""
    half_block = config.block_size / 2.0
    has_decode = role != "prefill" and stats.decode_steps > 0
    has_prefill = role != "decode"
    ca2 = stats.arrival_cv2
    context = stats.decode_context
    probs, pe, p0 = stats.prompt_probs, stats.prefill_tokens, stats.cached_tokens
    mean_pe = stats.mean_prefill_tokens
    budget = float(config.max_num_batched_tokens)
    seats = float(config.max_num_seqs)
    kv_cap = float(config.kv_cache_tokens)
    threshold = float(config.long_prefill_token_threshold)
    moments = stats.prompt_moments  # the support's moments, once per workload
    # Speculative decoding (docs/speculative.md): a decode step yields E tokens on average, so a
    # request decodes in E[output - 1] / E steps, and each decode takes k + 1 budget tokens; the
    # step time (ITL, one streamed chunk per step) is the verify step's. Both 1 without.
    per_step = 1.0 + coefficients.accepted_tokens_per_step
    decode_budget = 1.0 + coefficients.speculative_tokens
    pe2 = moments.pe2
    atom_weight = max(0.0, 1.0 - math.sqrt(stats.prefill_cv2) / ATOM_CV)
    # the room beside a prompt's mean last chunk with no decodes: the most a step ever has
    s_own = min(budget, threshold) if threshold > 0 else budget
    chunks = np.maximum(np.ceil(pe / max(s_own, 1.0) - CHUNK_ROUNDING), 1.0)
    room_at_rest = room_beside(
        budget_share_tokens=budget,
        mean_chunks=float(probs @ chunks),
        own_share_tokens=s_own,
        mean_prefill_tokens=mean_pe,
    )
    replica = Replica(
        step_coefficients=coefficients,
        stats=stats,
        role=role,
        has_decode=has_decode,
        has_prefill=has_prefill,
        decode_steps=(stats.decode_steps if per_step == 1.0 else stats.decode_steps / per_step) if has_decode else 0.0,
        arrival_cv2=ca2,
        gap_shape=1.0 / ca2 if ca2 > 0.0 else 1.0,
        decode_context_tokens=context,
        half_block_tokens=half_block,
        prompt_probs=probs,
        prefill_tokens=pe,
        cached_tokens=p0,
        longest_prefill_tokens=moments.longest_prefill_tokens,
        mean_prefill_tokens=mean_pe,
        mean_cached_tokens=moments.mean_cached_tokens,
        token_mean_prefill_tokens=pe2 / mean_pe,
        prefill_attention_context=stats.prefill_attention_context,
        cached_per_computed=moments.mean_cached_tokens / mean_pe,
        prompt_kv_tokens=moments.prompt_kv_base + half_block,
        prefill_kappa=mean_pe * moments.pe3 / (pe2 * pe2),
        budget_tokens=budget,
        decode_budget_tokens=decode_budget,
        seats=seats,
        kv_cache_tokens=kv_cap,
        chunk_threshold_tokens=threshold,
        decode_cap=min(seats, kv_cap / (context + half_block), budget if decode_budget == 1.0 else budget / decode_budget),
        atom_weight=atom_weight,
        shares_steps=atom_weight > 0.0 and has_decode and has_prefill and room_at_rest > mean_pe,
        count_dispersion=max(ca2, 1.0),
        chunk_group_index=_GROUP_INDEX,
        chunk_group_midpoints=_GROUP_MIDPOINTS,
        ones_column=moments.ones_column,
        cached_column=moments.cached_column,
    )
    _check(replica)
    return replica


def _check(r: Replica) -> None:
    """The invariants every component divides by: positive budget, seats, cache and prompts."""
    assert r.budget_tokens >= 1.0 and r.seats >= 1.0 and r.kv_cache_tokens > 0.0, "scheduler limits"
    least = r.stats.prompt_moments.least_prefill_tokens
    assert r.mean_prefill_tokens >= 1.0 and least >= 1.0, "prefill tokens >= 1"
    assert math.isfinite(r.arrival_cv2) and r.arrival_cv2 >= 0.0, "arrival CV^2 finite, >= 0"
    assert r.decode_steps >= 0.0 and 0.0 <= r.atom_weight <= 1.0, "decode steps, atom weight"
