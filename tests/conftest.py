"""Shared fixtures."""

from __future__ import annotations

import pytest

from graphshard import Graph

from .graphs import small_hetero, small_homo


@pytest.fixture(params=["homo", "hetero"])
def graph(request) -> Graph:
    return small_homo() if request.param == "homo" else small_hetero()
