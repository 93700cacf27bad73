"""Predicting measured step times with the planner's own step-time formula, for the fit
(planner/costmodel/fitting.py): every row of a measurements file as an observation, all of them
in one array call per profile, and the checks that the rows are of the model and GPU fitted."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from planner.catalog.gpus import GpuSpec
from planner.catalog.models import ModelSpec
from planner.costmodel.fit_data import Measurements, StepRow
from planner.costmodel.profile import Profile
from planner.costmodel.roofline import Replica, chunks
from planner.costmodel.steptime import (
    linear_layers_coefficients,
    step_coefficients,
    step_time_s,
)
from planner.errors import InvalidInput

__all__ = [
    "Observation",
    "Predictor",
    "check_gpu_matches",
    "check_model_matches",
    "linear_layers_time_s",
    "observations",
    "predict",
]


@dataclass(frozen=True)
class Observation:
    """One measured number: a row's step time, or for a chunked_prefill row its total
    (`prefill_ms`) or its worst step (`worst_step_ms`)."""

    row: StepRow
    quantity: str  # "ms", "prefill_ms" or "worst_step_ms"
    measured_s: float


def observations(rows: Sequence[StepRow]) -> list[Observation]:
    out: list[Observation] = []
    for r in rows:
        if r.kind == "chunked_prefill":
            assert r.worst_step_s is not None
            out.append(Observation(r, "prefill_ms", r.time_s))
            out.append(Observation(r, "worst_step_ms", r.worst_step_s))
        else:
            out.append(Observation(r, "ms", r.time_s))
    return out


class Predictor:
    """Every observation of `rows` as the cost model predicts it, all at once: the rows' steps
    as arrays for the one step-time formula (`steptime.step_time_s`), then a total or a worst
    step per chunked row. `linear` rows time the layers alone (`linear_layers_coefficients`);
    a chunked row is the seed's reading: chunk = the prompt's share, the decodes ride on top,
    their context held at `ctx` (as measured)."""

    def __init__(self, rows: Sequence[StepRow]) -> None:
        lin: list[float] = []
        single: list[tuple[float, float, float, float]] = []  # (chunk, offset, decodes, context)
        chunked: list[tuple[float, float, float, float]] = []  # every chunked row's steps, in turn
        starts: list[int] = []  # where each chunked row's steps begin in `chunked`
        kinds: list[tuple[str, int]] = []  # per observation: which group, which index
        for r in rows:
            if r.kind == "linear":
                kinds.append(("lin", len(lin)))
                lin.append(float(r.tokens))
            elif r.kind == "decode":
                kinds.append(("step", len(single)))
                single.append((0.0, 0.0, float(r.batch), float(r.batch * r.ctx)))
            elif r.kind == "prefill":
                kinds.append(("step", len(single)))
                single.append((float(r.prompt), 0.0, 0.0, 0.0))
            else:
                kinds += [("sum", len(starts)), ("max", len(starts))]
                starts.append(len(chunked))
                s = float(r.decodes * r.ctx)
                chunked.extend(
                    (float(c), float(p), float(r.decodes), s) for c, p in chunks(r.prompt, r.chunk)
                )
        self._lin = np.array(lin)
        self._steps = np.array(single + chunked, dtype=np.float64).reshape(-1, 4).T.copy()
        self._singles = len(single)
        self._starts = np.array(starts, dtype=np.intp)
        # The values, concatenated: [linear rows | single steps | chunked totals | chunked worsts].
        base = {"lin": 0, "step": len(lin), "sum": len(lin) + len(single)}
        base["max"] = base["sum"] + len(starts)
        self._order = np.array([base[kind] + i for kind, i in kinds], dtype=np.intp)

    def __call__(self, model: ModelSpec, gpu: GpuSpec, profile: Profile) -> np.ndarray:
        """Predicted seconds, one per observation (in `observations(rows)` order)."""
        parts: list[np.ndarray] = [self._lin]
        if self._lin.size:
            parts[0] = step_time_s(linear_layers_coefficients(model, gpu, profile), 0.0, 0.0, self._lin, 0.0)
        c, p, n, s = self._steps
        t = step_time_s(step_coefficients(model, gpu, profile), c, p, n, s) if c.size else c
        parts.append(t[: self._singles])
        if self._starts.size:
            steps = t[self._singles :]
            parts += [np.add.reduceat(steps, self._starts), np.maximum.reduceat(steps, self._starts)]
        return np.concatenate(parts)[self._order]


def linear_layers_time_s(replica: Replica, tokens: int) -> float:
    """A `linear` row: every layer's projections and MLP for `tokens` tokens, nothing else.
    Measured rows exist for bf16 and fp8 weights only."""
    w = replica.weight_dtype
    if w != "bf16" and w != "fp8":
        raise ValueError(f"linear rows are measured in bf16 or fp8 weights, not {w}")
    k = linear_layers_coefficients(replica.model, replica.gpu, replica.profile, replica.tp, w)
    return step_time_s(k, 0.0, 0.0, float(tokens), 0.0)


def predict(rows: Sequence[StepRow], model: ModelSpec, gpu: GpuSpec, profile: Profile) -> list[float]:
    """Predicted seconds for every observation of `rows` (chunked rows give two)."""
    return [float(v) for v in Predictor(rows)(model, gpu, profile)]


def check_model_matches(meas: Measurements, model: ModelSpec, field: str = "model") -> None:
    """The info row (if any) says which model shape was timed; refuse a different model."""
    info = meas.info
    kv = info.get("kv_bytes_per_token")
    params = info.get("params")
    mine_kv = model.kv_bytes_per_token("bf16")
    if kv is not None and int(kv) != mine_kv:
        raise InvalidInput(
            field,
            f"{meas.source} was measured on a model with {int(kv):,} KV bytes per token; "
            f"{model.name} has {mine_kv:,} (pass the model that was timed)",
        )
    if params is not None and abs(float(params) / model.total_params - 1) > 0.01:
        raise InvalidInput(
            field,
            f"{meas.source} was measured on a model of {float(params) / 1e9:.3g}e9 parameters; "
            f"{model.name} has {model.total_params / 1e9:.3g}e9 (pass the model that was timed)",
        )


# GPU model names as they appear in a catalog name or a driver's device string ("NVIDIA H100 80GB
# HBM3", "NVIDIA A100-SXM4-80GB", "AMD Instinct MI300X"), longest first so "h200" is not "h20".
_GPU_MODEL = re.compile(
    r"(?<![a-z0-9])(gh200|gb200|mi300x|mi325x|mi300a|h200|h100|h800|h20|b200|b300|a100|a800|a10g|a10|a30|"
    r"l40s|l40|l4|v100|t4)(?![a-z0-9])"
)


def _gpu_model(text: str) -> str | None:
    m = _GPU_MODEL.search(text.lower().replace("_", " ").replace("-", " "))
    return m.group(1) if m else None


def check_gpu_matches(meas: Measurements, gpu: GpuSpec, field: str = "gpu") -> None:
    """The info row's `gpu` (a catalog name) or `device` (the driver's name for the card, as
    tools/measure_steps.py records it) must be the GPU the profile is fitted for: the same GPU
    model, and the same form factor where the device says it (an H100 PCIe is not an SXM)."""
    named = meas.info.get("gpu")
    if named is not None and str(named).lower() != gpu.name:
        raise InvalidInput(field, f"{meas.source} was measured on {named}, not {gpu.name}")
    device = meas.info.get("device")
    if device is None:
        return
    mine = _gpu_model(gpu.name)
    theirs = _gpu_model(str(device))
    pcie = "pcie" in str(device).lower()
    if theirs is not None and mine is not None and (theirs != mine or pcie != ("pcie" in gpu.name)):
        raise InvalidInput(
            field,
            f"{meas.source} was measured on a {device}, not a {gpu.display_name} ({gpu.name}); "
            "pass the GPU the rows were timed on",
        )
