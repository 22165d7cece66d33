"""``serve``: answer HTTP requests for predictions and embeddings with a training checkpoint's model."""

from __future__ import annotations

import argparse
from typing import Any

from .common import (
    cluster_flags,
    command,
    device_flag,
    non_negative_float,
    partition_flags,
    positive_float,
    positive_int,
)


def run_serve(args: argparse.Namespace) -> None:
    from ..serve import ServeOptions, serve

    if args.id_map:  # a bad map is named before any rank starts (its sizes are checked against the graph later)
        from ..prepare.idmap import read_id_maps

        read_id_maps(args.id_map)

    options = ServeOptions(
        host=args.host,
        port=args.port,
        token_file=args.token_file,
        embeddings=args.embeddings,
        fanouts=args.fanouts,
        max_batch_nodes=args.max_batch_nodes,
        batch_wait=args.batch_wait_ms / 1000.0,
        max_queue=args.max_queue,
        max_nodes=args.max_nodes,
        max_edges=args.max_nodes,
        max_body=args.max_body_mb << 20,
        request_timeout=args.request_timeout,
        read_timeout=args.read_timeout,
        max_client_connections=args.max_client_connections,
        embedding_layer=args.embedding_layer,
        device=args.device,
        head=args.head,
        id_map=args.id_map,
    )
    serve(
        args.part_config,
        args.checkpoint,
        options,
        args.num_procs,
        rank_host=args.rank_host,
        timeout=args.timeout,
        heartbeat_timeout=args.heartbeat_timeout,
        verify=args.verify,
        colocated=args.colocated,
    )


def _fanouts(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value < 65536:
        raise argparse.ArgumentTypeError(f"expected a port 0..65535 (0: any free port), got {text!r}")
    return value


def register(sub: Any) -> None:
    p = command(
        sub,
        "serve",
        "answer HTTP requests for predictions and embeddings with a checkpoint's model",
        "Start the ranks of a 'graphshard train --checkpoint DIR' run (as many as it had) on its partitions "
        "and answer on rank 0: POST /v1/predict and /v1/embed for existing nodes by original ID "
        '({"nodes": [...], "type": ...}) or new nodes with their features and edges ({"new": [...]}), '
        "GET /healthz and GET /metrics (Prometheus). Runs until interrupted (Ctrl-C, SIGTERM).",
    )
    p.add_argument("--part-config", required=True, help="partition config JSON the run trained on")
    p.add_argument(
        "--checkpoint", required=True, help="the run's --checkpoint directory, or DIR/best (best validation epoch)"
    )
    p.add_argument("--host", default="127.0.0.1", help="address the HTTP service listens on (127.0.0.1: this machine)")
    p.add_argument("--port", type=_port, default=8080, help="HTTP port (0: any free port, printed at start)")
    p.add_argument(
        "--token-file",
        help="file holding a bearer token (one line, 16+ characters) every request must carry; required when "
        "--host is not a loopback address",
    )
    p.add_argument(
        "--embedding-layer",
        default="output",
        choices=["output", "hidden"],
        help="what /v1/embed answers: the model's output, or the hidden layer its last layer reads (as "
        "'graphshard embed --embedding-layer' writes them)",
    )
    p.add_argument(
        "--embeddings",
        help="'graphshard embed' output of the same checkpoint (and --embedding-layer): requests with "
        '"stale": true are answered from it, without the model',
    )
    p.add_argument(
        "--fanouts",
        type=_fanouts,
        help="neighbours sampled per layer, e.g. 10,10 (default: every in-edge: exactly what embed writes)",
    )
    p.add_argument("--max-batch-nodes", type=positive_int, default=1024, help="nodes per model batch at most")
    p.add_argument(
        "--batch-wait-ms",
        type=non_negative_float,
        default=0.0,
        help="how long the first request of a batch waits for others to join it (0: requests that queued while "
        "the last batch ran join the next, and a lone request does not wait)",
    )
    p.add_argument(
        "--max-queue", type=positive_int, default=256, help="requests waiting at most; more are answered 503"
    )
    p.add_argument(
        "--max-nodes", type=positive_int, default=10_000, help="nodes (or edges of a new node) per request at most"
    )
    p.add_argument("--max-body-mb", type=positive_int, default=4, help="request body size at most (MiB)")
    p.add_argument(
        "--head",
        metavar="TASK",
        help="of a multi-task checkpoint (--task multi): the task whose head answers /v1/predict (default: its "
        "main task); /v1/embed answers that head's outputs too",
    )
    p.add_argument(
        "--id-map",
        metavar="PREPARED_DIR",
        help="a 'graphshard prepare --out' directory: requests and answers name nodes by the users' own IDs "
        "(strings or integers), through its ID maps",
    )
    p.add_argument(
        "--request-timeout",
        type=positive_float,
        default=30.0,
        help="seconds a request may wait for its answer before it is answered 503",
    )
    p.add_argument(
        "--read-timeout",
        type=positive_float,
        default=10.0,
        help="seconds a connection has to send a request's header and body; slower ones get 408 and are closed",
    )
    p.add_argument(
        "--max-client-connections",
        type=positive_int,
        default=64,
        help="connections one client address may hold at once; more get 503 and are closed at once",
    )
    partition_flags(p)
    device_flag(p)
    cluster_flags(
        p,
        "start this many local ranks: the training run's rank count (omit under torchrun)",
        host_flag="--rank-host",
        lost="/healthz and the requests that need its partition answer 503, naming it",
    )
    p.set_defaults(func=run_serve)
