"""Output directories graphshard may write into: its own earlier outputs, new or empty ones, and
nothing else unless the user says ``overwrite``.

Every output directory gets a marker file, :data:`MARKER`, naming the kind of output (and, for whole-
directory outputs, the entries it consists of). A directory is recognised as ours when it carries the
marker, or (outputs written before the marker existed) when it holds the file that kind always writes
last (``KINDS[kind]``; for partitions, a graphshard config JSON). Writing (:mod:`.staging`) never
removes anything but entries graphshard writes or wrote there.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import InputError, WriteError

MARKER = ".graphshard-output.json"

# kind -> a file name whose presence identifies that kind's earlier output (pre-marker layouts)
KINDS = {
    "partitions": None,  # recognised by a graphshard config JSON (see _is_partition_dir)
    "chunked": "metadata.json",
    "dataset": "meta.json",
    "assignment": "partition_meta.json",
    "parmetis": None,
    "embeddings": None,  # per-node-type embeddings of a heterogeneous graph (train --save-embeddings)
    "run-log": None,  # TensorBoard event files and metrics.csv (train --log-dir)
}


def _marker(path: Path) -> dict:
    try:
        raw = json.loads((path / MARKER).read_text())
    except (OSError, ValueError):
        return {}
    return raw if isinstance(raw, dict) and raw.get("created_by") == "graphshard" else {}


def _marker_kind(path: Path) -> str | None:
    kind = _marker(path).get("kind")
    return kind if isinstance(kind, str) else None


def marker_entries(path: Path, kind: str) -> list[str]:
    """The top-level entries graphshard's ``kind`` output in ``path`` wrote, as its marker lists them
    (unchecked; none when the marker is of another kind)."""
    marker = _marker(path)
    entries = marker.get("entries") if marker.get("kind") == kind else None
    return [e for e in entries if isinstance(e, str)] if isinstance(entries, list) else []


def is_partition_config(path: Path) -> bool:
    """Whether ``path`` is a graphshard partition config JSON (read only as far as needed)."""
    try:
        with open(path) as f:
            raw = json.load(f)
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    return isinstance(raw, dict) and raw.get("format") == "graphshard"


# hidden work directories of interrupted partition runs (staging, dispatch resume state)
_OWN_HIDDEN = (".staging-", ".dispatch-")


def _recognised(path: Path, kind: str) -> bool:
    found = _marker_kind(path)
    if found is not None:
        return found == kind
    if kind == "partitions":
        names = [p.name for p in path.iterdir()]
        return (
            any(is_partition_config(path / n) for n in names if n.endswith(".json") and not n.startswith("."))
            or bool(names)
            and all(n.startswith(_OWN_HIDDEN) for n in names)
        )
    legacy = KINDS[kind]
    return legacy is not None and (path / legacy).is_file()


# kind -> the file an earlier output of that kind names its graph in, and the key (partitions: their configs)
GRAPH_FILES = {
    "chunked": ("metadata.json", "graph_name"),
    "dataset": ("meta.json", "name"),
    "assignment": ("partition_meta.json", "graph_name"),
}
_WHAT = {"partitions": "partitions", "chunked": "chunks", "dataset": "dataset", "assignment": "partition assignment"}


def check_output_dir(path: str | os.PathLike, kind: str, overwrite: bool = False, graph: str | None = None) -> Path:
    """Check that ``path`` may receive (or be replaced by) output of ``kind``; return it resolved.

    Allowed: a path that does not exist, an empty directory, or a directory recognised as graphshard's
    own output of the same kind -- and, given the ``graph`` to be written, of that graph (one rule for
    every writer, see :func:`check_same_graph`). Anything else raises :class:`InputError` naming the
    directory, unless ``overwrite`` is true. A regular file (or anything that is not a directory) is
    always refused.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown output kind {kind!r}")
    target = Path(path).expanduser().resolve()
    if target.exists() and not target.is_dir():
        raise InputError(f"{target}: output path exists and is not a directory")
    if not target.exists() or overwrite:
        return target
    if _recognised(target, kind):
        if graph is not None:
            check_same_graph(target, kind, graph)
        return target
    entries = sorted(p.name for p in target.iterdir())
    if not entries:
        return target
    found = _marker_kind(target)
    what = (
        f"it holds graphshard {found} output, not {kind}"
        if found
        else f"it holds files graphshard did not write ({', '.join(entries[:3])}{', ...' if len(entries) > 3 else ''})"
    )
    raise InputError(
        f"{target}: refusing to write {kind} output into this directory: {what}. "
        "Choose a new or empty directory, or pass --overwrite (overwrite=True) to write into it anyway "
        "(what graphshard writes replaces entries of the same name; other files are kept)"
    )


