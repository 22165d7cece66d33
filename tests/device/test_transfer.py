"""Batches through the device path on a CPU (copies of their own, as a device would hold): every tensor arrives
with its values, the host-only bookkeeping stays, ``prepare`` runs before the copies, the copy of the next
batch is issued before the current one is handed out, buffers are reused, and a slow loader shows as waiting."""

from __future__ import annotations

import time

import numpy as np
import torch
from torch_geometric.data import Data, HeteroData

from graphshard.device.clock import StepClock
from graphshard.device.rowcache import DeviceRowCache, cached_layout
from graphshard.device.streams import CopyStream, done
from graphshard.device.transfer import DeviceFeeder


def _batch(i: int) -> Data:
    g = torch.Generator().manual_seed(i)
    d = Data(
        x=torch.randn(50, 8, generator=g),
        edge_index=torch.randint(0, 50, (2, 120), generator=g),
        edge_attr=torch.randn(120, 3, generator=g),
        n_id=torch.arange(50) + i,
    )
    d.sample_time = 0.5
    return d


def test_every_tensor_arrives_and_bookkeeping_stays():
    feeder = DeviceFeeder(torch.device("cpu"), copy_on_cpu=True)
    sources = [_batch(i) for i in range(6)]
    kept_ids = [b.n_id for b in sources]
    got = list(feeder(sources))
    assert len(got) == 6
    for i, b in enumerate(got):
        want = _batch(i)
        for key in ("x", "edge_index", "edge_attr"):
            assert torch.equal(b[key], want[key]), key
        assert b.n_id is kept_ids[i] and b.sample_time == 0.5
    copy_s, wait_s, nbytes = feeder.reset()
    assert nbytes == 6 * (50 * 8 * 4 + 2 * 120 * 8 + 120 * 3 * 4) and copy_s > 0 and wait_s >= 0


def test_copies_do_not_share_memory_with_what_the_loader_made_and_buffers_are_reused():
    feeder = DeviceFeeder(torch.device("cpu"), copy_on_cpu=True)
    sources = [_batch(i) for i in range(20)]
    made = [b.x for b in sources]  # kept alive: their memory is not handed to the copies
    got = list(feeder(sources))
    assert not {t.data_ptr() for t in made} & {b.x.data_ptr() for b in got}
    assert all(torch.equal(a, b.x) for a, b in zip(made, got))
    assert feeder.pool.stats.made <= 3 and feeder.pool.stats.reused >= 3 * 20 - 3  # 3 tensors a batch


def test_the_next_batch_is_copied_before_the_current_one_is_handed_out():
    order: list[str] = []

    def source():
        for i in range(4):
            order.append(f"built {i}")
            yield _batch(i)

    feeder = DeviceFeeder(torch.device("cpu"), ahead=1, copy_on_cpu=True, prepare=lambda b: order.append("prepared"))
    for i, _ in enumerate(feeder(source())):
        order.append(f"used {i}")
    assert order.index("built 1") < order.index("used 0")
    assert order.index("built 2") < order.index("used 1") and order.count("prepared") == 4
    assert order[-1] == "used 3"


def test_prepare_attaches_what_then_travels():
    def labels(b):
        b.y_seed = b.n_id[:5] * 2

    got = list(DeviceFeeder(torch.device("cpu"), prepare=labels, copy_on_cpu=True)([_batch(3)]))
    assert got[0].y_seed.tolist() == [6, 8, 10, 12, 14]


def test_a_slow_loader_shows_as_waiting_not_copying():
    def slow():
        for i in range(3):
            time.sleep(0.05)  # a loader that keeps the trainer waiting
            yield _batch(i)

    feeder = DeviceFeeder(torch.device("cpu"), copy_on_cpu=True)
    list(feeder(slow()))
    copy_s, wait_s, _ = feeder.reset()
    assert wait_s >= 0.14 and copy_s < wait_s


def test_on_a_cpu_without_copies_the_batch_is_passed_through():
    b = _batch(0)
    (got,) = list(DeviceFeeder(torch.device("cpu"))([b]))
    assert got is b and got.x is b.x


def test_heterogeneous_batches_and_the_device_cache_complete_x():
    table = torch.randn(30, 4)
    cached = np.array([2, 5, 9, 11])
    cache = DeviceRowCache("feat", {"paper": cached}, {"paper": table[cached].clone()}, {"paper": 30})
    ids = np.array([9, 1, 2, 20, 11, 7])
    hit_pos, hit_slot, miss_pos = cache.split("paper", ids)
    assert hit_pos.tolist() == [0, 2, 4] and miss_pos.tolist() == [1, 3, 5]
    h = HeteroData()
    h["paper"].x = table[ids[miss_pos]]  # what the builder fetched: the misses alone
    h["paper"].n_id = torch.from_numpy(ids)
    cached_layout(h["paper"], hit_pos, hit_slot, miss_pos, count=ids.shape[0])
    h["paper", "cites", "paper"].edge_index = torch.tensor([[0, 1], [1, 2]])
    (got,) = list(DeviceFeeder(torch.device("cpu"), cache=cache, copy_on_cpu=True)([h]))
    assert torch.equal(got["paper"].x, table[ids]) and "x_hit_pos" not in got["paper"]
    assert cache.counts.take() == (6, 3, 3 * 4 * 4)


def test_streams_and_clock_on_a_cpu():
    stream = CopyStream(torch.device("cpu"))
    with stream.issuing():
        pass
    assert stream.record() is None and done(None)
    stream.wait(None)
    clock = StepClock(torch.device("cpu"))
    for v in (1.0, 2.5):
        clock.start()
        clock.stop(torch.tensor(v))
    seconds, losses = clock.collect()
    assert seconds >= 0 and losses.tolist() == [1.0, 2.5] and clock.collect()[1].numel() == 0
