"""How a message of the channels (:mod:`.channel`) is laid out: a 4-byte length, a JSON header, then the raw
bytes of its arrays in order. The header names the handler (``h``) or carries the value (``v``) or an error line
(``e``), and lists each array's dtype and shape (``a``), so the reader allocates every array before reading into
it. Nothing is pickled."""

from __future__ import annotations

import json
import struct
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
