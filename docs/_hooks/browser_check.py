"""Open the built site in a real browser (headless Chromium), as a reader who opens ``site/index.html`` from
disk does: every link of the navigation must land on a rendered page (not a directory listing, not an error
page), no raw Sphinx role may show in what the browser renders; and, the site served on a loopback port (search
runs in a web worker, which browsers do not start for a page opened from disk), the search box must find pages
(``index.html?q=WORD`` opens the search with a query: results must appear), while from disk it must say how to
search instead of finding nothing.

Run by ``make docs`` after the build (and so by CI) when Chromium is installed (``apt-get install chromium``);
without it, it says so in one line and checks nothing (``--require``: fails instead).

Usage: ``python docs/_hooks/browser_check.py [--require] SITE_DIR``; prints what is wrong and exits 1, or
exits 0 with one line saying what it checked.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin, urlsplit
from urllib.request import url2pathname

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "chrome")
# quiet and offline: no sandbox (CI runs as root), no GPU, none of the browser's own network traffic
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)
ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj):`")
SEARCH_WORD = "partition"
SEARCH_WAIT_S = 30.0  # the longest wait for the search's worker to answer
PAGE_WAIT_MS = 4000  # virtual time the browser gives a page's scripts (the search index loads in a worker)


class _Dom(HTMLParser):
    """What the browser rendered: the navigation's links, the search results, the text, whether it is a page."""

    def __init__(self) -> None:
        super().__init__()
        self.nav: list[str] = []
        self.results = 0
        self.article = False
        self.listing = False
        self.placeholder = ""
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "a" and "md-nav__link" in classes and a.get("href"):
            self.nav.append(a["href"] or "")
        if "md-search-result__item" in classes:
            self.results += 1
        if tag == "article" and "md-content__inner" in classes:
            self.article = True
        if tag == "input" and "md-search__input" in classes:
            self.placeholder = a.get("placeholder") or ""
        if tag == "h1" and a.get("id") == "header":  # Chromium's listing of a directory opened from disk
            self.listing = True

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def browser() -> str | None:
    """The path of an installed Chromium, or None."""
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


def render(exe: str, url: str, profile: str) -> _Dom:
    """The DOM of ``url`` once the browser has run its scripts, parsed."""
    done = subprocess.run(
        [exe, *FLAGS, f"--user-data-dir={profile}", f"--virtual-time-budget={PAGE_WAIT_MS}", "--dump-dom", url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    dom = _Dom()
    dom.feed(done.stdout)
    return dom


def problems(site: Path, exe: str) -> tuple[list[str], int]:
    """What a reader would meet in the browser, and how many pages were opened."""
    found: list[str] = []
    home = (site / "index.html").resolve().as_uri()
    with tempfile.TemporaryDirectory(prefix="browser-check-") as profile:
        first = render(exe, home, profile)
        if not first.article:
            return [f"{home}: the browser rendered no page"], 1
        pages = sorted({urljoin(home, href).split("#", 1)[0] for href in first.nav})
        for url in pages:
            path = Path(url2pathname(urlsplit(url).path))
            dom = render(exe, url, profile)
            name = path.relative_to(site.resolve()) if path.is_relative_to(site.resolve()) else path
            if dom.listing or path.is_dir():
                found.append(f"{name}: the navigation link opens a directory listing")
            elif not dom.article:
                found.append(f"{name}: the navigation link opens no page")
            if ROLE.search("".join(dom.text)):
                found.append(f"{name}: a raw Sphinx role (:class:`...`) shows in the browser")
        if "serve the site" not in first.placeholder:
            found.append("index.html: opened from disk, the search box does not say how to search")
        with _served(site) as base:
            results = search_results(exe, f"{base}/index.html?q={SEARCH_WORD}", profile)
        if results == 0:
            found.append(f"index.html?q={SEARCH_WORD}: the search box found nothing (the site served over HTTP)")
    return found, len(pages) + 2


def search_results(exe: str, url: str, profile: str, wait: float = SEARCH_WAIT_S) -> int:
    """How many results the search box of ``url`` (``...?q=WORD``) lists once its worker has answered, waiting
    at most ``wait`` s. Driven over the DevTools protocol on a pipe: the worker runs in real time, which a
    ``--dump-dom`` snapshot does not wait for."""
    reads, theirs_w = os.pipe()  # the browser writes its answers on its fd 4 ...
    theirs_r, writes = os.pipe()  # ... and reads commands on its fd 3
    argv = [exe, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"]
    proc = subprocess.Popen(
        argv,
        pass_fds=(theirs_r, theirs_w, 3, 4),  # kept open in the browser (3 and 4 once placed there)
        preexec_fn=functools.partial(_place, theirs_r, theirs_w),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(theirs_r)
    os.close(theirs_w)
    devtools = _DevTools(reads, writes)
    try:
        target = devtools.call("Target.createTarget", url=url)["targetId"]
        session = devtools.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        count = "document.querySelectorAll('.md-search-result__item').length"
        deadline = time.monotonic() + wait
        while True:
            found = devtools.call("Runtime.evaluate", session=session, expression=count, returnByValue=True)
            if found["result"].get("value") or time.monotonic() > deadline:
                return int(found["result"].get("value") or 0)
            time.sleep(0.2)  # polling the page for the worker's answer, against a deadline
    finally:
        proc.kill()
        proc.wait(10)
        os.close(reads)
        os.close(writes)


def _place(commands: int, answers: int) -> None:
    """In the browser's process before it starts: its command pipe on fd 3, its answer pipe on fd 4."""
    commands, answers = os.dup(commands), os.dup(answers)  # copies first: either may be 3 or 4 already
    os.dup2(commands, 3)
    os.dup2(answers, 4)


class _DevTools:
    """Chromium's DevTools protocol over ``--remote-debugging-pipe``: JSON messages, each ended by a NUL byte."""

    def __init__(self, reads: int, writes: int) -> None:
        self.reads, self.writes, self.next_id, self.buffer = reads, writes, 0, b""

    def call(self, method: str, session: str | None = None, **params: object) -> dict:
        self.next_id += 1
        message: dict = {"id": self.next_id, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        os.write(self.writes, json.dumps(message).encode() + b"\0")
        while True:  # events come in between; the answer carries the call's id
            reply = json.loads(self._message())
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]

    def _message(self) -> bytes:
        while b"\0" not in self.buffer:
            ready, _, _ = select.select([self.reads], [], [], SEARCH_WAIT_S)
            chunk = os.read(self.reads, 1 << 16) if ready else b""
            if not chunk:
                raise RuntimeError("the browser stopped answering over the DevTools pipe")
            self.buffer += chunk
        message, _, self.buffer = self.buffer.partition(b"\0")
        return message


@contextlib.contextmanager
def _served(site: Path) -> Iterator[str]:
    """The site served on a free loopback port for the block's length; yields its base URL."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            server.shutdown()
            thread.join(5)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def main(argv: list[str]) -> int:
    require = "--require" in argv
    args = [a for a in argv[1:] if a != "--require"]
    site = Path(args[0] if args else "site")
    exe = browser()
    if exe is None:
        print("browser_check: no Chromium installed (apt-get install chromium): the site was not opened in a browser")
        return 1 if require else 0
    found, opened = problems(site, exe)
    for line in found:
        print(f"browser_check: {line}")
    if not found:
        print(f"browser_check: {opened} pages opened from disk in {Path(exe).name}: navigation, roles and search fine")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
