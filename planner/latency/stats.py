"""What the latency model needs from a workload, computed once: plain floats and small arrays.

Build it once per workload (`WorkloadStats.of(workload)`) and reuse it across deployments; the
hot path never touches pydantic.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from planner.workload import Workload

FloatArray = npt.NDArray[np.float64]

# Points of the prompt-length support the model iterates over (tails keep their resolution:
# see LengthDistribution.support). 32 keeps the hot path lean; 64 changes p99s by well under 1%.
PROMPT_SUPPORT_POINTS = 32
OUTPUT_SUPPORT_POINTS = 64


@dataclass(frozen=True, eq=False)
class WorkloadStats:
    """Moments and supports of a workload, as the latency model consumes them.

    Prompts: support points `prompt_tokens` (ascending) with `prompt_probs`; of each prompt,
    `cached_tokens` = hit fraction x prompt are found in the prefix cache and `prefill_tokens`
    (>= 1) are computed, from offset `cached_tokens`. Outputs: a request decodes for
    `decode_steps` = E[output - 1] steps (the last prefill chunk samples the first token);
    `decode_context` is the mean context of a decode step, weighted by steps (long answers
    contribute more steps): E[sum_{j=1..d} (P + j)] / E[d]; `decode_context_sq` the same for
    context squared (for the variance of KV use); `decode_overlap` = E[min(d1, d2)] / E[d] of two
    independent answers (1 for alike lengths, 1/2 for exponential ones: how much of the arrivals'
    burstiness the decode count keeps, `Engine.decode_variance`); `kv_token_s` the mean and second
    moment of a request's KV held over its decode steps, in tokens x steps, E[d P + d (d + 1)/2]
    and its square's (`Engine.kv_full`). Arrivals: `arrival_cv2` = 1/burstiness, rates
    in requests/s for the whole deployment (`bucket_rates` per bucket, or None)."""

    name: str | None
    prompt_tokens: FloatArray
    prompt_probs: FloatArray
    prefill_tokens: FloatArray
    cached_tokens: FloatArray
    prefix_cache_hit_fraction: float
    mean_prompt_tokens: float
    mean_prefill_tokens: float
    prefill_cv2: float
    prefill_attention_context: float
    prompt_p50_tokens: float
    prompt_p99_tokens: float
    prompt_max_tokens: float
    mean_output_tokens: float
    output_p99_tokens: float
    output_max_tokens: float
    decode_steps: float
    decode_context: float
    decode_context_sq: float
    decode_overlap: float
    kv_token_s: tuple[float, float]
    arrival_cv2: float
    mean_requests_per_s: float
    peak_requests_per_s: float
    bucket_durations_s: FloatArray | None
    bucket_rates: FloatArray | None

    # The prompt support's moments every replica reads (`replica.replica_of`): derived from the
    # fields above when the stats are built, so the many candidates of one workload share them.
    prompt_moments: PromptMoments = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "prompt_moments", _prompt_moments(self))

    @classmethod
    def of(cls, workload: Workload, prompt_points: int = PROMPT_SUPPORT_POINTS) -> WorkloadStats:
        inp, out = workload.input_tokens, workload.output_tokens
        h = float(workload.prefix_cache_hit_fraction)
        pv, pw = inp.support(prompt_points)
        pe = np.maximum(1.0, (1.0 - h) * pv)
        p0 = np.maximum(0.0, pv - pe)
        mean_pe = float(pw @ pe)
        var_pe = float(pw @ (pe - mean_pe) ** 2)
        # Mean context position of a prefilled token: a chunk of c tokens at offset p costs
        # c (p + c/2) query x context token pairs; the whole prompt, Pe (p0 + Pe/2).
        attn_ctx = float(pw @ (pe * (p0 + pe / 2.0))) / mean_pe

        mean_p = inp.mean()
        mean_p2 = inp.second_moment()
        mean_o = out.mean()
        mean_o2 = out.second_moment()
        d1 = max(0.0, mean_o - 1.0)  # E[d], d = output - 1 decode steps
        d2 = max(0.0, mean_o2 - 2.0 * mean_o + 1.0)  # E[d^2]
        ov, ow = out.support(OUTPUT_SUPPORT_POINTS)
        dv = np.maximum(0.0, ov - 1.0)
        d3 = float(ow @ dv**3)
        d4 = float(ow @ dv**4)
        overlap = _overlap(dv, ow)
        # A request's KV held over its life, in tokens x steps: its prompt for d steps and its
        # answer growing one token a step, d P + d (d + 1) / 2 (P and d independent): its mean
        # and second moment (for the KV cache's busy periods, `Engine.kv_full`).
        p_half = mean_p + 0.5
        p_half2 = mean_p2 + mean_p + 0.25  # E[(P + 1/2)^2]
        kv1 = d1 * p_half + 0.5 * d2
        kv2 = d2 * p_half2 + d3 * p_half + 0.25 * d4
        if d1 > 0:
            sum_j = (d2 + d1) / 2.0  # E[sum_{j=1..d} j]
            sum_j2 = (2.0 * d3 + 3.0 * d2 + d1) / 6.0  # E[sum j^2] = E[d(d+1)(2d+1)/6]
            ctx = mean_p + sum_j / d1
            ctx2 = (d1 * mean_p2 + 2.0 * mean_p * sum_j + sum_j2) / d1
        else:
            ctx, ctx2 = mean_p, mean_p2
        arr = workload.arrivals
        durations: FloatArray | None = None
        rates: FloatArray | None = None
        if arr.buckets is not None:
            durations = np.array([b.duration_s for b in arr.buckets], dtype=np.float64)
            rates = np.array([b.requests_per_s for b in arr.buckets], dtype=np.float64)
        return cls(
            name=workload.name,
            prompt_tokens=pv,
            prompt_probs=pw,
            prefill_tokens=pe,
            cached_tokens=p0,
            prefix_cache_hit_fraction=h,
            mean_prompt_tokens=mean_p,
            mean_prefill_tokens=mean_pe,
            prefill_cv2=var_pe / (mean_pe * mean_pe),
            prefill_attention_context=attn_ctx,
            prompt_p50_tokens=inp.quantile(0.5),
            prompt_p99_tokens=inp.quantile(0.99),
            prompt_max_tokens=inp.max_tokens,
            mean_output_tokens=mean_o,
            output_p99_tokens=out.quantile(0.99),
            output_max_tokens=out.max_tokens,
            decode_steps=d1,
            decode_context=ctx,
            decode_context_sq=max(ctx2, ctx * ctx),
            decode_overlap=overlap,
            kv_token_s=(kv1, max(kv2, kv1 * kv1)),
            arrival_cv2=arr.cv2,
            mean_requests_per_s=arr.mean_requests_per_s,
            peak_requests_per_s=arr.peak_requests_per_s,
            bucket_durations_s=durations,
            bucket_rates=rates,
        )


@dataclass(frozen=True, eq=False, slots=True)
class PromptMoments:
    """What every replica of a workload reads of its prompt support, whatever its scheduler:
    computed when the `WorkloadStats` is built (`WorkloadStats.prompt_moments`), not once per candidate.
    The arrays are read-only: every replica of the workload shares them."""

    pe2: float  # E[Pe^2]
    pe3: float  # E[Pe^3]
    mean_cached_tokens: float  # E[p0]
    longest_prefill_tokens: float  # max Pe
    least_prefill_tokens: float  # min Pe
    prompt_kv_base: FloatArray  # p0 + Pe / 2 (a replica adds half a KV block)
    ones_column: FloatArray  # (I, 1) ones
    cached_column: FloatArray  # (I, 1) p0


def _prompt_moments(stats: WorkloadStats) -> PromptMoments:
    probs, pe, p0 = stats.prompt_probs, stats.prefill_tokens, stats.cached_tokens
    kv_base = p0 + pe / 2.0
    ones = np.ones((pe.size, 1))
    cached = p0[:, None].copy()
    for arr in (kv_base, ones, cached):
        arr.flags.writeable = False
    return PromptMoments(
        pe2=float(probs @ pe**2),
        pe3=float(probs @ pe**3),
        mean_cached_tokens=float(probs @ p0),
        longest_prefill_tokens=float(pe.max()),
        least_prefill_tokens=float(pe.min()),
        prompt_kv_base=kv_base,
        ones_column=ones,
        cached_column=cached,
    )


def _overlap(values: FloatArray, probs: FloatArray) -> float:
    """E[min(X1, X2)] / E[X] of a discrete X >= 0 (1 when X = 0): the integral of P(X > t)^2
    over t, exact for the support (P(X > t) is constant between its points)."""
    mean = float(probs @ values)
    if not mean > 0.0:
        return 1.0
    order = values.argsort(kind="stable")
    above = np.cumsum(probs[order][::-1])[::-1]  # P(X >= v_k)
    widths = np.diff(values[order], prepend=0.0)
    ratio = float(widths @ (above * above)) / mean
    return min(max(ratio, 0.0), 1.0)
