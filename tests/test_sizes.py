"""Size limits that keep the code readable at once, counted without docstrings (the public API's Google-style
docstrings are documentation, not code to hold in one's head): no module of ``src/graphshard`` over 400 lines,
and no function over 60 lines (from its ``def`` to its last line) except those docs/design.md names (each with
its reason), so that the list there is exact: a function that grows past the limit, or one that shrank back
under it, fails here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import graphshard

PACKAGE = Path(graphshard.__file__).parent
DESIGN = Path(__file__).resolve().parents[1] / "docs" / "design.md"
MODULE_LINES, FUNCTION_LINES = 400, 60


def _long_functions() -> set[str]:
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if _length(node) > FUNCTION_LINES:
                    found.add(f"{path.relative_to(PACKAGE).as_posix()}:{node.name}")
    return found


def _length(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the ``def`` to the function's end, less its docstring's."""
    lines = (node.end_lineno or node.lineno) - node.lineno + 1
    first = node.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        lines -= (first.end_lineno or first.lineno) - first.lineno + 1
    return lines


def _named_exceptions() -> set[str]:
    """The rows of design.md's table of long functions: `module.py:function`."""
    section = DESIGN.read_text().split("## Functions over 60 lines", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([\w/]+\.py:\w+)` \|", section, re.M))


def _docstring_lines(tree: ast.Module) -> int:
    """Lines of every docstring in a module: its own, its classes' and its functions'."""
    count = 0
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                if isinstance(first.value.value, str):
                    count += (first.end_lineno or first.lineno) - first.lineno + 1
    return count


def _module_lines(path: Path) -> int:
    text = path.read_text()
    return len(text.splitlines()) - _docstring_lines(ast.parse(text, str(path)))


def test_no_module_is_over_400_lines() -> None:
    long = [
        f"{p.relative_to(PACKAGE)}: {n} lines"
        for p in sorted(PACKAGE.rglob("*.py"))
        if (n := _module_lines(p)) > MODULE_LINES
    ]
    assert not long, "modules over 400 lines:\n" + "\n".join(long)


def test_long_functions_are_the_ones_design_md_names() -> None:
    found, named = _long_functions(), _named_exceptions()
    assert named, "docs/design.md lists no long functions (the section or its table is missing)"
    assert found - named == set(), f"functions over {FUNCTION_LINES} lines not named in docs/design.md"
    assert named - found == set(), "docs/design.md names functions that are no longer over the limit"
