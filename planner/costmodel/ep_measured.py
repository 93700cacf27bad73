"""Expert parallelism priced from measured kernels where they exist: vLLM 0.24.0's fused-MoE layers
and DeepEP all-to-all timed on H100 SXM by NVIDIA aiconfigurator 0.12.0
(planner/costmodel/data/expert_parallel/<gpu>.json, derived by tools/ep_measured.py; its
`source` names the tables).

The roofline (planner.costmodel.expert_parallel) prices EP over TP at uniform routing as the same
bytes and FLOPs. The table gives, per expert shape (hidden, expert width, experts, top-k) and EP
size E_p measured, rho(T) = the time of one MoE layer at EP E_p over the same layer at TP E_p, for
T tokens entering the layer (27 counts, 1 to 16,384; linear in log T between them, the end values
beyond). A step of `tokens` on a rank of a D-rank EP group then pays, beside the roofline step,

    excess = (rho(D x tokens) - 1) x max(expert bytes read / BW, expert GEMM seconds)

the experts' own roofline time on the hottest GPU (its bytes read at `tokens`, and its share of
the expert GEMMs, skew included) scaled by the measured slowdown: below 1 where EP measured
faster. The layer's tokens are the D ranks' (each rank's MoE layer takes the whole group's tokens
for its experts; at D = 1 the rank's own).

The all-to-all (D > 1) measured for the GPU replaces the catalog's interconnect latency with
DeepEP's per-call floor (dispatch + combine per MoE layer) and divides its bandwidth by the
measured efficiency. Measured at EP 8 in one node, applied to every EP size within a node.

Applies where: EP is on, the weights are bf16 (the tables' dtype), the GPU has a table and, for
the layer ratio, the model's expert shape and EP size are in it; elsewhere the roofline as
before, bit for bit (`moe_term` and `all_to_all_measured` return None).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from planner.catalog.models import ModelSpec
from planner.costmodel.coefficients import EpMoeTerm

__all__ = ["EpMoeTerm", "MeasuredAllToAll", "all_to_all_measured", "moe_term", "table_note"]

_TABLE_GPUS = ("h100-sxm",)  # planner/costmodel/data/expert_parallel/<gpu>.json


@cache
def _table(gpu: str) -> dict[str, Any] | None:
    """The GPU's measured table (None: no table for it). Read once per process."""
    if gpu not in _TABLE_GPUS:
        return None
    text = (resources.files("planner.costmodel") / "data" / "expert_parallel" / f"{gpu}.json").read_text()
    data: dict[str, Any] = json.loads(text)
    return data


def _shape_row(table: dict[str, Any], model: ModelSpec, ep_size: int) -> dict[str, Any] | None:
    """The table's row for the model's expert shape (hidden, expert width, experts, top-k) at this
    EP size, or None."""
    want = (model.hidden_size, model.intermediate_size, model.num_experts, model.experts_per_token, ep_size)
    for row in table["moe_layers"]:
        key = ("hidden_size", "intermediate_size", "num_experts", "experts_per_token", "ep_size")
        if tuple(row[k] for k in key) == want:
            return row
    return None


def moe_term(
    model: ModelSpec, gpu: str, weight_dtype: str, ep_size: int, data_parallel_size: int, expert_share: float
) -> EpMoeTerm | None:
    """The measured layer term for this shape, EP size and GPU (None: not measured; the roofline)."""
    table = _table(gpu) if weight_dtype == "bf16" else None
    row = None if table is None else _shape_row(table, model, ep_size)
    if row is None:
        return None
    return EpMoeTerm(
        ep_size=ep_size,
        log_tokens=tuple(math.log(t) for t in row["tokens"]),
        ratios=tuple(float(r) for r in row["ep_over_tp"]),
        token_scale=float(data_parallel_size),
        expert_share=expert_share,
    )


@dataclass(frozen=True)
class MeasuredAllToAll:
    """DeepEP's measured all-to-all for a GPU: seconds per dispatch and per combine call at no
    load (the floor), and the achieved share of the catalog's interconnect bandwidth, (0, 1]."""

    dispatch_floor_s: float
    combine_floor_s: float
    bandwidth_efficiency: float


def all_to_all_measured(gpu: str) -> MeasuredAllToAll | None:
    """The GPU's measured all-to-all (None: no table; the catalog's latency and bandwidth)."""
    table = _table(gpu)
    if table is None:
        return None
    a = table["all_to_all"]
    return MeasuredAllToAll(
        dispatch_floor_s=float(a["floor_s_per_call"]["dispatch"]),
        combine_floor_s=float(a["floor_s_per_call"]["combine"]),
        bandwidth_efficiency=float(a["bandwidth_efficiency"]),
    )


def table_note(model: ModelSpec, gpu: str, weight_dtype: str, ep_size: int) -> str:
    """Which pricing an EP layout gets, for a plan's note: measured kernels or the roofline."""
    table = _table(gpu) if weight_dtype == "bf16" else None
    if table is not None and _shape_row(table, model, ep_size) is not None:
        return (
            f"MoE layers at EP {ep_size} priced from measured kernels (aiconfigurator 0.12.0, vLLM 0.24.0 "
            f"fused-MoE on {gpu}, EP over TP by token count)"
        )
    return f"MoE layers at EP {ep_size} priced by the roofline (no measured {gpu} {weight_dtype} kernels for this expert shape)"
