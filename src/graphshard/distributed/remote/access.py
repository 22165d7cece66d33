"""How often one rank's training batches are expected to read each node: the access estimate that
chooses what the remote-feature cache holds (:mod:`graphshard.distributed.remote.cache`).

The estimate is analytical, as in SALIENT++'s access-probability analysis: every seed is expanded once
per epoch; a node expanded ``w`` times takes each in-edge of a range of ``d`` edges with fanout ``f``
with probability ``min(1, f / d)``, so each in-neighbour receives ``w · min(1, f / d)`` expected reads,
hop after hop. Nodes of this partition are expanded where they are; nodes of other partitions by
their owners, in one request per owner and hop. It costs one pass over the edges the seeds' ``L``-hop
neighbourhoods touch — no sampling at start-up, no randomness — and ranks nodes as a long run of
sampled epochs would (de-duplication within a batch is not modelled: it caps what very frequent nodes
cost, not their order)."""

from __future__ import annotations

from functools import partial

import numpy as np
import torch

from ...book import RangePartitionBook
from ..groups.rpc import RpcGroup, by_owner, registered
from ..transport.channel import handler
from .sampler import SAMPLING_GRAPH
from .sampling_graph import SamplingGraph, sum_by_id


@handler
def _expand_remote(
    served: str, gids: torch.Tensor, weights: torch.Tensor, fanouts: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    ids, w = registered(f"{SAMPLING_GRAPH}/{served}").expected_sources(gids.numpy(), weights.numpy(), fanouts.numpy())
    return torch.from_numpy(ids), torch.from_numpy(w)


def _expand_local(local: SamplingGraph, ids: np.ndarray, w: np.ndarray, fanouts: np.ndarray, pos: np.ndarray) -> tuple:
    return local.expected_sources(ids[pos], w[pos], fanouts)


def _expand_args(key: str, ids: np.ndarray, w: np.ndarray, fan_t: torch.Tensor, pos: np.ndarray) -> tuple:
    return key, torch.from_numpy(ids[pos]), torch.from_numpy(w[pos]), fan_t


def expected_reads(
    group: RpcGroup, local: SamplingGraph, book: RangePartitionBook, seeds: np.ndarray, *, fanouts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Distinct global homogeneous IDs read by batches of ``seeds`` (this rank's, homogeneous IDs) sampled
    with ``fanouts`` (a ``(hops, edge types)`` table), and each one's expected reads per epoch. Every member
    of ``group`` must serve its sampling graph; other members may call this at the same time."""
    frontier, weight = sum_by_id(np.asarray(seeds, dtype=np.int64), np.ones(len(seeds)))
    seen_ids, seen_w = [frontier], [weight]
    for hop_fanouts in np.asarray(fanouts, dtype=np.int64):
        ids, w = frontier, weight
        fan_t = torch.from_numpy(hop_fanouts)
        pieces = by_owner(
            group,
            book.nid2partid(ids).numpy(),
            book.num_partitions(),
            partial(_expand_local, local, ids, w, hop_fanouts),
            remote=_expand_remote,
            args=partial(_expand_args, local.key, ids, w, fan_t),
            what="access estimate",
        )
        got = [tuple(np.asarray(a) for a in res) for _, res in pieces]
        if not got:
            break
        frontier, weight = sum_by_id(
            np.concatenate([g[0] for g in got]), np.concatenate([g[1] for g in got]), book.num_nodes()
        )
        seen_ids.append(frontier)
        seen_w.append(weight)
    return sum_by_id(np.concatenate(seen_ids), np.concatenate(seen_w), book.num_nodes())
