"""Latency objectives (SLOs): one set of targets for the analytic model and the simulator.

Targets are p99s in seconds; None = no target on that metric, at least one is needed.

* `planner.latency` finds the highest arrival rate whose predicted TTFT p99 and ITL p99 meet
  `ttft_p99_s` and `itl_p99_s` (its capacity); TPOT and end-to-end targets are the simulator's.
* `planner.simulate` reports the simulated p99s against every target and judges each request
  as `vllm bench serve --goodput` does: a request is good when its TTFT <= `ttft_p99_s`, its
  TPOT (mean time per output token after the first; 0 for a one-token answer) <= `tpot_p99_s`
  and its end-to-end latency <= `e2el_p99_s`. ITL is per token, so it is judged on the p99
  only. `goodput_limits_s` gives those per-request thresholds under vLLM's names.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from planner.validation import validate

MAX_SLO_S = 3600.0  # one hour: a target beyond it is no latency objective

__all__ = ["MAX_SLO_S", "Slo"]


class Slo(BaseModel):
    """p99 latency targets in seconds, each in (0, MAX_SLO_S] (see the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
    ttft_p99_s: float | None = Field(default=None, gt=0, le=MAX_SLO_S)
    itl_p99_s: float | None = Field(default=None, gt=0, le=MAX_SLO_S)
    tpot_p99_s: float | None = Field(default=None, gt=0, le=MAX_SLO_S)
    e2el_p99_s: float | None = Field(default=None, gt=0, le=MAX_SLO_S)

    @model_validator(mode="after")
    def _one_target(self) -> Slo:
        if all(v is None for v in (self.ttft_p99_s, self.itl_p99_s, self.tpot_p99_s, self.e2el_p99_s)):
            raise ValueError("give at least one target: ttft_p99_s, itl_p99_s, tpot_p99_s or e2el_p99_s")
        return self

    @classmethod
    def from_mapping(cls, data: Any, root: str = "slo") -> Slo:
        """Validate a mapping; errors are InvalidInput naming the dotted field (`slo.itl_p99_s`)."""
        return validate(cls, data, root)

    @property
    def has_latency_targets(self) -> bool:
        """A TTFT or ITL target: what the analytic capacity is found for."""
        return self.ttft_p99_s is not None or self.itl_p99_s is not None

    def goodput_limits_s(self) -> dict[str, float | None]:
        """Per-request thresholds of goodput, as `vllm bench serve --goodput` names them."""
        return {"ttft_s": self.ttft_p99_s, "tpot_s": self.tpot_p99_s, "e2el_s": self.e2el_p99_s}

    def to_dict(self) -> dict[str, float | None]:
        """The targets in milliseconds (the JSON reports' unit)."""
        return {
            "ttft_p99_ms": _ms(self.ttft_p99_s),
            "itl_p99_ms": _ms(self.itl_p99_s),
            "tpot_p99_ms": _ms(self.tpot_p99_s),
            "e2el_p99_ms": _ms(self.e2el_p99_s),
        }


def _ms(x: float | None) -> float | None:
    return None if x is None else x * 1e3
