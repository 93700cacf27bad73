"""The committed generated code in planner/v1 is what protoc makes of the .proto today."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _gen_proto():
    spec = importlib.util.spec_from_file_location("gen_proto_tool", ROOT / "tools" / "gen_proto.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gen_proto_tool"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_generated_code_matches_the_proto(tmp_path: Path) -> None:
    tool = _gen_proto()
    written = tool.generate(tmp_path)
    assert [p.relative_to(tmp_path).as_posix() for p in written] == list(tool.GENERATED)
    for rel in tool.GENERATED:
        fresh = (tmp_path / rel).read_bytes()
        committed = (ROOT / rel).read_bytes()
        assert fresh == committed, f"{rel} differs from the proto: run python3 tools/gen_proto.py"
