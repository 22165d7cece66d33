"""Fuzzing the partition config JSON (``<graph_name>.json``) of a real small partitioning: keys dropped or
renamed, values replaced by junk of any type, numbers changed, the file truncated, bytes flipped or random.
:func:`read_config` either raises a named error (naming the file) or reads a config with the original ID
space; every partition then loads equal to the original or is refused with a named error. With the
edited JSON made consistent again (its ``run_fingerprint`` and the files' stamps recomputed, as a buggy
tool rewriting a whole output would), the structural checks alone must refuse what no longer fits."""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from graphshard import load_partition, partition_graph
from graphshard.format.config import read_config, run_fingerprint
from graphshard.format.load import verify_checksums
from tests.format.tamper import FINGERPRINT_FIELDS, retag
from tests.fuzz_helpers import FUZZ, HUGE, assert_named_error, damaged, json_values, nested, no_writes
from tests.graphs import small_hetero, small_homo

GRAPHS = {"h": small_hetero, "g": small_homo}


class Original:
    def __init__(self, root: Path, name: str):
        self.root, self.config = root, root / f"{name}.json"
        self.text = self.config.read_text()
        self.raw = json.loads(self.text)
        self.cfg = read_config(self.config)
        self.space = run_fingerprint(self.cfg)
        self.parts = [load_partition(self.config, p) for p in range(self.cfg.num_parts)]
        self.paths = list(_paths(self.raw))


def _paths(doc, prefix=()):
    yield prefix
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for k, v in items:
        yield from _paths(v, (*prefix, k))


@pytest.fixture(scope="module", params=list(GRAPHS))
def original(request, tmp_path_factory):
    name = request.param
    root = tmp_path_factory.mktemp(f"parts_{name}") / "p"
    partition_graph(GRAPHS[name](), name, 2, root, part_method="random", num_hops=1)
    return Original(root, name)


def _same(a, b) -> bool:
    def same_dict(x, y):
        return x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)

    ga, gb = a.graph, b.graph
    return (
        torch.equal(ga.indptr, gb.indptr)
        and torch.equal(ga.indices, gb.indices)
        and same_dict(ga.ndata, gb.ndata)
        and same_dict(ga.edata, gb.edata)
        and same_dict(a.node_feats, b.node_feats)
        and same_dict(a.edge_feats, b.edge_feats)
        and (a.graph_name, a.ntypes, a.etypes) == (b.graph_name, b.ntypes, b.etypes)
    )


def _check(original: Original, config: Path, verify: bool = False) -> None:
    """The property: read_config, then each partition, is a named error or the original."""
    with no_writes(config.parent):
        cfg, err = assert_named_error(lambda: read_config(config), config)
        if err is not None:
            return
        assert run_fingerprint(cfg) == original.space, "a changed ID space was read as valid"
        assert cfg.num_parts == original.cfg.num_parts
        if verify:
            assert_named_error(lambda: verify_checksums(config), config.parent)
        for p in range(cfg.num_parts):
            got, err = assert_named_error(lambda: load_partition(config, p, verify=verify), config.parent)
            if err is None:
                assert _same(got, original.parts[p]), f"partition {p} loaded, but not as written"


# -- mutations of the JSON tree -------------------------------------------------------------------------------
NUMBER_EDITS = ["+1", "-1", "*2", "neg", "zero", "float", "str", "list", "bool", "huge", "nan"]
EDIT = st.one_of(
    st.just(("delete", None)),
    json_values(8).map(lambda v: ("set", v)),
    st.sampled_from(NUMBER_EDITS).map(lambda o: ("number", o)),
    st.text(max_size=6).map(lambda k: ("rename", k)),
    HUGE.map(lambda v: ("set", v)),
)


def _edit_number(v, how):
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return [v] if how == "list" else str(v) if how == "str" else None
    return {
        "+1": v + 1,
        "-1": v - 1,
        "*2": v * 2,
        "neg": -v,
        "zero": 0,
        "float": float(v),
        "str": str(v),
        "list": [v],
        "bool": bool(v),
        "huge": v + 2**64,
        "nan": float("nan"),
    }[how]


def _mutate(raw, path, edit):
    doc = copy.deepcopy(raw)
    how, arg = edit
    if not path:
        return arg if how == "set" else [] if how == "delete" else doc
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    key = path[-1]
    if how == "delete":
        del parent[key]
    elif how == "set":
        parent[key] = arg
    elif how == "number":
        parent[key] = _edit_number(parent[key], arg)
    elif isinstance(parent, dict):  # rename a key, keeping the value
        parent[arg] = parent.pop(key)
    return doc


