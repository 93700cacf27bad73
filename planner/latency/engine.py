"""One vLLM engine (one replica) under a stationary load: the analytic core of the latency model
(docs/latency.md has the derivations and the limits).

Roles: "colocated" (prefill and decode on the same engine, chunked prefill), "prefill" (the
prefill pool of a disaggregated deployment: prompts and first tokens only) and "decode" (the
decode pool: decode steps only). With n the mean number of decoding sequences:

* Size bias: a decoding request shares its steps with z others on average, z = 1 for Poisson
  arrivals, rising towards c_a^2 (the arrival gaps' CV^2) as n grows (peakedness of the
  in-flight population under bursty arrivals): z = 1 + (c_a^2 - 1) n / (1 + n). A decoder's
  decode-only step is t_dec = T(n + z decodes); an arriving prompt sees n + z - 1 decodes.
* Prefill in vLLM V1: decodes take their tokens of the budget B first, a prompt gets the rest
  (s_f = B - decodes), capped per request by long_prefill_token_threshold. A prompt of Pe
  tokens (after prefix-cache hits) is prefilled in k = ceil(Pe / s) steps carrying the decodes.
  Its extra engine time over the decode steps it rides on is A = sum_j (T(chunk_j) - T(decodes
  only)) alone ("own chunks", light load) and F = Pe (T_full - T_dec) / s_f when prompts queue
  and every step is a full budget ("fluid", heavy load); the model blends them by rho, the
  utilization of the prefill queue (the chance an arrival finds a backlog).
* Fixed point (Little): n = lambda d t_step, t_step = t_dec / (1 - lambda E[Delta]), d = E[output]
  - 1 decode steps per request, E[Delta] = A + rho (F - A), rho = lambda q. For a given n this
  is a quadratic in lambda, so lambda(n) is explicit; the steady n at a rate is the least root
  of lambda(n) = rate (root-finding), and the capacity under SLOs is root-found over n.
* Stability: rho < 1 (prefill tokens/s below what full-budget steps deliver), the busy share
  lambda E[Delta] < 1, running requests (decoding + prefilling) <= max_num_seqs, mean KV use
  <= the KV cache, chunk share >= 1 token; the largest lambda on the stable branch is the max
  stable rate (a grid scan, then root-finding on the first margin to close).
* ITL: the step times a decoder sees: decode-only steps (t_dec) and, for each prompt chunk, a
  share lambda t_step of steps carrying it, as its own chunk (1 - rho) or topped up by the
  waiting prompts' tokens (rho); quantiles of that mixture (queueing.tail_quantiles).
* TTFT: the prefill queue's wait (GI/G/1, queueing.gg1_wait; service = the prompt's share of
  full-budget steps) and at least the step under way, plus the prompt's own prefill steps
  (topped up with probability rho), lengthened by the prompts admitted in the same step (those
  that arrived during the step under way, a mixture over their tokens), plus (disaggregated)
  the KV transfer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, NamedTuple

import numpy as np
import numpy.typing as npt

from planner.costmodel.steptime import StepCoefficients, step_time_s
from planner.latency.queueing import NO_WAIT, Wait, gg1_wait, response_quantiles, tail_quantiles
from planner.latency.stats import WorkloadStats
from planner.scheduler_config import SchedulerConfig
from solvers.rootfind import RootResult, find_root

FloatArray = npt.NDArray[np.float64]
Role = Literal["colocated", "prefill", "decode"]
# What ends an engine's stable range (the first stability margin to run out).
StabilityLimit = Literal["compute", "kv_capacity", "max_num_seqs", "max_num_batched_tokens"]

CHUNK_GROUPS = 4  # representatives of a prompt's full chunks (exact up to 4 chunks, else midpoints)
GRID_POINTS = 16  # concurrency grid for the stability boundary
LEVELS = np.array([0.5, 0.99])
OTHERS_EDGES = np.array([0.25, 0.5, 0.75, 0.9, 0.95, 0.98, 0.99])  # cumulative-probability slices
HUGE = 1e9  # stands in for an infinite ratio inside root-finding


class Grid(NamedTuple):
    """The engine at a vector of concurrencies (the stability scan): rates and margins."""

    n: FloatArray
    lam: FloatArray
    slack: FloatArray


@dataclass(eq=False)
class State:
    """The engine at one concurrency n (decode roles) or one rate lam (prefill-only)."""

    n: float
    lam: float
    z: float
    n_dec: float  # decodes in a step a decoder sees
    n_arr: float  # decodes in a step an arriving prompt sees
    t_dec: float  # decode-only step seen by a decoder
    t_arr: float  # decode-only step seen by an arriving prompt
    share_full: float  # budget left for prefill (s_f)
    share_own: float  # one prompt's chunk (threshold applied)
    t_full: float  # a full-budget mixed step
    rho: float  # prefill queue utilization
    busy: float  # lambda E[Delta]: the share of engine time prefill adds
    t_step: float  # mean step time seen by a decoder
    mixed_fraction: float  # share of a decoder's steps that carry a prefill chunk
    mean_chunks: float
    chunk_tokens: FloatArray  # (I, G+1) representatives of each prompt's chunks
    chunk_offset: FloatArray
    chunk_weight: FloatArray  # chunks each representative stands for
    chunk_time: FloatArray  # (I, G+1) step time of each representative chunk (n_arr decodes)
    own_service: FloatArray  # (I,) a prompt's prefill steps when alone
    seats: float  # running requests (decoding + prefilling)
    kv_mean: float  # KV tokens in use
    kv_var: float
    full_time: FloatArray | None = None  # the same steps topped up by a backlog (lazily)


@dataclass(frozen=True)
class Boundary:
    """The stable branch: concurrencies [0, n_max] map to rates [0, lam_max]."""

    n_max: float
    lam_max: float
    binding: StabilityLimit
    root: RootResult | None
    grid_n: FloatArray | None = None  # stable grid points (ascending n) and their rates:
    grid_lam: FloatArray | None = None  # brackets for the fixed-point solve


@dataclass(frozen=True)
class Point:
    """Metrics of the engine at one operating point (seconds, fractions)."""

    lam: float
    n: float
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    itl_p50_s: float | None
    itl_p99_s: float | None
    itl_worst_case_s: float | None
    mean_step_s: float | None
    mixed_step_fraction: float
    prefill_chunk_tokens: float | None
    prefill_utilization: float
    queue_wait_mean_s: float
    queue_wait_p99_s: float
    kv_cache_tokens_used: float
    kv_cache_usage: float
    preemption_risk: float
    running_requests: float


class Engine:
    """One replica of a deployment in a role; see the module docstring for the model.

    Two evaluations of the same model: `grid` (numpy over many concurrencies at once, rates and
    stability margins only: the stability scan) and `state` (one concurrency, everything the
    metrics need, scalars in plain floats: the root-finding hot path)."""

    def __init__(
        self,
        coefficients: StepCoefficients,
        stats: WorkloadStats,
        config: SchedulerConfig,
        role: Role,
        kv_transfer_s: FloatArray | None = None,
    ) -> None:
        """`kv_transfer_s`: per prompt support point, the KV hand-off a prefill pool's TTFT
        includes (disaggregated)."""
        self.k = coefficients
        self.stats = stats
        self.config = config
        self.role = role
        self.half_block = config.block_size / 2.0  # mean unfilled tail of a sequence's last block
        d = stats.decode_steps
        self.has_decode = role != "prefill" and d > 0
        self.has_prefill = role != "decode"
        self.d = d if self.has_decode else 0.0
        self.ca2 = stats.arrival_cv2
        self.cbar = stats.decode_context
        self.pw = stats.prompt_probs
        self.pe = stats.prefill_tokens
        self.p0 = stats.cached_tokens
        self.kv_weight = self.p0 + self.pe / 2.0 + self.half_block  # KV of a prompt mid-prefill
        self.pe_max = float(self.pe.max())
        self.mean_pe = stats.mean_prefill_tokens
        self.a_ctx = stats.prefill_attention_context
        self.budget = float(config.max_num_batched_tokens)
        self.seats_max = float(config.max_num_seqs)
        self.kv_cap = float(config.kv_cache_tokens)
        self.threshold = float(config.long_prefill_token_threshold)
        self.extra_ttft = kv_transfer_s
        # Others' prompts sharing a prompt's steps, in a few probability slices (finer in the
        # tail), each at its conditional mean: the mean is exact.
        mid = np.cumsum(self.pw) - 0.5 * self.pw
        slot = np.searchsorted(OTHERS_EDGES, mid, side="right")
        size = OTHERS_EDGES.size + 1
        probs = np.bincount(slot, weights=self.pw, minlength=size)
        keep = probs > 0
        self.others_probs = probs[keep]
        self.others_tokens = (
            np.bincount(slot, weights=self.pw * self.pe, minlength=size)[keep] / self.others_probs
        )
        self._pair_probs = (self.pw[:, None] * self.others_probs[None, :]).ravel()
        self._g = np.arange(CHUNK_GROUPS, dtype=np.float64)
        self._ones = np.ones((self.pe.size, 1))
        self._boundary: Boundary | None = None
        self._zero: State | None = None
        self._zero_point: Point | None = None
        self._token_cost: float | None = None

    # ---- one concurrency (hot path) -------------------------------------------------------------

    def state_n(self, n: float) -> State:
        """The engine with n decoding sequences on average (decode roles): the rate is derived."""
        return self._state(n, None)

    def state_lam(self, lam: float) -> State:
        """A prefill-only engine at arrival rate lam."""
        return self._state(0.0, lam)

    def state_at(self, x: float) -> State:
        """A point of the stable branch: x = n for decode roles, the rate for prefill-only."""
        return self._state(x, None) if self.has_decode else self._state(0.0, x)

    def _state(self, n: float, lam_in: float | None) -> State:
        coef = self.k
        cbar = self.cbar
        if self.has_decode:
            z = 1.0 + (self.ca2 - 1.0) * n / (1.0 + n)
            n_dec = n + z
            n_arr = max(0.0, n + z - 1.0)
            t_dec = step_time_s(coef, 0.0, 0.0, n_dec, n_dec * cbar)
        else:
            z, n_dec, n_arr, t_dec = 1.0, 0.0, 0.0, 0.0
        kv_var = n * (self.stats.decode_context_sq - cbar * cbar) + z * n * cbar * cbar
        if not self.has_prefill:
            lam = n / (self.d * t_dec)
            e = np.empty((0, 0))
            return State(
                n=n, lam=lam, z=z, n_dec=n_dec, n_arr=n_arr, t_dec=t_dec, t_arr=t_dec,
                share_full=math.nan, share_own=math.nan, t_full=math.nan, rho=0.0, busy=0.0,
                t_step=t_dec, mixed_fraction=0.0, mean_chunks=0.0, chunk_tokens=e, chunk_offset=e,
                chunk_weight=e, chunk_time=e, own_service=np.empty(0), seats=n,
                kv_mean=n * (cbar + self.half_block), kv_var=kv_var,
            )  # fmt: skip
        ctx = n_arr * cbar
        t_arr = step_time_s(coef, 0.0, 0.0, n_arr, ctx)
        s_f = self.budget - n_arr
        s_own = min(s_f, self.threshold) if self.threshold > 0 else s_f
        s_f1 = max(s_f, 1.0)
        s_o1 = max(s_own, 1.0)
        t_full = step_time_s(coef, s_f1, self.a_ctx - s_f1 / 2.0, n_arr, ctx)
        q = self.mean_pe * t_full / s_f1
        fluid = self.mean_pe * (t_full - t_arr) / s_f1
        toks, offs, wts, k = self._chunks(s_o1)
        tau = step_time_s(coef, toks, offs, n_arr, ctx, empty_batches=False)
        own = (wts * tau).sum(axis=1)
        pw = self.pw
        own_delta = float((own - k * t_arr) @ pw)
        mean_k = float(k @ pw)
        if self.has_decode:
            a2 = n * q * (fluid - own_delta)
            b = self.d * t_dec + n * own_delta
            disc = b * b + 4.0 * a2 * n
            den = b + math.sqrt(max(disc, 0.0))
            lam = 2.0 * n / den if disc >= 0 and den > 0 else math.nan
        else:
            lam = float(lam_in or 0.0)
        rho = lam * q
        rc = min(max(rho, 0.0), 1.0)
        busy = lam * (own_delta + rc * (fluid - own_delta))
        if self.has_decode:
            t_step = t_dec / (1.0 - busy) if busy < 1.0 else math.inf
            mixed = min(max(lam * mean_k * t_step, 0.0), 1.0)  # chunk steps (merging ignored)
        else:
            t_step, mixed = math.nan, 0.0
        seats = n + lam * float(own @ pw)  # Little: requests being prefilled hold seats too
        kv_mean = n * (cbar + self.half_block) + lam * float((own * self.kv_weight) @ pw)
        return State(
            n=n, lam=lam, z=z, n_dec=n_dec, n_arr=n_arr, t_dec=t_dec, t_arr=t_arr,
            share_full=s_f, share_own=s_own, t_full=t_full, rho=rho, busy=busy, t_step=t_step,
            mixed_fraction=mixed, mean_chunks=mean_k, chunk_tokens=toks, chunk_offset=offs,
            chunk_weight=wts, chunk_time=tau, own_service=own, seats=seats, kv_mean=kv_mean,
            kv_var=kv_var,
        )  # fmt: skip

    def _chunks(self, share: float) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        """Each prompt's chunks at `share` tokens per step: k - 1 full chunks then the rest, as
        (tokens, offsets, weights), shape (I, columns), and k (I,). Up to G full chunks are
        listed one by one; more are represented by G group midpoints (exact for step times
        affine in the chunk index). Only as many columns as the longest prompt needs."""
        pe = self.pe
        k = np.ceil(pe * (1.0 / share) - 1e-9)
        np.maximum(k, 1.0, out=k)
        m = k - 1.0
        rest = pe - m * share
        last_off = self.p0 + m * share
        m_max = math.ceil(self.pe_max / share - 1e-9) - 1
        if m_max <= 0:
            return rest[:, None], last_off[:, None], self._ones, k
        cols = min(m_max, CHUNK_GROUPS)
        g = self._g[:cols]
        if m_max <= CHUNK_GROUPS:
            j: FloatArray = np.broadcast_to(g, (pe.size, cols))
            wt = (g < m[:, None]).astype(np.float64)
        else:
            few = (m <= CHUNK_GROUPS)[:, None]
            j = np.where(few, g, (g + 0.5) * m[:, None] / CHUNK_GROUPS - 0.5)
            wt = np.where(few, (g < m[:, None]).astype(np.float64), m[:, None] / CHUNK_GROUPS)
        toks = np.empty((pe.size, cols + 1))
        toks[:, :cols] = share
        toks[:, cols] = rest
        offs = np.empty((pe.size, cols + 1))
        np.multiply(j, share, out=offs[:, :cols])
        offs[:, :cols] += self.p0[:, None]
        offs[:, cols] = last_off
        wts = np.empty((pe.size, cols + 1))
        wts[:, :cols] = wt
        wts[:, cols] = 1.0
        return toks, offs, wts, k

    def slack_of(self, s: State) -> float:
        """Smallest relative margin of the stability constraints at a state (< 0: violated)."""
        if not (math.isfinite(s.lam) and s.lam >= 0):
            return -1.0
        return min(v for _, v in self._margins(s))

    def _margins(self, s: State) -> list[tuple[StabilityLimit, float]]:
        out: list[tuple[StabilityLimit, float]] = [
            ("max_num_seqs", 1.0 - s.seats / self.seats_max),
            ("kv_capacity", 1.0 - s.kv_mean / self.kv_cap),
        ]
        if self.has_prefill:
            out += [
                ("compute", 1.0 - s.rho),
                ("compute", 1.0 - s.busy),
                ("max_num_batched_tokens", (s.share_full - 1.0) / self.budget),
            ]
        else:
            out.append(("max_num_batched_tokens", 1.0 - s.n / self.budget))
        return out

    def _binding(self, s: State) -> StabilityLimit:
        return min(self._margins(s), key=lambda kv: kv[1])[0]

    # ---- many concurrencies at once (stability scan) ------------------------------------------

    def grid(self, ns: FloatArray) -> Grid:
        """Rates and stability margins at concurrencies `ns` (decode roles); mirrors `_state`."""
        coef = self.k
        cbar = self.cbar
        n = np.asarray(ns, dtype=np.float64)[:, None]
        z = 1.0 + (self.ca2 - 1.0) * n / (1.0 + n)
        n_dec = n + z
        t_dec = step_time_s(coef, 0.0, 0.0, n_dec, n_dec * cbar)
        kv_dec = n * (cbar + self.half_block)
        if not self.has_prefill:
            lam = n / (self.d * t_dec)
            slack = np.minimum(
                np.minimum(1.0 - n / self.seats_max, 1.0 - kv_dec / self.kv_cap), 1.0 - n / self.budget
            )
            return Grid(n[:, 0], lam[:, 0], slack[:, 0])
        n_arr = np.maximum(0.0, n + z - 1.0)
        ctx = n_arr * cbar
        t_arr = step_time_s(coef, 0.0, 0.0, n_arr, ctx)
        s_f = self.budget - n_arr
        s_own = np.minimum(s_f, self.threshold) if self.threshold > 0 else s_f
        s_f1 = np.maximum(s_f, 1.0)
        s_o1 = np.maximum(s_own, 1.0)
        t_full = step_time_s(coef, s_f1, self.a_ctx - s_f1 / 2.0, n_arr, ctx)
        q = self.mean_pe * t_full / s_f1
        fluid = self.mean_pe * (t_full - t_arr) / s_f1
        pe = self.pe[None, :]
        k = np.maximum(1.0, np.ceil(pe / s_o1 - 1e-9))  # (N, I)
        m = k - 1.0
        g = self._g[: int(min(CHUNK_GROUPS, max(0.0, float(m.max()))))]
        few = (m <= CHUNK_GROUPS)[..., None]
        j = np.where(few, g, (g + 0.5) * m[..., None] / CHUNK_GROUPS - 0.5)
        wt = np.where(few, (g < m[..., None]).astype(np.float64), m[..., None] / CHUNK_GROUPS)
        s3 = s_o1[..., None]
        p0 = self.p0[None, :, None]
        offs = np.concatenate((p0 + j * s3, (self.p0[None, :] + m * s_o1)[..., None]), axis=-1)
        toks = np.concatenate((np.broadcast_to(s3, j.shape), (pe - m * s_o1)[..., None]), axis=-1)
        wts = np.concatenate((wt, np.ones((*m.shape, 1))), axis=-1)
        tau = step_time_s(coef, toks, offs, n_arr[..., None], ctx[..., None], empty_batches=False)
        own = (wts * tau).sum(axis=-1)  # (N, I)
        pw = self.pw
        own_delta = ((own - k * t_arr) @ pw)[:, None]
        a2 = n * q * (fluid - own_delta)
        b = self.d * t_dec + n * own_delta
        disc = b * b + 4.0 * a2 * n
        den = b + np.sqrt(np.maximum(disc, 0.0))
        with np.errstate(divide="ignore", invalid="ignore"):
            lam = np.where((disc >= 0) & (den > 0), 2.0 * n / den, math.nan)
        rho = lam * q
        rc = np.clip(rho, 0.0, 1.0)
        busy = lam * (own_delta + rc * (fluid - own_delta))
        seats = n + lam * (own @ pw)[:, None]
        kv_mean = kv_dec + lam * ((own * self.kv_weight) @ pw)[:, None]
        slack = np.minimum(1.0 - seats / self.seats_max, 1.0 - kv_mean / self.kv_cap)
        slack = np.minimum(slack, np.minimum(1.0 - rho, 1.0 - busy))
        slack = np.minimum(slack, (s_f - 1.0) / self.budget)
        slack = np.where(np.isfinite(lam) & (lam >= 0), slack, -1.0)
        return Grid(n[:, 0], lam[:, 0], slack[:, 0])

    # ---- stability ----------------------------------------------------------------------------

    def boundary(self) -> Boundary:
        """The stable branch, found once: a grid scan, then root-finding on the first margin to
        go negative; if the rate peaks before that (the engine saturates), the peak."""
        if self._boundary is None:
            self._boundary = self._find_boundary() if self.has_decode else self._prefill_boundary()
        return self._boundary

    def _find_boundary(self) -> Boundary:
        cap = min(self.seats_max, self.kv_cap / (self.cbar + self.half_block), self.budget)
        grid = cap * np.arange(1, GRID_POINTS + 1, dtype=np.float64) / GRID_POINTS
        gr = self.grid(grid)
        lam, slack = gr.lam, gr.slack
        bad = np.flatnonzero(slack < 0)
        root: RootResult | None = None
        if bad.size == 0:
            n_end = float(grid[-1])
        else:
            i = int(bad[0])
            lo = 0.0 if i == 0 else float(grid[i - 1])
            root = find_root(
                lambda x: self.slack_of(self._state(x, None)),
                lo,
                float(grid[i]),
                f_lo=1.0 if i == 0 else float(slack[i - 1]),
                f_hi=float(slack[i]),
                xtol=1e-7 * cap,
                rtol=1e-7,
            )
            n_end = root.root if root.root is not None else lo
            n_end = max(0.0, n_end - 1e-7 * cap)  # just inside: the end point itself is stable
            grid, lam = grid[:i], lam[:i]
        end = self._state(n_end, None)
        while n_end > 0 and self.slack_of(end) < 0:  # the root's tolerance overshot
            n_end *= 1.0 - 1e-6
            end = self._state(n_end, None)
        lam_end = end.lam if n_end > 0 else 0.0
        binding = self._binding(end)
        best = int(np.argmax(lam)) if lam.size else -1
        if best >= 0 and float(lam[best]) > lam_end:
            # The rate peaks inside the stable range: past the peak more concurrency serves fewer
            # requests (the engine saturates). Tiny peaks from the ceil() of chunk counts keep
            # the end point's label.
            n_peak, lam_peak = self._refine_peak(grid, lam, best, n_end)
            label = "compute" if lam_peak > lam_end * (1.0 + 1e-3) else binding
            keep = grid < n_peak
            return Boundary(n_peak, lam_peak, label, root, grid[keep], lam[keep])
        return Boundary(n_end, lam_end, binding, root, grid, lam)

    def _refine_peak(self, grid: FloatArray, lam: FloatArray, i: int, n_end: float) -> tuple[float, float]:
        """One parabola step through the grid's best point and its neighbours."""
        n_peak, lam_peak = float(grid[i]), float(lam[i])
        if 0 < i < grid.size - 1:
            x0, x1, x2 = (float(v) for v in grid[i - 1 : i + 2])
            y0, y1, y2 = (float(v) for v in lam[i - 1 : i + 2])
            den = (x0 - x1) * (x0 - x2) * (x1 - x2)
            a = (x2 * (y1 - y0) + x1 * (y0 - y2) + x0 * (y2 - y1)) / den
            b = (x2 * x2 * (y0 - y1) + x1 * x1 * (y2 - y0) + x0 * x0 * (y1 - y2)) / den
            if a < 0:
                xv = min(max(-b / (2 * a), x0), min(x2, n_end))
                lv = self._state(xv, None).lam
                if lv > lam_peak:
                    n_peak, lam_peak = xv, lv
        return n_peak, lam_peak

    def _prefill_boundary(self) -> Boundary:
        """Prefill-only engine: rho = lam q < 1, plus seats and KV held by prompts in prefill."""
        s0 = self._state(0.0, 0.0)
        hi = (1.0 / (s0.t_full * self.mean_pe / max(s0.share_full, 1.0))) * (1.0 - 1e-9)
        s_hi = self.slack_of(self._state(0.0, hi))
        if s_hi >= 0:
            return Boundary(0.0, hi, "compute", None)
        root = find_root(
            lambda x: self.slack_of(self._state(0.0, x)), 0.0, hi, f_lo=1.0, f_hi=s_hi, rtol=1e-9
        )
        lam_end = max(0.0, (root.root if root.root is not None else 0.0) * (1.0 - 1e-7))
        return Boundary(0.0, lam_end, self._binding(self._state(0.0, lam_end)), root)

    # ---- operating points ---------------------------------------------------------------------

    def solve(self, lam: float) -> tuple[State, RootResult | None] | None:
        """The steady state at arrival rate lam (per replica): the fixed point n = lam d t_step,
        found by root-finding on lam(n) = lam over the stable branch. None when lam is not
        stable (at or above the max stable rate)."""
        b = self.boundary()
        if not lam < b.lam_max or lam < 0:
            return None
        if not self.has_decode:
            return self._state(0.0, lam), None
        if lam == 0:
            return self.zero(), None
        lo, hi, f_lo, f_hi = 0.0, b.n_max, -lam, b.lam_max - lam
        if b.grid_n is not None and b.grid_lam is not None and b.grid_n.size:
            # Narrow the bracket to the grid interval where the rate passes lam.
            i = int(np.searchsorted(b.grid_lam, lam, side="right"))
            if i > 0 and float(b.grid_lam[i - 1]) < lam:
                lo, f_lo = float(b.grid_n[i - 1]), float(b.grid_lam[i - 1]) - lam
            if i < b.grid_n.size and float(b.grid_lam[i]) > lam and np.all(np.diff(b.grid_lam[: i + 1]) > 0):
                hi, f_hi = float(b.grid_n[i]), float(b.grid_lam[i]) - lam
        res = find_root(
            lambda x: self._state(x, None).lam - lam,
            lo,
            hi,
            f_lo=f_lo,
            f_hi=f_hi,
            xtol=1e-9 * max(b.n_max, 1.0),
            rtol=1e-9,
        )
        n = res.root if res.root is not None else b.n_max
        return self._state(self._least_root(lam, lo, n), None), res

    def _least_root(self, lam: float, lo: float, root: float) -> float:
        """The smallest n in [lo, root] with lam(n) = lam. lam(n) rises with n except for tiny
        dips where a prompt of the support starts needing one more chunk (the chunk share
        B - decodes shrinks past Pe / j); if lam already reaches `lam` just below such a point,
        the least fixed point (the one reached as load grows) is below it."""
        if not self.has_prefill or root <= lo:
            return root
        s_hi = self._state(lo, None).share_own if lo > 0 else self.budget
        s_lo = self._state(root, None).share_own
        if not s_lo < s_hi:
            return root
        pe = self.pe
        j_min = np.floor(pe / s_hi) + 1.0
        j_max = np.floor(pe / max(s_lo, 1e-9))
        points: list[float] = []
        for p_i, a, b in zip(pe.tolist(), j_min.tolist(), j_max.tolist(), strict=True):
            for j in range(int(a), min(int(b), int(a) + 64) + 1):
                share = p_i / j
                if s_lo < share < s_hi:
                    points.append(self._n_for_arrival_decodes(self.budget - share))
        prev = lo
        for n_b in sorted(points):
            if not lo < n_b < root:
                continue
            left = n_b * (1.0 - 1e-12)
            lam_left = self._state(left, None).lam
            if lam_left >= lam:
                res = find_root(
                    lambda x: self._state(x, None).lam - lam,
                    prev,
                    left,
                    f_hi=lam_left - lam,
                    xtol=1e-9 * max(root, 1.0),
                    rtol=1e-9,
                )
                return res.root if res.root is not None else left
            prev = n_b
        return root

    def _n_for_arrival_decodes(self, n_arr: float) -> float:
        """Invert n_arr = n + (c_a^2 - 1) n / (1 + n): n^2 + (c_a^2 - n_arr) n - n_arr = 0."""
        b = self.ca2 - n_arr
        return max(0.0, (-b + math.sqrt(b * b + 4.0 * n_arr)) / 2.0)

    def zero(self) -> State:
        """The idle limit (rate -> 0)."""
        if self._zero is None:
            self._zero = self._state(0.0, None if self.has_decode else 0.0)
        return self._zero

    def zero_point(self) -> Point:
        """Metrics in the idle limit (the floors)."""
        if self._zero_point is None:
            self._zero_point = self.point(self.zero())
        return self._zero_point

    def point(self, s: State) -> Point:
        """TTFT, ITL and resource metrics at a steady state."""
        ttft50 = ttft99 = None
        wait = NO_WAIT
        if self.has_prefill:
            ttft, wait = self._ttft(s)
            ttft50, ttft99 = float(ttft[0]), float(ttft[1])
        itl50 = itl99 = worst = None
        if self.has_decode:
            itl50, itl99 = self._itl(s)
            worst = self._itl_worst(s)
        sd = math.sqrt(max(s.kv_var, 0.0))
        if sd > 0:
            risk = 0.5 * math.erfc((self.kv_cap - s.kv_mean) / (sd * math.sqrt(2.0)))
        else:
            risk = 1.0 if s.kv_mean > self.kv_cap else 0.0
        return Point(
            lam=s.lam,
            n=s.n,
            ttft_p50_s=ttft50,
            ttft_p99_s=ttft99,
            itl_p50_s=itl50,
            itl_p99_s=itl99,
            itl_worst_case_s=worst,
            mean_step_s=s.t_step if self.has_decode else None,
            mixed_step_fraction=s.mixed_fraction,
            prefill_chunk_tokens=s.share_own if self.has_prefill else None,
            prefill_utilization=min(1.0, s.rho) if self.has_prefill else 0.0,
            queue_wait_mean_s=wait.mean_s,
            queue_wait_p99_s=wait.quantile(0.99),
            kv_cache_tokens_used=s.kv_mean,
            kv_cache_usage=s.kv_mean / self.kv_cap,
            preemption_risk=risk,
            running_requests=s.seats,
        )

    def ttft_p99_s(self, s: State) -> float:
        return float(self._ttft(s)[0][1])

    def itl_p99_s(self, s: State) -> float:
        return self._itl(s)[1]

    def _full_time(self, s: State) -> FloatArray:
        """Step times of the chunk steps when other prompts wait (probability rho): the step is
        topped up with the waiting prompts' tokens, on average E[Pe] / (1 - rho) of them (the
        queue length given that it is non-empty, M/M/1), up to the whole budget."""
        if s.full_time is None:
            s_f = max(s.share_full, 1.0)
            extra = self.mean_pe / max(1.0 - s.rho, 1e-12)
            toks = np.minimum(s.chunk_tokens + extra, s_f)
            s.full_time = step_time_s(
                self.k, toks, s.chunk_offset, s.n_arr, s.n_arr * self.cbar, empty_batches=False
            )
        return s.full_time

    def _ttft(self, s: State) -> tuple[FloatArray, Wait]:
        rc = min(max(s.rho, 0.0), 1.0)
        service = s.own_service
        if rc > 0:
            full = (s.chunk_weight * self._full_time(s)).sum(axis=1)
            service = service + rc * (full - service)
        wait = gg1_wait(
            s.rho, self.mean_pe * s.t_full / max(s.share_full, 1.0), self.ca2, self.stats.prefill_cv2
        )
        # A prompt waits at least for the step under way (R) and, with a queue ahead, for the
        # queue (W, which covers that step too): max(W, R) = R + max(W - R, 0), and
        # P(W - R > y) = sigma e^{-R/m} e^{-y/m}.
        residual, step_lb = self._step_under_way(s)
        service, probs = self._shared_service(s, service, step_lb)
        if residual > 0:
            service = service + residual
            if wait.prob > 0 and wait.mean_if_waiting_s > 0:
                wait = Wait(wait.prob * math.exp(-residual / wait.mean_if_waiting_s), wait.mean_if_waiting_s)
        if self.extra_ttft is not None:
            service = service + self.extra_ttft
        return response_quantiles(service, probs, wait, LEVELS), wait

    def _shared_service(self, s: State, service: FloatArray, step_lb: float) -> tuple[FloatArray, FloatArray]:
        """A prompt is admitted at the next step boundary together with the prompts that arrived
        during the same step under way (V1 admits every waiting prompt while budget is left), and
        their tokens lengthen the step(s) it is prefilled in. Others arriving in that step
        (length-biased, mean `step_lb`; an idle engine has none): mu = lam L, seen from an
        arrival as mu + z(mu) - 1 (the peakedness convention of the decoders' size bias). With
        probability pi = 1 - e^{-m} there are any; given that, their tokens are a slice of the
        prompt distribution's (`others_tokens`) scaled by m / pi (the mean is exact). Each of
        their tokens delays it by the marginal cost of a prefill token (`_token_cost_s`): those
        ahead of it by their whole prefill, those behind by filling its steps (the ones that
        spill past its last step are counted too: conservative, and it keeps the term rising
        with load). Returns the service mixture (values, probs)."""
        pw = self.pw
        mu = s.lam * step_lb
        if mu <= 0:
            return service, pw
        m = mu * (1.0 + (self.ca2 - 1.0) / (1.0 + mu))
        pi = -math.expm1(-m)
        if pi <= 0:
            return service, pw
        x = self.others_tokens * (m / pi)  # others' tokens, by the prompt slice they scale
        extra = x * self._token_cost_s()
        values = np.concatenate((service, (service[:, None] + extra[None, :]).ravel()))
        probs = np.concatenate(((1.0 - pi) * pw, pi * self._pair_probs))
        return values, probs

    def _token_cost_s(self) -> float:
        """The marginal time of one prefill token in a full-budget step of an idle engine,
        (T_full - T_0) / B: fixed per engine, so the company's cost never falls with load."""
        if self._token_cost is None:
            z = self.zero()
            self._token_cost = max(z.t_full - z.t_arr, 0.0) / max(z.share_full, 1.0)
        return self._token_cost

    def _step_mix(self, s: State) -> tuple[FloatArray, FloatArray]:
        """The steps a decoder sees besides decode-only ones: per prompt chunk, a share
        lambda t_step of steps carries it (its own chunk with probability 1 - rho, topped up
        by a backlog with probability rho). Times are the chunk steps as an arriving prompt sees
        them plus the decoder's own share (t_dec - t_arr). Returns (times, shares)."""
        rc = min(max(s.rho, 0.0), 1.0)
        extra = s.t_dec - s.t_arr
        share = (s.lam * s.t_step) * (self.pw[:, None] * s.chunk_weight)
        if rc > 0:
            values = np.concatenate(((s.chunk_time + extra).ravel(), (self._full_time(s) + extra).ravel()))
            rates = np.concatenate(((1.0 - rc) * share.ravel(), rc * share.ravel()))
        else:
            values = (s.chunk_time + extra).ravel()
            rates = share.ravel()
        return values, rates

    def _residual_step_s(self, s: State) -> float:
        return self._step_under_way(s)[0]

    def _step_under_way(self, s: State) -> tuple[float, float]:
        """Mean wait for the step under way when a prompt arrives (it is scheduled at the next
        step boundary): P(engine busy) x E[T^2] / (2 E[T]) over the steps' mix, the length-biased
        residual — a long mixed step is more likely to be under way than a short one. Returns
        (that mean residual, P(busy) x E[T^2] / E[T]: the mean length of the step under way, over
        which the prompts that share the next step with this one arrive)."""
        if not self.has_decode or s.n <= 0:
            return 0.0, 0.0
        busy = 1.0 - math.exp(-s.n) * (1.0 - min(max(s.rho, 0.0), 1.0))
        t = s.t_dec
        if s.mixed_fraction <= 0:
            return busy * t / 2.0, busy * t
        values, rates = self._step_mix(s)
        total = float(rates.sum())
        scale = 1.0 / max(1.0, total)
        w0 = max(0.0, 1.0 - total)
        m1 = w0 * t + scale * float(rates @ values)
        m2 = w0 * t * t + scale * float(rates @ (values * values))
        return busy * m2 / (2.0 * m1), busy * m2 / m1

    def _itl(self, s: State) -> tuple[float, float]:
        """Quantiles of the steps a decoder sees: decode-only steps (t_dec) and the mixed steps
        of `_step_mix`."""
        t_dec = s.t_dec
        if s.mixed_fraction <= 0.01:  # p99 and p50 both fall on decode-only steps
            return t_dec, t_dec
        values, rates = self._step_mix(s)
        q = tail_quantiles(t_dec, values, rates, LEVELS)
        return float(q[0]), float(q[1])

    def _itl_worst(self, s: State) -> float:
        """A decode step that carries a full budget at the p99 prompt's last chunk."""
        if not self.has_prefill:
            return s.t_dec
        s_f = max(s.share_full, 1.0)
        off = max(0.0, self.stats.prompt_p99_tokens - s_f)
        return step_time_s(self.k, s_f, off, s.n_dec, s.n_dec * self.cbar)
