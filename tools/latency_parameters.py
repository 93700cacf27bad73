"""docs/latency/parameters.md from planner.latency.parameters.PARAMETERS: the table of the latency
model's constants, rendered.

    python3 tools/latency_parameters.py --write     regenerate the page
    python3 tools/latency_parameters.py --check     exit 1 if the page differs from the table
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.latency.parameters import PARAMETERS  # noqa: E402

PAGE = ROOT / "docs" / "latency" / "parameters.md"

HEAD = """# Parameters of the latency model

Every module-level number of `planner/latency`, from `planner/latency/parameters.py` (this page is
its rendering: `python3 tools/latency_parameters.py --write`). The value lives in the module
named; tests/test_latency_parameters.py fails when a constant has no row or a row no constant.

Kinds: **modelling**, a choice about how vLLM behaves (changing it changes predictions and their
accuracy); **tolerance**, a numerical accuracy (a cut-off, a root's tolerance, a grid's size);
**bound**, the most iterations or entries a loop or cache takes. Pinned: **golden** when doubling
the value makes the golden gate (tests/test_golden.py) fail; **free** when no golden figure moves
(a bound the loop never reaches, a cut-off below what any figure reads).

| constant | value | kind | pinned | holds | source |
|---|---|---|---|---|---|
"""


def render() -> str:
    rows = [
        f"| `{p.name}` | {p.value:g} | {p.kind} | {p.pinned} | {p.holds} | {p.source} |" for p in PARAMETERS
    ]
    return HEAD + "\n".join(rows) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true")
    mode.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    text = render()
    if args.write:
        PAGE.write_text(text)
        return 0
    if not PAGE.exists() or PAGE.read_text() != text:
        print(f"{PAGE.relative_to(ROOT)} differs from planner/latency/parameters.py: run --write", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
