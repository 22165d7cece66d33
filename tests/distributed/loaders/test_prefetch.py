"""Batches built ahead: in request order whatever thread built them, further builders only while the
consumer waits and the cores are idle, failures raised when their batch is due, threads stopped."""

from __future__ import annotations

import threading
import time

import pytest

from graphshard.distributed.host.threads import builder_nice
from graphshard.distributed.loaders import prefetch
from graphshard.distributed.loaders.prefetch import prefetched, wants_builder
from graphshard.distributed.ranks.context import DistError
from graphshard.errors import InputError


def _makers(log: list, slow: float = 0.0, fail_at: int | None = None):
    def maker(j: int):
        def make(r: int):
            if slow:
                time.sleep(slow)  # stands for a wait on another host's answer: no CPU used
            if r == fail_at:
                raise ValueError(f"request {r} failed")
            log.append((j, r))
            return r * r

        return make

    return maker


def test_waiting_on_answers_adds_builders_and_keeps_the_order(monkeypatch):
    monkeypatch.setattr(prefetch, "WINDOW", 4)
    log: list = []
    got = list(prefetched(_makers(log, slow=0.01), list(range(60)), depth=4, timeout=10, max_builders=3, cores=1))
    assert got == [r * r for r in range(60)]
    assert {j for j, _ in log} == {0, 1, 2}  # the consumer waited, the process was idle: 3 builders
    assert sorted(r for _, r in log) == list(range(60))  # each request built once


def test_one_builder_is_the_in_line_order_and_stays_alone():
    log: list = []
    got = list(prefetched(_makers(log), list(range(50)), depth=2, timeout=10, max_builders=1))
    assert got == [r * r for r in range(50)]
    assert [r for _, r in log] == list(range(50)) and {j for j, _ in log} == {0}


@pytest.mark.parametrize(
    "waited, span, cpu, cores, more",
    [
        (0.3, 1.0, 0.5, 1, True),  # waiting, half the core idle
        (0.3, 1.0, 0.95, 1, False),  # waiting, but the core is busy: another thread would only compete
        (0.05, 1.0, 0.3, 1, False),  # batches are ready: nothing to gain
        (0.5, 1.0, 1.5, 4, True),  # 4 cores, 1.5 used
    ],
)
def test_a_builder_is_added_only_while_waiting_on_idle_cores(waited, span, cpu, cores, more):
    assert wants_builder(waited, span, cpu, cores) is more


def test_a_failure_is_raised_when_its_batch_is_due(monkeypatch):
    monkeypatch.setattr(prefetch, "WINDOW", 2)
    got = []
    with pytest.raises(ValueError, match="request 7 failed"):
        for b in prefetched(_makers([], slow=0.005, fail_at=7), list(range(20)), 4, 10, max_builders=2):
            got.append(b)
    assert got == [r * r for r in range(7)]


def test_a_consumer_that_stops_early_stops_the_builders():
    before = {t for t in threading.enumerate() if t.name.startswith("graphshard-prefetch")}
    gen = prefetched(_makers([], slow=0.002), list(range(1000)), 4, 10, max_builders=2)
    assert [next(gen) for _ in range(3)] == [0, 1, 4]
    gen.close()
    left = {t for t in threading.enumerate() if t.name.startswith("graphshard-prefetch")} - before
    assert not any(t.is_alive() for t in left)


def test_the_wait_for_a_batch_is_bounded():
    gen = prefetched(_makers([], slow=2.0), [1, 2], depth=2, timeout=0.1, where="rank 3: ")
    with pytest.raises(DistError, match=r"rank 3: waited 0 s for the next batch"):
        next(gen)
    gen.close()


def _nice_of_builders(monkeypatch, setting: str | None) -> tuple[int, set[int]]:
    """The consumer's nice value and those the builders ran at, with ``GRAPHSHARD_BUILDER_NICE`` = ``setting``."""
    import os

    if setting is None:
        monkeypatch.delenv("GRAPHSHARD_BUILDER_NICE", raising=False)
    else:
        monkeypatch.setenv("GRAPHSHARD_BUILDER_NICE", setting)
    seen: set[int] = set()

    def maker(j: int):
        def make(r: int):
            seen.add(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
            return r

        return make

    assert list(prefetched(maker, list(range(10)), depth=2, timeout=10)) == list(range(10))
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id()), seen


@pytest.mark.skipif(
    not hasattr(threading, "get_native_id") or not __import__("sys").platform.startswith("linux"), reason="Linux"
)
def test_builders_run_at_a_lower_priority_than_the_consumer(monkeypatch):
    consumer, seen = _nice_of_builders(monkeypatch, None)
    assert seen == {min(19, consumer + 10)}  # the consumer itself is untouched
    consumer, seen = _nice_of_builders(monkeypatch, "3")
    assert seen == {min(19, consumer + 3)}
    consumer, seen = _nice_of_builders(monkeypatch, "0")
    assert seen == {consumer}
    for bad in ("-1", "20", "ten"):
        with pytest.raises(InputError, match=f"GRAPHSHARD_BUILDER_NICE='{bad}': expected a whole number from 0 to 19"):
            _nice_of_builders(monkeypatch, bad)


def test_builders_of_remote_batches_keep_the_consumers_priority_unless_told(monkeypatch):
    monkeypatch.delenv("GRAPHSHARD_BUILDER_NICE", raising=False)
    assert (builder_nice(remote=True), builder_nice(remote=False)) == (0, 10)
    monkeypatch.setenv("GRAPHSHARD_BUILDER_NICE", "7")  # the setting wins either way
    assert (builder_nice(remote=True), builder_nice(remote=False)) == (7, 7)
