"""The MILP solver adapter: HiGHS through PuLP (`pulp.HiGHS`, i.e. highspy, in this process), or
CBC (the binary PuLP ships, through `pulp.COIN_CMD`) when highspy cannot be imported. The only code
in the project that runs a MILP solver or reads a solver's status (`run`); the rest of
solvers.milp* hands it PuLP problems and reads back `Solved`.

Both solvers get the same PuLP problem: no model is translated by hand. Both run single-threaded
(HiGHS: threads = 1; CBC: its default serial search, see `_cbc`), so the same problem gives the
same answer, unless the clock stops the search (a time limit) first. Neither prints anything:
HiGHS's output is off from the moment each instance exists (`_QuietHighs`: the first Highs of a
process otherwise prints its banner on stdout, whatever `msg` says), CBC runs with msg off and its
log in a temporary file (read for its bound).

Status (`Solved.status`), from the solver's own report and its best bound, never from its word
alone: OPTIMAL only when the objective meets the bound within PROOF_ABS_USD + PROOF_REL x
|objective| (the solver's own absolute gap tolerance; a stop within a looser `gap_rel` is
FEASIBLE with its gap); FEASIBLE with a solution and the best bound the solver proved (None when
it has none: CBC without a bound in its log, HiGHS stopped before its root LP); INFEASIBLE when
proved infeasible; NO_SOLUTION when a limit (time, nodes) stopped the search before any solution.
An LP (mip=False) is OPTIMAL (objective = bound), INFEASIBLE or NO_SOLUTION (its time limit).
"""

from __future__ import annotations

import math
import os
import re
import tempfile
import time
from dataclasses import dataclass
from typing import Any

import pulp

try:  # the solver of choice; CBC when it is missing
    import highspy
except ImportError:  # pragma: no cover - the tests force the fallback through SOLVER
    highspy = None  # type: ignore[assignment]

__all__ = [
    "MIN_SOLVER_S",
    "PROOF_ABS_USD",
    "PROOF_REL",
    "SOLVER",
    "Solved",
    "log_bound",
    "proved",
    "read_status",
    "run",
]

# "highs" when highspy (and so PuLP's HiGHS adapter) is importable, else "cbc". Module state so
# that a test can force the fallback.
SOLVER = "highs" if highspy is not None and pulp.HiGHS().available() else "cbc"

# Every solver run gets at least this long, even when the time limit is used up (a run cut at
# once would say nothing).
MIN_SOLVER_S = 0.05

# An objective within this of the bound is proved optimal: HiGHS's mip_abs_gap (set explicitly
# below, its default) plus float noise on large bills.
PROOF_ABS_USD = 1e-6
PROOF_REL = 1e-9


@dataclass(frozen=True)
class Solved:
    """What a solver run proved, with the variables' values left in the PuLP problem (varValue)
    when there is a solution."""

    status: str  # OPTIMAL | FEASIBLE | INFEASIBLE | NO_SOLUTION
    objective: float | None
    bound: float | None  # no solution costs less; equal to objective when OPTIMAL
    timed_out: bool  # stopped by its time limit
    solver_s: float


def proved(objective: float, bound: float | None) -> bool:
    return bound is not None and objective - bound <= PROOF_ABS_USD + PROOF_REL * abs(objective)


def run(
    prob: pulp.LpProblem,
    seconds: float,
    *,
    gap_rel: float | None = None,
    mip: bool = True,
    warm: bool = False,
    max_nodes: int | None = None,
) -> Solved:
    """Solve `prob` (minimised) within `seconds` (at least MIN_SOLVER_S). `gap_rel`: the solver
    may stop at that relative gap (None: prove optimality). `warm`: the variables' values
    (setInitialValue) are handed over as a start. `max_nodes`: stop the branch and bound after
    that many nodes (a stop the same on any machine, unlike a time limit)."""
    seconds = max(float(seconds), MIN_SOLVER_S)
    if SOLVER == "highs":
        return _run_highs(prob, seconds, gap_rel, mip, warm, max_nodes)
    return _run_cbc(prob, seconds, gap_rel, mip, warm, max_nodes)


def _settle(objective: float, bound: float | None, timed_out: bool, solver_s: float) -> Solved:
    if bound is not None and proved(objective, bound):
        return Solved("OPTIMAL", objective, objective, timed_out, solver_s)
    return Solved("FEASIBLE", objective, bound, timed_out, solver_s)


# ---------------------------------------------------------------------------------------------
# HiGHS (highspy, in this process)

