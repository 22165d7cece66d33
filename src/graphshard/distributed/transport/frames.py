"""How a message of the channels (:mod:`.channel`) is laid out: a 4-byte length, a JSON header, then the raw
bytes of its arrays in order. The header names the handler (``h``) or carries the value (``v``) or an error line
(``e``), and lists each array's dtype and shape (``a``), so the reader allocates every array before reading into
it. Nothing is pickled. :class:`FrameReader` reads whole frames from a socket, every wait bounded."""

from __future__ import annotations

import json
import socket
import ssl
import struct
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

DTYPES = {
    str(t).removeprefix("torch."): t
    for t in (
        torch.float64,
        torch.float32,
        torch.float16,
        torch.bfloat16,
        torch.int64,
        torch.int32,
        torch.int16,
        torch.int8,
        torch.uint8,
        torch.uint16,
        torch.uint32,
        torch.uint64,
        torch.bool,
    )
}
LENGTH = struct.Struct("<I")
MAX_HEADER = 1 << 24  # a header lists arrays and scalars; 16 MiB means the stream is not ours


def encode(value: Any, arrays: list[torch.Tensor]) -> Any:
    """``value`` as JSON, its tensors and arrays appended to ``arrays`` (by reference, made contiguous):
    tensors become ``{"T": i}``, NumPy arrays ``{"N": i}``, tuples ``{"(": [...]}``."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, torch.Tensor):
        arrays.append(value.detach().contiguous())
        return {"T": len(arrays) - 1}
    if isinstance(value, np.ndarray):
        arrays.append(torch.from_numpy(np.ascontiguousarray(value).reshape(value.shape)))
        return {"N": len(arrays) - 1}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, tuple):
        return {"(": [encode(v, arrays) for v in value]}
    if isinstance(value, list):
        return [encode(v, arrays) for v in value]
    raise TypeError(f"a channel cannot carry {type(value).__name__}")


def decode(tree: Any, arrays: list[torch.Tensor]) -> Any:
    """The value :func:`encode` turned into ``tree``, with its arrays."""
    if isinstance(tree, list):
        return [decode(v, arrays) for v in tree]
    if isinstance(tree, dict):
        if "T" in tree:
            return arrays[tree["T"]]
        if "N" in tree:
            return arrays[tree["N"]].numpy()
        return tuple(decode(v, arrays) for v in tree["("])
    return tree


def pack(header: dict, arrays: list[torch.Tensor]) -> list[memoryview]:
    header["a"] = [[str(a.dtype).removeprefix("torch."), list(a.shape)] for a in arrays]
    unknown = sorted({d for d, _ in header["a"] if d not in DTYPES})
    if unknown:
        raise TypeError(f"a channel cannot carry tensors of {', '.join(unknown)}")
    head = json.dumps(header, separators=(",", ":")).encode()
    return [memoryview(LENGTH.pack(len(head)) + head)] + [bytes_of(a) for a in arrays if a.numel()]


def bytes_of(t: torch.Tensor) -> memoryview:
    flat = t.reshape(-1)
    if flat.numel() == 1 and flat.stride(0) != 1:  # one element viewed from a wider row: bytes need stride 1
        flat = flat.clone(memory_format=torch.contiguous_format)
    return flat.view(torch.uint8).numpy().data


class ChannelLost(ConnectionError):
    """The peer closed the connection, could not be reached, or did not answer in time (``timed_out``)."""

    def __init__(self, message: str, timed_out: bool = False):
        super().__init__(message)
        self.timed_out = timed_out


# An answer's long arrays (rows in bulk) are read with a receive low-water mark (``SO_RCVLOWAT``): the kernel wakes
# the reader once that many bytes have arrived, not at every burst. Behind a slow link rows trickle in, and each
# wake-up takes the core (and the GIL) from the model's step. The mark stays at most a quarter of the receive
# buffer, so that the window never has to shrink to it, and it is dropped after a quiet poll: a wait never
# depends on it. Requests (read by the serving side, without a poll) keep the kernel's default.
LOWAT_FROM = 64 << 10  # arrays shorter than this are read as they come
LOWAT_MAX = 4 << 20


class FrameReader:
    """Reads whole frames from ``sock``; ``deadline``/``check`` bound each wait (None: wait for ever). ``bulk``:
    long arrays are read with a low-water mark (only on a socket with a timeout, which polls)."""

    def __init__(
        self,
        sock: socket.socket,
        deadline: float | None = None,
        check: Callable[[], None] | None = None,
        bulk: bool = False,
    ):
        self.sock, self.deadline, self.check = sock, deadline, check
        self.bulk = bulk and hasattr(socket, "SO_RCVLOWAT") and not isinstance(sock, ssl.SSLSocket)  # TLS: records
        self.mark = 1

    def exactly(self, view: memoryview) -> None:
        got = 0
        try:
            while got < len(view):
                if self.bulk:
                    self._wake_at(len(view) - got)
                try:
                    n = self.sock.recv_into(view[got:])
                except TimeoutError:
                    if self.bulk:  # nothing reached the mark for a while: read whatever comes, as usual
                        self.bulk = False
                        self._wake_at(0)
                    self._waited()
                    continue
                except OSError as exc:  # reset, or closed under us
                    raise ChannelLost(f"the connection failed ({exc})") from None
                if n == 0:
                    raise ChannelLost("the connection was closed")
                got += n
        finally:
            self._wake_at(0)

    def _wake_at(self, remaining: int) -> None:
        """Set the low-water mark for ``remaining`` more bytes of an array (0: back to the default, 1)."""
        try:
            mark = 1
            if remaining >= LOWAT_FROM:
                room = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) // 4
                mark = max(1, min(remaining, room, LOWAT_MAX))
            if mark != self.mark:
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, mark)
                self.mark = mark
        except OSError:  # closed under us: the read says so
            return

    def _waited(self) -> None:
        if self.check is not None:
            self.check()
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise ChannelLost("no answer in time", timed_out=True)

    def frame(self, within: float | None = None) -> tuple[dict, list[torch.Tensor]]:
        """The next frame. ``within``: wait however long for its first byte, then a silence of that many seconds
        before its end drops it (the serving side: a caller's next request may be long in coming, but not the
        rest of one begun). The socket keeps that bound for the answer sent back."""
        raw = bytearray(LENGTH.size)
        if within is None:
            self.exactly(memoryview(raw))
        else:
            self.sock.settimeout(None)
            self.deadline = None
            self.exactly(memoryview(raw)[:1])
            self.sock.settimeout(within)
            self.deadline = time.monotonic() + within
            self.exactly(memoryview(raw)[1:])
        (size,) = LENGTH.unpack(raw)
        if size > MAX_HEADER:
            raise ChannelLost(f"a frame header of {size} bytes: not a graphshard channel")
        head = bytearray(size)
        self.exactly(memoryview(head))
        header = json.loads(head)
        arrays = []
        for dtype, shape in header.get("a", []):
            if dtype not in DTYPES:
                raise ChannelLost(f"a frame names the unknown dtype {dtype!r}")
            if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
                raise ChannelLost(f"a frame names the impossible shape {shape!r}")
            t = torch.empty(shape, dtype=DTYPES[dtype])
            if t.numel():
                self.exactly(bytes_of(t))
            arrays.append(t)
        return header, arrays
