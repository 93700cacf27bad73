"""The latency model's stages at one steady state: `StateResults`, one per state an engine built
(`Engine.results_at`), each stage a `once` (computed on first read) that calls one component with
explicit inputs (the replica, the state, other stages' results and the engine's own once-per-engine
results, `EngineInputs`) and returns that component's immutable result. A stage runs on demand,
once: the capacity search reads ITL p99 and a TTFT bound at most states and never builds the TTFT
mixture there (`ttft_p99_at_most_s`), `Engine.point` reads them all.

Adding a stage: a `once` here calling its component function, its inputs read from
other stages (never written from elsewhere), and a one-line `Engine` method where callers outside
the engine read it (docs/latency/engine.md)."""

from __future__ import annotations

import math
from functools import partial
from typing import Protocol

import numpy as np
import numpy.typing as npt

from planner.latency.decode_count import (
    CountFeedback,
    count_feedback,
    count_wanders,
    decode_company,
    decode_count_variance,
    decode_slope_s,
)
from planner.latency.delay import (
    NO_DELAY,
    Delay,
    chain_delay_weight,
    delay_chain,
    delay_classes,
    delay_top_s,
    delay_values,
)
from planner.latency.itl import TAIL_EPS, ItlLevel, itl_level, itl_worst_at
from planner.latency.kv_full import (
    KV_FULL_MIN,
    KvFull,
    kv_full_wait,
    kv_overflow_probability,
    kv_tokens_variance,
)
from planner.latency.once import once
from planner.latency.point import point_of
from planner.latency.prefill_queue import (
    PrefillDrag,
    prefill_drag,
    prefill_wait,
    stretch_applies,
    stretched_wait,
)
from planner.latency.queueing import NO_WAIT, Wait
from planner.latency.replica import Replica, decode_step_s, full_service_s
from planner.latency.results import DelayClasses, Point, ServiceShape, State, Steps, TtftMixture
from planner.latency.seats import SeatWait, seat_wait_at
from planner.latency.stability import load_of
from planner.latency.stats import WorkloadStats
from planner.latency.steps import no_mix, step_mix
from planner.latency.ttft import (
    full_time_s,
    own_ttft_s,
    prefill_pool_ttft,
    queued_share,
    ttft_mixture,
    ttft_p99_bound_s,
    ttft_quantiles,
)

FloatArray = npt.NDArray[np.float64]


class EngineInputs(Protocol):
    """What the stages read from their engine: its inputs and its once-per-engine results
    (`engine.Engine` provides them; computed on first use there)."""

    replica: Replica
    stats: WorkloadStats
    ttft_extra_s: FloatArray | None

    @property
    def service_shape(self) -> ServiceShape: ...
    @property
    def full_step_cv2(self) -> float: ...
    @property
    def full_step_shape(self) -> FloatArray: ...
    @property
    def saturated(self) -> State: ...
    @property
    def idle_token_cost_s(self) -> float: ...
    @property
    def idle_company_cap_s(self) -> float: ...


