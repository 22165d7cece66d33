"""Fuzzing what a resumed run reads of a training checkpoint (``<dir>/rank<k>/checkpoint.safetensors`` and
``checkpoint.json``, written once per module by a real one-epoch training run): the tensor file truncated,
padded, of random bytes, with header bytes flipped, its header JSON edited (entries dropped, renamed or
holding junk, dtypes, shapes and offsets changed), or a ``torch.save`` pickle in its place (never
unpickled); ``checkpoint.json`` with keys dropped, misspelt or holding junk, damaged bytes, deep nesting,
NaN or huge numbers. The pre-flight check (:func:`check_checkpoints`), :func:`read_state`,
:func:`load_checkpoint` and :func:`read_weights` (``best/``) give the state as written or a named error
naming the checkpoint's path -- never a raw exception, nor a state a later step would trip over.

A byte flipped inside the tensor data is found by the sha256 the state records of the tensor file (tested in
test_checkpoint_files.py); edits here that must reach the checks of the tensors themselves restamp it."""

from __future__ import annotations

import copy
import hashlib
import io
import json
import math
import pickle
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from graphshard.errors import FormatError, InputError
from graphshard.models.sage import GraphSAGE
from graphshard.tasks.checkpoint import (
    STATE,
    TENSORS,
    check_checkpoints,
    load_checkpoint,
    read_state,
    read_weights,
    run_identity,
)
from tests.fuzz_helpers import (
    FUZZ,
    HUGE,
    PickleTrap,
    assert_named_error,
    damaged,
    json_values,
    near_misses,
    nested,
    no_writes,
)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

OPTS = dict(epochs=1, fanouts=[3, 3], batch_size=64, progress=False)


class Saved:
    """The checkpoint of a one-epoch run: its files' bytes, what they hold, and the run's identity."""

    def __init__(self, root: Path):
        from safetensors import safe_open

        from graphshard.datasets import community_graph, save_dataset
        from graphshard.train import TrainOptions, train

        save_dataset(community_graph(num_nodes=300, seed=0), root / "data")
        opts = TrainOptions(checkpoint=str(root / "ckpt"), **OPTS)
        metrics = train(opts, num_procs=1, dataset=str(root / "data"), work_dir=str(root / "work"))
        self.rank = root / "ckpt" / "rank0"
        self.tensor_bytes = (self.rank / TENSORS).read_bytes()
        self.state_bytes = (self.rank / STATE).read_bytes()
        self.meta = json.loads(self.state_bytes)
        # what the run checked its checkpoint against (its options resolved: feat, label, split_masks)
        self.identity = self.meta["identity"]
        resolved = TrainOptions(**{**OPTS, **{k: self.identity[k] for k in ("feat", "label", "split_masks")}})
        assert run_identity(metrics["part_config"], resolved, 1) == self.identity
        with safe_open(str(self.rank / TENSORS), framework="pt") as f:  # an independent reading
            self.tensors = {k: f.get_tensor(k) for k in f.keys()}
        (self.header_len,) = struct.unpack("<Q", self.tensor_bytes[:8])
        self.header = json.loads(self.tensor_bytes[8 : 8 + self.header_len])
        w0, w1 = self.tensors["model/convs.0.lin_l.weight"], self.tensors["model/convs.1.lin_l.weight"]
        self.dims = (w0.shape[1], w0.shape[0], w1.shape[0])  # in, hidden, out

    def model(self) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
        """A fresh model and optimiser as the run builds them (not yet trained)."""
        model = GraphSAGE(*self.dims, 2, dropout=0.5)
        return model, torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=0.0)


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Saved:
    return Saved(tmp_path_factory.mktemp("checkpoint"))


