"""Node classification on one rank: DistGraph + DistNeighborLoader + GraphSAGE under DDP (gloo).
Evaluation samples the full neighbourhood (fanout -1 per layer unless ``eval_fanouts`` says otherwise)
of every rank's share of the validation/test nodes and sums the counts over ranks."""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from ..dist.collectives import all_reduce_sum
from ..dist.graph import DistGraph
from ..dist.loader import DistNeighborLoader
from ..dist.runtime import Session
from ..dist.split import node_split
from ..models import GraphSAGE
from .checkpoint import load_checkpoint, save_checkpoint
from .embeddings import write_embeddings
from .options import TrainOptions

log = logging.getLogger(__name__)


def _full(g: DistGraph, name: str) -> np.ndarray:
    return g.ndata[name][torch.arange(g.num_nodes())].numpy()


def _evaluate(s: Session, g: DistGraph, model: torch.nn.Module, ids: torch.Tensor, labels: np.ndarray,
              opts: TrainOptions) -> float:
    """Accuracy over every rank's ``ids`` (each counted once, whatever the loader's top-up)."""
    pred = _predict(g, model, ids, opts).argmax(1).numpy()
    own = ids.numpy()
    counts = all_reduce_sum(s.ctx, np.array([(pred == labels[own]).sum(), own.size], dtype=np.int64), "evaluation")
    return float(counts[0] / max(1, counts[1]))


def _predict(g: DistGraph, model: torch.nn.Module, ids: torch.Tensor, opts: TrainOptions) -> torch.Tensor:
    """Model outputs for ``ids`` (distinct; rows in the order of ``ids``)."""
    fanouts = opts.eval_fanouts or [-1] * opts.num_layers
    ids_np = ids.numpy()
    order = np.argsort(ids_np, kind="stable")
    out = None
    model.eval()
    with torch.no_grad(), DistNeighborLoader(g, fanouts, ids, batch_size=math.ceil(opts.eval_batch_size / g.group.world_size),
                                             seed=opts.seed) as loader:
        for batch in loader:
            rows = model(batch.x, batch.edge_index)[: batch.batch_size]
            if out is None:
                out = torch.zeros((ids.numel(), rows.shape[1]))
            seeds = batch.n_id[: batch.batch_size].numpy()
            out[torch.from_numpy(order[np.searchsorted(ids_np, seeds, sorter=order)])] = rows
    return out if out is not None else torch.zeros((0, 0))


def train_node(s: Session, opts: TrainOptions) -> dict[str, Any]:
    """Train and evaluate; returns the metrics (the same on every rank)."""
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(opts.seed)
    g = DistGraph(_graph_name(opts.part_config), opts.part_config)
    book, world = g.get_partition_book(), s.world_size
    labels = _full(g, "label").astype(np.int64)
    split = {k: node_split(_full(g, f"{k}_mask").astype(bool), book, rank=s.rank, world_size=world)
             for k in ("train", "val", "test")}
    model = GraphSAGE(g.ndata["feat"].shape[1], opts.hidden, int(labels.max()) + 1, opts.num_layers, opts.dropout)
    opt = torch.optim.Adam(model.parameters(), lr=opts.lr)
    start_epoch, history = 0, []
    if opts.checkpoint:
        resumed = load_checkpoint(_rank_dir(opts.checkpoint, s.rank), model, opt)
        if resumed:
            start_epoch, history = resumed
            log.info("resuming after epoch %d from %s", start_epoch, opts.checkpoint)
    ddp = DistributedDataParallel(model)
    loader = DistNeighborLoader(g, opts.fanouts, split["train"], batch_size=math.ceil(opts.batch_size / world),
                                shuffle=True, num_workers=opts.num_workers, seed=opts.seed)
    loader.epoch = start_epoch
    with loader:
        for epoch in range(start_epoch, opts.epochs):
            history.append(_epoch(s, g, ddp, opt, loader, epoch, opts))
            history[-1]["val_acc"] = _evaluate(s, g, model, split["val"], labels, opts)
            log.info("epoch %d: %s", epoch, history[-1])
            if opts.checkpoint:
                save_checkpoint(_rank_dir(opts.checkpoint, s.rank), epoch, model, opt, history)
    metrics = {"epochs": history, "test_acc": _evaluate(s, g, model, split["test"], labels, opts),
               "val_acc": history[-1]["val_acc"] if history else None, "world_size": world,
               "num_parts": book.num_partitions()}
    if opts.save_embeddings:
        write_embeddings(s, g, lambda ids: _predict(g, model, ids, opts), opts.save_embeddings)
    return metrics


def _epoch(s: Session, g: DistGraph, ddp: torch.nn.Module, opt: torch.optim.Optimizer, loader: DistNeighborLoader,
           epoch: int, opts: TrainOptions) -> dict[str, float]:
    ddp.train()
    sums = np.zeros(6)  # wall, sample, fetch, compute, loss*batches, fetch bytes
    start = time.perf_counter()
    bar = tqdm(total=len(loader), desc=f"epoch {epoch}", disable=not (opts.progress and s.rank == 0), leave=False)
    for batch in loader:
        t = time.perf_counter()
        opt.zero_grad()
        out = ddp(batch.x, batch.edge_index)[: batch.batch_size]
        loss = F.cross_entropy(out, batch.y[: batch.batch_size].long())
        loss.backward()  # DDP all-reduces gradients here
        opt.step()
        sums[1:] += [batch.sample_time, batch.fetch_time, time.perf_counter() - t, loss.item(), batch.fetch_bytes]
        bar.update()
    bar.close()
    sums[0] = time.perf_counter() - start
    total = all_reduce_sum(s.ctx, np.append(sums, len(loader)), "epoch metrics")
    ranks, batches = s.world_size, total[6] / s.world_size
    return {"epoch": epoch, "wall_s": total[0] / ranks, "sample_s": total[1] / ranks, "fetch_s": total[2] / ranks,
            "compute_s": total[3] / ranks, "train_loss": total[4] / (batches * ranks),
            "fetch_bytes": int(total[5]), "batches": int(batches)}


def _rank_dir(directory: str, rank: int) -> str:
    return f"{directory}/rank{rank}"


def _graph_name(part_config: str) -> str:
    from ..format.config import read_config

    return read_config(part_config).graph_name
