"""The docs quote what the product prints, and stay true: every quoted output
(tools/docs_outputs.py's markers) is what the command prints today, and the user docs carry no
history (commit hashes, session numbers, dated measurement rounds: that belongs in git)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tool_helpers import load_tool

tool = load_tool("docs_outputs.py", "docs_outputs")

ALL = [(path, b) for path in tool.DOCS for b in tool.blocks(path, path.read_text())]


def test_the_docs_quote_outputs() -> None:
    assert len(ALL) >= 3, "the docs quote the plan, evaluate and simulate outputs"


@pytest.mark.parametrize("block", [b for _, b in ALL], ids=lambda b: f"{b.path.name}:{b.command}")
def test_a_quoted_output_is_what_the_command_prints(block: object) -> None:
    text = block.path.read_text()  # type: ignore[attr-defined]
    assert text[block.start : block.end] == tool.quoted(block), (  # type: ignore[attr-defined]
        "regenerate with `python3 tools/docs_outputs.py` and read the diff"
    )


def test_a_marker_regenerates_its_block(tmp_path: Path) -> None:
    doc = tmp_path / "x.md"
    doc.write_text(
        "Intro.\n\n<!-- output: capplan catalog gpus lines=:2 -->\n```text\nstale\n```\n\nAfter.\n"
    )
    text, moved = tool.regenerate(doc)
    assert moved == ["capplan catalog gpus"]
    body = text.split("```text\n", 1)[1].split("```", 1)[0]
    assert body.count("\n") == 2 and "stale" not in body
    assert text.startswith("Intro.\n\n<!-- output:") and text.endswith("```\n\nAfter.\n")


# History in a user doc: a session number; a commit hash of ours (an upstream project's commit,
# named on its line, is a source); a date on a line that reports a measurement (a dataset's or a
# price list's date is provenance, and stays).
SESSION = re.compile(r"\bsession \d+", re.I)
HASH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b")
UPSTREAM = re.compile(r"vllm|llm-d|aiconfigurator|upstream|github|pypi|commit_id", re.I)
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
MEASURED = re.compile(r"measured|\bbench\b|bench/|load average|UTC|\brun on\b|\bran\b", re.I)


def _history(line: str) -> bool:
    return bool(
        SESSION.search(line)
        or (HASH.search(line) and not UPSTREAM.search(line))
        or (DATE.search(line) and MEASURED.search(line))
    )


@pytest.mark.parametrize("path", tool.DOCS, ids=lambda p: p.name)
def test_user_docs_carry_no_history(path: Path) -> None:
    hits = [line.strip()[:120] for line in path.read_text().splitlines() if _history(line)]
    assert not hits, f"{path.name}: history belongs in commit messages: {hits[:5]}"


def test_the_history_check_can_fail() -> None:
    assert _history("measured on 2026-11-30 at load average 2")
    assert _history("the cost model of 26db9c3 read 6,822 ms")
    assert _history("(session 19) the grid read 190")
    assert not _history("llm-d-benchmark (commits 0282dcf, 2026-01-27)")
    assert not _history("price list runpod-secure-2026-09-25, checked 2026-09-25")
