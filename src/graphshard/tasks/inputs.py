"""What a model sees of a loader batch: node inputs per type — the feature rows where a type has
features, learnable :class:`DistEmbedding` rows where it has none — and edges per type. Also builds
the model that fits those inputs."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from ..device.rowcache import DeviceRowCache
from ..distributed.ranks.collectives import all_reduce_sum
from ..distributed.remote.cache import FeatureCache, build_cache
from ..distributed.remote.device_cache import build_device_cache
from ..distributed.remote.embedding import DistEmbedding, SparseAdagrad
from ..distributed.remote.tensor import local_shard
from ..distributed.runtime.graph import DistGraph
from ..errors import FormatError, InputError
from ..models.custom import build_custom
from ..models.registry import builtin_for, is_custom, projects_inputs, reads_edge_features
from ..models.spec import ModelSpec
from .options import TrainOptions


def training_loader_options(
    opts: TrainOptions, inputs: ModelInputs, *, device: Any, device_cache: Any = None
) -> dict[str, Any]:
    """What every training loader of a run shares (node, edge and link tasks alike): shuffled seeds, the run's
    sampler workers, seed and wire dtype, what the model reads (:meth:`ModelInputs.loader_options`), where
    batches go (``device``, ``device_cache``), and whether a CPU run rehearses the device path."""
    return {
        "shuffle": True,
        "num_workers": opts.num_workers,
        "seed": opts.seed,
        "wire_dtype": opts.wire_dtype,
        **inputs.loader_options(),
        "device": device,
        "device_cache": device_cache,
        "copy": opts.rehearse,
    }


class ModelInputs:
    """Inputs for the models of :mod:`graphshard.models` from ``DistGraph`` batches. Construction is
    collective (it creates the embeddings of featureless node types on every rank alike)."""

    def __init__(self, g: DistGraph, opts: TrainOptions):
        self.g, self.feat_name = g, opts.feat or "feat"
        feat_name = self.feat_name
        self.hetero = len(g.ntypes) > 1 or len(g.canonical_etypes) > 1
        # models that project their inputs first get CSR features as sparse batches
        self.sparse_x = projects_inputs(opts.model, self.hetero)
        self.ntypes, self.etypes = g.ntypes, g.canonical_etypes
        self.edge_feat = opts.edge_feat if opts.edge_feat and reads_edge_features(opts.model) else None
        self.edge_dims = {
            et: _width(g.edges[et].data[self.edge_feat].shape)
            for et in self.etypes
            if self.edge_feat and self.edge_feat in g.edges[et].data.keys()
        }
        self.dims: dict[str, int] = {}
        self.embeddings: dict[str, DistEmbedding] = {}
        embed_dim = opts.embed_dim or opts.hidden
        for i, t in enumerate(self.ntypes):
            data = g.nodes[t].data
            if feat_name in data:
                shape = data[feat_name].shape
                self.dims[t] = int(shape[1]) if len(shape) > 1 else 1
            else:
                self.embeddings[t] = DistEmbedding(
                    g.group,
                    g.book,
                    g.num_nodes(t),
                    embed_dim,
                    name=f"embed/{t}#{g.key}",
                    ntype=t,
                    seed=opts.seed * 1009 + i,
                )
                self.dims[t] = embed_dim
        self.optimizer = SparseAdagrad(list(self.embeddings.values()), opts.sparse_lr) if self.embeddings else None
        self.device = torch.device("cpu")  # where the model computes (learnt input rows are kept on the host)

    def to(self, device: torch.device) -> None:
        """Give the model its inputs on ``device`` (learnt rows are gathered on the host and copied there)."""
        self.device = device

    def _x(self, store: Any, t: str) -> torch.Tensor:
        if t in self.embeddings:
            return self.embeddings[t](store.n_id).to(self.device, non_blocking=True)
        x = store.x.float()
        return x if x.dim() == 2 else x.view(-1, 1)

    def loader_options(self) -> dict[str, Any]:
        """What the run's loaders fetch for this model: its features (sparse where it takes them so), its
        edge feature, no other node data."""
        return {
            "feat_name": self.feat_name,
            "sparse_x": self.sparse_x,
            "edge_feat_name": self.edge_feat,
            "node_attrs": (),
        }

    def edge_rows(self, et: Any, ids: torch.Tensor) -> torch.Tensor:
        """Edge feature rows of edges ``ids`` of ``et`` (for layer-wise inference)."""
        assert self.edge_feat is not None  # asked only of a model that reads an edge feature
        return _as_rows(self.g.edges[et].data[self.edge_feat][ids].float())

    def rows(self, ntype: str, ids: torch.Tensor) -> torch.Tensor:
        """Input rows of any nodes of ``ntype`` (features, or learnt embedding rows), e.g. for layer-wise
        inference."""
        if ntype in self.embeddings:
            return self.embeddings[ntype](ids)
        x = self.g.nodes[ntype].data[self.feat_name][ids].float()
        return x if x.dim() == 2 else x.view(-1, 1)

    def __call__(self, batch: Any) -> tuple[Any, ...]:
        """``(x, edge_index, hops)``, and ``edge_attr`` after them when the model reads edge features:
        ``hops`` = nodes and edges sampled per hop, for trimming (per node and edge type when
        heterogeneous, with every type present in ``x_dict`` and ``edge_index_dict``)."""
        if not self.hetero:
            out: tuple[Any, ...] = (
                self._x(batch, self.ntypes[0]),
                batch.edge_index,
                (batch.num_sampled_nodes, batch.num_sampled_edges),
            )
            return out + (_as_rows(batch.edge_attr.float()),) if self.edge_dims and "edge_attr" in batch else out
        present_n, present_e = set(batch.node_types), set(batch.edge_types)
        dev = self.device
        x = {
            t: self._x(batch[t], t) if t in present_n else torch.zeros((0, self.dims[t]), device=dev)
            for t in self.ntypes
        }
        edges = {
            et: batch[et].edge_index if et in present_e else torch.zeros((2, 0), dtype=torch.long, device=dev)
            for et in self.etypes
        }
        nodes = {t: list(batch[t].num_sampled_nodes) for t in present_n if "num_sampled_nodes" in batch[t]}
        hops = {et: list(batch[et].num_sampled_edges) for et in present_e if "num_sampled_edges" in batch[et]}
        out = (x, edges, (nodes, hops) if nodes else None)
        if not self.edge_dims:
            return out
        attrs = {
            et: _as_rows(batch[et].edge_attr.float())
            if et in present_e and "edge_attr" in batch[et]
            else torch.zeros((0, d), device=dev)
            for et, d in self.edge_dims.items()
        }
        return out + (attrs,)

    def step(self) -> None:
        """Apply the embeddings' sparse updates (after ``backward``)."""
        if self.optimizer is not None:
            self.optimizer.step()

    def state(self) -> dict[str, torch.Tensor]:
        """The embedding rows (and optimiser state) held by this process, for a checkpoint."""
        out = {}
        for t, emb in self.embeddings.items():
            held = local_shard(emb.weight.name)
            if held is not None:
                out[f"embed/{t}/rows"] = held.rows
                out.update({f"embed/{t}/{k}": v for k, v in held.state.items()})
        return out

    def check_state(self, tensors: dict[str, torch.Tensor], directory: str) -> None:
        """:class:`FormatError` naming the checkpoint ``directory`` unless ``tensors`` hold this rank's rows of
        every learnt embedding, in their shape and dtype (checked before :meth:`load_state` trusts them)."""
        for t, emb in self.embeddings.items():
            held = local_shard(emb.weight.name)
            if held is None:
                continue
            rows = tensors.get(f"embed/{t}/rows")
            if rows is None:
                raise FormatError(f"{directory}: the checkpoint has no embedding rows of node type {t!r}")
            if rows.shape != held.rows.shape or rows.dtype != held.rows.dtype:
                raise FormatError(
                    f"{directory}: the checkpoint's embedding rows of node type {t!r} are {rows.dtype} "
                    f"{tuple(rows.shape)}, this rank holds {held.rows.dtype} {tuple(held.rows.shape)}"
                )
            for k, v in tensors.items():
                name = k.rsplit("/", 1)[1]
                if k.startswith(f"embed/{t}/") and name in held.state and v.shape != held.state[name].shape:
                    raise FormatError(
                        f"{directory}: the checkpoint's {k} is {tuple(v.shape)}, this rank's "
                        f"{tuple(held.state[name].shape)}"
                    )

    def load_state(self, tensors: dict[str, torch.Tensor]) -> None:
        """Restore what :meth:`state` recorded (call on every rank, then barrier)."""
        for t, emb in self.embeddings.items():
            held = local_shard(emb.weight.name)
            if held is None:
                continue
            if f"embed/{t}/rows" not in tensors:
                raise InputError(f"the checkpoint has no embedding rows of node type {t!r}")
            held.rows.copy_(tensors[f"embed/{t}/rows"])
            held.state.update(
                {
                    k.rsplit("/", 1)[1]: v.clone()
                    for k, v in tensors.items()
                    if k.startswith(f"embed/{t}/") and not k.endswith("/rows")
                }
            )


