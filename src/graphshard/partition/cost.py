"""The cost model of in-memory partitioning (``graphshard partition``): the predicted peak of private memory for
each method, from the dataset's node and edge counts and its size on disk; and the disk the written partitions
take (:func:`partition_bytes`, :func:`partitions_disk`), which dispatch's cost model shares.

``partition_graph`` holds the graph's structure (the dataset's arrays are memory-mapped; features stay
in the page cache), its homogeneous form, the assignment, the relabelled structure and one partition
being built, plus the method's own working set. Coefficients fitted as an upper bound to
``graphshard partition`` on R-MAT scale 12, 16, 18 and 20 with 64-d features into 4 parts, every method
(private memory sampled every 10 ms): all within +0-25 %.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Sequence
from pathlib import Path

from ..chunked.counts import GraphCounts
from ..chunked.spec import read_metadata
from ..disk import FILE_BYTES, DiskNeed, check_disk
from ..errors import InputError
from ..format.inputs import require_dir
from ..graph import Graph
from ..memory import Estimate, gib

PARTITION_BASE = 190 << 20  # interpreter, NumPy, numba, the partitioners' libraries (measured 186 MiB)
PER_EDGE = 17  # homogeneous form, relabelling and the partition being built, per stored edge
SMALL = 16  # per stored edge, up to SMALL_CAP: buffers that stop growing with the graph
SMALL_CAP = 30 << 20
STREAM = (32, 8)  # stream: bytes per node (parts, state) and per adjacency entry (its in-memory CSR)
KAMINPAR = (32 << 20, 24, 7)  # KaMinPar in memory: fixed, per node, per stored edge
METIS = (16, 125)  # METIS: per node, per stored edge (its CSR, graph copies and partition state)


def dataset_counts(path: str | os.PathLike) -> tuple[int, int, int]:
    """``(nodes, edges, bytes on disk)`` of a dataset directory (``meta.json``) or chunked graph."""
    d = require_dir(path)
    if (d / "metadata.json").is_file():
        c = GraphCounts.of(read_metadata(d))
        return c.nodes, c.edges, c.disk_bytes
    try:
        meta = json.loads((d / "meta.json").read_text())
        total = lambda v: sum(v.values()) if isinstance(v, dict) else int(v)  # noqa: E731
        nodes, edges = total(meta["num_nodes"]), total(meta["num_edges"])
    except (OSError, ValueError, KeyError, AttributeError, TypeError) as exc:
        raise InputError(f"{d}: no readable meta.json with num_nodes and num_edges ({exc})") from None
    return nodes, edges, sum(f.stat().st_size for f in d.rglob("*.npy"))


def partition_estimates(path: str | os.PathLike, num_parts: int) -> list[Estimate]:
    """Predicted peaks of ``graphshard partition`` with ``random``, ``stream``, ``kaminpar`` and ``metis``."""
    nodes, edges, _ = dataset_counts(path)
    return graph_estimates(nodes, edges)


def graph_estimates(nodes: int, edges: int) -> list[Estimate]:
    """Predicted peaks of :func:`~graphshard.partition.api.partition_graph` per method, for a graph of ``nodes``
    nodes and ``edges`` stored edges."""
    common = PARTITION_BASE + min(SMALL_CAP, SMALL * edges) + PER_EDGE * edges
    method = {
        "random": 8 * nodes,
        "stream": STREAM[0] * nodes + STREAM[1] * edges,
        "kaminpar": KAMINPAR[0] + KAMINPAR[1] * nodes + KAMINPAR[2] * edges,
        "metis": METIS[0] * nodes + METIS[1] * edges,
    }
    return [Estimate(m, common + extra, 0, "partition") for m, extra in method.items()]


def check_partition_fits(dataset: str, method: str, num_parts: int, budget: int) -> None:
    """Raise :class:`InputError` when ``graphshard partition --method`` is predicted to need more than ``budget``
    (checked from the dataset's counts, before it is read)."""
    try:
        options = {e.method: e for e in partition_estimates(dataset, num_parts)}
    except InputError:
        return  # no counts to plan with: reading the dataset reports what is wrong with it
    refuse_unfit(options, method, budget)


def refuse_unfit(options: dict[str, Estimate], method: str, budget: int) -> None:
    """Raise :class:`InputError` when ``method``'s estimate among ``options`` exceeds ``budget`` (0: no limit)."""
    mine = options.get(method)
    if mine is None or not budget or mine.peak_bytes <= budget:
        return
    fits = [f"{m} ({gib(e.peak_bytes)})" for m, e in options.items() if e.peak_bytes <= budget]
    raise InputError(
        f"partition --method {method} is predicted to need {gib(mine.peak_bytes)}, more than the "
        f"{gib(budget)} allowed (--memory); methods that fit: {', '.join(fits) or 'none'}; graphs that "
        "do not fit in memory take the chunked pipeline (graphshard chunk, assign, dispatch)"
    )


# --- disk: what the partitions take -------------------------------------------------------------------------------


def structure_widths(nodes: int, edges: int) -> tuple[int, int]:
    """(bytes of an ID, bytes of a type or partition ID) in ``graph.safetensors`` for a graph of ``nodes`` nodes and
    ``edges`` edges: int64 and int64 in the format as first written; int32 (int64 from 2**31) and int8 with compact
    structure (``graphshard.format.dtypes``, which is being introduced: its presence decides, so the model
    follows the format the writers in this installation use; once it is settled this becomes the compact rule)."""
    if importlib.util.find_spec(f"{__name__.rsplit('.', 2)[0]}.format.dtypes") is None:
        return 8, 8
    return (4 if max(nodes, edges) < 2**31 else 8), 1


def partition_bytes(local_nodes: int, stored_edges: int, index_bytes: int = 8, small_bytes: int = 8) -> int:
    """Bytes of the tensors of one partition's ``graph.safetensors``, the one place the format's integer widths
    enter the cost models (``index_bytes``: an ID; ``small_bytes``: a type or partition ID; see
    :func:`structure_widths`): per local node (inner and HALO) ``indptr``, ``node/_ID`` and ``node/orig_id`` (IDs),
    ``node/part_id`` and ``node/_TYPE`` (small) and ``node/inner_node`` (1 byte); per stored edge ``indices``,
    ``edge/_ID`` and ``edge/orig_id`` (IDs), ``edge/_TYPE`` (small) and ``edge/inner_edge`` (1 byte); and
    ``indptr``'s last entry. Headers are :data:`~graphshard.disk.FILE_BYTES` per file, apart."""
    per_node = 3 * index_bytes + 2 * small_bytes + 1
    per_edge = 3 * index_bytes + small_bytes + 1
    return local_nodes * per_node + stored_edges * per_edge + index_bytes


def local_bounds(nodes: int, edges: int, inner: int, inner_edges: int, *, num_hops: int) -> tuple[int, int]:
    """Upper bounds of one partition's local nodes and stored edges from its inner nodes and in-edges: with a
    1-hop HALO every in-edge brings at most one HALO node (and there are ``nodes - inner`` others); deeper
    HALOs are bounded by the whole graph (every node, every edge)."""
    if num_hops == 1:
        return inner + min(inner_edges, nodes - inner), inner_edges
    return nodes, edges


def even_counts(total: int, parts: int) -> list[int]:
    """``total`` shared as evenly as possible among ``parts`` (the assumption without an assignment)."""
    return [total * (p + 1) // parts - total * p // parts for p in range(parts)]


def partitions_disk(
    nodes: int,
    edges: int,
    part_nodes: Sequence[int],
    part_edges: Sequence[int],
    *,
    feature_bytes: int,
    num_hops: int = 1,
    orig_nids: bool = False,
    orig_eids: bool = False,
) -> dict[str, int]:
    """What the partitions with ``part_nodes`` inner nodes and ``part_edges`` in-edges each take on disk, by
    kind: structure (:func:`partition_bytes` of :func:`local_bounds`, and every file's header), features (their
    inner nodes' and edges' rows: ``feature_bytes``) and original IDs (int64 per inner node and edge, when
    written). ``nodes``, ``edges``: the whole graph's."""
    widths = structure_widths(nodes, edges)
    structure = sum(
        partition_bytes(*local_bounds(nodes, edges, int(n), int(e), num_hops=num_hops), *widths)
        for n, e in zip(part_nodes, part_edges)
    )
    ids = 8 * sum(int(n) for n in part_nodes) * orig_nids + 8 * sum(int(e) for e in part_edges) * orig_eids
    files = len(part_nodes) * (3 + orig_nids + orig_eids)
    return {"structure": structure + FILE_BYTES * files, "features": int(feature_bytes), "original IDs": ids}


def graph_data_bytes(g: Graph) -> tuple[int, int]:
    """Bytes of every node feature and every edge feature of an in-memory graph (CSR rows: their arrays)."""
    node = sum(int(a.nbytes) for feats in g.node_feats.values() for a in feats.values())
    edge = sum(int(a.nbytes) for feats in g.edge_feats.values() for a in feats.values())
    return node, edge


def partition_disk(
    out: str | os.PathLike,
    nodes: int,
    edges: int,
    num_parts: int,
    *,
    node_data_bytes: int,
    edge_data_bytes: int,
    num_hops: int = 1,
    orig_ids: bool = False,
) -> DiskNeed:
    """The predicted peak of disk of ``partition_graph`` writing into ``out``: the partitions, staged inside
    ``out`` and moved into place (no copy; an earlier output replaced is removed only at the end, so it is
    already counted as used). Inner nodes and edges are assumed evenly shared (their totals do not depend on
    the assignment; only the HALO bound does)."""
    parts = partitions_disk(
        nodes,
        edges,
        even_counts(nodes, num_parts),
        even_counts(edges, num_parts),
        feature_bytes=node_data_bytes + edge_data_bytes,
        num_hops=num_hops,
        orig_nids=orig_ids,
        orig_eids=orig_ids,
    )
    return DiskNeed("partition", Path(out).expanduser().absolute(), {f"partitions' {k}": v for k, v in parts.items()})


def dataset_data_bytes(path: str | os.PathLike) -> tuple[int, int]:
    """(node data, edge data) bytes of a dataset directory or chunked graph, from its files, before reading it:
    a dataset's arrays other than its edges and split index lists, plus one byte per node for each of the
    three split masks the partitions store; a chunked graph's node and edge data files."""
    d = require_dir(path)
    if (d / "metadata.json").is_file():
        meta = read_metadata(d)
        size = lambda specs: sum(os.path.getsize(p) for s in specs for p in s.paths if os.path.exists(p))  # noqa: E731
        return (
            size(s for t in meta.node_data.values() for s in t.values()),
            size(s for t in meta.edge_data.values() for s in t.values()),
        )
    nodes, _, _ = dataset_counts(d)
    structure = {"src.npy", "dst.npy"}
    data = sum(
        f.stat().st_size
        for f in d.rglob("*.npy")
        if f.name not in structure and f.parent.name != "edges" and not f.name.endswith("_idx.npy")
    )
    masks = 3 * nodes if any(d.rglob("*_idx.npy")) else 0
    return data + masks, 0


def check_partition_disk(
    dataset: str | os.PathLike,
    out: str | os.PathLike,
    num_parts: int,
    num_hops: int = 1,
    *,
    orig_ids: bool = False,
    trainers: int = 1,
    check: bool = True,
) -> None:
    """Raise :class:`InputError` when ``graphshard partition`` is predicted not to fit the free disk at ``out``
    (checked from the dataset's counts and file sizes, before it is read)."""
    if not check:
        return
    try:
        nodes, edges, _ = dataset_counts(dataset)
        node_data, edge_data = dataset_data_bytes(dataset)
    except (InputError, OSError):
        return  # no counts to plan with: reading the dataset reports what is wrong with it
    node_data += 8 * nodes if trainers > 1 else 0
    check_disk(
        partition_disk(
            out,
            nodes,
            edges,
            num_parts,
            node_data_bytes=node_data,
            edge_data_bytes=edge_data,
            num_hops=num_hops,
            orig_ids=orig_ids,
        ),
        hint=" (--out)",
    )
