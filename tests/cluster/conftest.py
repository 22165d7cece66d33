"""The ``cluster`` fixture: emulated hosts (see :mod:`tests.cluster.harness`), torn down on every path."""

from __future__ import annotations

import functools

import pytest

from .harness import Cluster, unavailable


@functools.cache
def _why_not() -> str | None:
    return unavailable()


@pytest.fixture
def cluster(tmp_path):
    """``cluster(n=2, rate=None, cores_per_host=1, queue="host")`` builds a :class:`Cluster` of ``n`` hosts under
    ``tmp_path``; every cluster made is torn down when the test ends, however it ends."""
    reason = _why_not()
    if reason:
        pytest.skip(reason)
    made: list[Cluster] = []

    def make(n: int = 2, rate: str | None = None, cores_per_host: int = 1, queue: str = "host") -> Cluster:
        c = Cluster(tmp_path / f"cluster{len(made)}", n, rate, cores_per_host, queue)
        made.append(c)
        return c.up()

    try:
        yield make
    finally:
        for c in made:
            c.down()
