"""Device memory before a run: ranks that do not fit their GPUs are refused with the numbers, ranks are counted
per device as the rule deals them, a batch's sampled nodes are bounded as the sampler bounds them, and a
device out of memory during a run is one line naming the rank, device and phase."""

from __future__ import annotations

import pytest
import torch

from graphshard.device.memory import named_out_of_memory
from graphshard.errors import DeviceMemoryError, InputError
from graphshard.train.device_cost import DeviceNeed, check_device_fits, ranks_per_device, sampled


def test_ranks_per_device_follow_the_round_robin_rule():
    assert ranks_per_device(2, 2) == [1, 1]
    assert ranks_per_device(3, 2) == [2, 1]
    assert ranks_per_device(1, 4) == [1, 0, 0, 0]


def test_ranks_that_do_not_fit_their_device_are_refused_with_the_numbers():
    need = DeviceNeed(context=1 << 30, model=1 << 30, batches=6 << 30, cache=4 << 30, layerwise=2 << 30)
    assert need.peak == 12 << 30  # batches and the layer-wise chunk are not held together
    check_device_fits(need, [1], [16 << 30])
    with pytest.raises(InputError) as err:
        check_device_fits(need, [2, 1], [16 << 30, 16 << 30])  # two ranks share cuda:0
    text = str(err.value)
    assert "on cuda:0 (2 rank(s) x 12.00 GiB" in text and "cache 4.00 GiB" in text and "16.00 GiB" in text
    assert "lower --batch-size, --fanouts or --cache-mb" in text


def test_sampled_nodes_grow_with_the_fanouts_and_stop_at_the_graph():
    assert sampled(10, [5, 5], 20.0, 10**9) == (10 + 50 + 250, 50 + 250)
    assert sampled(10, [5, 5], 3.0, 10**9) == (10 + 30 + 90, 30 + 90)  # fewer in-edges than the fanout
    assert sampled(10, [-1], 7.0, 50) == (50, 70)  # every in-edge, capped by the graph's nodes


def test_a_device_out_of_memory_is_one_line():
    with pytest.raises(DeviceMemoryError) as err:
        with named_out_of_memory(3, torch.device("cpu"), lambda: "training epoch 2, batch 17"):
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    assert str(err.value).startswith("rank 3 ran out of memory on cpu while training epoch 2, batch 17")
    assert "lower --batch-size" in str(err.value) and err.value.__cause__ is None


def test_capacity_reads_the_physical_device_without_a_cuda_context(monkeypatch):
    import subprocess
    from types import SimpleNamespace

    from graphshard.device import memory

    asked = []

    def smi(cmd, **kw):
        asked.append(cmd[1])
        return SimpleNamespace(stdout="81559\n")

    monkeypatch.setattr(subprocess, "run", smi)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    assert memory.capacity(1) == 81559 << 20 and asked == ["--id=1"]
    assert memory.capacity(0) == 81559 << 20 and asked[-1] == "--id=3"
    assert memory.capacity(2) == 0  # not visible
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-5b1c")
    assert memory.capacity(0) == 0  # UUIDs are not mapped: no refusal rather than a wrong one
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")

    def missing(cmd, **kw):
        raise FileNotFoundError("nvidia-smi")

    monkeypatch.setattr(subprocess, "run", missing)
    assert memory.capacity(0) == 0
