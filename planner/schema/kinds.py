"""The names the latency model's answers are keyed by, as the API states them: an engine's role,
what ends its stable range, what binds a capacity. They live in the schema so that the reports
(and the adapters that read them) name them without importing the latency model; the model
imports them from here (tests/test_imports.py holds that rule)."""

from __future__ import annotations

from typing import Literal

# The engine a figure belongs to: one colocated replica, or a pool of a disaggregated deployment.
Role = Literal["colocated", "prefill", "decode"]
# What ends an engine's stable range (the first stability margin to run out).
StabilityLimit = Literal["compute", "kv_capacity", "max_num_seqs", "max_num_batched_tokens"]
# What limits a capacity: an SLO (its p99 target) or, when the SLO is looser than what the
# replica can serve at all, the stability limit.
BindingLimit = Literal["ttft", "itl", "compute", "kv_capacity", "max_num_seqs", "max_num_batched_tokens"]

__all__ = ["BindingLimit", "Role", "StabilityLimit"]
