"""The prefill queue and its wait (docs/latency/prefill-queue.md): prompts wait for the budget as a GI/G/1 queue served at the full-step
rate, a full step being the FIFO stream of waiting prompts.

* The service's shape (`service_shape`): a prompt's service is Pe / s full steps of a stream of
  prompts like it (attention and prefix re-read grow with Pe, so service grows faster than Pe).
* The backlog's full steps' spread (`full_step_cv2`): which prompts' chunks a full step carries,
  and how deep into them.
* The wait (`prefill_wait`: GI/G/1 with the tail's exact decay), stretched for the decodes a
  backlog accumulates (`stretched_wait`, `prefill_drag`) and spread over the decode count's
  wandering (`wait_environment`).

Pure functions of named inputs returning immutable results; the `*_at` functions gather their
inputs (the step times, which need the step-cost coefficients) from a replica and its states,
which the engine keeps."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from planner.costmodel.steptime import batch_time_s
from planner.latency.invariants import check_positive, check_probability, check_rate
from planner.latency.queueing import Wait, WaitDecayTable, gg1_wait, wait_spread
from planner.latency.replica import Replica
from planner.latency.results import PrefillDrag, ServiceShape, State

FloatArray = npt.NDArray[np.float64]

# The backlog's drain stretch is sized at the wait's p99: P(wait > V) = TAIL_LEVEL (a modelling
# choice: the stretch matters where TTFT p99 is read; docs/latency/prefill-queue.md).
TAIL_LEVEL = 0.01
# Fixed-point passes of the stretch (a bound on the loop: it converges in a few).
STRETCH_PASSES = 30
# The stretch's fixed point stops within this relative change (a tolerance).
STRETCH_TOLERANCE = 1e-9
# The stretched drift never falls below this share of 1 - rho (a tolerance keeping the stretch
# finite where the chord to the boundary would cancel the drift; the boundary binds first).
STRETCH_DRIFT_FLOOR = 0.05
# The wait is at most as spread as a gamma of this shape ratio for its exact decay to be read
# (`queueing.wait_spread`: r <= 2, `wait_beyond`'s gamma form).
GAMMA_SPREAD_MAX = 2.0
# kappa = E[X]E[X^3]/E[X^2]^2 at or below which a wait can be less spread than an exponential,
# so the decay table is built (`queueing.wait_spread`; an exponential service has 3/2).
KAPPA_EXPONENTIAL = 1.5
# Chunk offsets per long prompt for the full steps' spread (`full_step_cv2`; 4 moved the grid's
# ITL p99 within 0.1% of 16).
FULL_STEP_OFFSETS = 4
# Below this A / tau the count's mean over the busy period is the count itself (series limit).
PERSIST_SERIES_MIN = 1e-9


def shape_of(
    *, cv2: float, kappa: float, service_over_mean: FloatArray, arrival_cv2: float,
    prompt_probs: FloatArray, colocated: bool,
) -> ServiceShape:  # fmt: skip
    """A `ServiceShape`, its decay table only where a wait can be less spread than an
    exponential (kappa <= 3/2) and the step mix reads it (colocated engines)."""
    check_rate("service cv2", cv2)
    light = kappa <= KAPPA_EXPONENTIAL and colocated
    decay = WaitDecayTable.build(arrival_cv2, service_over_mean, prompt_probs) if light else None
    return ServiceShape(cv2, kappa, service_over_mean, decay)


def own_stream_context(
    *, prompt_tokens: FloatArray, cached_tokens: FloatArray, full_share_tokens: float
) -> tuple[FloatArray, FloatArray]:
    """Per prompt of the support, a full step of a stream made of prompts like it
    (`steady.stream_step_s` with the prompt's own numbers): attention context p0 + Pe/2 per
    token and prefix re-read p0 + Pe/2 + s_f p0/Pe."""
    attention = cached_tokens + 0.5 * prompt_tokens
    return attention, attention + full_share_tokens * cached_tokens / prompt_tokens


def service_shape(
    *, prompt_tokens: FloatArray, prompt_probs: FloatArray, full_step_s: FloatArray,
    arrival_cv2: float, colocated: bool,
) -> ServiceShape | None:  # fmt: skip
    """The prefill queue's service X_i per prompt of the support, c_s^2 = Var X / E[X]^2 and
    kappa = E[X] E[X^3] / E[X^2]^2 (for `gg1_wait` and `wait_beyond`): a prompt of Pe tokens
    takes Pe / s full steps of a stream made of prompts like it (`full_step_s`, timed at
    `own_stream_context`), so X grows faster than Pe: attention and the calibrated prefix
    re-read are quadratic in it. With the H200's profile a 8,000-token prompt's re-read nearly
    doubles its service; the shape from Pe alone (the token counts' spread) understated the
    queue's tail by up to 18%. None where an empty step times 0: no service to shape."""
    service = prompt_tokens * full_step_s
    m1 = float(prompt_probs @ service)
    service_sq = service * service
    m2 = float(prompt_probs @ service_sq)
    m3 = float(prompt_probs @ (service_sq * service))
    if not m1 > 0.0:
        return None
    return shape_of(
        cv2=max(m2 / (m1 * m1) - 1.0, 0.0), kappa=m1 * m3 / (m2 * m2), service_over_mean=service / m1,
        arrival_cv2=arrival_cv2, prompt_probs=prompt_probs, colocated=colocated,
    )  # fmt: skip


def full_step_context(
    *, prompt_tokens: FloatArray, cached_tokens: FloatArray, full_share_tokens: float
) -> tuple[FloatArray, FloatArray]:
    """(attention, prefix), prompts x FULL_STEP_OFFSETS: the context of a backlog's full step at
    each prompt and chunk offset, uniform over a prompt longer than the budget (p0 + offset +
    s_f / 2, prefix p0 + offset), a prompt within it at its own stream's (`own_stream_context`)."""
    pe = prompt_tokens[:, None]
    p0 = cached_tokens[:, None]
    over = np.maximum(pe - full_share_tokens, 0.0)
    offset = over * ((np.arange(FULL_STEP_OFFSETS) + 0.5) / FULL_STEP_OFFSETS)[None, :]
    long = pe > full_share_tokens
    own_attention, own_prefix = own_stream_context(
        prompt_tokens=prompt_tokens, cached_tokens=cached_tokens, full_share_tokens=full_share_tokens
    )
    attention = np.where(long, p0 + offset + 0.5 * full_share_tokens, own_attention[:, None])
    prefix = np.where(long, p0 + offset, own_prefix[:, None])
    return attention, prefix


def full_step_cv2(
    *, full_step_s: FloatArray, prompt_tokens: FloatArray, prompt_probs: FloatArray,
    full_share_tokens: float, token_mean_prompt_tokens: float,
) -> float:  # fmt: skip
    """The spread of a backlog's full steps, Var T / E[T]^2, over the prompt support and
    FULL_STEP_OFFSETS chunk offsets (`full_step_context`, timed: `full_step_s`), token-weighted;
    a step carrying k = s_f / E_tok[Pe] prompts averages them: / max(1, k). Without it every
    full step was the stream's average one, so near capacity ITL p99 read up to 7% low on the
    accuracy grid (H200, budget 512, 90%)."""
    weights = np.repeat((prompt_probs * prompt_tokens)[:, None], FULL_STEP_OFFSETS, axis=1)
    weights /= float(weights.sum())
    mean = float(np.add.reduce(weights * full_step_s, axis=None))
    if not mean > 0.0:
        return 0.0
    cv2 = float(np.add.reduce(weights * (full_step_s / mean - 1.0) ** 2, axis=None))
    per_step = full_share_tokens / check_positive("token_mean_prompt_tokens", token_mean_prompt_tokens)
    return cv2 / max(1.0, per_step)


def prefill_wait(
    *, utilization: float, mean_service_s: float, arrival_cv2: float, shape: ServiceShape, colocated: bool
) -> Wait:
    """GI/G/1 at the full-step rate (`gg1_wait`), with the tail's exact decay (`shape.decay`)
    where the wait is at most a gamma's spread and the engine is colocated."""
    wait = gg1_wait(utilization, mean_service_s, arrival_cv2, shape.cv2)
    if not colocated or not 0.0 < utilization < 1.0:
        return wait
    if shape.decay is not None and wait_spread(wait.prob, shape.kappa) <= GAMMA_SPREAD_MAX:
        wait = Wait(wait.prob, wait.mean_if_waiting_s, shape.decay.scale_s(utilization, mean_service_s))
    return wait


def stretch_applies(wait: Wait) -> bool:
    """Whether a backlog lasts long enough to stretch (the wait's p99 waits: P(wait) above
    TAIL_LEVEL, a finite positive mean)."""
    return wait.prob > TAIL_LEVEL and 0.0 < wait.mean_if_waiting_s < math.inf


def prefill_drag(
    *, decodes: float, mean_service_s: float, saturated_decodes: float, saturated_service_s: float
) -> PrefillDrag | None:
    """How a prompt's service grows with the decodes beside it: the chord q e^{beta x} to the
    stability boundary (q_sat at n_sat = n + room: each decode takes a token of the budget and
    adds its KV read to the full step); None where the boundary is not above the state."""
    room = saturated_decodes - decodes
    if room > 0.0 and saturated_service_s > mean_service_s > 0.0:
        return PrefillDrag(math.log(saturated_service_s / mean_service_s) / room, room)  # (per_decode, room)
    return None


def stretched_wait(
    *, wait: Wait, utilization: float, mean_service_s: float, arrival_cv2: float,
    drag: PrefillDrag, lifetime_s: float, decodes: float, count_variance: float, count_loop: float,
) -> Wait:  # fmt: skip
    """The wait stretched for the backlog's drain. While prompts queue, the engine prefills 1/q
    of them per second, more than arrive, so decodes accumulate, g = (1 - rho) / q per second of
    backlog; each adds to the step (`drag`). A prompt that finds V seconds of work sits in a
    busy period that took about V max(1, c_a^2) / (1 - rho) to build (heavy traffic: the climb
    is the reversed descent; the c_a^2 factor a reading, docs/latency/prefill-queue.md), over which x(V) =
    g T_d (1 - exp(-age / T_d)) decodes joined (T_d the lifetime; at most `room`). So the queue
    builds faster at level u (drift 1 - rho e^{beta x(u)}) and the prompt's own wait stretches
    by e^{beta x(V)}. Both are sized at the wait's p99 (TAIL_LEVEL; the drift averaged over
    [0, V] by Simpson's rule, a bounded fixed point) and scale the wait's mean and tail alike:
    an exponential stays an exponential. The wait is then a scale mixture over the decode
    count's wandering (`wait_environment`). Unchanged where the lifetime is not finite > 0."""
    rho = utilization
    check_probability("utilization", rho)
    check_positive("mean_service_s", mean_service_s)
    if not 0.0 < lifetime_s < math.inf:
        return wait
    beta, room = drag
    mean = wait.mean_if_waiting_s
    joined = (1.0 - rho) / mean_service_s * lifetime_s  # g T_d: decodes a backlog adds at most
    builds_per_s = max(arrival_cv2, 1.0) / ((1.0 - rho) * lifetime_s)
    v0 = mean * math.log(wait.prob / TAIL_LEVEL)  # the p99 wait at the state's rate
    floor = STRETCH_DRIFT_FLOOR * (1.0 - rho)
    v = v0
    for _ in range(STRETCH_PASSES):  # increasing map, bounded by rho_sat = rho q_sat / q < 1
        x_mid = min(room, -joined * math.expm1(-0.5 * v * builds_per_s))
        x_end = min(room, -joined * math.expm1(-v * builds_per_s))
        # mean drift over [0, v] by Simpson's rule (x(0) = 0)
        drift = 1.0 - rho * (1.0 + 4.0 * math.exp(beta * x_mid) + math.exp(beta * x_end)) / 6.0
        v_next = v0 * (1.0 - rho) / max(drift, floor)
        done = abs(v_next - v) <= STRETCH_TOLERANCE * v
        v = v_next
        if done:
            break
    x_end = min(room, -joined * math.expm1(-v * builds_per_s))
    stretch = v * math.exp(beta * x_end) / v0
    env = wait_environment(
        utilization=rho, drag=drag, age_s=v * builds_per_s * lifetime_s, lifetime_s=lifetime_s,
        decodes=decodes, count_variance=count_variance, count_loop=count_loop,
    )  # fmt: skip
    return Wait(wait.prob, mean * stretch, wait.tail_s * stretch, env)


def wait_environment(
    *, utilization: float, drag: PrefillDrag, age_s: float, lifetime_s: float, decodes: float,
    count_variance: float, count_loop: float,
) -> tuple[tuple[float, float], ...]:  # fmt: skip
    """The queue's wait as a scale mixture over the decode count's wandering (`Wait.env`): a
    count y above its mean slows prefill to rho e^{beta y}, and a queue built at that rate waits
    (1 - rho) / (1 - rho e^{beta y}) times as long (heavy traffic). What persists over the busy
    period's age A is the variance of the count's mean over A, Var n (2 tau / A)(1 - (tau / A)
    (1 - e^{-A / tau})) (an exponential autocorrelation of integral time tau = (T_d / 2) /
    `count_loop`: a decode's lifetime as a window, slowed by the count's loop). Two
    Gauss-Hermite points of that normal (1/2 at +-1 sd; three points move the grid's TTFT p99 by
    under 1% for half again as many phases), scaled to mean one."""
    rho = utilization
    if not (count_variance > 0.0 and age_s > 0.0 and 0.0 < rho < 1.0 and lifetime_s > 0.0):
        return ()
    beta, room = drag
    x = age_s * count_loop / (0.5 * lifetime_s)  # A / tau
    persist = 2.0 / x * (1.0 - -math.expm1(-x) / x) if x > PERSIST_SERIES_MIN else 1.0
    sd = math.sqrt(count_variance * persist)
    up = (1.0 - rho) / (1.0 - rho * math.exp(beta * min(sd, room)))  # the nodes at +-1 sd
    down = (1.0 - rho) / (1.0 - rho * math.exp(-beta * min(sd, decodes)))
    mean = 0.5 * (up + down)
    return ((0.5, up / mean), (0.5, down / mean))


def service_shape_at(replica: Replica, *, at: State | None, prefill_cv2: float) -> ServiceShape:
    """`service_shape` with its full step timed at the state `at` (the stability boundary's end
    for decode roles, the idle state for a prefill pool; None without a prefill): from the
    token counts alone (`shape_of`, `prefill_cv2` the prompts' spread) where there is no step to
    time them."""
    colocated = replica.has_decode and replica.has_prefill
    shape = None
    if at is not None:
        s_f = max(at.share_full, 1.0)
        attention, prefix = own_stream_context(
            prompt_tokens=replica.prefill_tokens, cached_tokens=replica.cached_tokens, full_share_tokens=s_f
        )
        step_s = batch_time_s(
            replica.step_coefficients, at.n_arr, at.n_arr * replica.decode_context_tokens, s_f, s_f * attention, prefix + s_f, prefix
        )
        shape = service_shape(
            prompt_tokens=replica.prefill_tokens, prompt_probs=replica.prompt_probs, full_step_s=step_s,
            arrival_cv2=replica.arrival_cv2, colocated=replica.has_decode,
        )  # fmt: skip
    return shape or shape_of(
        cv2=prefill_cv2, kappa=replica.prefill_kappa, service_over_mean=replica.prefill_tokens / replica.mean_prefill_tokens,
        arrival_cv2=replica.arrival_cv2, prompt_probs=replica.prompt_probs, colocated=colocated,
    )  # fmt: skip


def full_step_cv2_at(replica: Replica, end: State) -> float:
    """`full_step_cv2`, each full step a stream step at the state `end` (the stability
    boundary's end)."""
    s_f = max(end.share_full, 1.0)
    attention, prefix = full_step_context(
        prompt_tokens=replica.prefill_tokens, cached_tokens=replica.cached_tokens, full_share_tokens=s_f
    )
    step_s = batch_time_s(
        replica.step_coefficients, end.n_arr, end.n_arr * replica.decode_context_tokens, s_f, s_f * attention, prefix + s_f, prefix
    )
    return full_step_cv2(
        full_step_s=step_s, prompt_tokens=replica.prefill_tokens, prompt_probs=replica.prompt_probs,
        full_share_tokens=s_f, token_mean_prompt_tokens=replica.token_mean_prefill_tokens,
    )  # fmt: skip