def model_spec(opts: TrainOptions, inputs: ModelInputs, out_dim: int, targets: list[str]) -> ModelSpec:
    """What the model of a run is built for (see :class:`~graphshard.models.spec.ModelSpec`)."""
    return ModelSpec(
        dict(inputs.dims),
        out_dim,
        list(inputs.ntypes),
        list(inputs.etypes),
        outputs=list(dict.fromkeys(targets)),
        hidden=opts.hidden,
        num_layers=opts.num_layers,
        dropout=opts.dropout,
        heads=opts.heads,
        attn_dropout=opts.attn_dropout,
        edge_dims=dict(inputs.edge_dims),
        options=opts,
    )


def build_model(opts: TrainOptions, inputs: ModelInputs, out_dim: int, targets: list[str]) -> nn.Module:
    """The ``opts.model`` network from ``inputs``' dimensions to ``out_dim`` outputs per node of the
    ``targets`` node types (the types the loss reads): a built-in model, or the user's factory's."""
    spec = model_spec(opts, inputs, out_dim, targets)
    if is_custom(opts.model):
        return build_custom(opts.model, spec)
    try:
        return builtin_for(opts.model, inputs.hetero)(spec)
    except ValueError as exc:
        raise InputError(f"model {opts.model!r}: {exc}") from None


