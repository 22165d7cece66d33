"""Model outputs for every node: computed by every rank for its share of the nodes into a
:class:`DistTensor`, and written to disk in the user's original node order."""

from __future__ import annotations

import itertools
import logging
import math
import os
import shutil
import time
import weakref
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from ..distributed.loaders.loader import DistNeighborLoader
from ..distributed.ranks.interrupt import atomic, deferred
from ..distributed.remote.tensor import DistTensor
from ..distributed.runtime.graph import DistGraph
from ..distributed.runtime.original import OriginalIds
from ..distributed.runtime.session import Session
from ..distributed.runtime.split import rank_partition, split_owned
from ..errors import InputError
from ..format.outputs import MARKER, check_output_dir, mark_output_dir
from ..format.staging import naming
from ..infer.layerwise import layerwise_inference
from ..models.contract import layerwise_traits
from .inputs import ModelInputs, rows_of
from .options import TrainOptions

Predict = Callable[[str, torch.Tensor], torch.Tensor]  # (node type, per-type IDs) -> one row per ID
notice = logging.getLogger("graphshard.notice")  # shown at the default log level


def predict(
    g: DistGraph, model: torch.nn.Module, inputs: ModelInputs, ntype: str, *, ids: torch.Tensor, opts: TrainOptions
) -> torch.Tensor:
    """Model outputs for nodes ``ids`` of ``ntype`` (distinct; rows in the order of ``ids``), sampling
    ``opts.eval_fanouts`` (every in-edge by default)."""
    fanouts = opts.eval_fanouts or [-1] * opts.num_layers
    ids_np = ids.numpy()
    order = np.argsort(ids_np, kind="stable")
    out = None
    model.eval()
    with (
        torch.no_grad(),
        DistNeighborLoader(
            g,
            fanouts,
            ids,
            math.ceil(opts.eval_batch_size / g.group.world_size),
            input_type=ntype if inputs.hetero else None,
            label_name=None,
            seed=opts.seed,
            **inputs.loader_options(),
            device=inputs.device,
        ) as loader,
    ):
        for batch in loader:
            n = batch[ntype].batch_size if inputs.hetero else batch.batch_size
            rows = rows_of(model(*inputs(batch)), ntype)[:n].float().cpu()
            if out is None:
                out = torch.zeros((ids.numel(), rows.shape[1]))
            seeds = (batch[ntype] if inputs.hetero else batch).n_id[:n].numpy()
            out[torch.from_numpy(order[np.searchsorted(ids_np, seeds, sorter=order)])] = rows
    return out if out is not None else torch.zeros((0, 0))


class Outputs:
    """Every node's outputs of ``model`` for some node types, as DistTensors: computed layer by layer
    (exact, O(layers × edges); :mod:`graphshard.infer`) or, with ``opts.eval_fanouts``, by mini-batches
    sampling those fanouts. Recomputed only after :meth:`changed` (a training step); collective."""

    def __init__(
        self,
        s: Session,
        g: DistGraph,
        model: torch.nn.Module,
        inputs: ModelInputs,
        *,
        opts: TrainOptions,
        types: list[str],
        name: str,
    ):
        self.s, self.g, self.model, self.inputs, self.opts = s, g, model, inputs, opts
        self.types, self.name = list(dict.fromkeys(types)), name
        self.tables: dict[str, DistTensor] = {}
        self.version, self.computed, self.runs = 0, -1, itertools.count()
        self.seconds = 0.0

    def changed(self) -> None:
        self.version += 1

    def get(self) -> dict[str, DistTensor]:
        if self.computed != self.version:
            start = time.perf_counter()
            for table in self.tables.values():
                table.free()
            name = f"{self.name}{next(self.runs)}"
            self.tables = every_output(
                self.s,
                self.g,
                self.model,
                self.inputs,
                opts=self.opts,
                types=self.types,
                name=name,
                sampled=self.opts.eval_fanouts is not None,
            )
            self.computed = self.version
            self.seconds += time.perf_counter() - start
        return self.tables


def representations(
    g: DistGraph, model: torch.nn.Module, inputs: ModelInputs, opts: TrainOptions, *, outputs: Outputs
) -> dict[str, DistTensor]:
    """What ``--save-embeddings`` writes for ``outputs``' node types: those outputs, or with
    ``opts.embedding_layer == "hidden"`` the hidden layer the last layer reads (computed layer by layer)."""
    if opts.embedding_layer == "output":
        return outputs.get()
    depth = layerwise_traits(model).num_layers
    return every_output(
        outputs.s,
        g,
        model,
        inputs,
        opts=opts,
        types=outputs.types,
        name=f"{outputs.name}-hidden",
        layers=(opts.num_layers if depth is None else depth) - 1,
    )


def has_layerwise(model: torch.nn.Module) -> bool:
    """Whether ``model`` offers layer-wise inference (every built-in model does; the user's may not)."""
    return layerwise_traits(model).layerwise


_SAID_SAMPLED: weakref.WeakSet[torch.nn.Module] = weakref.WeakSet()  # models whose sampled evaluation was told


