"""One vLLM engine (one replica) in a role under a stationary load: the front of the latency
model's components (docs/latency.md indexes their pages under docs/latency/).

Roles: "colocated" (prefill and decode on one engine, chunked prefill), "prefill" (a
disaggregated deployment's prefill pool) and "decode" (its decode pool). `Engine` holds no
modelling of its own; it keeps

* the state cache: the states it built (`steady.build_state`, keyed by concurrency and rate)
  and, per state and per engine, the component results computed once (the stable branch, the
  idle state, the prefill queue's service shape, the saturated state);
* the order in which components are called and what each is given:
  `replica.replica_of` (the inputs, once) -> `steady` (Little's fixed point, a state) ->
  `stability` (the stable branch, the state at a rate) -> `prefill_queue` (the wait and its
  shape) and `decode_count` (the decode count's variance, E[Delta]' from `cost_slope`) -> `steps.step_mix` (what TTFT and
  ITL share) -> `delay` (D: the step under way and its company) and `ttft` (TTFT's mixture and
  quantiles), `itl`, `kv_full` and `seats` (the waits for KV blocks and sequence slots) ->
  `Point` (every figure `evaluate` reports).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from planner.costmodel.steptime import StepCoefficients
from planner.latency.cost_slope import interpolated_slope_s, prompt_cost_slope_exact_s, slope_points
from planner.latency.decode_count import (
    CountFeedback,
    DecodeCompany,
    count_feedback_at,
    decode_company,
    decode_count_variance_at,
)
from planner.latency.delay import (
    Delay,
    chain_delay_weight,
    delay_at,
    delay_classes,
    delay_top_s,
)
from planner.latency.itl import TAIL_EPS, itl_level_at, itl_worst_at
from planner.latency.kv_full import (
    KV_FULL_MIN,
    KvFull,
    kv_full_wait,
    kv_overflow_probability,
    kv_tokens_variance,
)
from planner.latency.point import point_of
from planner.latency.prefill_queue import (
    PrefillDrag,
    full_step_cv2_at,
    prefill_drag_at,
    queue_wait_at,
    service_shape_at,
)
from planner.latency.queueing import NO_WAIT, Wait
from planner.latency.replica import replica_of
from planner.latency.results import (
    Boundary,
    DelayClasses,
    Grid,
    Point,
    Role,
    ServiceShape,
    StabilityLimit,  # noqa: F401 (planner/reports.py imports it from here)
    State,
    Steps,
    TtftMixture,
)
from planner.latency.seats import SeatWait, seat_wait_at
from planner.latency.slices import lognormal_slice_list
from planner.latency.stability import (
    RateAxis,
    boundary,
    concurrency_at,
    grid,
    load_of,
    rate_axis,
    slack_of,
    solve,
)
from planner.latency.stats import WorkloadStats
from planner.latency.steady import build_state
from planner.latency.steps import no_mix, step_mix
from planner.latency.ttft import (
    company_cap_s,
    full_time_s,
    own_ttft_s,
    prefill_pool_ttft,
    queued_share,
    token_cost_s,
    ttft_mixture,
    ttft_p99_bound_s,
    ttft_quantiles,
)
from planner.scheduler_config import SchedulerConfig
from solvers.rootfind import RootResult

FloatArray = npt.NDArray[np.float64]

HUGE = 1e9  # stands in for an infinite ratio inside root-finding
STATE_CACHE = 64  # states an engine keeps (Engine._state; a candidate builds ~25); cleared when full


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
        r = replica_of(coefficients, stats, config, role)
        self.replica = r  # what every component reads (`replica.Replica`)
        self.stats = stats
        self.config = config
        self.role = role
        self.ttft_extra_s = ttft_extra_s
        self.has_decode, self.has_prefill = r.has_decode, r.has_prefill  # the capacity search reads these
        self._boundary: Boundary | None = None
        self._axis: RateAxis | None = None
        self._zero: State | None = None
        self._zero_point: Point | None = None
        self._token_cost: float | None = None
        self._shape: ServiceShape | None = None
        self._end: State | None = None
        self._cost_slope: tuple[list[float], list[float]] | None = None  # `prompt_cost_slope_s`
        self._full_cv2: float | None = None
        self._full_shape: FloatArray | None = None
        self._states: dict[tuple[float, float | None, bool], State] = {}

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

    def _state(self, n: float, lam_in: float | None, unshared: bool = False) -> State:
        """The state at (n, lam_in) (`steady.build_state`), built once per engine: the
        root-findings revisit points (the stability boundary's end is the capacity search's
        first point; the steady state's root is evaluated again by the least-root search and
        `solve`). A state is a pure function of its inputs; its lazily filled fields are too.
        Zero inputs are not keyed (0.0 == -0.0)."""
        key = (n, lam_in, unshared)
        s = self._states.get(key)
        if s is None:
            s = build_state(self.replica, decodes=n, rate_per_s=lam_in, unshared=unshared)
            if n != 0.0 or (lam_in is not None and lam_in != 0.0):
                if len(self._states) >= STATE_CACHE:
                    self._states.clear()
                self._states[key] = s
        return s

    def _unshared_state(self, n: float, lam_in: float | None) -> State:
        """`_state` with whole prompts not sharing steps (the stability boundary's form)."""
        return self._state(n, lam_in, True)

    # ---- the stability boundary and the steady state at a rate (`stability`) ------------------

    def slack_of(self, s: State) -> float:
        """Smallest relative margin of the stability constraints at a state (< 0: violated)."""
        return slack_of(self.replica, s)

    def grid(self, ns: FloatArray) -> Grid:
        """Rates and stability margins at concurrencies `ns` (`stability.grid`)."""
        return grid(self.replica, ns)

    def boundary(self) -> Boundary:
        """The stable branch, found once (`stability.boundary`)."""
        if self._boundary is None:
            self._boundary = boundary(
                self.replica, state_of=self._state, unshared_state_of=self._unshared_state
            )
        return self._boundary

    def concurrency_at(self, rate: float) -> float:
        """The capacity search's axis: the concurrency at which the stable branch runs `rate`
        (`stability.concurrency_at` on the boundary's points, taken once)."""
        if self._axis is None:
            self._axis = rate_axis(self.boundary())
        return concurrency_at(self._axis, rate)

    def solve(self, lam: float) -> tuple[State, RootResult | None] | None:
        """The steady state at arrival rate lam (per replica), None where lam is not stable
        (`stability.solve`)."""
        return solve(self.replica, self.boundary(), lam, state_of=self._state, idle=self.zero)

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
        """TTFT, ITL and resource metrics at a steady state (`point.point_of`)."""
        both = self.has_decode and self.has_prefill
        ttft, wait = self._ttft(s) if self.has_prefill else (None, NO_WAIT)
        decode = self.has_decode
        return point_of(
            self.replica, s, ttft=ttft, wait=wait, itl=self._itl(s) if decode else None,
            itl_worst_s=itl_worst_at(self.replica, s, prompt_p99_tokens=self.stats.prompt_p99_tokens) if decode else None,
            preemption_risk=self._kv_risk(s), seat=self._seat_wait(s),
            mixed_share=self.steps(s).mixed_share if both else 0.0,  # the steps that carry prompt tokens
            kv_full_wait_s=self.kv_full(s)[1],
        )  # fmt: skip

    def _kv_risk(self, s: State) -> float:
        """`kv_full.kv_overflow_probability` at the state (its inputs gathered)."""
        kv_var = kv_tokens_variance(
            decodes=s.n,
            context_mean=self.replica.decode_context_tokens,
            context_sq_mean=self.stats.decode_context_sq,
            decode_count_variance=self.decode_variance(s),
        )
        return kv_overflow_probability(
            kv_tokens_mean=load_of(self.replica, s)[1], kv_tokens_var=kv_var, kv_capacity_tokens=self.replica.kv_cache_tokens
        )

    def kv_full(self, s: State) -> KvFull:
        """`kv_full.kv_full_wait` at the state, once: colocated engines only (a decode pool's
        arrivals are transfers, not prompts)."""
        if s.kv_full is None:
            f = self._kv_risk(s) if self.has_prefill and self.has_decode and s.n > 0.0 else 0.0
            s.kv_full = kv_full_wait(
                overflow_probability=f,
                kv_tokens_mean=load_of(self.replica, s)[1] if f >= KV_FULL_MIN else 0.0,
                kv_capacity_tokens=self.replica.kv_cache_tokens,
                mean_step_s=s.t_step,
                kv_token_s=self.stats.kv_token_s,
            )
        return s.kv_full

    def _seat_wait(self, s: State) -> SeatWait:
        """`seats.seat_wait_at`, once per state: its running requests (where prompts arrive) and
        decode count variance (where decodes run) gathered."""
        if s.seats is None:
            running = load_of(self.replica, s)[0] if self.has_prefill and s.lam > 0.0 else 0.0
            var = self.decode_variance(s) if running > 0.0 and self.has_decode and s.n > 0.0 else None
            s.seats = seat_wait_at(self.replica, s, running_requests=running, decode_count_variance=var)
        return s.seats

    def ttft_p99_s(self, s: State) -> float:
        return float(self._ttft(s)[0][1])

    def itl_p99_s(self, s: State) -> float:
        return self._itl_p99(s)

    def _full_time(self, s: State) -> FloatArray:
        """`ttft.full_time_s`, once per state."""
        if s.full_time is None:
            s.full_time = full_time_s(self.replica, s)
        return s.full_time

    def steps(self, s: State) -> Steps:
        """What TTFT and ITL share at a state (`steps.step_mix`), once per state: the engine
        gathers the prefill queue's wait and shape and the backlog's full-step spread."""
        if s.steps is None:
            shape = self.service_shape()
            wait = self._queue_wait(s, shape)
            if not (self.has_decode and self.has_prefill) or s.n <= 0:
                s.steps = no_mix(wait)
            else:
                s.steps = step_mix(
                    self.replica, s, wait=wait, service_kappa=shape.kappa,
                    full_step_cv2=self.full_step_cv2(), full_step_shape=self._full_step_shape(),
                )  # fmt: skip
        return s.steps

    def _ttft(self, s: State) -> tuple[FloatArray, Wait]:
        """`_compute_ttft`, once per state (the capacity search and `point` both ask)."""
        if s.ttft is None:
            s.ttft = self._compute_ttft(s)
        return s.ttft

    def _compute_ttft(self, s: State) -> tuple[FloatArray, Wait]:
        """TTFT p50 and p99 at a state and the prefill queue's wait it shows: a prefill pool's
        (`ttft.prefill_pool_ttft`), or the colocated mixture's quantiles (`ttft_mixture`)."""
        if not self.has_decode:
            wait = self.steps(s).wait
            full = self._full_time(s) if s.rho > 0.0 else None
            ttft = prefill_pool_ttft(
                self.replica, s, wait, full_time=full, ttft_extra_s=self.ttft_extra_s, seat=self._seat_wait(s)
            )
            return ttft, wait
        return ttft_quantiles(self.ttft_mixture(s))

    def ttft_mixture(self, s: State) -> TtftMixture:
        """`ttft.ttft_mixture` at a colocated state, once: D (`delay`, which sets the chain's
        pushed share), the queued share, and the topped-up steps only where prompts queue."""
        if s.ttft_mix is None:
            st = self.steps(s)
            delay = self.delay(s)
            w_chain = chain_delay_weight(join_weight=s.join_weight, arrival_cv2=self.replica.arrival_cv2)
            q = queued_share(st, chain_push=s.chain_push, chain_weight=w_chain)
            s.ttft_mix = ttft_mixture(
                self.replica, s, st, delay=delay, queued=q,
                own_s=own_ttft_s(s, ttft_extra_s=self.ttft_extra_s),
                full_time=self._full_time(s) if q > 0 else None,
                kv_full=self.kv_full(s), seat=self._seat_wait(s),
            )  # fmt: skip
        return s.ttft_mix

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
        st = self.steps(s)
        quiet = self.kv_full(s)[0] == 0.0 and self._seat_wait(s).probability == 0.0
        if s.ttft_mix is None and st.backlog < TAIL_EPS[-1] and quiet:
            # The largest own service after the largest delay: without the mixture's delays,
            # full steps and products (~85% of the bound's cost; the capacity search asks this
            # at most of its states once ITL is met).
            return float(own_ttft_s(s, ttft_extra_s=self.ttft_extra_s).max()) + self.delay_top_s(s)
        return ttft_p99_bound_s(self.ttft_mixture(s))

    def delay(self, s: State) -> Delay:
        """D, the wait for the step under way and its company, at the state (`delay.delay_at`):
        its classes kept on the state (`_delay_classes`), the chain's pushed share too
        (`State.chain_push`, which `ttft_mixture` reads)."""
        st = self.steps(s)
        delay, pushed = delay_at(
            self.replica, s, st, classes_of=lambda: self._delay_classes(s, st), company_cap_s=self._company_cap_s()
        )
        if pushed is not None:
            s.chain_push = pushed
        return delay

    def delay_top_s(self, s: State) -> float:
        """D's largest value (`delay.delay_top_s`; the chain's points read where it takes part):
        what `ttft_p99_at_most_s` adds to the largest own service where few prompts queue."""
        st = self.steps(s)
        if st.busy <= 0:
            return 0.0
        if st.chain is not None and chain_delay_weight(join_weight=s.join_weight, arrival_cv2=self.replica.arrival_cv2) > 0.0:
            return float(self.delay(s).values[-1])
        return delay_top_s(self.replica, classes=self._delay_classes(s, st), company_cap_s=self._company_cap_s())

    def _delay_classes(self, s: State, st: Steps) -> DelayClasses:
        """`delay.delay_classes`, once per state (`st` is the state's own `Engine.steps`)."""
        if s.delay_classes is None:
            s.delay_classes = delay_classes(self.replica, s, st, token_cost_s=self._token_cost_s())
        return s.delay_classes

    def service_shape(self) -> ServiceShape:
        """`prefill_queue.service_shape_at`, once per engine, at the stability boundary (decode
        roles; the queue's shape matters where it is long, near capacity, and the decodes there
        dilute the prompts' differences the least of any point where it is long); from the token
        counts alone without a prefill (no step to time them)."""
        if self._shape is None:
            at = None
            if self.has_prefill:
                at = self._saturated() if self.has_decode else self._state(0.0, 0.0)
            self._shape = service_shape_at(self.replica, at=at, prefill_cv2=self.stats.prefill_cv2)
        return self._shape

    def full_step_cv2(self) -> float:
        """`prefill_queue.full_step_cv2_at`, once per engine, at the stability boundary's end
        (colocated engines only, `Engine.steps`)."""
        if self._full_cv2 is None:
            self._full_cv2 = full_step_cv2_at(self.replica, self._saturated())
        return self._full_cv2

    def _full_step_shape(self) -> FloatArray:
        """The backlog's full steps over their mean: `full_step_cv2`'s lognormal in the
        probability slices (scale 1: times the mean step, `lognormal_slice_list`'s own
        product), once per engine."""
        if self._full_shape is None:
            self._full_shape = np.array(lognormal_slice_list(math.sqrt(math.log1p(self.full_step_cv2()))))
        return self._full_shape

    def _saturated(self) -> State:
        """The state at the stability boundary's end (decode roles), kept once per engine: the
        queue's stretch and service shape read it at every state, and the state cache may have
        dropped it."""
        if self._end is None:
            self._end = self._state(self.boundary().n_max, None)
        return self._end

    def _queue_wait(self, s: State, shape: ServiceShape) -> Wait:
        """`prefill_queue.queue_wait_at`: the drag and the decode count gathered only where the
        backlog's drain stretches the wait."""
        return queue_wait_at(
            self.replica, s, shape=shape, drag_of=lambda: self._prefill_drag(s),
            count_of=lambda: (self.decode_variance(s), self._count_feedback(s).loop),
        )  # fmt: skip

    def _prefill_drag(self, s: State) -> PrefillDrag | None:
        """`prefill_queue.prefill_drag_at` at the state, once (against the boundary's end)."""
        if s.drag is None:
            drag = prefill_drag_at(self.replica, s, end=self._saturated())
            s.drag = drag if drag is not None else ()
        return s.drag or None

    def _token_cost_s(self) -> float:
        """`ttft.token_cost_s` of the idle state, once per engine."""
        if self._token_cost is None:
            self._token_cost = token_cost_s(self.zero())
        return self._token_cost

    def _company_cap_s(self) -> float:
        """`ttft.company_cap_s` of the idle state."""
        return company_cap_s(self.zero())

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
        """`itl.itl_level_at` at the state, level LEVELS[i]."""
        return itl_level_at(self.replica, s, self.steps(s), level_index=i, decode_others=self._decode_others(s))

    def decode_variance(self, s: State) -> float:
        """Var n, the decode count's variance at the state
        (`decode_count.decode_count_variance_at`), once per state: what the KV and seat waits,
        the prefill queue's stretch and ITL's decode company read."""
        if s.decode_var is None:
            s.decode_var = decode_count_variance_at(
                self.replica, s, decode_overlap=self.stats.decode_overlap, feedback_of=lambda: self._count_feedback(s)
            )
        return s.decode_var

    def _count_feedback(self, s: State) -> CountFeedback:
        """`decode_count.count_feedback_at` at the state, once (the drag gathered where prompts
        and decodes share the engine)."""
        if s.feedback is None:
            drag = self._prefill_drag(s) if self.has_prefill and self.has_decode else None
            s.feedback = count_feedback_at(
                self.replica, s, drag=drag, prompt_cost_slope_of=lambda: self.prompt_cost_slope_s(s),
                service_cv2_of=lambda: self.service_shape().cv2,
            )  # fmt: skip
        return s.feedback

    def prompt_cost_slope_s(self, s: State) -> float:
        """E[Delta]' at the state (`cost_slope`): linear in n between the stability scan's points
        and the boundary's end (`cost_slope.slope_points`, kept once per engine), exact where
        the stable range spans too few of them. A candidate reads it at ~9 states, ~1 us each
        against ~26 us for the exact difference. Over docs/accuracy.md's 48 synthetic cells the
        count's sd moves by at most 0.3% and no latency by more than 0.02%."""
        if self._cost_slope is None:
            b = self.boundary()
            self._cost_slope = slope_points(
                self.replica, grid_n=b.grid_n, grid_cost_slope=b.grid_cost_slope, end_of=self._saturated
            )
        xs, ys = self._cost_slope
        if not xs:  # the stable range spans few of the scan's points: too coarse to interpolate
            return self.prompt_cost_slope_exact_s(s)
        return interpolated_slope_s(xs, ys, s.n)

    def prompt_cost_slope_exact_s(self, s: State) -> float:
        """`cost_slope.prompt_cost_slope_exact_s` at the state."""
        return prompt_cost_slope_exact_s(self.replica, s)

    def _decode_others(self, s: State) -> DecodeCompany | None:
        """`decode_count.decode_company` at the state's count and variance."""
        return decode_company(s.n, self.decode_variance(s))
