"""Reused host buffers: views of the shape and dtype asked for, a buffer handed out again only once the copy that
reads it is done, and at the byte limit a hand-out that waits for that copy instead of growing the pool."""

from __future__ import annotations

import torch

from graphshard.device.buffers import SMALLEST, BufferPool, size_class


class Copy:
    """A stand-in for a CUDA event: not done until someone waits for it."""

    def __init__(self) -> None:
        self.finished = False
        self.waits = 0

    def query(self) -> bool:
        return self.finished

    def synchronize(self) -> None:
        self.waits += 1
        self.finished = True


def test_size_classes_are_powers_of_two_from_the_smallest():
    assert size_class(1) == SMALLEST
    assert size_class(SMALLEST + 1) == 2 * SMALLEST
    assert size_class(3 << 20) == 4 << 20


def test_views_have_the_shape_and_dtype_asked_and_hold_what_is_written():
    pool = BufferPool(pin=False)
    a = pool.take((100, 7), torch.float32)
    b = pool.take((3,), torch.int64)
    assert a.shape == (100, 7) and a.dtype == torch.float32 and a.is_contiguous()
    assert b.shape == (3,) and b.dtype == torch.int64
    a.copy_(torch.arange(700, dtype=torch.float32).view(100, 7))
    b.copy_(torch.tensor([5, 6, 7]))
    assert a.sum().item() == sum(range(700)) and b.tolist() == [5, 6, 7]  # no overlap between the two
    assert pool.owns(a) and pool.owns(b) and not pool.owns(torch.zeros(3))


def test_a_buffer_is_reused_only_after_its_copy_is_done():
    pool = BufferPool(pin=False)
    first = pool.take((1000,), torch.float32)
    copy = Copy()
    pool.give_back(first, copy)
    second = pool.take((1000,), torch.float32)  # the copy reading `first` is not done: a new buffer
    assert second.data_ptr() != first.data_ptr() and pool.stats.made == 2
    copy.finished = True
    pool.give_back(second, None)
    third = pool.take((900,), torch.float32)  # same class: one of the two comes back
    assert third.data_ptr() in (first.data_ptr(), second.data_ptr())
    assert pool.stats.made == 2 and pool.stats.reused == 1


def test_at_the_limit_a_hand_out_waits_for_the_oldest_copy():
    pool = BufferPool(pin=False, limit=SMALLEST)
    first = pool.take((10,), torch.float32)
    copy = Copy()
    pool.give_back(first, copy)
    again = pool.take((10,), torch.float32)
    assert again.data_ptr() == first.data_ptr() and copy.waits == 1 and pool.stats.waited == 1
    assert pool.stats.made == 1


def test_giving_back_something_not_handed_out_is_ignored():
    pool = BufferPool(pin=False)
    pool.give_back(torch.zeros(4))
    assert pool.stats.made == 0 and pool.take((4,), torch.float32).shape == (4,)


def test_empty_tensors_take_no_buffer():
    pool = BufferPool(pin=False)
    empty = pool.take((0, 16), torch.float32)
    assert empty.shape == (0, 16) and not pool.owns(empty) and pool.stats.made == 0
    pool.give_back(empty)
    assert pool.stats.made == 0 and pool.take((3,), torch.float32).shape == (3,) and pool.stats.made == 1
