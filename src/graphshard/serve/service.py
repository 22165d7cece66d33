"""``graphshard serve``: the ranks of a training checkpoint serve their partitions as in training, and rank 0
answers HTTP requests with the restored model (:mod:`.app`).

Every rank restores its part of the checkpoint (weights, learnt input embeddings) and serves its partition's
structure and features to the others. Rank 0 also runs the HTTP service (uvicorn, in a thread) and the
micro-batcher; the other ranks wait until rank 0 tells them to stop, or leave (naming it) when it is lost.

A lost rank does not stop the service: rank 0's heartbeat (:mod:`~graphshard.distributed.transport.liveness`) marks it
lost within ``heartbeat_timeout`` seconds; from then ``/healthz`` answers 503 naming it, and a request whose
computation needs its partition answers 503 naming the partition at once (a request already waiting on it
is released as soon as it is marked). Requests that need only live partitions are still answered."""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
from dataclasses import KW_ONLY, dataclass, replace
from typing import Any

import numpy as np

from ..distributed.groups import rpc
from ..distributed.host.lifetime import refuse_spawn_reimport
from ..distributed.ranks.context import PROCESS_KEY
from ..distributed.runtime.session import Session, session
from ..distributed.transport.channel import handler
from ..distributed.transport.liveness import DEFAULT_LOST_AFTER, doing
from ..distributed.transport.network import LOOPBACK
from ..errors import DistError, InputError
from ..tasks.multi_serving import head_view
from ..tasks.options import TrainOptions
from ..tasks.restore import Restored, checkpoint_run, restore
from .answer import Answerer, HiddenLayer, hidden_layer, open_stale
from .queries import GraphFacts, Limits, Query
from .servable import check_servable

log = logging.getLogger(__name__)
notice = logging.getLogger("graphshard.notice")  # shown at the default log level

STOP_KEY = "serve/stop"
CONNECTIONS_PER_QUEUED = 4  # open connections and requests in flight allowed per request the queue holds
READY = "graphshard: serving"  # the line rank 0 prints once it answers (tests and scripts wait for it)


@dataclass(frozen=True)
class ServeOptions:
    """How the service answers: where it listens, micro-batching, the limits of a request, what it answers with.

    Call `check` to validate (``serve`` does, before starting any process).

    Attributes:
        host: the address the HTTP service listens on.
        port: the port it listens on; 0 picks a free one.
        token_file: the file holding the bearer token every request must carry (required unless ``host`` is
            a loopback address).
        embeddings: precomputed embeddings for stale answers.
        fanouts: neighbours sampled per layer; None: every in-edge (exact).
        max_batch_nodes: nodes per model batch (micro-batching).
        batch_wait: seconds to gather a batch.
        max_queue: requests waiting at most.
        max_nodes: nodes in one request at most.
        max_edges: edges per new node of a request at most.
        max_body: bytes of a request's body at most.
        request_timeout: seconds a request may wait.
        read_timeout: seconds a connection has to deliver a request's header and body (else 408 and closed).
        max_client_connections: connections one client address may hold at once (more: 503 and closed).
        embedding_layer: what ``/v1/embed`` answers: the model's ``output`` or the ``hidden`` layer its last
            layer reads.
        device: what the model computes on (``cpu``, ``cuda``, ``auto``; batches are sampled on the CPU).
        head: of a multi-task checkpoint, the task whose head answers; None: its main task.
        id_map: a ``graphshard prepare`` output whose ID maps name the nodes in requests and answers (the
            users' own IDs).
    """

    host: str = LOOPBACK
    port: int = 8080
    token_file: str | None = None
    embeddings: str | None = None
    _: KW_ONLY
    fanouts: list[int] | None = None
    max_batch_nodes: int = 1024
    batch_wait: float = 0.0
    max_queue: int = 256
    max_nodes: int = 10_000
    max_edges: int = 10_000
    max_body: int = 4 << 20
    request_timeout: float = 30.0
    read_timeout: float = 10.0
    max_client_connections: int = 64
    embedding_layer: str = "output"
    device: str = "cpu"
    head: str | None = None  # a multi-task checkpoint's task to answer for (default: its main task)
    id_map: str | None = None  # a prepared directory: requests and answers name nodes by the users' IDs

    def check(self, layers: int) -> None:
        """Check the options against the model.

        Args:
            layers: the model's number of layers (``fanouts`` must give one count per layer).

        Raises:
            InputError: names the option at fault: ``fanouts`` not one count per layer, each > 0 or -1; an
                unknown ``embedding_layer``; a ``port`` outside 0..65535; no ``token_file`` with a ``host``
                that is not a loopback address.
        """
        if self.fanouts is not None and (len(self.fanouts) != layers or any(f == 0 or f < -1 for f in self.fanouts)):
            raise InputError(f"--fanouts {self.fanouts}: give {layers} counts (one per layer), each > 0 or -1 (all)")
        if self.embedding_layer not in ("output", "hidden"):
            raise InputError(f"--embedding-layer {self.embedding_layer!r}: 'output' or 'hidden'")
        if not self.read_timeout > 0 or self.max_client_connections < 1:
            raise InputError(
                f"--read-timeout {self.read_timeout} and --max-client-connections {self.max_client_connections}: "
                "expected a positive number of seconds and at least 1 connection"
            )
        if not 0 <= self.port < 65536:
            raise InputError(f"--port {self.port}: expected 0..65535 (0: any free port)")
        if self.token_file is None and not _is_loopback(self.host):
            raise InputError(
                f"--host {self.host} is not a loopback address: give --token-file (a bearer token every request "
                "must carry), so that nobody else on the network can query the model"
            )


