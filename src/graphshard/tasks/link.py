"""Link prediction on one rank: the encoder (GraphSAGE / heterogeneous GraphSAGE) and a dot-product or
MLP decoder under DDP, trained on this partition's edges with random negatives (binary cross-entropy).
A training batch's neighbourhoods leave out its own positive edges (both directions), as held-out edges
are absent at evaluation: otherwise the model learns to find the link in its input.

Evaluation: every node's representation is computed with full neighbourhoods into a DistTensor; each
held-out edge ``(u, v)`` is ranked against ``eval_negatives`` random destinations ``(u, v')``: MRR, AUC
and Hits@K raw and, with ``--filtered``, also without the candidates that are known edges
(:mod:`.link_metrics`; model selection then uses the filtered MRR). Negatives depend on the seed and
original IDs only, so the figures do not depend on the number of ranks or the partitioning.

Held-out edges come in blocks of ``_CHUNK``; rank ``r`` of ``W`` evaluates blocks ``[B r / W, B (r + 1) / W)``
of each list and reads only those columns of the held-out file. What a rank holds is O(its partition +
its blocks), never O(total nodes or edges): its blocks translated to new IDs once (through the sharded
map of :mod:`graphshard.distributed.runtime.original`; a block's negatives are translated as it is evaluated),
and with ``--filtered`` its partition's shard of the known edges (:class:`.link_metrics.KnownEdges`)."""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np
import torch

from ..device.choice import rank_device
from ..distributed.loaders.loader import DistLinkNeighborLoader
from ..distributed.ranks.collectives import all_reduce_sum
from ..distributed.runtime.graph import DistGraph
from ..distributed.runtime.original import OriginalIds
from ..distributed.runtime.session import Session
from ..errors import FormatError, InputError
from ..format.config import PartitionConfig
from ..graph import EType
from ..models import DistMultDecoder, DotDecoder, LinkModel, MLPDecoder
from . import timing
from .checks import check_finite_features
from .embeddings import Outputs, representations, save_tables
from .inputs import ModelInputs, build_model, cache_summary, device_cache, feature_cache, training_loader_options
from .link_metrics import FIGURES, KnownEdges, figures, rank_sums
from .link_split import LinkSplitFile, open_link_split, read_held_out, require_link_split
from .loop import Trainer, open_graph
from .model_check import check_custom_model
from .negatives import LOADER_MODE, batch_loss, given_hard, per_positive, scored_pairs
from .options import TrainOptions

log = logging.getLogger(__name__)
_CHUNK = 4096  # held-out edges per block of negatives (blocks, not ranks, seed the negatives)


def my_edges(s: Session, g: DistGraph, et: EType) -> tuple[np.ndarray, np.ndarray]:
    """This rank's training edges ``(2, E)`` and their per-type edge IDs: its partition's edges of ``et``, cut
    evenly among the partition's ranks."""
    src, dst, eid = g.local_edge_ids(et)
    per = g.group.per_part(g.get_partition_book().num_partitions())
    t, n = s.rank % per, src.shape[0]
    lo, hi = n * t // per, n * (t + 1) // per
    return np.stack([src[lo:hi], dst[lo:hi]]), eid[lo:hi]


def edge_weights(g: DistGraph, et: EType, name: str | None, ids: np.ndarray, *, pairs: np.ndarray) -> np.ndarray | None:
    """The weights (edge data ``name``) of this rank's training edges ``ids`` (ends ``pairs``, new IDs); an
    :class:`InputError` names the first that is no finite number >= 0, by its ends' original IDs."""
    if name is None:
        return None
    if name not in g.edges[et].data:
        raise InputError(f"--edge-weight: edge type {':'.join(et)} has no edge data {name!r}")
    w = g.edges[et].data[name][torch.from_numpy(ids)].double().numpy()
    if w.ndim != 1 and not (w.ndim == 2 and w.shape[1] == 1):
        raise InputError(f"--edge-weight: edge data {name!r} must be one number per edge, got rows {w.shape[1:]}")
    w = w.reshape(-1)
    bad = np.flatnonzero(~np.isfinite(w) | (w < 0))
    if bad.size:
        book, at = g.get_partition_book(), int(bad[0])
        u, v = (int(book.to_original(t, torch.tensor([int(pairs[i, at])]))[0]) for i, t in ((0, et[0]), (1, et[2])))
        raise InputError(
            f"--edge-weight: edge ({u}, {v}) of {':'.join(et)} (original node IDs) has weight {w[at]}, "
            "not a number >= 0"
        )
    return w.astype(np.float32)


