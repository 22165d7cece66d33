"""The package's layers: no module imports from a layer above its own, and no modules import each other in a
circle. Function-level imports count as imports (hiding one in a function does not change the design).

The table below is the layer order, bottom to top (see docs/design.md). Each entry names top-level modules or
packages of ``graphshard``; entries on one line are siblings: each may use what lies below, neither the other.
The tables are tight: every entry above the ground imports from the floor just below it. ``WINGS`` orders
the wings of ``graphshard.distributed`` by the same rules.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

import graphshard

PACKAGE = Path(graphshard.__file__).parent

LAYERS: tuple[tuple[str, ...], ...] = (
    # the root package (version, names resolved on first use), the exceptions, and what imports neither
    ("__init__", "errors", "jit", "progress", "fingerprint"),
    # ground floor; device: accelerators (a rank's device, pinned buffers, copy streams, rows kept there)
    # mixing: counter-based random bits for compiled kernels
    ("names", "limits", "memory", "disk", "sparse", "device", "mixing"),
    ("graph",),  # the in-memory graph
    ("ids", "models"),  # ID ranges and conversions; the GNN models (plain PyTorch/PyG over a graph's types)
    ("ranges",),  # which ID range each ID falls in, compiled (uses ids and jit)
    ("book", "sampling"),  # the partition book; single-partition neighbour sampling
    ("format",),  # write and load: the partition format
    ("chunked", "plot", "stats"),  # input: the chunked graph format; figures; partition statistics
    ("prepare", "partition"),  # users' tables into a chunked graph; assign → relabel → build, in memory
    ("datasets", "distributed"),  # input datasets and generators; the runtime (see WINGS)
    ("pipeline", "infer"),  # out-of-core assign and dispatch, run as distributed jobs; layer-wise inference
    ("tasks",),  # what is learnt: options, tasks, the loop, checkpoints, restoring a run
    ("train", "serve"),  # the commands that start runs (train, embed); online inference over HTTP
    ("plan",),  # the planner: predicted memory of every step (uses train's cost models)
    ("cli",),  # the command line
)

# The wings of graphshard.distributed, bottom to top, in the same terms (see each wing's __init__ docstring).
WINGS: tuple[tuple[str, ...], ...] = (
    ("__init__", "host", "stores"),  # the public names (resolved on first use); this process; local stores
    ("transport",),  # bytes between processes: network, frames, handshake, TLS, channels, liveness, wire
    ("ranks",),  # launcher, process context, collectives, interrupts
    ("groups",),  # RPC groups, their channels, reductions
    ("remote",),  # any partition's data from any rank: sampler, feature store, caches, DistTensor
    ("runtime",),  # what users call: DistGraph, work split, original IDs, session
    ("loaders",),  # mini-batches: batch building, sampler workers, prefetch, loaders
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


@dataclass(frozen=True)
class Floors:
    """A layer table over the modules of one package: ``depth`` is how many dotted parts name its units."""

    name: str
    table: tuple[tuple[str, ...], ...]
    package: str  # dotted; its units are the names one level below it

    def unit(self, module: str) -> str | None:
        """The entry of the table ``module`` belongs to; None when it lies outside the package."""
        parts, top = module.split("."), self.package.split(".")
        if parts[: len(top)] != top:
            return None
        return parts[len(top)] if len(parts) > len(top) else "__init__"

    def level(self, module: str) -> int:
        u = self.unit(module)
        return next(i for i, entry in enumerate(self.table) if u in entry)

    def imports(self) -> list[Import]:
        """The imports between two different units of the package."""
        return [
            i
            for i in every_import()
            if self.unit(i.importer) is not None
            and self.unit(i.imported) is not None
            and self.unit(i.importer) != self.unit(i.imported)
        ]


PACKAGE_FLOORS = Floors("layer", LAYERS, "graphshard")
WING_FLOORS = Floors("wing", WINGS, "graphshard.distributed")
BOTH = pytest.mark.parametrize("floors", [PACKAGE_FLOORS, WING_FLOORS], ids=["package", "distributed"])


def unit(name: str) -> str:
    """The entry of :data:`LAYERS` a module belongs to."""
    return PACKAGE_FLOORS.unit(name) or ""


def every_import() -> list[Import]:
    modules = all_modules()
    return [
        i
        for name, path in modules.items()
        for i in imports_of(name, path, modules)
        if (i.importer, i.imported) not in ALLOWED
    ]


@BOTH
def test_every_module_has_a_layer(floors: Floors) -> None:
    units = {floors.unit(m) for m in all_modules()} - {None}
    listed = {u for entry in floors.table for u in entry}
    assert units - listed == set(), f"modules or packages missing from the {floors.name} table"
    assert listed - units == set(), f"the {floors.name} table names modules or packages that do not exist"


@BOTH
def test_no_import_runs_upwards(floors: Floors) -> None:
    found = floors.imports()
    wrong = [
        f"{i} ({floors.name} {floors.unit(i.imported)!r} lies above {floors.unit(i.importer)!r})"
        for i in found
        if floors.level(i.imported) > floors.level(i.importer)
    ]
    siblings = [
        f"{i} (siblings {floors.unit(i.importer)!r} and {floors.unit(i.imported)!r} may not import each other)"
        for i in found
        if floors.level(i.imported) == floors.level(i.importer)
    ]
    assert not wrong + siblings, "imports against the order:\n" + "\n".join(wrong + siblings)


@BOTH
def test_every_unit_sits_as_low_as_its_imports_allow(floors: Floors) -> None:
    """The table is tight: each unit above the ground imports from the floor just below it, so that the order
    claims no more than the code needs (a unit placed too high would let a wrong import pass)."""
    below: dict[str, set[int]] = {}
    for i in floors.imports():
        below.setdefault(floors.unit(i.importer) or "", set()).add(floors.level(i.imported))
    loose = [
        f"{u!r} (floor {k}) imports nothing from floor {k - 1}"
        for k, entry in enumerate(floors.table)
        for u in entry
        if k > 0 and k - 1 not in below.get(u, set())
    ]
    assert not loose, f"{floors.name}s that could sit lower:\n" + "\n".join(loose)


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
