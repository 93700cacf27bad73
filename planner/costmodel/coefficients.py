"""`StepCoefficients`: a replica's step time as numbers, the one type every part of the cost
model passes around (planner.costmodel.steptime computes them and times steps with them;
multinode and speculative rewrite them for pipeline stages and the verify step), and
`EpMoeTerm`, the measured expert-parallel term some carry (planner.costmodel.ep_measured builds
it from its table). Kept apart from the formula so that those modules and steptime import them
without importing each other.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True)
class StepCoefficients:
    """A replica's step time as numbers: seconds per unit of each thing a batch costs.

    Weight bytes a step of t tokens reads: `weight_bytes` + `moe_weight_bytes` (1 - r^t) with
    r = `moe_untouched_ratio` (a MoE reads the experts its tokens route to; a dense model has
    `moe_weight_bytes` 0). The all-reduce of t > 0 tokens costs `allreduce_s_per_token` t +
    `allreduce_s` (both 0 at TP 1)."""

    s_per_byte: float  # 1 / achieved bandwidth (datasheet x eta_bandwidth)
    kv_bytes_per_token: float
    weight_bytes: float
    moe_weight_bytes: float
    moe_untouched_ratio: float
    linear_s_per_token: float  # 2 P_active / TP at the weight dtype's achieved matmul rate
    attention_s_per_pair: float  # 4 L d_q / TP per (query token x context token), bf16 rate
    allreduce_s_per_token: float
    allreduce_s: float
    # activation_passes x layers x hidden x 2 bytes / achieved bandwidth: the kernels between the
    # GEMMs, per token, added like the all-reduce (0 = off)
    elementwise_s_per_token: float
    overhead_s: float
    # The profile's sequence_overhead_s: engine seconds per decode in the step, beside the
    # fixed overhead_s (0 = off)
    sequence_s: float
    # passes x KV (prefix_query_kv_passes: x G) / achieved bandwidth, per offset token
    prefix_reread_s_per_token: float
    # N0: decodes whose (sequence x KV head) items fill the GPU's SMs (SMs x a / KV heads per GPU);
    # below it the decodes' KV is read at bandwidth x max(n, 1) / N0. 0 = off.
    decode_kv_full_decodes: float
    # Compute seconds every step pays beyond its tokens: m0 phantom tokens of the linear layers
    # (matmul_phantom_tokens x linear_s_per_token; 0 = off).
    linear_phantom_s: float
    # The lm_head per decode when only sampled rows get logits (sampled_logits; 0 = off, the
    # lm_head is then part of linear_s_per_token for every token).
    sampled_s_per_decode: float
    # FLOPs per unit, for reports (StepBreakdown); the time never reads them.
    linear_flops_per_token: float
    attention_flops_per_pair: float
    sampled_flops_per_decode: float
    # Speculative decoding (planner.costmodel.speculative; both 0 = off): k, the guesses a
    # decoding sequence runs through the target beside its token each step (1 + k query tokens:
    # its linear, all-reduce, logits and attention-pair terms scale by it, its KV is read once),
    # and E - 1, the guesses a step accepts on average (a decode step yields E tokens; read by
    # the latency model and the simulator, not by the formula).
    speculative_tokens: float = 0.0
    accepted_tokens_per_step: float = 0.0
    # Expert parallelism priced from measured kernels (planner.costmodel.ep_measured; None = the
    # roofline): the MoE layers' measured EP-over-TP slowdown, added by the formula per step.
    ep_moe: EpMoeTerm | None = None
    # A weight-only kernel timed against cuBLAS bf16 (planner.catalog.quantization.marlin_rate_knots;
    # None = the rate above at every step): the linear term of a step of t tokens, phantom tokens
    # included, is multiplied by the curve's factor at t (1 where linear_s_per_token's rate holds).
    linear_rate: GemmRateCurve | None = None

    def decode_kv_factor(self, decodes: float) -> float:
        """f(n) = max(1, N0 / max(n, 1)): how much slower than the achieved bandwidth n decodes
        read their KV (1 when off). The scalar branch's arithmetic, operation for operation."""
        n = decodes if decodes > 1.0 else 1.0
        f = self.decode_kv_full_decodes / n
        return f if f > 1.0 else 1.0

    @cached_property
    def _array_constants(self) -> _ArrayConstants:
        """The coefficients as `steptime._array` uses them (built once; not a field)."""
        return _ArrayConstants(self)

    def weight_bytes_read(self, tokens: float) -> float:
        if self.moe_weight_bytes == 0.0:
            return self.weight_bytes
        return self.weight_bytes + self.moe_weight_bytes * (1.0 - self.moe_untouched_ratio**tokens)


class _ArrayConstants:
    """A replica's coefficients as 0-d float64 arrays, for `_array`: beside a small array numpy
    takes a 0-d array as cheaply as another array, while a Python float costs a conversion on
    every call (~0.3 us, half again an operation on arrays of this size). Same values, so the
    same IEEE results."""

    __slots__ = (
        "attention", "fixed", "fixed_s", "kv", "kv_s", "linear", "per_token", "prefix", "s_per_byte",
        "sampled", "w0", "w0_bytes",
    )  # fmt: skip

    def __init__(self, k: StepCoefficients) -> None:
        # The phantom tokens' constant compute time ph moves out of the max: max(mem, cmp + ph) =
        # max(mem - ph, cmp) + ph, with mem - ph folded into the weight bytes (a scalar) and ph
        # into the per-step constant (one array operation fewer than adding it to cmp).
        ph = k.linear_phantom_s
        self.w0_bytes = k.weight_bytes - ph / k.s_per_byte if ph else k.weight_bytes
        self.w0 = np.array(self.w0_bytes)
        self.kv_s = np.array(k.kv_bytes_per_token * k.s_per_byte)  # a KV token's read time
        self.kv = np.array(k.kv_bytes_per_token)
        self.s_per_byte = np.array(k.s_per_byte)
        self.linear = np.array(k.linear_s_per_token)
        self.attention = np.array(k.attention_s_per_pair)
        self.sampled = np.array(k.sampled_s_per_decode)
        self.per_token = np.array(k.allreduce_s_per_token + k.elementwise_s_per_token)
        fixed = k.allreduce_s + k.overhead_s + ph
        self.fixed = np.array(fixed) if fixed else None
        self.fixed_s = fixed
        self.prefix = np.array(k.prefix_reread_s_per_token)


