"""The version is written in one place, pyproject.toml: the installed package's metadata carries it to
``graphshard.__version__`` and ``graphshard --version``, and CHANGELOG.md has a section for it (or the
unreleased work on the way to it)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

import graphshard

ROOT = Path(__file__).resolve().parents[1]
VERSION = metadata.version("graphshard")


def test_version_is_the_package_metadata():
    written = re.search(r'^version = "([^"]+)"$', (ROOT / "pyproject.toml").read_text(), re.M)
    assert written, "pyproject.toml names no version"
    assert VERSION == written.group(1), "the installed metadata is stale: reinstall (pip install -e .)"
    assert graphshard.__version__ == VERSION
    assert "__version__" in dir(graphshard)


@pytest.mark.parametrize("how", ["module", "script"])
def test_command_line_prints_the_version(how):
    if how == "module":
        argv = [sys.executable, "-m", "graphshard.cli", "--version"]
    else:  # the console script pip installs beside this interpreter
        script = shutil.which("graphshard", path=str(Path(sys.executable).parent))
        if script is None:
            pytest.skip("no graphshard console script beside this interpreter")
        argv = [script, "--version"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == f"graphshard {VERSION}"


def test_changelog_has_a_section_for_the_version():
    text = (ROOT / "CHANGELOG.md").read_text()
    sections = re.findall(r"^## \[([^\]]+)\](.*)$", text, re.M)
    names = [name for name, _ in sections]
    assert names and names[0] == "Unreleased", names  # Keep a Changelog: the unreleased work comes first
    for name, rest in sections[1:]:
        assert re.fullmatch(r"\d+\.\d+\.\d+", name) and re.fullmatch(r" - \d{4}-\d{2}-\d{2}", rest), (name, rest)
    assert VERSION in names or "Unreleased" in names, names
