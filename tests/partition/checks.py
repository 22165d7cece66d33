"""Independent checks of a written partitioning against the original graph.

Nothing here uses graphshard's partitioning code: expectations come from the original graph
(plain NumPy / Python sets) and from the raw JSON and safetensors files.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file

from graphshard import Graph


def _orig_homo_offsets(g: Graph) -> dict[str, int]:
    off, out = 0, {}
    for t in g.ntypes:
        out[t] = off
        off += g.num_nodes[t]
    return out


def expected_halo_edges(g: Graph, inner: set[tuple[str, int]], hops: int) -> set[tuple[str, int]]:
    """Original (edge type string, edge ID) of the in-edges of nodes within hops-1 backward hops of ``inner``."""
    in_edges: dict[tuple[str, int], list[tuple[str, int, tuple[str, int]]]] = {}
    for et, (s, d) in g.edges.items():
        key = ":".join(et)
        for i, (a, b) in enumerate(zip(s.tolist(), d.tolist())):
            in_edges.setdefault((et[2], b), []).append((key, i, (et[0], a)))
    frontier, seen, edges = set(inner), set(inner), set()
    for hop in range(hops):
        nxt = set()
        for v in frontier:
            for key, i, u in in_edges.get(v, []):
                edges.add((key, i))
                if u not in seen:
                    nxt.add(u)
        if hop < hops - 1:
            seen |= nxt
            frontier = nxt
    return edges


def check_partitioning(
    g: Graph, config: Path, hops: int, num_parts: int, trainers: int = 1, assignment: np.ndarray | None = None
) -> dict:
    """Assert every rule of docs/format.md; returns per-partition inner node sets for further checks."""
    meta = json.loads(Path(config).read_text())
    root = Path(config).parent
    ntypes = sorted(meta["ntypes"], key=meta["ntypes"].get)
    etypes = sorted(meta["etypes"], key=meta["etypes"].get)
    assert ntypes == g.ntypes and etypes == [":".join(e) for e in g.canonical_etypes]
    assert meta["num_parts"] == num_parts and meta["halo_hops"] == hops
    assert meta["num_nodes"] == g.total_nodes and meta["num_edges"] == g.total_edges

    # ranges tile the ID space partition-major, type-minor
    for key, types in (("node_map", ntypes), ("edge_map", etypes)):
        pos = 0
        for p in range(num_parts):
            for t in types:
                start, end = meta[key][t][p]
                assert start == pos and end >= start
                pos = end
        assert pos == (g.total_nodes if key == "node_map" else g.total_edges)

    offsets = _orig_homo_offsets(g)
    seen_nodes = {t: np.zeros(g.num_nodes[t], dtype=np.int64) for t in ntypes}
    seen_edges = {e: np.zeros(g.num_edges(tuple(e.split(":"))), dtype=np.int64) for e in etypes}
    owner = {}
    inner_sets = []
    for p in range(num_parts):
        t = load_file(root / meta[f"part-{p}"]["part_graph"])
        nid, inner, orig, ptype, part = (t[f"node/{k}"] for k in ("_ID", "inner_node", "orig_id", "_TYPE", "part_id"))
        start, end = meta["node_map"][ntypes[0]][p][0], meta["node_map"][ntypes[-1]][p][1]
        n_inner = end - start
        # inner nodes are the local prefix, in new-ID order; HALO nodes follow in new-ID order
        assert inner[:n_inner].all() and not inner[n_inner:].any()
        assert np.array_equal(nid[:n_inner], np.arange(start, end))
        assert np.all(np.diff(nid[n_inner:]) > 0) and not np.isin(nid[n_inner:], nid[:n_inner]).any()
        # inner new-ID order is (type, original ID); per-type ranges match the node map
        for ti, tname in enumerate(ntypes):
            a, b = meta["node_map"][tname][p]
            assert (ptype[a - start : b - start] == ti).all()
            assert np.all(np.diff(orig[a - start : b - start]) > 0)
            seen_nodes[tname][orig[a - start : b - start]] += 1
        for i in range(len(nid)):
            owner[int(nid[i])] = (ntypes[ptype[i]], int(orig[i]))
        assert (part[:n_inner] == p).all() and not (part[n_inner:] == p).any()
        inner_sets.append({(ntypes[ptype[i]], int(orig[i])) for i in range(n_inner)})
        # trainers
        if trainers > 1:
            nf = load_file(root / meta[f"part-{p}"]["node_feats"])
            for tname in ntypes:
                tid = nf[f"{tname}/trainer_id"]
                assert ((tid >= p * trainers) & (tid < (p + 1) * trainers)).all()

    # every original node is inner exactly once
    for tname in ntypes:
        assert (seen_nodes[tname] == 1).all()
    # part_id of HALO nodes and their identity agree with the owner partition's inner nodes
    node_part = {}
    for p, s in enumerate(inner_sets):
        for v in s:
            node_part[v] = p
    if assignment is not None:
        homo = {v: offsets[v[0]] + v[1] for v in node_part}
        for v, p in node_part.items():
            assert assignment[homo[v]] == p

    for p in range(num_parts):
        t = load_file(root / meta[f"part-{p}"]["part_graph"])
        indptr, indices = t["indptr"], t["indices"]
        nid, ptype, orig, part = t["node/_ID"], t["node/_TYPE"], t["node/orig_id"], t["node/part_id"]
        local = [(ntypes[ptype[i]], int(orig[i])) for i in range(len(nid))]
        for i, v in enumerate(local):
            assert node_part[v] == part[i]
            assert owner[int(nid[i])] == v
        eid, einner, eorig, etype = (t[f"edge/{k}"] for k in ("_ID", "inner_edge", "orig_id", "_TYPE"))
        dst_local = np.repeat(np.arange(len(nid)), np.diff(indptr))
        assert np.array_equal(einner, dst_local < len(inner_sets[p]))
        stored = set()
        for j in range(len(indices)):
            ename = etypes[etype[j]]
            et = tuple(ename.split(":"))
            s_orig, d_orig = g.edges[et][0][eorig[j]], g.edges[et][1][eorig[j]]
            assert local[indices[j]] == (et[0], int(s_orig)), "stored source is not the original edge's source"
            assert local[dst_local[j]] == (et[2], int(d_orig)), "stored destination is not the original's"
            stored.add((ename, int(eorig[j])))
            if einner[j]:
                seen_edges[ename][eorig[j]] += 1
                a, b = meta["edge_map"][ename][p]
                assert a <= eid[j] < b
        assert len(stored) == len(indices), "an edge is stored twice in one partition"
        # HALO: exactly the k-hop in-neighbourhood
        assert stored == expected_halo_edges(g, inner_sets[p], hops)
        endpoints = set(inner_sets[p])
        for ename, i in stored:
            et = tuple(ename.split(":"))
            endpoints.add((et[0], int(g.edges[et][0][i])))
            endpoints.add((et[2], int(g.edges[et][1][i])))
        assert set(local) == endpoints
        # new edge IDs of inner edges: ordered by (type, original ID) inside the partition
        order = np.argsort(eid[einner])
        keys = list(zip(etype[einner][order].tolist(), eorig[einner][order].tolist()))
        assert keys == sorted(keys)
    for ename in etypes:
        assert (seen_edges[ename] == 1).all(), "inner edges must cover the original edges exactly once"
    check_features(g, meta, root, num_parts, ntypes, etypes)
    return {"inner_sets": inner_sets, "node_part": node_part}


def check_features(g: Graph, meta: dict, root: Path, num_parts: int, ntypes: list[str], etypes: list[str]) -> None:
    """Scatter every partition's feature rows back by original ID and compare with the original."""
    rebuilt: dict[str, np.ndarray] = {}
    for p in range(num_parts):
        t = load_file(root / meta[f"part-{p}"]["part_graph"])
        nf = load_file(root / meta[f"part-{p}"]["node_feats"])
        ef = load_file(root / meta[f"part-{p}"]["edge_feats"])
        start = meta["node_map"][ntypes[0]][p][0]
        for tname in ntypes:
            a, b = meta["node_map"][tname][p]
            rows = t["node/orig_id"][a - start : b - start]
            for fname, full in g.node_feats.get(tname, {}).items():
                out = rebuilt.setdefault(f"{tname}/{fname}", np.full_like(full, -7))
                out[rows] = nf[f"{tname}/{fname}"]
        inner_e = t["edge/inner_edge"]
        for ename in etypes:
            et = tuple(ename.split(":"))
            a, b = meta["edge_map"][ename][p]
            sel = inner_e & (t["edge/_ID"] >= a) & (t["edge/_ID"] < b)
            order = np.argsort(t["edge/_ID"][sel])
            rows = t["edge/orig_id"][sel][order]
            assert len(rows) == b - a
            for fname, full in g.edge_feats.get(et, {}).items():
                out = rebuilt.setdefault(f"{ename}/{fname}", np.full_like(full, -7))
                out[rows] = ef[f"{ename}/{fname}"]
    for tname in ntypes:
        for fname, full in g.node_feats.get(tname, {}).items():
            assert np.array_equal(rebuilt[f"{tname}/{fname}"], full), f"node feature {tname}/{fname} differs"
    for et, feats in g.edge_feats.items():
        for fname, full in feats.items():
            assert np.array_equal(rebuilt[f"{':'.join(et)}/{fname}"], full), f"edge feature {fname} differs"
