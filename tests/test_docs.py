"""The examples of the docs run as written: docs/dataset.md's Python block builds a dataset and its shell
block's commands partition it; docs/models.md's Python block is a module of model factories and its shell
block trains and embeds them (``python X.py`` and ``graphshard ...`` lines, in order, in one directory); the
training guide's config file is read by ``graphshard train --print-config``.

And every code block of the README and of every page in docs/ is either run by these tests (or by
tests/test_readme.py) or starts with ``# not run: REASON`` (after a ``#!`` line, if any); ``text`` blocks show
output or layouts and are not code. docs/contributing.md describes the convention."""

from __future__ import annotations

import glob
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

import graphshard
from tests import test_readme

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
RUN_PAGES = (
    "dataset.md",
    "models.md",
    "guide/tasks.md",
    "guide/prepare.md",
)  # pages whose Python, YAML (# NAME.yaml) and shell blocks _run_page runs, all of them but those marked not run
LANGUAGES = {"python", "bash", "yaml", "text"}
NOT_RUN = re.compile(r"# not run(?: as written)?: \S.{9,}")  # the marker, with a reason of some words
WAIVED: dict[tuple[str, str], str] = {}  # (page, a line of the block) -> why it is neither run nor marked


def _fenced(text: str) -> list[tuple[str, str, int]]:
    """Every fenced block of a Markdown text: (language, dedented body, line of the opening fence)."""
    blocks = []
    for m in re.finditer(r"^( *)```(\w*)\n(.*?)^\1```[ \t]*$", text, re.S | re.M):
        body = "".join(line[len(m.group(1)) :] for line in m.group(3).splitlines(keepends=True))
        blocks.append((m.group(2), body, text.count("\n", 0, m.start()) + 1))
    return blocks


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(p for p in DOCS.rglob("*.md") if "_hooks" not in p.parts)]


def _config_block() -> str:
    """The config file of the training guide (a YAML block starting with ``# run.yaml``)."""
    return next(
        body
        for lang, body, _ in _fenced((DOCS / "guide" / "training.md").read_text())
        if lang == "yaml" and body.startswith("# run.yaml")
    )


def _run_blocks() -> set[str]:
    """The text of every block a test runs as written."""
    run = {block for _, block in test_readme._blocks()} | {test_readme._command_line_block()}
    for page in RUN_PAGES:
        run |= {
            body
            for lang, body, _ in _fenced((DOCS / page).read_text())
            if (lang in ("python", "bash") or (lang == "yaml" and re.match(r"# [\w-]+\.yaml\n", body)))
            and not _marker(body)
        }
    return {block.strip() for block in run | {_config_block()}}


def _marker(body: str) -> str | None:
    lines = body.splitlines()
    first = lines[1] if lines and lines[0].startswith("#!") and len(lines) > 1 else (lines[0] if lines else "")
    return first if NOT_RUN.fullmatch(first) else None