def rows_of(out: Any, target: str) -> torch.Tensor:
    """The output rows of node type ``target`` (the whole output of a homogeneous model)."""
    return out[target] if isinstance(out, dict) else out


def feature_cache(g: DistGraph, opts: TrainOptions, seeds: dict[str, Any]) -> FeatureCache | None:
    """Build and attach the remote-feature cache ``opts`` asks for in host memory, of the features the training
    batches read (collective; None without one, or with the cache on the device)."""
    if not (opts.cache_ratio or opts.cache_mb) or opts.cache_device != "host":
        return None
    cache = build_cache(g, seeds, opts.fanouts, [opts.feat or "feat"], ratio=opts.cache_ratio, megabytes=opts.cache_mb)
    g.features.attach_cache(cache)
    return cache


def device_cache(
    g: DistGraph, opts: TrainOptions, seeds: dict[str, Any], device: torch.device
) -> DeviceRowCache | None:
    """The feature cache on ``device`` that ``opts`` asks for (``cache_device`` cuda): the rows the training
    batches read most (collective; None without one)."""
    if not (opts.cache_ratio or opts.cache_mb) or opts.cache_device == "host":
        return None
    return build_device_cache(
        g, seeds, opts.fanouts, opts.feat or "feat", device=device, ratio=opts.cache_ratio, megabytes=opts.cache_mb
    )


def cache_summary(s: Any, cache: FeatureCache | DeviceRowCache | None) -> dict[str, Any]:
    """Metrics of the feature caches of all ranks of session ``s`` (collective when there is one): rows and
    bytes summed over ranks, build time per rank; ``cache_device`` says where they are."""
    if cache is None:
        return {}
    rows, nbytes, seconds = all_reduce_sum(
        s.ctx, np.array([cache.num_rows, cache.nbytes, cache.build_s]), "cache summary"
    )
    return {
        "cache_device": "host" if isinstance(cache, FeatureCache) else cache.device,
        "cache_rows": int(rows),
        "cache_bytes": int(nbytes),
        "cache_build_s": float(seconds) / s.world_size,
    }


def _width(shape: Any) -> int:
    return int(shape[1]) if len(shape) > 1 else 1


def _as_rows(x: torch.Tensor) -> torch.Tensor:
    """Feature rows as a 2-D tensor (one column for a scalar feature)."""
    return x if x.dim() == 2 else x.view(-1, 1)
