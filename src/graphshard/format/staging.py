"""Writing outputs so that a failure (a full disk) leaves nothing behind and nothing that looks complete.

:func:`staged_dir` builds a whole output directory (chunked graph, dataset) in a hidden staging directory
*inside* the target and then publishes it entry by entry, replacing only the entries it writes and
those graphshard's previous output there listed in its marker: files of the user's in the same
directory survive, and nothing is ever created or removed outside the target. :func:`atomic_file`
writes one file through a temporary file. Both turn an ``OSError`` into a :class:`WriteError` naming
the file at the place it was meant to appear.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import GraphshardError, InputError
from ..names import check_path_name
from .outputs import KINDS, MARKER, mark_output_dir, marker_entries, write_failure

STAGING = ".graphshard-staging-"


# NumPy's ndarray.tofile (np.save, np.savetxt) reports a short write -- what a full disk causes -- as a
# bare ``OSError("<n> requested and <m> written")``, without errno or file name
_SHORT_WRITE = re.compile(r"^(\d+) requested and (\d+) written$")
_ERRNO_IN_TEXT = re.compile(r"\[errno (\d+)\]", re.IGNORECASE)
_FULL = (errno.ENOSPC, errno.EDQUOT)
_NEARLY_FULL = 64 << 20  # bytes: a short write with less room left than this means the device is full


@contextmanager
def naming(path: Path) -> Iterator[None]:
    """Attach ``path`` to an ``OSError`` raised without a file name (``write()`` on a full disk has none),
    and say what a full disk looks like in other tools' words: NumPy's short write, pyarrow's "Error
    writing bytes to file" become ``ENOSPC`` ("No space left on device") naming ``path``."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None:
            short = _SHORT_WRITE.match(str(exc)) if exc.errno is None else None
            if short:
                raise short_write(path, int(short[1]), int(short[2])) from exc
            found = _ERRNO_IN_TEXT.search(str(exc))
            code = exc.errno if exc.errno is not None else int(found[1]) if found else None
            if code in _FULL and exc.strerror != os.strerror(code):  # pyarrow: errno 28, its own words
                raise OSError(code, os.strerror(code), str(path)) from exc
            if exc.errno is not None and exc.strerror:
                exc.filename = str(path)
        raise


def free_bytes(path: Path) -> int | None:
    """Bytes available to this user on the file system holding ``path`` (its nearest existing ancestor)."""
    for where in (path, *path.parents):
        try:
            st = os.statvfs(where)
        except OSError:
            continue
        return st.f_bavail * st.f_frsize
    return None


def short_write(path: Path, requested: int, written: int) -> OSError:
    """The ``OSError`` (naming ``path``) a write of which only ``written`` of ``requested`` items reached
    ``path`` stands for: ``ENOSPC`` when the file system is (nearly) full, else a short write."""
    free = free_bytes(Path(path))
    if free is not None and free < _NEARLY_FULL:
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
    return OSError(
        errno.EIO,
        f"short write ({written} of {requested} items written; {free} bytes free: a quota or file size limit?)",
        str(path),
    )


@contextmanager
def atomic_file(target: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``target``; on success it replaces ``target``, on failure it is removed
    (an ``OSError`` becomes a :class:`WriteError` naming ``target``)."""
    tmp = target.with_name(f".{target.name[:200]}.tmp-{os.getpid()}")  # fits whenever ``target`` does
    try:
        with naming(target):
            yield tmp
            os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, GraphshardError):
            raise
        raise write_failure(exc, target, tmp.parent, target.parent) from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def missing_ancestors(path: Path) -> list[Path]:
    """``path`` and its parents that do not exist yet, deepest first."""
    out = []
    while not os.path.lexists(path) and path != path.parent:
        out.append(path)
        path = path.parent
    return out


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_stale_staging(final: Path) -> None:
    """Remove staging directories left in ``final`` by runs that were killed (their process is gone)."""
    for stale in final.glob(STAGING + "*"):
        pid = stale.name[len(STAGING) :].split("-", 1)[0]
        if stale.is_dir() and not stale.is_symlink() and pid.isdigit() and not _pid_alive(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)


@contextmanager
def staged_dir(final: Path, kind: str) -> Iterator[Path]:
    """Build the ``kind`` output for ``final`` in a staging directory (yielded) and publish it on success.

    ``final`` must have passed :func:`.outputs.check_output_dir`. Publishing removes the file that marks
    the output complete (``KINDS[kind]``, e.g. ``metadata.json``) first and moves it in last, so an
    interrupted publish never looks finished. On failure the staging directory is removed, and so are
    ``final`` and its parents if this call created them; an ``OSError`` becomes a :class:`WriteError`.
    """
    created = missing_ancestors(final)
    final.mkdir(parents=True, exist_ok=True)
    _remove_stale_staging(final)
    new_dir = not any(p for p in final.iterdir() if not p.name.startswith(STAGING))
    if new_dir:
        mark_output_dir(final, kind)  # a killed run leaves a directory the next run recognises as its own
    staging = Path(tempfile.mkdtemp(prefix=f"{STAGING}{os.getpid()}-", dir=final))
    try:
        with naming(final):
            yield staging
            _publish(staging, final, kind)
    except BaseException as exc:
        shutil.rmtree(staging, ignore_errors=True)
        if new_dir:
            (final / MARKER).unlink(missing_ok=True)
        _remove_created(created)
        if isinstance(exc, OSError) and not isinstance(exc, GraphshardError):
            raise write_failure(exc, final, staging, final) from exc
        raise


def _publish(staging: Path, final: Path, kind: str) -> None:
    """Move every entry of ``staging`` into ``final``, the completion file last; entries the previous
    output listed but this one does not write are removed; other entries are left alone."""
    done = KINDS[kind]
    new = sorted((p.name for p in staging.iterdir()), key=lambda n: (n == done, n))
    old = [n for n in marker_entries(final, kind) if n not in new and _plain(n)]
    trash = Path(tempfile.mkdtemp(prefix=".replaced-", dir=staging))
    if done and os.path.lexists(final / done):
        os.rename(final / done, trash / done)  # nothing looks complete while entries are swapped
    for name in old:
        if os.path.lexists(final / name):
            os.rename(final / name, trash / name)
    for name in new:
        if os.path.lexists(final / name):
            os.rename(final / name, trash / name)
        os.rename(staging / name, final / name)
    mark_output_dir(final, kind, new)
    shutil.rmtree(staging, ignore_errors=True)


def _plain(name: str) -> bool:
    """Whether ``name`` (read from a marker file) is one plain entry of the directory (never ``..``, ``a/b``)."""
    try:
        check_path_name(name, "marker")
    except InputError:
        return False
    return name != MARKER and not name.startswith(STAGING)


def _remove_created(created: list[Path]) -> None:
    """Remove what :func:`staged_dir` created for a failed run: the target (entirely: it held nothing
    else) and parent directories, if still empty."""
    if created:
        shutil.rmtree(created[0], ignore_errors=True)
        remove_empty_dirs(created[1:])


def remove_empty_dirs(dirs: list[Path]) -> None:
    """``rmdir`` each of ``dirs`` (deepest first) while they are empty; stop at the first that is not."""
    for path in dirs:
        try:
            path.rmdir()
        except OSError:
            break
