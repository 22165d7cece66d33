"""The lines of a CSV chunk at fault, for error paths only: the first line that is no data row (found a
block at a time, without parsing every line in Python) and what is wrong with it, said as ``FILE, line N:
problem (metadata key)``."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import numpy as np

BLOCK = 1 << 24  # bytes of a CSV chunk screened at a time
_MAX_CHECKED = 10_000  # candidate lines parsed in Python at most, per file
_WORDS = {"nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity", "true", "false"}  # values, not names
_HEADER_FIELD = re.compile(r"""^["']?[A-Za-z_][A-Za-z0-9_.\-]*["']?$""")
_INT64 = (-(1 << 63), (1 << 63) - 1)
# the numbers pyarrow reads (decimal: pyarrow's 0x1F is refused, see _read_csv)
_INT_TEXT = re.compile(r"-?[0-9]+")
_FLOAT_TEXT = re.compile(r"[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?|[-+]?(nan|inf|infinity)", re.IGNORECASE)


def looks_like_header(fields: list[str], ncols: int | None) -> bool:
    """Whether the fields of a first line are column names: each a name (not a number, nor nan/inf/true)."""
    return (
        (ncols is None or len(fields) == ncols)
        and bool(fields)
        and all(_HEADER_FIELD.match(f.strip()) and f.strip().strip("'\"").lower() not in _WORDS for f in fields)
    )


def _shown(text: str) -> str:
    return repr(text if len(text) <= 80 else text[:77] + "...")


def _header_problem(line: str) -> str:
    return f"looks like a header ({_shown(line)}): a CSV chunk holds data rows only, no header line; remove it"


def header_message(path: Path, line: str, where: str) -> str:
    return line_message(path, 1, _header_problem(line), where)


def line_message(path: Path, lineno: int, problem: str, where: str) -> str:
    """``FILE, line N: problem (metadata key)`` (``FILE, line 1 looks like a header ...`` for a header)."""
    return f"{path}, line {lineno}{' ' if problem.startswith('looks like a header') else ': '}{problem} ({where})"


def _line_problem(line: str, lineno: int, delimiter: str, ncols: int | None, *, integers: bool) -> str | None:
    """What is wrong with one line of a CSV chunk (None: it is a data row)."""
    if lineno == 1:
        line = line.removeprefix("\ufeff")  # pyarrow skips a byte order mark
    if not line.strip():
        return "blank line"
    if "\r" in line:
        return "a carriage return (\\r) inside the line; lines end with \\n or \\r\\n"
    fields = line.split(delimiter)
    if lineno == 1 and looks_like_header(fields, ncols):
        return _header_problem(line)
    if ncols is not None and len(fields) != ncols:
        return f"expected {ncols} columns, got {len(fields)}: {_shown(line)}"
    for j, value in enumerate(fields):
        text = value[1:-1] if len(value) > 1 and value[0] == value[-1] == '"' else value  # pyarrow's quoting
        if not (_INT_TEXT if integers else _FLOAT_TEXT).fullmatch(text):
            if not integers and text.lower() in ("true", "false"):
                continue
            return f"{_shown(value)} is not {'an integer' if integers else 'a number'}"
        number = int(text) if integers else 0
        if integers and not _INT64[0] <= number <= _INT64[1]:
            role = ("source ", "destination ")[j] if ncols == 2 else ""
            return f"{role}ID {text} does not fit a 64-bit signed integer"
    return None


def first_bad_line(path: Path, delimiter: str, ncols: int | None, integers: bool) -> tuple[int, str] | None:
    """``(line number (1-based), what is wrong)`` of the first line of a CSV chunk that is not a row of
    ``ncols`` numbers (integers when ``integers``; ``ncols`` None: as many as line 1 has), or None.

    For error paths, and bounded: the file is screened with NumPy, a block at a time, for lines holding a
    byte no number holds, a misplaced sign, a too long integer, a wrong number of delimiters or nothing;
    only those candidate lines (at most :data:`_MAX_CHECKED`) are parsed in Python."""
    if len(delimiter.encode()) != 1:
        return None
    allowed = np.zeros(256, dtype=bool)
    allowed[list(b"0123456789-\r\n")] = True
    allowed[ord(delimiter)] = True
    if not integers:
        allowed[list(b"+.eE")] = True
    digit = np.zeros(256, dtype=bool)
    digit[list(b"0123456789")] = True
    delim, checked, lineno, expect = ord(delimiter), 0, 0, None if ncols is None else ncols - 1
    with open(path, "rb") as f:
        rest = b""
        while True:
            block = f.read(BLOCK)
            data = rest + block
            if not data:
                return None
            cut = data.rfind(b"\n") + 1 if block else len(data)
            if cut == 0:
                rest = data
                continue
            data, rest = data[:cut], data[cut:]
            arr = np.frombuffer(data, dtype=np.uint8)
            ends = np.flatnonzero(arr == 10)
            if not ends.size or ends[-1] != arr.size - 1:
                ends = np.append(ends, arr.size)  # the last line of a file without a final newline
            starts = np.concatenate(([0], ends[:-1] + 1))
            line_of = functools.partial(np.searchsorted, ends)  # the line of each byte position
            delims = np.concatenate(([0], np.cumsum(arr == delim, dtype=np.int64)))
            per_line = delims[ends] - delims[starts]  # delimiters on each line
            if expect is None:
                expect = int(per_line[0])
            length = ends - starts
            blank = (length == 0) | ((length == 1) & (arr[np.minimum(starts, arr.size - 1)] == 13))
            # an empty field: a delimiter at the start or end of a line, or beside another
            delims_at = np.flatnonzero(arr == delim)
            near = np.concatenate((arr[np.maximum(delims_at - 1, 0)], arr[np.minimum(delims_at + 1, arr.size - 1)]))
            empty = np.tile(delims_at, 2)[
                (near == delim)
                | (near == 10)
                | (near == 13)
                | np.concatenate((delims_at == 0, delims_at == arr.size - 1))
            ]
            signs = np.flatnonzero((arr == 43) | (arr == 45))
            before = np.where(signs > 0, arr[np.maximum(signs - 1, 0)], 10)
            if not integers:  # an exponent's sign follows its e
                keep = (before != 101) & (before != 69)
                signs, before = signs[keep], before[keep]
            after = arr[np.minimum(signs + 1, arr.size - 1)]
            bad_sign = signs[((before != 10) & (before != delim)) | (~digit[after] & (after != 46))]
            long_run = np.zeros(0, dtype=np.int64)
            if integers:  # 19 digits or more in a row: perhaps beyond int64
                breaks = np.flatnonzero(~digit[arr])
                runs = np.diff(np.concatenate(([-1], breaks, [arr.size])))
                long_run = np.concatenate(([-1], breaks))[runs > 19] + 1
            candidates = np.unique(
                np.concatenate(
                    (
                        [0] if lineno == 0 else [],
                        line_of(np.flatnonzero(~allowed[arr])),
                        np.flatnonzero(per_line != expect),
                        np.flatnonzero(blank),
                        line_of(bad_sign),
                        line_of(long_run),
                        line_of(empty),
                        line_of(np.flatnonzero((arr[:-1] == 13) & (arr[1:] != 10))),  # a CR ending no line
                    )
                )
            ).astype(np.int64)
            for i in candidates[: _MAX_CHECKED - checked]:
                line = data[starts[i] : ends[i]].decode("utf-8", "replace").rstrip("\r")
                problem = _line_problem(line, lineno + int(i) + 1, delimiter, ncols, integers=integers)
                if problem is not None:
                    return lineno + int(i) + 1, problem
                if lineno == 0 and i == 0 and ncols is None:
                    ncols = len(line.split(delimiter))
            checked += min(candidates.size, _MAX_CHECKED - checked)
            if checked >= _MAX_CHECKED:
                return None
            lineno += ends.size
            if not block and not rest:
                return None
