"""Fingerprints of input files, so that work derived from them (partitions in a work directory, a
dispatch resumed after an interruption) is never reused once an input has changed.

A file's fingerprint covers its name, size, modification time and a sample of its content: the
first and last 64 KiB and 16 blocks of 4 KiB spread evenly between them. That reads at most ~200 KiB
per file, so it stays cheap on inputs of hundreds of gigabytes, and it notices a changed file even
when its size is kept and its modification time is restored (unless the change falls only between
sampled blocks of a file larger than ~200 KiB whose mtime was also reset: the price of not reading
the whole input again).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

EDGE_BYTES = 64 << 10
BLOCK_BYTES = 4 << 10
BLOCKS = 16


def file_fingerprint(path: Path, digest: hashlib._Hash) -> None:
    """Feed ``path``'s name, size, mtime and sampled content into ``digest``."""
    st = os.stat(path)
    digest.update(f"{path.name}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    with open(path, "rb") as f:
        if st.st_size <= 2 * EDGE_BYTES + BLOCKS * BLOCK_BYTES:
            digest.update(f.read())
            return
        digest.update(f.read(EDGE_BYTES))
        span = st.st_size - 2 * EDGE_BYTES - BLOCK_BYTES
        for i in range(BLOCKS):
            f.seek(EDGE_BYTES + span * i // (BLOCKS - 1))
            digest.update(f.read(BLOCK_BYTES))
        f.seek(st.st_size - EDGE_BYTES)
        digest.update(f.read(EDGE_BYTES))


def files_fingerprint(paths: Iterable[Path], extra: str = "") -> str:
    """sha256 (hex) over the fingerprints of ``paths`` (in the order given) and ``extra``."""
    digest = hashlib.sha256(extra.encode())
    for p in paths:
        file_fingerprint(Path(p), digest)
    return digest.hexdigest()


def tree_fingerprint(root: Path, extra: str = "") -> str:
    """Fingerprint of every regular file below ``root`` (sorted by relative path; hidden entries skipped)."""
    files = sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
    )
    digest = hashlib.sha256(extra.encode())
    for p in files:
        digest.update(str(p.relative_to(root)).encode() + b"\0")
        file_fingerprint(p, digest)
    return digest.hexdigest()