def _work(saved: Saved, tensors: bytes | None = None, state: bytes | None = None, restamp: bool = False) -> Path:
    """A copy of the checkpoint directory (``rank0/`` and ``best/rank0/``) with the given file contents;
    ``restamp``: the state records the sha256 of the tensors given (an edit made consistent, which only the
    checks of the tensors themselves can catch)."""
    if restamp and tensors is not None:
        meta = json.loads(saved.state_bytes if state is None else state)
        meta["tensors_sha256"] = hashlib.sha256(tensors).hexdigest()
        state = json.dumps(meta).encode()
    work = saved.rank.parent.parent / "work_ckpt"
    shutil.rmtree(work, ignore_errors=True)
    for rank in (work / "rank0", work / "best" / "rank0"):
        rank.mkdir(parents=True)
        (rank / TENSORS).write_bytes(saved.tensor_bytes if tensors is None else tensors)
        (rank / STATE).write_bytes(saved.state_bytes if state is None else state)
    return work


def _header_bytes(header: dict) -> bytes:
    text = json.dumps(header, separators=(",", ":")).encode()
    return text + b" " * (-(len(text) + 8) % 8)


def _with_header(saved: Saved, header: dict | bytes) -> bytes:
    """The tensor file with another header (its length field made to fit) before the same data."""
    text = header if isinstance(header, bytes) else _header_bytes(header)
    return struct.pack("<Q", len(text)) + text + saved.tensor_bytes[8 + saved.header_len :]


def _reads(saved: Saved, work: Path) -> None:
    """Every reader resume uses: each gives the state as written in ``work`` or a named error."""
    rank = work / "rank0"
    with no_writes(work.parent):
        status, err = assert_named_error(lambda: check_checkpoints(work, saved.identity, 1), rank)
        _check_error(err)
        meta, err = assert_named_error(lambda: read_state(rank), rank)
        _check_error(err)
        if meta is not None:
            _check_meta(meta, json.loads((rank / STATE).read_text()))
        model, opt = saved.model()
        resumed, err = assert_named_error(lambda: load_checkpoint(rank, model, opt, saved.identity), rank)
        _check_error(err)
        weights, err = assert_named_error(lambda: read_weights(work / "best" / "rank0"), work / "best" / "rank0")
        _check_error(err)
    if resumed is not None:
        written = json.loads((rank / STATE).read_text())
        epoch, history, extra = resumed
        assert (epoch, extra) == (written["epoch"] + 1, {}) and _nan_equal(history, written["history"])
        _check_history(history, epoch - 1)
        for k, v in model.state_dict().items():
            assert v.dtype == saved.tensors[f"model/{k}"].dtype and torch.equal(v, saved.tensors[f"model/{k}"]), k
        state, params = opt.state_dict(), list(model.parameters())
        for idx, per_param in state["state"].items():
            for name, v in per_param.items():
                assert torch.equal(v, saved.tensors[f"opt/{idx}/{name}"]), (idx, name)
                assert name == "step" or (v.shape, v.dtype) == (params[idx].shape, params[idx].dtype), (idx, name)
        assert torch.equal(torch.get_rng_state(), saved.tensors["rng/torch"])
        _check_param_groups(state["param_groups"], opt)
        if status is not None:
            assert status == written["epoch"]
    if weights is not None:  # best/: the weights as written (checked against the model when they are restored)
        from safetensors import safe_open

        epoch, tensors, extra = weights
        assert epoch == json.loads((work / "best" / "rank0" / STATE).read_text())["epoch"]
        with safe_open(str(work / "best" / "rank0" / TENSORS), framework="pt") as f:
            written = {k: f.get_tensor(k) for k in f.keys()}
        assert {k: v.shape for k, v in tensors.items()} == {
            k[len("model/") :]: v.shape for k, v in written.items() if k.startswith("model/")
        }


def _check_error(err: BaseException | None) -> None:
    assert err is None or isinstance(err, (FormatError, InputError)), f"{type(err).__name__}: {err}"


