"""safetensors files: a streaming writer that hashes as it writes, and a memory-mapped reader."""

from __future__ import annotations

import hashlib
import json
import os
import struct
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import FormatError

if TYPE_CHECKING:  # torch is imported by safetensors when a file is opened, not by this module
    import torch

# bfloat16, which NumPy lacks: its raw bits as a 2-byte record (distinct from uint16, so the files say "BF16")
BFLOAT16 = np.dtype([("bfloat16", "<u2")])
_DTYPES = {
    BFLOAT16: "BF16",
    np.dtype(np.float64): "F64",
    np.dtype(np.float32): "F32",
    np.dtype(np.float16): "F16",
    np.dtype(np.int64): "I64",
    np.dtype(np.int32): "I32",
    np.dtype(np.int16): "I16",
    np.dtype(np.int8): "I8",
    np.dtype(np.uint64): "U64",
    np.dtype(np.uint32): "U32",
    np.dtype(np.uint16): "U16",
    np.dtype(np.uint8): "U8",
    np.dtype(np.bool_): "BOOL",
}
_CHUNK = 1 << 24
# The data section starts this many bytes into the file, and tensors of a whole number of these bytes come first, so
# they start on a cache line in a memory map (pages are aligned) and so do their rows when a row's bytes are a whole
# number of lines. Rows of 32 float32 read at random from a 64 MB table: 128-byte rows on line boundaries span 2
# lines, not 3 (45,000 rows gathered into a batch with caches cold, 200 alternated rounds on one core: 1.22-1.25 ms
# aligned against 1.55-1.61 ms 40 bytes off, where the 8-byte alignment of earlier files left them).
ALIGN = 64


@dataclass(frozen=True)
class Lazy:
    """A tensor produced while the writer reaches it, in row ranges: ``make(lo, hi)`` returns rows
    ``[lo, hi)``. Derived tensors are therefore never whole in memory."""

    dtype: np.dtype
    shape: tuple[int, ...]
    make: Callable[[int, int], np.ndarray]

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize


def dtype_code(dtype: np.dtype) -> str | None:
    """The safetensors code of a NumPy dtype (``"F32"``, ``"I64"``, ...), None if it cannot be stored."""
    return _DTYPES.get(np.dtype(dtype))


def header_schema(header: dict) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Tensor name -> (dtype code, row shape) from a file's header (see :func:`read_header`)."""
    return {
        k: (v["dtype"], tuple(v["shape"][1:])) for k, v in header.items() if k != "__metadata__" and isinstance(v, dict)
    }


def write_tensors(path: Path, tensors: dict[str, np.ndarray | Lazy], metadata: dict[str, str] | None = None) -> str:
    """Write ``tensors`` to ``path`` in safetensors layout and return the file's sha256 (hex).

    Entries whose size is a whole number of :data:`ALIGN` bytes come first, then the others; each group by element
    size (largest first), then name. So every tensor is aligned to its element size, and the first group to
    :data:`ALIGN` bytes of the file (the header is padded with spaces to end there). The output depends only on the
    input (deterministic bytes). :class:`Lazy` entries are computed
    one at a time while writing. ``metadata`` (strings) goes into the header's ``__metadata__``.
    """
    specs = {k: v if isinstance(v, Lazy) else np.ascontiguousarray(v) for k, v in tensors.items()}
    for k, v in specs.items():
        if np.dtype(v.dtype) not in _DTYPES:
            raise FormatError(f"{path}: tensor {k!r} has dtype {v.dtype}, which safetensors cannot store")
    names = sorted(specs, key=lambda k: (specs[k].nbytes % ALIGN != 0, -np.dtype(specs[k].dtype).itemsize, k))
    header: dict = {"__metadata__": dict(sorted(metadata.items()))} if metadata else {}
    offset = 0
    for k in names:
        a = specs[k]
        header[k] = {
            "dtype": _DTYPES[np.dtype(a.dtype)],
            "shape": list(a.shape),
            "data_offsets": [offset, offset + a.nbytes],
        }
        offset += a.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(len(text) + 8) % ALIGN)
    digest = hashlib.sha256()
    with open(path, "wb") as f, ThreadPoolExecutor(1) as hasher:
        for piece in (struct.pack("<Q", len(text)), text):
            f.write(piece)
            digest.update(piece)
        for k in names:
            for block in _blocks(k, specs[k], path):
                buf = block.reshape(-1).view(np.uint8).data  # its memoryview
                for lo in range(0, len(buf), _CHUNK):
                    hashed = hasher.submit(digest.update, buf[lo : lo + _CHUNK])  # hashlib releases the GIL
                    f.write(buf[lo : lo + _CHUNK])
                    hashed.result()
                del buf
    return digest.hexdigest()


