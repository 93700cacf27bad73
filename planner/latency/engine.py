"""One vLLM engine (one replica) under a stationary load: the analytic core of the latency model
(docs/latency.md and its component pages, docs/latency/, have the derivations and the limits).

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
  and every step is a full budget ("fluid", heavy load); the model blends them by sigma, the
  chance an arrival finds the prefill queue busy (docs/latency/steady-state.md).
* Fixed point (Little): n = lambda d t_step, t_step = t_dec / (1 - lambda E[Delta]), d = E[output]
  - 1 decode steps per request, E[Delta] = A + sigma (F - A). For a given n this
  is a quadratic in lambda, so lambda(n) is explicit; the steady n at a rate is the least root
  of lambda(n) = rate (root-finding), and the capacity under SLOs is root-found over n.
  Whole prompts of alike lengths with room beside them instead open a step (A) or join one
  (Jc, their whole compute): E[Delta] = A + j (Jc - A), j the steps' chain's share of joiners
  (`arrivals.join_share`, `_shared_rate`); the stable branch then ends at the unshared form's
  max stable rate (`_shared_boundary`), and D is read over the chain (`_delay_chain`).
* Stability: rho < 1 (prefill tokens/s below what full-budget steps deliver), the busy share
  lambda E[Delta] < 1, running requests (decoding + prefilling) <= max_num_seqs, mean KV use
  <= the KV cache, chunk share >= 1 token; the largest lambda on the stable branch is the max
  stable rate (a grid scan, then root-finding on the first margin to close).
* Steps (`_steps`, shared by TTFT and ITL): V1 admits every waiting prompt at a step boundary
  while budget is left, so a prompt's last chunk shares its step with its "company", the
  prompts that arrived during the step under way (length-biased mean L: a gamma renewal
  process's count around an arrival, `arrivals.company_count`); a step with several prompts
  counts once. Queued beyond the next step
  (probability q: the GI/G/1 prefill queue's work exceeds the step under way plus one full
  step), every step is a full budget. L follows from that mix (a fixed point, two passes).
* The prefill queue: GI/G/1 at the full-step rate, a full step being the FIFO stream of waiting
  prompts (`_stream_step_s`: pieces of several prompts, each chunk at its own offset), the
  service's shape from each prompt's own stream steps (`_service_shape`), and the wait stretched
  for the decodes a backlog accumulates (`_queue_wait`).
* ITL: quantiles of the steps a decoder sees: decode-only (t_dec), full chunks, last chunks
  alone or with company (a lognormal of the company's tokens in 8 probability slices; for
  prompts of alike lengths, whole prompts: their count mixed over the steps under way,
  `count_given_any`; each prompt attending to itself), full steps of a backlog (a lognormal of
  their spread over prompts and chunk offsets, `_full_step_cv2`) (queueing.tail_quantiles).
* TTFT: with probability 1 - q, D + own steps, D = U L + c X(L) the rest of the step under way
  and the company's tokens at c each (decode-only and mixed steps under way: U L a lognormal in
  slices, the company none or, given any, a lognormal of its moments, paired slice by slice;
  in FIFO order: the prompts after it only up to the room beside its last chunk, those before
  it beyond that room a step later, `arrivals.beside`; the classes as a prompt not queued sees
  them, without the backlog's full steps); with q, the mean step under way + one full step +
  the excess of the GI/G/1 wait (exponential phases with M/G/1's second moment, never decaying
  faster than the exact GI/G/1 tail: queueing.wait_beyond, queueing.wait_decay_s) + the
  prompt's steps topped up to full. A disaggregated prefill pool: GI/G/1 wait + own steps
  + the KV transfer. Where every `max_num_seqs` seat may be taken, a prompt also waits for one
  (`seats.py`: Erlang C in Hayward's form, the drain of full seats; `_seat_wait`), and where the
  KV cache may be full, for blocks (`_kv_full`): branches of TTFT's mixture.
"""

from __future__ import annotations

import bisect
import math
from typing import Any

import numpy as np
import numpy.typing as npt

from planner.costmodel.steptime import StepCoefficients, batch_time_s, step_time_s
from planner.latency.arrivals import (
    CountMoments,
    beside,
    company_count,
    join_share,
    steps_by_count,
)
from planner.latency.company import (
    COUNT_ATOMS,
    NO_SUMS,
    Sums,
    add_sums,
    count_given_any,
    couple_by_rank,
    length_biased,
    others_in_step,
    room_for_more,
    under_way,
)
from planner.latency.decode_count import (
    CountFeedback,
    DecodeCompany,
    count_feedback,
    count_wanders,
    decode_company,
    decode_count_variance,
)
from planner.latency.itl import LEVELS, TAIL_EPS, itl_level, itl_worst_case_s
from planner.latency.kv_full import (
    KV_FULL_MIN,
    KvFull,
    kv_full_wait,
    kv_overflow_probability,
    kv_tokens_variance,
    with_kv_full,
)
from planner.latency.prefill_queue import (
    PrefillDrag,
    full_step_context,
    full_step_cv2,
    own_stream_context,
    prefill_drag,
    prefill_wait,
    service_shape,
    shape_of,
    stretch_applies,
    stretched_wait,
)
from planner.latency.queueing import (
    NO_WAIT,
    Phases,
    Wait,
    gamma_wait_probability,
    gamma_wait_probability_slope,
    phases_mean_s,
    response_quantiles,
    response_quantiles_phases,
    wait_beyond,
)
from planner.latency.results import (
    Boundary,
    DelayClass,
    Grid,
    Point,
    Role,
    ServiceShape,
    StabilityLimit,
    State,
    Steps,
    TtftMixture,
)
from planner.latency.seats import NO_SEAT_WAIT, SeatWait, seat_wait, with_seat_wait
from planner.latency.slices import (
    SLICE_PROB_LIST,
    SLICE_PROBS,
    UNIFORM_SLICE_LIST,
    UNIFORM_SLICE_MEANS,
    lognormal_slice_list,
    lognormal_top_slice,
)
from planner.latency.stats import WorkloadStats
from planner.latency.ttft import company_slices, company_top_s, ttft_p99_bound_s
from planner.scheduler_config import SchedulerConfig
from solvers.rootfind import RootResult, find_root

FloatArray = npt.NDArray[np.float64]

CHUNK_GROUPS = 4  # representatives of a prompt's full chunks (exact up to 4 chunks, else midpoints)
GRID_POINTS = 16  # concurrency grid for the stability boundary
SLOPE_GRID_MIN = GRID_POINTS // 2  # stable scan points below which E[Delta]' is taken exactly
BOUNDARY_BACKOFF_STEPS = 64  # steps of 1e-6 back inside the boundary after its root (1 or 2 suffice)
HUGE = 1e9  # stands in for an infinite ratio inside root-finding
STATE_CACHE = 64  # states an engine keeps (Engine._state; a candidate builds ~25); cleared when full


