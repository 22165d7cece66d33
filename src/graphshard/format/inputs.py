"""Input paths users give (``--dataset`` and the like): a directory that is not there is named as such,
with the names beside it that come close (a typo), instead of a complaint about a file inside it."""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from ..errors import InputError


def require_dir(path: str | os.PathLike) -> Path:
    """``path`` as a :class:`Path` if it is a directory; else :class:`InputError` ``"PATH: no such directory"``
    (with ``did you mean`` and close sibling names, or the first missing parent), or ``"PATH: not a
    directory"``. Paths are shown as given (relative stays relative)."""
    p = Path(path)
    if p.is_dir():
        return p
    if os.path.lexists(p):
        raise InputError(
            f"{p}: not a directory" + (" (a broken symbolic link)" if p.is_symlink() and not p.exists() else "")
        )
    missing = p  # the first component that is not there: p itself, or a parent of it
    while not os.path.lexists(missing.parent) and missing.parent != missing:
        missing = missing.parent
    hints = [] if missing == p else [f"{missing} does not exist either"]
    close = _close_names(missing)
    if close:
        hints.append(f"did you mean {' or '.join(str(c) for c in close)}?")
    raise InputError(f"{p}: no such directory" + (f" ({'; '.join(hints)})" if hints else ""))


def _close_names(missing: Path) -> list[Path]:
    """Directories beside ``missing`` whose names are close to its name (at most three, closest first)."""
    try:
        beside = [e.name for e in os.scandir(missing.parent if str(missing.parent) else ".") if e.is_dir()]
    except OSError:
        return []
    return [missing.parent / n for n in difflib.get_close_matches(missing.name, beside, n=3, cutoff=0.6)]
