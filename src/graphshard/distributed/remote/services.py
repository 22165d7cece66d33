"""What a process builds over the partitions it serves (and the co-located ones it reads in-process) before it
can answer its peers: the feature store, the sampling graphs, and the sampling service registered under the
graph's key. A :class:`~.graph.DistGraph` and the sampler workers (:mod:`.workers`) build it the same way;
collective over the group (the feature store's construction waits for every member's)."""

from __future__ import annotations

from dataclasses import dataclass

from ..groups.rpc import RpcGroup
from ..stores.local import LocalFeatureStore
from ..stores.partitions import Served
from .cache import FeatureCache
from .feature import DistFeatureStore
from .sampler import serve_sampling
from .sampling_graph import SamplingGraph, feature_times, served_sampling_graph


@dataclass
class Serving:
    """The feature store over every partition, this process's sampling graph (served to peers) and the
    sampling graphs of the co-located partitions (read in-process, by stored partition)."""

    features: DistFeatureStore
    graph: SamplingGraph
    near_graphs: dict[int, SamplingGraph]


def start_serving(
    group: RpcGroup, served: Served, near: dict[int, Served], key: str = "", *, cache: FeatureCache | None = None
) -> Serving:
    """Build what ``served`` (and the co-located ``near``) need to answer, and register the sampling graph
    under ``key``; ``cache``: rows of other partitions held here (see :mod:`.cache`)."""
    features = DistFeatureStore(
        group,
        LocalFeatureStore(served, served.part_id),
        served.book,
        key,
        near={p: LocalFeatureStore(n, p) for p, n in near.items()},
    )
    features.attach_cache(cache)
    times = feature_times(features.lookup, features.has, served.book)
    graph = served_sampling_graph(served, times)
    serve_sampling(graph, key)
    return Serving(features, graph, {p: served_sampling_graph(n, times) for p, n in near.items()})
