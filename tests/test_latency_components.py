"""The steady-state, stability and step-mix components (planner/latency/steady.py, stability.py,
steps.py, replica.py) through their functions and the front object: Little's fixed point at a
state, the boundary's margins, the step mix's probabilities and rates, and the invariants each
asserts at its boundary (rates finite and >= 0, probabilities in [0, 1], chunk shares of at least
one token, no division by a zero decode count or a company of no tokens)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from planner.costmodel.profile import THEORETICAL
from planner.deployment import Deployment
from planner.latency import LatencyModel, WorkloadStats
from planner.latency.engine import Engine
from planner.latency.replica import Replica, replica_of
from planner.latency.results import State
from planner.latency.stability import boundary, grid, slack_of
from planner.latency.stable_branch import solve
from planner.latency.steady import build_state, chunks, merge_weight
from planner.latency.steps import company_tokens, step_mix
from planner.workload import Workload

QWEN_H100 = {"model": "Qwen/Qwen3-8B", "gpu": "h100-sxm"}


def _workload(output: int = 101, burstiness: float = 1.0) -> Workload:
    return Workload.from_mapping(
        {
            "arrivals": {"requests_per_s": 1.0, "burstiness": burstiness},
            "input_tokens": {"pairs": [[300, 0.5], [1700, 0.5]]},
            "output_tokens": output,
        }
    )


def _engine(burstiness: float = 1.0) -> Engine:
    dep = Deployment(**QWEN_H100, max_num_batched_tokens=2048).resolve(THEORETICAL)
    return LatencyModel(dep, WorkloadStats.of(_workload(burstiness=burstiness))).engines["colocated"]


def _states(replica: Replica):  # type: ignore[no-untyped-def]
    def state_of(n: float, lam: float | None) -> State:
        return build_state(replica, decodes=n, rate_per_s=lam, unshared=False)

    return state_of


@pytest.mark.parametrize("burstiness", [0.25, 1.0, 4.0])
def test_the_solved_state_is_littles_fixed_point_inside_the_boundary(burstiness: float) -> None:
    """`stable_branch.solve` at half the max stable rate: the state runs that rate, n = lam d t_step
    (Little) with t_step = t_dec / (1 - busy), every margin positive; the boundary's end has a
    margin of at least 0 and a rate finite and >= 0."""
    r = _engine(burstiness).replica
    state_of = _states(r)
    b = boundary(r, state_of=state_of, unshared_state_of=state_of)
    assert math.isfinite(b.lam_max) and b.lam_max > 0.0
    assert slack_of(r, state_of(b.n_max, None)) >= 0.0
    solved = solve(r, b, 0.5 * b.lam_max, state_of=state_of, idle=lambda: state_of(0.0, None))
    assert solved is not None
    s = solved[0]
    assert s.lam == pytest.approx(0.5 * b.lam_max, rel=1e-8)
    assert s.t_step == pytest.approx(s.t_dec / (1.0 - s.busy), rel=1e-12)
    assert s.n == pytest.approx(s.lam * r.decode_steps * s.t_step, rel=1e-9)
    assert slack_of(r, s) > 0.0
    assert solve(r, b, b.lam_max, state_of=state_of, idle=lambda: state_of(0.0, None)) is None


def test_the_full_step_share_is_a_probability() -> None:
    """`steady.merge_weight` (GI/M/1's chance of waiting for gamma gaps) is in [0, 1] for any
    rho, and rho itself for Poisson arrivals inside (0, 1)."""
    for burstiness in (0.05, 1.0, 4.0):
        r = _engine(burstiness).replica
        for rho in np.linspace(-0.5, 1.5, 41).tolist():
            w = merge_weight(r, rho)
            assert 0.0 <= w <= 1.0
            if burstiness == 1.0 and 0.0 < rho < 1.0:
                assert w == pytest.approx(rho, rel=1e-9)


def test_a_state_needs_a_finite_non_negative_decode_count() -> None:
    r = _engine().replica
    for bad in (-1.0, math.nan, math.inf):
        with pytest.raises(AssertionError, match="decodes"):
            build_state(r, decodes=bad, rate_per_s=None, unshared=False)
    with pytest.raises(AssertionError, match="ns finite"):
        grid(r, np.array([1.0, -2.0]))


def test_chunks_are_at_least_one_token() -> None:
    """A share under one token would make steps of no prompt tokens (and a prompt of infinitely
    many chunks): refused."""
    r = _engine().replica
    assert chunks(r, 1.0).counts.tolist() == [300.0, 1700.0]
    with pytest.raises(AssertionError, match="chunk share"):
        chunks(r, 0.5)


def test_a_decode_pool_without_decodes_is_refused_not_divided_by_zero() -> None:
    """A decode pool's rate is n / (d t_dec): with one output token (d = 0) the component says
    so instead of a ZeroDivisionError."""
    eng = _engine()
    stats = WorkloadStats.of(_workload(output=1))
    r = replica_of(eng.replica.step_coefficients, stats, eng.config, "decode")
    assert not r.has_decode and r.decode_steps == 0.0
    with pytest.raises(AssertionError, match="decode pool decodes"):
        build_state(r, decodes=1.0, rate_per_s=None, unshared=False)


def test_the_replica_refuses_an_arrival_spread_that_is_not_a_number() -> None:
    eng = _engine()
    stats = dataclasses.replace(WorkloadStats.of(_workload()), arrival_cv2=math.nan)
    with pytest.raises(AssertionError, match="arrival CV"):
        replica_of(eng.replica.step_coefficients, stats, eng.config, "colocated")


@pytest.mark.parametrize("burstiness", [0.25, 1.0, 4.0])
def test_the_step_mix_holds_probabilities_and_rates_across_the_branch(burstiness: float) -> None:
    """`Engine.steps` (the step mix) from the idle limit to the boundary's end: the backlog, the
    company's P(any) and the mixed steps' share are probabilities, every step's rate >= 0 and
    time > 0, the step under way no shorter than nothing."""
    eng = _engine(burstiness)
    b = eng.boundary()
    for frac in (0.0, 0.1, 0.5, 0.9, 1.0):
        st = eng.steps(eng.state_at(frac * b.n_max))
        assert 0.0 <= st.backlog <= 1.0 and 0.0 <= st.pi <= 1.0 and 0.0 <= st.mixed_share <= 1.0
        assert bool((st.rates >= 0.0).all()) and bool((st.values > 0.0).all())
        assert st.step_lb >= 0.0 and st.step_lb_sq >= st.step_lb**2 * (1.0 - 1e-12)


def test_the_step_mix_is_for_states_with_decodes_and_prompts() -> None:
    """The idle state (no decodes) has no mix (`steps.no_mix`, through the front object); asked
    for one directly, the component says so rather than divide by the empty mix."""
    eng = _engine()
    idle = eng.state_at(0.0)
    assert eng.steps(idle).mixed_share == 0.0 and eng.steps(idle).values.size == 0
    with pytest.raises(AssertionError, match="decodes and prompts"):
        step_mix(eng.replica, idle, wait=eng.steps(idle).wait, service_kappa=1.0,
                 full_step_cv2=0.0, full_step_shape=np.ones(8))  # fmt: skip


def test_a_company_of_no_tokens_is_refused() -> None:
    """The company's lognormal divides by its mean tokens given any (x2 / x1^2): a zero mean,
    the ZeroDivisionError that once reached `plan`, is an assertion naming it."""
    r = _engine().replica
    values, probs = company_tokens(r, 1000.0, 2.0e6, None)
    assert sum(probs) == pytest.approx(1.0, rel=1e-12) and min(values) > 0.0
    with pytest.raises(AssertionError, match="company's mean tokens"):
        company_tokens(r, 0.0, 0.0, None)


def test_no_code_assigns_a_state_field_after_it_is_built() -> None:
    """`State` is immutable by contract, not `frozen=True` (results.py says why): no module of
    the package, nor any test, assigns one of its fields (`x.n = ...`, `x.lam += ...`,
    setattr); `build_state` sets them through the constructor only. `self.<field>` in other
    classes is theirs, not a state's."""
    import ast
    from pathlib import Path

    fields = {f.name for f in dataclasses.fields(State)}
    root = Path(__file__).resolve().parents[1]
    offending = []
    for path in sorted([*(root / "planner").rglob("*.py"), *(root / "tests").glob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = list(node.targets)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in {"setattr", "delattr"}
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
            ):
                if node.args[1].value in fields:
                    offending.append(f"{path.name}:{node.lineno}")
                continue
            for t in targets:
                for sub in ast.walk(t):
                    if (
                        isinstance(sub, ast.Attribute)
                        and sub.attr in fields
                        and not (isinstance(sub.value, ast.Name) and sub.value.id in {"self", "cls"})
                    ):
                        offending.append(f"{path.name}:{sub.lineno} .{sub.attr}")
    assert not offending, f"assignments to State fields after build: {offending}"
