"""Assignment without the edge list in memory: the out-of-core adjacency, restreamed Fennel (against a
plain reference implementation), KaMinPar from that adjacency, the chunked R-MAT generator, and both
assignments dispatched into partitions that pass the checks against the original graph."""

from __future__ import annotations

import math

import numpy as np
import pytest

from graphshard import InputError
from graphshard.chunked.load import load_chunked_graph
from graphshard.chunked.spec import read_metadata
from graphshard.chunked.writer import chunk_graph
from graphshard.datasets import community_graph, rmat_graph
from graphshard.datasets.rmat_chunked import write_rmat_chunked
from graphshard.partition.assign.stream import GAMMA, in_memory_blocks, stream_partition
from graphshard.pipeline.assign import assign_chunked
from graphshard.pipeline.assignment_files import read_assignment
from graphshard.pipeline.disk_csr import build_disk_csr
from tests.graphs import small_hetero, small_homo


def _pairs(meta):
    """Every undirected pair of distinct homogeneous nodes, as a set (the definition, in plain Python)."""
    offsets, total = {}, 0
    for t in meta.ntypes:
        offsets[t], total = total, total + meta.num_nodes[t]
    g = load_chunked_graph(meta, features=False)
    out = set()
    for et, (src, dst) in g.edges.items():
        for u, v in zip((src + offsets[et[0]]).tolist(), (dst + offsets[et[2]]).tolist()):
            if u != v:
                out |= {(u, v), (v, u)}
    return out, total


@pytest.mark.parametrize("memory,ascending", [(64, True), (1 << 20, True), (64, False), (1 << 20, False)])
def test_disk_adjacency_is_the_symmetric_deduplicated_graph(tmp_path, memory, ascending):
    chunk_graph(small_hetero(), tmp_path / "c", 3, "numpy")
    meta = read_metadata(tmp_path / "c")
    csr = build_disk_csr(
        meta,
        tmp_path / "adj",
        memory_bytes=memory,
        in_degree=True,  # 64 bytes: many buckets
        ascending=ascending,
    )
    want, n = _pairs(meta)
    xadj = csr.xadj()
    adj = np.fromfile(csr.adjncy_path, dtype=csr.id_dtype)
    assert csr.num_nodes == n and xadj[-1] == csr.num_entries == len(want) == adj.shape[0]
    got = {(u, int(v)) for u in range(n) for v in adj[xadj[u] : xadj[u + 1]]}
    assert got == want
    for u in range(n):  # rows ascending when asked, distinct in any case
        row = adj[xadj[u] : xadj[u + 1]]
        assert (np.diff(row) > 0).all() if ascending else len(set(row.tolist())) == row.shape[0]
    blocks = list(csr.blocks(max_entries=50))
    assert np.concatenate([b[2] for b in blocks]).tolist() == adj.tolist() and len(blocks) > 3
    g = load_chunked_graph(meta, features=False)
    off = csr.type_offsets
    indeg = np.zeros(n, dtype=np.int64)
    for et, (_, dst) in g.edges.items():
        np.add.at(indeg, dst + off[et[2]], 1)
    assert (csr.in_degree == indeg).all()


def _fennel_reference(xadj, adj, k, passes, imbalance=0.03):
    """Restreamed Fennel, written out plainly from its definition."""
    n = len(xadj) - 1
    parts, sizes = [-1] * n, [0] * k
    alpha = math.sqrt(k) * (len(adj) / 2) / n**GAMMA
    cap = math.ceil((1 + imbalance) * n / k)
    for _ in range(passes):
        for v in range(n):
            if parts[v] >= 0:
                sizes[parts[v]] -= 1
            near = [0] * k
            for u in adj[xadj[v] : xadj[v + 1]]:
                if parts[u] >= 0:
                    near[parts[u]] += 1
            open_parts = [i for i in range(k) if sizes[i] < cap]
            best = max(open_parts, key=lambda i: (near[i] - alpha * GAMMA * math.sqrt(sizes[i]), -sizes[i], -i))
            parts[v] = best
            sizes[best] += 1
    return np.array(parts)


def test_stream_partition_is_fennel_restreamed():
    from graphshard.partition.assign.adjacency import undirected_csr

    g = small_homo()
    src, dst = g.edges[("_N", "_E", "_N")]
    csr = undirected_csr(src, dst, 240)
    for k, passes in ((3, 1), (4, 3)):
        got = stream_partition(
            in_memory_blocks(csr.xadj, csr.adjncy), 240, len(csr.adjncy), k, passes=passes, seeding="none"
        )
        want = _fennel_reference(csr.xadj.tolist(), csr.adjncy.tolist(), k, passes)
        assert got.tolist() == want.tolist()