def mark_output_dir(path: str | os.PathLike, kind: str, entries: list[str] | None = None) -> None:
    """Write the marker recognising ``path`` as graphshard's ``kind`` output (atomically); ``entries``
    lists the top-level files and directories that output consists of (replaced by the next run)."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    content = {"created_by": "graphshard", "kind": kind, **({"entries": entries} if entries is not None else {})}
    if _marker(path) == content or entries is None and _marker_kind(path) == kind:
        return
    tmp = path / f".{MARKER}.tmp-{os.getpid()}"
    tmp.write_text(json.dumps(content) + "\n")
    os.replace(tmp, path / MARKER)


def prepare_output_dir(path: str | os.PathLike, kind: str, overwrite: bool = False, graph: str | None = None) -> Path:
    """:func:`check_output_dir`, then create the directory and mark it as ours; returns it resolved."""
    target = check_output_dir(path, kind, overwrite, graph)
    mark_output_dir(target, kind)
    return target


def other_graph_configs(out_dir: Path, graph_name: str) -> list[Path]:
    """Partition configs in ``out_dir`` that describe a graph other than ``graph_name``."""
    return sorted(
        p
        for p in out_dir.glob("*.json")
        if not p.name.startswith(".") and p.name != f"{graph_name}.json" and is_partition_config(p)
    )


def graph_held(path: Path, kind: str) -> str | None:
    """The name of the graph whose ``kind`` output ``path`` holds, as that output records it (None: it
    records none, or cannot be read: nothing to compare)."""
    if kind not in GRAPH_FILES:
        return None
    name, key = GRAPH_FILES[kind]
    try:
        raw = json.loads((path / name).read_text())
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return None
    held = raw.get(key) if isinstance(raw, dict) else None
    return held if isinstance(held, str) else None


def check_same_graph(out_dir: Path, kind: str, graph: str) -> None:
    """The rule every writer follows: an output directory holds one graph. Raise :class:`InputError` when
    ``out_dir`` holds graphshard's ``kind`` output of a graph other than ``graph`` (its files would be
    replaced under it); ``--overwrite`` (``overwrite=True``) is the only way past it."""
    if kind == "partitions":
        others = other_graph_configs(out_dir, graph)
        if others:
            raise other_graph_error(
                out_dir,
                kind,
                others[0].name,
                graph,
                replaced=f"the files {others[0].name} describes",
                after=" (the other config is removed)",
            )
        return
    held = graph_held(out_dir, kind)
    if held is not None and held != graph:
        raise other_graph_error(out_dir, kind, f"{held!r}, says {GRAPH_FILES[kind][0]}", graph, replaced="it")


def other_graph_error(out_dir: Path, kind: str, held: str, graph: str, *, replaced: str, after: str = "") -> InputError:
    """The one message for :func:`check_same_graph`'s refusal, whichever writer it stops."""
    return InputError(
        f"{out_dir}: already holds the {_WHAT.get(kind, kind)} of another graph ({held}); writing "
        f"{graph!r} here would replace {replaced}. Use another directory, or pass --overwrite to "
        f"replace {'it' if replaced == 'it' else 'them'}{after}"
    )


def claim_for_graph(out_dir: Path, graph_name: str, overwrite: bool) -> None:
    """A partition directory holds one graph: refuse another graph's config (its part files would be
    replaced under it; :func:`check_same_graph`), or with ``overwrite`` remove that now stale config."""
    if not overwrite:
        check_same_graph(out_dir, "partitions", graph_name)
    for p in other_graph_configs(out_dir, graph_name):
        p.unlink(missing_ok=True)  # ranks sharing a directory may race here


def write_failure(exc: OSError, what: Path, staging: Path | None = None, final: Path | None = None) -> WriteError:
    """A :class:`WriteError` for an ``OSError`` raised while writing ``what``, naming the file at fault
    (``exc.filename``, else ``what``); a file inside ``staging`` is named where it was to be published,
    under ``final``."""
    where = Path(os.fsdecode(exc.filename)) if isinstance(exc.filename, (str, bytes, os.PathLike)) else Path(what)
    if staging is not None and final is not None and (where == staging or staging in where.parents):
        where = final / where.relative_to(staging)
    reason = exc.strerror or str(exc)
    return WriteError(f"{where}: {reason} while writing {what}; nothing was published there")
