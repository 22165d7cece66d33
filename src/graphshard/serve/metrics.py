"""The service's Prometheus metrics (``GET /metrics``, text exposition format), in a registry of its own."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from .batching import Batch

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.015, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
SIZE_BUCKETS = tuple(float(2**i) for i in range(13))  # 1 .. 4096 nodes


class Metrics:
    """Requests by endpoint and status, request latency, model batches (nodes and seconds), remote feature rows
    fetched, the queue's depth and the ranks lost."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        self.requests = Counter("graphshard_requests", "HTTP requests answered", ["endpoint", "status"], registry=r)
        self.latency = Histogram(
            "graphshard_request_seconds",
            "time from a request's arrival to its answer",
            ["endpoint"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.batch_nodes = Histogram(
            "graphshard_batch_nodes", "nodes per model batch (micro-batched requests)", buckets=SIZE_BUCKETS, registry=r
        )
        self.batch_queries = Histogram(
            "graphshard_batch_requests", "requests per model batch", buckets=SIZE_BUCKETS, registry=r
        )
        self.batch_seconds = Histogram(
            "graphshard_batch_seconds", "time to answer one model batch", buckets=LATENCY_BUCKETS, registry=r
        )
        self.remote_rows = Counter(
            "graphshard_remote_rows",
            "rows of sampled nodes owned by other partitions (asked of their ranks, or read in-process if co-located)",
            registry=r,
        )
        self.queue_depth = Gauge("graphshard_queue_depth", "requests waiting for a model batch", registry=r)
        self.lost_ranks = Gauge("graphshard_lost_ranks", "ranks lost (the service answers 503 for them)", registry=r)

    def batch(self, b: Batch, remote_rows: int) -> None:
        self.batch_nodes.observe(b.nodes)
        self.batch_queries.observe(b.queries)
        self.batch_seconds.observe(b.seconds)
        self.remote_rows.inc(remote_rows)

    def text(self) -> bytes:
        return generate_latest(self.registry)