if highspy is not None:

    class _QuietHighs(highspy.Highs):
        """A highspy.Highs whose output is off before its callbacks are set: setting them logs
        HiGHS's banner on stdout once per process when output is still on."""

        def enableCallbacks(self) -> None:
            self.setOptionValue("output_flag", False)
            super().enableCallbacks()

    _PULP_READS = {  # the statuses PuLP 3.3's HiGHS adapter maps; it raises KeyError on others
        getattr(highspy.HighsModelStatus, name)
        for name in (
            "kNotset", "kLoadError", "kModelError", "kPresolveError", "kSolveError", "kPostsolveError",
            "kModelEmpty", "kOptimal", "kInfeasible", "kUnboundedOrInfeasible", "kUnbounded",
            "kObjectiveBound", "kObjectiveTarget", "kInterrupt", "kTimeLimit", "kIterationLimit", "kUnknown",
        )
    }  # fmt: skip

    class _PulpHighs(pulp.HiGHS):
        """PuLP's HiGHS adapter (its model build and solution read-back) on a quiet instance,
        with a start solution when asked, and every model status read (PuLP 3.3 has no entry
        for a node limit's kSolutionLimit)."""

        def __init__(self, *, warm: bool, **kw: Any) -> None:
            super().__init__(**kw)
            self.warm = warm

        def createAndConfigureSolver(self, lp: pulp.LpProblem) -> None:
            lp.solverModel = _QuietHighs()
            for key, value in self.optionsDict.items():
                lp.solverModel.setOptionValue(key, value)

        def callSolver(self, lp: pulp.LpProblem) -> None:
            if self.warm:
                start = [(v.index, float(v.varValue)) for v in lp.variables() if v.varValue is not None]
                if start:
                    index, value = zip(*start, strict=True)
                    lp.solverModel.setSolution(len(start), list(index), list(value))
            lp.solverModel.run()

        def findSolutionValues(self, lp: pulp.LpProblem) -> tuple[int, int]:
            if lp.solverModel.getModelStatus() not in _PULP_READS:
                values = list(lp.solverModel.getSolution().col_value)
                for var in lp.variables():
                    var.varValue = values[var.index] if values else None
                return pulp.LpStatusNotSolved, pulp.LpSolutionNoSolutionFound
            return super().findSolutionValues(lp)


def _run_highs(
    prob: pulp.LpProblem, seconds: float, gap_rel: float | None, mip: bool, warm: bool, max_nodes: int | None
) -> Solved:
    options: dict[str, Any] = {
        "output_flag": False,
        "threads": 1,
        "time_limit": seconds,
        "mip_rel_gap": float(gap_rel or 0.0),
        "mip_abs_gap": PROOF_ABS_USD,
    }
    if max_nodes is not None:
        options["mip_max_nodes"] = int(max_nodes)
    t0 = time.perf_counter()
    prob.solve(_PulpHighs(warm=warm and mip, mip=mip, msg=False, **options))
    solver_s = time.perf_counter() - t0
    h = prob.solverModel
    status = h.getModelStatus()
    info = h.getInfo()
    kind = highspy.HighsModelStatus
    limited = status in (kind.kTimeLimit, kind.kSolutionLimit, kind.kIterationLimit, kind.kInterrupt)
    if status in (kind.kInfeasible, kind.kUnboundedOrInfeasible):
        return Solved("INFEASIBLE", None, None, False, solver_s)
    has_solution = info.primal_solution_status == 2  # kSolutionStatusFeasible
    if not mip:
        if status == kind.kOptimal:
            value = float(info.objective_function_value)
            return Solved("OPTIMAL", value, value, False, solver_s)
        if limited:
            return Solved("NO_SOLUTION", None, None, status == kind.kTimeLimit, solver_s)
        raise RuntimeError(f"HiGHS ended the LP with {status.name}")
    if status == kind.kModelEmpty:  # no variables at all: nothing to pay
        return Solved("OPTIMAL", 0.0, 0.0, False, solver_s)
    if has_solution and (status == kind.kOptimal or limited):
        bound = float(info.mip_dual_bound)
        return _settle(
            float(info.objective_function_value),
            bound if math.isfinite(bound) else None,
            status == kind.kTimeLimit,
            solver_s,
        )
    if limited:
        return Solved("NO_SOLUTION", None, None, status == kind.kTimeLimit, solver_s)
    raise RuntimeError(f"HiGHS ended with {status.name}")


# ---------------------------------------------------------------------------------------------
# CBC (the fallback: a process per run, its log read for the bound)

_STOPPED_ON_TIME = re.compile(r"^Result - Stopped on time", re.MULTILINE)
_BEST_POSSIBLE = re.compile(r"best possible\s+([-+0-9.eE]+)")
_INTEGER_GAP = re.compile(r"integer gap of\s+([-+0-9.eE]+)")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$")


