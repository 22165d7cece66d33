"""Shared by the fuzz tests of readers of user files (issue 25): the outcome check, the settings and the
strategies of junk.

The property every reader must keep, whatever bytes it is handed: a correct result, or a *named* error --
a :class:`~graphshard.errors.GraphshardError` (or an ``OSError``) whose message names the file -- and never
another exception (a raw ``KeyError``, ``ValueError``, ``TypeError``, ``RecursionError``, json, NumPy or
YAML error ...), never a hang, never a write."""

from __future__ import annotations

import contextlib
import math
import os
import traceback
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from graphshard.errors import GraphshardError

# Few examples each (the set runs in well under a minute on a shared 2-core machine). The deadline catches a
# reader that is slow on some input (quadratic, or building a huge message); pytest's timeout the true hangs.
# Fixtures import what the readers import lazily (pyarrow), so that no example pays for it.
FUZZ = settings(
    max_examples=60,
    deadline=timedelta(seconds=5),
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)


def assert_named_error(
    call: Callable[[], Any], path: str | os.PathLike, *, mentions: tuple[str, ...] = ()
) -> tuple[Any, BaseException | None]:
    """Run ``call()``: return ``(result, None)``, or ``(None, error)`` when it raised a named error whose
    message names ``path`` (a file, or a directory holding the file at fault) and every string of
    ``mentions``. Any other exception fails the test, with its traceback."""
    try:
        return call(), None
    except (GraphshardError, OSError) as exc:
        text = str(exc)
        names = {str(path), str(Path(path).resolve()), os.fspath(path)}
        if not isinstance(exc, GraphshardError):
            text += f" {getattr(exc, 'filename', '')}"
        assert any(n in text for n in names), f"{type(exc).__name__} does not name {path}: {text}"
        for word in mentions:
            assert word in text, f"{type(exc).__name__} does not mention {word!r}: {text}"
        return None, exc
    except Exception as exc:  # the point: anything else is a bug of the reader
        raise AssertionError(
            f"raw {type(exc).__name__} instead of a named error: {str(exc)[:500]}\n"
            + "".join(traceback.format_exception(exc))[-3000:]
        ) from None


def _listing(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))}


@contextlib.contextmanager
def no_writes(root: str | os.PathLike) -> Iterator[None]:
    """Fail if anything below ``root`` (the input, and where outputs are not meant to go) is created,
    removed or modified while the block runs."""
    root = Path(root)
    before = _listing(root)
    yield
    after = _listing(root)
    assert after == before, f"a reader wrote below {root}: {sorted(set(after.items()) ^ set(before.items()))[:5]}"


class PickleTrap:
    """Unpickling this creates the directory ``marker``: a reader that unpickles is caught in the act."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.mkdir, (str(self.marker),)


# -- strategies --------------------------------------------------------------------------------------
HUGE = st.sampled_from([2**63, -(2**63) - 1, 2**64, 10**30, -(10**30), 10**400])
FLOATS = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -0.0])
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-5, 300)
    | st.integers()
    | HUGE
    | FLOATS
    | st.text(max_size=12)
    | st.sampled_from(["", "0", "1", "-1", "true", "NaN", "1e5", "10,10", "a/b", "..", "\0"])
)


def json_values(max_leaves: int = 12) -> st.SearchStrategy:
    """Any JSON-able value: scalars (huge integers, NaN and infinities included), lists and objects."""
    return st.recursive(
        SCALARS,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
        max_leaves=max_leaves,
    )


def nested(depth: int, open_: str = "[", close: str = "]", core: str = "1") -> str:
    """Text nesting ``core`` ``depth`` levels deep (parsers that recurse run out of stack on it)."""
    return open_ * depth + core + close * depth


def damaged(data: bytes) -> st.SearchStrategy[bytes]:
    """``data`` truncated, with bytes flipped, inserted or deleted, or replaced by random bytes."""
    n = len(data)
    truncated = st.integers(0, max(n - 1, 0)).map(lambda k: data[:k])

    def flip(args: tuple[int, int]) -> bytes:
        i, b = args
        return data[:i] + bytes([b]) + data[i + 1 :] if n else data

    flipped = st.tuples(st.integers(0, max(n - 1, 0)), st.integers(0, 255)).map(flip)
    inserted = st.tuples(st.integers(0, n), st.binary(min_size=1, max_size=8)).map(
        lambda a: data[: a[0]] + a[1] + data[a[0] :]
    )
    deleted = st.tuples(st.integers(0, n), st.integers(1, 16)).map(lambda a: data[: a[0]] + data[a[0] + a[1] :])
    return truncated | flipped | inserted | deleted | st.binary(max_size=64)


def near_misses(word: str) -> st.SearchStrategy[str]:
    """``word`` with one character dropped, doubled, swapped with the next or replaced, or its case or
    separators changed (the typos a user makes in a key)."""
    n = len(word)

    def edit(args: tuple[int, int, str]) -> str:
        i, how, c = args
        i %= max(n, 1)
        if how == 0:
            return word[:i] + word[i + 1 :]
        if how == 1:
            return word[:i] + word[i] + word[i:] if n else c
        if how == 2 and i + 1 < n:
            return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
        if how == 3:
            return word[:i] + c + word[i + 1 :]
        if how == 4:
            return word.upper()
        return word.replace("_", "-").replace("-", " ") if how == 5 else word + "s"

    return st.tuples(st.integers(0, 64), st.integers(0, 6), st.characters(codec="utf-8")).map(edit)
