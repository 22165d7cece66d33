"""Names that become parts of paths (node/edge types, features, graphs): one validator for all writers
and readers, and a join that can never leave its root directory."""

from __future__ import annotations

import os
from pathlib import Path

from .errors import InputError

# Longest file name component most file systems accept (ext4, xfs, btrfs, tmpfs: 255 bytes).
NAME_MAX = 255
_FORBIDDEN = ("/", "\\", "\0")
# bytes kept free for what writers add around a type name (``<type>_train_idx.npy``, ``.parquet``)
SUFFIX_ROOM = 16


def check_path_name(name: object, where: str, error: type[Exception] = InputError, extra: int = 0) -> str:
    """Return ``name`` if it can be one path component, else raise ``error`` naming it and ``where``.

    Refused: non-strings, the empty name, ``.`` and ``..``, names holding ``/``, ``\\`` or NUL (which also
    rules out absolute paths), and names whose file name (plus ``extra`` bytes of prefix/suffix the
    writer adds) would exceed the file system's limit of :data:`NAME_MAX` bytes.
    """
    if not isinstance(name, str):
        raise error(f"{where}: name {name!r} must be a string")
    if name in ("", ".", ".."):
        raise error(f"{where}: name {name!r} cannot be used as a file or directory name")
    bad = [c for c in _FORBIDDEN if c in name]
    if bad:
        raise error(
            f"{where}: name {name!r} contains {bad[0]!r}; names become file names and may not hold "
            "path separators or NUL"
        )
    if len(name.encode("utf-8", "surrogatepass")) + extra > NAME_MAX:
        raise error(
            f"{where}: name {name[:40]!r}... is {len(name.encode('utf-8', 'surrogatepass'))} bytes long; "
            f"file names are limited to {NAME_MAX - extra} bytes here"
        )
    return name


def check_etype_names(etype: tuple[str, str, str], where: str, error: type[Exception] = InputError) -> None:
    """Check each of ``(src, rel, dst)``; the three joined with ``__`` (plus a file suffix, as the chunked
    and dataset layouts name files) must also fit one file name."""
    for part in etype:
        check_path_name(part, f"{where} (edge type {':'.join(map(str, etype))!r})", error)
    check_path_name("__".join(etype), f"{where} (edge type {':'.join(etype)!r})", error, extra=SUFFIX_ROOM)


def inside(root: str | os.PathLike, *parts: str) -> Path:
    """``root / parts...``, refusing (InputError) any result that resolves outside ``root``."""
    base = Path(root).resolve()
    target = base.joinpath(*parts).resolve()
    if target != base and base not in target.parents:
        raise InputError(f"refusing to write {target}: it lies outside the output directory {base}")
    return target
