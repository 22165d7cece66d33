"""The package's layers: no module imports from a layer above its own, and no modules import each other in a
circle. Function-level imports count as imports (hiding one in a function does not change the design).

The table below is the layer order, bottom to top (see docs/design.md). Each entry names top-level modules or
packages of ``graphshard``; entries on one line are siblings: each may use what lies below, neither the other.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import graphshard

PACKAGE = Path(graphshard.__file__).parent

LAYERS: tuple[tuple[str, ...], ...] = (
    ("__init__", "errors"),  # the root package (version, names resolved on first use) and the exceptions
    ("names", "limits", "memory", "disk", "jit", "progress", "fingerprint", "sparse"),  # ground floor
    ("mixing",),  # counter-based random bits for compiled kernels (uses jit)
    ("graph",),  # the in-memory graph
    ("ids",),  # ID ranges and conversions
    ("ranges",),  # which ID range each ID falls in, compiled (uses ids and jit)
    ("book",),  # the partition book
    ("format",),  # write and load: the partition format
    ("chunked",),  # input: the chunked graph format
    ("prepare",),  # input: users' tables into a chunked graph (DuckDB or Spark)
    ("partition",),  # assign → relabel → build, in memory
    ("datasets", "stats"),  # input datasets and generators; partition statistics
    ("sampling",),  # single-partition neighbour sampling
    ("device",),  # accelerators: a rank's device, pinned buffers, copy streams, rows kept on the device
    ("distributed",),  # the runtime: processes, collectives, distributed graph, sampling and loaders
    ("pipeline",),  # out-of-core assign and dispatch, run as distributed jobs
    ("models",),  # the GNN models
    ("infer",),  # layer-wise inference
    ("train",),  # training, its evaluation, embeddings from checkpoints
    ("serve", "plan", "plot"),  # online inference over HTTP; reports: predicted memory of every step; figures
    ("cli",),  # the command line
)

# Function-level imports of graphshard modules that may point upwards or close a circle, each with its reason.
# Lazy imports of heavy optional dependencies (matplotlib, tensorboard, torch) import no graphshard module
# and need no entry here.
ALLOWED: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Import:
    importer: str  # dotted module name
    line: int
    imported: str  # dotted module name
    in_function: bool

    def __str__(self) -> str:
        where = "function-level " if self.in_function else ""
        return f"{self.importer} line {self.line}: {where}import of {self.imported}"


def module_name(path: Path) -> str:
    parts = ["graphshard", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> list[Import]:
    """Every import of a graphshard module in ``path``, at any depth; ``from pkg import sub`` names ``pkg.sub``."""
    tree = ast.parse(path.read_text(), str(path))
    in_function = {
        id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in ast.walk(f)
    }
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        for target in dict.fromkeys(targets):
            if target == "graphshard" or target.startswith("graphshard."):
                found.append(Import(name, node.lineno, _existing(target, modules), id(node) in in_function))
    return found


def _existing(target: str, modules: dict[str, Path]) -> str:
    while target not in modules and "." in target:
        target = target.rpartition(".")[0]
    return target


def unit(name: str) -> str:
    """The entry of :data:`LAYERS` a module belongs to."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def level(name: str) -> int:
    u = unit(name)
    return next(i for i, entry in enumerate(LAYERS) if u in entry)


def every_import() -> list[Import]:
    modules = all_modules()
    return [
        i
        for name, path in modules.items()
        for i in imports_of(name, path, modules)
        if (i.importer, i.imported) not in ALLOWED
    ]


def test_every_module_has_a_layer() -> None:
    units = {unit(m) for m in all_modules()}
    listed = {u for entry in LAYERS for u in entry}
    assert units - listed == set(), "modules or packages missing from LAYERS"
    assert listed - units == set(), "LAYERS names modules or packages that do not exist"


def test_no_import_runs_upwards() -> None:
    wrong = [
        f"{i} (layer {unit(i.imported)!r} lies above {unit(i.importer)!r})"
        for i in every_import()
        if level(i.imported) > level(i.importer)
    ]
    siblings = [
        f"{i} (siblings {unit(i.importer)!r} and {unit(i.imported)!r} may not import each other)"
        for i in every_import()
        if level(i.imported) == level(i.importer) and unit(i.imported) != unit(i.importer)
    ]
    assert not wrong + siblings, "imports against the layer order:\n" + "\n".join(wrong + siblings)


def test_no_circle() -> None:
    """No circle among modules. Importing ``a.b.c`` runs the packages ``a`` and ``a.b`` first, so an import
    also depends on the packages around its target (except those that hold the importer)."""
    edges: dict[str, dict[str, Import]] = {}
    for i in every_import():
        targets = [i.imported]
        parts = i.imported.split(".")
        targets += [".".join(parts[:k]) for k in range(2, len(parts))]
        for t in targets:
            if t != i.importer and not i.importer.startswith(t + "."):
                edges.setdefault(i.importer, {}).setdefault(t, i)
    circles = _circles(edges)
    assert not circles, "modules that import each other in a circle:\n" + "\n\n".join(
        "\n".join(f"  {edges[a][b]}" for a, b in zip(c, c[1:] + c[:1])) for c in circles
    )


def _circles(edges: dict[str, dict[str, Import]]) -> list[list[str]]:
    """One circle through each strongly connected group of modules (Tarjan's algorithm, then a walk)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return [_walk(sorted(g)[0], g, edges) for g in groups]


def _walk(start: str, group: set[str], edges: dict[str, dict[str, Import]]) -> list[str]:
    """The shortest circle from ``start`` back to itself inside ``group`` (breadth first)."""
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for v in frontier:
            for w in sorted(edges.get(v, {})):
                if w not in group:
                    continue
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return path[::-1]
                if w not in previous:
                    previous[w] = v
                    following.append(w)
        frontier = following
    return [start]
