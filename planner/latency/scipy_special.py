"""`scipy.special`, imported on its first use rather than with the latency model.

The latency model's modules are imported for their types as well (the reports' Literal fields,
planner/schema/reports.py, planner/schema/plan_report.py): `capplan catalog` and `capplan plan --server`
import them and compute nothing, and SciPy's import alone costs about 0.2 s of CPU. The first
attribute read imports `scipy.special` and keeps the function, so later reads cost what a
module attribute does.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["special"]


class _OnFirstUse:
    def __getattr__(self, name: str) -> Any:
        value = getattr(importlib.import_module("scipy.special"), name)
        setattr(self, name, value)
        return value


special: Any = _OnFirstUse()
