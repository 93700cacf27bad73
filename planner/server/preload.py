"""Everything a job needs, imported once: by the pool's forkserver, so workers fork warm (and
share these pages), and by the server for the calls it answers itself. Lazy imports inside the
domain (SciPy's optimizers, the MILP, the simulator) would otherwise cost each worker's first
request seconds."""

from __future__ import annotations

import pulp  # noqa: F401 - the MILP (solvers.milp)
import scipy.optimize  # noqa: F401 - root-finding and least squares

import planner.api
from planner.server import convert, jobs  # noqa: F401

planner.api.load_domain()  # the planner, the simulator, the cost model: the API names them
convert.schema_mismatches()  # the conversion tables
