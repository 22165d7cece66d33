"""Checkpoint and held-out-edge files that are not what they claim: every read names the file and why,
and nothing is ever unpickled (a torch.save file is refused as such)."""

from __future__ import annotations

import io
import pickle

import numpy as np
import pytest
import torch

from graphshard.errors import FormatError
from graphshard.tasks.checkpoint import check_checkpoints, load_checkpoint, rank_status, read_weights, save_checkpoint
from graphshard.tasks.link_split import LinkSplit, load_link_split, save_link_split


def _saved(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    opt = torch.optim.Adam(model.parameters())
    model(torch.ones(2, 4)).sum().backward()
    opt.step()
    save_checkpoint(tmp_path / "rank0", 0, model, opt, history=[{"epoch": 0}], identity={"graph": "g"})
    return model, opt, tmp_path / "rank0" / "checkpoint.safetensors"


def _torch_save(path, zipped: bool) -> None:
    buf = io.BytesIO()
    torch.save({"model/weight": torch.ones(3, 4)}, buf, _use_new_zipfile_serialization=zipped)
    path.write_bytes(buf.getvalue())


class _Bomb:
    """Unpickling this file would raise: proof that no read unpickles it."""

    def __reduce__(self):
        return (pytest.fail, ("a checkpoint read unpickled a file",))


# how each damaged file must be described: (damage, words the message must hold)
CASES = {
    "truncated to half": (
        lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]),
        "truncated or padded: header describes",
    ),
    "torch.save zip": (lambda p: _torch_save(p, True), "a zip archive, as torch.save writes, not a safetensors file"),
    "torch.save legacy pickle": (lambda p: _torch_save(p, False), "a Python pickle (protocol 2)"),
    "a pickle that must not run": (
        lambda p: p.write_bytes(pickle.dumps(_Bomb(), protocol=4)),
        "a Python pickle (protocol 4)",
    ),
    "empty": (lambda p: p.write_bytes(b""), "truncated (no safetensors header)"),
    "removed": (lambda p: p.unlink(), "no such file"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_damaged_checkpoint_is_named_on_every_read(tmp_path, case):
    model, opt, path = _saved(tmp_path)
    damage, words = CASES[case]
    damage(path)
    expected = f"{path}: not a valid checkpoint file ("
    for read in (
        lambda: load_checkpoint(tmp_path / "rank0", model, opt),
        lambda: load_checkpoint(tmp_path / "rank0", model, opt, {"graph": "g"}),
        lambda: read_weights(tmp_path / "rank0"),
    ):
        with pytest.raises(FormatError) as exc:
            read()
        assert str(exc.value).startswith(expected) and words in str(exc.value)
    # the check every run makes before it starts its processes says the same
    assert rank_status(tmp_path / "rank0", {"graph": "g"})["error"].startswith(expected)
    with pytest.raises(FormatError, match="not a valid checkpoint file"):
        check_checkpoints(tmp_path, {"graph": "g"}, 1)


def test_a_safetensors_file_of_something_else_is_not_a_checkpoint(tmp_path):
    from safetensors.torch import save_file

    model, opt, path = _saved(tmp_path)
    save_file({"val": torch.zeros(2, 3, dtype=torch.int64)}, str(path))
    with pytest.raises(FormatError, match=rf"^{path}: not a valid checkpoint file \(a safetensors file without"):
        load_checkpoint(tmp_path / "rank0", model, opt)
    other = torch.nn.Linear(5, 3)  # a checkpoint of another model
    save_checkpoint(tmp_path / "rank0", 0, other, torch.optim.Adam(other.parameters()), history=[{"epoch": 0}])
    with pytest.raises(
        FormatError,
        match=rf"^{tmp_path / 'rank0'}: not a valid checkpoint of this model and optimiser "
        r"\(RuntimeError: Error\(s\) in loading state_dict",
    ):
        load_checkpoint(tmp_path / "rank0", model, opt)


def test_intact_checkpoint_still_round_trips(tmp_path):
    model, opt, _ = _saved(tmp_path)
    fresh = torch.nn.Linear(4, 3)
    epoch, history, extra = load_checkpoint(tmp_path / "rank0", fresh, torch.optim.Adam(fresh.parameters()))
    assert (epoch, history, extra) == (1, [{"epoch": 0}], {})
    assert torch.equal(fresh.weight, model.weight)


@pytest.mark.parametrize("case", ["truncated to half", "torch.save zip", "a pickle that must not run"])
def test_damaged_link_split_is_named(tmp_path, case):
    path = tmp_path / "link_split.safetensors"
    save_link_split(LinkSplit(("_N", "_E", "_N"), np.zeros((2, 50), np.int64), np.ones((2, 40), np.int64)), path)
    damage, words = CASES[case]
    damage(path)
    with pytest.raises(FormatError) as exc:
        load_link_split(path)
    assert str(exc.value).startswith(f"{path}: not a valid link split file (") and words in str(exc.value)


def test_a_flipped_data_byte_is_found_by_the_recorded_sha256(tmp_path):
    """Damage no header check sees (a weight's bytes) is found: the state records the tensors' sha256."""
    model, opt, path = _saved(tmp_path)
    raw = bytearray(path.read_bytes())
    raw[-5] ^= 0x40  # inside the last tensor's data
    path.write_bytes(bytes(raw))
    with pytest.raises(FormatError, match=rf"{path}: does not match the sha256 recorded in .*checkpoint.json"):
        load_checkpoint(path.parent, model, opt)
    with pytest.raises(FormatError, match="does not match the sha256"):
        read_weights(path.parent)


def test_a_save_cut_between_its_two_files_is_completed_on_resume(tmp_path):
    """Epoch 1's tensors moved into place, its state still staged (a crash between the two moves): the next
    read completes the save instead of pairing epoch 1's weights with epoch 0's record."""
    from graphshard.tasks.checkpoint import STAGED

    model, opt, path = _saved(tmp_path)
    with torch.no_grad():
        model.weight.add_(1.0)
    want = model.weight.detach().clone()
    save_checkpoint(path.parent / STAGED, 1, model, opt, history=[{"epoch": 0}, {"epoch": 1}], identity={"graph": "g"})
    (path.parent / STAGED / path.name).replace(path)  # the first of the two moves only
    fresh = torch.nn.Linear(4, 3)
    nxt, history, _ = load_checkpoint(path.parent, fresh, torch.optim.Adam(fresh.parameters()))
    assert nxt == 2 and [h["epoch"] for h in history] == [0, 1]
    assert torch.equal(fresh.weight, want)
    assert not (path.parent / STAGED / "checkpoint.json").exists()


def test_best_weights_of_another_model_are_refused_when_read(tmp_path):
    from graphshard.tasks.checkpoint_fit import check_weights

    model, _, path = _saved(tmp_path)
    epoch, weights, _ = read_weights(path.parent)
    check_weights(path.parent, weights, model)  # its own weights fit
    weights["bia5"] = weights.pop("bias")
    with pytest.raises(
        FormatError, match=rf"{path.parent}: not a valid checkpoint of this model \(tensor missing 'bias'\)"
    ):
        check_weights(path.parent, weights, model)
    with pytest.raises(FormatError, match=r"'weight' is torch.float32 \(3, 4\), the model's torch.float32 \(2, 4\)"):
        check_weights(path.parent, read_weights(path.parent)[1] | {}, torch.nn.Linear(4, 2))
