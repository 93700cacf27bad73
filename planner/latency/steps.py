"""Vectorized step times: `Replica.step_time_s` for numpy arrays of batches.

The latency model evaluates thousands of step times per question (every prompt-length support
point, chunk and candidate concurrency), too many for one Python call each. `StepCost` reads the
coefficients of the roofline out of `Replica.breakdown` at a few probe batches, evaluates the same
formula on arrays, and checks itself against `Replica.step_time_s` on a spread of batches. If the
cost model has grown terms this formula lacks (a calibrated profile may), the check fails and
`StepCost` falls back to calling the replica once per element: slower, never wrong.

A batch here carries `decodes` sequences over `context` total context tokens, plus at most one
prefill chunk of `chunk` tokens at offset `offset` (0 tokens: no chunk). Arrays broadcast. The
latency model also passes "equivalent" chunks with a negative offset (a full budget of many short
prompts whose attention equals that of the mean prefill token); their prefix re-read term is
taken at offset 0.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from planner.costmodel.roofline import Replica

FloatArray = npt.NDArray[np.float64]
ArrayLike = npt.ArrayLike

# Batches the fast formula is checked on: (chunk, offset, decodes, context tokens).
_PROBES: tuple[tuple[float, float, float, float], ...] = (
    (0, 0, 1, 500),
    (0, 0, 7, 7 * 3000),
    (0, 0, 300, 300 * 1500),
    (0, 0, 1024, 1024 * 9000),
    (1, 0, 0, 0),
    (37, 0, 0, 0),
    (512, 0, 0, 0),
    (2048, 14000, 0, 0),
    (8192, 0, 0, 0),
    (300, 1000, 64, 64 * 1500),
    (4000, 20000, 200, 200 * 2500),
    (16, 3, 2, 40),
)
_RTOL = 1e-9


class StepCost:
    """Step times of one replica on numpy arrays (see the module docstring)."""

    def __init__(self, replica: Replica) -> None:
        self.replica = replica
        b1 = replica.breakdown((), 1, 0.0)
        b1c = replica.breakdown((), 1, 1000.0)
        b2 = replica.breakdown((), 2, 0.0)
        self._inv_bw = b1.memory_s / b1.bytes_moved
        self._kv_bytes = (b1c.bytes_moved - b1.bytes_moved) / 1000.0
        self._linear_s = b1.compute_s  # per token (no attention at zero context)
        self._attn_s = (b1c.compute_s - b1.compute_s) / 1000.0  # per (query x context) token
        self._comm_slope = b2.comm_s - b1.comm_s
        self._comm_icpt = b1.comm_s - self._comm_slope
        self._overhead = b1.overhead_s
        # Calibrated profiles: extra passes over each chunk's prefix KV, linear in the offset.
        bp = replica.breakdown(((1, 1000),), 0, 0.0)
        self._reread = float(getattr(bp, "prefix_reread_s", 0.0)) / 1000.0
        # Weight bytes read by a step of t tokens: w0 + w1 (1 - r^t) (MoE: experts touched), or w0.
        w0 = float(replica.weight_bytes_read(0))
        w1t = float(replica.weight_bytes_read(1))
        w2t = float(replica.weight_bytes_read(2))
        if w1t == w0 or math.isclose(w1t, w2t, rel_tol=1e-15):
            self._w0, self._w1, self._r = w1t, 0.0, 0.0
        else:
            r = (w2t - w0) / (w1t - w0) - 1.0
            self._w0, self._w1, self._r = w0, (w1t - w0) / (1.0 - r), r
        self.fast = self._check()

    # ---- evaluation ----------------------------------------------------------------------------

    def time_s(
        self, chunk: ArrayLike, offset: ArrayLike, decodes: ArrayLike, context: ArrayLike
    ) -> FloatArray:
        """Step time (seconds) of each batch; arguments broadcast against each other."""
        c = np.asarray(chunk, dtype=np.float64)
        p = np.asarray(offset, dtype=np.float64)
        n = np.asarray(decodes, dtype=np.float64)
        s = np.asarray(context, dtype=np.float64)
        if not self.fast:
            return self._slow(c, p, n, s)
        return self._formula(c, p, n, s)

    def scalar_s(self, chunk: float, offset: float, decodes: float, context: float) -> float:
        """One step time, in plain float arithmetic (cheaper than numpy for one batch)."""
        if not self.fast:
            return self._replica_step(chunk, offset, decodes, context)
        return self._scalar_formula(chunk, offset, decodes, context)

    def _scalar_formula(self, chunk: float, offset: float, decodes: float, context: float) -> float:
        tokens = chunk + decodes
        if tokens <= 0:
            return 0.0
        w = self._w0 if self._w1 == 0.0 else self._w0 + self._w1 * (1.0 - self._r**tokens)
        has_chunk = chunk > 0
        mem = (w + (context + (offset + chunk if has_chunk else 0.0)) * self._kv_bytes) * self._inv_bw
        att = (chunk * (offset + chunk / 2.0) if has_chunk else 0.0) + context
        cmp = self._linear_s * tokens + self._attn_s * att
        comm = self._comm_slope * tokens + self._comm_icpt if self.replica.tp > 1 else 0.0
        reread = self._reread * max(offset, 0.0) if has_chunk else 0.0
        return max(mem, cmp) + comm + self._overhead + reread

    def chunk_time_s(
        self, chunk: FloatArray, offset: FloatArray, decodes: float, context: float
    ) -> FloatArray:
        """Step times of batches that each carry one chunk (> 0 tokens) of `chunk` at `offset`
        (arrays) beside the same `decodes` over `context` tokens (scalars): the hot path."""
        if not self.fast:
            return self._slow(chunk, offset, np.asarray(decodes), np.asarray(context))
        tokens = chunk + decodes
        if self._w1 == 0.0:
            w: FloatArray | float = self._w0
        else:
            w = self._w0 + self._w1 * (1.0 - np.power(self._r, tokens))
        mem = (w + (context + offset + chunk) * self._kv_bytes) * self._inv_bw
        cmp = self._linear_s * tokens + self._attn_s * (chunk * (offset + 0.5 * chunk) + context)
        t = np.maximum(mem, cmp)
        if self._reread:
            t = t + self._reread * np.maximum(offset, 0.0)
        extra = self._overhead
        if self.replica.tp > 1:
            return t + (self._comm_slope * tokens + (self._comm_icpt + extra))
        return t + extra if extra else t

    def _formula(self, c: FloatArray, p: FloatArray, n: FloatArray, s: FloatArray) -> FloatArray:
        tokens = c + n
        if self._w1 == 0.0:
            w: FloatArray | float = self._w0
        else:
            w = self._w0 + self._w1 * (1.0 - np.power(self._r, tokens))
        has_chunk = c > 0
        chunk_kv = np.where(has_chunk, p + c, 0.0)
        mem = (w + (s + chunk_kv) * self._kv_bytes) * self._inv_bw
        att = np.where(has_chunk, c * (p + c / 2.0), 0.0) + s
        cmp = self._linear_s * tokens + self._attn_s * att
        t = np.maximum(mem, cmp) + self._overhead
        if self._reread:
            t = t + np.where(has_chunk, self._reread * np.maximum(p, 0.0), 0.0)
        if self.replica.tp > 1:
            t = t + (self._comm_slope * tokens + self._comm_icpt)
        return np.where(tokens > 0, t, 0.0)

    def _replica_step(self, chunk: float, offset: float, decodes: float, context: float) -> float:
        chunks = [(chunk, offset)] if chunk > 0 else []
        return float(self.replica.step_time_s(chunks, decodes, context))  # type: ignore[arg-type]

    def _slow(self, c: FloatArray, p: FloatArray, n: FloatArray, s: FloatArray) -> FloatArray:
        cb, pb, nb, sb = np.broadcast_arrays(c, p, n, s)
        out = np.empty(cb.shape, dtype=np.float64)
        flat = out.reshape(-1)
        for i, (ci, pi, ni, si) in enumerate(
            zip(cb.reshape(-1), pb.reshape(-1), nb.reshape(-1), sb.reshape(-1), strict=True)
        ):
            flat[i] = self._replica_step(float(ci), float(pi), float(ni), float(si))
        return out

    def _check(self) -> bool:
        """Does the fast formula reproduce Replica.step_time_s on the probe batches?"""
        arr = np.array(_PROBES, dtype=np.float64)
        got = self._formula(arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3])
        for (c, p, n, s), g in zip(_PROBES, got, strict=True):
            want = self._replica_step(c, p, n, s)
            if not math.isclose(float(g), want, rel_tol=_RTOL, abs_tol=1e-15):
                return False
            if not math.isclose(self._scalar_formula(c, p, n, s), want, rel_tol=_RTOL, abs_tol=1e-15):
                return False
        return True


@lru_cache(maxsize=256)
def step_cost(replica: Replica) -> StepCost:
    """A StepCost per replica, built once (replicas are frozen and hashable)."""
    return StepCost(replica)