_EMPTY = np.empty(0)
_ONE0 = np.array(1.0)  # 0-d: numpy takes these beside arrays faster than Python floats
_EPS_CHUNK = np.array(1e-9)  # chunk counts: ceil(Pe / share - 1e-9)
_ZERO = np.zeros(1)
_ONE = np.ones(1)
RATE_NEWTON_STEPS = 60  # Newton / bisection steps of `Engine._rate_with_merging` (converges in ~4)
SHARED_RATE_STEPS = 60  # secant / bisection steps of `Engine._shared_rate` (converges in ~6)
QUEUED_MIN = 1e-6  # below this chance of queueing beyond the next step, TTFT ignores it
COMPANY_PASSES = 2  # passes of the step mix with company (module docstring of _steps)
CHAIN_STATES = 64  # the steps' prompt-count chain's states at most (`_chain_company`)
CHAIN_NEGLIGIBLE = 1e-12  # chain counts below this share of the likeliest one are dropped
CHAIN_FOLDED = 1e-4  # the chain's last state (its count and more) holding more: too few states
CHAIN_DELAY_CA2 = (1.5, 3.0)  # c_a^2 from which D's chain part fades out, and where it is gone
COUNT_REACH_SDS = 12.0  # `_delay_chain`'s company counts end this many sds (and counts) past the mean
DELAY_CHAIN_NEGLIGIBLE = 1e-7  # steps under way seen less often are left out of D (`_delay_chain`)
ATOM_CV = 0.5  # prompt-length CV at which the company's count atoms have faded into the lognormal
PEAKEDNESS_FLOOR = 1e-3  # the seat queue's count peakedness Z is at least this (`_seat_wait`)


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
        ttft_extra_s: FloatArray | None = None,
    ) -> None:
        """`ttft_extra_s`: per prompt support point, time every TTFT includes beyond the engine's
        steps: vLLM's front end (the profile's `request_overhead_s`) and, for a disaggregated
        prefill pool, the KV hand-off."""
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
        self._k = 1.0 / self.ca2 if self.ca2 > 0.0 else 1.0  # gamma gaps' shape (`_merge_weight`)
        self.cbar = stats.decode_context
        self.pw = stats.prompt_probs
        self.pe = stats.prefill_tokens
        self.p0 = stats.cached_tokens
        self.kv_weight = self.p0 + self.pe / 2.0 + self.half_block  # KV of a prompt mid-prefill
        self.pe_max = float(self.pe.max())
        self.mean_pe = stats.mean_prefill_tokens
        self.a_ctx = stats.prefill_attention_context
        self.p0_share = float(self.pw @ self.p0) / self.mean_pe  # cached tokens per computed one
        self.budget = float(config.max_num_batched_tokens)
        self.seats_max = float(config.max_num_seqs)
        self.kv_cap = float(config.kv_cache_tokens)
        # the most decodes a step can hold: seats, the KV cache, the budget (one token each)
        self.n_cap = min(self.seats_max, self.kv_cap / (self.cbar + self.half_block), self.budget)
        self.threshold = float(config.long_prefill_token_threshold)
        self.extra_ttft = ttft_extra_s
        pe2 = float(self.pw @ self.pe**2)
        self.kappa = self.mean_pe * float(self.pw @ self.pe**3) / (pe2 * pe2)  # E[X]E[X^3]/E[X^2]^2
        self.pe_tok_mean = pe2 / self.mean_pe  # E_tok[Pe]: the prompt a computed token is in, on average
        self.atom_weight = max(0.0, 1.0 - math.sqrt(stats.prefill_cv2) / ATOM_CV)  # `_company`
        # Whole prompts of alike lengths share steps (`_shared_rate`); the stability boundary is
        # then the unshared form's (`_find_boundary`), whose states `_unshared` selects.
        self._shares = (
            self.atom_weight > 0.0
            and self.has_decode
            and self.has_prefill
            and self._room_at_rest() > self.mean_pe
        )
        self._unshared = False
        self._p0_mean = float(self.pw @ self.p0)
        self._dispersion = max(self.ca2, 1.0)  # the steps' chain's count: Poisson or NB (`steps_by_count`)
        lo, hi = CHAIN_DELAY_CA2
        self._chain_fade = min(max((hi - self.ca2) / (hi - lo), 0.0), 1.0)  # `_chain_delay_weight`
        self._g = np.arange(CHUNK_GROUPS, dtype=np.float64)
        self._ones = np.ones((self.pe.size, 1))
        self._p0_col = self.p0[:, None]
        self._p0_first = 0.0 + self.p0  # the first chunk's offset, 0 share + p0, as `_chunks` adds it
        self._boundary: Boundary | None = None
        self._axis: tuple[list[float], list[float]] | None = None
        self._zero: State | None = None
        self._zero_point: Point | None = None
        self._token_cost: float | None = None
        self._shape: ServiceShape | None = None
        self._end: State | None = None
        self._cost_slope: tuple[list[float], list[float]] | None = None  # `_prompt_cost_slope_s`
        self._full_cv2: float | None = None
        self._full_shape: FloatArray | None = None
        self._states: dict[tuple[float, float | None, bool], State] = {}

    def _room_at_rest(self) -> float:
        """The budget beside a prompt's mean last chunk with no decodes (`_room_after_tokens` at
        n = 0): the most room a step ever has for further whole prompts."""
        s_own = min(self.budget, self.threshold) if self.threshold > 0 else self.budget
        k = np.maximum(np.ceil(self.pe / max(s_own, 1.0) - 1e-9), 1.0)
        return self._room_beside(self.budget, float(self.pw @ k), s_own)

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
        """The state at (n, lam_in), built once per engine: the root-findings revisit points (the
        stability boundary's end is the capacity search's first point; the steady state's root
        is evaluated again by `_least_root` and `solve`). A state is a pure function of its
        inputs; its lazily filled fields are too. Zero inputs are not keyed (0.0 == -0.0)."""
        key = (n, lam_in, self._unshared)
        s = self._states.get(key)
        if s is None:
            s = self._build_state(n, lam_in)
            if n != 0.0 or (lam_in is not None and lam_in != 0.0):
                if len(self._states) >= STATE_CACHE:
                    self._states.clear()
                self._states[key] = s
        return s

    def _build_state(self, n: float, lam_in: float | None) -> State:
        coef = self.k
        cbar = self.cbar
        if self.has_decode:
            z = 1.0 + (self.ca2 - 1.0) * n / (1.0 + n)
            n_dec = n + z
            n_arr = max(0.0, n + z - 1.0)
            t_dec = step_time_s(coef, 0.0, 0.0, n_dec, n_dec * cbar)
        else:
            z, n_dec, n_arr, t_dec = 1.0, 0.0, 0.0, 0.0
        if not self.has_prefill:
            lam = n / (self.d * t_dec)
            e = np.empty((0, 0))
            return State(
                n=n, lam=lam, z=z, n_dec=n_dec, n_arr=n_arr, t_dec=t_dec, t_arr=t_dec,
                share_full=math.nan, share_own=math.nan, t_full=math.nan, rho=0.0, busy=0.0,
                t_step=t_dec, mean_chunks=0.0, chunk_tokens=e, chunk_offset=e,
                chunk_weight=e, chunk_time=e, own_service=np.empty(0),
            )  # fmt: skip
        ctx = n_arr * cbar
        t_arr = step_time_s(coef, 0.0, 0.0, n_arr, ctx)
        s_f = self.budget - n_arr
        s_own = min(s_f, self.threshold) if self.threshold > 0 else s_f
        s_f1 = max(s_f, 1.0)
        s_o1 = max(s_own, 1.0)
        t_full = self._stream_step_s(s_f1, n_arr, ctx)
        q = self.mean_pe * t_full / s_f1
        fluid = self.mean_pe * (t_full - t_arr) / s_f1
        toks, offs, wts, k = self._chunks(s_o1)
        tau = step_time_s(coef, toks, offs, n_arr, ctx, empty_batches=False)
        own = self._row_sums(wts * tau)
        pw = self.pw
        extra_k = k * t_arr
        np.subtract(own, extra_k, out=extra_k)
        own_delta = float(extra_k.dot(pw))  # (own - k t_arr) . pw
        mean_k = float(k.dot(pw))
        if self.has_decode:
            a2 = n * q * (fluid - own_delta)
            b = self.d * t_dec + n * own_delta
            disc = b * b + 4.0 * a2 * n
            den = b + math.sqrt(max(disc, 0.0))
            lam = 2.0 * n / den if disc >= 0 and den > 0 else math.nan
            if self._k != 1.0 and lam > 0.0 and math.isfinite(lam):
                lam = self._rate_with_merging(n, q, own_delta, fluid - own_delta, self.d * t_dec, lam)
        else:
            lam = float(lam_in or 0.0)
        rho = lam * q
        busy = lam * (own_delta + self._merge_weight(rho) * (fluid - own_delta))
        wj = jc = joined = 0.0
        if self._shares and not self._unshared and lam > 0.0 and math.isfinite(lam):
            wj = self.atom_weight * room_for_more(self._room_beside(s_f, mean_k, s_own), self.mean_pe)
            if wj > 0.0:
                jc = self._join_cost_s(n_arr, ctx)
                lam, busy, joined = self._shared_rate(n, lam, q, own_delta, fluid, t_dec, jc, wj)
                rho = lam * q
        t_step = (t_dec / (1.0 - busy) if busy < 1.0 else math.inf) if self.has_decode else math.nan
        return State(
            n=n, lam=lam, z=z, n_dec=n_dec, n_arr=n_arr, t_dec=t_dec, t_arr=t_arr,
            share_full=s_f, share_own=s_own, t_full=t_full, rho=rho, busy=busy, t_step=t_step,
            mean_chunks=mean_k, chunk_tokens=toks, chunk_offset=offs,
            chunk_weight=wts, chunk_time=tau, own_service=own,
            join_weight=wj, join_cost=jc, joined=joined,
        )  # fmt: skip

    def _join_cost_s(self, n_arr: float, ctx: float) -> float:
        """Jc: what a second whole prompt adds to a step that carries one (each attending to
        itself, at the mean prompt and cached prefix), beside n_arr decodes. The first prompt's
        chunk partly hides in the decode step's memory time (A, `own_delta`); a further one
        finds the step compute-bound and pays its whole compute: H100, budget 8192, 1,155-token
        prompts, 90% load, the simulator's steps with 1, 2, 3, 4 prompts are 8.45, 27.83, 46.95,
        66.15 ms over their decodes (19.4 ms a joiner), where the full step's average per prompt
        (F, `fluid`) is 17.8."""
        pe, p0 = self.mean_pe, self._p0_mean
        pairs = pe * (p0 + 0.5 * pe)
        one = batch_time_s(self.k, n_arr, ctx, pe, pairs, p0 + pe, p0, empty_batches=False)
        two = batch_time_s(
            self.k, n_arr, ctx, 2.0 * pe, 2.0 * pairs, 2.0 * (p0 + pe), 2.0 * p0, empty_batches=False
        )
        return max(two - one, 0.0)

    def _shared_cost_s(
        self, lam: float, q: float, a: float, f: float, t_dec: float, jc: float, wj: float, hint: float | None
    ) -> tuple[float, float, float]:
        """E[Delta] where whole prompts share steps, at rate lam: (E[Delta], j, P(J = 0)). A
        prompt opens its step (A) or joins one another opened (Jc), E[Delta] = A + j (Jc - A), j
        the steps' chain's share of joiners (`arrivals.join_share`, started from `hint`, its
        P(J = 0) at a nearby rate); blended by wj with the unshared form A + w(rho)(F - A)
        (`_merge_weight`)."""
        j, p0 = join_share(lam, t_dec, a, jc, self._dispersion, hint)
        cost = a + j * (jc - a)
        if wj < 1.0:
            cost = wj * cost + (1.0 - wj) * (a + self._merge_weight(lam * q) * (f - a))
        return cost, j, p0

    def _shared_rate(
        self, n: float, lam0: float, q: float, a: float, f: float, t_dec: float, jc: float, wj: float
    ) -> tuple[float, float, float]:
        """The rate at concurrency n where whole prompts share steps (alike prompts with room
        beside them, weight wj): the root of h(lam) = lam (d t_dec + n E[Delta](lam)) - n
        (Little with t_step = t_dec / (1 - lam E[Delta]); E[Delta] `_shared_cost_s`, rising with
        lam), by the secant method from the unshared form's root lam0, kept inside a bracket
        (h(0) = -n; h >= 0 where E[Delta] is at its least, min(A, Jc, F)); at most
        SHARED_RATE_STEPS steps. Returns (lam, busy = lam E[Delta], j).

        The unshared form had every prompt that meets a busy prefill queue (GI/M/1's chance)
        pay the full step's average F: constant 1,155-token prompts at budget 8192 (H100, 90%
        load) read E[Delta] 14.3 ms against the simulator's 12.9 (openers 8.45 ms, joiners 19.4,
        j 0.409; `join_share` 0.40, E[Delta] 13.0 ms), and near capacity 1 / (1 - lam E[Delta])
        turned that into 16% more decodes (docs/latency/limits.md, item 4)."""
        d_t = self.d * t_dec
        least = max(min(a, jc, f), 0.0)
        lo, hi = 0.0, n / (d_t + n * least) if d_t + n * least > 0.0 else lam0

        hint: float | None = None  # this solve's last P(J = 0) (its own: a pure function of n)

        def h(x: float) -> tuple[float, float, float]:
            nonlocal hint
            cost, j, hint = self._shared_cost_s(x, q, a, f, t_dec, jc, wj, hint)
            return x * (d_t + n * cost) - n, cost, j

        x0 = min(max(lam0, lo), hi)
        v0, cost, j = h(x0)
        if v0 == 0.0:
            return x0, x0 * cost, j
        if v0 < 0.0:
            lo = x0
        else:
            hi = x0
        # the fixed-point step (E[Delta] held at x0's) is near the root: the secant from there
        x = min(max(n / (d_t + n * cost), lo), hi)
        x1, v1 = x0, v0
        v, cost, j = h(x)
        if v < 0.0:
            lo = x
        else:
            hi = x
        if v == 0.0:
            return x, x * cost, j
        for _ in range(SHARED_RATE_STEPS):
            nxt = x - v * (x - x1) / (v - v1) if v != v1 else 0.5 * (lo + hi)
            if not lo < nxt < hi:
                nxt = 0.5 * (lo + hi)
            x1, v1 = x, v
            x = nxt
            v, cost, j = h(x)
            if v < 0.0:
                lo = x
            else:
                hi = x
            if v == 0.0 or abs(x - x1) <= 1e-13 * x or hi - lo <= 1e-13 * hi:
                break
        return x, x * cost, j

    def _merge_weight(self, rho: float) -> float:
        """The share of prompts prefilled in full steps (E[Δ] = A + w (F - A)): those that arrive
        to find the prefill queue busy, GI/M/1's chance of waiting for gamma gaps of shape k =
        1/c_a² (`gamma_wait_probability`: rho itself for Poisson arrivals, more for bursts, which
        land together)."""
        r = min(max(rho, 0.0), 1.0)
        return gamma_wait_probability(r, self._k, r if self._k < 1.0 else 0.0)

    def _rate_with_merging(self, n: float, q: float, a: float, b: float, d_t: float, lam0: float) -> float:
        """The rate at concurrency n where the full-step share is `_merge_weight`, not rho: the
        root of h(lam) = lam (d t_dec + n A) + n lam w(lam q) (F - A) - n (Little's n = lam d
        t_step with t_step = t_dec / (1 - lam E[Δ])), by Newton's method from the Poisson
        form's root lam0 (its quadratic), kept inside a bracket [lo, hi] with h(lo) < 0 <= h(hi)
        (h(0) = -n); at most RATE_NEWTON_STEPS steps."""
        k = self._k

        def h(lam: float) -> tuple[float, float]:
            rho = lam * q
            w = self._merge_weight(rho)
            slope = gamma_wait_probability_slope(rho, k, w) if rho < 1.0 else 0.0
            return lam * (d_t + n * a) + n * lam * w * b - n, d_t + n * a + n * b * (w + rho * slope)

        lo, hi = 0.0, lam0
        x = lam0
        v, dv = h(x)
        for _ in range(RATE_NEWTON_STEPS):  # an upper end: h(hi) >= 0
            if v >= 0.0:
                break
            lo, hi = hi, 2.0 * hi
            x = hi
            v, dv = h(x)
        else:
            return lam0
        hi = x
        for _ in range(RATE_NEWTON_STEPS):
            step = v / dv if dv > 0.0 else math.inf
            nxt = x - step
            if not lo < nxt < hi:
                nxt = 0.5 * (lo + hi)
            if abs(nxt - x) <= 1e-14 * x:
                return nxt
            x = nxt
            v, dv = h(x)
            if v < 0.0:
                lo = x
            else:
                hi = x
            if v == 0.0:
                return x
        return x

    def _stream_step_s(
        self, share: FloatArray | float, n_arr: FloatArray | float, ctx: FloatArray | float
    ) -> Any:
        """A full-budget step while prompts queue: `share` prompt tokens from the FIFO stream of
        waiting prompts beside n_arr decodes. The stream cuts prompts at step boundaries, so a
        step carries the pieces of one or more prompts, each at its own offset; over a uniform
        phase the offsets of a prompt's chunks sum to E[Pe^2] / (2 s) + p0 (1 + Pe / s), so per
        step the chunks' prefix (re-read, `prefix_tokens`) is a_ctx + s E[p0] / E[Pe], their KV
        read that + s, and their attention s a_ctx (docs/latency/steady-state.md). One chunk of
        s tokens at a_ctx - s/2 has the same attention but half a budget less prefix. Floats give
        a float, arrays an array (`batch_time_s`'s two branches)."""
        prefix = share * self.p0_share
        prefix += self.a_ctx
        return batch_time_s(
            self.k, n_arr, ctx, share, share * self.a_ctx, prefix + share, prefix, empty_batches=False
        )  # share >= 1 at every caller

    def _chunks(self, share: float) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        """Each prompt's chunks at `share` tokens per step: k - 1 full chunks then the rest, as
        (tokens, offsets, weights), shape (I, columns), and k (I,). Up to G full chunks are
        listed one by one; more are represented by G group midpoints (exact for step times
        affine in the chunk index). Only as many columns as the longest prompt needs."""
        pe = self.pe
        k = pe * (1.0 / share)
        k -= _EPS_CHUNK
        np.ceil(k, out=k)
        np.maximum(k, _ONE0, out=k)
        m = k - _ONE0
        done = m * share  # tokens in the full chunks
        m_max = math.ceil(self.pe_max / share - 1e-9) - 1
        if m_max <= 0:
            return (pe - done)[:, None], (self.p0 + done)[:, None], self._ones, k
        cols = min(m_max, CHUNK_GROUPS)
        g = self._g[:cols]
        shape = (pe.size, cols + 1)
        toks, offs, wts = np.empty(shape), np.empty(shape), np.empty(shape)
        toks[:, :cols] = share
        np.subtract(pe, done, out=toks[:, cols])
        if cols == 1 and share < math.inf:  # one full chunk at offset 0 share + p0, if 0 < m
            offs[:, 0] = self._p0_first
            np.minimum(m, _ONE0, out=wts[:, 0])  # 0 < m as 1.0 / 0.0 (m counts chunks: 0, 1, ...)
        elif m_max <= CHUNK_GROUPS:  # every chunk listed: chunk j at offset j share, if j < m
            np.add(g * share, self._p0_col, out=offs[:, :cols])
            np.less(g, m[:, None], out=wts[:, :cols])
        else:
            few = (m <= CHUNK_GROUPS)[:, None]
            j = np.where(few, g, (g + 0.5) * m[:, None] / CHUNK_GROUPS - 0.5)
            np.multiply(j, share, out=offs[:, :cols])
            wts[:, :cols] = np.where(few, (g < m[:, None]).astype(np.float64), m[:, None] / CHUNK_GROUPS)
            offs[:, :cols] += self._p0_col
        np.add(self.p0, done, out=offs[:, cols])
        wts[:, cols] = 1.0
        return toks, offs, wts, k

    @staticmethod
    def _row_sums(a: FloatArray) -> FloatArray:
        """a.sum(axis=-1) for the few columns of a prompt's chunks: numpy sums a row's columns in
        order, ((a0 + a1) + a2) + ..., and so do these column additions, cheaper than its
        reduction on arrays this small (tests/test_latency.py holds them to it bit for bit)."""
        cols = a.shape[-1]
        if cols < 2 or cols > CHUNK_GROUPS + 1:
            return np.add.reduce(a, axis=-1)
        out = a[..., 0] + a[..., 1]
        for j in range(2, cols):
            out += a[..., j]
        return out

    def slack_of(self, s: State) -> float:
        """Smallest relative margin of the stability constraints at a state (< 0: violated)."""
        if not (math.isfinite(s.lam) and s.lam >= 0):
            return -1.0
        return min(v for _, v in self._margins(s))

    def _load(self, s: State) -> tuple[float, float]:
        """Running requests (decoding + prefilling: Little, requests being prefilled hold seats
        too) and mean KV tokens in use at a state; only the stability margins and the metrics
        read them, not the root-findings over rates, so they are computed on demand, once."""
        if s.load is None:
            n = s.n
            kv_dec = n * (self.cbar + self.half_block)
            if not self.has_prefill:
                s.load = (n, kv_dec)
            else:
                own = s.own_service
                pw = self.pw
                s.load = (
                    n + s.lam * float(own.dot(pw)),
                    kv_dec + s.lam * float((own * self.kv_weight).dot(pw)),
                )
        return s.load

    def _margins(self, s: State) -> list[tuple[StabilityLimit, float]]:
        seats, kv_mean = self._load(s)
        out: list[tuple[StabilityLimit, float]] = [
            ("max_num_seqs", 1.0 - seats / self.seats_max),
            ("kv_capacity", 1.0 - kv_mean / self.kv_cap),
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
        """Rates and stability margins at concurrencies `ns` (decode roles); mirrors `_state`
        (the unshared form where whole prompts share steps: `_shared_boundary`)."""
        coef = self.k
        cbar = self.cbar
        n = np.asarray(ns, dtype=np.float64)[:, None]
        z = 1.0 + (self.ca2 - 1.0) * n / (1.0 + n)
        n_dec = n + z
        kv_dec = n * (cbar + self.half_block)
        if not self.has_prefill:
            t_dec = step_time_s(coef, 0.0, 0.0, n_dec, n_dec * cbar)
            lam = n / (self.d * t_dec)
            slack = np.minimum(
                np.minimum(1.0 - n / self.seats_max, 1.0 - kv_dec / self.kv_cap), 1.0 - n / self.budget
            )
            return Grid(n[:, 0], lam[:, 0], slack[:, 0])
        n_arr = np.maximum(0.0, n + z - 1.0)
        # Each point also with one decode more beside every prompt step (n1: E[Delta]' below,
        # `_prompt_cost_slope_exact_s` term for term), stacked on a leading axis: one call each
        # for t_dec, t_arr and t_arr(n1), the full steps and the chunk steps (the same
        # arithmetic per element: the per-call cost once)
        n1 = n_arr + 1.0
        counts = np.stack((n_dec, n_arr, n1))
        three = step_time_s(coef, 0.0, 0.0, counts, counts * cbar)
        t_dec, t_arr, t_arr1 = three[0], three[1], three[2]
        s_f = self.budget - n_arr
        s_own = np.minimum(s_f, self.threshold) if self.threshold > 0 else s_f
        s_f1 = np.maximum(s_f, 1.0)
        s_fm = np.maximum(s_f - 1.0, 1.0)  # a token less of budget beside one more decode
        s_o1 = np.maximum(s_own, 1.0)
        pair = counts[1:]  # n_arr, n1
        fulls = self._stream_step_s(np.stack((s_f1, s_fm)), pair, pair * cbar)
        t_full, t_full1 = fulls[0], fulls[1]
        q = self.mean_pe * t_full / s_f1
        fluid = self.mean_pe * (t_full - t_arr) / s_f1
        pe = self.pe[None, :]
        k = np.maximum(1.0, np.ceil(pe / s_o1 - 1e-9))  # (N, I)
        m = k - 1.0
        m_top = float(m.max())
        cols = int(min(CHUNK_GROUPS, max(0.0, m_top)))
        g = self._g[:cols]
        s3 = s_o1[..., None]
        p0 = self.p0[None, :, None]
        shape = (*m.shape, cols + 1)
        offs = np.empty(shape)
        toks = np.empty(shape)
        wts = np.empty(shape)
        if m_top <= CHUNK_GROUPS:  # every chunk listed (`_chunks`)
            np.add(p0, g * s3, out=offs[..., :cols])
            np.less(g, m[..., None], out=wts[..., :cols])
        else:
            few = (m <= CHUNK_GROUPS)[..., None]
            j = np.where(few, g, (g + 0.5) * m[..., None] / CHUNK_GROUPS - 0.5)
            np.add(p0, j * s3, out=offs[..., :cols])
            wts[..., :cols] = np.where(
                few, (g < m[..., None]).astype(np.float64), m[..., None] / CHUNK_GROUPS
            )
        done = m * s_o1
        np.add(self.p0[None, :], done, out=offs[..., cols])
        toks[..., :cols] = s3
        np.subtract(pe, done, out=toks[..., cols])
        wts[..., cols] = 1.0
        pair4 = pair[..., None]  # (2, N, 1, 1)
        taus = step_time_s(coef, toks, offs, pair4, pair4 * cbar, empty_batches=False)
        owns = self._row_sums(wts * taus)  # (2, N, I)
        own = owns[0]
        pw = self.pw
        own_delta = ((own - k * t_arr) @ pw)[:, None]
        a2 = n * q * (fluid - own_delta)
        b = self.d * t_dec + n * own_delta
        disc = b * b + 4.0 * a2 * n
        den = b + np.sqrt(np.maximum(disc, 0.0))
        ok = (disc >= 0) & (den > 0)
        lam = np.full(n.shape, math.nan)
        np.divide(2.0 * n, den, out=lam, where=ok)  # 2 n / den where the root exists, else NaN
        if self._k != 1.0:  # the full-step share as `_merge_weight`: each point's root
            d_t = self.d * t_dec
            for i, lam_i in enumerate(lam[:, 0].tolist()):
                if lam_i > 0.0 and math.isfinite(lam_i):
                    lam[i, 0] = self._rate_with_merging(
                        float(n[i, 0]), float(q[i, 0]), float(own_delta[i, 0]),
                        float(fluid[i, 0] - own_delta[i, 0]), float(d_t[i, 0]), lam_i,
                    )  # fmt: skip
        rho = lam * q
        if self._k != 1.0:
            rc = np.array([[self._merge_weight(r)] for r in rho[:, 0].tolist()])
            pairs = zip(rho[:, 0].tolist(), rc[:, 0].tolist(), strict=True)
            dw = np.array([[gamma_wait_probability_slope(r, self._k, w)] for r, w in pairs])
        else:
            rc = np.minimum(np.maximum(rho, 0.0), 1.0)  # np.clip's result, without its overhead
            dw = ((rho > 0.0) & (rho < 1.0)).astype(np.float64)  # GI/M/1's slope: 1 inside
        busy = lam * (own_delta + rc * (fluid - own_delta))
        seats = n + lam * (own @ pw)[:, None]
        kv_mean = kv_dec + lam * ((own * self.kv_weight) @ pw)[:, None]
        slack = np.minimum(1.0 - seats / self.seats_max, 1.0 - kv_mean / self.kv_cap)
        slack = np.minimum(slack, np.minimum(1.0 - rho, 1.0 - busy))
        slack = np.minimum(slack, (s_f - 1.0) / self.budget)
        slack = np.where(np.isfinite(lam) & (lam >= 0), slack, -1.0)
        a1 = ((owns[1] - k * t_arr1) @ pw)[:, None]
        cost = (a1 - own_delta) * (1.0 - rc) + rc * (self.mean_pe * (t_full1 - t_arr1) / s_fm - fluid)
        cost += dw * lam * (self.mean_pe * t_full1 / s_fm - q) * (fluid - own_delta)
        cost = np.where(s_f1 > 2.0, cost, 0.0)
        return Grid(n[:, 0], lam[:, 0], slack[:, 0], cost[:, 0])

    # ---- stability ----------------------------------------------------------------------------

    def boundary(self) -> Boundary:
        """The stable branch, found once: a grid scan, then root-finding on the first margin to
        go negative; if the rate peaks before that (the engine saturates), the peak."""
        if self._boundary is None:
            if not self.has_decode:
                self._boundary = self._prefill_boundary()
            elif self._shares:
                self._boundary = self._shared_boundary()
            else:
                self._boundary = self._find_boundary()
        return self._boundary

    def _shared_boundary(self) -> Boundary:
        """Where whole prompts share steps: the stable branch ends at the unshared form's max
        stable rate (`_find_boundary` over `_unshared` states, its limit's label), reached on
        the shared branch at n_max <= the unshared end. Sharing lowers E[Delta] and would raise
        the max stable rate where the KV cache binds by 3.5-5.6% (constant 1,155-token prompts
        at budget 8192: H100 35.46 -> 37.45 req/s, H200 27.66 -> 28.63), above the rates at
        which the simulated replica runs away (34.0-34.5 and 26.5-27.0: the count's excursions
        fill the cache first, docs/latency/limits.md, item 4); the unshared form
        stays within 3-4% of those edges. The scan's points are the unshared branch's, so they
        are not kept (the solve and the capacity search bracket on the branch itself)."""
        self._unshared = True
        try:
            b = self._find_boundary()
        finally:
            self._unshared = False
        if not b.n_max > 0.0:
            return Boundary(b.n_max, b.lam_max, b.binding, b.root)
        end = self._state(b.n_max, None)
        if not end.lam > b.lam_max:
            return Boundary(b.n_max, end.lam, b.binding, b.root)
        res = find_root(
            lambda x: self._state(x, None).lam - b.lam_max,
            0.0,
            b.n_max,
            f_lo=-b.lam_max,
            f_hi=end.lam - b.lam_max,
            xtol=1e-9 * max(b.n_max, 1.0),
            rtol=1e-9,
        )
        # the root's side where the rate reaches lam_max: the solve brackets every lower rate
        n_cut = res.final_bracket[1] if res.final_bracket is not None else b.n_max
        return Boundary(n_cut, b.lam_max, b.binding, b.root)

    def _find_boundary(self) -> Boundary:
        cap = self.n_cap
        grid = cap * np.arange(1, GRID_POINTS + 1, dtype=np.float64) / GRID_POINTS
        gr = self.grid(grid)
        lam, slack, cost = gr.lam, gr.slack, gr.cost_slope
        bad = (slack < 0).nonzero()[0]
        root: RootResult | None = None
        inside = 0.0  # the last point known stable
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
            grid, lam, cost = grid[:i], lam[:i], cost[:i] if cost is not None else None
            inside = lo
        end = self._state(n_end, None)
        for _ in range(BOUNDARY_BACKOFF_STEPS):  # the root's tolerance overshot: step back in
            if not (n_end > 0 and self.slack_of(end) < 0):
                break
            n_end *= 1.0 - 1e-6
            end = self._state(n_end, None)
        else:
            if n_end > 0 and self.slack_of(end) < 0:  # the states disagree with the grid's slack
                n_end = inside
                end = self._state(n_end, None)
        lam_end = end.lam if n_end > 0 else 0.0
        binding = self._binding(end)
        best = int(lam.argmax()) if lam.size else -1
        if best >= 0 and float(lam[best]) > lam_end:
            # The rate peaks inside the stable range: past the peak more concurrency serves fewer
            # requests (the engine saturates). Tiny peaks from the ceil() of chunk counts keep
            # the end point's label.
            n_peak, lam_peak = self._refine_peak(grid, lam, best, n_end)
            label = "compute" if lam_peak > lam_end * (1.0 + 1e-3) else binding
            keep = grid < n_peak
            return Boundary(
                n_peak, lam_peak, label, root, grid[keep], lam[keep], cost[keep] if cost is not None else None
            )
        return Boundary(n_end, lam_end, binding, root, grid, lam, cost)

    def concurrency_at(self, rate: float) -> float:
        """The capacity search's axis (decode roles): the concurrency at which the stable branch
        runs `rate` requests/s, read off the boundary's grid by linear interpolation (exact at
        its points, n_max from lam_max up). The SLO metrics move about linearly in the rate
        where they bend in n (the step grows with n: n = lam d t_step), so Brent brackets
        their edge in fewer steady states on this axis. Between grid points it is not the
        branch itself: the search judges its precision on the state's own rate."""
        rates, ns = self._rate_axis()
        if rate >= rates[-1]:
            return ns[-1]
        if not rate > 0.0:
            return 0.0
        i = bisect.bisect_right(rates, rate)  # rates[i - 1] <= rate < rates[i]
        r0, n0 = rates[i - 1], ns[i - 1]
        return n0 + (ns[i] - n0) * (rate - r0) / (rates[i] - r0)

    def _rate_axis(self) -> tuple[list[float], list[float]]:
        """`concurrency_at`'s points, once: (0, 0), the grid's points where both the rate and
        the concurrency rise (the branch dips where a prompt starts needing another chunk),
        and the branch's end (lam_max, n_max)."""
        if self._axis is None:
            b = self.boundary()
            rates, ns = [0.0], [0.0]
            if b.grid_n is not None and b.grid_lam is not None:
                for n, lam in zip(b.grid_n.tolist(), b.grid_lam.tolist(), strict=True):
                    if rates[-1] < lam < b.lam_max and ns[-1] < n < b.n_max:
                        rates.append(lam)
                        ns.append(n)
            rates.append(b.lam_max)
            ns.append(b.n_max)
            self._axis = (rates, ns)
        return self._axis

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
            i = int(b.grid_lam.searchsorted(lam, side="right"))
            if i > 0 and float(b.grid_lam[i - 1]) < lam:
                lo, f_lo = float(b.grid_n[i - 1]), float(b.grid_lam[i - 1]) - lam
            g_lam = b.grid_lam
            if i < b.grid_n.size and float(g_lam[i]) > lam and (g_lam[1 : i + 1] > g_lam[:i]).all():
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
        s_hi = self._share_own(lo) if lo > 0 else self.budget
        s_lo = self._state(root, None).share_own
        if not s_lo < s_hi:
            return root
        pe = self.pe
        j_min = np.floor(pe / s_hi) + 1.0
        j_max = np.floor(pe / max(s_lo, 1e-9))
        some = j_max >= j_min  # prompts with a chunk count change in (s_lo, s_hi): usually none
        if not some.any():
            return root
        points: list[float] = []
        for p_i, a, b in zip(pe[some].tolist(), j_min[some].tolist(), j_max[some].tolist(), strict=True):
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

    def _share_own(self, n: float) -> float:
        """`State.share_own` at concurrency n without the rest of the state (`_build_state`'s
        arithmetic, decode roles)."""
        z = 1.0 + (self.ca2 - 1.0) * n / (1.0 + n)
        s_f = self.budget - max(0.0, n + z - 1.0)
        return min(s_f, self.threshold) if self.threshold > 0 else s_f

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
        seats, kv_mean = self._load(s)
        risk = self._kv_risk(s)
        seat = self._seat_wait(s)
        # the steps that carry prompt tokens, company sharing one: the mix ITL reads
        mixed = self._steps(s).mixed_share if self.has_decode and self.has_prefill else 0.0
        return Point(
            lam=s.lam,
            n=s.n,
            ttft_p50_s=ttft50,
            ttft_p99_s=ttft99,
            itl_p50_s=itl50,
            itl_p99_s=itl99,
            itl_worst_case_s=worst,
            mean_step_s=s.t_step if self.has_decode else None,
            mixed_step_fraction=mixed,
            prefill_chunk_tokens=s.share_own if self.has_prefill else None,
            prefill_utilization=min(1.0, s.rho) if self.has_prefill else 0.0,
            queue_wait_mean_s=wait.mean_s,
            queue_wait_p99_s=wait.quantile(0.99),
            kv_cache_tokens_used=kv_mean,
            kv_cache_usage=kv_mean / self.kv_cap,
            preemption_risk=risk,
            running_requests=seats,
            kv_full_wait_s=self._kv_full(s)[1],
            seat_wait_probability=seat.probability,
            seat_wait_s=seat.mean_s,
        )

    def _kv_risk(self, s: State) -> float:
        """`kv_full.kv_overflow_probability` at the state (its inputs gathered)."""
        kv_var = kv_tokens_variance(
            decodes=s.n,
            context_mean=self.cbar,
            context_sq_mean=self.stats.decode_context_sq,
            decode_count_variance=self._decode_var(s),
        )
        return kv_overflow_probability(
            kv_tokens_mean=self._load(s)[1], kv_tokens_var=kv_var, kv_capacity_tokens=self.kv_cap
        )

    def _kv_full(self, s: State) -> KvFull:
        """`kv_full.kv_full_wait` at the state, once: colocated engines only (a decode pool's
        arrivals are transfers, not prompts)."""
        if s.kv_full is None:
            f = self._kv_risk(s) if self.has_prefill and self.has_decode and s.n > 0.0 else 0.0
            s.kv_full = kv_full_wait(
                overflow_probability=f,
                kv_tokens_mean=self._load(s)[1] if f >= KV_FULL_MIN else 0.0,
                kv_capacity_tokens=self.kv_cap,
                mean_step_s=s.t_step,
                kv_token_s=self.stats.kv_token_s,
            )
        return s.kv_full

    def _seat_wait(self, s: State) -> SeatWait:
        """The wait for a sequence slot (`seats.seat_wait`, docs/latency/seats.md), once per state, for the engines whose prompts arrive (colocated, prefill pool):
        S = max_num_seqs seats, offered the running requests a (`_load`). The count's
        peakedness Z: the decode count's variance over its mean (`_decode_var`: burstiness and
        the count's feedback) where decodes run, else the arrivals' burst factor 1 + (c_a^2 - 1)
        a / (1 + a) (as z). The residence with every seat taken, R_full: a / lam with each of
        its d decode steps carrying the S - a decodes more (the decode-only step timed at
        n_dec + S - a, over 1 - busy as t_step); a prefill pool's, a / lam."""
        if s.seats is None:
            s.seats = NO_SEAT_WAIT
            running = self._load(s)[0] if self.has_prefill and s.lam > 0.0 else 0.0
            if running > 0.0:
                full = running / s.lam
                if self.has_decode and s.n > 0.0:
                    peak = self._decode_var(s) / s.n
                    more = max(self.seats_max - running, 0.0)
                    longer = self._decode_step_s(s.n_dec + more) - s.t_dec
                    full += self.d * longer * s.t_step / s.t_dec  # t_step / t_dec = 1 / (1 - busy)
                else:
                    peak = 1.0 + (self.ca2 - 1.0) * running / (1.0 + running)
                s.seats = seat_wait(
                    self.seats_max, running, max(peak, PEAKEDNESS_FLOOR), s.lam, full, self.ca2
                )
        return s.seats

    def ttft_p99_s(self, s: State) -> float:
        return float(self._ttft(s)[0][1])

    def itl_p99_s(self, s: State) -> float:
        return self._itl_p99(s)

    def _full_time(self, s: State) -> FloatArray:
        """Step times of the chunk steps when other prompts wait: the step is topped up with the
        waiting prompts' tokens, on average E[Pe] / (1 - rho) of them (the queue length given
        that it is non-empty, M/M/1), up to the whole budget; those tokens are pieces of the
        FIFO stream, with its attention and prefix per token (`_stream_step_s`)."""
        if s.full_time is None:
            s_f = max(s.share_full, 1.0)
            extra = self.mean_pe / max(1.0 - s.rho, 1e-12)
            c = s.chunk_tokens
            o = s.chunk_offset
            e = np.minimum(c + extra, s_f) - c  # the stream's tokens beside the prompt's chunk
            prefix = o + e * (self.a_ctx / s_f + self.p0_share)  # `_stream_step_s` per token
            s.full_time = batch_time_s(
                self.k, s.n_arr, s.n_arr * self.cbar, c + e, c * (o + 0.5 * c) + e * self.a_ctx,
                prefix + c + e, prefix, empty_batches=False,
            )  # fmt: skip
        return s.full_time

    def _steps(self, s: State) -> Steps:
        """What TTFT and ITL share at a state (computed once): the prefill queue, the queue beyond
        the next step, the company a prompt is admitted with, the mix of steps a decoder sees and
        the step under way (docs/latency/steps.md).

        The mix: a prompt's full chunks are steps of their own; its last chunk shares a step with
        its company, the prompts that arrived during the step under way (counted once per step:
        each prompt its tokens' share of it); while prompt tokens queue beyond the next step
        (probability q), every step is a full budget, E[Pe] / s_f of them per prompt. The company
        arrives over the length-biased step under way L, which the mix sets: a first pass with
        every chunk alone, then COMPANY_PASSES passes of the merged mix (the chain converges in
        two: a long step brings more company, which makes the next step longer)."""
        if s.steps is not None:
            return s.steps
        shape = self._service_shape()
        kappa_x = shape.kappa
        wait = self._queue_wait(s, shape)
        if not (self.has_decode and self.has_prefill) or s.n <= 0:
            s.steps = Steps(
                wait, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, _EMPTY, _EMPTY, 0.0, NO_SUMS, (), 0.0, 0.0, 0.0
            )
            return s.steps
        busy = 1.0 - math.exp(-s.n) * (1.0 - min(max(s.rho, 0.0), 1.0))
        t = s.t_dec
        extra = s.t_dec - s.t_arr
        lam_t = s.lam * s.t_step
        pw = self.pw
        v0 = s.chunk_time + extra
        w_last = lam_t * pw  # last chunks per step, by prompt
        vl = v0[:, -1]
        cols = v0.shape[1]
        # Power sums sum r v^k (k = 0..3) of the full chunks' and the last chunks' steps, in one
        # pass: rates r = lam t_step p_i w_ij by column, then the columns split.
        pows = np.empty((4, *v0.shape))
        rates = pows[0]
        np.multiply(w_last[:, None], s.chunk_weight, out=rates)
        np.multiply(rates, v0, out=pows[1])
        np.multiply(pows[1], v0, out=pows[2])
        np.multiply(pows[2], v0, out=pows[3])
        by_col = np.add.reduce(pows, axis=1)  # (4, cols)
        alone_a = by_col[:, -1].tolist()
        alone: Sums = (alone_a[0], alone_a[1], alone_a[2], alone_a[3])
        if cols > 1:
            f = (by_col[:, 0] if cols == 2 else np.add.reduce(by_col[:, :-1], axis=1)).tolist()
            full_cols: Sums = (f[0], f[1], f[2], f[3])
        else:
            full_cols = NO_SUMS
        sums = add_sums(full_cols, 1.0, alone, 1.0)
        r1, r2 = length_biased(t, sums)
        lb, lb_sq = busy * r1, busy * r2
        s_f = max(s.share_full, 1.0)
        full_step = s.t_full + extra
        m = mu = pi = backlog = rb = 0.0
        beyond: tuple[tuple[float, float], ...] = ()
        cv2_full = self._full_step_cv2()
        g2 = 1.0 + cv2_full  # E[T^2] / E[T]^2 of the backlog's full steps (E[T^3]: g2^3, lognormal)
        # In the passes a company step costs its prompt's last chunk step plus tau per company
        # token (tau the marginal prefill token of a full-budget step at this state): its
        # moments then follow from the chunks' and the company's own (binomially), no 2-D
        # arrays; the final mix below times every (chunk, company) step exactly.
        tau = max(s.t_full - s.t_arr, 0.0) / s_f
        if s.join_weight > 0.0:  # whole prompts that join a step pay their compute (`_join_cost_s`)
            tau += s.join_weight * (s.join_cost / self.mean_pe - tau)
        zf = 1.0
        x: list[float] = []
        xp: list[float] = []
        counts: tuple[list[float], list[float]] | None = None
        x1 = x2 = 0.0
        inv_pe = 1.0 / self.mean_pe
        lam = s.lam
        mean_pe = self.mean_pe
        cv2 = self.stats.prefill_cv2
        fc0, fc1, fc2, fc3 = full_cols
        al0, al1, al2, al3 = alone
        atoms = self.atom_weight > 0.0
        if atoms:  # the mix as steps, for the company's count (`count_given_any`)
            mix_v, mix_r = v0.ravel(), rates.ravel()
            last_r = rates[:, -1]
            room = np.maximum(s_f - s.chunk_tokens[:, -1:], 0.0)  # the budget caps a company step
        for _ in range(COMPANY_PASSES):
            mu = lam * lb
            cnt = company_count(self._k, lam, lb, lb_sq)
            m = cnt.m1
            pi = cnt.p_any
            backlog, beyond = wait_beyond(wait, kappa_x, lb / 2.0 + s.t_full)
            quiet = 1.0 - backlog
            w_alone = quiet * (1.0 - pi)
            s0 = fc0 * quiet + al0 * w_alone
            s1 = fc1 * quiet + al1 * w_alone
            s2 = fc2 * quiet + al2 * w_alone
            s3 = fc3 * quiet + al3 * w_alone
            if pi > 0:
                # Company tokens X: the count around an arrival (a gamma renewal process's, at
                # the mean L; zf = m / mu its burst factor) of prompts; given any: a
                # lognormal of those two moments, in probability slices at their conditional
                # means. A step with x of them carries 1 + x / E[Pe] prompts: counted once.
                zf = m / mu
                x1 = mean_pe * m / pi
                x2 = mean_pe**2 * (cnt.m2 + cv2 * m) / pi
                counts = None
                if atoms:
                    # the count's spread at a given L (the steps' own spread is the mixture's)
                    at_l = cnt.m2 - m * m - lam * lam * max(lb_sq - lb * lb, 0.0)
                    counts = count_given_any(lam * zf, max(at_l / m, 1.0), *under_way(t, mix_v, mix_r))
                x, xp = self._company(x1, x2, counts)
                b0 = b1 = b2 = b3 = 0.0
                for xj, pj in zip(x, xp, strict=True):
                    bj = pj / (1.0 + xj * inv_pe)
                    y = tau * xj
                    b0 += bj
                    by = bj * y
                    b1 += by
                    by *= y
                    b2 += by
                    b3 += by * y
                f = quiet * pi
                a0, a1, a2, a3 = f * al0, f * al1, f * al2, f * al3
                s0 += a0 * b0
                s1 += a1 * b0 + a0 * b1
                s2 += a2 * b0 + 2.0 * a1 * b1 + a0 * b2
                s3 += a3 * b0 + 3.0 * a2 * b1 + 3.0 * a1 * b2 + a0 * b3
            rb = lam_t * backlog * mean_pe / s_f  # the backlog's full steps per step
            if backlog > 0:
                s0 += rb
                s1 += rb * full_step
                s2 += rb * full_step**2 * g2
                s3 += rb * full_step**3 * g2**3
            sums = (s0, s1, s2, s3)
            r1, r2 = length_biased(t, sums)
            lb, lb_sq = busy * r1, busy * r2
            if atoms:
                parts_v = [v0[:, :-1].ravel(), vl]
                parts_r = [rates[:, :-1].ravel() * quiet, last_r * w_alone]
                if pi > 0:
                    xa = np.array(x)
                    parts_v.append((vl[:, None] + tau * np.minimum(xa[None, :], room)).ravel())
                    ba = np.array(xp) / (1.0 + xa * inv_pe)
                    parts_r.append(((quiet * pi) * last_r[:, None] * ba[None, :]).ravel())
                if backlog > 0:
                    parts_v.append(np.array([full_step]))
                    parts_r.append(np.array([rb]))
                mix_v, mix_r = np.concatenate(parts_v), np.concatenate(parts_r)
        # Alike prompts: their count per step as the steps' chain sets it (`_chain_company`);
        # without company in the passes D still reads the chain where whole prompts share steps.
        chain_ratio, chain = 1.0, None
        if atoms and ((pi > 0.0 and counts is not None) or s.join_weight > 0.0):
            wl_sum = float(np.add.reduce(w_last))
            v_bar = float(w_last @ vl) / wl_sum if wl_sum > 0.0 else float(vl[0])
            room_c = self._room_after_tokens(s)
            if pi > 0.0 and counts is not None:
                pi, counts, chain_ratio, chain = self._chain_company(
                    lam, t, v_bar, tau, room_c, pi, counts, s.t_step
                )
                x, xp = self._company(x1, x2, counts)
            else:
                steps = self._chain_steps(lam, t, v_bar, tau, room_c)
                chain = None if steps is None else (steps[1], steps[2])
        # The mix itself, for ITL's quantiles (the last pass): last chunks alone, full chunks,
        # last chunks with each company slice (timed exactly), the backlog's full steps.
        quiet = 1.0 - backlog
        n_i = vl.size
        n_full = n_i * (cols - 1)
        n_comp = n_i * len(x) if pi > 0 else 0
        n_frag = 0
        if pi > 0:
            r_tok = np.ascontiguousarray(s.chunk_tokens[:, -1:])
            xs = np.array(x)
            group = r_tok + xs  # the last chunk and its whole company, in tokens
            r_bar = self._mean_last_chunk(s)
            if r_bar + max(x) > s_f:  # the budget splits groups: their rests' steps, by slice
                n_frag = 2 * xs.size  # a rest alone, and a rest ahead of a newcomer
        n_back = (SLICE_PROBS.size if cv2_full > 0.0 else 1) if backlog > 0 else 0
        n_all = n_i + n_full + n_comp + n_frag + n_back
        vals = np.empty(n_all)
        rts = np.empty(n_all)
        vals[:n_i] = vl
        np.multiply(w_last, quiet * (1.0 - pi), out=rts[:n_i])
        if cols > 1:
            vals[n_i : n_i + n_full].reshape(n_i, cols - 1)[...] = v0[:, :-1]
            np.multiply(rates[:, :-1], quiet, out=rts[n_i : n_i + n_full].reshape(n_i, cols - 1))
        if pi > 0:
            r_pairs = 0.5 * r_tok
            r_pairs += s.chunk_offset[:, -1:]
            r_pairs *= r_tok  # r_tok (offset + r_tok / 2)
            # the company steps' tokens, attention and prefix by (prompt, company) slice, and a
            # row for the rests of the groups the budget splits (below)
            dims = (n_i + 2 if n_frag else n_i, xs.size)
            c_all, pairs_all, prefix_all = np.empty(dims), np.empty(dims), np.empty(dims)
            c = c_all[:n_i]
            np.minimum(group, s_f, out=c)
            xc = c - r_tok
            # r_pairs + x_c min(x_c, E[Pe^2]/E[Pe]) / 2: each prompt attends to itself
            pairs = pairs_all[:n_i]
            np.multiply(xc, 0.5, out=pairs)
            pairs *= np.minimum(xc, self.pe_tok_mean)
            pairs += r_pairs
            # KV and prefix: the last chunk's offset, and the company's cached prefixes
            prefix = prefix_all[:n_i]
            np.multiply(xc, self.p0_share, out=prefix)
            prefix += s.chunk_offset[:, -1:]
            # Each prompt counts its tokens' share of its step, r / c (c = min(G, s_f) of its
            # group's G tokens): the mix then carries every prompt token once (1 / (1 + x /
            # E[Pe]) counted steps, not tokens: where the budget caps the step the company's
            # rest went uncounted, and the mix's mean step fell below t_step). A group of
            # G > s_f tokens fills floor(G / s_f) full steps and leaves a rest of R tokens: a
            # step alone if nothing arrived during the last full one (e^{-lam zf T_full}, else
            # shared with the newcomers, counted as its share R / s_f of a full step), so the
            # full steps keep 1 - e^{-...} R / G of the group's count. The rests by company
            # slice, for the mean last chunk (exact for alike prompts). docs/latency/steps.md, "The
            # step mix".
            share = np.reciprocal(c)
            share *= r_tok
            lo = n_i + n_full
            if n_frag:
                # Per company slice, the group of the mean last chunk (exact for alike prompts),
                # in plain floats (eight of them: numpy's per-call cost would dominate).
                alone_f = math.exp(-lam * zf * s.t_full)  # nothing arrived during the last full step
                one_f = lam * zf * s.t_full * alone_f  # exactly one did
                with_company = (quiet * pi) * lam_t * r_bar  # last-chunk tokens with company, per step
                p_tok = self.pe_tok_mean
                p0_share = self.p0_share
                # A rest with one newcomer rides ahead of its chunk (FIFO): that step is the
                # newcomer's, R tokens longer (the mean last chunk r_bar at its mean offset,
                # `_chunks`' p0 + (k - 1) share on average), and the prompts alone give it up.
                o_bar = p0_share * self.mean_pe + (s.mean_chunks - 1.0) * max(s.share_own, 1.0)
                own_pairs = r_bar * (o_bar + 0.5 * r_bar)
                keep: list[float] = []
                f_rest: list[float] = []
                f_pairs: list[float] = []
                f_prefix: list[float] = []
                f_rate: list[float] = []
                n_tok: list[float] = []
                n_pairs: list[float] = []
                n_prefix: list[float] = []
                n_rate: list[float] = []
                for xj, pj in zip(x, xp, strict=True):
                    g = xj + r_bar
                    rest = math.fmod(g, s_f) if g > s_f else 0.0
                    # the group's count its rest takes from the full steps: alone, or ahead of
                    # one newcomer (with more of them it stays in the full step it overflowed)
                    cut = (alone_f + one_f) * rest / g
                    keep.append(pj * (1.0 - cut))
                    f_rest.append(rest)  # the tail of a prompt (E_tok[Pe] on average) at its offset
                    pairs_j = rest * (p_tok - 0.5 * min(rest, p_tok))
                    prefix_j = max(p_tok - rest, 0.0) + rest * p0_share
                    f_pairs.append(pairs_j)
                    f_prefix.append(prefix_j)
                    f_rate.append(with_company * pj * alone_f / g if rest > 0.0 else 0.0)
                    n_tok.append(min(rest + r_bar, s_f))
                    n_pairs.append(pairs_j + own_pairs)
                    n_prefix.append(prefix_j + o_bar)
                    n_rate.append(with_company * pj * one_f / g if rest > 0.0 else 0.0)
                c_all[n_i] = f_rest
                pairs_all[n_i] = f_pairs
                prefix_all[n_i] = f_prefix
                c_all[n_i + 1] = n_tok
                pairs_all[n_i + 1] = n_pairs
                prefix_all[n_i + 1] = n_prefix
                half = n_frag // 2
                rts[lo + n_comp : lo + n_comp + half] = f_rate
                wanted = math.fsum(n_rate)
                alone_total = lam_t * quiet * (1.0 - pi)  # rts[:n_i]'s sum (the weights sum to 1)
                if wanted > 0.0 and alone_total > 0.0:
                    take = min(wanted, alone_total)
                    rts[lo + n_comp + half : lo + n_comp + n_frag] = [r * (take / wanted) for r in n_rate]
                    rts[:n_i] *= 1.0 - take / alone_total
                else:
                    rts[lo + n_comp + half : lo + n_comp + n_frag] = 0.0
                share *= np.array(keep)
            else:
                share *= SLICE_PROBS if xp is SLICE_PROB_LIST else np.array(xp)
            share *= (w_last * (quiet * pi))[:, None]
            # A company step carries its last chunk (> 0 tokens); a split group's rest may be
            # empty, a step then only where decodes ride it (n_arr > 0: no mask to apply).
            tc = batch_time_s(
                self.k, s.n_arr, s.n_arr * self.cbar, c_all, pairs_all, prefix_all + c_all, prefix_all,
                empty_batches=not s.n_arr > 0.0,
            )  # fmt: skip
            np.add(tc.ravel(), extra, out=vals[lo : lo + n_comp + n_frag])
            rts[lo : lo + n_comp] = share.ravel()
        # Decoders see a step in proportion to the decodes it carries. A mixed step follows an
        # arrival, which finds n_arr = n + z - 1 decodes (bursts: more than the mean n), so the
        # mixed steps count n_arr / n of their share; a backlog's full steps also carry the
        # prompts prefilled earlier in the run, on average half of those a queued prompt waits
        # behind (its wait over a prompt's service). Poisson (z = 1): only the latter.
        n_seen = max(s.n, 1.0)
        if chain_ratio != 1.0:  # the chain's steps per second (`_chain_company`)
            rts[: n_all - n_back] *= chain_ratio
        if s.n_arr > n_seen:
            rts[: n_all - n_back] *= s.n_arr / n_seen
        if backlog > 0:
            ahead = (lb / 2.0 + s.t_full + phases_mean_s(beyond)) * s_f / (self.mean_pe * s.t_full)
            rate = rb * max(1.0, (s.n_arr + 0.5 * ahead) / n_seen)
            if n_back == 1:
                vals[-1] = full_step
                rts[-1] = rate
            else:  # the full steps' spread: a lognormal in the probability slices
                vals[-n_back:] = self._full_step_shape()
                vals[-n_back:] *= full_step
                np.multiply(SLICE_PROBS, rate, out=rts[-n_back:])
        mixed_share = min(1.0, float(np.add.reduce(rts)))
        s.steps = Steps(
            wait, backlog, lb / 2.0, lb, lb_sq, m, pi, zf, vals, rts, busy, sums, beyond, rb, full_step,
            mixed_share, chain,
        )  # fmt: skip
        return s.steps

    def _chain_company(
        self,
        lam: float,
        t: float,
        v_bar: float,
        tau: float,
        room: float,
        pi: float,
        counts: tuple[list[float], list[float]],
        t_step: float,
    ) -> tuple[float, tuple[list[float], list[float]], float, tuple[FloatArray, FloatArray] | None]:
        """The company of alike prompts from the chain of steps (`arrivals.steps_by_count`): a
        step with j prompts lasts the mean last chunk's step v_bar plus tau per further prompt's
        token (the budget's room capping them), a decode-only step t, and the next step admits
        what arrived during it (dispersion c_a^2). A prompt's company is its step's count less
        itself, seen per prompt: P(K = k) ~ (k + 1) pi_{k+1}. The passes' count over the step
        under way stops short of the chain's tail: constant 1,155-token prompts, H200, budget
        8192, 85%: steps with 1, 2, 3, 4 prompts 26.1%, 11.5%, 4.8%, 2.3% of what decoders see in
        the simulator, the chain 25.8%, 11.0%, 4.8%, 2.2% over its steps, the passes' count
        (Poisson-like) 29.3%, 11.7%, 4.5%, 1.8%. Where the room holds under two whole prompts
        the step's count is not the next step's (a split group's rest rides ahead: `_steps`),
        so the chain's weight fades in from one prompt's room to two (room / E[Pe] - 1), the
        passes' count (pi, `counts` given any) taking the rest.

        The chain also says how many steps there are: its mean step E_pi[L] (prompts per step
        lam E_pi[L]), where the mix counts lam t_step prompts per step. t_step, the closed form's
        (`_build_state`), runs long where prompts share steps (docs/latency/limits.md,
        item 4: H200, budget 8192, 85%: 41.1 ms; the chain 38.2, the simulator's
        decoders 38.3), and the mix's prompt-bearing steps, scaled by E_pi[L] / t_step, are then
        the chain's pi_j: the share of steps with prompts 0.480 against the simulator's 0.488
        (0.536 unscaled), which puts ITL p50 on the right side of the jump between decode-only
        and mixed steps (+61.6% -> +4.2%). Returns (P(any), counts given any, that scale: 1 where
        the chain is out, blended by its weight; the chain's step lengths and stationary vector,
        None where it is out: `_delay_chain`)."""
        pe = self.mean_pe
        beta = room_for_more(room, pe)
        steps = self._chain_steps(lam, t, v_bar, tau, room) if beta > 0.0 else None
        if steps is None:
            return pi, counts, 1.0, None
        j, lengths, dist = steps
        per_prompt = j[1:] * dist[1:]  # company k = j - 1 = 0, 1, ...
        total = float(np.add.reduce(per_prompt))
        if not (total > 0.0 and t_step > 0.0 and math.isfinite(t_step)):
            return pi, counts, 1.0, None
        per_prompt /= total
        pi_new = beta * (1.0 - float(per_prompt[0])) + (1.0 - beta) * pi
        if not pi_new > 0.0:
            return pi, counts, 1.0, None
        ratio = beta * float(dist @ lengths) / t_step + (1.0 - beta)
        tail = per_prompt[1:]
        top = int(np.flatnonzero(tail > CHAIN_NEGLIGIBLE * float(tail.max()))[-1]) + 1 if tail.size else 0
        ks = j[1 : top + 1].tolist()
        ps = (tail[:top] * (beta / pi_new)).tolist()
        if beta < 1.0:  # the passes' count takes the rest
            old_w = (1.0 - beta) * pi / pi_new
            ks += counts[0]
            ps += [old_w * p for p in counts[1]]
        return pi_new, (ks, ps), ratio, (lengths, dist)

    def _chain_steps(
        self, lam: float, t: float, v_bar: float, tau: float, room: float
    ) -> tuple[FloatArray, FloatArray, FloatArray] | None:
        """The steps' chain of alike prompts (`arrivals.steps_by_count`): the prompts a step
        admits j, its length (t without prompts, v_bar plus tau per further prompt's token up to
        the room) and the stationary pi_j; None where counts past CHAIN_STATES matter."""
        pe = self.mean_pe
        z = self._dispersion
        mu_top = lam * (v_bar + tau * room)
        # States: past the counts whose step still grows (the room's prompts, then L is flat and
        # the last state's lumped counts change nothing after them), and the count's reach: its
        # mean and spread at the longest step, and the negative binomial's geometric tail
        # ((1 - 1/z)^k) down to 1e-6.
        grows = math.ceil(room / pe) + 2
        reach = mu_top + 8.0 * math.sqrt(z * mu_top) + 4.0
        if z > 1.0 + 1e-9:
            reach += math.log(1e-6) / math.log1p(-1.0 / z)
        size = min(CHAIN_STATES, max(COUNT_ATOMS + 2, grows, math.ceil(reach)))
        j = np.arange(size, dtype=np.float64)
        lengths = np.minimum((j - 1.0) * pe, room)
        lengths *= tau
        lengths += v_bar
        lengths[0] = t
        dist = steps_by_count(lam, lengths, z)
        if dist[-1] > CHAIN_FOLDED:  # counts past CHAIN_STATES matter: the passes' count stays
            return None
        return j, lengths, dist

    def _company(
        self, x1: float, x2: float, counts: tuple[list[float], list[float]] | None
    ) -> tuple[list[float], list[float]]:
        """The company's tokens given any, as (values, probabilities): a lognormal of their two
        moments x1, x2 in the probability slices, and, for prompts of alike lengths, their count
        as atoms of whole prompts (`count_given_any`), weighted 1 - CV / ATOM_CV: steps then
        carry 1, 2, 3 prompts, not the fractions a lognormal smooths over (docs/latency/steps.md)."""
        alpha = self.atom_weight
        sigma = math.sqrt(math.log(max(x2 / (x1 * x1), 1.0)))
        if counts is None or alpha <= 0.0:
            return lognormal_slice_list(sigma, x1), SLICE_PROB_LIST
        pe = self.mean_pe
        values = [k * pe for k in counts[0]]
        if alpha >= 1.0:  # alike prompts: the atoms alone (no lognormal to compute)
            return values, counts[1]
        logn = lognormal_slice_list(sigma, x1)
        return values + logn, [alpha * p for p in counts[1]] + [(1.0 - alpha) * p for p in SLICE_PROB_LIST]

    def _ttft(self, s: State) -> tuple[FloatArray, Wait]:
        """`_compute_ttft`, once per state (the capacity search and `point` both ask)."""
        if s.ttft is None:
            s.ttft = self._compute_ttft(s)
        return s.ttft

    def _compute_ttft(self, s: State) -> tuple[FloatArray, Wait]:
        """TTFT at a state. Unless more prompt tokens wait than the next step takes (probability
        q, `Steps.backlog`), a prompt waits D (`_delay`: the step under way and its company) and
        is prefilled alone. Queued beyond the next step, it waits the mean step under way, one
        full-budget step, and the rest of the GI/G/1 queue's wait beyond those (exponential,
        memoryless), and its own steps are full-budget steps (topped up by the queue)."""
        if not self.has_decode:
            wait = self._steps(s).wait
            return self._ttft_prefill_pool(s, wait), wait
        mix = self._ttft_mixture(s)
        return response_quantiles_phases(mix.values, mix.probs, mix.phases, LEVELS, mix.waiting), mix.shown

    def _ttft_mixture(self, s: State) -> TtftMixture:
        """`_compute_ttft`'s distribution before its quantiles (colocated engines), once."""
        if s.ttft_mix is not None:
            return s.ttft_mix
        st = self._steps(s)
        delay, dprob = self._delay(s, st)
        q = st.backlog
        if s.chain_push is not None:  # D over the steps' chain: its pushed prompts are the queued
            wc = self._chain_delay_weight(s)
            q = wc * s.chain_push + (1.0 - wc) * q
        q = q if q >= QUEUED_MIN else 0.0
        own = self._own_ttft_s(s)
        size = own.size * delay.size
        n_all = size + own.size if q > 0 else size
        values = np.empty(n_all)
        probs = np.empty(n_all)
        np.add(own[:, None], delay[None, :], out=values[:size].reshape(own.size, delay.size))
        np.multiply(
            self.pw[:, None], ((1.0 - q) * dprob)[None, :], out=probs[:size].reshape(own.size, delay.size)
        )
        phases = st.beyond if q > 0 else ()
        waiting = None
        if q > 0:
            full = self._row_sums(s.chunk_weight * self._full_time(s))
            values[size:] = full + (own - s.own_service) + (st.residual + s.t_full)
            probs[size:] = q * self.pw
            waiting = np.zeros(n_all)
            waiting[size:] = 1.0
        shown = Wait(q, phases_mean_s(phases) + s.t_full) if q > 0 else NO_WAIT
        kv_full = self._kv_full(s)
        if kv_full.probability > 0.0:
            values, probs, phases, waiting = with_kv_full(
                values=values, probs=probs, phases=phases, waiting=waiting, unqueued=size, kv_full=kv_full
            )
        seat = self._seat_wait(s)
        if seat.probability > 0.0:
            values, probs, phases, waiting = with_seat_wait(values, probs, phases, waiting, seat)
        s.ttft_mix = TtftMixture(values, probs, phases, waiting, size, q, shown)
        return s.ttft_mix

    def _own_ttft_s(self, s: State) -> FloatArray:
        """Each prompt's own part of TTFT when it does not queue: its service, plus the time every
        TTFT includes beyond the engine's (`ttft_extra_s`: the front end, or a KV transfer)."""
        return s.own_service if self.extra_ttft is None else s.own_service + self.extra_ttft

    def ttft_p99_at_most_s(self, s: State) -> float:
        """A bound TTFT p99 never exceeds at this state, without its quantiles (the capacity
        search skips TTFT's exact p99 where this bound already shows ITL is the nearer target).
        Beyond the largest time that does not wait, only the queued prompts reach: with a
        chance q < 1% of queueing that time itself bounds p99 (read without the mixture);
        otherwise P(TTFT > v_q + y) <= q sum_k a_k e^{-y / m_max} (v_q the largest queued
        time), at most 1% at y = m_max ln(100 q sum_k a_k). Colocated engines (else inf)."""
        if s.ttft is not None:  # the exact p99 is already there
            return self.ttft_p99_s(s)
        if not self.has_decode:
            return math.inf
        st = self._steps(s)
        quiet = self._kv_full(s)[0] == 0.0 and self._seat_wait(s).probability == 0.0
        if s.ttft_mix is None and st.backlog < TAIL_EPS[-1] and quiet:
            # The largest own service after the largest delay: without the mixture's delays,
            # full steps and products (~85% of the bound's cost; the capacity search asks this
            # at most of its states once ITL is met).
            return float(self._own_ttft_s(s).max()) + self._delay_top_s(s, st)
        return ttft_p99_bound_s(self._ttft_mixture(s))

    def _ttft_prefill_pool(self, s: State, wait: Wait) -> FloatArray:
        """The prefill pool of a disaggregated deployment, modelled as a continuous server (no
        step under way, no company): the GI/G/1 wait, then the prompt's own steps topped up by
        the queue with probability rho, then the KV transfer."""
        rc = min(max(s.rho, 0.0), 1.0)
        service = s.own_service
        if rc > 0:
            full = self._row_sums(s.chunk_weight * self._full_time(s))
            service = service + rc * (full - service)
        if self.extra_ttft is not None:
            service = service + self.extra_ttft
        seat = self._seat_wait(s)
        if seat.probability > 0.0:
            m = wait.mean_if_waiting_s
            queue: Phases = ((wait.prob, m),) if wait.prob > 0.0 and m > 0.0 else ()
            values, probs, phases, waiting = with_seat_wait(service, self.pw, queue, None, seat)
            return response_quantiles_phases(values, probs, phases, LEVELS, waiting)
        return response_quantiles(service, self.pw, wait, LEVELS)

    def _delay(self, s: State, st: Steps) -> tuple[FloatArray, FloatArray]:
        """What a prompt waits before its own steps when nothing queues beyond the next step,
        D = U L + c X(L): the rest of the step under way (length-biased L, U uniform) and the
        prompts that arrived during it, X(L) tokens, each costing c (`_token_cost_s`). Idle
        (1 - P(busy)): 0. Per class of the step under way, decode-only (L = t_dec, length-biased
        share b) or mixed (L over the mixed steps): U L a lognormal in probability slices with
        U L's relative spread, E[(U L)^2] / E[U L]^2 = (4/3) E[L^2] / E[L]^2; the company
        (`_delay_classes`: the arrivals before and after it, a gamma renewal process's count,
        `arrivals.company_count`) none with probability 1 - pi_L and otherwise X given any, a
        lognormal of its two moments (the count's and the sizes' spread, which makes the tail),
        in vLLM's FIFO order: X = B + theta A (`arrivals.beside`: the prompts after it fill only
        the room beside its last chunk), plus a step's decodes t_arr where those before it
        overflow that room; its slices paired with U L's (a long step under way brings more
        company). The classes are those of a prompt not queued beyond the next step, so not
        arrived during a backlog: the backlog's full steps leave the mixed class (their time
        share, the arrivals' backlog read as a time average by rho / sigma) and its moments, and
        the shares are renormalized (docs/latency/ttft.md). Returns (values, probabilities)."""
        if st.busy <= 0:
            return _ZERO, _ONE
        idle, classes = self._delay_classes(s, st)
        w_chain = self._chain_delay_weight(s)
        exact = self._delay_chain(s, st, idle) if w_chain > 0.0 else None
        if exact is not None and w_chain >= 1.0:
            return exact
        # Not queued beyond the next step, the company fits in that step (more is what the
        # queued branch counts): its cost is at most one full budget's prefill tokens, c B =
        # T_full - T_0 of an idle engine (fixed per engine like c, so a slice still never falls
        # as load or burstiness raise it), its lognormal conditioned below that (`ttft.company_slices`).
        cap = self._company_cap_s()
        values = [0.0]
        probs = [idle]
        for cl in classes:
            half = (
                [v * cl.scale for v in UNIFORM_SLICE_LIST]
                if cl.sigma is None
                else lognormal_slice_list(cl.sigma, cl.scale)
            )
            values += half
            w_none, w_some = cl.share * (1.0 - cl.pi), cl.share * cl.pi
            probs += [p * w_none for p in SLICE_PROB_LIST]
            if cl.x_atoms is not None:  # alike prompts: whole ones, coupled by rank
                pair_v, pair_p = couple_by_rank(half, SLICE_PROB_LIST, *cl.x_atoms)
                values += [h + min(x, cap) for h, x in zip(*pair_v, strict=True)]
                probs += [p * w_some for p in pair_p]
                continue
            if cl.pi > 0.0:
                xs = company_slices(
                    log_sd=cl.x_sigma, mean_cost_s=cl.x_scale, cap_s=cap, atom_weight=self.atom_weight
                )
                values += [h + x for h, x in zip(half, xs, strict=True)]
            else:
                values += half
            probs += [p * w_some for p in SLICE_PROB_LIST]
        # In ascending order: TTFT's mixture adds them to each prompt's own time, so its rows
        # come sorted and the quantiles' sort of ~1,000 points merges runs (about a third cheaper).
        v = np.array(values)
        pv = np.array(probs)
        if exact is not None and w_chain > 0.0:  # in part (`_chain_delay_weight`): the two blended
            v = np.concatenate((exact[0], v))
            pv = np.concatenate((exact[1] * w_chain, pv * (1.0 - w_chain)))
        order = v.argsort(kind="stable")
        return v[order], pv[order]

    def _chain_delay_weight(self, s: State) -> float:
        """How far D is `_delay_chain`'s: how far whole prompts share steps (`State.join_weight`),
        fading out as arrivals get burstier, from c_a^2 = CHAIN_DELAY_CA2[0] to [1]. The chain
        weighs the step under way by its length (a time average); bursts do not see time
        averages (docs/latency/bursty.md: at CV^2 4 47% of arrivals find a mixed
        step that fills 24% of the time), so as bursts merge prompts into fewer, longer
        steps its D would fall with burstiness (48-token prompts, MoE, H100: TTFT p99 -0.13% from
        c_a^2 1 to 3.3). Validated at the trace's c_a^2 1.19 (docs/accuracy.md); the classes'
        two lognormals (their company a gamma renewal count) take the bursts."""
        return s.join_weight * self._chain_fade

    def _delay_chain(self, s: State, st: Steps, idle: float) -> tuple[FloatArray, FloatArray] | None:
        """D where whole prompts share steps (`State.join_weight` > 0), over the steps' chain
        itself (`_chain_company`: lengths L_j, stationary pi_j) rather than the classes' two
        lognormals paired by rank: the step under way is the chain's state j, length-biased
        (pi_j L_j), U uniform in its slices, and the K others that arrived during it (the gamma
        renewal count around an arrival at L_j, `others_in_step`) each add a joiner's time Jc
        up to the room's R whole prompts (the last in part: the step a full budget). FIFO puts
        this prompt at a uniform place among the K + 1: past the room's floor(R) + 1 places
        (chance max(K - floor(R), 0) / (K + 1)) it is pushed to a later step, the queued branch
        (`State.chain_push`, `_ttft_mixture`); D is given it is not. Given L_j, K and U are
        independent (Poisson), so D's points are their products, not their ranks' pairing,
        whose perfect correlation had spread D both ways: constant 1,155-token prompts, H100,
        budget 8192, 90% load, D's median 25 ms against the simulator's 33 (TTFT minus the
        prompt's own step), its 99th percentile 196 against 210. Busy share 1 - idle. None
        where the chain is out."""
        if not (s.join_weight > 0.0 and st.chain is not None):
            return None
        lengths, dist = st.chain
        seen = dist * lengths
        total = float(np.add.reduce(seen))
        if not total > 0.0:
            return None
        seen *= (1.0 - idle) / total
        keep = seen > DELAY_CHAIN_NEGLIGIBLE
        ls, ws = lengths[keep], seen[keep]
        ws *= (1.0 - idle) / float(np.add.reduce(ws))
        room = self._room_after_tokens(s) / self.mean_pe  # whole prompts' room beside this one
        lens = ls.tolist()
        # one count per distinct length (the chain's states past the room share the full step's)
        counts = {el: company_count(self._k, s.lam, el, el * el) for el in lens}
        top = counts[lens[-1]]  # the longest step's count reaches furthest
        reach = top.m1 + COUNT_REACH_SDS * math.sqrt(max(top.m2 - top.m1 * top.m1, 0.0)) + COUNT_REACH_SDS
        k_max = max(1, min(math.ceil(reach), CHAIN_STATES * 4))
        ks = np.arange(k_max + 1, dtype=np.float64)
        pushed = np.maximum(ks - math.floor(room), 0.0) / (ks + 1.0)
        rows = {el: others_in_step(cm, k_max, self._k == 1.0) for el, cm in counts.items()}
        pk = np.array([rows[el] for el in lens])  # (J, K)
        s.chain_push = float(ws @ (pk @ pushed))
        # not pushed: the company is min(K, R); counts past ceil(R) cost the same, lumped there
        stay = pk * (1.0 - pushed)
        fit = min(math.ceil(room), k_max)
        if fit < k_max:
            stay[:, fit] += stay[:, fit + 1 :].sum(axis=1)
            stay = stay[:, : fit + 1]
        stay *= 1.0 / max(1.0 - s.chain_push / max(1.0 - idle, 1e-300), 1e-300)  # given not pushed
        vals = (
            ls[:, None, None] * UNIFORM_SLICE_MEANS[None, :, None]
            + (s.join_cost * np.minimum(ks[: fit + 1], room))[None, None, :]
        )
        prob = ws[:, None, None] * np.asarray(SLICE_PROB_LIST)[None, :, None] * stay[:, None, :]
        v = np.concatenate((_ZERO, vals.ravel()))
        p = np.concatenate(([idle], prob.ravel()))
        order = v.argsort(kind="stable")
        return v[order], p[order]

    def _delay_top_s(self, s: State, st: Steps) -> float:
        """`_delay`'s largest value without its lists: every slice list rises, so it is a
        class's top slice plus its company's top slice (capped), the same arithmetic."""
        if st.busy <= 0:
            return 0.0
        if st.chain is not None and self._chain_delay_weight(s) > 0.0:  # `_delay_chain`'s points
            return float(self._delay(s, st)[0][-1])
        cap = self._company_cap_s()
        top = 0.0
        for cl in self._delay_classes(s, st)[1]:
            h = (
                UNIFORM_SLICE_LIST[-1] * cl.scale
                if cl.sigma is None
                else lognormal_top_slice(cl.sigma, cl.scale)
            )
            if cl.x_atoms is not None:
                h += min(cl.x_atoms[0][-1], cap)
            elif cl.pi > 0.0:
                h += company_top_s(log_sd=cl.x_sigma, mean_cost_s=cl.x_scale, cap_s=cap, atom_weight=self.atom_weight)
            top = max(top, h)
        return top

    def _delay_classes(self, s: State, st: Steps) -> tuple[float, list[DelayClass]]:
        """`_compute_delay_classes`, once per state (`st` is the state's own `_steps`)."""
        if s.delay_classes is None:
            s.delay_classes = self._compute_delay_classes(s, st)
        return s.delay_classes

    def _compute_delay_classes(self, s: State, st: Steps) -> tuple[float, list[DelayClass]]:
        """`_delay`'s idle share and its classes of the step under way (busy engines): U L's
        slices (log-sd, None for the decode-only class's uniform; mean), the class's share, the
        chance pi of company, and the company's lognormal given any (log-sd, mean cost)."""
        c = self._token_cost_s()
        t = s.t_dec
        total, s1, s2, s3 = st.sums
        scale = 1.0 / max(1.0, total)
        w0 = max(0.0, 1.0 - total)
        mean_step = w0 * t + scale * s1
        b_dec = w0 * t / mean_step if mean_step > 0 else 1.0  # length-biased share of decode-only steps
        busy = st.busy
        idle = 1.0 - busy
        rb = st.backlog_rate
        if rb > 0.0 and mean_step > 0.0 and b_dec < 1.0:
            # Not queued beyond the next step, a prompt did not arrive during a backlog: its
            # step under way is not one of the backlog's full steps. They leave the mixed class
            # (their time share, the arrivals' backlog q read as a time average: x rho / sigma,
            # GI/G/1's ratio of the time-average to the arrival-seen chance of waiting; 1 for
            # Poisson) and the classes are renormalized.
            fs = st.full_step_s
            share = scale * rb * fs / mean_step
            if st.wait.prob > s.rho:
                share *= s.rho / st.wait.prob
            gone = busy * min(share, 1.0 - b_dec)
            keep = 1.0 - gone
            w_dec = busy * b_dec / keep
            w_mix = (busy * (1.0 - b_dec) - gone) / keep
            idle /= keep
            busy = w_dec + w_mix
            b_dec = w_dec / busy
            r1 = s1 - rb * fs
            if r1 > 0.0:  # the mixed class's length moments without the backlog's steps
                s1, s2, s3 = r1, s2 - rb * fs * fs, s3 - rb * fs * fs * fs
        raw: list[tuple[float | None, float, float, float, float]] = []  # sigma, E[U L], E[L], E[L^2], share
        if s1 <= 0 or b_dec >= 1.0:
            raw.append((None, 0.5 * t, t, t * t, busy))
        else:
            l1, l2 = s2 / s1, s3 / s1
            sigma_m = math.sqrt(math.log(max(4.0 * l2 / (3.0 * l1 * l1), 1.0)))
            raw.append((None, 0.5 * t, t, t * t, busy * b_dec))
            raw.append((sigma_m, 0.5 * l1, l1, l2, busy * (1.0 - b_dec)))
        out = []
        pe, pe2 = self.mean_pe, self.mean_pe * self.mean_pe
        cv2 = self.stats.prefill_cv2
        room = self._room_after_tokens(s)
        whole = self.atom_weight * room_for_more(room, pe)  # `_company_atoms`' weight
        for sigma, mean_ul, el, el2, w in raw:
            cnt = company_count(self._k, s.lam, el, el2)
            pi = cnt.p_any
            x_sigma = x_scale = 0.0
            atoms = None
            if pi > 0.0:
                th, over = beside(cnt, room, pe, cv2)
                x1 = pe * cnt.one * (1.0 + th) / pi
                x2 = pe2 * ((1.0 + th * th) * (cnt.one_sq + cv2 * cnt.one) + 2.0 * th * cnt.cross) / pi
                if x1 > 0.0:
                    # a step's decodes again where the prompts before it push its end a step later
                    x_sigma, x_scale = (
                        math.sqrt(math.log(max(x2 / (x1 * x1), 1.0))),
                        c * x1 + s.t_arr * over / pi,
                    )
                    if whole > 0.0:
                        atoms = self._company_atoms(
                            s.lam, cnt, sigma is not None, el, el2, x_sigma, x_scale, whole
                        )
            out.append(DelayClass(sigma, mean_ul, w, pi, x_sigma, x_scale, atoms))
        return idle, out

    def _company_atoms(
        self,
        lam: float,
        cnt: CountMoments,
        spread: bool,
        el: float,
        el2: float,
        x_sigma: float,
        x_scale: float,
        whole: float,
    ) -> tuple[list[float], list[float]]:
        """A class's company cost given any, for prompts of alike lengths whose company fits
        beside them (weight `whole`: the atoms' weight `atom_weight` times the room's fade-in,
        room / E[Pe] - 1, as the steps' chain has it): whole prompts, the count K given any
        (`count_given_any` over the class's step under way, L's lognormal slices for the
        mixed class, at the count's own mean and spread at a given L), each costing the class's
        mean cost per prompt, x_scale / E[K | any]; the rest (1 - whole) the lognormal of the
        cost's two moments. Sorted by cost. The lognormal smears the atoms: constant 1,155-token
        prompts, H100, budget 8192, 60% load, the mixed class's top 1% averaged 5.7 prompts'
        cost where the count's 99th percentile is 4 (TTFT p99 +10.6% against the simulator, now
        +2.7%; docs/latency/ttft.md)."""
        m1 = cnt.m1
        # the count's spread at a given L: its variance less the steps' own (as `_steps` has it)
        at_l = cnt.m2 - m1 * m1 - lam * lam * max(el2 - el * el, 0.0)
        rate = m1 / el  # lam times the count's burst factor at the mean step
        if spread:
            lengths = np.array(lognormal_slice_list(math.sqrt(math.log(max(el2 / (el * el), 1.0))), el))
            weights = SLICE_PROBS
        else:
            lengths, weights = np.array([el]), _ONE
        counts, probs = count_given_any(rate, max(at_l / m1, 1.0), lengths, weights)
        per = x_scale / math.fsum(k * p for k, p in zip(counts, probs, strict=True))
        values = [k * per for k in counts]
        if whole >= 1.0:
            return values, probs
        logn = lognormal_slice_list(x_sigma, x_scale)
        pairs = sorted(
            zip(
                values + logn,
                [whole * p for p in probs] + [(1.0 - whole) * p for p in SLICE_PROB_LIST],
                strict=True,
            )
        )
        return [v for v, _ in pairs], [p for _, p in pairs]

    def _mean_last_chunk(self, s: State) -> float:
        """A prompt's last chunk on average, E[Pe] - (E[k] - 1) s_own (`_chunks`: k - 1 full
        chunks of s_own tokens, then the rest)."""
        return self.mean_pe - (s.mean_chunks - 1.0) * max(s.share_own, 1.0)

    def _room_after_tokens(self, s: State) -> float:
        """The budget left beside a prompt's last chunk, s_f - r (r the mean last chunk): what
        the prompts that arrive after it during the step under way can fill of its step."""
        return self._room_beside(s.share_full, s.mean_chunks, s.share_own)

    def _room_beside(self, share_full: float, mean_chunks: float, share_own: float) -> float:
        """`_room_after_tokens` from its parts (`_build_state` and `_room_at_rest` have no
        state yet)."""
        return max(max(share_full, 1.0) - (self.mean_pe - (mean_chunks - 1.0) * max(share_own, 1.0)), 0.0)

    def _service_shape(self) -> ServiceShape:
        """`prefill_queue.service_shape`, once per engine, at the stability boundary (decode
        roles; the queue's shape matters where it is long, near capacity, and the decodes there
        dilute the prompts' differences the least of any point where it is long); from the token
        counts alone without a prefill (no step to time them)."""
        if self._shape is None:
            shape = None
            if self.has_prefill:
                at = self._saturated() if self.has_decode else self._state(0.0, 0.0)
                s_f = max(at.share_full, 1.0)
                attention, prefix = own_stream_context(
                    prompt_tokens=self.pe, cached_tokens=self.p0, full_share_tokens=s_f
                )
                full_step_s = batch_time_s(
                    self.k, at.n_arr, at.n_arr * self.cbar, s_f, s_f * attention, prefix + s_f, prefix
                )
                shape = service_shape(
                    prompt_tokens=self.pe, prompt_probs=self.pw, full_step_s=full_step_s,
                    arrival_cv2=self.ca2, colocated=self.has_decode,
                )  # fmt: skip
            self._shape = shape or shape_of(
                cv2=self.stats.prefill_cv2, kappa=self.kappa, service_over_mean=self.pe / self.mean_pe,
                arrival_cv2=self.ca2, prompt_probs=self.pw, colocated=self.has_decode and self.has_prefill,
            )  # fmt: skip
        return self._shape

    def _full_step_cv2(self) -> float:
        """`prefill_queue.full_step_cv2`, once per engine, each full step a stream step at the
        stability boundary (colocated engines only, `_steps`)."""
        if self._full_cv2 is None:
            end = self._saturated()
            s_f = max(end.share_full, 1.0)
            attention, prefix = full_step_context(
                prompt_tokens=self.pe, cached_tokens=self.p0, full_share_tokens=s_f
            )
            step_s = batch_time_s(
                self.k, end.n_arr, end.n_arr * self.cbar, s_f, s_f * attention, prefix + s_f, prefix
            )
            self._full_cv2 = full_step_cv2(
                full_step_s=step_s, prompt_tokens=self.pe, prompt_probs=self.pw,
                full_share_tokens=s_f, token_mean_prompt_tokens=self.pe_tok_mean,
            )  # fmt: skip
        return self._full_cv2

    def _full_step_shape(self) -> FloatArray:
        """The backlog's full steps over their mean: `_full_step_cv2`'s lognormal in the
        probability slices (scale 1: times the mean step, `lognormal_slice_list`'s own
        product), once per engine."""
        if self._full_shape is None:
            self._full_shape = np.array(lognormal_slice_list(math.sqrt(math.log1p(self._full_step_cv2()))))
        return self._full_shape

    def _saturated(self) -> State:
        """The state at the stability boundary's end (decode roles), kept once per engine: the
        queue's stretch and service shape read it at every state, and the state cache may have
        dropped it."""
        if self._end is None:
            self._end = self._state(self.boundary().n_max, None)
        return self._end

    def _full_service_s(self, s: State) -> float:
        """A prompt's mean service in the prefill queue at a state: E[Pe] / s_f full steps."""
        return self.mean_pe * s.t_full / max(s.share_full, 1.0)

    def _queue_wait(self, s: State, shape: ServiceShape) -> Wait:
        """The prefill queue's wait at a state (`prefill_queue.prefill_wait`), stretched for the
        backlog's drain where it lasts (`prefill_queue.stretched_wait`: the drag towards the
        stability boundary, the decode count's variance and loop gathered only there)."""
        service_s = self._full_service_s(s)
        colocated = self.has_decode and self.has_prefill
        wait = prefill_wait(
            utilization=s.rho, mean_service_s=service_s, arrival_cv2=self.ca2, shape=shape, colocated=colocated
        )
        if not (colocated and 0.0 < s.rho < 1.0 and stretch_applies(wait)):
            return wait
        drag = self._prefill_drag(s)
        if drag is None:
            return wait
        return stretched_wait(
            wait=wait, utilization=s.rho, mean_service_s=service_s, arrival_cv2=self.ca2, drag=drag,
            lifetime_s=self.d * s.t_step, decodes=s.n, count_variance=self._decode_var(s),
            count_loop=self._count_feedback(s).loop,
        )  # fmt: skip

    def _prefill_drag(self, s: State) -> PrefillDrag | None:
        """`prefill_queue.prefill_drag` at the state, once (against the boundary's end)."""
        if s.drag is None:
            end = self._saturated()
            drag = prefill_drag(
                decodes=s.n, mean_service_s=self._full_service_s(s),
                saturated_decodes=end.n, saturated_service_s=self._full_service_s(end),
            )  # fmt: skip
            s.drag = drag if drag is not None else ()
        return s.drag or None

    def _token_cost_s(self) -> float:
        """The marginal time of one prefill token in a full-budget step of an idle engine,
        (T_full - T_0) / B: fixed per engine, so the company's cost never falls with load."""
        if self._token_cost is None:
            z = self.zero()
            self._token_cost = max(z.t_full - z.t_arr, 0.0) / max(z.share_full, 1.0)
        return self._token_cost

    def _company_cap_s(self) -> float:
        """The most a prompt's company costs when nothing queues beyond the next step: one full
        budget's prefill tokens at `_token_cost_s` each (an idle engine's budget: fixed)."""
        return self._token_cost_s() * max(self.zero().share_full, 1.0)

    def _itl(self, s: State) -> tuple[float, float]:
        """ITL p50 and p99 at a state, once."""
        if s.itl is None:
            s.itl = (self._itl_level(s, 0), self._itl_p99(s))
        return s.itl

    def _itl_p99(self, s: State) -> float:
        """ITL p99 alone (what the capacity search reads), once."""
        if s.itl99 is None:
            s.itl99 = self._itl_level(s, 1)
        return s.itl99

    def _itl_level(self, s: State, i: int) -> float:
        """`itl.itl_level` at the state, level LEVELS[i]; the quantile vectors it computes are kept
        on the state for the other level."""
        st = self._steps(s)
        got = itl_level(
            level_index=i, decode_step_s=s.t_dec, mixed_values=st.values, mixed_rates=st.rates,
            decode_others=self._decode_others(s), max_decodes=self.n_cap,
            decode_step_of=self._decode_step_s, mixed=s.itl_mixed, all_steps=s.itl_all,
        )  # fmt: skip
        s.itl_mixed, s.itl_all = got.mixed, got.all_steps
        return got.itl_s

    def _decode_step_s(self, count: float) -> float:
        """A decode-only step of `count` decodes (scalar: cheaper than numpy on a few values)."""
        return step_time_s(self.k, 0.0, 0.0, count, count * self.cbar)

    def _decode_var(self, s: State) -> float:
        """`_compute_decode_var`, once per state."""
        if s.decode_var is None:
            s.decode_var = self._compute_decode_var(s)
        return s.decode_var

    def _decode_slope_s(self, s: State) -> float:
        """What one more decode adds to a decode-only step at the state: t_dec - t_arr (a step
        with one decode fewer) where prompts arrive, else the step at n_dec - 1 timed."""
        if self.has_prefill:
            return max(s.t_dec - s.t_arr, 0.0)
        return max(s.t_dec - self._decode_step_s(max(s.n_dec - 1.0, 0.0)), 0.0)

    def _compute_decode_var(self, s: State) -> float:
        """Var n at the state (`decode_count.decode_count_variance`)."""
        if not count_wanders(s.n, s.t_dec, s.busy):
            return 0.0
        return decode_count_variance(
            decodes=s.n,
            arrival_cv2=self.ca2,
            decode_overlap=self.stats.decode_overlap,
            feedback=self._count_feedback(s),
        )

    def _count_feedback(self, s: State) -> CountFeedback:
        """`decode_count.count_feedback` at the state, once: its inputs gathered only where they
        count (E[Delta]' with prompts and decodes and a decode step; the queue's relaxation
        where a backlog drags prefill and the queue is stable)."""
        if s.feedback is None:
            both = self.has_prefill and self.has_decode
            drag = self._prefill_drag(s) if both else None
            drag_per_decode = drag[0] if drag is not None else 0.0
            slope = self._prompt_cost_slope_s(s) if both and s.t_dec > 0.0 else None
            relaxation = None
            if slope is not None and s.n * drag_per_decode > 0.0 and 0.0 < s.rho < 1.0:
                relaxation = s.rho * self._full_service_s(s) * (self.ca2 + self._service_shape().cv2)
                relaxation /= (1.0 - s.rho) ** 2
            s.feedback = count_feedback(
                decodes=s.n,
                arrival_rate_per_s=s.lam,
                busy=s.busy,
                decode_step_s=s.t_dec,
                decode_slope_s=self._decode_slope_s(s),
                prompt_cost_slope_s=slope,
                drag_per_decode=drag_per_decode,
                queue_relaxation_s=relaxation,
                lifetime_s=self.d * s.t_step,
            )
        return s.feedback

    def _prompt_cost_slope_s(self, s: State) -> float:
        """E[Delta]' at the state: linear in n between the stability scan's points (`grid`, where
        it is `_prompt_cost_slope_exact_s` term for term) and the boundary's end (exact there),
        the first point's below them; exact where the stable range spans fewer than
        SLOPE_GRID_MIN of the scan's points (budget 512: ~70 of 512 seats, two points, where a
        line read the slope 29% off at a kink of the step formula). A candidate reads it at ~9
        states, ~1 us each against ~26 us for the exact difference, and the scan's one call per
        array computes it at every point. Over docs/accuracy.md's 48 synthetic cells the count's
        sd moves by at most 0.3% and no latency by more than 0.02%."""
        if self._cost_slope is None:
            b = self.boundary()
            xs: list[float] = []
            ys: list[float] = []
            if b.grid_n is not None and b.grid_cost_slope is not None and b.grid_n.size >= SLOPE_GRID_MIN:
                end = self._saturated()
                xs, ys = b.grid_n.tolist(), b.grid_cost_slope.tolist()
                if end.n > xs[-1]:
                    xs.append(end.n)
                    ys.append(self._prompt_cost_slope_exact_s(end))
            self._cost_slope = (xs, ys)
        xs, ys = self._cost_slope
        if not xs:  # the stable range spans few of the scan's points: too coarse to interpolate
            return self._prompt_cost_slope_exact_s(s)
        x = s.n
        i = bisect.bisect_right(xs, x)
        if i == 0:
            return ys[0]
        if i == len(xs):
            return ys[-1]
        x0, y0 = xs[i - 1], ys[i - 1]
        return y0 + (ys[i] - y0) * (x - x0) / (xs[i] - x0)

    def _prompt_cost_slope_exact_s(self, s: State) -> float:
        """d E[Delta] / dn at the state's rate: E[Delta] = A + w(rho)(F - A) (`_build_state`)
        with one more decode beside every prompt step (the chunks as they are, one token less of
        budget for the full steps): A' from the chunks' steps and the decode step they ride, F'
        and q' from the full step, w' from GI/M/1's slope; a one-decode difference."""
        s_f = max(s.share_full, 1.0)
        if not s_f > 2.0:
            return 0.0
        coef, cbar, pe = self.k, self.cbar, self.mean_pe
        n1 = s.n_arr + 1.0
        t_arr1 = self._decode_step_s(n1)
        tau1 = step_time_s(coef, s.chunk_tokens, s.chunk_offset, n1, n1 * cbar, empty_batches=False)
        pw = self.pw
        a0 = float(s.own_service.dot(pw)) - s.mean_chunks * s.t_arr
        a1 = float(self._row_sums(s.chunk_weight * tau1).dot(pw)) - s.mean_chunks * t_arr1
        t_full1 = self._stream_step_s(s_f - 1.0, n1, n1 * cbar)
        f0 = pe * (s.t_full - s.t_arr) / s_f
        f1 = pe * (t_full1 - t_arr1) / (s_f - 1.0)
        q0, q1 = self._full_service_s(s), pe * t_full1 / (s_f - 1.0)
        rho = s.lam * q0
        w = self._merge_weight(rho)
        dw = gamma_wait_probability_slope(rho, self._k, w) if 0.0 < rho < 1.0 else 0.0
        slope = (a1 - a0) * (1.0 - w) + w * (f1 - f0) + dw * s.lam * (q1 - q0) * (f0 - a0)
        wj = s.join_weight
        if wj > 0.0:  # whole prompts sharing steps: A + j (Jc - A), the chain's steps one decode longer
            jc0 = s.join_cost
            jc1 = self._join_cost_s(n1, n1 * cbar)
            t1 = self._decode_step_s(s.n_dec + 1.0)
            j1, _ = join_share(s.lam, t1, a1, jc1, self._dispersion)
            shared = a1 + j1 * (jc1 - a1) - (a0 + s.joined * (jc0 - a0))
            slope = wj * shared + (1.0 - wj) * slope
        return slope

    def _decode_others(self, s: State) -> DecodeCompany | None:
        """`decode_count.decode_company` at the state's count and variance."""
        return decode_company(s.n, self._decode_var(s))

    def _itl_worst(self, s: State) -> float:
        """`itl.itl_worst_case_s` at the state (a decode pool: its decode-only step)."""
        if not self.has_prefill:
            return s.t_dec
        return itl_worst_case_s(
            coefficients=self.k, full_share_tokens=s.share_full,
            prompt_p99_tokens=self.stats.prompt_p99_tokens, decodes=s.n_dec, context_mean=self.cbar,
        )  # fmt: skip
