"""Accelerators: which device each rank computes on (:mod:`.choice`), copies that overlap the model's compute
(:mod:`.streams`, :mod:`.buffers`, :mod:`.transfer`), rows kept on the device (:mod:`.rowcache`), and the
device's memory (:mod:`.memory`).

Everything here runs on a CPU too: a stream there is no stream (its copies happen at once, its events are
always done), a buffer is not pinned, and the device is ``cpu``; so the same path that feeds a GPU is tested
on machines without one. This package imports torch and graphshard's ground floor only."""

from importlib import import_module
from typing import Any

_EXPORTS = {
    "RankDevice": "choice",
    "check_device": "choice",
    "rank_device": "choice",
    "BufferPool": "buffers",
    "CopyStream": "streams",
    "DeviceFeeder": "transfer",
    "DeviceRowCache": "rowcache",
    "StepClock": "clock",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'graphshard.device' has no attribute {name!r}")
    return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
