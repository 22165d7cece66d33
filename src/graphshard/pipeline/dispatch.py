"""Step 2 of the out-of-core pipeline: dispatch a chunked graph to ranks and write format v1.

Runs as W ranks on ``torch.distributed`` (gloo). Partition ``p`` is owned by rank ``p % W``. Each rank
reads a contiguous share of every chunk list, sends edges (with their features) to the owner of their
destination and node features to the owner of their node, relabels exactly as ``partition_graph``
does, fetches HALO in-edges from their owners hop by hop, and writes its partitions. The output is
byte-identical to ``partition_graph`` with the same assignment (only ``part_method`` may differ).

Every rank holds the node assignment and the node renumbering (O(N) integers), its share of the
input, and its own partitions' data — never the whole graph.

Resumable: finished partitions are kept in ``<out>/.dispatch-<graph>/`` with a marker recording
their checksums and a fingerprint of the inputs and options; a re-run verifies and reuses them.
The config JSON is written last, once every rank has published its partitions.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ..chunked.load import checked_offsets, read_checked_edges
from ..chunked.readers import count_rows, read_data, read_data_like
from ..chunked.spec import ChunkedMeta, FileSpec, read_metadata
from ..distributed.collectives import all_gather_bytes, all_reduce_sum, barrier, exchange
from ..distributed.context import DistContext
from ..errors import InputError
from ..format.config import PartitionConfig, Schema, check_graph_name, feature_schema, write_config
from ..fingerprint import files_fingerprint
from ..format.outputs import check_output_dir, claim_for_graph, prepare_output_dir, write_failure
from ..format.tensorfile import sha256_file, write_tensors
from ..format.write import FILE_NAMES, part_entry, replace_dir
from ..graph import etype_str
from ..partition.build import structure_arrays
from ..partition.halo import HaloInEdges, OwnInEdges, check_hops, local_structure
from ..partition.homogenize import HomoView
from ..partition.kernels import ragged_ranges, range_in_edges
from ..partition.relabel import Relabelling, edge_bounds_from_counts, relabel_nodes
from ..progress import PhaseTimer, peak_rss_bytes
from .assignment_files import META_NAME, read_assignment, read_partition_meta

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DispatchOptions:
    in_dir: Path
    partitions_dir: Path
    out_dir: Path
    num_hops: int = 1
    save_orig_nids: bool = False
    save_orig_eids: bool = False
    overwrite: bool = False


@dataclass
class _PartEdges:
    """One owned partition's own edges, sorted by original homogeneous edge ID (= new-ID order)."""

    orig: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    feats: dict[str, np.ndarray] = field(default_factory=dict)  # "<etype>/<name>" -> rows (inner edges)


