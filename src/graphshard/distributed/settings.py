"""The ``GRAPHSHARD_*`` tuning settings a rank reads from its environment: a bad value is an
:class:`~graphshard.errors.InputError` naming the variable and what it takes."""

from __future__ import annotations

import os

from ..errors import InputError


def whole_number(name: str, top: int) -> int | None:
    """The whole number from 0 to ``top`` that the environment variable ``name`` holds, or None when it is
    unset or empty."""
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    if not text.isdigit() or int(text) > top:
        raise InputError(f"{name}={text!r}: expected a whole number from 0 to {top}")
    return int(text)
