"""Process context of a distributed run: rank, world size, process group and a side-channel store.

Ranks join either from ``torchrun``'s environment (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``,
``MASTER_PORT``) or from :func:`graphshard.distributed.launcher.launch`. A failing rank records its error in
the store, so the others can raise an error that names it instead of a bare timeout.
"""

from __future__ import annotations

import datetime
import logging
import os
import traceback
from dataclasses import dataclass
from typing import Any

from .network import gloo_options, host_store, interface_of

log = logging.getLogger(__name__)

ERROR_KEY = "error/"
PEER_FAILURE = "caused by a peer:"  # marks errors that only report another rank's failure


class DistError(RuntimeError):
    """A distributed step failed; the message names the rank at fault where it is known."""


@dataclass
class DistContext:
    """Everything a rank needs to talk to the others. Use as a context manager to tear down."""

    rank: int
    world_size: int
    store: Any
    timeout: float

    @classmethod
    def from_env(cls, timeout: float = 300.0) -> "DistContext":
        """Join the process group described by torchrun-style environment variables."""
        import torch.distributed as dist

        try:
            rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
            host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
        except KeyError as exc:
            raise DistError(f"environment variable {exc.args[0]} is not set (launch with torchrun or "
                            "graphshard's --num-procs)") from None
        delta = datetime.timedelta(seconds=timeout)
        agent_store = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
        is_master = rank == 0 and not agent_store and os.environ.get("GRAPHSHARD_STORE_HOSTED") != "1"
        if is_master:
            store = host_store(host, port, world, timeout)  # listens on MASTER_ADDR only
        else:
            store = dist.TCPStore(host, port, world, is_master=False, timeout=delta)
        store = dist.PrefixStore("graphshard/", store)
        # gloo listens on MASTER_ADDR when this machine holds it (always so for a local run); on other
        # hosts of a torchrun job torch picks this host's address
        pg_options = gloo_options(host) if interface_of(host) else None
        dist.init_process_group("gloo", store=dist.PrefixStore("pg/", store), rank=rank, world_size=world,
                                timeout=delta, pg_options=pg_options)
        log.info("rank %d of %d joined (%s:%d)", rank, world, host, port)
        return cls(rank, world, store, timeout)

    def __enter__(self) -> "DistContext":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        import torch.distributed as dist

        if exc is not None:
            self.report_failure(exc)
        if dist.is_initialized():
            dist.destroy_process_group()

    def report_failure(self, exc: BaseException) -> None:
        """Record this rank's error where the other ranks will find it."""
        text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        frames = traceback.extract_tb(exc.__traceback__)
        if frames:
            text += f" (at {frames[-1].filename}:{frames[-1].lineno})"
        try:
            self.store.set(f"{ERROR_KEY}{self.rank}", text)
        except Exception:  # the store may be gone already; the launcher still reports the exit code
            pass

    def failed_peer(self) -> str | None:
        """The first recorded peer failure, as ``"rank R: message"``, or None."""
        for r in range(self.world_size):
            key = f"{ERROR_KEY}{r}"
            try:
                if r != self.rank and self.store.check([key]):
                    return f"rank {r}: {self.store.get(key).decode(errors='replace')}"
            except Exception:
                return None
        return None
