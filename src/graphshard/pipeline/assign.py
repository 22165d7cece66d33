"""Step 1 of the out-of-core pipeline: compute a partition assignment for a chunked graph."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from ..chunked.counts import GraphCounts
from ..chunked.load import load_chunked_graph, read_feature
from ..chunked.spec import ChunkedMeta, read_metadata
from ..disk import DiskNeed
from ..disk import check_disk as disk_guard
from ..errors import InputError
from ..format.outputs import check_output_dir
from ..memory import allowed
from ..partition.assign import METHODS, assign, balance_classes
from ..partition.assign.kaminpar import kaminpar_from_file, write_parhip_blocks
from ..partition.assign.random import random_assignment
from ..partition.assign.stream import DEFAULT_PASSES, stream_partition
from ..partition.balance import option_classes
from ..partition.homogenize import homogenize
from .assign_cost import PREFERENCE, assign_disk, check_fits, parhip_disk_parts, surely_fits
from .assignment_files import write_assignment
from .disk_csr import DiskCSR, build_disk_csr

log = logging.getLogger(__name__)


def assign_chunked(
    in_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    num_parts: int,
    method: str = "metis",
    *,
    fmt: str = "txt",
    seed: int = 0,
    balance_ntypes: np.ndarray | str | None = None,
    balance_edges: bool = False,
    objtype: str = "cut",
    overwrite: bool = False,
    memory_mb: int = 1024,
    passes: int = DEFAULT_PASSES,
    memory: int | str | None = None,
    check_disk: bool = True,
) -> Path:
    """Write one assignment file per node type and ``partition_meta.json`` for the chunked graph in ``in_dir``.

    ``random`` never reads the structure (only counts from the metadata) and is exactly balanced per node
    type (counts differ by at most one), or per class of ``balance_ntypes``. ``metis`` reads the structure
    only — never the features — and runs the in-memory path with the same balance options. ``stream`` and
    ``kaminpar`` never hold the edge list: the adjacency is built out of core (:mod:`.disk_csr`, a sort
    buffer of ``memory_mb``) beside ``out_dir``, then streamed ``passes`` times through restreamed Fennel
    (:mod:`graphshard.partition.assign.stream`, memory O(nodes)) or written as KaMinPar's ParHIP file and
    loaded compressed.
    ``balance_ntypes``: one class per node in homogeneous order, ``"train"`` (every node type and its
    ``train_mask`` nodes balanced apart), or a ``.npy`` path. ``out_dir`` must be new, empty or an earlier
    assignment output unless ``overwrite``. ``memory``: what this step may use (bytes or a size such as
    ``16G``; default: the machine's memory): a method predicted to need more is refused before any work.
    ``check_disk``: refuse before any work when the predicted peak of disk (:func:`.assign_cost.assign_disk`: the
    out-of-core adjacency beside ``out_dir``, the assignment files) does not fit the free space there (with a
    margin, see :mod:`graphshard.disk`); False skips it.
    """
    meta = read_metadata(in_dir)
    check_output_dir(out_dir, "assignment", overwrite, graph=meta.graph_name)  # refuse before any work
    total = sum(meta.num_nodes.values())
    if isinstance(num_parts, bool) or num_parts < 1 or num_parts > max(total, 1):
        raise InputError(f"num_parts must be between 1 and the number of nodes ({total}), got {num_parts}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"seed must be a non-negative integer, got {seed!r}")
    budget = allowed(memory)
    if budget and method in PREFERENCE and not surely_fits(meta, method, num_parts, budget, memory_mb=memory_mb):
        check_fits(
            in_dir, method, num_parts, budget, memory_mb=memory_mb, meta=meta
        )  # refused before any work if it cannot fit
    if check_disk and method in PREFERENCE:  # from counts; KaMinPar's ParHIP file is checked once its size is known
        need = assign_disk(
            GraphCounts.of(meta, shape=False),
            method,
            num_parts,
            out_dir,
            memory_mb=memory_mb,
            fmt=fmt,
            balance_edges=balance_edges,
            parhip=False,
        )
        disk_guard(need, hint=" (--out)")
    if isinstance(balance_ntypes, (str, os.PathLike)):
        balance_ntypes = option_classes(
            str(balance_ntypes), meta.ntypes, meta.num_nodes, lambda t: _train_mask(meta, t)
        )
    if method == "random":
        if balance_edges:
            raise InputError("balance_edges is not supported with method 'random' (use 'metis')")
        per_type = _random(meta, num_parts, seed, balance_ntypes)
    elif method in ("stream", "kaminpar"):
        per_type = _out_of_core(
            meta,
            Path(out_dir),
            method,
            num_parts,
            seed=seed,
            classes=balance_ntypes,
            balance_edges=balance_edges,
            memory_mb=memory_mb,
            passes=passes,
            check_disk=check_disk,
        )
    elif method == "metis":
        g = load_chunked_graph(meta, features=False)
        view = homogenize(g)
        parts = assign(
            view,
            method,
            num_parts,
            1,
            balance_ntypes=balance_ntypes,
            balance_edges=balance_edges,
            objtype=objtype,
            seed=seed,
        ).parts
        per_type = {t: parts[view.node_offsets[i] : view.node_offsets[i + 1]] for i, t in enumerate(g.ntypes)}
    else:
        raise InputError(f"unknown assignment method {method!r}; choose one of {', '.join(METHODS)}")
    path = write_assignment(
        out_dir,
        per_type,
        num_parts,
        method,
        fmt=fmt,
        extra={"graph_name": meta.graph_name, "seed": seed},
        overwrite=overwrite,
    )
    log.info("wrote %s assignment of %d nodes into %d parts to %s", method, total, num_parts, path.parent)
    return path


def _out_of_core(
    meta: ChunkedMeta,
    out_dir: Path,
    method: str,
    num_parts: int,
    *,
    seed: int,
    classes: np.ndarray | None,
    balance_edges: bool,
    memory_mb: int,
    passes: int,
    check_disk: bool = True,
) -> dict[str, np.ndarray]:
    """``stream`` or ``kaminpar`` over the adjacency built out of core in a work directory beside ``out_dir``
    (removed afterwards, also on failure)."""
    total = sum(meta.num_nodes.values())
    classes = balance_classes(classes, total)
    if method == "kaminpar" and classes is not None:
        raise InputError("balance_ntypes is not supported with method 'kaminpar' (use 'stream', 'metis' or 'random')")
    out_dir.resolve().parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.adjacency-", dir=out_dir.resolve().parent))
    try:
        start = time.perf_counter()
        csr = build_disk_csr(meta, work, memory_mb << 20, in_degree=balance_edges, ascending=method == "kaminpar")
        log.info("adjacency built out of core in %.2f s (%s)", time.perf_counter() - start, csr.timings)
        start = time.perf_counter()
        if method == "stream":
            parts = stream_partition(
                lambda: csr.blocks(max(1, (memory_mb << 20) // 8)),
                total,
                csr.num_entries,
                num_parts,
                classes=classes,
                weights=csr.in_degree,
                passes=passes,
            )
        else:
            weights = None if csr.in_degree is None else csr.in_degree + 1
            path = str(work / "graph.parhip")
            if check_disk:  # the adjacency's entries are known now: refused before the file is written
                parhip = parhip_disk_parts(total, csr.num_entries, weights is not None)
                parhip.pop("adjacency (CSR)")  # on disk already: the free space counts it
                disk_guard(DiskNeed("assign --method kaminpar", work, parhip), hint=" (--out)")
            write_parhip_blocks(
                path, total, _xadj_pieces(csr), (adj for _, _, adj in csr.blocks(1 << 20)), node_weights=weights
            )
            parts = kaminpar_from_file(path, total, num_parts, seed)
        log.info("%s assignment in %.2f s", method, time.perf_counter() - start)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {t: parts[o : o + meta.num_nodes[t]] for t, o in csr.type_offsets.items()}


def _xadj_pieces(csr: DiskCSR, step: int = 1 << 22):
    """``xadj`` of an on-disk CSR in consecutive pieces (n + 1 entries in all)."""
    for lo in range(0, csr.num_nodes + 1, step):
        yield csr.xadj(lo, min(csr.num_nodes, lo + step - 1))


def _train_mask(meta: ChunkedMeta, ntype: str) -> np.ndarray | None:
    """A node type's ``train_mask`` node data, or None if it has none."""
    spec = meta.node_data.get(ntype, {}).get("train_mask")
    return None if spec is None else read_feature(spec, meta.num_nodes[ntype], f"train_mask of node type {ntype!r}")


def _random(meta: ChunkedMeta, num_parts: int, seed: int, classes: np.ndarray | None) -> dict[str, np.ndarray]:
    """Random assignment per node type (exactly balanced per type), or over all nodes per balance class."""
    if classes is None:
        return {t: random_assignment(n, num_parts, seed + 7919 * i) for i, (t, n) in enumerate(meta.num_nodes.items())}
    total = sum(meta.num_nodes.values())
    parts = random_assignment(total, num_parts, seed, balance_classes(classes, total))
    offsets = np.cumsum([0, *meta.num_nodes.values()])
    return {t: parts[offsets[i] : offsets[i + 1]] for i, t in enumerate(meta.num_nodes)}