def _check_history(history, epoch: int) -> None:
    """A history the loop can use: records of numbers, of increasing epochs up to ``epoch``."""
    assert isinstance(history, list) and history and history[-1]["epoch"] <= epoch
    for i, record in enumerate(history):
        assert isinstance(record, dict)
        assert isinstance(record["epoch"], int) and not isinstance(record["epoch"], bool)
        assert i == 0 or history[i - 1]["epoch"] < record["epoch"]
        for v in record.values():
            assert v is None or isinstance(v, (int, float)), record


def _check_meta(meta: dict, written: dict) -> None:
    assert meta == written or _nan_equal(meta, written)
    epoch = meta["epoch"]
    assert isinstance(epoch, int) and not isinstance(epoch, bool) and epoch >= 0, epoch
    _check_history(meta["history"], epoch)


def _nan_equal(a, b) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _check_param_groups(groups: list[dict], opt: torch.optim.Optimizer) -> None:
    """Every setting of the resumed optimiser is of the type a fresh one has (a string as lr or a number as
    betas would fail in the first step, far from the file)."""
    fresh = torch.optim.Adam(torch.nn.Linear(1, 1).parameters(), lr=0.01).state_dict()["param_groups"][0]
    for group in groups:
        assert set(group) == set(fresh), set(group) ^ set(fresh)
        for k, v in fresh.items():
            got = group[k]
            if k == "params":
                continue
            if isinstance(v, bool):
                assert isinstance(got, bool), (k, got)
            elif isinstance(v, (int, float)):
                assert isinstance(got, (int, float)) and not isinstance(got, bool) and math.isfinite(got), (k, got)
            elif isinstance(v, (tuple, list)):
                assert len(got) == len(v) and all(
                    isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in got
                ), (k, got)
            else:
                assert got is None or isinstance(got, bool), (k, got)


def test_intact_checkpoint_resumes(saved):
    """The run's own checkpoint reads back as it was written."""
    work = _work(saved)
    _reads(saved, work)
    model, opt = saved.model()
    assert load_checkpoint(work / "rank0", model, opt, saved.identity)[0] == 1
    assert check_checkpoints(work, saved.identity, 1) == 0


# -- the tensor file -------------------------------------------------------------------------------------------
def _header_flips(saved: Saved) -> st.SearchStrategy[bytes]:
    """Bytes of the length field and the header flipped (a byte of the data would read as another value)."""
    data = saved.tensor_bytes
    end = 8 + saved.header_len

    def flip(args: tuple[int, int]) -> bytes:
        i, b = args
        return data[:i] + bytes([b]) + data[i + 1 :]

    printable = st.sampled_from(list(b'0123456789"{}[],:. _FUIBOLmodelptrngsha/xz\x00\xff'))
    return st.tuples(st.integers(0, end - 1), printable | st.integers(0, 255)).map(flip)


def _damaged_tensors(saved: Saved) -> st.SearchStrategy[bytes]:
    data = saved.tensor_bytes
    n = len(data)
    truncated = st.integers(0, n - 1).map(lambda k: data[:k])
    padded = st.binary(min_size=1, max_size=16).map(lambda b: data + b)
    cut = st.tuples(st.integers(0, n - 1), st.integers(1, 64)).map(lambda a: data[: a[0]] + data[a[0] + a[1] :])
    inserted = st.tuples(st.integers(0, n), st.binary(min_size=1, max_size=8)).map(
        lambda a: data[: a[0]] + a[1] + data[a[0] :]
    )
    return truncated | padded | cut | inserted | st.binary(max_size=64) | _header_flips(saved)


@settings(FUZZ, max_examples=120)
@given(st.data())
def test_damaged_tensor_file(saved, data):
    _reads(saved, _work(saved, tensors=data.draw(_damaged_tensors(saved))))


DTYPES = st.sampled_from(["F32", "F16", "BF16", "F64", "I32", "I64", "U8", "I8", "BOOL", "U32", "F8_E4M3", "X", ""])


