"""One vLLM engine (one replica) in a role under a stationary load: the front of the latency
model's components (docs/latency.md indexes their pages under docs/latency/; docs/latency/engine.md
describes this front).

Roles: "colocated" (prefill and decode on one engine, chunked prefill), "prefill" (a
disaggregated deployment's prefill pool) and "decode" (its decode pool). `Engine` holds no
modelling of its own; it keeps

* the states it built (`steady.build_state`, keyed by concurrency and rate, frozen `State`s) and
  each live state's stages (`at_state.StateResults`: one component's result each, computed once
  on demand), and the once-per-engine results (the stable branch, the idle state, the prefill
  queue's service shape, the saturated state), each a `once` (`once.py`) written in one place;
* the order in which components are called and what each is given:
  `replica.replica_of` (the inputs, once) -> `steady` (Little's fixed point, a state) ->
  `stability` (the stable branch, the state at a rate) -> per state (`StateResults`):
  `prefill_queue` (the wait and its shape) and `decode_count` (the decode count's variance)
  -> `steps.step_mix` (what TTFT and ITL share) -> `delay` (D: the
  step under way and its company) and `ttft` (TTFT's mixture and quantiles), `itl`, `kv_full`
  and `seats` (the waits for KV blocks and sequence slots) -> `Point` (every figure `evaluate`
  reports).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from planner.costmodel.steptime import StepCoefficients
from planner.latency.at_state import StateResults
from planner.latency.delay import Delay
from planner.latency.kv_full import KvFull
from planner.latency.once import once
from planner.latency.prefill_queue import full_step_cv2_at, service_shape_at
from planner.latency.replica import replica_of
from planner.latency.results import (
    Boundary,
    Grid,
    Point,
    ServiceShape,
    State,
    Steps,
    TtftMixture,
)
from planner.latency.slices import lognormal_slice_list
from planner.latency.stability import boundary, grid, slack_of
from planner.latency.stable_branch import RateAxis, concurrency_at, rate_axis, solve
from planner.latency.stats import WorkloadStats
from planner.latency.steady import build_state
from planner.latency.ttft import company_cap_s, token_cost_s
from planner.scheduler_config import SchedulerConfig
from planner.schema.kinds import Role
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
        `solve`). A state is a pure function of its inputs; so are its stages (`results_at`).
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

    def results_at(self, s: State) -> StateResults:
        """The state's stages (`at_state.StateResults`): what was computed there is kept in the
        state's store while the state lives (the state cache may drop a state its caller still
        holds; what was computed there stays with it)."""
        return StateResults(self, s)

    # ---- the stability boundary and the steady state at a rate (`stability`) ------------------

    def slack_of(self, s: State) -> float:
        """Smallest relative margin of the stability constraints at a state (< 0: violated)."""
        return slack_of(self.replica, s)

    def grid(self, ns: FloatArray) -> Grid:
        """Rates and stability margins at concurrencies `ns` (`stability.grid`)."""
        return grid(self.replica, ns)

    @once
    def _boundary(self) -> Boundary:
        return boundary(self.replica, state_of=self._state, unshared_state_of=self._unshared_state)

    def boundary(self) -> Boundary:
        """The stable branch, found once (`stability.boundary`)."""
        return self._boundary

    @once
    def _axis(self) -> RateAxis:
        return rate_axis(self.boundary())

    def concurrency_at(self, rate: float) -> float:
        """The capacity search's axis: the concurrency at which the stable branch runs `rate`
        (`stability.concurrency_at` on the boundary's points, taken once)."""
        return concurrency_at(self._axis, rate)

    def solve(self, lam: float) -> tuple[State, RootResult | None] | None:
        """The steady state at arrival rate lam (per replica), None where lam is not stable
        (`stability.solve`)."""
        return solve(self.replica, self.boundary(), lam, state_of=self._state, idle=self.zero)

    @once
    def _zero(self) -> State:
        return self._state(0.0, None if self.has_decode else 0.0)

    def zero(self) -> State:
        """The idle limit (rate -> 0), kept once per engine."""
        return self._zero

    def zero_point(self) -> Point:
        """Metrics in the idle limit (the floors)."""
        return self.point(self.zero())

    @once
    def saturated(self) -> State:
        """The state at the stability boundary's end (decode roles), kept once per engine: the
        queue's stretch and service shape read it at every state, and the state cache may have
        dropped it."""
        return self._state(self.boundary().n_max, None)

    # ---- once per engine: the prefill queue's shape, the idle state's costs -------------------

    @once
    def service_shape(self) -> ServiceShape:
        """`prefill_queue.service_shape_at`, once per engine, at the stability boundary (decode
        roles; the queue's shape matters where it is long, near capacity, and the decodes there
        dilute the prompts' differences the least of any point where it is long); from the token
        counts alone without a prefill (no step to time them)."""
        at = None
        if self.has_prefill:
            at = self.saturated if self.has_decode else self._state(0.0, 0.0)
        return service_shape_at(self.replica, at=at, prefill_cv2=self.stats.prefill_cv2)

    @once
    def full_step_cv2(self) -> float:
        """`prefill_queue.full_step_cv2_at`, once per engine, at the stability boundary's end
        (colocated engines only, `Engine.steps`)."""
        return full_step_cv2_at(self.replica, self.saturated)

    @once
    def full_step_shape(self) -> FloatArray:
        """The backlog's full steps over their mean: `full_step_cv2`'s lognormal in the
        probability slices (scale 1: times the mean step, `lognormal_slice_list`'s own
        product), once per engine."""
        return np.array(lognormal_slice_list(math.sqrt(math.log1p(self.full_step_cv2))))

    @once
    def idle_token_cost_s(self) -> float:
        """`ttft.token_cost_s` of the idle state, once per engine."""
        return token_cost_s(self.zero())

    @once
    def idle_company_cap_s(self) -> float:
        """`ttft.company_cap_s` of the idle state, once per engine."""
        return company_cap_s(self.zero())

    # ---- a state's stages (`at_state.StateResults`), each computed once on demand --------------

    def point(self, s: State) -> Point:
        """TTFT, ITL and resource metrics at a steady state (`point.point_of`)."""
        return StateResults(self, s).point

    def steps(self, s: State) -> Steps:
        """What TTFT and ITL share at a state (`steps.step_mix`)."""
        return StateResults(self, s).steps

    def ttft_p99_s(self, s: State) -> float:
        """TTFT p99 at a state (the capacity search's exact read)."""
        return float(StateResults(self, s).ttft[0][1])

    def itl_p99_s(self, s: State) -> float:
        """ITL p99 at a state (`itl.itl_level`)."""
        return StateResults(self, s).itl_p99.itl_s

    def ttft_p99_at_most_s(self, s: State) -> float:
        """A bound TTFT p99 never exceeds at this state, without its quantiles (the capacity
        search skips TTFT's exact p99 where this bound already shows ITL is the nearer target).
        The exact p99 where it is already computed. Beyond the largest time that does not wait,
        only the queued prompts reach: with a chance q < 1% of queueing that time itself bounds
        p99 (read without the mixture); otherwise P(TTFT > v_q + y) <= q sum_k a_k e^{-y / m_max}
        (v_q the largest queued time), at most 1% at y = m_max ln(100 q sum_k a_k). Colocated
        engines (else inf)."""
        return StateResults(self, s).ttft_p99_at_most_s()

    def ttft_mixture(self, s: State) -> TtftMixture:
        """`ttft.ttft_mixture` at a colocated state."""
        return StateResults(self, s).ttft_mixture

    def delay(self, s: State) -> Delay:
        """D, the wait for the step under way and its company, at the state (`delay.delay_values`)."""
        return StateResults(self, s).delay[0]

    def delay_top_s(self, s: State) -> float:
        """D's largest value (`delay.delay_top_s`): what `ttft_p99_at_most_s` adds to the largest
        own service where few prompts queue."""
        return StateResults(self, s).delay_top_s

    def kv_full(self, s: State) -> KvFull:
        """`kv_full.kv_full_wait` at the state: colocated engines only."""
        return StateResults(self, s).kv_full

    def decode_variance(self, s: State) -> float:
        """Var n, the decode count's variance at the state (`decode_count.decode_count_variance`)."""
        return StateResults(self, s).decode_variance
