"""Write model outputs for every node to one ``.npy`` file in the user's original node order."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from ..dist.graph import DistGraph
from ..dist.runtime import Session
from ..dist.split import node_split
from ..dist.tensor import DistTensor


def write_embeddings(s: Session, g: DistGraph, predict: Callable[[torch.Tensor], torch.Tensor], path: str) -> None:
    """Every rank computes its share of the nodes into a DistTensor; rank 0 writes row ``i`` = node with
    original ID ``i`` (atomically: temporary file, then rename)."""
    book = g.get_partition_book()
    n = g.num_nodes()
    mine = node_split(np.ones(n, dtype=bool), book, rank=s.rank, world_size=s.world_size)
    rows = predict(mine)  # every rank has rows: node_split is even and n >= world size
    dim = int(rows.shape[1])
    table = DistTensor(g.group, book, (n, dim), torch.float32, f"embeddings#{g.key}")
    table[mine] = rows
    g.barrier()
    if s.rank == 0:
        ids = torch.arange(n)
        out = np.empty((n, dim), dtype=np.float32)
        out[book.to_original(book.ntypes[0], ids).numpy()] = table[ids].numpy()
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp.npy")
        np.save(tmp, out)
        os.replace(tmp, target)
    g.barrier()