def my_blocks(rank: int, world: int, count: int) -> range:
    """The blocks of ``_CHUNK`` edges rank ``rank`` of ``world`` evaluates among ``count`` held-out edges."""
    chunks = math.ceil(count / _CHUNK)
    return range(chunks * rank // world, chunks * (rank + 1) // world)


class LinkEvaluator:
    """MRR, AUC and Hits@K of held-out edges, raw and with ``opts.filtered`` also filtered
    (:mod:`.link_metrics`; see the module docstring). Construction is collective: it reads this rank's
    blocks of ``held`` (the header checked by every rank, the IDs by the rank reading them; a bad file is
    the same error on every rank), builds the original-ID maps and the known edges' shards. ``outputs``: the
    encoder's node outputs when they are shared (a multi-task run's; default: its own)."""

    def __init__(
        self,
        s: Session,
        g: DistGraph,
        model: LinkModel,
        inputs: ModelInputs,
        *,
        et: EType,
        opts: TrainOptions,
        held: LinkSplitFile,
        outputs: Outputs | None = None,
    ):
        self.s, self.g, self.model, self.inputs, self.et, self.opts = s, g, model, inputs, et, opts
        self.outputs = outputs or Outputs(
            s, g, model.encoder, inputs, opts=opts, types=[et[0], et[2]], name="link-outputs"
        )
        counts = (g.num_nodes(et[0]), g.num_nodes(et[2]))
        self.blocks = {k: my_blocks(s.rank, s.world_size, held.sizes[k]) for k in ("val", "test")}
        problem, pairs = "", {}
        try:
            for k, blocks in self.blocks.items():
                lo, hi = (min(held.sizes[k], b * _CHUNK) for b in (blocks.start, blocks.stop))
                pairs[k] = read_held_out(held, k, lo, hi, num_nodes=counts)
        except FormatError as exc:
            problem = str(exc)
        said = [b.decode() for b in g.group.all_gather(problem.encode(), "held-out edges read")]
        if any(said):
            raise FormatError(next(m for m in said if m))
        self.maps = {t: OriginalIds(g, t) for t in dict.fromkeys((et[0], et[2]))}
        self.pairs = {  # this rank's blocks, new IDs
            k: np.stack([self.maps[et[0]](p[0]), self.maps[et[2]](p[1])]) for k, p in pairs.items()
        }
        self.known = KnownEdges(s, g, et, list(self.pairs.values())) if opts.filtered else None

    def __call__(self, key: str, tag: int) -> dict[str, float]:
        """The figures of list ``key`` (``"val"`` or ``"test"``); ``tag`` seeds its negatives. Collective."""
        g, et, k, pairs = self.g, self.et, self.opts.hits_k, self.pairs[key]
        self.tables = self.outputs.get()
        sums = np.zeros((2, len(FIGURES)))  # raw, filtered
        self.model.eval()
        with torch.no_grad():
            for i, c in enumerate(self.blocks[key]):
                block = pairs[:, i * _CHUNK : (i + 1) * _CHUNK]
                rng = np.random.default_rng([self.opts.seed, tag, c])
                neg = rng.integers(0, g.num_nodes(et[2]), (block.shape[1], self.opts.eval_negatives))
                neg = self.maps[et[2]](neg.reshape(-1)).reshape(neg.shape)
                dev = self.inputs.device  # the decoder's; the tables are on the host
                src = self.tables[et[0]][block[0]].to(dev)
                dst = self.tables[et[2]][block[1]].to(dev)
                h_neg = self.tables[et[2]][neg.reshape(-1)].view(*neg.shape, -1).to(dev)
                pos = self.model.decoder(src, dst).float().cpu()
                negs = self.model.decoder(src.unsqueeze(1).expand_as(h_neg), h_neg).float().cpu()
                sums[0] += rank_sums(pos, negs, k)
                if self.known is not None:
                    keep = ~torch.from_numpy(self.known(block[0], neg))
                    sums[1] += rank_sums(pos, negs, k, keep)
        total = all_reduce_sum(self.s.ctx, sums.reshape(-1), "link evaluation").reshape(sums.shape)
        out = figures(total[0], k)
        return out | (figures(total[1], k, "_filtered") if self.known is not None else {})

    def close(self) -> None:
        """Free the maps and the known edges' shards (collective)."""
        for m in self.maps.values():
            m.free()
        if self.known is not None:
            self.known.free()


def link_decoder(opts: TrainOptions) -> torch.nn.Module:
    """``opts.decoder``, scoring pairs of ``opts.hidden``-wide representations."""
    if opts.decoder == "mlp":
        return MLPDecoder(opts.hidden, opts.hidden)
    return DistMultDecoder(opts.hidden) if opts.decoder == "distmult" else DotDecoder()


def link_model(opts: TrainOptions, inputs: ModelInputs, et: EType) -> LinkModel:
    """The encoder (``opts.model``, ``opts.hidden`` outputs) and ``opts.decoder`` scoring pairs of ``et``."""
    encoder = build_model(opts, inputs, opts.hidden, [et[0], et[2]])
    return LinkModel(encoder, link_decoder(opts), et[0], et[2])


def link_loader(
    g: DistGraph,
    opts: TrainOptions,
    inputs: ModelInputs,
    et: EType,
    *,
    mine: np.ndarray,
    world: int,
    weights: np.ndarray | None,
    hard: np.ndarray | None,
    device: torch.device,
    device_cache: Any = None,
) -> DistLinkNeighborLoader:
    """The training batches of link prediction: this rank's training edges ``mine`` of ``et`` with their
    ends' neighbourhoods (the seed edges left out), the negatives of ``opts.negatives`` the loader draws (or
    the ``hard`` ones given), and the positives' ``weights`` attached on the host (``pos_weight``)."""

    def attach(batch: Any) -> None:
        store = batch[et] if inputs.hetero else batch
        if weights is not None:
            store.pos_weight = torch.from_numpy(weights[store.input_id.numpy()])

    return DistLinkNeighborLoader(
        g,
        opts.fanouts,
        mine,
        math.ceil(opts.batch_size / world),
        edge_type=et,
        neg_sampling=LOADER_MODE[opts.negatives],
        neg_amount=opts.neg_ratio,
        exclude_seed_edges=True,
        **training_loader_options(opts, inputs, device=device, device_cache=device_cache),
        transform=attach,
        hard_negatives=hard,
    )


def train_link(s: Session, opts: TrainOptions, cfg: PartitionConfig | None = None) -> dict[str, Any]:
    """Train and evaluate; returns the metrics (the same on every rank)."""
    held = open_link_split(require_link_split(opts))
    torch.manual_seed(opts.seed)
    g = open_graph(opts, cfg)
    et = g.canonical_etype(held.etype)
    if not opts.allow_nonfinite:
        check_finite_features(g, opts.feat or "feat")
    mine, mine_ids = my_edges(s, g, et)
    weights = edge_weights(g, et, opts.edge_weight, mine_ids, pairs=mine)
    hard = given_hard(s, g, et, opts.hard_negatives, ids=mine_ids, pairs=mine) if opts.hard_negatives else None
    ends = {et[0]: mine[0]} if et[0] != et[2] else {et[0]: mine.reshape(-1)}
    seeds = ends | ({et[2]: mine[1]} if et[0] != et[2] else {})
    cache = feature_cache(g, opts, seeds)
    on_device = device_cache(g, opts, seeds, rank_device(opts.device).device)
    inputs = ModelInputs(g, opts)
    model = link_model(opts, inputs, et)
    check_custom_model(
        g, opts, model.encoder, inputs, ntype=et[0], out_dim=opts.hidden, seeds=torch.from_numpy(mine[0])
    )
    evaluate = LinkEvaluator(s, g, model, inputs, et=et, opts=opts, held=held)

    k = per_positive(opts.neg_ratio)

    def loss(ddp: torch.nn.Module, batch: Any) -> torch.Tensor:
        evaluate.outputs.changed()  # a training step follows: outputs computed before it are stale
        store = batch[et] if inputs.hetero else batch
        x, edge_index, hops, *edge_attr = inputs(batch)
        scores = ddp(x, edge_index, hops, scored_pairs(store, opts.negatives, k), *edge_attr)
        return batch_loss(scores, store, opts.negatives)

    trainer = Trainer(s, g, opts, model, inputs=inputs, metric="val_mrr_filtered" if opts.filtered else "val_mrr")
    loader = link_loader(
        g,
        opts,
        inputs,
        et,
        mine=mine,
        world=s.world_size,
        weights=weights,
        hard=hard,
        device=trainer.device,
        device_cache=on_device,
    )
    history = trainer.fit(loader, loss, lambda: {f"val_{k}": v for k, v in evaluate("val", 1).items()})
    metrics = {
        "task": "link",
        "edge_type": list(et),
        "epochs": history,
        "world_size": s.world_size,
        "num_parts": g.served.stored_book.num_partitions(),
        "random_mrr": _random_mrr(opts.eval_negatives),
    }
    metrics |= trainer.final_test(lambda: evaluate("test", 2), evaluate.outputs.changed)
    names = [k[len("test_") :] for k in metrics if k.startswith("test_")]
    metrics |= {f"{k}_metrics": {m: metrics.get(f"{k}_{m}") for m in names} for k in ("val", "test")}
    if opts.save_embeddings:  # of the selected epoch's encoder (the test evaluation computed the outputs)
        with timing.phase("embeddings_s"):
            save_tables(
                s, g, representations(g, model.encoder, inputs, opts, outputs=evaluate.outputs), opts.save_embeddings
            )
    evaluate.close()
    metrics["inference_s"] = evaluate.outputs.seconds
    metrics.update(cache_summary(s, cache or on_device))
    return metrics


def _random_mrr(k: int) -> float:
    """Expected MRR of random scores: the positive's rank is uniform over 1..k+1."""
    return float(np.sum(1.0 / np.arange(1, k + 2)) / (k + 1))
