"""The public API documents itself: every name that ``graphshard``, ``graphshard.distributed``,
``graphshard.train`` and ``graphshard.serve`` export (their ``__all__``), and every public method of an
exported class that takes parameters, has a Google-style docstring (mkdocs.yml's ``docstring_style``; the
API pages in docs/api render them with mkdocstrings): a one-line summary, every parameter under ``Args:``
(a class's constructor parameters in the class docstring, or ``Attributes:`` for a dataclass), and
``Returns:`` (or ``Yields:``) where something is returned. No docstring of theirs uses a Sphinx role
(``:class:`X```), which mkdocstrings does not render, and no module cites DESIGN.md, a file outside the
repository (docs/format.md and docs/design.md hold what it says).

The sections are read with griffe's Google parser, the one mkdocstrings renders them with (``griffelib``, in the
``test`` extra)."""

from __future__ import annotations

import importlib
import inspect
import re
import warnings
from pathlib import Path
from typing import Any

import pytest

PACKAGES = ("graphshard", "graphshard.distributed", "graphshard.train", "graphshard.serve")
SPHINX_ROLE = re.compile(r":(class|func|mod|meth|attr):`")
SRC = Path(__file__).resolve().parents[1] / "src" / "graphshard"


def _exports() -> list[tuple[str, Any]]:
    """(``package.name``, object) for every name the packages export."""
    out = []
    with warnings.catch_warnings():  # importing PyG warns about TorchScript; not what is tested here
        warnings.simplefilter("ignore")
        for package in PACKAGES:
            module = importlib.import_module(package)
            out.extend((f"{package}.{name}", getattr(module, name)) for name in module.__all__)
    return out


def _methods(cls: type) -> list[tuple[str, Any]]:
    """The public methods a class defines itself (not inherited) that take parameters besides self/cls."""
    out = []
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        func = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
        if not inspect.isfunction(func) or not _parameters(func):
            continue
        out.append((f"{cls.__name__}.{name}", func))
    return out


def _documented() -> list[tuple[str, Any]]:
    """Every object whose docstring is checked: the exports and the methods of the exported classes."""
    out = []
    for name, obj in _exports():
        out.append((name, obj))
        if inspect.isclass(obj):
            out.extend((f"{name.rpartition('.')[0]}.{method}", func) for method, func in _methods(obj))
    return out


def _doc(obj: Any) -> str:
    """The object's own docstring (not a base class's), cleaned; "" when it has none. A dataclass without
    one gets its signature as ``__doc__`` (``Name(a, b)``), which documents nothing, so it counts as none."""
    doc = obj.__dict__.get("__doc__") if inspect.isclass(obj) else obj.__doc__
    doc = inspect.cleandoc(doc or "")
    if inspect.isclass(obj) and doc.startswith(f"{obj.__name__}("):
        return ""
    return doc


def _signature(obj: Any) -> inspect.Signature | None:
    try:
        return inspect.signature(obj)
    except (TypeError, ValueError):  # an exception class: the builtin constructor has none
        return None


def _parameters(obj: Any) -> list[str]:
    """The parameters the docstring must describe: not self/cls, *args/**kwargs nor private (``_name``) ones."""
    sig = _signature(obj)
    if sig is None:
        return []
    return [
        p.name
        for p in sig.parameters.values()
        if p.name not in ("self", "cls")
        and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        and not p.name.startswith("_")
    ]


def _returns_something(obj: Any) -> bool:
    if inspect.isclass(obj):
        return False
    sig = _signature(obj)
    return sig is not None and sig.return_annotation not in (None, "None", inspect.Signature.empty)


def _sections(doc: str) -> dict[str, list[Any]]:
    """Kind of section (``parameters``, ``attributes``, ``returns``, ...) → its sections, by griffe's Google
    parser."""
    import griffe  # the test extra's griffelib: the parser the site renders these docstrings with

    out: dict[str, list[Any]] = {}
    for section in griffe.Docstring(doc, parser="google").parse():
        out.setdefault(section.kind.value, []).append(section)
    return out


def _names(sections: dict[str, list[Any]], *kinds: str) -> set[str]:
    return {item.name for kind in kinds for section in sections.get(kind, []) for item in section.value}


OBJECTS = _documented()
IDS = [name for name, _ in OBJECTS]


def test_every_export_is_listed():
    names = [name for name, _ in _exports()]
    assert len(names) > 30 and len(names) == len(set(names))


@pytest.mark.parametrize(("name", "obj"), OBJECTS, ids=IDS)
def test_docstring_has_a_one_line_summary(name, obj):
    doc = _doc(obj)
    assert doc, f"{name} has no docstring"
    lines = doc.splitlines()
    assert lines[0].strip(), f"{name}: the docstring starts with an empty line"
    assert len(lines) == 1 or not lines[1].strip(), (
        f"{name}: the summary is one line, then an empty line (Google style): {lines[:2]}"
    )


@pytest.mark.parametrize(("name", "obj"), OBJECTS, ids=IDS)
def test_every_parameter_is_documented(name, obj):
    wanted = _parameters(obj)
    if not wanted:
        return
    sections = _sections(_doc(obj))
    kinds = ("parameters", "attributes") if inspect.isclass(obj) else ("parameters",)
    missing = [p for p in wanted if p not in _names(sections, *kinds)]
    assert not missing, f"{name}: parameters not under Args:{' or Attributes:' if len(kinds) > 1 else ''}: {missing}"


@pytest.mark.parametrize(("name", "obj"), OBJECTS, ids=IDS)
def test_what_is_returned_is_documented(name, obj):
    if not _returns_something(obj):
        return
    sections = _sections(_doc(obj))
    assert "returns" in sections or "yields" in sections, f"{name}: no Returns: (or Yields:) section"


@pytest.mark.parametrize(("name", "obj"), OBJECTS, ids=IDS)
def test_documented_parameters_exist(name, obj):
    """An Args: entry names a parameter of the signature (a renamed parameter is not left documented)."""
    if _signature(obj) is None:
        return
    sig = _signature(obj)
    assert sig is not None
    documented = _names(_sections(_doc(obj)), "parameters")
    extra = documented - set(sig.parameters)
    assert not extra, f"{name}: Args: names what the signature does not take: {sorted(extra)}"


@pytest.mark.parametrize(("name", "obj"), OBJECTS, ids=IDS)
def test_no_sphinx_roles(name, obj):
    found = SPHINX_ROLE.findall(_doc(obj))
    assert not found, f"{name}: Sphinx roles (:{found[0]}:`...`), which mkdocstrings does not render"


def test_no_module_cites_design_md_sections():
    """DESIGN.md is not in the repository: docs/format.md and docs/design.md are the pages to cite."""
    cited = [
        f"{path.relative_to(SRC.parent)}:{n}"
        for path in sorted(SRC.rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if "DESIGN.md §" in line
    ]
    assert not cited, f"cite docs/format.md or docs/design.md instead: {cited}"
