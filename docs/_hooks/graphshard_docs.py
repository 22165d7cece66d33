"""MkDocs hooks of graphshard's site (named in mkdocs.yml; this directory is left out of the site).

- ``<!-- api: NAME NAME ... -->`` in a page becomes one mkdocstrings block per public object: a NAME that is
  a package stands for every name in its ``__all__``; any other NAME is a dotted path to one object. Each
  object is looked up by importing it and rendered from the module that defines it, so the reference follows
  the code when a module moves or a package exports its names lazily (``graphshard``,
  ``graphshard.distributed``).
- ``<!-- module-map -->`` becomes a table of every module under ``src/graphshard`` with the first sentence
  of its docstring, read with ``ast`` (nothing imported), so the map never misses a module;
  ``<!-- benchmark-map -->`` likewise lists the scripts in ``benchmarks/``.
- ``design.md`` is written by the project's design page owner; until it exists a stand-in page keeps the
  navigation and the links to it valid.
- Readers see no test markers: the first line ``# not run: REASON`` of a code block (which the tests need) is
  left out of the page. Sphinx roles left in docstrings (``:class:`X```, ``:func:`~a.b.X```) render as code.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import warnings
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "graphshard"
API = re.compile(r"^<!-- api: (.+?) -->$", re.M)
MODULE_MAP = re.compile(r"^<!-- module-map -->$", re.M)  # markers stand alone on their line
BENCHMARK_MAP = re.compile(r"^<!-- benchmark-map -->$", re.M)
NOT_RUN_LINE = re.compile(r"^([ \t]*```[a-z]*\n(?:[ \t]*#!.*\n)?)[ \t]*# not run(?: as written)?: .*\n", re.M)
SPHINX_ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj):`~?\.?([^`]+)`")


def _where(obj: object) -> str:
    """The dotted path of the module that defines ``obj``, and its name there."""
    module = inspect.getmodule(obj)
    return f"{module.__name__}.{obj.__qualname__}" if module else ""


def _objects(names: str) -> list[tuple[str, str]]:
    """(public name, defining path) for every object the marker names."""
    out = []
    for name in names.split():
        try:
            with warnings.catch_warnings():  # importing PyG warns about TorchScript; that is not the site's
                warnings.simplefilter("ignore")
                package = importlib.import_module(name)
        except ModuleNotFoundError:
            package = None
        if package is not None:
            for member in package.__all__:
                out.append((f"{name}.{member}", _where(getattr(package, member))))
            continue
        module, _, attr = name.rpartition(".")
        out.append((name, _where(getattr(importlib.import_module(module), attr))))
    return out


def _api(match: re.Match) -> str:
    blocks = []
    for public, path in _objects(match.group(1)):
        if not path:
            raise ValueError(f"API marker: cannot find where {public} is defined")
        blocks.append(f"::: {path}\n")
    return "\n".join(blocks)


def _summary(path: Path) -> str:
    """The first sentence of the module docstring's first paragraph, in Markdown."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    text = " ".join(doc.split("\n\n")[0].split())
    cut = re.search(r"(?<=\.)\s(?=[A-Z`(])", text)
    text = text[: cut.start()] if cut else text
    text = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", text).replace("``", "`")
    return text.replace("|", "\\|") or "–"


def _module_map() -> str:
    rows = ["| module | what it holds (the first sentence of its docstring) |", "|---|---|"]
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC.parent).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        text = _summary(path)
        rows.append(f"| `{'.'.join(parts)}` | {text} |")
    return "\n".join(rows)


def _benchmark_map() -> str:
    rows = ["| script | what it measures (the first sentence of its docstring) |", "|---|---|"]
    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        rows.append(f"| `benchmarks/{path.name}` | {_summary(path)} |")
    return "\n".join(rows)


def on_files(files, config):
    if files.get_file_from_path("design.md") is None:
        files.append(
            File.generated(
                config,
                "design.md",
                content=(
                    "# Design\n\nThe design page (the pipeline, the packages and what each owns) is being written; "
                    "until it lands, the [module map](modules.md) lists every module with what it holds.\n"
                ),
            )
        )
    return files


def on_page_markdown(markdown, page, config, files):
    markdown = NOT_RUN_LINE.sub(r"\1", markdown)  # the tests' marker, not the reader's business
    markdown = API.sub(_api, markdown)
    markdown = MODULE_MAP.sub(lambda _: _module_map(), markdown)
    return BENCHMARK_MAP.sub(lambda _: _benchmark_map(), markdown)


def on_page_content(html, page, config, files):
    """Sphinx roles that docstrings still carry, rendered as code (mkdocstrings' Google style does not read
    them): ``:class:`~graphshard.book.RangePartitionBook``` becomes ``RangePartitionBook`` in code."""
    return SPHINX_ROLE.sub(
        lambda m: f"<code>{m.group(1).rsplit('.', 1)[-1] if '~' in m.group(0) else m.group(1)}</code>", html
    )
