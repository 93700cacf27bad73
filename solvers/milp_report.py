"""Which named constraints of the sizing model bind at a plan (solvers.milp's `binding`),
evaluated on the plan itself, per original bucket."""

from __future__ import annotations

from collections.abc import Collection

import numpy as np

from solvers.milp_data import MilpData
from solvers.milp_fastpath import COVER_RTOL
from solvers.milp_model import bucket_needs, layout, live_pairs, served, totals

__all__ = ["BINDING_RTOL", "FAMILIES", "binding"]

# A constraint is binding when its slack is within this fraction of max(1, |right-hand side|).
BINDING_RTOL = 1e-6

FAMILIES = (
    "demand",
    "colocated_demand",
    "prefill_demand",
    "decode_demand",
    "units",
    "inventory",
    "serve_min",
    "incompatible",
)


def binding(data: MilpData, xs: np.ndarray, rs: np.ndarray, chosen: Collection[int]) -> tuple[str, ...]:
    """Inequality rows (solvers.milp_model's docstring) with zero slack at the plan and a nonzero
    variable, evaluated on the original buckets with o = max(0, used - r) and, in the split form,
    the shares at their largest (s_col = colocated capacity, s_dis = the smaller pool's); sorted
    by family (FAMILIES order), key and bucket. In the split form, `demand_b{b}` binds when the
    bucket has no spare capacity at all, and then so do the coverage rows of the pools that hold
    it tight. `serve_min_{k}_b{b}` (mixed) binds where a deployment has exactly min_replicas;
    `incompatible_{i}_{j}` where one of the pair is in use (`chosen`). The big-M rows (serve_max,
    used, select) are bounds on x, not reported."""
    has_col, has_dis = layout(data.candidates)
    rhs = bucket_needs(data) * (1.0 - COVER_RTOL)
    tol = BINDING_RTOL * np.maximum(1.0, rhs)
    col, pre, dec = served(data, xs)
    found: list[tuple[int, str, int]] = []

    def mark(family: str, key: str, rows: np.ndarray) -> None:
        found.extend((FAMILIES.index(family), key, int(b)) for b in np.flatnonzero(rows))

    if has_col and has_dis:
        tight = (col + np.minimum(pre, dec) - rhs <= tol) & (rhs > 0)
        mark("demand", "", tight)
        mark("colocated_demand", "", tight & (col > 0))
        mark("prefill_demand", "", tight & (pre > 0) & (pre <= dec + tol))
        mark("decode_demand", "", tight & (dec > 0) & (dec <= pre + tol))
    elif has_col:
        mark("demand", "", (col - rhs <= tol) & (col > 0))
    else:
        mark("prefill_demand", "", (pre - rhs <= tol) & (pre > 0))
        mark("decode_demand", "", (dec - rhs <= tol) & (dec > 0))
    used, _, _ = totals(data, xs, rs)
    in_model = {c.resource for c in data.candidates}
    for t, res in enumerate(data.resources):
        if res.name not in in_model:
            continue
        held = np.maximum(used[t], rs[t])  # r + o
        mark("units", res.name, (used[t] >= rs[t]) & (held > 0))
        if res.inventory is not None:
            mark("inventory", res.name, (held >= res.inventory) & (held > 0))
    if not data.single_config and data.min_replicas > 1:
        for k, c in enumerate(data.candidates):
            mark("serve_min", c.id, (xs[k] == data.min_replicas) & (rhs > 0))
    for i, j in live_pairs(data):
        if i in chosen or j in chosen:
            found.append(
                (FAMILIES.index("incompatible"), f"{data.candidates[i].id}_{data.candidates[j].id}", -1)
            )
    names = []
    for family, key, b in sorted(found):
        parts = [FAMILIES[family], key] if key else [FAMILIES[family]]
        names.append("_".join([*parts, f"b{b}"] if b >= 0 else parts))
    return tuple(names)
