"""The golden gate (tools/golden.py): the latency model's predictions on the accuracy grid
(analytic side), the evaluate examples and the plan examples equal tests/golden/predictions.json
within 1e-9 relative, key for key. A change that moves a prediction regenerates the file
(`python3 tools/golden.py --write`) in the same commit, so the diff shows what moved."""

from __future__ import annotations

import copy
import json

from tool_helpers import load_tool

golden = load_tool("golden.py", "golden_tool")


def test_predictions_equal_the_golden_file() -> None:
    expected = json.loads(golden.GOLDEN_PATH.read_text())
    now = json.loads(golden.dumps(golden.predictions()))
    diffs = list(golden.differences(expected, now))
    assert not diffs, "predictions moved (regenerate with tools/golden.py --write if meant):\n" + "\n".join(
        diffs[:40]
    )


def test_the_comparison_catches_a_moved_figure_and_a_key() -> None:
    """The gate can fail: a figure moved by 1e-8 relative, a key added or removed, a string
    changed are each reported; 1e-10 relative is not."""
    base = {"a": {"x": 1.5, "y": [1.0, "ttft"], "z": None}, "b": float("nan")}
    assert list(golden.differences(base, copy.deepcopy(base))) == []
    moved = copy.deepcopy(base)
    moved["a"]["x"] = 1.5 * (1 + 1e-8)
    assert list(golden.differences(base, moved)) == [f"a.x: 1.5 -> {moved['a']['x']!r}"]
    close = copy.deepcopy(base)
    close["a"]["x"] = 1.5 * (1 + 1e-10)
    assert list(golden.differences(base, close)) == []
    extra = copy.deepcopy(base)
    extra["c"] = 1.0
    del extra["b"]
    assert list(golden.differences(base, extra)) == ["b: removed", "c: added"]
    renamed = copy.deepcopy(base)
    renamed["a"]["y"][1] = "itl"
    renamed["a"]["z"] = 0.0
    assert list(golden.differences(base, renamed)) == ["a.y[1]: 'ttft' -> 'itl'", "a.z: None -> 0.0"]
