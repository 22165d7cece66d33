"""Held-out edges for link prediction: validation and test edges chosen before partitioning and taken
out of the graph, so no message passes along an edge the model is asked to predict.

On disk: one safetensors file with int64 tensors ``val`` and ``test`` of shape ``(2, E)`` (source and
destination node IDs in the user's original per-type numbering) and the edge type in its metadata
(``edge_type`` = ``"src:rel:dst"``). Written atomically.

Training reads it in pieces: every rank checks the header (:func:`open_link_split`: dtypes, shapes, edge
type) and reads only the columns of the blocks it evaluates (:func:`read_held_out`, a slice of the file,
its IDs checked against the graph's node counts), never both lists whole."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file

from ..errors import FormatError, InputError
from ..format.tensorfile import check_tensor_file
from ..graph import EType, Graph, etype_str, parse_etype
from .options import TrainOptions


@dataclass
class LinkSplit:
    etype: EType
    val: np.ndarray  # (2, E_val) original IDs
    test: np.ndarray  # (2, E_test) original IDs


def split_edges(
    g: Graph, etype: EType | None = None, val_frac: float = 0.05, test_frac: float = 0.1, *, seed: int = 0
) -> tuple[Graph, LinkSplit]:
    """``g`` without the held-out edges of ``etype`` (the only edge type by default), and those edges.

    A relation between nodes of one type is taken as undirected: the pairs ``(u, v)`` and ``(v, u)``
    are one link, held out together (every copy leaves the graph) and listed once."""
    if etype is None:
        if len(g.canonical_etypes) != 1:
            raise InputError(f"choose the edge type to predict among {g.canonical_etypes}")
        etype = g.canonical_etypes[0]
    if etype not in g.edges:
        raise InputError(f"edge type {etype} is not in the graph")
    if not (0 <= val_frac and 0 <= test_frac and val_frac + test_frac < 1):
        raise InputError(f"held-out fractions {val_frac} + {test_frac} must be >= 0 and sum below 1")
    src, dst = (np.asarray(a, dtype=np.int64) for a in g.edges[etype])
    width = max(g.num_nodes[etype[0]], g.num_nodes[etype[2]])
    undirected = etype[0] == etype[2]
    lo, hi = (np.minimum(src, dst), np.maximum(src, dst)) if undirected else (src, dst)
    keys, inverse = np.unique(lo * width + hi, return_inverse=True)
    perm = np.random.default_rng(seed).permutation(keys.shape[0])
    n_val, n_test = int(round(val_frac * keys.shape[0])), int(round(test_frac * keys.shape[0]))
    held = np.zeros(keys.shape[0], dtype=bool)
    held[perm[: n_val + n_test]] = True
    keep = ~held[inverse.reshape(-1)]
    edges = dict(g.edges)
    edges[etype] = (src[keep], dst[keep])
    edge_feats = dict(g.edge_feats)
    if etype in edge_feats:
        edge_feats[etype] = {k: v[keep] for k, v in edge_feats[etype].items()}

    def pairs(idx: np.ndarray) -> np.ndarray:
        k = np.sort(keys[idx])
        return np.stack([k // width, k % width])

    split = LinkSplit(etype, pairs(perm[:n_val]), pairs(perm[n_val : n_val + n_test]))
    return Graph(dict(g.num_nodes), edges, g.node_feats, edge_feats), split


def require_link_split(opts: TrainOptions) -> str:
    """The held-out edges file of a link prediction run (``opts.link_split``); refused when missing."""
    if not opts.link_split:
        raise InputError(
            "link prediction on a partition config needs its held-out edges: pass --link-split "
            "FILE (see graphshard.tasks.link_split), or train from --dataset (which holds edges "
            "out before partitioning)"
        )
    return opts.link_split


def save_link_split(split: LinkSplit, path: str | os.PathLike) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    save_file(
        {
            "val": torch.from_numpy(np.ascontiguousarray(split.val)),
            "test": torch.from_numpy(np.ascontiguousarray(split.test)),
        },
        str(tmp),
        metadata={"edge_type": etype_str(split.etype)},
    )
    os.replace(tmp, target)


@dataclass(frozen=True)
class LinkSplitFile:
    """A held-out edges file whose header was checked: its edge type and the edge count of each list."""

    path: Path
    etype: EType
    sizes: dict[str, int]  # "val", "test" -> number of edges


def open_link_split(path: str | os.PathLike) -> LinkSplitFile:
    """The header of the held-out edges file ``path``, checked (no tensor read): ``val`` and ``test`` int64 of
    shape ``(2, E)``, the edge type in the metadata; :class:`FormatError` naming the file and the key."""
    header = check_tensor_file(path, "link split file")
    sizes = {}
    for key in ("val", "test"):
        spec = header.get(key)
        shape = spec["shape"] if isinstance(spec, dict) else []
        if not isinstance(spec, dict) or spec["dtype"] != "I64" or len(shape) != 2 or shape[0] != 2:
            raise FormatError(f"{path}: tensor {key!r} must be int64 of shape (2, E)")
        sizes[key] = int(shape[1])
    meta = header.get("__metadata__") or {}
    if "edge_type" not in meta:
        raise FormatError(f"{path}: metadata key 'edge_type' is missing")
    return LinkSplitFile(Path(path), parse_etype(meta["edge_type"]), sizes)


def read_held_out(
    split: LinkSplitFile, key: str, lo: int, hi: int, *, num_nodes: tuple[int, int] | None = None
) -> np.ndarray:
    """Edges ``[lo, hi)`` of list ``key`` (``(2, hi - lo)`` int64, original IDs), read as a slice of the file.
    ``num_nodes``: the node counts of the edge type's source and destination types, which the IDs must be
    below (:class:`FormatError` naming the file, the key and the first ID outside)."""
    from safetensors import SafetensorError, safe_open

    size = split.sizes[key]
    if not 0 <= lo <= hi <= size:
        raise InputError(f"{split.path}: edges [{lo}, {hi}) of {key!r} are outside its {size} edges")
    try:
        with safe_open(str(split.path), framework="pt") as f:
            edges = f.get_slice(key)[:, lo:hi].numpy()
    except (SafetensorError, OSError, RuntimeError, ValueError, TypeError) as exc:
        raise FormatError(f"{split.path}: not a valid link split file ({exc})") from None
    if edges.shape != (2, hi - lo) or edges.dtype != np.int64:
        raise FormatError(f"{split.path}: tensor {key!r} read as {edges.dtype}{edges.shape}, not int64 (2, {hi - lo})")
    for row, (end, ntype) in enumerate(zip(("source", "destination"), (split.etype[0], split.etype[2]))):
        if num_nodes is None:
            continue
        bad = (edges[row] < 0) | (edges[row] >= num_nodes[row])
        if bad.any():
            i = int(np.argmax(bad))
            raise FormatError(
                f"{split.path}: tensor {key!r} gives edge {lo + i} the {end} node ID {int(edges[row, i])}, "
                f"outside [0, {num_nodes[row]}) (the graph's nodes of type {ntype!r})"
            )
    return edges


def load_link_split(path: str | os.PathLike) -> LinkSplit:
    """Both lists whole (tools and tests; training reads its blocks with :func:`read_held_out`)."""
    split = open_link_split(path)
    return LinkSplit(split.etype, *(read_held_out(split, k, 0, split.sizes[k]) for k in ("val", "test")))
