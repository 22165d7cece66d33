"""No private name is used outside the module that defines it: a name with a leading underscore (a function,
class, module-level name or attribute) is read as ``thing._name`` or imported only where it is defined.
``self._name`` and ``cls._name`` are a class's own business and are not counted."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import graphshard

PACKAGE = Path(graphshard.__file__).parent


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _definitions(trees: dict[Path, ast.Module]) -> dict[str, set[Path]]:
    """Each private name defined in graphshard, with the modules that define it."""
    defined: dict[str, set[Path]] = defaultdict(set)
    for path, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names = [node.name]
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names = [node.attr]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names = [node.target.id]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            else:
                continue
            for name in names:
                if _private(name):
                    defined[name].add(path)
    return defined


def _own(node: ast.Attribute) -> bool:
    base = node.value
    if isinstance(base, ast.Name) and base.id in ("self", "cls"):
        return True
    return isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "super"


def test_no_private_name_is_used_outside_its_module() -> None:
    trees = {p: ast.parse(p.read_text(), str(p)) for p in sorted(PACKAGE.rglob("*.py"))}
    defined = _definitions(trees)
    found = []
    for path, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _private(node.attr) and not _own(node):
                used = [(node.lineno, node.attr, ast.unparse(node))]
            elif isinstance(node, ast.ImportFrom):
                used = [(node.lineno, a.name, f"from {node.module} import {a.name}") for a in node.names]
            else:
                continue
            for line, name, text in used:
                if _private(name) and defined.get(name) and path not in defined[name]:
                    where = sorted(str(p.relative_to(PACKAGE)) for p in defined[name])
                    found.append(f"{path.relative_to(PACKAGE)}:{line}: {text} (defined in {', '.join(where)})")
    assert not found, "private names used outside their modules:\n" + "\n".join(found)
