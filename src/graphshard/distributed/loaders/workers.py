"""Sampler worker processes: each training rank starts ``W`` workers; together the workers of all ranks
form their own RPC group (member ``rank * W + i``), each serving its rank's partition (memory-mapped,
so the page cache is shared) and building whole batches — sampling and feature fetching — that reach
the training process through a queue. Workers die with their parent; every wait is bounded; an error
in a worker reaches the training loop as a :class:`DistError` naming the rank and worker."""

from __future__ import annotations

import itertools
import logging
import os
import queue
import signal
import time
import traceback
from collections.abc import Iterator
from dataclasses import KW_ONLY, dataclass
from typing import Any

from ...format.config import as_config
from ..groups.rpc import join_group, shutdown_rpc
from ..host.lifetime import UNGUARDED_EXIT, die_with_parent, refuse_spawn_reimport, unguarded_message
from ..host.processes import is_quiet
from ..ranks.context import DistError
from ..ranks.forkserver import helper_context
from ..ranks.interrupt import handled, starting_children, when_signalled
from ..remote.colocated import load_colocated
from ..remote.services import start_serving
from ..stores.partitions import load_served
from .batch import BatchMaker, BatchRequest, BatchSpec

log = logging.getLogger(__name__)
_POOLS = itertools.count()


@dataclass(frozen=True)
class WorkerSetup:
    """Everything a worker needs to join its group and build batches (picklable)."""

    part_config: str
    rank: int
    world_size: int
    index: int
    _: KW_ONLY
    num_workers: int
    store_host: str
    store_port: int
    pool_key: str
    rpc_host: str
    timeout: float
    spec: BatchSpec
    cache: Any = None  # the rank's FeatureCache (rows in shared memory), or None
    colocated: bool = True  # read the co-located partitions' files in-process (see colocated.py)


def _connect_store(s: WorkerSetup) -> Any:
    import datetime

    import torch.distributed as dist

    store = dist.TCPStore(s.store_host, s.store_port, is_master=False, timeout=datetime.timedelta(seconds=s.timeout))
    return dist.PrefixStore("graphshard/", store)


def _build(s: WorkerSetup) -> tuple[Any, BatchMaker]:
    names = [f"rank{r}-sampler{i}" for r in range(s.world_size) for i in range(s.num_workers)]
    me = s.rank * s.num_workers + s.index
    store = _connect_store(s)
    group = join_group(names, me, store, f"{s.pool_key}/port", timeout=s.timeout, host=s.rpc_host, lanes=s.num_workers)
    cfg = as_config(s.part_config)
    served = load_served(cfg, group.world_size, group.lanes, group.rank)
    serving = start_serving(group, served, load_colocated(cfg, group, s.colocated), cache=s.cache)
    group.barrier("sampler workers ready")
    return group, BatchMaker(s.spec, group, serving.graph, serving.features, book=served.book, near=serving.near_graphs)


def worker_main(setup: WorkerSetup, requests: Any, results: Any) -> None:
    """Worker process: build, report ready, then turn requests into batches until told to stop."""
    die_with_parent()
    with handled(speak=False, unwind=False):  # told to stop, a worker goes quiet: its rank ends it
        _serve(setup, requests, results)


def _serve(setup: WorkerSetup, requests: Any, results: Any) -> None:
    where = f"rank {setup.rank}, sampler worker {setup.index}"
    group, ok = None, False
    try:
        group, make = _build(setup)
        results.put(("ready", -1, None))
        while True:
            req = requests.get()
            if req is None:
                ok = True
                break
            try:
                results.put(("batch", req.index, make(req)))
            except Exception as exc:  # sent on; the training loop raises it
                results.put(("error", req.index, f"{where}: {type(exc).__name__}: {exc}"))
    except Exception as exc:
        log.debug("%s failed:\n%s", where, traceback.format_exc())
        results.put(("error", -1, f"{where}: {type(exc).__name__}: {exc}"))
    finally:
        if group is not None:
            try:
                shutdown_rpc(group, graceful=ok)  # together with the other workers, unless this one failed
            except Exception:  # peers gone: nothing left to serve
                pass