class StateResults:
    """The stages at `state` as `engine` computes them, each computed once, on first read, and
    kept in the state's own store (`State.stages`, this object's `__dict__`: a stage read once is
    a plain attribute read after, from any `StateResults` of the state). The engine makes one at
    each read (`Engine.results_at`); the state's results live exactly as long as the state (a
    caller holding a state across the engine's state cache being cleared still finds what was
    computed there, as `ttft_p99_at_most_s` must). This object holds the state and the engine;
    the store holds neither, so no reference cycle forms."""

    __slots__ = ("__dict__", "engine", "replica", "state")

    def __init__(self, engine: EngineInputs, state: State) -> None:
        self.engine = engine
        self.replica = engine.replica
        self.state = state
        self.__dict__ = state.stages

    def computed(self, stage: str) -> bool:
        """Whether `stage` has been computed (read) already: `ttft_p99_at_most_s` takes the exact
        p99 where it is there and skips the mixture where it is not."""
        return stage in self.__dict__

    # ---- the state's load and the decode count (`stability`, `prefill_queue`, `decode_count`) ----

    @once
    def load(self) -> tuple[float, float]:
        """Running requests and mean KV tokens in use (`stability.load_of`)."""
        return load_of(self.replica, self.state)

    @once
    def drag(self) -> PrefillDrag | None:
        """`prefill_queue.prefill_drag` against the stability boundary's end."""
        r, s, end = self.replica, self.state, self.engine.saturated
        return prefill_drag(
            decodes=s.n, mean_service_s=full_service_s(r, s),
            saturated_decodes=end.n, saturated_service_s=full_service_s(r, end),
        )  # fmt: skip

    @once
    def feedback(self) -> CountFeedback:
        """`decode_count.count_feedback`, the prefill drag read only where prompts and decodes
        share the engine."""
        r, s = self.replica, self.state
        drag = self.drag if r.has_prefill and r.has_decode else None
        return count_feedback(
            decodes=s.n, busy=s.busy, decode_step_s=s.t_dec, decode_slope_s=decode_slope_s(r, s),
            drag_per_decode=drag[0] if drag is not None else 0.0,
        )  # fmt: skip

    @once
    def decode_variance(self) -> float:
        """Var n (`decode_count.decode_count_variance` where the count wanders,
        `decode_count.count_wanders`, the feedback read only there; else 0): what the KV and seat
        waits, the prefill queue's stretch and ITL read."""
        s = self.state
        if not count_wanders(s.n, s.t_dec, s.busy):
            return 0.0
        return decode_count_variance(
            decodes=s.n, arrival_cv2=self.replica.arrival_cv2,
            decode_overlap=self.engine.stats.decode_overlap, feedback=self.feedback,
        )  # fmt: skip

    # ---- the prefill queue and the step mix (`prefill_queue`, `steps`) -------------------------

    @once
    def queue_wait(self) -> Wait:
        """The prefill queue's wait (`prefill_queue.prefill_wait`), stretched for the backlog's
        drain where it lasts (`prefill_queue.stretched_wait`): the drag towards the stability
        boundary and the decode count's variance and loop read only there."""
        r, s = self.replica, self.state
        service_s = full_service_s(r, s)
        colocated = r.has_decode and r.has_prefill
        wait = prefill_wait(
            utilization=s.rho, mean_service_s=service_s, arrival_cv2=r.arrival_cv2,
            shape=self.engine.service_shape, colocated=colocated,
        )  # fmt: skip
        if not (colocated and 0.0 < s.rho < 1.0 and stretch_applies(wait)):
            return wait
        drag = self.drag
        if drag is None:
            return wait
        return stretched_wait(
            wait=wait, utilization=s.rho, mean_service_s=service_s, arrival_cv2=r.arrival_cv2, drag=drag,
            lifetime_s=r.decode_steps * s.t_step, decodes=s.n, count_variance=self.decode_variance,
            count_loop=self.feedback.loop,
        )  # fmt: skip

    @once
    def steps(self) -> Steps:
        """What TTFT and ITL share (`steps.step_mix`; `steps.no_mix` without both prompts and
        decodes)."""
        r, s, e = self.replica, self.state, self.engine
        if not (r.has_decode and r.has_prefill) or s.n <= 0:
            return no_mix(self.queue_wait)
        return step_mix(
            r, s, wait=self.queue_wait, service_kappa=e.service_shape.kappa,
            full_step_cv2=e.full_step_cv2, full_step_shape=e.full_step_shape,
        )  # fmt: skip

    @once
    def full_time(self) -> FloatArray:
        """`ttft.full_time_s`: a prompt's steps topped up by a backlog."""
        return full_time_s(self.replica, self.state)

    # ---- the waits for KV blocks and sequence slots (`kv_full`, `seats`) ----------------------

    @once
    def kv_overflow(self) -> float:
        """`kv_full.kv_overflow_probability` (its variance from `kv_full.kv_tokens_variance`)."""
        r, s = self.replica, self.state
        kv_var = kv_tokens_variance(
            decodes=s.n, context_mean=r.decode_context_tokens,
            context_sq_mean=self.engine.stats.decode_context_sq, decode_count_variance=self.decode_variance,
        )  # fmt: skip
        return kv_overflow_probability(
            kv_tokens_mean=self.load[1], kv_tokens_var=kv_var, kv_capacity_tokens=r.kv_cache_tokens
        )

    @once
    def kv_full(self) -> KvFull:
        """`kv_full.kv_full_wait`: colocated engines only (a decode pool's arrivals are
        transfers, not prompts)."""
        r, s = self.replica, self.state
        f = self.kv_overflow if r.has_prefill and r.has_decode and s.n > 0.0 else 0.0
        return kv_full_wait(
            overflow_probability=f, kv_tokens_mean=self.load[1] if f >= KV_FULL_MIN else 0.0,
            kv_capacity_tokens=r.kv_cache_tokens, mean_step_s=s.t_step, kv_token_s=self.engine.stats.kv_token_s,
        )  # fmt: skip

    @once
    def seats(self) -> SeatWait:
        """`seats.seat_wait_at`: its running requests (where prompts arrive) and decode count
        variance (where decodes run)."""
        r, s = self.replica, self.state
        running = self.load[0] if r.has_prefill and s.lam > 0.0 else 0.0
        var = self.decode_variance if running > 0.0 and r.has_decode and s.n > 0.0 else None
        return seat_wait_at(r, s, running_requests=running, decode_count_variance=var)

    # ---- D and TTFT (`delay`, `ttft`) ---------------------------------------------------------

    @once
    def delay_classes(self) -> DelayClasses:
        """`delay.delay_classes`: the step under way as an unqueued prompt sees it."""
        return delay_classes(
            self.replica, self.state, self.steps, token_cost_s=self.engine.idle_token_cost_s
        )

    @once
    def delay(self) -> tuple[Delay, float | None]:
        """D (`delay.delay_values`; the classes read only where the engine is busy), the chain
        (`delay.delay_chain`) blended in where it takes part, and the share of prompts the chain
        pushes past their step (None without the chain; `ttft_mixture` reads it)."""
        r, s, st = self.replica, self.state, self.steps
        if st.busy <= 0:
            return NO_DELAY, None
        classes = self.delay_classes
        w_chain = chain_delay_weight(join_weight=s.join_weight, arrival_cv2=r.arrival_cv2)
        chain = delay_chain(r, s, st, idle_share=classes.idle_share) if w_chain > 0.0 else None
        delay = delay_values(
            r, classes=classes, chain=chain, chain_weight=w_chain, company_cap_s=self.engine.idle_company_cap_s
        )
        return delay, chain.pushed if chain is not None else None

    @once
    def delay_top_s(self) -> float:
        """D's largest value (`delay.delay_top_s`; the chain's points read where it takes part)."""
        r, st = self.replica, self.steps
        if st.busy <= 0:
            return 0.0
        if (
            st.chain is not None
            and chain_delay_weight(join_weight=self.state.join_weight, arrival_cv2=r.arrival_cv2) > 0.0
        ):
            return float(self.delay[0].values[-1])
        return delay_top_s(r, classes=self.delay_classes, company_cap_s=self.engine.idle_company_cap_s)

    @once
    def ttft_mixture(self) -> TtftMixture:
        """`ttft.ttft_mixture` at a colocated state: D, the queued share (the chain's pushed share
        blended in), and the topped-up steps only where prompts queue."""
        r, s, st = self.replica, self.state, self.steps
        delay, chain_push = self.delay
        w_chain = chain_delay_weight(join_weight=s.join_weight, arrival_cv2=r.arrival_cv2)
        q = queued_share(st, chain_push=chain_push, chain_weight=w_chain)
        return ttft_mixture(
            r, s, st, delay=delay, queued=q, own_s=own_ttft_s(s, ttft_extra_s=self.engine.ttft_extra_s),
            full_time=self.full_time if q > 0 else None, kv_full=self.kv_full, seat=self.seats,
        )  # fmt: skip

    @once
    def ttft(self) -> tuple[FloatArray, Wait]:
        """TTFT p50 and p99 and the prefill queue's wait it shows: a prefill pool's
        (`ttft.prefill_pool_ttft`), or the colocated mixture's quantiles (`ttft.ttft_quantiles`)."""
        r, s = self.replica, self.state
        if r.has_decode:
            return ttft_quantiles(self.ttft_mixture)
        wait = self.steps.wait
        full = self.full_time if s.rho > 0.0 else None
        ttft = prefill_pool_ttft(
            r, s, wait, full_time=full, ttft_extra_s=self.engine.ttft_extra_s, seat=self.seats
        )
        return ttft, wait

    def ttft_p99_at_most_s(self) -> float:
        """A bound TTFT p99 never exceeds (`Engine.ttft_p99_at_most_s`), read anew at each call:
        the exact p99 where it is already computed, else without the quantiles."""
        if "ttft" in self.__dict__:
            return float(self.ttft[0][1])
        if not self.replica.has_decode:
            return math.inf
        st = self.steps
        quiet = self.kv_full[0] == 0.0 and self.seats.probability == 0.0
        if "ttft_mixture" not in self.__dict__ and st.backlog < TAIL_EPS[-1] and quiet:
            # The largest own service after the largest delay: without the mixture's delays,
            # full steps and products (~85% of the bound's cost; the capacity search asks this
            # at most of its states once ITL is met).
            own = own_ttft_s(self.state, ttft_extra_s=self.engine.ttft_extra_s)
            return float(own.max()) + self.delay_top_s
        return ttft_p99_bound_s(self.ttft_mixture)

    # ---- ITL and the point (`itl`, `point`) ---------------------------------------------------

    @once
    def itl_p99(self) -> ItlLevel:
        """`itl.itl_level`, p99 (what the capacity search reads): the step mix's mixed steps and
        the decode-only steps with their company (`decode_count.decode_company`)."""
        r, s, st = self.replica, self.state, self.steps
        return itl_level(
            level_index=1, decode_step_s=s.t_dec, mixed_values=st.values, mixed_rates=st.rates,
            decode_others=decode_company(s.n, self.decode_variance), max_decodes=r.decode_cap,
            decode_step_of=partial(decode_step_s, r), mixed=None, all_steps=None, mixed_rates_sum=st.rates_sum,
        )  # fmt: skip

    @once
    def itl_p50(self) -> ItlLevel:
        """`itl.itl_level`, p50, reusing the quantile vectors p99 computed (the level each needs
        does not depend on which ran first)."""
        r, s, st, p99 = self.replica, self.state, self.steps, self.itl_p99
        return itl_level(
            level_index=0, decode_step_s=s.t_dec, mixed_values=st.values, mixed_rates=st.rates,
            decode_others=decode_company(s.n, self.decode_variance), max_decodes=r.decode_cap,
            decode_step_of=partial(decode_step_s, r), mixed=p99.mixed, all_steps=p99.all_steps,
            mixed_rates_sum=st.rates_sum,
        )  # fmt: skip

    @once
    def point(self) -> Point:
        """Every figure `evaluate` reports at the state (`point.point_of`)."""
        r, s = self.replica, self.state
        both, decode = r.has_decode and r.has_prefill, r.has_decode
        ttft, wait = self.ttft if r.has_prefill else (None, NO_WAIT)
        prompt_p99 = self.engine.stats.prompt_p99_tokens
        return point_of(
            r, s, ttft=ttft, wait=wait, load=self.load,
            itl=(self.itl_p50.itl_s, self.itl_p99.itl_s) if decode else None,
            itl_worst_s=itl_worst_at(r, s, prompt_p99_tokens=prompt_p99) if decode else None,
            preemption_risk=self.kv_overflow, seat=self.seats,
            mixed_share=self.steps.mixed_share if both else 0.0,  # the steps that carry prompt tokens
            kv_full_wait_s=self.kv_full[1],
        )  # fmt: skip
