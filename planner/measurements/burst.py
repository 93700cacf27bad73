"""A burst's tail: how much longer N prompts sent at once take than their mean lengths say.

A saturation run (`vllm bench serve --request-rate inf`, no cap) ends when its last response is
done, and its throughput is total tokens over that duration. The analytic model's figure for it
is the closed loop of N clients (planner/closed_loop.py): N requests served at the loop's rate,
i.e. every token at the rate of a full engine. That holds while requests wait for a seat; once
none waits, the requests still running finish one by one and the batch thins: the last steps run
a few sequences at almost the cost of a full one. With lengths that spread (a dataset's, or
vLLM's random range) this drain is most of a burst's time past its bulk.

The drain, in decode steps k = 0, 1, ...: K sequences run (K = min(N, the most decodes a step
holds)); the share still running after k steps is S(k): P(D > k) when every request starts at
once (N <= K), the equilibrium residual E[(D - k)+] / E[D] when a queue fed them in turn (N > K;
D = output tokens - 1, a request's decode steps). The drain lasts until fewer than half a
sequence runs, each step costing a decode step of max(K S(k), 1) sequences
(`planner.latency.replica.decode_step_s`); the closed loop had counted the same tokens at a full
engine's pace, E[R] steps of K sequences (E[R] = the sum of S(k)). The tail is the difference.
A constant length with N <= K has no tail (all finish together).
"""

from __future__ import annotations

import math

import numpy as np

from planner.latency.replica import Replica, decode_step_s
from planner.workload import LengthDistribution

__all__ = ["MAX_DRAIN_STEPS", "burst_tail_s", "running_share"]

MAX_DRAIN_STEPS = 1_000_000  # decode steps walked at most (a bound: outputs are <= max_model_len)
LAST_SEQUENCE = 0.5  # the drain ends when fewer than this many sequences are expected to run


def running_share(output: LengthDistribution, steps: np.ndarray, queued: bool) -> np.ndarray:
    """S(k) at each k of `steps` (module docstring): the share of the K sequences still running
    after k decode steps. Suffix sums over the support's sorted decode counts: O(steps + support)
    memory, whatever the longest output."""
    values, probs = output.support()
    d = np.maximum(values - 1.0, 0.0)
    order = np.argsort(d, kind="stable")
    d, probs = d[order], probs[order]
    # tail_p[i] = P(D >= d[i]), tail_pd[i] = E[D; D >= d[i]] (suffix sums; a zero past the end)
    tail_p = np.append(np.cumsum(probs[::-1])[::-1], 0.0)
    tail_pd = np.append(np.cumsum((probs * d)[::-1])[::-1], 0.0)
    first_above = np.searchsorted(d, steps, side="right")  # the first support point with D > k
    if not queued:
        return np.asarray(tail_p[first_above])
    mean_d = float(tail_pd[0])
    if mean_d <= 0.0:
        return np.zeros(len(steps))
    return np.asarray((tail_pd[first_above] - steps * tail_p[first_above]) / mean_d)


def burst_tail_s(replica: Replica, output: LengthDistribution, prompts: int) -> float:
    """Seconds a burst of `prompts` requests lasts past N / (the closed loop's rate)."""
    running = min(float(prompts), replica.decode_cap)
    queued = prompts > replica.decode_cap
    longest = int(min(math.ceil(output.max_tokens), MAX_DRAIN_STEPS))
    steps = np.arange(longest, dtype=float)
    share = running_share(output, steps, queued)
    active = running * share
    drain = active >= LAST_SEQUENCE
    if not drain.any():
        return 0.0
    batches, counts = np.unique(np.maximum(np.rint(active[drain]), 1.0), return_counts=True)
    drain_s = float(sum(n * decode_step_s(replica, b) for b, n in zip(batches.tolist(), counts.tolist(), strict=True)))
    at_full_pace_s = float(share.sum()) * decode_step_s(replica, running)
    return max(0.0, drain_s - at_full_pace_s)