class _Dispatch:
    """The state of one rank during dispatch."""

    def __init__(self, opts: DispatchOptions, ctx: DistContext):
        check_hops(opts.num_hops)
        self.opts, self.ctx = opts, ctx
        self.identity: PartitionConfig | None = None  # set once the ID space is known, before any file is written
        self.meta: ChunkedMeta = read_metadata(opts.in_dir)
        self.name = self.meta.graph_name
        check_graph_name(self.name)
        per_type, self.P = read_assignment(opts.partitions_dir, self.meta.num_nodes)
        self.parts = np.concatenate([per_type[t] for t in self.meta.ntypes]) if per_type else np.zeros(0, np.int64)
        ids = self.meta.id_converter()
        self.node_off, self.edge_off = ids.node_offsets, ids.edge_offsets
        self.N = int(self.node_off[-1])
        self.new2old, self.old2new, self.node_bounds = relabel_nodes(self.parts, self.P, self.node_off)
        if self.N < 2**31:  # every rank holds these three: keep them narrow
            self.parts, self.new2old, self.old2new = (a.astype(np.int32) for a in (self.parts, self.new2old, self.old2new))
        self.part_starts = np.append(self.node_bounds[:, 0], self.N)
        self.owned = [p for p in range(self.P) if p % ctx.world_size == ctx.rank]
        self.edges: dict[int, _PartEdges] = {}
        self.out = Path(opts.out_dir).resolve()
        self.resume = self.out / f".dispatch-{self.name}"
        self.fingerprint = self._fingerprint()
        self.chunk_rows: dict[int, np.ndarray] = {}
        self.node_data_pieces: dict[tuple[str, str], tuple[np.ndarray, list]] = {}
        self._chunk_cache: tuple = (None, None)

    # -- helpers ---------------------------------------------------------------------------
    def phases(self) -> list[list[int]]:
        """Groups of partitions built together. With 1-hop HALO, one partition per rank at a time
        (memory: one partition's data); deeper HALOs need every partition's in-edges, so one group."""
        if self.opts.num_hops > 1:
            return [list(range(self.P))]
        w = self.ctx.world_size
        return [list(range(k, min(k + w, self.P))) for k in range(0, self.P, w)]

    def my_chunks(self, count: int) -> range:
        r, w = self.ctx.rank, self.ctx.world_size
        return range(count * r // w, count * (r + 1) // w)

    def owner_rank(self, partition: np.ndarray) -> np.ndarray:
        return partition % self.ctx.world_size

    def chunk_offsets(self, spec: FileSpec, total: int, what: str, declared: list[int] | None = None) -> np.ndarray:
        """Row offsets of all chunks: each rank counts its own share, then the counts are summed."""
        counts = np.zeros(len(spec.paths), dtype=np.int64)
        for i in self.my_chunks(len(spec.paths)):
            counts[i] = count_rows(spec, i)
        counts = all_reduce_sum(self.ctx, counts, f"row counts of {spec.where}")
        return checked_offsets(spec, counts.tolist(), total, declared, what)

    def _fingerprint(self) -> str:
        """Of every input file (metadata, chunks, assignment files: name, size, mtime, sampled content; see
        :mod:`graphshard.fingerprint`) and the options: a changed input is never answered by a stale partition."""
        m, d = self.meta, Path(self.opts.partitions_dir)
        specs = [*m.edges.values(), *(s for t in m.node_data.values() for s in t.values()),
                 *(s for t in m.edge_data.values() for s in t.values())]
        assignment = sorted(f for f in [d / META_NAME] + [d / f"{t}.{e}" for t in m.ntypes for e in ("txt", "npy")]
                            if f.is_file())
        options = json.dumps([self.opts.num_hops, self.opts.save_orig_nids, self.opts.save_orig_eids])
        return files_fingerprint([m.path, *(p for spec in specs for p in spec.paths), *assignment], options)

    # -- step 1: edges -----------------------------------------------------------------------
    def plan_edges(self) -> None:
        """Split every edge type's chunks into pieces of about ``PIECE_BYTES``, count each
        piece's edges per destination partition (all ranks, summed), and derive the edge bounds and
        where every piece's edges land inside each partition (so received rows are placed directly)."""
        self.pieces: dict[int, list[tuple[int, int, int, int]]] = {}  # etype -> [(chunk, lo, hi, owner)]
        self.piece_base: dict[int, np.ndarray] = {}  # etype -> (pieces, P) start inside (partition, etype)
        counts = np.zeros((self.P, len(self.meta.etypes)), dtype=np.int64)
        for r, et in enumerate(self.meta.etypes):
            spec = self.meta.edges[et]
            declared = self.meta.edge_chunk_counts[et] if self.meta.edge_chunk_counts else None
            offsets = self.chunk_offsets(spec, self.meta.num_edges[et], f"edges of type {etype_str(et)!r}", declared)
            row_bytes = 24 + sum(_row_bytes(f) for f in self.meta.edge_data.get(et, {}).values())
            pieces = _pieces(offsets, self.ctx.world_size, _piece_rows(row_bytes))
            self.chunk_rows[r] = offsets
            per_piece = np.zeros((len(pieces), self.P), dtype=np.int64)
            for j, (c, lo, hi, owner) in enumerate(pieces):
                if owner == self.ctx.rank:
                    _, dst = self._edge_rows(r, et, c, lo, hi)
                    per_piece[j] = np.bincount(self.parts[dst], minlength=self.P)
            per_piece = all_reduce_sum(self.ctx, per_piece, f"edge counts of {etype_str(et)!r}")
            self.pieces[r] = pieces
            self.piece_base[r] = np.cumsum(per_piece, axis=0) - per_piece
            counts[:, r] = per_piece.sum(axis=0)
        self.edge_counts = counts

    def _edge_rows(self, r: int, et, c: int, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """Homogeneous (src, dst) of rows ``[lo, hi)`` of edge chunk ``c``. NumPy chunks are mapped
        piece by piece (only those rows become resident); other formats are parsed once per chunk."""
        nt = {t: i for i, t in enumerate(self.meta.ntypes)}
        so, do = self.node_off[nt[et[0]]], self.node_off[nt[et[2]]]
        if self.meta.edges[et].format == "numpy":
            src, dst = read_checked_edges(self.meta, et, c, (lo, hi))
            return src + so, dst + do
        if self._chunk_cache[0] != (r, c):  # CSV / Parquet: parse each chunk once per pass
            self._chunk_cache = ((r, c), read_checked_edges(self.meta, et, c))
        src, dst = self._chunk_cache[1]
        return src[lo:hi] + so, dst[lo:hi] + do

    def gather_edges(self, phase: list[int]) -> None:
        """Receive the edges (and edge data) of this rank's partitions in ``phase`` into ``self.edges``."""
        mine = [p for p in phase if p % self.ctx.world_size == self.ctx.rank]
        itype = np.int32 if self.N < 2**31 else np.int64
        etype_ = np.int32 if int(self.edge_off[-1]) < 2**31 else np.int64
        base_of = {p: np.concatenate([[0], np.cumsum(self.edge_counts[p])]) for p in mine}
        self.edges = {p: _PartEdges(np.empty(int(base_of[p][-1]), etype_), np.empty(int(base_of[p][-1]), itype),
                                    np.empty(int(base_of[p][-1]), itype)) for p in mine}
        in_phase = np.zeros(self.P, dtype=bool)
        in_phase[phase] = True
        for r, et in enumerate(self.meta.etypes):
            data = self.meta.edge_data.get(et, {})
            empty = [np.zeros((0, 3), np.int64)]
            for name, fspec in data.items():
                if len(fspec.paths) != len(self.meta.edges[et].paths):
                    raise InputError(f"{fspec.where}: {len(fspec.paths)} chunks, but the edges of "
                                     f"{etype_str(et)!r} have {len(self.meta.edges[et].paths)}: edge data must "
                                     "align with the edge chunks")
                sample = np.asarray(read_data(fspec, 0)[:0])
                empty.append(sample)
                for p in mine:
                    self.edges[p].feats[f"{etype_str(et)}/{name}"] = np.empty(
                        (int(self.edge_counts[p, r]), *sample.shape[1:]), sample.dtype)
            pieces = self.pieces[r]
            by_rank = [[j for j, pc in enumerate(pieces) if pc[3] == w] for w in range(self.ctx.world_size)]
            for k in range(max(len(b) for b in by_rank)):
                send = self._route_piece(r, et, by_rank[self.ctx.rank][k] if k < len(by_rank[self.ctx.rank]) else None,
                                         in_phase, data, empty)
                got = [exchange(self.ctx, [s[i] for s in send], f"edges of {etype_str(et)!r}")
                       for i in range(len(send[0]))]
                for sender in range(self.ctx.world_size):
                    if k < len(by_rank[sender]):
                        self._place(r, et, by_rank[sender][k], [g[sender] for g in got], mine, base_of, data)

    def _route_piece(self, r: int, et, j: int | None, in_phase: np.ndarray, data: dict,
                     empty: list[np.ndarray]) -> list[list[np.ndarray]]:
        """Per destination rank: [triples (eid, src, dst), feature rows...] of one piece's edges in the phase
        (``empty``: zero-row blocks of the right shapes, sent when this rank has no piece this round)."""
        w = self.ctx.world_size
        names = list(data)
        if j is None:
            return [list(empty) for _ in range(w)]
        c, lo, hi, _ = self.pieces[r][j]
        src, dst = self._edge_rows(r, et, c, lo, hi)
        part = self.parts[dst]
        keep = np.flatnonzero(in_phase[part])
        dest = self.owner_rank(part[keep])
        eid = self._piece_eids(r, c, lo, hi)[keep]
        triples = np.stack([eid, src[keep], dst[keep]], axis=1)
        want = int(self.chunk_rows[r][c + 1] - self.chunk_rows[r][c])
        rows = [self._aligned(data[n], c, empty[1 + k].shape[1:], want)[lo:hi][keep] for k, n in enumerate(names)]
        out = []
        for d in range(w):
            sel = np.flatnonzero(dest == d)
            out.append([triples[sel]] + [x[sel] for x in rows])
        return out

    @staticmethod
    def _aligned(spec: FileSpec, c: int, row_shape: tuple[int, ...], rows: int) -> np.ndarray:
        """Edge data chunk ``c``, which must hold exactly the rows of edge chunk ``c``."""
        arr = np.asarray(read_data_like(spec, c, row_shape))
        if arr.shape[0] != rows:
            raise InputError(f"{spec.paths[c]}: {arr.shape[0]} rows, but edge chunk {c} holds {rows} edges "
                             f"({spec.where}); edge data must be split exactly like the edge chunks")
        return arr

    def _piece_eids(self, r: int, c: int, lo: int, hi: int) -> np.ndarray:
        start = self.chunk_rows[r][c]
        return np.arange(start + lo, start + hi, dtype=np.int64) + self.edge_off[r]

    def _place(self, r: int, et, j: int, blocks: list[np.ndarray], mine: list[int], base_of: dict, data: dict) -> None:
        """Write a received block at its final (sorted) position in each owned partition's buffers."""
        triples = blocks[0]
        if triples.shape[0] == 0:
            return
        part = self.parts[triples[:, 2]]
        for p in mine:
            sel = np.flatnonzero(part == p)
            if sel.size == 0:
                continue
            e = self.edges[p]
            at = int(base_of[p][r] + self.piece_base[r][j, p])
            e.orig[at:at + sel.size] = triples[sel, 0]
            e.src[at:at + sel.size] = triples[sel, 1]
            e.dst[at:at + sel.size] = triples[sel, 2]
            for i, name in enumerate(data):
                fat = int(self.piece_base[r][j, p])
                e.feats[f"{etype_str(et)}/{name}"][fat:fat + sel.size] = blocks[1 + i][sel]

    # -- step 2: node features --------------------------------------------------------------
    def gather_node_feats(self, phase: list[int]) -> dict[int, dict[str, np.ndarray]]:
        """Rows of every node feature for this rank's partitions in ``phase``, placed by new ID."""
        mine = [p for p in phase if p % self.ctx.world_size == self.ctx.rank]
        in_phase = np.zeros(self.P, dtype=bool)
        in_phase[phase] = True
        out: dict[int, dict[str, np.ndarray]] = {p: {} for p in mine}
        for ti, t in enumerate(self.meta.ntypes):
            for name, spec in self.meta.node_data.get(t, {}).items():
                offsets, pieces = self._node_data_plan(t, name, spec)
                sample = np.asarray(read_data(spec, 0)[:0])
                for p in mine:
                    rows = int(self.node_bounds[p, ti + 1] - self.node_bounds[p, ti])
                    out[p][f"{t}/{name}"] = np.empty((rows, *sample.shape[1:]), sample.dtype)
                by_rank = [[pc for pc in pieces if pc[3] == w] for w in range(self.ctx.world_size)]
                for k in range(max(len(b) for b in by_rank)):
                    ids, rows = np.zeros(0, np.int64), sample
                    if k < len(by_rank[self.ctx.rank]):
                        c, lo, hi, _ = by_rank[self.ctx.rank][k]
                        homo = np.arange(offsets[c] + lo, offsets[c] + hi, dtype=np.int64) + self.node_off[ti]
                        keep = np.flatnonzero(in_phase[self.parts[homo]])
                        ids, rows = homo[keep], np.asarray(read_data_like(spec, c, sample.shape[1:]))[lo:hi][keep]
                    dest = self.owner_rank(self.parts[ids])
                    sel = [np.flatnonzero(dest == d) for d in range(self.ctx.world_size)]
                    got_ids = exchange(self.ctx, [ids[s] for s in sel], f"node IDs of {t}/{name}")
                    got_rows = exchange(self.ctx, [rows[s] for s in sel], f"node data {t}/{name}")
                    for gi, gr in zip(got_ids, got_rows):
                        part = self.parts[gi]
                        for p in mine:
                            s = np.flatnonzero(part == p)
                            out[p][f"{t}/{name}"][self.old2new[gi[s]] - self.node_bounds[p, ti]] = gr[s]
        return out

    def _node_data_plan(self, t: str, name: str, spec: FileSpec) -> tuple[np.ndarray, list]:
        """Chunk offsets and pieces of one node feature, counted once (every rank asks in the same order)."""
        if (t, name) not in self.node_data_pieces:
            offsets = self.chunk_offsets(spec, self.meta.num_nodes[t], f"nodes of type {t!r}")
            pieces = _pieces(offsets, self.ctx.world_size, _piece_rows(8 + _row_bytes(spec)))
            self.node_data_pieces[(t, name)] = (offsets, pieces)
        return self.node_data_pieces[(t, name)]

    # -- step 3: structure and HALO ----------------------------------------------------------
    def own_structure(self, p: int, rl: Relabelling) -> tuple[OwnInEdges, np.ndarray | None]:
        """CSC of partition ``p``'s own edges. With a 1-hop HALO the edge IDs stay compact (positions
        into the received arrays, int32 where they fit) and the received endpoints are released;
        deeper HALOs keep absolute IDs and the original IDs for answering other ranks."""
        e = self.edges[p]
        lo, hi = int(self.node_bounds[p, 0]), int(self.node_bounds[p, -1])
        elo, m = int(rl.edge_bounds[p, 0]), e.orig.shape[0]
        if self.opts.num_hops == 1:
            small = np.int32 if max(m, self.N) < 2**31 else np.int64
            indptr, pos, new_src = range_in_edges(None, e.src, e.dst, self.old2new, lo, hi, 0, m, small)
            e.src = e.dst = np.zeros(0, dtype=e.src.dtype)  # free them (a [:0] view would keep the buffer)
            return OwnInEdges(indptr, pos, new_src, eid_base=elo), None
        indptr, pos, new_src = range_in_edges(None, e.src, e.dst, self.old2new, lo, hi, 0, m)
        return OwnInEdges(indptr, pos + elo, new_src), e.orig[pos]

    def halo_edges(self, own: dict[int, tuple[OwnInEdges, np.ndarray]]) -> dict[int, tuple[HaloInEdges, np.ndarray]]:
        """In-edges of the nodes within ``num_hops - 1`` backward hops, fetched from their owners."""
        empty = (HaloInEdges.empty(), np.zeros(0, np.int64))
        result = {p: empty for p in own}
        if self.opts.num_hops == 1:
            return result
        seen = {}
        frontier = {}
        found: dict[int, dict[str, list[np.ndarray]]] = {p: {"dst": [], "deg": [], "eid": [], "src": [], "orig": []}
                                                         for p in own}
        for p in own:
            lo, hi = int(self.node_bounds[p, 0]), int(self.node_bounds[p, -1])
            seen[p] = np.zeros(self.N, dtype=bool)
            seen[p][lo:hi] = True
            srcs = own[p][0].src
            frontier[p] = np.unique(srcs[~seen[p][srcs]])
        for _ in range(self.opts.num_hops - 1):
            for p in own:
                seen[p][frontier[p]] = True
            answers = self._fetch_in_edges(np.unique(np.concatenate([frontier[p] for p in own] or
                                                                    [np.zeros(0, np.int64)])), own)
            for p in own:
                nodes = frontier[p]
                deg, eid, src, orig = answers(nodes)
                acc = found[p]
                for k, v in (("dst", nodes), ("deg", deg), ("eid", eid), ("src", src), ("orig", orig)):
                    acc[k].append(v)
                frontier[p] = np.unique(src[~seen[p][src]])
        for p in own:
            acc = {k: np.concatenate(v) for k, v in found[p].items()}
            order = np.argsort(acc["dst"], kind="stable")
            take = ragged_ranges((np.cumsum(acc["deg"]) - acc["deg"])[order], acc["deg"][order])
            result[p] = (HaloInEdges(acc["dst"][order], acc["deg"][order], acc["eid"][take], acc["src"][take]),
                         acc["orig"][take])
        return result

    def _fetch_in_edges(self, nodes: np.ndarray, own: dict[int, tuple[OwnInEdges, np.ndarray]]):
        """Ask the owners of ``nodes`` (new IDs) for their in-edges; returns a lookup function."""
        w = self.ctx.world_size
        owner = self.owner_rank(np.searchsorted(self.part_starts, nodes, side="right") - 1)
        requests = exchange(self.ctx, [nodes[owner == r] for r in range(w)], "HALO requests")
        answers = [self._serve(asked, own) for asked in requests]
        got_deg = exchange(self.ctx, [a[0] for a in answers], "HALO degrees")
        got_rec = exchange(self.ctx, [a[1] for a in answers], "HALO in-edges")
        all_nodes = np.concatenate([nodes[owner == r] for r in range(w)])
        all_deg, all_rec = np.concatenate(got_deg), np.concatenate(got_rec)
        starts = np.cumsum(all_deg) - all_deg
        order = np.argsort(all_nodes)
        sorted_nodes = all_nodes[order]

        def lookup(asked: np.ndarray):
            idx = order[np.searchsorted(sorted_nodes, asked)]
            rec = all_rec[ragged_ranges(starts[idx], all_deg[idx])]
            return all_deg[idx], rec[:, 0], rec[:, 1], rec[:, 2]
        return lookup

    def _serve(self, asked: np.ndarray, own: dict[int, tuple[OwnInEdges, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
        """In-degrees and in-edges ``(new eid, new src, original eid)`` of ``asked`` nodes, in ``asked`` order."""
        q = np.searchsorted(self.part_starts, asked, side="right") - 1
        deg = np.zeros(asked.shape[0], dtype=np.int64)
        lo_of = {}
        for part in np.unique(q):  # loop over partitions, not nodes
            sel = np.flatnonzero(q == part)
            local = asked[sel] - int(self.node_bounds[part, 0])
            indptr = own[int(part)][0].indptr
            deg[sel] = indptr[local + 1] - indptr[local]
            lo_of[int(part)] = (sel, indptr[local])
        out_start = np.cumsum(deg) - deg
        rec = np.empty((int(deg.sum()), 3), dtype=np.int64)
        for part, (sel, first) in lo_of.items():
            o, orig = own[part]
            src_pos = ragged_ranges(first, deg[sel])
            dst_pos = ragged_ranges(out_start[sel], deg[sel])
            rec[dst_pos, 0], rec[dst_pos, 1], rec[dst_pos, 2] = o.eids[src_pos], o.src[src_pos], orig[src_pos]
        return deg, rec

    # -- step 4: write ------------------------------------------------------------------------
    def done_marker(self, p: int) -> Path:
        return self.resume / f"part{p}.done.json"

    def reusable(self, p: int) -> bool:
        marker = self.done_marker(p)
        if not marker.is_file():
            return False
        try:
            info = json.loads(marker.read_text())
            ok = info["fingerprint"] == self.fingerprint and all(
                sha256_file(self.resume / rel) == digest for rel, digest in info["checksums"].items())
        except (OSError, ValueError, KeyError):
            ok = False
        if ok:
            log.info("rank %d: reusing finished partition %d from an earlier run", self.ctx.rank, p)
        return ok

    def write_features(self, p: int, rl: Relabelling, node_feats: dict[str, np.ndarray]) -> dict[str, str]:
        """Stage partition ``p``'s feature (and original-ID) files; returns their checksums."""
        e = self.edges[p]
        files = {"node_feats": node_feats, "edge_feats": e.feats}
        if self.opts.save_orig_nids:
            files["orig_nids"] = {t: self.new2old[self.node_bounds[p, i]: self.node_bounds[p, i + 1]] - self.node_off[i]
                                  for i, t in enumerate(self.meta.ntypes)}
        if self.opts.save_orig_eids:
            base = int(rl.edge_bounds[p, 0])
            files["orig_eids"] = {etype_str(et): e.orig[rl.edge_bounds[p, r] - base: rl.edge_bounds[p, r + 1] - base]
                                  - self.edge_off[r] for r, et in enumerate(self.meta.etypes)}
        tmp = self._tmp_dir(p)
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        sums = {f"part{p}/{FILE_NAMES[k]}": self._write(p, tmp / FILE_NAMES[k], v, k) for k, v in files.items()}
        e.feats = {}
        return sums

    def write_structure(self, p: int, rl: Relabelling, view: HomoView, own: tuple[OwnInEdges, np.ndarray | None],
                        halo: tuple[HaloInEdges, np.ndarray], sums: dict[str, str]) -> None:
        """Stage ``graph.safetensors`` of partition ``p``, then publish it to the resume area with its marker."""
        lo, hi = int(self.node_bounds[p, 0]), int(self.node_bounds[p, -1])
        local = local_structure(lo, hi, own[0], halo[0], np.empty(self.N, dtype=np.int64))
        e = self.edges[p]
        if own[1] is None:  # compact: local.eids are positions into the received (sorted) arrays
            orig = lambda a, b: e.orig[local.eids[a:b]].astype(np.int64)  # noqa: E731
        else:
            full = np.concatenate([own[1], halo[1]]) if halo[1].size else own[1]
            orig = lambda a, b: full[a:b]  # noqa: E731
        tmp = self._tmp_dir(p)
        sums[f"part{p}/{FILE_NAMES['part_graph']}"] = self._write(
            p, tmp / FILE_NAMES["part_graph"], structure_arrays(local, view, rl, orig_eids=orig), "part_graph")
        shutil.rmtree(self.resume / f"part{p}", ignore_errors=True)
        tmp.rename(self.resume / f"part{p}")
        files = sorted(k for k in FILE_NAMES if f"part{p}/{FILE_NAMES[k]}" in sums)
        self.done_marker(p).write_text(json.dumps({"fingerprint": self.fingerprint, "checksums": sums, "files": files}))

    def _write(self, p: int, path: Path, tensors: dict, kind: str) -> str:
        """Write one part file with its identity; a failed write (a full disk) removes the partition's
        staging directory and names the file."""
        try:
            return write_tensors(path, tensors, self.identity.identity(p, kind))
        except OSError as exc:
            shutil.rmtree(self._tmp_dir(p), ignore_errors=True)
            raise write_failure(exc, path) from exc

    def _tmp_dir(self, p: int) -> Path:
        return self.resume / f"part{p}.tmp-{os.getpid()}"


def dispatch(opts: DispatchOptions, ctx: DistContext) -> Path:
    """Run the dispatch step on this rank (all ranks call it). Returns the config JSON path."""
    d = _Dispatch(opts, ctx)
    check_output_dir(d.out, "partitions", opts.overwrite)  # every rank checks before any rank writes
    if not opts.overwrite:
        claim_for_graph(d.out, d.name, overwrite=False)
    barrier(ctx, "output checked")
    prepare_output_dir(d.out, "partitions", overwrite=True)
    claim_for_graph(d.out, d.name, opts.overwrite)
    d.resume.mkdir(exist_ok=True)
    for p in d.owned:  # staging left by a killed run of this partition's owner
        for stale in d.resume.glob(f"part{p}.tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)
    config_path = d.out / f"{d.name}.json"
    config_path.unlink(missing_ok=True)  # from here on, nothing here may look complete
    barrier(ctx, "start")
    timer = PhaseTimer(total=2 + 2 * len(d.phases()), logger=log, desc=f"dispatch rank {ctx.rank}")
    try:
        with timer.phase(f"rank {ctx.rank} plan (count edges per piece)"):
            d.plan_edges()
        rl = Relabelling(d.P, d.new2old, d.old2new, np.zeros(0, np.int64), d.node_bounds,
                         edge_bounds_from_counts(d.edge_counts))
        view = HomoView(d.N, d.node_off, d.edge_off, np.zeros(0, np.int64), np.zeros(0, np.int64))
        d.identity = _config_template(d, opts, rl, config_path)
        for phase in d.phases():
            with timer.phase(f"rank {ctx.rank} exchange"):
                d.gather_edges(phase)
                node_feats = d.gather_node_feats(phase)
            with timer.phase(f"rank {ctx.rank} build + write"):
                skip = {p for p in d.edges if d.reusable(p)}
                sums = {p: d.write_features(p, rl, node_feats.pop(p)) for p in sorted(d.edges) if p not in skip}
                node_feats.clear()
                own = {p: d.own_structure(p, rl) for p in d.edges}  # deeper HALOs serve all of them
                halo = d.halo_edges(own)
                for p in sorted(d.edges):
                    if p not in skip:
                        d.write_structure(p, rl, view, own.pop(p), halo.pop(p), sums[p])
                    log.info("rank %d: partition %d ready", ctx.rank, p)
                d.edges = {}
        with timer.phase(f"rank {ctx.rank} wait for all partitions"):
            barrier(ctx, "partitions written")
    finally:
        timer.close()
    mine = {}
    for p in d.owned:
        info = json.loads(d.done_marker(p).read_text())
        replace_dir(d.resume / f"part{p}", d.out / f"part{p}", d.resume / f"replaced-part{p}")
        mine[p] = info
    everything = {}
    for blob in all_gather_bytes(ctx, json.dumps(mine).encode(), "partition checksums"):
        everything.update({int(k): v for k, v in json.loads(blob).items()})
    keys = {p: [k for k in FILE_NAMES if k in everything[p]["files"]] for p in everything}
    cfg = replace(d.identity, parts=[part_entry({k: f"part{p}/{FILE_NAMES[k]}" for k in keys[p]}) for p in range(d.P)],
                  checksums=dict(sorted(c for p in range(d.P) for c in everything[p]["checksums"].items())))
    barrier(ctx, "partitions published")
    _check_loads(cfg, d.owned, ctx.rank)
    barrier(ctx, "partitions validated")
    write_config(cfg)
    for p in d.owned:
        d.done_marker(p).unlink(missing_ok=True)
        shutil.rmtree(d.resume / f"replaced-part{p}", ignore_errors=True)
    barrier(ctx, "config written")
    shutil.rmtree(d.resume, ignore_errors=True)  # every rank is past the barrier: nothing in it is needed
    log.info("rank %d done: peak RSS %d bytes", ctx.rank, peak_rss_bytes())
    return config_path


def _check_loads(cfg: PartitionConfig, owned: list[int], rank: int) -> None:
    """Load (with the default validation) every partition this rank wrote, through a private copy of the
    config: a run reports success only for output that loads, and never publishes a config that does not."""
    from ..format.load import load_partition

    for stale in cfg.path.parent.glob(f".{cfg.path.name}.check-{rank}-*"):  # left by a run killed while checking
        stale.unlink(missing_ok=True)
    probe = replace(cfg, path=cfg.path.with_name(f".{cfg.path.name}.check-{rank}-{os.getpid()}"))
    write_config(probe)
    try:
        for p in owned:
            load_partition(probe.path, p)
    finally:
        probe.path.unlink(missing_ok=True)


def _config_template(d: "_Dispatch", opts: DispatchOptions, rl: Relabelling, config_path: Path) -> PartitionConfig:
    """The config without its file lists: known before any file is written, so files can carry its identity."""
    return PartitionConfig(
        path=config_path, graph_name=d.name, part_method=_method(opts.partitions_dir), num_parts=d.P,
        halo_hops=opts.num_hops, num_nodes=d.N, num_edges=int(d.edge_off[-1]),
        ntypes={t: i for i, t in enumerate(d.meta.ntypes)},
        etypes={etype_str(e): i for i, e in enumerate(d.meta.etypes)},
        node_map={t: rl.node_map()[i] for i, t in enumerate(d.meta.ntypes)},
        edge_map={etype_str(e): rl.edge_map()[i] for i, e in enumerate(d.meta.etypes)},
        parts=[], extra={"num_trainers_per_machine": 1}, feature_schema=_feature_schema(d.meta),
    ).with_fingerprint()


def _feature_schema(meta: ChunkedMeta) -> Schema:
    """Names, dtypes and row shapes of the features dispatch writes (as it allocates them: from chunk 0)."""
    def spec(f: FileSpec) -> tuple[np.dtype, tuple[int, ...]]:
        sample = np.asarray(read_data(f, 0)[:0])
        return sample.dtype, sample.shape[1:]
    node = {f"{t}/{name}": spec(f) for t in meta.ntypes for name, f in meta.node_data.get(t, {}).items()}
    edge = {f"{etype_str(et)}/{name}": spec(f) for et in meta.etypes for name, f in meta.edge_data.get(et, {}).items()}
    return feature_schema(node, edge)


PIECE_BYTES = 16 << 20  # bytes read, routed and exchanged per round: bounds the memory in flight


def _piece_rows(row_bytes: int) -> int:
    return max(1024, PIECE_BYTES // max(1, row_bytes))


def _pieces(offsets: np.ndarray, world: int, piece_rows: int) -> list[tuple[int, int, int, int]]:
    """``(chunk, lo, hi, owner rank)`` for every piece of at most ``piece_rows`` rows of every chunk, in
    chunk order; chunk ``c`` of ``C`` belongs to the rank whose contiguous share holds it."""
    count = offsets.shape[0] - 1
    out = []
    for c in range(count):
        owner = next(r for r in range(world) if count * r // world <= c < count * (r + 1) // world)
        rows = int(offsets[c + 1] - offsets[c])
        for lo in range(0, max(rows, 1), piece_rows):
            out.append((c, lo, min(rows, lo + piece_rows), owner))
    return out


def _row_bytes(spec: FileSpec) -> int:
    sample = np.asarray(read_data(spec, 0)[:1]) if spec.paths else np.zeros((0,))
    return int(sample[:1].nbytes) if sample.shape[0] else sample.dtype.itemsize


def _method(partitions_dir: Path) -> str:
    meta = read_partition_meta(partitions_dir)
    if meta is not None:
        return str(meta.get("method", "explicit"))
    return "explicit"


def _worker(opts: DispatchOptions, timeout: float, log_level: int) -> None:
    logging.basicConfig(level=log_level, format=f"%(asctime)s rank {os.environ.get('RANK')} %(levelname)s: %(message)s")
    with DistContext.from_env(timeout) as ctx:
        dispatch(opts, ctx)


def run_dispatch(opts: DispatchOptions, num_procs: int | None = None, timeout: float = 300.0,
                 host: str = "127.0.0.1") -> Path:
    """Run dispatch: start ``num_procs`` local ranks, or (None) join as one rank of a torchrun job."""
    level = logging.getLogger("graphshard").getEffectiveLevel()
    if not opts.overwrite:  # a refusal is reported before any process starts
        claim_for_graph(check_output_dir(opts.out_dir, "partitions"), read_metadata(opts.in_dir).graph_name, False)
    if num_procs is None:
        _worker(opts, timeout, level)
    else:
        from ..distributed.launcher import launch

        launch(_worker, num_procs, (opts, timeout, level), host=host, timeout=timeout)
    return Path(opts.out_dir).resolve() / f"{read_metadata(opts.in_dir).graph_name}.json"
