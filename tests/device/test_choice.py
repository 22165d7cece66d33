"""Which device a rank takes, and the set-ups refused before any process starts (on this machine's CPU build,
and on a pretend CUDA machine)."""

from __future__ import annotations

import pytest
import torch

from graphshard.device import choice
from graphshard.device.choice import check_device, nccl_for, rank_device, resolve, rule_line
from graphshard.errors import InputError


def test_cpu_and_auto_without_a_device():
    if choice.cuda_devices():
        pytest.skip("this machine has a CUDA device")
    assert resolve("auto") == "cpu" and check_device("auto", 2) == "cpu"
    assert rank_device("auto").device == torch.device("cpu") and rank_device("cpu").identity() == ""
    assert rule_line("cpu", 2) is None


def test_cuda_on_a_build_without_it_is_refused_in_one_line(monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", None)
    with pytest.raises(InputError, match="has no CUDA; install a CUDA build of torch, or train with --device cpu"):
        check_device("cuda", 1)


def test_cuda_without_a_visible_device_is_refused(monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    monkeypatch.setattr(choice, "cuda_devices", lambda: 0)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(InputError, match="no CUDA device is visible on this machine \\(CUDA_VISIBLE_DEVICES=''\\)"):
        check_device("cuda", 1)


def _pretend_gpus(monkeypatch, count: int, nccl: bool = True) -> None:
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    monkeypatch.setattr(choice, "cuda_devices", lambda: count)
    monkeypatch.setattr(torch.distributed, "is_nccl_available", lambda: nccl)


def test_a_device_per_rank_needs_nccl(monkeypatch):
    _pretend_gpus(monkeypatch, 2, nccl=False)
    with pytest.raises(InputError, match="no NCCL"):
        check_device("cuda", 2)
    assert check_device("cuda", 3) == "cuda"  # more ranks than devices: they share, and sum on the host


def test_the_rule_each_rank_its_device_or_round_robin(monkeypatch):
    _pretend_gpus(monkeypatch, 2)
    own = [rank_device("cuda", r, 2) for r in range(2)]
    assert [d.device for d in own] == [torch.device("cuda", 0), torch.device("cuda", 1)]
    assert not any(d.shared for d in own)
    shared = [rank_device("cuda", r, 3) for r in range(3)]
    assert [d.device.index for d in shared] == [0, 1, 0] and all(d.shared for d in shared)
    assert rule_line("cuda", 3) == "3 ranks per host see 2 CUDA device(s): they take cuda:LOCAL_RANK % 2"
    assert rule_line("auto", 2) == "2 rank(s) per host, on cuda:LOCAL_RANK"


def test_device_cache_and_precision_checks(monkeypatch):
    with pytest.raises(InputError, match="--cache-device cuda needs --device cuda"):
        check_device("cpu", 1, cache_device="cuda")
    with pytest.raises(InputError, match="precision must be one of fp32, bf16-mixed"):
        check_device("cpu", 1, precision="fp16")
    with pytest.raises(InputError, match="device must be one of cpu, cuda, auto"):
        resolve("tpu")


def test_nccl_only_where_every_rank_has_a_physical_device_of_its_own():
    a0, a1, b0 = "hostA/GPU-aaa", "hostA/GPU-bbb", "hostB/GPU-aaa"  # the same UUID on two hosts: no clash there
    assert nccl_for([a0, a1, b0], [True] * 3)
    assert not nccl_for([a0, a0], [True, True])  # two ranks on one GPU (even if each calls it cuda:0)
    assert not nccl_for([a0, a1], [True, False])  # a rank without NCCL
    assert not nccl_for([a0, ""], [True, True])  # a rank on the CPU
