"""Everything a job needs, imported once: by the pool's forkserver, so workers fork warm (and
share these pages), and by the server for the calls it answers itself. Lazy imports inside the
domain (SciPy's optimizers, the MILP, the simulator) would otherwise cost each worker's first
request seconds."""

from __future__ import annotations

import pulp  # noqa: F401 - the MILP (solvers.milp)
import scipy.optimize  # noqa: F401 - root-finding and least squares

import planner.api
import planner.costmodel.calibrated
import planner.plan.run
import planner.simulate.run
import planner.traces  # noqa: F401
from planner.server import convert, jobs  # noqa: F401

convert.schema_mismatches()  # the conversion tables