@st.composite
def edited_headers(draw, header: dict) -> dict:
    """The header after 1-3 edits: an entry dropped, renamed (a near miss) or two entries' names swapped, or
    its dtype, shape or offsets changed, or junk in place of any of them or of __metadata__."""
    doc = copy.deepcopy(header)
    for _ in range(draw(st.integers(1, 3))):
        names = sorted(k for k in doc if k != "__metadata__")
        if not names:
            break
        name = draw(st.sampled_from(names))
        kind = draw(
            st.sampled_from(["drop", "rename", "swap", "dtype", "shape", "offsets", "junk", "junk_field", "metadata"])
        )
        entry = doc[name]
        if kind == "drop":
            del doc[name]
        elif kind == "rename":
            doc[draw(near_misses(name))] = doc.pop(name)
        elif kind == "swap":
            other = draw(st.sampled_from(names))
            doc[name], doc[other] = doc[other], doc[name]
        elif kind == "dtype" and isinstance(entry, dict):
            entry["dtype"] = draw(DTYPES)
        elif kind == "shape" and isinstance(entry, dict):
            entry["shape"] = draw(st.lists(st.integers(0, 70) | HUGE | st.just(-1), max_size=3))
        elif kind == "offsets" and isinstance(entry, dict):
            entry["data_offsets"] = draw(st.lists(st.integers(0, 80000) | HUGE | st.just(-1), max_size=3))
        elif kind == "junk_field" and isinstance(entry, dict):
            entry[draw(st.sampled_from(["dtype", "shape", "data_offsets", "x"]))] = draw(json_values(4))
        elif kind == "metadata":
            doc["__metadata__"] = draw(json_values(4))
        else:
            doc[name] = draw(json_values(4))
    return doc


def _swaps_alike(header: dict, edited: dict) -> bool:
    """Whether ``edited`` only gives entries of the same dtype and shape each other's names: a file whose
    tensors are in another order, which reads as such (no reader can tell)."""
    header, edited = ({k: v for k, v in h.items() if k != "__metadata__"} for h in (header, edited))
    if set(header) != set(edited) or header == edited:
        return False
    return all(
        header[k] == edited[k]
        or (
            isinstance(edited[k], dict)
            and isinstance(header[k], dict)
            and (edited[k].get("dtype"), edited[k].get("shape")) == (header[k]["dtype"], header[k]["shape"])
        )
        for k in header
    )


@settings(FUZZ, max_examples=120)
@given(st.data())
def test_edited_tensor_header(saved, data):
    edited = data.draw(edited_headers(saved.header))
    if _swaps_alike(saved.header, edited):
        return  # tensors of one shape swapped: another valid checkpoint, not a damaged one
    _reads(saved, _work(saved, tensors=_with_header(saved, edited)))


SAME_SIZE = {"F32": ["I32", "U32"], "U8": ["I8", "BOOL", "F8_E4M3", "F8_E5M2"]}


@FUZZ
@given(st.data())
def test_dtype_of_the_same_size(saved, data):
    """A dtype changed to another of the same size leaves a well-formed file whose bytes read as other values
    (float32 weights as int32): loading must not cast them back silently."""
    header = copy.deepcopy(saved.header)
    name = data.draw(st.sampled_from(sorted(k for k in header if k != "__metadata__")))
    header[name]["dtype"] = data.draw(st.sampled_from(SAME_SIZE[header[name]["dtype"]]))
    _reads(saved, _work(saved, tensors=_with_header(saved, header)))


@pytest.mark.parametrize(
    "header",
    [
        nested(100_000).encode(),
        nested(100_000, '{"a":', "}").encode(),
        b"\xff\xfe",
        b"[]",
        b"null",
        b"{}",
        b'{"x": 1e400}',
        b'{"rng/torch": {"dtype": "U8", "shape": [NaN], "data_offsets": [0, 1]}}',
    ],
)
def test_tensor_header_that_is_no_object(saved, header):
    """A header nested 100 000 deep was a raw RecursionError."""
    work = _work(saved, tensors=_with_header(saved, header))
    _reads(saved, work)
    with pytest.raises(FormatError, match=rf"^{work / 'rank0' / TENSORS}: not a valid checkpoint file \("):
        check_checkpoints(work, saved.identity, 1)


