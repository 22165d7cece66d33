"""ParMETIS interoperability (DGL's ``pm_dglpart`` file layout).

Export, from a chunked graph:
  ``<name>_nodes.txt``  one line per node in homogeneous order: ``<ntype id> <w_0> ... <w_{T-1}> <per-type id>``
                        (weights: one indicator column per node type, so ParMETIS balances every type);
  ``<name>_edges.txt``  one line per edge: ``<src> <dst> <per-type edge id> <etype id>`` (homogeneous node IDs);
  ``<name>_stats.txt``  ``<num nodes> <num edges> <num weight columns>``.
Import, from ParMETIS's outputs ``p<i>-<name>_nodes.txt`` (lines ``<homogeneous id> <ntype id> <weights...>
<per-type id> <partition>``): assignment files for the dispatch step.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

from ..chunked.load import edge_offsets, read_checked_edges
from ..chunked.spec import read_metadata
from ..errors import InputError
from ..format.outputs import check_output_dir, prepare_output_dir
from ..format.staging import atomic_file
from ..names import check_path_name, inside
from .assignment_files import write_assignment

_BLOCK = 1 << 20


def export_parmetis(in_dir: str | os.PathLike, out_dir: str | os.PathLike, overwrite: bool = False) -> list[Path]:
    """Write the three ParMETIS input files for the chunked graph in ``in_dir``; returns their paths.
    ``out_dir`` must be new, empty or an earlier export unless ``overwrite`` (which replaces only these
    files). A failed write (full disk) raises :class:`WriteError` naming the file and leaves no stats file."""
    meta = read_metadata(in_dir)
    name, ntypes = check_path_name(meta.graph_name, f"{meta.path}: graph_name", extra=len("_nodes.txt")), meta.ntypes
    out = prepare_output_dir(out_dir, "parmetis", overwrite)
    node_off = meta.id_converter().node_offsets
    nodes, edges, stats = (inside(out, f"{name}_{k}.txt") for k in ("nodes", "edges", "stats"))
    for path in (nodes, edges, stats):  # the stats file, written last, marks a complete export
        path.unlink(missing_ok=True)
    with atomic_file(nodes) as tmp, open(tmp, "w") as f:
        for ti, t in enumerate(ntypes):
            for lo in range(0, meta.num_nodes[t], _BLOCK):
                ids = np.arange(lo, min(lo + _BLOCK, meta.num_nodes[t]), dtype=np.int64)
                weights = np.zeros((ids.shape[0], len(ntypes)), dtype=np.int64)
                weights[:, ti] = 1
                rows = np.column_stack([np.full(ids.shape[0], ti), weights, ids])
                np.savetxt(f, rows, fmt="%d", delimiter=" ")
    with atomic_file(edges) as tmp, open(tmp, "w") as f:
        for r, et in enumerate(meta.etypes):
            offsets = edge_offsets(meta, et)
            for i in range(len(meta.edges[et].paths)):
                src, dst = read_checked_edges(meta, et, i)
                eid = np.arange(offsets[i], offsets[i + 1], dtype=np.int64)
                rows = np.column_stack(
                    [
                        src + node_off[ntypes.index(et[0])],
                        dst + node_off[ntypes.index(et[2])],
                        eid,
                        np.full(eid.shape[0], r),
                    ]
                )
                np.savetxt(f, rows, fmt="%d", delimiter=" ")
    with atomic_file(stats) as tmp:
        tmp.write_text(f"{int(node_off[-1])} {sum(meta.num_edges.values())} {len(ntypes)}\n")
    return [nodes, edges, stats]


def import_parmetis(
    in_dir: str | os.PathLike,
    parmetis_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    num_parts: int | None = None,
    *,
    fmt: str = "txt",
    overwrite: bool = False,
) -> Path:
    """Turn ParMETIS outputs ``p<i>-<name>_nodes.txt`` into assignment files (``partition_meta.json`` last)."""
    meta = read_metadata(in_dir)
    check_output_dir(out_dir, "assignment", overwrite, graph=meta.graph_name)
    name, ntypes = meta.graph_name, meta.ntypes
    node_off = meta.id_converter().node_offsets
    n = int(node_off[-1])
    pattern = re.compile(rf"^p(\d+)-{re.escape(name)}_nodes\.txt$")
    numbered = [(int(m.group(1)), p) for p in Path(parmetis_dir).iterdir() if (m := pattern.match(p.name))]
    files = [p for _, p in sorted(numbered, key=lambda e: e[0])]
    if not files:
        raise InputError(f"{parmetis_dir}: no ParMETIS output files p<i>-{name}_nodes.txt")
    parts = np.full(n, -1, dtype=np.int64)
    width = 1 + 1 + len(ntypes) + 1 + 1
    for path in files:
        rows = _read_rows(path, width)
        homo, ntype, per_type, part = rows[:, 0], rows[:, 1], rows[:, -2], rows[:, -1]
        _check(path, (homo < 0) | (homo >= n), homo, f"node ID out of range [0, {n})")
        _check(path, (ntype < 0) | (ntype >= len(ntypes)), ntype, "unknown node type ID")
        _check(
            path,
            node_off[np.clip(ntype, 0, len(ntypes) - 1)] + per_type != homo,
            per_type,
            "per-type ID does not match the node ID and type",
        )
        _check(path, part < 0 if num_parts is None else (part < 0) | (part >= num_parts), part, "bad partition ID")
        _check(path, parts[homo] >= 0, homo, "node listed twice")
        parts[homo] = part
    missing = np.flatnonzero(parts < 0)
    if missing.size:
        raise InputError(f"{parmetis_dir}: {missing.size} nodes have no partition (first: node {int(missing[0])})")
    total = num_parts if num_parts is not None else int(parts.max()) + 1
    by_type = {t: parts[node_off[i] : node_off[i + 1]] for i, t in enumerate(ntypes)}
    return write_assignment(
        out_dir, by_type, total, "parmetis", fmt=fmt, extra={"graph_name": name}, overwrite=overwrite
    )


def _read_rows(path: Path, width: int) -> np.ndarray:
    try:
        rows = np.loadtxt(path, dtype=np.int64, ndmin=2)
    except ValueError as exc:
        raise InputError(f"{path}: not a table of integers ({exc})") from None
    if rows.size and rows.shape[1] != width:
        raise InputError(
            f"{path}, line 1: expected {width} columns (id, type, weights, per-type id, partition), got {rows.shape[1]}"
        )
    return rows.reshape(-1, width)


def _check(path: Path, bad: np.ndarray, values: np.ndarray, what: str) -> None:
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(f"{path}, line {i + 1}: {what} ({int(values[i])})")
