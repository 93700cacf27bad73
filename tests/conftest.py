from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

# Property tests draw the same examples on every run (CI included) and keep no example database:
# a red CI run is reproducible, and a green one does not depend on the draw. Explore new draws
# locally with HYPOTHESIS_PROFILE=explore.
settings.register_profile("repeatable", derandomize=True, database=None)
settings.register_profile("explore", database=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def seed() -> dict[str, Any]:
    return json.loads((DATA / "seed_vectors.json").read_text())
