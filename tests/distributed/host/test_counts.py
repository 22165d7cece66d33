"""Counters shared by threads: exact totals under concurrent adds, each thread's own share, pickled as totals."""

from __future__ import annotations

import pickle
import threading

from graphshard.distributed.host.counts import Counts


def test_totals_are_exact_and_each_thread_sees_its_own_share():
    c = Counts("rows", "bytes")
    shares: dict[int, dict] = {}
    start = threading.Barrier(8)

    def work(k: int) -> None:
        start.wait(10)
        for _ in range(5000):
            c.add(rows=k, bytes=2 * k)
        shares[k] = dict(c.mine())

    threads = [threading.Thread(target=work, args=(k,)) for k in range(1, 9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert c == {"rows": 5000 * 36, "bytes": 10000 * 36}
    assert shares == {k: {"rows": 5000 * k, "bytes": 10000 * k} for k in range(1, 9)}
    assert c.mine() == {}  # this thread added nothing


def test_a_pickled_copy_carries_the_totals_and_counts_on():
    c = Counts("hits", misses=3)
    c.add(hits=2)
    d = pickle.loads(pickle.dumps(c))
    assert d == {"hits": 2, "misses": 3} and d.mine() == {}
    d.add(misses=1)
    assert d["misses"] == 4 and c["misses"] == 3
