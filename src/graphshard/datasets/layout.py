"""Read and write the dataset directory layout of ``../shared/data`` (see its README).

Homogeneous: ``src.npy``, ``dst.npy``, features (``feat.npy`` dense or ``feat_csr_*.npy``), ``label.npy`` (an
integer class per node, a float target, or a row of 0/1 labels or float targets),
``{train,val,test}_idx.npy``, ``meta.json``. Heterogeneous (``meta.json`` → ``kind``):
``edges/<src>__<rel>__<dst>.npy`` of shape (2, E), ``<ntype>_feat.npy`` (or CSR), ``<ntype>_label.npy``,
``<ntype>_{train,val,test}_idx.npy``. Edge labels and splits (``train --task edge``): ``edge_label.npy`` and
``edge_{train,val,test}_idx.npy`` (homogeneous), ``edges/<src>__<rel>__<dst>_label.npy`` and
``edges/<src>__<rel>__<dst>_{train,val,test}_idx.npy`` (per edge type), one row per edge as stored. Every array
is loaded with ``allow_pickle=False``.
In the :class:`Graph`, features are ``feat``, labels ``label`` and splits boolean ``{train,val,test}_mask`` (of
the nodes, and of the edges as edge data).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..chunked.load import load_chunked_graph
from ..chunked.spec import read_metadata
from ..errors import InputError
from ..format.inputs import require_dir
from ..format.jsonfile import read_json_object
from ..format.npyfile import read_npy
from ..format.outputs import check_output_dir
from ..format.staging import naming, staged_dir
from ..graph import DEFAULT_ETYPE, DEFAULT_NTYPE, EType, Feature, Graph, etype_str, parse_etype
from ..limits import check_count
from ..names import SUFFIX_ROOM, check_etype_names, check_path_name, inside
from ..sparse import CSRRows
from .dataset import Dataset
from .ogb import is_ogb_dir, load_ogb

SPLITS = ("train", "val", "test")


def _load(path: Path) -> np.ndarray:
    if not path.is_file():
        raise InputError(f"{path}: dataset file is missing")
    return read_npy(path, mmap=True)  # damaged, empty, pickled or .npz files: an error naming the file


def _features(d: Path, fmt: str, files: list[str], shape: list[int] | None, *, n: int) -> np.ndarray | CSRRows | None:
    """The features of ``n`` nodes as ``meta.json`` describes them (``fmt``, ``files``, ``shape``)."""
    if fmt == "none":
        return None
    if (
        not isinstance(files, list)
        or not all(isinstance(f, str) for f in files)
        or len(files) != (3 if fmt == "csr" else 1)
    ):
        raise InputError(
            f"{d}/meta.json: feat_files must list {'3 files' if fmt == 'csr' else 'one file'}, got {files!r}"
        )
    if fmt == "dense":
        x = np.asarray(_load(d / files[0]))
        if x.ndim < 1 or x.shape[0] != n or not (np.issubdtype(x.dtype, np.number) or x.dtype == bool):
            raise InputError(
                f"{d / files[0]}: features must be numbers with one row per node ({n}), got {x.dtype} {x.shape}"
            )
        return x
    if fmt == "csr":
        indptr, indices, data = (np.asarray(_load(d / f)) for f in files)
        if not (isinstance(shape, list) and len(shape) == 2):
            raise InputError(f"{d}/meta.json: a CSR feature needs its shape [rows, columns], got {shape!r}")
        rows, cols = (check_count(v, f"{d}/meta.json: feature shape") for v in shape)
        if rows != n:
            raise InputError(f"{d}/meta.json: a CSR feature of {rows} rows for {n} nodes")
        _check_csr(d, files, indptr, indices, data=data, rows=rows, cols=cols)
        return CSRRows(indptr.astype(np.int64), indices.astype(np.int64), data, cols)  # kept sparse
    raise InputError(f"{d}/meta.json: unknown feature format {fmt!r} (expected dense, csr or none)")


def _check_csr(
    d: Path, files: list[str], indptr: np.ndarray, indices: np.ndarray, *, data: np.ndarray, rows: int, cols: int
) -> None:
    """A CSR matrix of ``rows`` x ``cols``: integer ``indptr`` from 0 to ``len(indices)``, never decreasing;
    integer column indices in ``[0, cols)``; one value per index. Errors name the file and position."""
    p_file, i_file, _ = (d / f for f in files)
    if indptr.shape != (rows + 1,) or indices.ndim != 1 or indices.shape != data.shape[:1]:
        raise InputError(
            f"{d}: CSR feature files {files} do not describe a {rows} x {cols} matrix "
            f"(indptr {indptr.shape}, indices {indices.shape}, data {data.shape})"
        )
    for f, arr in ((p_file, indptr), (i_file, indices)):
        if arr.size and not np.issubdtype(arr.dtype, np.integer):
            raise InputError(f"{f}: must hold integers, got {arr.dtype}")
    if int(indptr[0]) != 0 or int(indptr[-1]) != indices.shape[0]:
        raise InputError(f"{p_file}: indptr must start at 0 and end at {indices.shape[0]} (the number of values)")
    bad = np.flatnonzero(np.diff(indptr) < 0)
    if bad.size:
        raise InputError(f"{p_file}: indptr decreases at row {int(bad[0])}")
    bad = np.flatnonzero((indices < 0) | (indices >= cols))
    if bad.size:
        raise InputError(f"{i_file}: position {int(bad[0])}: column {int(indices[bad[0]])} outside [0, {cols})")


def _node_ids(path: Path, ids: np.ndarray, n: int, what: str) -> np.ndarray:
    """``ids`` (read from ``path``) if they are a 1-D array of integer node IDs in ``[0, n)``; else an
    :class:`InputError` naming the file, the position and the value as stored (an unsigned 2**64 - 1 is not -1)."""
    if ids.ndim != 1:
        raise InputError(f"{path}: {what}s must be a 1-D array, got shape {ids.shape}")
    if ids.size and not np.issubdtype(ids.dtype, np.integer):
        raise InputError(f"{path}: node IDs must be integers, got {ids.dtype}")
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= n):
        bad = int(np.argmax((ids < 0) | (ids >= n)))
        raise InputError(f"{path}: position {bad}: {what} {int(ids[bad])} out of range [0, {n})")
    return ids


def _labels(path: Path, n: int, item: str = "node") -> np.ndarray:
    """The labels in ``path``: one row per node (``n``; or edge) — an integer class, a float target, a row of 0/1
    labels or of float targets (see :mod:`graphshard.tasks.labels`) — or an :class:`InputError` naming the file."""
    labels = np.asarray(_load(path))
    numeric = np.issubdtype(labels.dtype, np.number) or labels.dtype == bool
    if labels.ndim not in (1, 2) or labels.shape[0] != n or not (numeric or labels.size == 0):
        raise InputError(
            f"{path}: labels must be one number (or one row of numbers) per {item}, shape ({n},) or ({n}, k), "
            f"got {labels.dtype} {labels.shape}"
        )
    return labels


def _edge_data(d: Path, prefix: str, count: int) -> dict[str, Feature]:
    """An edge type's labels and split masks (``<prefix>label.npy``, ``<prefix>{train,val,test}_idx.npy``), as
    its edge data ``label`` and ``{train,val,test}_mask`` (what ``train --task edge`` learns), and its
    ``<prefix>hard_negatives.npy`` (original destination IDs, a row per edge, -1: none) as ``hard_negatives``."""
    out: dict[str, Feature] = {}
    if (d / f"{prefix}label.npy").is_file():
        out["label"] = _labels(d / f"{prefix}label.npy", count, "edge")
    hard = d / f"{prefix}hard_negatives.npy"
    if hard.is_file():  # train --task link --negatives hard --hard-negatives hard_negatives
        rows = np.asarray(_load(hard))
        if rows.ndim not in (1, 2) or rows.shape[0] != count or not np.issubdtype(rows.dtype, np.integer):
            raise InputError(
                f"{hard}: hard negatives must be integer node IDs, a row per edge ({count}), got {rows.dtype} "
                f"{rows.shape}"
            )
        out["hard_negatives"] = rows
    out.update(_split_masks(d, prefix, count, "edge"))
    return out


def _split_masks(d: Path, prefix: str, n: int, item: str = "node") -> dict[str, np.ndarray]:
    masks = {}
    for split in SPLITS:
        f = d / f"{prefix}{split}_idx.npy"
        if f.is_file():
            raw = np.asarray(_load(f))
            if not np.issubdtype(raw.dtype, np.integer) and not (raw.size == 0 and raw.dtype == np.float64):
                raise InputError(f"{f}: {item} indices must be integers, got {raw.dtype}")
            raw = raw.reshape(-1)
            bad = np.flatnonzero((raw < 0) | (raw >= n))  # on the values as given: 2**64 - 1 is not -1
            if bad.size:
                raise InputError(f"{f}: position {int(bad[0])}: {item} index {int(raw[bad[0]])} out of range [0, {n})")
            mask = np.zeros(n, dtype=bool)
            mask[raw.astype(np.int64, copy=False)] = True
            masks[f"{split}_mask"] = mask
    return masks


def load_dataset(path: str | os.PathLike) -> Dataset:
    """Load a dataset directory in the shared layout (homogeneous or heterogeneous), a chunked graph
    directory (``metadata.json``; no learning task recorded, so ``num_classes`` is None) or OGB's raw
    node-property layout (:mod:`.ogb`)."""
    d = require_dir(path)  # a typo is "no such directory", not a missing meta.json
    meta_path = d / "meta.json"
    if not meta_path.is_file() and (d / "metadata.json").is_file():
        chunked = read_metadata(d)
        return Dataset(chunked.graph_name, load_chunked_graph(chunked), None)
    if not meta_path.is_file():
        if is_ogb_dir(d):
            return load_ogb(d)
        raise InputError(
            f"{meta_path}: missing (not a dataset directory: no meta.json, nor a chunked graph's "
            "metadata.json, nor OGB's raw layout)"
        )
    meta = read_json_object(meta_path)
    try:
        if meta.get("kind", "homogeneous") == "heterogeneous":
            return _load_hetero(d, meta)
        return _load_homo(d, meta)
    except KeyError as exc:
        raise InputError(f"{meta_path}: missing key {exc.args[0]!r}") from None


def _load_homo(d: Path, meta: dict[str, Any]) -> Dataset:
    n = check_count(meta["num_nodes"], f"{d}/meta.json: num_nodes")
    feats: dict[str, Feature] = {}
    x = _features(d, meta.get("feat_format", "none"), meta.get("feat_files", []), meta.get("feat_shape"), n=n)
    if x is not None:
        feats["feat"] = x
    if (d / "label.npy").is_file():
        feats["label"] = _labels(d / "label.npy", n)
    feats.update(_split_masks(d, "", n))
    src, dst = (_node_ids(d / f, np.asarray(_load(d / f)), n, "node ID") for f in ("src.npy", "dst.npy"))
    if src.shape != dst.shape:
        raise InputError(
            f"{d / 'src.npy'} holds {src.shape[0]} node IDs but {d / 'dst.npy'} holds {dst.shape[0]}: "
            "one per edge in each"
        )
    edge = _edge_data(d, "edge_", src.shape[0])
    g = Graph(
        {DEFAULT_NTYPE: n},
        {DEFAULT_ETYPE: (src, dst)},
        {DEFAULT_NTYPE: feats} if feats else {},
        {DEFAULT_ETYPE: edge} if edge else {},
    )
    return Dataset(meta.get("name", d.name), g, meta.get("num_classes"))


def _load_hetero(d: Path, meta: dict[str, Any]) -> Dataset:
    for i, t in enumerate(meta["node_types"]):  # they become file names below: checked before any is read
        check_path_name(t, f"{d}/meta.json: node_types[{i}]", extra=SUFFIX_ROOM)
    num_nodes = {t: check_count(meta["num_nodes"][t], f"{d}/meta.json: num_nodes[{t!r}]") for t in meta["node_types"]}
    edges: dict[EType, tuple[np.ndarray, np.ndarray]] = {}
    edge_feats: dict[EType, dict[str, Feature]] = {}
    for et_text in meta["edge_types"]:
        et = parse_etype(et_text)
        check_etype_names(et, f"{d}/meta.json: edge_types")
        path = d / "edges" / f"{et[0]}__{et[1]}__{et[2]}.npy"
        arr = np.asarray(_load(path))
        if arr.ndim != 2 or arr.shape[0] != 2:
            raise InputError(f"{d}/edges: edge file of {et_text!r} must have shape (2, E), got {arr.shape}")
        if et[0] not in num_nodes or et[2] not in num_nodes:
            raise InputError(f"{d}/meta.json: edge type {et_text!r} names a node type not in node_types")
        src, dst = (
            _node_ids(path, arr[row], num_nodes[t], f"row {row}: {t!r} node ID") for row, t in ((0, et[0]), (1, et[2]))
        )
        edges[et] = (src, dst)
        data = _edge_data(d / "edges", f"{et[0]}__{et[1]}__{et[2]}_", src.shape[0])
        if data:
            edge_feats[et] = data
    target = meta.get("target_node_type")
    node_feats: dict[str, dict[str, Feature]] = {}
    for t in num_nodes:
        spec = meta.get("features", {}).get(t, {"format": "none"})
        feats: dict[str, Feature] = {}
        x = _features(d, spec.get("format", "none"), spec.get("files", []), spec.get("shape"), n=num_nodes[t])
        if x is not None:
            feats["feat"] = x
        label_file = meta.get("label_files", {}).get(t)
        if label_file:
            feats["label"] = _labels(d / label_file, num_nodes[t])
        if t == target:
            feats.update(_split_masks(d, f"{t}_", num_nodes[t]))
        if feats:
            node_feats[t] = feats
    return Dataset(
        meta.get("name", d.name),
        Graph(num_nodes, edges, node_feats, edge_feats),
        meta.get("num_classes"),
        target or DEFAULT_NTYPE,
    )


def save_dataset(
    ds: Dataset, path: str | os.PathLike, extra_meta: dict[str, Any] | None = None, overwrite: bool = False
) -> Path:
    """Write ``ds`` in the shared layout (dense features): staged inside ``path``, then published (meta.json last).

    ``path`` must be new, empty or graphshard's earlier dataset output of the same graph (``ds.name``)
    unless ``overwrite`` (which keeps files of other names); a failed write leaves nothing behind (an
    ``OSError`` becomes a :class:`WriteError` naming the file)."""
    final = check_output_dir(path, "dataset", overwrite, graph=ds.name)
    with staged_dir(final, "dataset") as tmp:
        _save(ds, tmp, extra_meta)
    return final


def _save(ds: Dataset, tmp: Path, extra_meta: dict[str, Any] | None) -> None:
    g = ds.graph
    meta: dict[str, Any] = {"name": ds.name, "num_classes": ds.num_classes, **(extra_meta or {})}
    if g.is_homogeneous:
        meta.update(_save_homo(g, tmp))
    else:
        meta.update(_save_hetero(g, tmp, ds.target_ntype))
    with naming(tmp / "meta.json"):
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")


def _save_npy(d: Path, name: str, arr: np.ndarray) -> None:
    """Save ``arr`` as ``d/name`` (a name checked to stay inside ``d``), never as a pickle."""
    path = inside(d, name)
    with naming(path):
        np.save(path, np.asarray(arr), allow_pickle=False)


def _save_arrays(d: Path, prefix: str, feats: Mapping[str, Feature]) -> dict[str, Any]:
    info: dict[str, Any] = {"format": "none", "files": []}
    x = feats.get("feat")
    if isinstance(x, CSRRows):
        files = [f"{prefix}feat_csr_{p}.npy" for p in ("indptr", "indices", "data")]
        for f, arr in zip(files, (x.indptr, x.indices, x.data)):
            _save_npy(d, f, arr)
        info = {"format": "csr", "files": files, "shape": list(x.shape)}
    elif x is not None:
        _save_npy(d, f"{prefix}feat.npy", x)
        info = {"format": "dense", "files": [f"{prefix}feat.npy"], "shape": list(x.shape)}
    # labels and split masks are dense arrays in this layout
    if "label" in feats:
        _save_npy(d, f"{prefix}label.npy", np.asarray(feats["label"]))
    for split in SPLITS:
        if f"{split}_mask" in feats:
            _save_npy(
                d, f"{prefix}{split}_idx.npy", np.flatnonzero(np.asarray(feats[f"{split}_mask"])).astype(np.int64)
            )
    return info


def _save_edge_data(d: Path, prefix: str, feats: Mapping[str, Feature]) -> None:
    """An edge type's ``label``, ``hard_negatives`` and split masks, as :func:`_edge_data` reads them (other edge
    data is not kept by this layout)."""
    for name in ("label", "hard_negatives"):
        if name in feats:
            _save_npy(d, f"{prefix}{name}.npy", np.asarray(feats[name]))
    for split in SPLITS:
        if f"{split}_mask" in feats:
            _save_npy(
                d, f"{prefix}{split}_idx.npy", np.flatnonzero(np.asarray(feats[f"{split}_mask"])).astype(np.int64)
            )


def _save_homo(g: Graph, d: Path) -> dict[str, Any]:
    src, dst = g.edges[DEFAULT_ETYPE]
    _save_npy(d, "src.npy", src)
    _save_npy(d, "dst.npy", dst)
    _save_edge_data(d, "edge_", g.edge_feats.get(DEFAULT_ETYPE, {}))
    info = _save_arrays(d, "", g.node_feats.get(DEFAULT_NTYPE, {}))
    return {
        "kind": "homogeneous",
        "num_nodes": g.num_nodes[DEFAULT_NTYPE],
        "num_edges": int(len(src)),
        "directed": False,
        "feat_format": info["format"],
        "feat_files": info["files"],
        "feat_shape": info.get("shape"),
        "feat_dim": info.get("shape", [0, None])[1],
    }


def _save_hetero(g: Graph, d: Path, target: str) -> dict[str, Any]:
    (d / "edges").mkdir()
    for et, (src, dst) in g.edges.items():
        _save_npy(d / "edges", f"{et[0]}__{et[1]}__{et[2]}.npy", np.stack([src, dst]))
        _save_edge_data(d / "edges", f"{et[0]}__{et[1]}__{et[2]}_", g.edge_feats.get(et, {}))
    features, labels = {}, {}
    for t in g.ntypes:
        feats = g.node_feats.get(t, {})
        features[t] = _save_arrays(d, f"{t}_", feats)
        if "label" in feats:
            labels[t] = f"{t}_label.npy"
    return {
        "kind": "heterogeneous",
        "node_types": g.ntypes,
        "num_nodes": g.num_nodes,
        "edge_types": [etype_str(et) for et in g.canonical_etypes],
        "num_edges": {etype_str(et): g.num_edges(et) for et in g.canonical_etypes},
        "target_node_type": target,
        "label_files": labels,
        "features": features,
    }
