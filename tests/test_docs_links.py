"""Links between the docs resolve: every relative Markdown link in docs/**/*.md and README.md
names a file of the repository, and a `#anchor` on a Markdown file names one of its headings (as
GitHub slugs them). The latency model's docs are an index and one page per component
(docs/latency.md, docs/latency/), so a page moved or a heading renamed must not leave a link
behind."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = (*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md")
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but '-' and '_' dropped, spaces to '-'."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text())
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


def links(path: Path) -> list[str]:
    text = FENCE.sub("", path.read_text())
    found = [m.group(1) for m in LINK.finditer(text) if not re.match(r"[a-z]+:", m.group(1))]
    # a path ("b.md", "../tools/x.py", "docs/") or an anchor; not math such as E[Δ](λ)
    return [x for x in found if x.startswith("#") or re.search(r"[./]", x.partition("#")[0])]


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(path: Path) -> None:
    broken = []
    for link in links(path):
        target, _, anchor = link.partition("#")
        file = (path.parent / target).resolve() if target else path
        if not file.exists() or (anchor and file.suffix == ".md" and anchor not in anchors(file)):
            broken.append(link)
    assert not broken, f"{path.relative_to(ROOT)}: links to nothing: {broken}"


def test_the_link_check_can_fail(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A page\n\n## The step mix\n\nSee [b](b.md) and [x](#nope).\n")
    assert links(tmp_path / "a.md") == ["b.md", "#nope"]
    assert "the-step-mix" in anchors(tmp_path / "a.md") and "nope" not in anchors(tmp_path / "a.md")
    assert slug("Formula: the GI/G/1 wait") == "formula-the-gig1-wait"


def test_every_component_page_is_linked_from_the_index() -> None:
    index = (ROOT / "docs" / "latency.md").read_text()
    pages = sorted(p.name for p in (ROOT / "docs" / "latency").glob("*.md"))
    assert len(pages) >= 10
    assert not [p for p in pages if f"(latency/{p})" not in index]
