"""The command outputs quoted in the docs, regenerated from the product.

A quoted output is a fenced block right after a marker naming the command that prints it:

    <!-- output: capplan plan examples/chat.yaml -->
    ```text
    status OPTIMAL: ...
    ```

Optional `lines=A:B` after the command keeps lines A..B (1-based, inclusive; `lines=:12` the
first 12) when the docs quote part of a long output. Commands run in this repository's root,
through `planner.cli.main` in this process (so what is quoted is exactly what `capplan` prints).

    python3 tools/docs_outputs.py            # rewrite every quoted output in docs/**/*.md, README.md
    python3 tools/docs_outputs.py --check    # exit 1 and list the blocks that differ

tests/test_docs_outputs.py runs the check, so a change that moves a quoted figure fails until the
docs are regenerated (and the diff is read).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shlex
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = (*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md")  # docs/latency/ too
MARKER = re.compile(r"^<!-- output: (?P<cmd>.+?)(?: lines=(?P<a>\d*):(?P<b>\d*))? -->\n```text\n", re.M)
MAX_BLOCKS_PER_FILE = 100  # a bound on the scan (the docs hold a handful)


@dataclass(frozen=True)
class Block:
    """One quoted output: where its text sits in the file, and what produces it."""

    path: Path
    command: str
    first: int | None
    last: int | None
    start: int  # offset of the quoted text (after the opening fence)
    end: int  # offset of the closing fence


def blocks(path: Path, text: str) -> Iterator[Block]:
    for n, m in enumerate(MARKER.finditer(text)):
        if n >= MAX_BLOCKS_PER_FILE:
            raise SystemExit(f"{path}: more than {MAX_BLOCKS_PER_FILE} quoted outputs")
        end = text.find("```", m.end())
        if end < 0:
            raise SystemExit(f"{path}: the block after `{m.group(0).strip()}` is not closed")
        a, b = m.group("a"), m.group("b")
        yield Block(path, m.group("cmd"), int(a) if a else None, int(b) if b else None, m.end(), end)


def run(command: str) -> str:
    """What `command` (a `capplan ...` line) prints on stdout, run from the repository root."""
    from planner.cli import main

    argv = shlex.split(command)
    if not argv or argv[0] != "capplan":
        raise SystemExit(f"only capplan commands are quoted, got {command!r}")
    out = io.StringIO()
    here = os.getcwd()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(out):
            rc = main(argv[1:])
    finally:
        os.chdir(here)
    if rc not in (0, 3):  # 3: an answer without a plan (INFEASIBLE) is still an answer
        raise SystemExit(f"`{command}` exited {rc}")
    return out.getvalue()


def quoted(block: Block) -> str:
    lines = run(block.command).splitlines()
    first = 1 if block.first is None else block.first
    last = len(lines) if block.last is None else block.last
    return "".join(line.rstrip() + "\n" for line in lines[first - 1 : last])


def regenerate(path: Path) -> tuple[str, list[str]]:
    """The file's text with every quoted output regenerated, and the commands whose output moved."""
    text = path.read_text()
    out, pos, moved = [], 0, []
    for b in blocks(path, text):
        new = quoted(b)
        if text[b.start : b.end] != new:
            moved.append(b.command)
        out += [text[pos : b.start], new]
        pos = b.end
    out.append(text[pos:])
    return "".join(out), moved


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 if any block differs")
    parser.add_argument("files", nargs="*", type=Path, help="markdown files (default: docs/*.md, README.md)")
    args = parser.parse_args(argv)
    stale = []
    for path in args.files or DOCS:
        text, moved = regenerate(path)
        stale += [f"{path.relative_to(ROOT) if path.is_absolute() else path}: {c}" for c in moved]
        if moved and not args.check:
            path.write_text(text)
    for line in stale:
        print(("differs: " if args.check else "regenerated: ") + line, file=sys.stderr)
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
