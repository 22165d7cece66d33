"""``partition_graph``: the in-memory partitioning pipeline (assign → relabel → build → write)."""

from __future__ import annotations

import logging
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from ..disk import check_disk as disk_guard
from ..errors import InputError
from ..format.config import PartitionConfig, check_graph_name, feature_schema
from ..format.feat_dtype import check_feat_dtype, check_in_range, feat_dtype_entry, narrow_feats, stored_dtype
from ..format.outputs import check_output_dir, claim_for_graph
from ..format.sparse import sparse_entry
from ..format.write import PartitionWriter
from ..graph import Graph, etype_str, to_numpy
from ..memory import allowed
from ..progress import PhaseTimer
from ..sparse import CSRRows
from .assign import assign
from .build import feature_arrays, inner_orig_ids, structure_arrays
from .cost import graph_data_bytes, graph_estimates, partition_disk, refuse_unfit
from .halo import HaloInEdges, InEdges, check_hops, expand_dsts, local_structure, own_in_edges
from .homogenize import HomoView, homogenize
from .relabel import Relabelling, relabel

log = logging.getLogger(__name__)


def partition_graph(
    g: Graph | Any,
    graph_name: str,
    num_parts: int,
    out_path: str | os.PathLike,
    *,
    num_hops: int = 1,
    part_method: str | Any = "metis",
    balance_ntypes: Any = None,
    balance_edges: bool = False,
    return_mapping: bool = False,
    num_trainers_per_machine: int = 1,
    objtype: str = "cut",
    seed: int = 0,
    save_orig_ids: bool = False,
    overwrite: bool = False,
    num_classes: int | None = None,
    memory: int | str | None = None,
    feat_dtype: str | None = None,
    check_disk: bool = True,
) -> tuple[Any, Any] | None:
    """Partition ``g`` into ``num_parts`` parts and write partition format v1 to ``out_path``.

    Args:
        g: a `Graph`, or a PyG ``Data``/``HeteroData``.
        graph_name: letters, digits and underscores; the config is ``out_path/<graph_name>.json``.
        num_parts: number of partitions (machines), 1 ≤ num_parts ≤ number of nodes.
        out_path: the directory to write the partitions and their config into (created if missing).
        num_hops: HALO depth k ≥ 1 (in-edges of nodes within k-1 backward hops are stored too).
        part_method: ``"metis"``, ``"random"``, ``"kaminpar"``, or an explicit array giving each node's
            partition in homogeneous order (node types in order, then per-type IDs).
        balance_ntypes: per-node integer vector (homogeneous order, or a dict per node type); each
            partition gets about as many nodes of each value as the others.
        balance_edges: balance the in-degree (edges owned) per partition too.
        return_mapping: return ``(orig_nids, orig_eids)``: new → original ID maps (tensors for a
            homogeneous graph, dicts of per-type tensors otherwise).
        num_trainers_per_machine: T > 1 splits each partition into T trainer groups; node feature
            ``"<ntype>/trainer_id"`` holds each inner node's global trainer ``machine * T + local``.
        objtype: METIS objective, ``"cut"`` or ``"vol"``.
        seed: random seed (assignment is deterministic for a given seed).
        save_orig_ids: also write ``orig_nids.safetensors`` / ``orig_eids.safetensors`` per partition.
        overwrite: allow ``out_path`` to be a directory graphshard did not write, or one holding another
            graph's partitions (whose config is then removed). Without it such directories are refused.
        num_classes: the dataset's number of label classes, recorded in the config: training checks every
            split node's label against it.
        memory: what this step may use (bytes, or a size such as ``"16G"``; default: the machine's memory):
            a method predicted to need more is refused before any work (see `graphshard.partition.cost`).
        feat_dtype: ``"float16"`` or ``"bfloat16"``: floating-point node and edge features are stored in that
            type (half the bytes of float32; recorded in the config and its ``feature_schema``; models upcast
            them to float32 at their input). CSR features keep their dtype. Default: as given.
        check_disk: refuse before any work when the partitions are predicted not to fit the free space of
            the file system holding ``out_path`` (with a margin, see `graphshard.disk`); False skips it.

    Returns:
        With ``return_mapping``, ``(orig_nids, orig_eids)``: the new → original ID maps (tensors for a
        homogeneous graph, dicts of per-type tensors otherwise); else None.

    Raises:
        InputError: invalid graph, name, counts or options; an output directory that is refused; a
            method predicted to need more memory than ``memory``, or partitions predicted not to fit
            the disk.
        WriteError: a partition file could not be written (no space left, no permission); names the path.
    """
    g = g if isinstance(g, Graph) else Graph.from_pyg(g)
    _check_args(g, graph_name, num_parts, num_hops, trainers=num_trainers_per_machine, seed=seed)
    check_feat_dtype(feat_dtype)
    check_in_range(_named_feats(g), feat_dtype)  # a feature float16 cannot hold: refused before any work
    if isinstance(part_method, str):  # predicted not to fit: refused before any work
        refuse_unfit({e.method: e for e in graph_estimates(g.total_nodes, g.total_edges)}, part_method, allowed(memory))
    if check_disk:
        node_data, edge_data = graph_data_bytes(g)
        node_data += 8 * g.total_nodes if num_trainers_per_machine > 1 else 0  # <ntype>/trainer_id
        need = partition_disk(
            out_path,
            g.total_nodes,
            g.total_edges,
            num_parts,
            node_data_bytes=node_data,
            edge_data_bytes=edge_data,
            num_hops=num_hops,
            orig_ids=save_orig_ids,
        )
        disk_guard(need, hint=" (out_path)")
    if num_classes is not None and (
        isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1
    ):
        raise InputError(f"num_classes must be a positive integer, got {num_classes!r}")
    out_dir = check_output_dir(out_path, "partitions", overwrite)  # refuse before any work is done
    if not overwrite:
        claim_for_graph(out_dir, graph_name, overwrite=False)
    timer = PhaseTimer(total=5, logger=log)
    try:
        with timer.phase("homogenize"):
            view = homogenize(g)
            classes = _balance_vector(g, balance_ntypes)
        with timer.phase("assign"):
            result = assign(
                view,
                part_method,
                num_parts,
                num_trainers_per_machine,
                balance_ntypes=classes,
                balance_edges=balance_edges,
                objtype=objtype,
                seed=seed,
            )
        with timer.phase("relabel"):
            rl = relabel(view, result.parts, num_parts)
            adj = InEdges.build(view, rl) if num_hops > 1 else None
        method = part_method if isinstance(part_method, str) else "explicit"
        cfg = _config(
            out_dir,
            g,
            graph_name,
            method,
            num_hops=num_hops,
            rl=rl,
            trainers=num_trainers_per_machine,
            trainer_ids=result.trainer_ids,
            feat_dtype=feat_dtype,
        ).with_fingerprint()
        cfg = replace(cfg, num_classes=num_classes)
        with PartitionWriter(out_path, graph_name, overwrite, identity=cfg) as writer:
            with timer.phase("build+write"):
                _write_parts(
                    writer,
                    g,
                    view,
                    rl,
                    adj=adj,
                    num_hops=num_hops,
                    trainer_ids=result.trainer_ids,
                    save_orig=save_orig_ids,
                    feat_dtype=feat_dtype,
                )
            with timer.phase("commit"):
                cfg = writer.commit(cfg)
    finally:
        timer.close()
    log.info("wrote %d partitions of %r to %s", num_parts, graph_name, cfg.path)
    return _mapping(g, view, rl) if return_mapping else None


