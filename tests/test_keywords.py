"""Keyword arguments past the fourth: every function of ``src/graphshard`` with more than four parameters takes
the rest keyword-only, and every dataclass of more than four fields makes the rest keyword-only (``_: KW_ONLY``),
so that no call passes a wall of positional arguments (mypy checks the calls against these signatures).

Excepted, each for its reason: compiled kernels (``@kernel``, ``@intrinsic``: numba passes arrays in order),
channel handlers (``@handler``: a request carries its arguments in order), the overrides of PyTorch and PyG
methods (their callers pass arguments in order), and the functions below, which a library calls in order."""

from __future__ import annotations

import ast
from pathlib import Path

import graphshard

PACKAGE = Path(graphshard.__file__).parent
DECORATORS = {"kernel", "intrinsic", "handler"}
OVERRIDES = {"forward", "message", "backward"}  # torch.nn.Module, PyG's MessagePassing, autograd.Function
CALLED_IN_ORDER = {
    "distributed/ranks/launcher.py:_entry": "torch.multiprocessing.start_processes passes (index, *args)",
    "train/run.py:_rank_main": "launch() passes a rank's arguments in order",
    "distributed/remote/access.py:_expand_local": "a partial that by_owner completes with the positions",
    "distributed/remote/access.py:_expand_args": "a partial that by_owner completes with the positions",
    "distributed/remote/embedding.py:_stage_args": "a partial that by_owner completes with the positions",
}


def _decorated(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    names = {ast.unparse(d).split("(")[0].split(".")[-1] for d in node.decorator_list}
    return bool(names & DECORATORS)


def _positional(node: ast.FunctionDef | ast.AsyncFunctionDef, in_class: bool) -> int:
    names = [a.arg for a in node.args.posonlyargs + node.args.args]
    static = any(ast.unparse(d) == "staticmethod" for d in node.decorator_list)
    return len(names) - (1 if in_class and not static and names and names[0] in ("self", "cls") else 0)


def _walls() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        rel = path.relative_to(PACKAGE).as_posix()
        parents = {c: n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any("dataclass" in ast.unparse(d) for d in node.decorator_list):
                fields = [s for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
                plain = [s for s in fields if "ClassVar" not in ast.unparse(s.annotation)]
                marker = next((i for i, s in enumerate(plain) if ast.unparse(s.annotation) == "KW_ONLY"), len(plain))
                kw_only = any("kw_only=True" in ast.unparse(d) for d in node.decorator_list)
                if marker > 4 and not kw_only:
                    found.append(f"{rel}:{node.name}: {marker} positional fields")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                in_class = isinstance(parents.get(node), ast.ClassDef)
                n = _positional(node, in_class)
                if n <= 4 or _decorated(node) or node.name in OVERRIDES or f"{rel}:{node.name}" in CALLED_IN_ORDER:
                    continue
                found.append(f"{rel}:{node.name}: {n} positional parameters")
    return found


def test_no_function_or_dataclass_takes_more_than_four_positionally() -> None:
    walls = _walls()
    assert not walls, "more than four positional parameters (add * after the fourth):\n" + "\n".join(walls)


def test_the_exceptions_still_exist() -> None:
    defined = set()
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                defined.add(f"{rel}:{node.name}")
    assert set(CALLED_IN_ORDER) - defined == set()