def interp_clamped(xs: tuple[float, ...], ys: tuple[float, ...], x: float) -> float:
    """The piecewise-linear line through (xs, ys) at x (xs increasing), clamped to its ends:
    numpy.interp's answer on scalars, without building arrays in the step formula's scalar path."""
    i = bisect.bisect_right(xs, x)
    if i == 0:
        return ys[0]
    if i == len(xs):
        return ys[-1]
    x0, x1 = xs[i - 1], xs[i]
    return ys[i - 1] + (ys[i] - ys[i - 1]) * (x - x0) / (x1 - x0)


@dataclass(frozen=True)
class EpMoeTerm:
    """The measured EP-over-TP slowdown of the MoE layers, as the step formula adds it (module
    docstring): rho at log tokens (`log_tokens`, `ratios`: the table's row), the layer's tokens per
    step token (`token_scale` = D, 1..64) and the experts' share of the linear GEMM seconds
    (`expert_share`, (0, 1]: the hottest GPU's expert GEMMs over all linear layers')."""

    ep_size: int
    log_tokens: tuple[float, ...]
    ratios: tuple[float, ...]
    token_scale: float
    expert_share: float
    _log_array: npt.NDArray[np.float64] = field(init=False, repr=False, compare=False)
    _ratio_array: npt.NDArray[np.float64] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_log_array", np.array(self.log_tokens))
        object.__setattr__(self, "_ratio_array", np.array(self.ratios))

    def ratio(self, tokens: float) -> float:
        """rho at the step's `tokens` (the layer takes token_scale x them), interpolated in log
        tokens, clamped to the table's ends (and to one token below it)."""
        return interp_clamped(self.log_tokens, self.ratios, math.log(max(tokens * self.token_scale, 1.0)))

    def ratio_array(self, tokens: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """`ratio` on an array of token counts (numpy's interpolation: the same line)."""
        x = np.log(np.maximum(tokens * self.token_scale, 1.0))
        return np.interp(x, self._log_array, self._ratio_array)

    def excess_s(self, k: StepCoefficients, tokens: float) -> float:
        """Seconds a step of `tokens` pays beyond the roofline (module docstring): (rho - 1) x the
        experts' own roofline time on the hottest GPU, from the step's coefficients `k`."""
        mem = k.moe_weight_bytes * (1.0 - k.moe_untouched_ratio**tokens) * k.s_per_byte
        cmp = k.linear_s_per_token * self.expert_share * tokens
        return (self.ratio(tokens) - 1.0) * (mem if mem >= cmp else cmp)

    def excess_array(self, k: StepCoefficients, tokens: Any) -> npt.NDArray[np.float64]:
        """`excess_s` on an array of token counts (the steps' tokens; > 0 wherever kept)."""
        t = np.asarray(tokens, dtype=np.float64)
        mem = k.moe_weight_bytes * (1.0 - np.power(k.moe_untouched_ratio, t)) * k.s_per_byte
        cmp = (k.linear_s_per_token * self.expert_share) * t
        return (self.ratio_array(t) - 1.0) * np.maximum(mem, cmp)


@dataclass(frozen=True)
class GemmRateCurve:
    """A measured kernel's linear-layer efficiency by the step's tokens t, where
    `linear_s_per_token` is priced at efficiency `priced_at`: the efficiency at log t
    (`log_tokens`, increasing; `efficiencies` > 0) interpolated in log t, clamped to the ends (t
    below one token taken as one). The formula multiplies the linear term, phantom tokens
    included, by priced_at / efficiency(t)."""

    log_tokens: tuple[float, ...]
    efficiencies: tuple[float, ...]
    priced_at: float
    _log_array: npt.NDArray[np.float64] = field(init=False, repr=False, compare=False)
    _eff_array: npt.NDArray[np.float64] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_log_array", np.array(self.log_tokens))
        object.__setattr__(self, "_eff_array", np.array(self.efficiencies))

    def factor(self, tokens: float) -> float:
        """priced_at / efficiency at the step's `tokens`."""
        return self.priced_at / interp_clamped(self.log_tokens, self.efficiencies, math.log(max(tokens, 1.0)))

    def factor_array(self, tokens: Any) -> npt.NDArray[np.float64]:
        """`factor` on an array of token counts (numpy's interpolation: the same line)."""
        x = np.log(np.maximum(tokens, 1.0))
        return self.priced_at / np.interp(x, self._log_array, self._eff_array)

    def excess_s(self, linear_s_per_token: float, phantom_s: float, tokens: float) -> float:
        """Seconds the linear term of a step of `tokens` takes beyond the rate's: (factor - 1) x
        (linear_s_per_token x tokens + phantom_s) (negative where the kernel is faster)."""
        return (self.factor(tokens) - 1.0) * (linear_s_per_token * tokens + phantom_s)

    def excess_array(self, linear_s_per_token: Any, phantom_s: float, tokens: Any) -> npt.NDArray[np.float64]:
        """`excess_s` on an array of token counts."""
        return (self.factor_array(tokens) - 1.0) * (linear_s_per_token * tokens + phantom_s)
