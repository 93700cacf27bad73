"""The latency model's result types: what each stage of an engine's evaluation returns (a
state, the step mix TTFT and ITL share, TTFT's mixture, the prefill queue's service shape, the
stability scan's grid and boundary, the metrics at one point), and the roles and stability
limits they are keyed by."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from planner.latency.company import Sums
from planner.latency.queueing import Phases, Wait, WaitDecayTable
from planner.schema.kinds import StabilityLimit
from solvers.rootfind import RootResult

FloatArray = npt.NDArray[np.float64]


class CountFeedback(NamedTuple):
    """How the decode count answers its own excess at one state."""

    keep: float  # 1 - busy: the share of an excess that is not held by prompts arriving meanwhile
    loop: float  # the lifetime window's loop, 1 - e + e_q / keep, at least decode_count.DECODE_GAIN_FLOOR


class ServiceShape(NamedTuple):
    """The prefill queue's service per prompt (`Engine.service_shape`): c_s^2, kappa =
    E[X] E[X^3] / E[X^2]^2, X / E[X] over the prompt support, and the wait's tail decay for it
    (`queueing.wait_decay_s` as a table; None where kappa > 3/2: the wait is then more spread
    than an exponential at every load and its exact tail is never read, `queueing.wait_spread`)."""

    cv2: float
    kappa: float
    xi: FloatArray
    decay: WaitDecayTable | None


class PrefillDrag(NamedTuple):
    """How a prompt's service in the prefill queue grows with the decodes beside it,
    q e^{per_decode x} for x more decodes (`prefill_queue.prefill_drag`: the chord to the
    stability boundary), and the decodes left to that boundary (`room`)."""

    per_decode: float
    room: float


class Grid(NamedTuple):
    """The engine at a vector of concurrencies (the stability scan): rates and margins."""

    n: FloatArray
    lam: FloatArray
    slack: FloatArray


class DelayClass(NamedTuple):
    """A class of the step under way, as `delay.delay_values` reads it."""

    sigma: float | None  # U L's log-sd (None: the decode-only class, U t_dec, a uniform's)
    scale: float  # E[U L]
    share: float
    pi: float  # P(company)
    x_sigma: float  # the company's cost given any: log-sd and mean (0 without company)
    x_scale: float
    x_atoms: tuple[list[float], list[float]] | None = None  # or as whole prompts: (costs, probabilities)


class DelayClasses(NamedTuple):
    """The step under way as a prompt not queued beyond the next step sees it (`delay.delay_classes`)."""

    idle_share: float  # P(no step under way)
    classes: list[DelayClass]


class TtftMixture(NamedTuple):
    """TTFT's distribution at a state (Engine.ttft_mixture): service times and probabilities,
    the first `unqueued` not waiting, the rest (probability `queued`) waiting `phases`."""

    values: FloatArray
    probs: FloatArray
    phases: Phases
    waiting: FloatArray | None
    unqueued: int
    queued: float
    shown: Wait


@dataclass(eq=False, slots=True)
class State:
    """The engine at one concurrency n (decode roles) or one rate lam (prefill-only): what
    `steady.build_state` computes, nothing more. Compared by identity. `stages` is where the
    state's stages keep what they computed (`at_state.StateResults`, each written once, by its
    stage): the store lives exactly as long as the state and holds only the stages' immutable
    results, never a state or an engine, so no reference cycle forms.

    Immutable by contract: `steady.build_state` sets every field and nothing assigns one after
    (tests/test_latency_components.py holds the package to it). Not `frozen=True`: a frozen
    dataclass sets each field through object.__setattr__, which made building a state (~17 a
    candidate) 1.5-2 us dearer."""

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
    mean_chunks: float
    chunk_tokens: FloatArray  # (I, G+1) representatives of each prompt's chunks
    chunk_offset: FloatArray
    chunk_weight: FloatArray  # chunks each representative stands for
    chunk_time: FloatArray  # (I, G+1) step time of each representative chunk (n_arr decodes)
    own_service: FloatArray  # (I,) a prompt's prefill steps when alone
    join_weight: float = 0.0  # how far whole prompts share steps (`steady.shared_rate`; 0: they do not)
    join_cost: float = 0.0  # a further whole prompt's time in a step with one (Jc)
    joined: float = 0.0  # the share of prompts that join a step another opened (j)
    stages: dict[str, object] = field(default_factory=dict, init=False, repr=False, compare=False)


class Steps(NamedTuple):
    """Per state, what TTFT and ITL share (`steps.step_mix`, `StateResults.steps`)."""

    wait: Wait  # the prefill queue (GI/G/1)
    backlog: float  # P(more prompt tokens wait than the next step takes)
    residual: float  # mean wait for the step under way
    step_lb: float  # mean length of the step under way (length-biased)
    step_lb_sq: float  # its second moment
    m: float  # prompts admitted with an arriving one, as it sees them
    pi: float  # P(any)
    zf: float  # m / (lam L): burst factor of the company count (`arrivals.company_count`)
    values: FloatArray  # the steps a decoder sees besides decode-only ones: times
    rates: FloatArray  # and their shares of all steps
    busy: float  # P(a step is under way when a prompt arrives)
    sums: Sums  # of the mixed steps (`values`, `rates`)
    beyond: tuple[tuple[float, float], ...]  # the wait beyond the next step, given one
    backlog_rate: float  # the backlog's full steps in `sums`: their rate (`sums`' units)
    full_step_s: float  # and their length
    mixed_share: float  # the share of a decoder's steps that carry prompt tokens: `rates`' sum, at most 1
    rates_sum: float  # `rates`' sum itself (ITL's quantiles read it at both levels)
    chain: tuple[FloatArray, FloatArray] | None = None  # alike prompts: the chain's step lengths and pi


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
    kv_full_wait_s: float = 0.0  # mean wait of an arrival that finds the KV cache full (`kv_full`)
    seat_wait_probability: float = 0.0  # P(an arrival finds every seat taken) (`seats.seat_wait_at`)
    seat_wait_s: float = 0.0  # and its mean wait for one, given that
