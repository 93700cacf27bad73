"""Shared by the export tests: the chat example as a plan request, its candidates replaceable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def chat_request(**candidates: Any) -> dict[str, Any]:
    """examples/chat.yaml as a mapping; `candidates` given replaces its candidates block."""
    data = yaml.safe_load((EXAMPLES / "chat.yaml").read_text())
    if candidates:
        data["candidates"] = candidates
    return data