def every_output(
    s: Session,
    g: DistGraph,
    model: torch.nn.Module,
    inputs: ModelInputs,
    *,
    opts: TrainOptions,
    types: list[str],
    name: str,
    layers: int | None = None,
    sampled: bool = False,
) -> dict[str, DistTensor]:
    """``model``'s output (or, with ``layers``, that layer's) for every node of ``types``: layer by layer
    (exact), or by mini-batches over sampled neighbourhoods (``opts.eval_fanouts``; every in-edge by
    default) when ``sampled`` or when the model offers no layer-wise inference (said once). Collective."""
    if not sampled and has_layerwise(model):
        edge_rows = inputs.edge_rows if inputs.edge_feat else None
        device = inputs.device if inputs.device.type != "cpu" or opts.rehearse else None  # chunks on the device
        return layerwise_inference(
            g, model, inputs.rows, name, types=types, layers=layers, edge_rows=edge_rows, device=device
        )[0]
    if layers is not None:
        raise InputError(
            f"model {opts.model!r} offers no layer-wise inference, so no hidden layer's output: "
            "use --embedding-layer output"
        )
    if not sampled and model not in _SAID_SAMPLED:
        _SAID_SAMPLED.add(model)
        if s.rank == 0:
            notice.info(
                "model %s offers no layer-wise inference: every node is computed from its sampled full "
                "neighbourhood instead",
                opts.model,
            )
    return {
        t: embed_all(s, g, lambda nt, ids: predict(g, model, inputs, nt, ids=ids, opts=opts), t, name=f"{name}/{t}")
        for t in types
    }


def my_share(s: Session, g: DistGraph, ntype: str) -> torch.Tensor:
    """The nodes of ``ntype`` this rank computes outputs for (an even split of all of them, its own partition's
    first; known from the partition ranges, never a list of all nodes). Collective."""
    book = g.get_partition_book()
    num_parts = book.num_partitions()
    part, _ = rank_partition(s.rank, s.world_size, num_parts)
    lo, hi = book.node_range(part, ntype if len(g.ntypes) > 1 else None)
    return torch.from_numpy(split_owned(s.ctx, np.arange(lo, hi, dtype=np.int64), num_parts, what=f"{ntype} nodes"))


def embed_all(s: Session, g: DistGraph, predict: Predict, ntype: str, *, name: str) -> DistTensor:
    """A new DistTensor holding ``predict`` for every node of ``ntype`` (collective)."""
    mine = my_share(s, g, ntype)
    rows = predict(ntype, mine)
    dims = g.group.all_gather(str(int(rows.shape[1]) if rows.numel() else -1).encode(), f"{name} width")
    dim = max(int(d) for d in dims)  # a rank with no nodes of the type has no rows to tell the width
    table = DistTensor(
        g.group, g.get_partition_book(), (g.num_nodes(ntype), dim), torch.float32, name=f"{name}#{g.key}", ntype=ntype
    )
    if mine.numel():
        table[mine] = rows
    g.barrier()
    return table


def write_embeddings(s: Session, g: DistGraph, predict: Predict, path: str, *, ntypes: list[str] | None = None) -> None:
    """``predict`` for every node of ``ntypes`` (all by default); row ``i`` of a type's array = the node
    with original ID ``i``. A homogeneous graph: ``path`` is that ``.npy`` file; a heterogeneous one:
    ``path`` is a directory of ``<node type>.npy``. Written atomically (temporary file or directory,
    then rename) by rank 0."""
    tables = {t: embed_all(s, g, predict, t, name=f"embeddings/{t}") for t in (ntypes or g.ntypes)}
    save_tables(s, g, tables, path)


def check_embeddings_target(path: str | os.PathLike) -> None:
    """An existing directory at ``path`` is replaced only if it holds embeddings graphshard wrote
    (its marker); anything else is refused with an :class:`InputError` naming it."""
    if Path(path).is_dir():
        check_output_dir(path, "embeddings")


def save_tables(s: Session, g: DistGraph, tables: dict[str, DistTensor], path: str) -> None:
    """Write per-node-type DistTensors as :func:`write_embeddings` describes (collective)."""
    hetero = len(g.ntypes) > 1
    maps = {t: OriginalIds(g, t) for t in tables}  # original -> new IDs, sharded: the writer looks up its block
    if s.rank == 0:
        target = Path(path)
        check_embeddings_target(target)  # checked before training too; a directory made since is not lost
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp" + ("" if hetero else ".npy"))
        if hetero:
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir()
        for t, table in tables.items():
            with naming(target):  # a full disk is "No space left on device", naming the output
                _save_in_original_order(tmp / f"{t}.npy" if hetero else tmp, table, maps[t])
        if hetero:
            mark_output_dir(tmp, "embeddings", sorted(f"{t}.npy" for t in tables))
        with deferred(), atomic():  # an interrupt never leaves the files of two runs under one marker
            if hetero and target.is_dir():  # our earlier output: replace our files, keep any the user added
                for f in sorted(tmp.iterdir(), key=lambda f: f.name == MARKER):  # the marker last
                    os.replace(f, target / f.name)
                tmp.rmdir()
            else:
                os.replace(tmp, target)
    g.barrier()
    for m in maps.values():
        m.free()


SAVE_BLOCK_BYTES = 64 << 20  # rows fetched and written at a time (and their IDs: 16 bytes a row at least)


def _save_in_original_order(path: Path, table: DistTensor, to_new: OriginalIds) -> None:
    """``table``'s rows as a float32 ``.npy`` file, row ``i`` for original node ID ``i``: written front to back
    a block of original IDs at a time, the block's new IDs looked up in the sharded map ``to_new`` and its
    rows fetched from their owners, so the writer holds one block, never the whole table nor a table of
    every node's IDs (a full disk is an OSError on write, not a fault in a memory map)."""
    n, width = int(table.shape[0]), int(np.prod(table.shape[1:], dtype=np.int64))
    block = max(1, SAVE_BLOCK_BYTES // max(16, 4 * width))
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(np.float32)), "fortran_order": False}
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, header | {"shape": tuple(int(d) for d in table.shape)})
        for lo in range(0, n, block):  # a loop over blocks
            ids = to_new(np.arange(lo, min(n, lo + block), dtype=np.int64))
            f.write(np.ascontiguousarray(table[ids].numpy(), dtype=np.float32).tobytes())