def test_stream_balance_caps_hold():
    from graphshard.partition.assign.adjacency import undirected_csr

    ds = community_graph(num_nodes=4000, seed=3)
    src, dst = ds.graph.edges[("_N", "_E", "_N")]
    csr = undirected_csr(src, dst, 4000)
    blocks = in_memory_blocks(csr.xadj, csr.adjncy)
    classes = (np.arange(4000) % 7 == 0).astype(np.int64)  # a rare class (1 in 7)
    indeg = np.bincount(dst, minlength=4000)
    parts = stream_partition(blocks, 4000, len(csr.adjncy), 4, classes=classes, weights=indeg, passes=4)
    assert np.bincount(parts).max() <= math.ceil(1.03 * 4000 / 4)
    for c in (0, 1):
        assert np.bincount(parts[classes == c], minlength=4).max() <= math.ceil(1.03 * (classes == c).sum() / 4)
    assert np.bincount(parts, weights=indeg).max() <= math.ceil(1.03 * indeg.sum() / 4) + indeg.max()
    cut = np.mean(parts[src] != parts[dst])
    assert cut < 0.4  # random: 0.75 on 4 parts; the planted communities make ~0.15 reachable


def _ring_of_cliques(num: int, size: int, order: np.ndarray | None = None):
    """``num`` cliques of ``size`` nodes, consecutive IDs, each joined to the next (a ring); ``order``
    renames node ``i`` to ``order[i]``."""
    from graphshard.partition.assign.adjacency import undirected_csr

    base = np.arange(num)[:, None] * size
    a, b = np.triu_indices(size, 1)
    src = np.concatenate([(base + a).ravel(), base.ravel()])
    dst = np.concatenate([(base + b).ravel(), (np.roll(base, -1) + size - 1).ravel()])
    if order is not None:
        src, dst = order[src], order[dst]
    return undirected_csr(src, dst, num * size)


def test_ordered_graphs_are_seeded_from_clusters():
    from graphshard.partition.assign.stream import has_locality

    n = 4000
    for order, local in ((None, True), (np.random.default_rng(0).permutation(n), False)):
        csr = _ring_of_cliques(400, 10, order)
        blocks = in_memory_blocks(csr.xadj, csr.adjncy)
        assert has_locality(blocks, n, len(csr.adjncy), 4) == local
        parts = stream_partition(blocks, n, len(csr.adjncy), 4)
        src = np.repeat(np.arange(n), np.diff(csr.xadj))
        cut = np.mean(parts[src] != parts[csr.adjncy])
        plain = stream_partition(blocks, n, len(csr.adjncy), 4, seeding="none")
        plain_cut = np.mean(plain[src] != plain[csr.adjncy])
        assert np.bincount(parts).max() <= 1.1 * n / 4
        if local:  # 4 ring arcs: at most a few cliques split, never more than the plain passes cut
            assert cut < 0.01 and cut <= plain_cut
        else:
            assert parts.tolist() == plain.tolist()  # no order to exploit: the plain passes


def test_chunked_rmat_samples_the_in_memory_generators_edges(tmp_path):
    meta = write_rmat_chunked(tmp_path / "r", 10, edge_factor=8, feat_dim=6, num_chunks=3, seed=4, num_classes=3)
    g = load_chunked_graph(meta)
    src, dst = g.edges[("_N", "_E", "_N")]
    ref_src, ref_dst = rmat_graph(10, 8, seed=4).graph.edges[("_N", "_E", "_N")]
    assert set(zip(src.tolist(), dst.tolist())) == set(zip(ref_src.tolist(), ref_dst.tolist()))
    assert len(meta.edges[("_N", "_E", "_N")].paths) == 3 and (src != dst).all()
    f = g.node_feats["_N"]
    assert f["feat"].shape == (1024, 6) and f["feat"].dtype == np.float32
    assert (f["label"] == f["feat"][:, :3].argmax(1)).all()
    masks = np.stack([f["train_mask"], f["val_mask"], f["test_mask"]])
    assert masks.sum(0).max() == 1 and 0.05 < f["train_mask"].mean() < 0.15
    with pytest.raises(InputError, match="refusing to write chunked output"):
        (tmp_path / "mine").mkdir()
        (tmp_path / "mine" / "notes.txt").write_text("x")
        write_rmat_chunked(tmp_path / "mine", 4)


@pytest.mark.parametrize("method", ["stream", "kaminpar"])
def test_out_of_core_assignments_dispatch_into_valid_partitions(tmp_path, method):
    from graphshard.pipeline.dispatch import DispatchOptions, run_dispatch
    from tests.partition.checks import check_partitioning

    g = small_hetero()
    chunk_graph(g, tmp_path / "c", 2, "numpy")
    assign_chunked(tmp_path / "c", tmp_path / "a", 3, method, memory_mb=1)
    per_type, _ = read_assignment(tmp_path / "a", g.num_nodes)
    assert not list(tmp_path.glob(".a.adjacency-*"))  # the work directory is gone
    for a in per_type.values():
        assert ((a >= 0) & (a < 3)).all()
    config = run_dispatch(
        DispatchOptions(tmp_path / "c", tmp_path / "a", tmp_path / "p", 1, save_orig_nids=True, save_orig_eids=True),
        num_procs=2,
        timeout=120,
    )
    # every node where the assignment put it, and every format rule, checked against the original graph
    check_partitioning(g, config, 1, 3, assignment=np.concatenate([per_type[t] for t in g.ntypes]))


def test_kaminpar_refuses_balance_classes(tmp_path):
    chunk_graph(small_homo(), tmp_path / "c", 2, "numpy")
    with pytest.raises(InputError, match="balance_ntypes is not supported with method 'kaminpar'"):
        assign_chunked(tmp_path / "c", tmp_path / "a", 2, "kaminpar", balance_ntypes=np.zeros(240, dtype=np.int64))
