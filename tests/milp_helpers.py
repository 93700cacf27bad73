"""Shared by the MILP tests: the reference answer, the full model without reductions solved by
CBC (solvers.milp_solver's fallback), independent of HiGHS and of the reduced paths."""

from __future__ import annotations

from solvers import milp_solver
from solvers.milp import MilpData, MilpResult, solve


def cbc_reference(data: MilpData) -> MilpResult:
    solver = milp_solver.SOLVER
    milp_solver.SOLVER = "cbc"
    try:
        return solve(data, reduce=False)
    finally:
        milp_solver.SOLVER = solver
