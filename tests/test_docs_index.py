"""docs/README.md indexes every document of docs/, and the links of the teaching documents (the index,
the tutorial, the how-tos, the durability explanation, the client's README) lead to files that exist
and to headings that exist in them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
DOCS = ROOT / "docs"
CHECKED = [
    DOCS / "README.md",
    DOCS / "tutorial-first-bot.md",
    DOCS / "how-to.md",
    DOCS / "durability.md",
    ROOT / "client" / "README.md",
]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, blanks as hyphens."""
    headings = re.findall(r"^#+ (.+)$", path.read_text(), re.M)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


def test_the_index_links_every_document() -> None:
    index = (DOCS / "README.md").read_text()
    for document in DOCS.glob("*.md"):
        if document.name != "README.md":
            assert f"]({document.name}" in index, f"docs/README.md does not link {document.name}"


@pytest.mark.parametrize("document", CHECKED, ids=lambda path: str(path.relative_to(ROOT)))
def test_relative_links_lead_somewhere(document: Path) -> None:
    for target in LINK.findall(document.read_text()):
        if target.startswith(("http://", "https://")):
            continue
        file, _, anchor = target.partition("#")
        path = (document.parent / file).resolve() if file else document
        assert path.exists(), f"{document.name} links {target}: no such file"
        if anchor and path.suffix == ".md":
            assert anchor in anchors(path), f"{document.name} links {target}: no such heading"
