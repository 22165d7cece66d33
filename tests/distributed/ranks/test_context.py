"""How a rank's failure reads to its peers: one line; a user's error (its message names the file, key or ID at
fault) without graphshard's source location, any other error with the line it was raised at."""

from __future__ import annotations

from graphshard.distributed.ranks.context import error_text
from graphshard.errors import FormatError, InputError


def _raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:
        return caught


def test_a_users_error_reads_without_internal_locations() -> None:
    for exc in (InputError("unknown model 'sagee' (did you mean 'sage'?)"), FormatError("p.json: missing key")):
        text = error_text(_raised(exc))
        assert text == f"{type(exc).__module__}.{type(exc).__name__}: {exc}" and "(at " not in text, text


def test_an_unexpected_error_keeps_where_it_was_raised() -> None:
    text = error_text(_raised(KeyError("x")))
    assert text.startswith("KeyError: 'x' (at ") and "test_context.py:" in text, text
