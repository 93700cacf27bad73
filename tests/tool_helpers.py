"""Loading the scripts under tools/ (not a package) as modules, for their tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

TOOLS = Path(__file__).resolve().parents[1] / "tools"


def load_tool(filename: str, module: str) -> ModuleType:
    """tools/`filename` imported as `module` (once per session: later calls get the same module,
    registered in sys.modules so its dataclasses resolve)."""
    if module in sys.modules:
        return sys.modules[module]
    spec = importlib.util.spec_from_file_location(module, TOOLS / filename)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[module] = mod
    spec.loader.exec_module(mod)
    return mod