def _blocks(name: str, spec: np.ndarray | Lazy, path: Path) -> Iterator[np.ndarray]:
    """The tensor's bytes in order: the array itself, or a Lazy tensor produced in row ranges."""
    if not isinstance(spec, Lazy):
        yield spec
        return
    rows = spec.shape[0] if spec.shape else 1
    row_bytes = max(1, spec.nbytes // max(rows, 1))
    step = max(1, _CHUNK // row_bytes)
    for lo in range(0, rows, step):
        hi = min(rows, lo + step)
        block = np.ascontiguousarray(spec.make(lo, hi))
        if block.dtype != np.dtype(spec.dtype) or block.shape != (hi - lo, *spec.shape[1:]):
            raise FormatError(
                f"{path}: tensor {name!r} rows [{lo}, {hi}) came out as {block.dtype}{block.shape}, "
                f"declared {spec.dtype}{spec.shape}"
            )
        yield block


def read_tensors(path: Path, expect: dict[str, str] | None = None) -> dict[str, torch.Tensor]:
    """Open ``path`` and return its tensors memory-mapped (copy-on-write; nothing is read up front).

    ``expect``: header metadata the file must carry (e.g. which run and partition wrote it).
    Raises :class:`FormatError` naming the file if it is missing, truncated, malformed or not the
    file ``expect`` describes.
    """
    if not os.path.isfile(path):
        raise FormatError(f"{path}: file is missing")
    header = read_header(path)
    if expect:
        _check_identity(path, header.get("__metadata__") or {}, expect)
    return _open_tensors(path, "safetensors file")


def load_tensor_file(
    path: str | os.PathLike, what: str = "tensor file"
) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """The tensors and the ``__metadata__`` of the safetensors file ``path`` (checkpoints, held-out edges):
    the one reader of every safetensors file graphshard did not write as part of a partition. Never
    unpickles anything: a ``torch.save`` file is refused as such.

    Raises :class:`FormatError` ``"<path>: not a valid <what> (<reason>)"`` for a missing, truncated,
    padded or corrupt file, or one of another format."""
    header = check_tensor_file(path, what)
    return _open_tensors(Path(path), what), dict(header.get("__metadata__") or {})


def check_tensor_file(path: str | os.PathLike, what: str = "tensor file") -> dict:
    """The header of the safetensors file ``path`` after the structural checks of :func:`read_header`
    (cheap: no tensor is read); :class:`FormatError` ``"<path>: not a valid <what> (<reason>)"``."""
    path = Path(path)
    if not path.is_file():
        raise FormatError(f"{path}: not a valid {what} (" + ("a directory" if path.is_dir() else "no such file") + ")")
    try:
        return _parse_header(path)
    except _Invalid as exc:
        raise FormatError(f"{path}: not a valid {what} ({exc})") from None
    except OSError as exc:
        raise FormatError(f"{path}: not a valid {what} ({exc.strerror or exc})") from None


def _open_tensors(path: Path, what: str) -> dict[str, torch.Tensor]:
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            return {k: f.get_tensor(k) for k in f.keys()}
    except (SafetensorError, OSError, RuntimeError, ValueError, TypeError) as exc:
        raise FormatError(f"{path}: not a valid {what} ({exc})") from None


def _check_identity(path: Path, found: dict, expect: dict[str, str]) -> None:
    if not found:
        raise FormatError(
            f"{path}: records no identity (written by another tool or an older graphshard), but "
            "its config has a run_fingerprint; re-partition, or restore the file that run wrote"
        )
    wrong = [k for k in expect if found.get(k) != expect[k]]
    if wrong:
        said = ", ".join(f"{k}={found.get(k)!r}" for k in wrong)
        want = ", ".join(f"{k}={expect[k]!r}" for k in wrong)
        raise FormatError(
            f"{path}: this file belongs to another partition or run ({said or 'no identity recorded'}); "
            f"the config expects {want}"
        )


class _Invalid(Exception):
    """Why a file is not a well-formed safetensors file (the message, without the path)."""


# how the files a safetensors file is most often confused with begin: torch.save's zip archive and
# the bare pickle of older torch.save (protocol 2 to 5); neither is ever unpickled
_FOREIGN = (
    (b"PK\x03\x04", "a zip archive, as torch.save writes"),
    *((b"\x80" + bytes([v]), f"a Python pickle (protocol {v}), as older torch.save writes") for v in (2, 3, 4, 5)),
)


def read_header(path: Path) -> dict:
    """The safetensors header of ``path`` (tensor specs and ``__metadata__``), after a cheap structural
    check that it parses and that the data section matches the file size."""
    try:
        return _parse_header(path)
    except _Invalid as exc:
        raise FormatError(f"{path}: {exc}") from None


def _parse_header(path: Path) -> dict:
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        try:
            if len(head) < 8:
                raise _Invalid("truncated (no safetensors header)")
            (n,) = struct.unpack("<Q", head)
            if n > size - 8:
                raise _Invalid(f"truncated (header of {n} bytes, file of {size} bytes)")
            try:
                header = json.loads(f.read(n))
            except ValueError:
                raise _Invalid("corrupt safetensors header (not JSON)") from None
            except RecursionError:
                raise _Invalid("corrupt safetensors header (JSON nested too deeply)") from None
        except _Invalid:
            for magic, what in _FOREIGN:  # only to explain a file that does not parse: a header may begin so
                if head.startswith(magic):
                    raise _Invalid(f"{what}, not a safetensors file; graphshard never unpickles files") from None
            raise
    if not isinstance(header, dict):
        raise _Invalid("corrupt safetensors header (not an object)")
    meta = header.get("__metadata__", {})
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise _Invalid("corrupt safetensors header ('__metadata__' must map strings to strings)")
    for k, v in header.items():
        if k != "__metadata__" and not _valid_entry(v):
            raise _Invalid(f"corrupt safetensors header (entry {k!r} needs a dtype, a shape and data_offsets)")
    end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0)
    if 8 + n + end != size:
        raise _Invalid(f"truncated or padded: header describes {8 + n + end} bytes, file has {size}")
    return header


def _valid_entry(v: object) -> bool:
    def ints(x: object, n: int | None = None) -> bool:
        return (
            isinstance(x, list)
            and (n is None or len(x) == n)
            and all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in x)
        )

    return (
        isinstance(v, dict)
        and isinstance(v.get("dtype"), str)
        and ints(v.get("shape"))
        and ints(v.get("data_offsets"), 2)
    )


def sha256_file(path: Path) -> str:
    """sha256 (hex) of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()