@pytest.mark.parametrize(
    "what", ["torch.save zip", "torch.save legacy", "pickle", "numpy", "directory", "symlink", "missing", "empty"]
)
def test_not_a_tensor_file(saved, what):
    marker = saved.rank.parent.parent / "unpickled"
    work = _work(saved)
    path = work / "rank0" / TENSORS
    path.unlink()
    if what.startswith("torch.save"):
        buf = io.BytesIO()
        torch.save(
            {"model/x": torch.ones(2), "trap": PickleTrap(marker)},
            buf,
            _use_new_zipfile_serialization=what.endswith("zip"),
        )
        path.write_bytes(buf.getvalue())
    elif what == "pickle":
        path.write_bytes(pickle.dumps(PickleTrap(marker), protocol=4))
    elif what == "numpy":
        np.save(open(path, "wb"), np.zeros(3))
    elif what == "directory":
        path.mkdir()
    elif what == "symlink":
        path.symlink_to(work / "rank0" / STATE)
    elif what == "empty":
        path.write_bytes(b"")
    _reads(saved, work)
    model, opt = saved.model()
    with pytest.raises(FormatError, match=rf"^{path}: not a valid checkpoint file \("):
        load_checkpoint(work / "rank0", model, opt, saved.identity)
    assert not marker.exists(), "a pickle was loaded"


