"""A closed loop of C clients (`vllm bench serve --max-concurrency C`) solved on top of the
open-loop latency model, by Little's law.

C clients with zero think time keep C requests in flight: a client's cycle is one request's time
in the system as the client sees it, W = front end + prefill-queue wait + time holding a seat. At
the rate lam the loop runs, lam x W(lam) = C. The open-loop model gives W(lam) at a rate from its
public figures (per replica: `queue_wait_mean_s` and, by Little's law inside the engine, `running_requests`
/ lam); the closed loop's rate is the root of lam x W(lam) - C, found by SciPy's Brent method
(solvers.rootfind). lam x W(lam) rises with lam and is unbounded only past the stable branch: if
C is more than the stable branch holds (W at 99.9% of the max stable rate), the loop is reported
saturated at that capacity rate.

With a rate cap R (`--request-rate R` beside `--max-concurrency C`), both limits apply: when R is
below the loop's rate, requests come due slower than clients free up and the deployment sees the
open-loop stream at R (its burstiness); otherwise the loop's rate holds.

The approximation: the open-loop model assumes arrivals as random as Poisson's at the loop's rate.
A closed loop is smoother (never more than C in flight, a new request exactly when one leaves),
so the model's queueing is an upper bound and its rate a lower bound on the loop's; the gap is
measured against the simulator's closed loop in tests/test_closed_loop.py and docs/simulate.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from planner.errors import InvalidInput
from planner.schema.inputs import MAX_SIMULATED_REQUESTS
from planner.workload import MIN_REQUESTS_PER_S, Arrivals, Workload
from solvers.rootfind import find_root

if TYPE_CHECKING:
    from planner.deployment import ResolvedDeployment
    from planner.latency import LatencyModel
    from planner.latency.model import Prediction
    from planner.simulate.metrics import SimResult
    from planner.simulate.requests import RequestArrays
    from planner.slo import Slo

# The stable branch's edge is approached this close (the model is unstable at the edge itself).
EDGE_FRACTION = 0.999
# The bracket's low end, as a fraction of the edge: lam x W there is ~1e-6 C, well below C >= 1.
LOW_FRACTION = 1e-6

LimitedBy = Literal["concurrency", "rate_cap", "capacity"]


@dataclass(frozen=True)
class ClosedLoopSolution:
    """The rate a closed loop of `concurrency` clients runs at (whole deployment), what limits it
    (the clients, the rate cap, or the deployment's stable capacity: `saturated`), the client's
    mean time in the system there and the requests in flight it implies (lam x W)."""

    concurrency: int
    rate_cap_requests_per_s: float | None
    requests_per_s: float
    limited_by: LimitedBy
    saturated: bool
    mean_time_in_system_s: float | None
    in_flight: float | None
    function_calls: int

    def to_dict(self) -> dict[str, Any]:
        w = self.mean_time_in_system_s
        return {
            "concurrency": self.concurrency,
            "rate_cap_requests_per_s": self.rate_cap_requests_per_s,
            "requests_per_s": self.requests_per_s,
            "limited_by": self.limited_by,
            "saturated": self.saturated,
            "mean_time_in_system_ms": None if w is None else w * 1e3,
            "in_flight": self.in_flight,
        }


def time_in_system_s(pred: Prediction, front_end_s: float) -> float | None:
    """A request's mean time in a colocated deployment as its client sees it, at the prediction's
    rate: the front end, the prefill-queue wait and the time holding a seat (running requests per
    replica over the per-replica rate, Little's law). None when the load is unstable."""
    if not pred.stable or pred.running_requests is None or pred.queue_wait_mean_s is None:
        return None
    lam_r = pred.requests_per_s_per_replica
    if not lam_r > 0:
        return None
    return front_end_s + pred.queue_wait_mean_s + pred.running_requests / lam_r


def solve(
    model: LatencyModel,
    concurrency: int,
    front_end_s: float,
    rate_cap_requests_per_s: float | None = None,
    cap_model: LatencyModel | None = None,
) -> ClosedLoopSolution:
    """The closed loop's rate on `model` (a colocated deployment, Poisson arrivals): the root of
    lam x W(lam) = C on the stable branch, capped by the deployment's capacity (saturated) and by
    the rate cap (W there from `cap_model`, the cap's own burstiness; default `model`)."""
    if model.deployment.disaggregated:
        raise InvalidInput(
            "workload.arrivals.concurrency",
            "a closed loop is evaluated for colocated deployments (simulate runs it disaggregated)",
        )
    edge = model.max_stable_requests_per_s() * EDGE_FRACTION
    calls = 0

    def w_at(lam: float) -> float | None:
        nonlocal calls
        calls += 1
        return time_in_system_s(model.evaluate(lam, per_bucket=False), front_end_s)

    def excess(lam: float) -> float:
        w = w_at(lam)
        return math.inf if w is None else lam * w - concurrency

    w_edge = w_at(edge)
    holds = edge * w_edge if w_edge is not None else 0.0
    cap = rate_cap_requests_per_s
    if holds <= concurrency:
        lam, limited, w = edge, "capacity", w_edge
    else:
        root = find_root(excess, edge * LOW_FRACTION, edge, f_hi=holds - concurrency)
        calls += root.function_calls
        if root.root is None:  # a bracket that straddles C cannot fail but for a NaN: say so
            raise InvalidInput("workload.arrivals.concurrency", f"no closed-loop rate found: {root.reason}")
        lam, limited, w = root.root, "concurrency", w_at(root.root)
    if cap is not None and cap < lam:
        calls += 1
        at_cap = (cap_model or model).evaluate(cap, per_bucket=False)
        lam, limited, w = cap, "rate_cap", time_in_system_s(at_cap, front_end_s)
    lim: LimitedBy = limited  # type: ignore[assignment]
    return ClosedLoopSolution(
        concurrency=concurrency,
        rate_cap_requests_per_s=cap,
        requests_per_s=lam,
        limited_by=lim,
        saturated=lim == "capacity",
        mean_time_in_system_s=w,
        in_flight=None if w is None else lam * w,
        function_calls=calls,
    )


# --- the use cases' glue (planner/api/) -----------------------------------------------------

# Requests a closed-loop simulation sends when the request names neither a count nor a horizon
# (as planner.api.simulating.DEFAULT_SIMULATED_REQUESTS for an open loop).
DEFAULT_CLOSED_LOOP_REQUESTS = 10_000


def _model(resolved: ResolvedDeployment, workload: Workload, rate: float, burstiness: float) -> LatencyModel:
    """The open-loop model of the workload's lengths at `rate` with gamma gaps of `burstiness`."""
    from planner.latency import LatencyModel, WorkloadStats

    arrivals = Arrivals(requests_per_s=max(rate, MIN_REQUESTS_PER_S), burstiness=burstiness)
    return LatencyModel(resolved, WorkloadStats.of(workload.model_copy(update={"arrivals": arrivals})))


def solve_workload(
    resolved: ResolvedDeployment, workload: Workload
) -> tuple[ClosedLoopSolution, LatencyModel]:
    """`solve` for a closed-loop workload (`arrivals.concurrency`, an optional rate cap): the
    solution, and the open-loop model at its rate (Poisson, or the cap's burstiness where the
    cap binds) that evaluate reports the latencies of."""
    a = workload.arrivals
    assert a.concurrency is not None
    cap = a.requests_per_s
    front_end_s = resolved.replica.profile.request_overhead_s
    poisson = _model(resolved, workload, cap or 1.0, 1.0)
    cap_model = None if cap is None else _model(resolved, workload, cap, a.burstiness)
    sol = solve(poisson, a.concurrency, front_end_s, cap, cap_model)
    if sol.limited_by == "rate_cap":
        assert cap_model is not None
        return sol, cap_model
    return sol, _model(resolved, workload, sol.requests_per_s, 1.0)


def simulate_workload(
    resolved: ResolvedDeployment,
    workload: Workload,
    seed: int,
    count: int | None,
    horizon_s: float | None,
    router: str,
    slo: Slo | None,
) -> tuple[SimResult, RequestArrays, int, dict[str, Any], dict[str, Any]]:
    """The closed loop simulated (planner/simulate/clients.py): `count` requests (default
    10,000) or those sent before `horizon_s`. Returns the result, the requests as sent, the
    outputs cut at max_model_len, the report's input summary and its closed-loop figures."""
    from planner.simulate.run import closed_loop_requests, run_closed_loop

    a = workload.arrivals
    assert a.concurrency is not None
    cap = a.requests_per_s
    if count is None and horizon_s is None:
        count = DEFAULT_CLOSED_LOOP_REQUESTS
    if horizon_s is not None and cap is not None and cap * horizon_s > MAX_SIMULATED_REQUESTS:
        raise InvalidInput(
            "horizon_s",
            f"about {cap * horizon_s:.3g} requests come due at {cap:.4g}/s over {horizon_s:.4g} s; "
            f"a simulation takes at most {MAX_SIMULATED_REQUESTS:,}",
        )
    stream = closed_loop_requests(workload, seed, count, horizon_s, most=MAX_SIMULATED_REQUESTS)
    try:
        result, sent, cut = run_closed_loop(
            resolved,
            stream,
            concurrency=a.concurrency,
            horizon_s=horizon_s,
            prefix_cache_hit_fraction=workload.prefix_cache_hit_fraction,
            router=router,
            slo=slo,
        )
    except InvalidInput as exc:
        if exc.field == "requests":  # a request longer than a replica's KV cache or context
            raise InvalidInput("workload", exc.reason) from None
        raise
    if len(sent) == 0:
        raise InvalidInput("horizon_s", f"no request comes due before {horizon_s:g} s at {cap:.4g}/s")
    if (
        horizon_s is not None
        and len(sent) == MAX_SIMULATED_REQUESTS
        and float(sent.arrival_s[-1]) < horizon_s
    ):
        raise InvalidInput(
            "horizon_s",
            f"the clients send more than {MAX_SIMULATED_REQUESTS:,} requests before {horizon_s:g} s, "
            "more than a simulation takes; give fewer requests or a shorter horizon",
        )
    source = {
        "source": "workload",
        "name": workload.name,
        "replay": None,
        "seed": seed,
        "mean_requests_per_s_target": cap,
        "burstiness": None if cap is None else a.burstiness,
        "trace_requests": None,
        "trace_duration_s": None,
    }
    e2el = result.e2el_s[np.isfinite(result.e2el_s)]
    w = float(np.mean(e2el)) if e2el.size else None
    rate = result.request_throughput_rps if math.isfinite(result.request_throughput_rps) else None
    loop = {
        "concurrency": a.concurrency,
        "rate_cap_requests_per_s": cap,
        "requests_per_s": rate,
        "mean_time_in_system_ms": None if w is None else w * 1e3,
        "in_flight": None if w is None or rate is None else rate * w,
    }
    return result, sent, cut, source, loop