EXTRA = ("starlette", "uvicorn", "prometheus_client")  # what 'graphshard[serve]' installs for the service


def require_extra() -> None:
    """An :class:`InputError` naming the missing packages when the ``serve`` extra is not installed."""
    import importlib.util

    missing = []
    for name in EXTRA:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a module set to None, or one without a spec
            found = False
        if not found:
            missing.append(name)
    if missing:
        raise InputError(
            f"graphshard serve needs the serve extra (missing: {', '.join(missing)}): pip install 'graphshard[serve]'"
        )


def read_token(path: str) -> str:
    """The bearer token in ``path`` (its first line, at least 16 characters)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"--token-file {path}: cannot be read ({exc})") from None
    token = text.strip().splitlines()[0].strip() if text.strip() else ""
    if len(token) < 16 or not re.fullmatch(r"[\x21-\x7e]+", token):
        raise InputError(f"--token-file {path}: the token must be one line of at least 16 printable characters")
    return token


def serve(
    part_config: str | os.PathLike,
    checkpoint: str | os.PathLike,
    options: ServeOptions = ServeOptions(),
    num_procs: int | None = None,
    *,
    rank_host: str = LOOPBACK,
    timeout: float = 300.0,
    heartbeat_timeout: float = DEFAULT_LOST_AFTER,
    verify: bool = True,
    colocated: bool = True,
) -> None:
    """Serve the model of a training checkpoint over HTTP until interrupted (see `graphshard.serve`).

    Args:
        part_config: the partition config (``<graph_name>.json``) of the partitions the run trained on.
        checkpoint: a ``graphshard train --checkpoint DIR`` directory, or ``DIR/best``.
        options: how the service answers (checked here, before any process starts).
        num_procs: start that many local ranks (the checkpoint's rank count); None: this process is one rank
            of a torchrun job of that size.
        rank_host: the address the ranks' own transports listen on (see ``--host`` of ``graphshard train``).
        timeout: seconds any distributed wait may take.
        heartbeat_timeout: seconds without a heartbeat after which a rank is lost (0: off).
        verify: check the partition files against their checksums first (see `DistGraph`).
        colocated: read the partitions of other ranks on the same host in-process (see `DistGraph`).

    Raises:
        InputError: the ``serve`` extra is not installed; an option at fault; a checkpoint that cannot be
            served as asked (no checkpoint, another rank count, an unusable ``head`` or layer); an unreadable
            token file; an address and port that cannot be listened on.
        FormatError: an unreadable checkpoint, or a missing or corrupt partition config or file.
        DistError: a rank failed; names the rank.
    """
    refuse_spawn_reimport()
    require_extra()
    opts = checkpoint_run(
        part_config,
        checkpoint,
        num_procs,
        None,
        timeout=timeout,
        layer="output",
        heartbeat_timeout=heartbeat_timeout,
        verify=verify,
        colocated=colocated,
        device=options.device,
    )
    options.check(opts.num_layers)
    check_servable(opts, options.embedding_layer, str(checkpoint), options.head)
    lead = num_procs is not None or int(os.environ.get("RANK", "0")) == 0  # starts rank 0, or is rank 0
    token, listener = None, None
    if lead:  # what only rank 0 uses is read and taken by its host alone (the others may not have the file)
        token = read_token(options.token_file) if options.token_file else None
        listener = _listen(options.host, options.port)  # taken now: a port in use is said before any rank starts
    if num_procs is None:
        _rank(opts, options, token, listener)
        return
    from ..distributed.ranks.launcher import launch
    from ..tasks.compiled import warm_up

    warm_up()  # compiled here once (first run only), loaded from the cache by every rank
    served = replace(options, port=listener.getsockname()[1]) if listener is not None else options
    try:  # the socket itself goes to the ranks (a port closed and bound again could be taken meanwhile)
        launch(_rank, num_procs, (opts, served, token, listener), rank_host, timeout=timeout, lead_only=True)
    finally:
        if listener is not None:
            listener.close()


def _rank(opts: TrainOptions, options: ServeOptions, token: str | None, listener: socket.socket | None) -> None:
    with session(timeout=opts.timeout, heartbeat_timeout=opts.heartbeat_timeout) as s:
        doing("loading the model")
        restored = restore(s, opts)
        if restored.task == "multi":  # one task's head answers
            restored = head_view(restored, opts, options.head)
        hidden = _hidden(restored, options.embedding_layer)
        fanouts = options.fanouts or [-1] * opts.num_layers
        answerer = Answerer(restored, fanouts, key=opts.seed, chunk=options.max_batch_nodes, hidden=hidden)
        answerer.open_maps()
        if s.rank == 0:
            _lead(s, opts, options, token, listener=listener, restored=restored, answerer=answerer)
        else:
            if listener is not None:
                listener.close()  # rank 0's: every rank got a copy
            _follow(s)


def _hidden(restored: Restored, layer: str) -> HiddenLayer | None:
    """The hidden-layer view ``/v1/embed`` answers with (None: the output; checked by
    :func:`.servable.check_servable`)."""
    if layer == "output":
        return None
    hidden = hidden_layer(restored.encoder)
    assert hidden is not None, "checked before the ranks started"
    return hidden


def _follow(s: Session) -> None:
    """Serve this rank's partition until rank 0 says stop; a lost rank 0 ends this rank (naming it)."""
    stop = threading.Event()
    rpc.register(STOP_KEY, stop)
    beat = s.ctx.heartbeat
    if beat is not None:
        beat.on_lost = lambda line: None  # another lost rank: the service goes on without it
    doing("serving")
    while not stop.wait(0.5):  # woken by rank 0's stop at once; otherwise look at rank 0's state
        lost = beat.unavailable().get(0) if beat is not None else None
        if lost is not None:
            raise DistError(f"rank {s.rank}: the service's rank 0 is lost: {lost}")


@handler
def _stop_serving() -> None:
    rpc.registered(STOP_KEY).set()


def _lead(
    s: Session,
    opts: TrainOptions,
    options: ServeOptions,
    token: str | None,
    *,
    listener: socket.socket | None,
    restored: Restored,
    answerer: Answerer,
) -> None:
    import uvicorn

    from .app import Service, build_app
    from .batching import MicroBatcher
    from .door import guarded_protocol
    from .metrics import Metrics
    from .names import NodeNames

    g, beat = restored.g, s.ctx.heartbeat
    per_part = s.group.per_part(g.get_partition_book().num_partitions())
    if beat is not None:
        beat.on_lost = lambda line: log.warning("%s; the service answers 503 for its partition", line)
        s.group.unavailable = lambda member: beat.unavailable().get(s.group.names.index(member))

    def health() -> list[dict[str, Any]]:
        lost = beat.unavailable() if beat is not None else {}
        return [{"rank": r, "partition": r // per_part, "why": why} for r, why in sorted(lost.items())]

    def unavailable(exc: BaseException) -> str | None:
        if not isinstance(exc, rpc.PeerLost):
            return None
        r = s.group.names.index(exc.member)
        why = (beat.unavailable().get(r) if beat is not None else None) or str(exc)
        return f"partition {r // per_part} (rank {r}) is lost: {why}"

    answerer.hold_maps()
    facts = _facts(restored, answerer, options.embeddings)
    metrics = Metrics()

    def on_batch(b: Any) -> None:
        metrics.batch(b, answerer.take_remote_rows())

    batcher = MicroBatcher(
        answerer.answer_each, options.max_batch_nodes, options.batch_wait, options.max_queue, on_batch=on_batch
    ).start()
    service = Service(
        batcher,
        facts,
        Limits(options.max_nodes, options.max_edges),
        restored.classes,
        health=health,
        unavailable=unavailable,
        metrics=metrics,
        token=token,
        max_body=options.max_body,
        timeout=options.request_timeout,
        ranks=_ranks(s, per_part),
        label_kind=restored.label_kind or "classification",
        names=NodeNames.load(options.id_map, facts.counts) if options.id_map else None,
    )
    sock = listener or _listen(options.host, options.port)
    server = uvicorn.Server(
        uvicorn.Config(
            build_app(service),
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=2,
            limit_concurrency=CONNECTIONS_PER_QUEUED * options.max_queue,  # beyond: 503 at once
            http=guarded_protocol(options.read_timeout, options.max_client_connections),
        )
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="graphshard-http", daemon=True)
    doing("serving")  # said before the first request can arrive
    thread.start()
    try:
        while not server.started and thread.is_alive():
            thread.join(0.05)  # bounded: uvicorn starts in milliseconds, or its thread ends with the error
        if not server.started:
            raise DistError(f"the HTTP service on {options.host}:{sock.getsockname()[1]} did not start")
        host, port = sock.getsockname()[:2]
        print(
            f"{READY} {opts.model} ({opts.task}) on http://{_url_host(host)}:{port} with {s.world_size} ranks",
            flush=True,
        )
        while thread.is_alive():
            thread.join(0.5)  # until interrupted (SIGINT, SIGTERM) or the server ends
    finally:
        server.should_exit = True
        thread.join(5.0)
        batcher.stop()
        lost = beat.unavailable() if beat is not None else {}
        for r in range(1, s.world_size):
            if r not in lost:
                try:
                    rpc.rpc_call(s.group, s.group.names[r], _stop_serving, (), what="stop serving")
                except DistError:
                    pass
        if lost:
            raise DistError(f"served with rank(s) lost: {'; '.join(lost.values())}")


def _facts(restored: Restored, answerer: Answerer, embeddings: str | None) -> GraphFacts:
    """What the request checks need to know of the served graph and model; with ``embeddings``, the stale rows
    are opened (checked to be as wide as the served layer) and handed to ``answerer``."""
    g, inputs = restored.g, restored.inputs
    counts = {t: g.num_nodes(t) for t in g.ntypes}
    width = _first_answer(answerer, restored.types[0])
    if embeddings:
        answerer.stale = open_stale(embeddings, restored.types, counts, width)
    widths = {t: inputs.dims[t] if t not in inputs.embeddings else None for t in restored.types}
    no_new = "the model reads edge features, which a new node's edges do not have" if inputs.edge_dims else None
    et = restored.edge_type
    return GraphFacts(
        counts,
        restored.types,
        inputs.feat_name,
        widths,
        stale=bool(embeddings),
        no_new=no_new,
        pair_types=(et[0], et[2]) if et is not None else None,
        pair_field="edges" if restored.task == "edge" else "pairs",
        pair_etype=":".join(et) if et is not None and restored.task == "edge" else None,
        etypes=list(g.canonical_etypes),
    )


def _ranks(s: Session, per_part: int) -> list[dict[str, Any]]:
    """Every rank's partition, host and process ID (as each published them when it joined)."""
    out = []
    for r in range(s.world_size):
        host, pid = s.ctx.store.get(f"{PROCESS_KEY}{r}").decode().split()
        out.append({"rank": r, "partition": r // per_part, "host": host, "pid": int(pid)})
    return out


def _first_answer(answerer: Answerer, ntype: str) -> int:
    """Compute one node's rows (the first request then pays no start-up cost); returns the width /v1/embed
    answers."""
    query = Query("embed", ntype, np.zeros(1, dtype=np.int64))
    return int(answerer.answer([query])[0].shape[1])


def _listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (an :class:`InputError` naming them when it cannot be had)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named: asyncio sets TCP_NODELAY on the connections it accepts only from a socket that says it
    # is TCP; without it an answer written as head and body waits ~40 ms for the client's delayed ACK
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(256)
    except OSError as exc:
        sock.close()
        raise InputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def _is_loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
