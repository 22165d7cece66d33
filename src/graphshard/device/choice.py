"""Which device a rank computes on, and how its ranks sum gradients.

The rule, for ``--device cuda`` (or ``auto`` on a machine with CUDA devices): the rank with ``LOCAL_RANK``
``r`` on a host with ``n`` visible devices takes ``cuda:r % n`` (``cuda:r`` when the host has at most ``n``
ranks). Where every rank has a physical device of its own (the ranks compare their hosts and devices' UUIDs,
so ranks that each see one device through their own ``CUDA_VISIBLE_DEVICES`` count as separate too) and NCCL
is there, DDP sums gradients over NCCL, in a process group of its own (gloo stays for the CPU's collectives,
the store and liveness). NCCL refuses two ranks on one device, so ranks that share one sum their gradients on
the host, over the run's channels or gloo, as CPU ranks do (one copy of the gradients to the host and back
per step). ``--device auto`` is ``cuda`` where a CUDA device is visible, else ``cpu``.

Every set-up that cannot work is refused by :func:`check_device` before any process starts, in one line."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

import torch

from ..errors import InputError

DEVICES = ("cpu", "cuda", "auto")
PRECISIONS = ("fp32", "bf16-mixed")


@dataclass(frozen=True)
class RankDevice:
    """What one rank computes on: ``device``; ``shared``: its host has more ranks than it sees devices (a hint
    for messages: whether ranks share a device is decided from the devices' identities, :func:`nccl_for`)."""

    device: torch.device
    shared: bool = False

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    def identity(self) -> str:
        """What tells this rank's device apart from every other rank's: its host and the device's UUID (empty
        on a CPU)."""
        if not self.is_cuda:
            return ""
        props = torch.cuda.get_device_properties(self.device)
        return f"{socket.gethostname()}/{getattr(props, 'uuid', self.device.index)}"


def nccl_for(identities: list[str], nccl: list[bool]) -> bool:
    """Whether a job's ranks, with these device ``identities`` (:meth:`RankDevice.identity`) and NCCL where
    ``nccl`` says, sum gradients over NCCL: every rank on a GPU, no two on the same one, NCCL on all."""
    return all(identities) and all(nccl) and len(set(identities)) == len(identities)


def cuda_devices() -> int:
    """CUDA devices this process sees (0 on a build or machine without CUDA)."""
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def resolve(kind: str) -> str:
    """``cpu`` or ``cuda`` for ``kind`` (``auto``: ``cuda`` where a device is visible)."""
    if kind not in DEVICES:
        raise InputError(f"device must be one of {', '.join(DEVICES)}, got {kind!r}")
    if kind == "auto":
        return "cuda" if cuda_devices() else "cpu"
    return kind


def check_device(kind: str, ranks_per_host: int, precision: str = "fp32", cache_device: str = "host") -> str:
    """Refuse, in one line naming the way out, a device set-up that cannot work on this machine: CUDA asked of a
    build or machine without it, a device cache or bf16 without a device for them, NCCL missing where each of
    ``ranks_per_host`` ranks would have a device of its own. Returns the resolved kind (``cpu``/``cuda``)."""
    if precision not in PRECISIONS:
        raise InputError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if kind == "cuda":
        if torch.version.cuda is None:
            raise InputError(
                f"--device cuda: this build of torch ({torch.__version__}) has no CUDA; install a CUDA build of "
                "torch, or train with --device cpu (or auto)"
            )
        if not cuda_devices():
            seen = os.environ.get("CUDA_VISIBLE_DEVICES")
            where = f" (CUDA_VISIBLE_DEVICES={seen!r})" if seen is not None else ""
            raise InputError(f"--device cuda: no CUDA device is visible on this machine{where}; use --device cpu")
    resolved = resolve(kind)
    if cache_device == "cuda" and resolved != "cuda":
        raise InputError("--cache-device cuda needs --device cuda (or auto on a machine with a CUDA device)")
    if resolved == "cuda" and ranks_per_host <= cuda_devices():
        import torch.distributed as dist

        if not dist.is_nccl_available():
            raise InputError(
                "--device cuda: this build of torch has no NCCL, which sums the gradients of ranks on devices of "
                "their own; install a build with NCCL, or start more ranks than devices (they then share the "
                "devices and sum on the host)"
            )
    return resolved


def local_ranks() -> int:
    """Ranks on this host of a job started by torchrun or Slurm (``LOCAL_WORLD_SIZE``; 1 without it)."""
    return int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1)


def rank_device(kind: str, local_rank: int | None = None, host_ranks: int | None = None) -> RankDevice:
    """The device of the rank with ``local_rank`` among ``host_ranks`` on its host (default: torchrun's
    ``LOCAL_RANK`` and ``LOCAL_WORLD_SIZE``), by the rule of this module."""
    resolved = resolve(kind)
    if resolved == "cpu":
        return RankDevice(torch.device("cpu"))
    count = cuda_devices()
    if not count:
        raise InputError("--device cuda: no CUDA device is visible to this rank")
    r = int(os.environ.get("LOCAL_RANK", "0")) if local_rank is None else local_rank
    n = local_ranks() if host_ranks is None else host_ranks
    return RankDevice(torch.device("cuda", r % count), shared=n > count)


def rule_line(kind: str, ranks_per_host: int) -> str | None:
    """What the run's ranks compute on, in one line for the log at start (None on CPUs)."""
    if resolve(kind) != "cuda":
        return None
    count = cuda_devices()
    if ranks_per_host <= count:
        return f"{ranks_per_host} rank(s) per host, on cuda:LOCAL_RANK"
    return f"{ranks_per_host} ranks per host see {count} CUDA device(s): they take cuda:LOCAL_RANK % {count}"
