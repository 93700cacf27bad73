from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def seed() -> dict[str, Any]:
    return json.loads((DATA / "seed_vectors.json").read_text())