def _run_page(page: str, tmp_path: Path) -> tuple[list[list[str]], list[str]]:
    """Write the page's Python blocks (each named by its ``# NAME.py`` first line) into ``tmp_path`` and run
    its shell lines there, in order (globs expanded, as a shell would); returns the commands and their stderr."""
    text = (DOCS / page).read_text()
    for block in re.findall(r"```python\n(.*?)```", text, re.S):
        name = re.match(r"# (\w+\.py)", block)
        assert name, f"docs/{page} Python block without a '# NAME.py' first line:\n{block[:200]}"
        (tmp_path / name.group(1)).write_text(block)
    for block in re.findall(r"```yaml\n(.*?)```", text, re.S):
        name = re.match(r"# ([\w-]+\.yaml)\n", block)
        if name:
            (tmp_path / name.group(1)).write_text(block)
    commands = [
        line.split()
        for block in re.findall(r"```bash\n(.*?)```", text, re.S)
        if not _marker(block)
        for line in block.splitlines()
        if line.strip()
    ]
    errors = []
    for argv in commands:
        args = [a for arg in argv[1:] for a in (sorted(glob.glob(arg, root_dir=tmp_path)) or [arg])]
        run = [sys.executable, *args] if argv[0] == "python" else [sys.executable, "-m", "graphshard.cli", *args]
        done = subprocess.run(run, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{' '.join(argv)}:\n{done.stderr[-3000:]}"
        errors.append(done.stderr)
    return commands, errors


def test_dataset_page_example_runs_as_written(tmp_path):
    commands, _ = _run_page("dataset.md", tmp_path)
    assert [c[0] for c in commands] == ["python", "graphshard"]
    config = json.loads((tmp_path / "parts" / "tiny" / "tiny.json").read_text())
    assert config["num_parts"] == 2 and config["num_nodes"] == 100 and config["num_edges"] == 200
    assert config["num_classes"] == 4


def test_models_page_example_runs_as_written(tmp_path):
    commands, errors = _run_page("models.md", tmp_path)
    assert [c[:2] for c in commands] == [
        ["graphshard", "generate"],
        ["graphshard", "train"],
        ["graphshard", "embed"],
        ["graphshard", "train"],
    ]
    sage, skip = (json.loads((tmp_path / f"{m}.json").read_text()) for m in ("sage", "skip"))
    assert sage["test_acc"] > 0.5 and skip["test_acc"] > 0.5, (sage["test_acc"], skip["test_acc"])  # 4 classes
    assert np.load(tmp_path / "emb.npy").shape == (2000, 4)
    assert "my_models:skip offers no layer-wise inference" in errors[3] and "layer-wise" not in errors[1]


def test_tasks_page_example_runs_as_written(tmp_path):
    commands, _ = _run_page("guide/tasks.md", tmp_path)
    assert [c[:2] for c in commands] == [["graphshard", "generate"], ["graphshard", "train"]] * 3
    ratings, tags, flows = (json.loads((tmp_path / f"{m}.json").read_text()) for m in ("ratings", "tags", "flows"))
    assert flows["task"] == "edge" and flows["test_metrics"]["accuracy"] > 0.9, flows["test_metrics"]
    assert ratings["label_kind"] == "regression" and list(ratings["test_metrics"]) == ["rmse", "mae", "r2"]
    assert ratings["test_metrics"]["r2"] > 0.8, ratings["test_metrics"]
    assert tags["label_kind"] == "multilabel" and list(tags["test_metrics"]) == ["f1_macro", "roc_auc"]
    assert tags["test_metrics"]["f1_macro"] > 0.6 and tags["test_metrics"]["roc_auc"] > 0.8, tags["test_metrics"]


def test_prepare_page_example_runs_as_written(tmp_path):
    pytest.importorskip("duckdb")
    commands, errors = _run_page("guide/prepare.md", tmp_path)
    assert [c[:2] for c in commands] == [
        ["python", "make_tables.py"],
        ["graphshard", "prepare"],
        ["graphshard", "train"],
    ]
    meta = json.loads((tmp_path / "shop" / "metadata.json").read_text())
    assert meta["node_type"] == ["user", "item"] and meta["num_nodes_per_type"] == [2000, 300]
    assert meta["edge_type"] == ["user:buys:item", "item:rev_buys:user"]
    assert not any("warning" in e.lower() or "Traceback" in e for e in errors), errors
    made = errors[2].strip().splitlines()[-1]  # train says where it partitioned, for embed and serve
    assert made.startswith("graphshard: partitions of shop: work/1parts-metis/shop-"), made


def test_config_file_example_is_read_as_written(tmp_path):
    """The training guide's run.yaml is a valid config: --print-config echoes its values (nothing trains)."""
    block = _config_block()
    (tmp_path / "run.yaml").write_text(block)
    done = subprocess.run(
        [sys.executable, "-m", "graphshard.cli", "train", "--config", "run.yaml", "--print-config"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for line in block.splitlines()[1:]:
        key, value = (part.strip() for part in line.split(":", 1))
        printed = re.search(rf"^{key}: (.*)$", done.stdout, re.M)
        assert printed, f"{key} missing from --print-config:\n{done.stdout}"
        assert printed.group(1).strip('"') in (value, str(float(value)) if "e-" in value else value), (
            key,
            printed.group(1),
        )


def test_every_code_block_is_run_or_marked():
    """Every code block of the README and of docs/ is run by a test, or says why not; no block is both."""
    run, problems, waived = _run_blocks(), [], set()
    for page in _pages():
        name = page.relative_to(DOCS).as_posix() if page.is_relative_to(DOCS) else page.name
        for lang, body, line in _fenced(page.read_text()):
            where = f"{name}:{line}"
            if lang not in LANGUAGES:
                problems.append(f"{where}: a block needs one of the languages {sorted(LANGUAGES)}, not {lang!r}")
                continue
            if lang == "text":
                continue
            key = next((k for k in WAIVED if k[0] == name and body.startswith(k[1])), None)
            if key:
                waived.add(key)
            elif body.strip() in run:
                if _marker(body):
                    problems.append(f"{where}: marked as not run, but a test runs it")
            elif not _marker(body):
                problems.append(f"{where}: neither run by a test nor marked '# not run: REASON' in its first line")
    assert not problems, "\n".join(problems)
    assert waived == set(WAIVED), f"waivers without their block: {set(WAIVED) - waived}"


def test_module_map_names_every_module_of_the_packages_it_walks_through() -> None:
    """docs/modules.md walks through partition/, pipeline/dispatch/, prepare/, distributed/, tasks/, train/ and
    cli/ by hand:
    every module there is named (a new module must be placed in the walk)."""
    text = (DOCS / "modules.md").read_text()
    walk = text.split("Within a package", 1)[1].split("## Modules of", 1)[0]
    words = set(re.findall(r"\w+", walk))
    package = Path(graphshard.__file__).parent
    missing = [
        str(p.relative_to(package))
        for top in ("partition", "pipeline/dispatch", "prepare", "distributed", "tasks", "train", "cli")
        for p in sorted((package / top).rglob("*.py"))
        if p.stem not in ("__init__", "__main__") and p.stem not in words
    ]
    assert not missing, "modules docs/modules.md does not name:\n" + "\n".join(missing)


def test_the_site_check_finds_what_a_reader_opening_a_file_would_trip_over(tmp_path):
    """docs/_hooks/check_site.py (run by make docs): a link to a folder (what the site opened from disk once
    showed as a directory listing), a raw Sphinx role and a test marker in a code block are found; a clean
    page is not."""
    sys.path.insert(0, str(DOCS / "_hooks"))
    try:
        from check_site import problems
    finally:
        sys.path.pop(0)
    (tmp_path / "search").mkdir()
    (tmp_path / "search" / "search_index.json").write_text("{}")
    (tmp_path / "guide").mkdir()
    (tmp_path / "guide" / "a.html").write_text('<a href="../index.html">home</a><p><code># not run: x</code></p>')
    (tmp_path / "index.html").write_text(
        '<a href="guide/">guide</a><p>see :class:`Graph`</p><pre><code># not run: needs a GPU\nx</code></pre>'
    )
    found = problems(tmp_path)
    assert len(found) == 3 and all(f.startswith("index.html: ") for f in found), found
    (tmp_path / "index.html").write_text('<a href="guide/a.html">guide</a><pre><code>graphshard --help</code></pre>')
    assert problems(tmp_path) == []


def test_the_browser_check_sees_what_a_reader_would(tmp_path):
    """docs/_hooks/browser_check.py (run by make docs when Chromium is installed) opens pages in headless
    Chromium: a navigation link to a folder renders the browser's directory listing, a raw role shows in the
    rendered text, a page without Material's article is no page; a clean page is none of these."""
    sys.path.insert(0, str(DOCS / "_hooks"))
    try:
        import browser_check
    finally:
        sys.path.pop(0)
    exe = browser_check.browser()
    if exe is None:
        pytest.skip("no Chromium installed (apt-get install chromium)")
    (tmp_path / "guide").mkdir()
    (tmp_path / "index.html").write_text(
        '<nav><a class="md-nav__link" href="guide/">guide</a></nav>'
        '<article class="md-content__inner"><p>see :class:`Graph`</p></article>'
    )
    with tempfile.TemporaryDirectory() as profile:
        home = browser_check.render(exe, (tmp_path / "index.html").as_uri(), profile)
        assert home.article and home.nav == ["guide/"]
        assert browser_check.ROLE.search("".join(home.text))
        folder = browser_check.render(exe, (tmp_path / "guide").as_uri() + "/", profile)
        assert folder.listing and not folder.article
        (tmp_path / "index.html").write_text('<article class="md-content__inner"><p>see Graph</p></article>')
        clean = browser_check.render(exe, (tmp_path / "index.html").as_uri(), profile)
        assert clean.article and not clean.listing and not browser_check.ROLE.search("".join(clean.text))