def log_bound(log: str, objective: float) -> float | None:
    """CBC's final best bound from its log, when the search did not prove optimality: a stop
    within the gap tolerance prints the absolute gap ("Exiting as integer gap of G"); a search cut
    short ends with "Partial search - best objective X (best possible B)". A search run to the end
    prints "Search completed" (its bound is the objective), and the "best possible" of its
    progress lines are not final: None then, and for a log without a final bound."""
    gap = _INTEGER_GAP.findall(log)
    if gap and _NUMBER.match(gap[-1]):
        return objective - float(gap[-1])
    partial = [line for line in log.splitlines() if "Partial search" in line]
    best = _BEST_POSSIBLE.findall(partial[-1]) if partial else []
    if best and _NUMBER.match(best[-1]):
        value = float(best[-1])
        return value if abs(value) < 1e49 else None  # CBC prints 1e+50 for "none yet"
    return None


def read_status(prob: pulp.LpProblem) -> str:
    """PuLP 3.3 reads CBC's solution file: "Optimal" -> (Optimal, Optimal); "Stopped on time -
    objective value" (a solution in hand) -> (Optimal, IntegerFeasible); "Stopped on time (no
    integer solution ...)" -> (Not Solved, No Solution Found); "Infeasible" / "Integer
    infeasible" -> Infeasible. A stop within the gap tolerance also reads (Optimal, Optimal):
    `_run_cbc` judges it by the bound in the log."""
    status, sol = prob.status, prob.sol_status
    if status == pulp.LpStatusOptimal and sol == pulp.LpSolutionOptimal:
        return "OPTIMAL"
    if status == pulp.LpStatusOptimal and sol == pulp.LpSolutionIntegerFeasible:
        return "FEASIBLE"
    if status == pulp.LpStatusInfeasible:
        return "INFEASIBLE"
    if status == pulp.LpStatusNotSolved:
        return "NO_SOLUTION"
    raise RuntimeError(f"CBC ended with {pulp.LpStatus.get(status)} / {pulp.LpSolution.get(sol)}")


def _cbc(
    seconds: float, gap_rel: float | None, mip: bool, log: str | None, warm: bool, max_nodes: int | None
) -> pulp.COIN_CMD:
    # COIN_CMD on the CBC binary PuLP ships (PULP_CBC_CMD itself is deprecated in PuLP 3.3).
    # No `threads`: CBC's default (0) is its serial, deterministic search. `-threads 1` turns on
    # its threaded code with one worker, and CBC 2.10.3 (the binary PuLP 3.3 ships) then now and
    # again waits 10 s for that worker on a problem solved in a millisecond.
    return pulp.COIN_CMD(
        path=pulp.PULP_CBC_CMD.pulp_cbc_path,
        mip=mip,
        msg=False,
        timeLimit=seconds,
        gapRel=gap_rel,
        logPath=log,
        warmStart=warm,
        maxNodes=max_nodes,
    )


def _run_cbc(
    prob: pulp.LpProblem, seconds: float, gap_rel: float | None, mip: bool, warm: bool, max_nodes: int | None
) -> Solved:
    fd, log_path = tempfile.mkstemp(prefix="capplan-cbc-", suffix=".log")
    os.close(fd)
    t0 = time.perf_counter()
    try:
        prob.solve(_cbc(seconds, gap_rel, mip, log_path, warm and mip, max_nodes))
        with open(log_path, encoding="utf-8", errors="replace") as f:
            log = f.read()
    finally:
        os.unlink(log_path)
    solver_s = time.perf_counter() - t0
    timed_out = bool(_STOPPED_ON_TIME.search(log))
    if not mip:
        if prob.status == pulp.LpStatusOptimal:
            value = float(pulp.value(prob.objective) or 0.0)
            return Solved("OPTIMAL", value, value, False, solver_s)
        if prob.status == pulp.LpStatusInfeasible:
            return Solved("INFEASIBLE", None, None, False, solver_s)
        return Solved("NO_SOLUTION", None, None, timed_out, solver_s)
    status = read_status(prob)
    if status in ("INFEASIBLE", "NO_SOLUTION"):
        return Solved(status, None, None, timed_out, solver_s)
    objective = float(pulp.value(prob.objective) or 0.0)
    bound = log_bound(log, objective)
    if status == "OPTIMAL" and bound is None:  # searched to the end (gap tolerance 0: PuLP's default)
        bound = objective
    return _settle(objective, bound, timed_out, solver_s)
