"""docs/benchmarks.md holds today's figures only (at most 350 lines) and links to the dated history,
docs/benchmarks-history.md, which is in the site's navigation right after it; every link of the docs and
the README to either page names an anchor that page has."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
MAX_LINES = 350


def _nav() -> list[str]:
    """The page files of mkdocs.yml's navigation, in order (its entries are ``- Title: page.md`` lines)."""
    return re.findall(r"^\s*- [^\n]*?:\s*([\w/.-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M)


def _anchors(page: Path) -> set[str]:
    """The anchors of a page's headings, as the site's table of contents makes them."""
    anchors = set()
    for heading in re.findall(r"^#{1,6} (.+)$", page.read_text(), re.M):
        slug = re.sub(r"[^\w\s-]", "", heading.replace("`", "")).strip().lower()
        anchors.add(re.sub(r"[-\s]+", "-", slug))
    return anchors


def test_benchmarks_page_is_short_and_links_to_its_history():
    text = (DOCS / "benchmarks.md").read_text()
    assert len(text.splitlines()) <= MAX_LINES, f"docs/benchmarks.md has {len(text.splitlines())} lines"
    assert "](benchmarks-history.md" in text
    assert (DOCS / "benchmarks-history.md").read_text().startswith("# Benchmarks: the dated history\n")


def test_history_page_follows_the_benchmarks_page_in_the_navigation():
    nav = _nav()
    assert "benchmarks.md" in nav and "benchmarks-history.md" in nav, nav
    assert nav.index("benchmarks-history.md") == nav.index("benchmarks.md") + 1, nav


def test_links_to_the_benchmarks_pages_name_anchors_they_have():
    pages = {name: _anchors(DOCS / name) for name in ("benchmarks.md", "benchmarks-history.md")}
    missing = []
    for page in [ROOT / "README.md", *DOCS.rglob("*.md")]:
        for name, anchor in re.findall(r"\]\((?:[\w./]*/)?(benchmarks(?:-history)?\.md)#([\w-]+)\)", page.read_text()):
            if anchor not in pages[name]:
                missing.append(f"{page.relative_to(ROOT)}: {name}#{anchor}")
    assert not missing, missing