# -- checkpoint.json -------------------------------------------------------------------------------------------
def _spots(value, at=()):
    yield at
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _spots(v, (*at, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _spots(v, (*at, i))


@st.composite
def edited_states(draw, meta: dict) -> dict:
    """``checkpoint.json`` after 1-3 edits anywhere: a key dropped or misspelt, a value replaced by junk or
    by a number (negative, huge, fractional, NaN, a boolean or a string of digits), a list item added."""
    doc = copy.deepcopy(meta)
    for _ in range(draw(st.integers(1, 3))):
        spots = [at for at in _spots(doc) if at]
        if not spots:
            break
        # the epoch and the top-level keys are where the mistakes matter most: drawn more often
        at = draw(st.sampled_from(spots) | st.sampled_from([at for at in spots if len(at) <= 2]))
        container = doc
        for k in at[:-1]:
            container = container[k]
        key = at[-1]
        kind = draw(st.sampled_from(["drop", "rename", "junk", "number", "number", "add"]))
        if kind == "drop":
            container.pop(key)
        elif kind == "rename" and isinstance(key, str):
            container[draw(near_misses(key))] = container.pop(key)
        elif kind == "number":
            container[key] = draw(
                st.integers(-3, 3)
                | HUGE
                | st.sampled_from([0.5, 1.0, -0.0, math.nan, math.inf, True, False, "0", "1", None, 10**30])
            )
        elif kind == "add" and isinstance(container[key], list):
            container[key].append(draw(json_values(4)))
        else:
            container[key] = draw(json_values(6))
    return doc


@settings(FUZZ, max_examples=150)
@given(st.data())
def test_edited_state(saved, data):
    doc = data.draw(edited_states(saved.meta))
    _reads(saved, _work(saved, state=json.dumps(doc).encode()))


@FUZZ
@given(st.data())
def test_damaged_state_bytes(saved, data):
    _reads(saved, _work(saved, state=data.draw(damaged(saved.state_bytes))))


@pytest.mark.parametrize(
    "doc",
    [
        nested(100_000).encode(),
        nested(100_000, '{"a":', "}").encode(),
        b'{"epoch": ' + nested(100_000).encode() + b"}",
        b"\xff\xfe",
        b"",
        b"[]",
        b'{"epoch": Infinity}',
        b'{"epoch": -Infinity}',
        b'{"epoch": NaN}',
        b'{"epoch": 1e400}',
        b'{"epoch": 1.5}',
        b'{"epoch": true}',
        b'{"epoch": "0"}',
        b'{"epoch": -1}',
        b'{"epoch": 1' + b"0" * 5000 + b"}",
    ],
)
def test_state_that_is_no_checkpoint(saved, doc):
    """A document nested 100 000 deep was a raw RecursionError, an epoch of Infinity an OverflowError; an
    epoch of 1.5 or true read as epoch 1, of "0" as 0, of -1 as no checkpoint at all."""
    work = _work(saved, state=doc)
    _reads(saved, work)
    with pytest.raises(FormatError, match=rf"^{work / 'rank0' / STATE}: "):
        check_checkpoints(work, saved.identity, 1)


def _edit(saved: Saved, how) -> bytes:
    doc = copy.deepcopy(saved.meta)
    how(doc)
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    "how, words",
    [
        (lambda d: d.pop("history"), "'history'"),  # was a raw KeyError when resumed
        (lambda d: d.__setitem__("history", 5), "'history'"),  # a raw TypeError
        (lambda d: d.__setitem__("history", "abc"), "'history'"),  # read as three records 'a', 'b', 'c'
        (lambda d: d.__setitem__("history", [5]), "'history'"),  # read, and failed in the loop (best_epoch)
        (lambda d: d["history"][0].__setitem__("val_acc", "high"), "'history'"),
        (lambda d: d["history"][0].__setitem__("epoch", 3), "'history'"),  # after the checkpoint's epoch
        (lambda d: d["optimizer"]["param_groups"][0].__setitem__("lr", "x"), "'lr'"),  # failed in the first step
        (lambda d: d["optimizer"]["param_groups"][0].__setitem__("betas", 5), "'betas'"),
        (lambda d: d["optimizer"]["param_groups"][0].pop("eps"), "'eps'"),
        (lambda d: d["optimizer"].__setitem__("scalars", {"0/step": "abc"}), "'0/step'"),
    ],
)
def test_state_mistakes_are_named(saved, how, words):
    work = _work(saved, state=_edit(saved, how))
    model, opt = saved.model()
    with pytest.raises(FormatError) as exc:
        load_checkpoint(work / "rank0", model, opt, saved.identity)
    assert str(exc.value).startswith(str(work / "rank0")) and words in str(exc.value), str(exc.value)
    _reads(saved, work)


@pytest.mark.parametrize(
    "name, how",
    [
        ("exp_avg of another shape", lambda t: t.__setitem__("opt/0/exp_avg", torch.zeros(3))),
        ("exp_avg of another dtype", lambda t: t.__setitem__("opt/0/exp_avg", t["opt/0/exp_avg"].to(torch.float64))),
        ("state of no parameter", lambda t: t.__setitem__("opt/9/exp_avg", torch.zeros(3))),
        ("state misnamed", lambda t: t.__setitem__("opt/0/exp_avf", t.pop("opt/0/exp_avg"))),
        (
            "weights as integers",
            lambda t: t.__setitem__("model/convs.0.lin_l.bias", t["model/convs.0.lin_l.bias"].view(torch.int32)),
        ),
    ],
)
def test_tensors_that_do_not_fit_the_optimiser(saved, name, how):
    """Optimiser state of another shape, dtype or name, or of a parameter the model lacks, was loaded, and
    failed (or broadcast) in the first step; int32 weights were cast to float32 silently."""
    from safetensors.torch import save

    tensors = dict(saved.tensors)
    how(tensors)
    work = _work(saved, tensors=save(tensors), restamp=True)
    model, opt = saved.model()
    with pytest.raises(FormatError, match=rf"^{work / 'rank0'}: not a valid checkpoint of this model and optimiser"):
        load_checkpoint(work / "rank0", model, opt, saved.identity)
    _reads(saved, work)
