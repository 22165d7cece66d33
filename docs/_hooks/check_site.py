"""Check the built site as a reader opening ``site/index.html`` meets it (run by ``make docs`` after the build):
every link between pages names an HTML file that exists (no directory listings when opened from a file), no
raw Sphinx role and no test marker (``# not run:``) shows in a page's code, and the search index is there.

Usage: ``python docs/_hooks/check_site.py SITE_DIR``; prints what is wrong and exits 1, or exits 0 silently.
"""

from __future__ import annotations

import re
import sys
from html.parser import HTMLParser
from pathlib import Path

ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj):`")


class _Page(HTMLParser):
    """The local links of a page, and the text of its code blocks (``<pre>``; inline code may name a marker)."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.code: list[str] = []
        self._in_code = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            href = dict(attrs).get("href") or ""
            if href and not re.match(r"[a-z]+:|#|//", href):
                self.links.append(href.split("#", 1)[0])
        if tag == "pre":
            self._in_code += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "pre" and self._in_code:
            self._in_code -= 1

    def handle_data(self, data: str) -> None:
        if self._in_code:
            self.code.append(data)


def problems(site: Path) -> list[str]:
    """What a reader would trip over in the built ``site``."""
    found = []
    if not (site / "search" / "search_index.json").is_file():
        found.append("search/search_index.json is missing: the search box has nothing to search")
    for page in sorted(site.rglob("*.html")):
        if page.name == "404.html":  # a web server's page (its links are absolute): never opened from disk
            continue
        parsed = _Page()
        text = page.read_text(errors="replace")
        parsed.feed(text)
        name = page.relative_to(site)
        for href in parsed.links:
            target = (page.parent / href).resolve() if href else page
            if href and (target.is_dir() or not target.exists()):
                found.append(f"{name}: link {href!r} is not a page file (opened from disk it would show a folder)")
        if ROLE.search(re.sub(r"<[^>]+>", "", text)):
            found.append(f"{name}: a raw Sphinx role (:class:`...`) shows in the page")
        if any("# not run" in c for c in parsed.code):
            found.append(f"{name}: a test marker '# not run:' shows in a code block")
    return found


def main(argv: list[str]) -> int:
    site = Path(argv[1] if len(argv) > 1 else "site")
    found = problems(site)
    for line in found:
        print(f"check_site: {line}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