class WorkerPool:
    """``num_workers`` sampler processes of this rank (collective: every rank starts a pool with the same
    ``num_workers``, in the same order). Batches come back in request order, ``prefetch`` in flight
    per worker."""

    def __init__(
        self,
        part_config: str,
        rank: int,
        world_size: int,
        spec: BatchSpec,
        *,
        num_workers: int,
        prefetch: int = 2,
        timeout: float = 300.0,
        rpc_host: str = "127.0.0.1",
        cache: Any = None,
        colocated: bool = True,
    ):
        import torch
        import torch.multiprocessing

        refuse_spawn_reimport()
        if spec.sparse_x:  # sparse batch tensors are rebuilt here from checked partition data: say so, once,
            torch.sparse.check_sparse_tensor_invariants.disable()  # rather than have torch warn per batch
        self.rank, self.timeout, self.prefetch = rank, timeout, max(1, prefetch)
        host, port = os.environ["MASTER_ADDR"], _store_port()
        key = f"sampler-pool/{next(_POOLS)}"
        mp_ctx = helper_context(__name__)  # forked from a fork server of this rank: torch imported once
        self.requests = [mp_ctx.Queue() for _ in range(num_workers)]
        self.results = mp_ctx.Queue()
        self.procs = []
        with starting_children():  # a signal during a worker's start-up waits for its handlers
            for i in range(num_workers):
                setup = WorkerSetup(
                    str(part_config),
                    rank,
                    world_size,
                    i,
                    num_workers=num_workers,
                    store_host=host,
                    store_port=port,
                    pool_key=key,
                    rpc_host=rpc_host,
                    timeout=timeout,
                    spec=spec,
                    cache=cache.share_memory_() if cache is not None else None,
                    colocated=colocated,
                )
                p = mp_ctx.Process(target=worker_main, args=(setup, self.requests[i], self.results), daemon=True)
                p.start()
                self.procs.append(p)
        for _ in range(num_workers):
            kind, _, payload = self._receive("sampler workers to start")
            if kind == "error":
                self.close(abort=True)
                raise DistError(payload)
        self._unhook = when_signalled(self._quiet_workers, first=True)

    def _quiet_workers(self) -> None:
        """This rank was told to stop: its workers go quiet (bounded) before it tells its peers it is, so no
        worker's transport logs the connections that close next (see :mod:`.interrupt`)."""
        pids = [p.pid for p in self.procs if p.pid is not None]  # all: each was started before it was listed
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM)
            except OSError:  # gone already
                pass
        deadline = time.monotonic() + 0.5
        while not all(is_quiet(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.005)  # polling the workers' standard error, against a deadline

    def _receive(self, what: str) -> tuple[str, int, Any]:
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                return self.results.get(timeout=min(1.0, max(0.01, deadline - time.monotonic())))
            except (OSError, EOFError):  # a worker died while writing to the queue: name it
                for p in self.procs:
                    p.join(timeout=1.0)
                self._raise_if_dead(what)
                raise DistError(
                    f"rank {self.rank}: the sampler workers' result queue broke while waiting for {what}"
                ) from None
            except queue.Empty:
                self._raise_if_dead(what)
                if time.monotonic() >= deadline:
                    raise DistError(f"rank {self.rank}: waited {self.timeout:.0f} s for {what}") from None

    def _raise_if_dead(self, what: str) -> None:
        for i, p in enumerate(self.procs):
            if not p.is_alive() and p.exitcode == UNGUARDED_EXIT:
                raise DistError(f"rank {self.rank}: " + unguarded_message(f"sampler worker {i}")) from None
            if not p.is_alive():
                raise DistError(
                    f"rank {self.rank}: sampler worker {i} exited with code {p.exitcode} while waiting for {what}"
                ) from None

    def run(self, requests: list[BatchRequest]) -> Iterator[Any]:
        """Batches for ``requests``, in order. Raises :class:`DistError` if a worker fails or stalls."""
        w = len(self.procs)
        sent, ready = 0, {}
        try:
            for want in range(len(requests)):
                while sent < len(requests) and sent < want + w * self.prefetch:
                    self.requests[sent % w].put(requests[sent])
                    sent += 1
                while want not in ready:
                    kind, index, payload = self._receive(f"batch {want}")
                    if kind == "error":
                        raise DistError(payload)
                    ready[index] = payload
                yield ready.pop(want)
        except BaseException:
            self.close(abort=True)
            raise

    def close(self, abort: bool = False) -> None:
        """Stop the workers: politely (they leave their RPC group together), or at once after a failure."""
        getattr(self, "_unhook", lambda: None)()
        if abort:
            for p in self.procs:
                p.kill()
        else:
            for q in self.requests:
                q.put(None)
        for p in self.procs:
            p.join(timeout=self.timeout)
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
        self.procs = []


def _store_port() -> int:
    """Port of the rendezvous store (torchrun's agent store or our launcher's: both in MASTER_PORT)."""
    return int(os.environ["MASTER_PORT"])