def _where(original: Original, keys=None) -> st.SearchStrategy[tuple]:
    """A place in the JSON tree: a top-level key first (each equally likely), then any place below it."""
    groups = {}
    for p in original.paths:
        if p and (keys is None or p[0] in keys):
            groups.setdefault(p[0], []).append(p)
    return st.sampled_from(sorted(groups)).flatmap(lambda k: st.sampled_from(groups[k])) | st.just(())


def _edits(original: Original):
    return st.tuples(_where(original), EDIT)


@FUZZ
@given(data=st.data())
def test_mutated_json(original, data):
    path, edit = data.draw(_edits(original))
    config = original.root / "mutated.json"
    config.write_text(json.dumps(_mutate(original.raw, path, edit)))
    _check(original, config, verify=data.draw(st.booleans()))


@settings(FUZZ, max_examples=200)
@given(data=st.data())
def test_junk_anywhere(original, data):
    """Cheap (the config alone): any value of any type at any place of the tree."""
    path, junk = data.draw(_where(original)), data.draw(json_values(8) | HUGE)
    config = original.root / "junk.json"
    config.write_text(json.dumps(_mutate(original.raw, path, ("set", junk))))
    with no_writes(original.root):
        cfg, err = assert_named_error(lambda: read_config(config), config)
    assert err is not None or run_fingerprint(cfg) == original.space


@pytest.mark.parametrize("key", ["ntypes", "etypes"])
@pytest.mark.parametrize("junk", ["x", None, [0], 0.0, False, {"a": 1}])
def test_type_ids_of_another_type(original, key, junk):
    """Type IDs are integers: a string or null among them was a raw TypeError; 0.0 or false was accepted."""
    raw = copy.deepcopy(original.raw)
    raw[key][next(iter(raw[key]))] = junk
    config = original.root / "types.json"
    config.write_text(json.dumps(raw))
    _, err = assert_named_error(lambda: read_config(config), config, mentions=(repr(key),))
    assert err is not None


@FUZZ
@given(data=st.data())
def test_damaged_bytes(original, data):
    config = original.root / "damaged.json"
    config.write_bytes(data.draw(damaged(original.text.encode())))
    _check(original, config)


@pytest.mark.parametrize(
    "body",
    [
        nested(100_000),
        nested(100_000, '{"a": ', "}"),
        "[" * 10,
        '"\\ud800"',
        "\xff\xfe",
        '{"format_version": 1' + "0" * 5000 + "}",
        "NaN",
        "",
        " " * 100,
    ],
)
def test_malformed_documents(original, body):
    config = original.root / "bad.json"
    config.write_bytes(body.encode("utf-8", "surrogatepass"))
    _check(original, config)


def test_a_directory_or_a_missing_file_is_named(original):
    for path in (original.root / "part0", original.root / "missing.json"):
        _check(original, path)


# -- mutations made consistent again --------------------------------------------------------------------------
def _restamp(root: Path, raw) -> None:
    """Recompute ``run_fingerprint`` from the edited JSON and stamp it into every part file with fresh
    checksums, when the edit left enough of the JSON to do so."""
    try:
        canonical = json.dumps({k: raw[k] for k in FINGERPRINT_FIELDS}, sort_keys=True, separators=(",", ":"))
    except (KeyError, TypeError, ValueError):
        return
    raw["run_fingerprint"] = hashlib.sha256(canonical.encode()).hexdigest()
    from graphshard.format.tensorfile import sha256_file

    for f in sorted(root.glob("part*/*.safetensors")):
        retag(f, run_fingerprint=raw["run_fingerprint"])
        if isinstance(raw.get("checksums"), dict):
            raw["checksums"][str(f.relative_to(root))] = sha256_file(f)


@FUZZ
@given(data=st.data())
def test_mutated_and_restamped(original, data):
    path = data.draw(_where(original, FINGERPRINT_FIELDS))
    edit = data.draw(EDIT)
    work = Path(tempfile.mkdtemp(dir=original.root.parent))
    try:
        root = work / "p"
        shutil.copytree(original.root, root, ignore=shutil.ignore_patterns("*.json"))
        raw = _mutate(original.raw, path, edit)
        if isinstance(raw, dict):
            _restamp(root, raw)
        config = root / original.config.name
        config.write_text(json.dumps(raw))
        with no_writes(root):
            cfg, err = assert_named_error(lambda: read_config(config), config)
            if err is not None:
                return
            for p in range(cfg.num_parts):
                got, err = assert_named_error(lambda: load_partition(config, p), root)
                if err is None:  # the files fit this config: it must describe them as written
                    assert _same(got, original.parts[p])
                    if cfg.halo_hops == original.cfg.halo_hops:  # a deeper claim is not checked (see validate.py)
                        assert run_fingerprint(cfg) == original.space, "partition loaded under another ID space"
    finally:
        shutil.rmtree(work)
