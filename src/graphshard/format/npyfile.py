"""Reading the NumPy ``.npy`` files users give (assignments, balance classes) with errors that name them."""

from __future__ import annotations

import contextlib
import os
import tokenize
import warnings
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..errors import InputError


@contextlib.contextmanager
def quiet_header_parse() -> Iterator[None]:
    """Silence what NumPy's parse of a ``.npy`` header warns of and nothing else: a header written by Python 2
    (``3L``) reads the same, so there is nothing to tell; a damaged header with a backslash makes Python warn of
    an invalid escape, and the error that follows says all."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Reading `\.npy` or `\.npz` file required additional header")
        warnings.filterwarnings("ignore", message=r"invalid escape sequence", category=DeprecationWarning)
        warnings.filterwarnings("ignore", message=r"invalid escape sequence", category=SyntaxWarning)
        yield


def read_npy(path: str | os.PathLike, error: type[Exception] = InputError, mmap: bool = False) -> np.ndarray:
    """The array in the ``.npy`` file ``path`` (memory-mapped with ``mmap``), never unpickled. Raises
    ``error`` naming the file if it is missing, truncated, not a ``.npy`` file (a ``.npz`` archive, pickled
    objects, random bytes) or declares more data than it holds: the header is checked against the file's
    size before anything is allocated, so a corrupt shape is an error, not a huge allocation."""
    path = Path(path)
    if not path.is_file():
        raise error(f"{path}: missing (or not a file)")
    try:
        with quiet_header_parse():
            arr = np.load(path, allow_pickle=False, mmap_mode="r")  # maps: a shape larger than the file fails here
    except OSError as exc:
        raise error(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except (
        ValueError,
        EOFError,
        OverflowError,
        MemoryError,
        TypeError,
        SyntaxError,
        tokenize.TokenError,
        zipfile.BadZipFile,
    ) as exc:
        # what np.load raises on a damaged header (an unclosed bracket: tokenize.TokenError) or data (a file
        # beginning as a zip archive does, but damaged: zipfile.BadZipFile)
        reason = exc.args[0] if isinstance(exc, tokenize.TokenError) else exc
        raise error(f"{path}: not a .npy file of a plain array ({reason})") from None
    if not isinstance(arr, np.ndarray):  # np.load opens a .npz (zip) archive as a mapping of arrays
        getattr(arr, "close", lambda: None)()
        raise error(f"{path}: a .npz archive, not a .npy array")
    return arr if mmap else np.array(arr)