def _named_feats(g: Graph) -> dict[str, Any]:
    """Every feature array of ``g`` by ``"<type>/<name>"`` (edge types spelled ``src:rel:dst``)."""
    nodes = {f"{t}/{n}": a for t, feats in g.node_feats.items() for n, a in feats.items()}
    return nodes | {f"{etype_str(et)}/{n}": a for et, feats in g.edge_feats.items() for n, a in feats.items()}


def _check_args(g: Graph, name: str, num_parts: int, num_hops: int, *, trainers: int, seed: int) -> None:
    check_graph_name(name)
    check_hops(num_hops)
    for label, v in (("num_parts", num_parts), ("num_trainers_per_machine", trainers)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise InputError(f"{label} must be an integer >= 1, got {v!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"seed must be a non-negative integer, got {seed!r}")
    if num_parts * trainers > g.total_nodes:
        raise InputError(
            f"num_parts × num_trainers_per_machine = {num_parts * trainers} exceeds the "
            f"number of nodes ({g.total_nodes})"
        )


def _balance_vector(g: Graph, balance: Any) -> np.ndarray | None:
    if balance is None:
        return None
    if isinstance(balance, dict):
        missing = [t for t in g.ntypes if t not in balance]
        if missing:
            raise InputError(f"balance_ntypes: no entry for node types {missing}")
        parts = [to_numpy(balance[t]) for t in g.ntypes]
        for t, arr in zip(g.ntypes, parts):
            if arr.shape != (g.num_nodes[t],):
                raise InputError(f"balance_ntypes[{t!r}] must have {g.num_nodes[t]} entries, got shape {arr.shape}")
        arr = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    else:
        arr = to_numpy(balance)
    if arr.shape != (g.total_nodes,):
        raise InputError(f"balance_ntypes must have one entry per node ({g.total_nodes}), got shape {arr.shape}")
    if arr.dtype == bool:
        arr = arr.astype(np.int64)
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise InputError(f"balance_ntypes must hold integers, got dtype {arr.dtype}")
    return arr.astype(np.int64, copy=False)


def _write_parts(
    writer: PartitionWriter,
    g: Graph,
    view: HomoView,
    rl: Relabelling,
    *,
    adj: InEdges | None,
    num_hops: int,
    trainer_ids: np.ndarray | None,
    save_orig: bool,
    feat_dtype: str | None = None,
) -> None:
    scratch = np.empty(view.num_nodes, dtype=np.int64)
    for p in tqdm(range(rl.num_parts), desc="write partitions", unit="part", disable=None, leave=False):
        # features first: a pending (background) write then always overlaps a small job
        nids, eids = inner_orig_ids(g, view, rl, p)
        node_feats, edge_feats = feature_arrays(g, nids, eids)
        if trainer_ids is not None:
            for t, name in enumerate(g.ntypes):
                node_feats[f"{name}/trainer_id"] = trainer_ids[nids[name] + view.node_offsets[t]]
        writer.write_file(p, "node_feats", narrow_feats(node_feats, feat_dtype))
        writer.write_file(p, "edge_feats", narrow_feats(edge_feats, feat_dtype))
        del node_feats, edge_feats
        if save_orig:
            writer.write_file(p, "orig_nids", nids)
            writer.write_file(p, "orig_eids", eids)
        start, end = rl.part_nodes(p)
        halo_dsts = expand_dsts(start, end, num_hops, adj, num_nodes=view.num_nodes)
        halo = HaloInEdges.gather(adj, halo_dsts) if adj is not None else HaloInEdges.empty()
        local = local_structure(start, end, own_in_edges(view, rl, p), halo, scratch=scratch)
        writer.write_file(p, "part_graph", structure_arrays(local, view, rl))
        del local, nids, eids


def _config(
    out_dir: Path,
    g: Graph,
    name: str,
    method: str,
    *,
    num_hops: int,
    rl: Relabelling,
    trainers: int,
    trainer_ids: np.ndarray | None,
    feat_dtype: str | None = None,
) -> PartitionConfig:
    node_map, edge_map = rl.node_map(), rl.edge_map()

    def dtype(a: Any) -> Any:  # what a feature is stored as (CSR features keep theirs)
        return a.dtype if isinstance(a, CSRRows) else stored_dtype(a.dtype, feat_dtype)

    node = {f"{t}/{n}": (dtype(a), a.shape[1:]) for t, feats in g.node_feats.items() for n, a in feats.items()}
    if trainer_ids is not None:  # written by _write_parts next to the features
        node |= {f"{t}/trainer_id": (trainer_ids.dtype, ()) for t in g.ntypes}
    edge = {
        f"{etype_str(et)}/{n}": (dtype(a), a.shape[1:]) for et, feats in g.edge_feats.items() for n, a in feats.items()
    }
    return PartitionConfig(
        path=out_dir / f"{name}.json",
        graph_name=name,
        part_method=method,
        num_parts=rl.num_parts,
        halo_hops=num_hops,
        num_nodes=g.total_nodes,
        num_edges=g.total_edges,
        ntypes={t: i for i, t in enumerate(g.ntypes)},
        etypes={etype_str(et): i for i, et in enumerate(g.canonical_etypes)},
        node_map={t: node_map[i] for i, t in enumerate(g.ntypes)},
        edge_map={etype_str(et): edge_map[i] for i, et in enumerate(g.canonical_etypes)},
        parts=[],
        extra={"num_trainers_per_machine": trainers, **sparse_entry(g.node_feats), **feat_dtype_entry(feat_dtype)},
        feature_schema=feature_schema(node, edge),
    )


def _mapping(g: Graph, view: HomoView, rl: Relabelling) -> tuple[Any, Any]:
    """New → original ID maps: per type, the original IDs in per-type new-ID order."""
    import torch

    if g.is_homogeneous:
        return torch.from_numpy(rl.new2old), torch.from_numpy(rl.perm.astype(np.int64))
    per_part = [inner_orig_ids(g, view, rl, p) for p in range(rl.num_parts)]
    nids = {t: torch.from_numpy(np.concatenate([n[t] for n, _ in per_part])) for t in g.ntypes}
    eids = {et: torch.from_numpy(np.concatenate([e[etype_str(et)] for _, e in per_part])) for et in g.canonical_etypes}
    return nids, eids
