"""Helpers shared by the robustness tests: a snapshot of a directory tree, to prove nothing else changed."""

from __future__ import annotations

from pathlib import Path

import pytest


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path below ``root`` (relative) with the bytes of each file (None for directories)."""
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


@pytest.fixture
def user_dir(tmp_path: Path) -> Path:
    """A user's directory holding files graphshard did not write."""
    d = tmp_path / "home" / "mine"
    d.mkdir(parents=True)
    (d / "thesis.tex").write_text("years of work\n")
    (d / "notes").mkdir()
    (d / "notes" / "todo.txt").write_text("keep me\n")
    return d
