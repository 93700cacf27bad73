"""The steps' chain for alike prompts (`steps.chain_company`), rebuilt from a state for the
tests that pin the step mix: its step lengths, its company probability and its steps' scale."""

from __future__ import annotations

from typing import Any

import numpy as np

from planner.latency.arrivals import steps_by_count


def chain_of(state: Any, lam: float, dispersion: float, prompt: float) -> tuple[float, float]:
    """Constant `prompt`-token prompts of one chunk each: a step with j of them lasts the lone
    prompt's step (its chunk beside n_arr decodes, plus the decoder's own t_dec - t_arr) plus
    tau per further prompt's token, up to the budget's room s_f - prompt; a decode-only step
    t_dec. tau is the full step's marginal token (T_full - t_arr) / s_f where whole prompts do
    not share steps, and a joining prompt's own time per token, Jc / prompt (`State.join_cost`,
    pinned to the step formula in test_latency_shared.py), where they do (`State.join_weight`
    blends the two). Returns (P(a prompt has company), E_pi[L] / t_step)."""
    s_f = state.share_full
    tau = (state.t_full - state.t_arr) / s_f
    tau += state.join_weight * (state.join_cost / prompt - tau)
    lone = float(state.chunk_time[0, -1]) + state.t_dec - state.t_arr
    j = np.arange(64, dtype=np.float64)
    lengths = lone + tau * np.minimum((j - 1.0) * prompt, s_f - prompt)
    lengths[0] = state.t_dec
    dist = steps_by_count(lam, lengths, dispersion)
    per_prompt = j[1:] * dist[1:]
    return 1.0 - float(per_prompt[0] / per_prompt.sum()), float(dist @ lengths) / state.t_step
