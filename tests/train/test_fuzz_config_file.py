"""Fuzzing ``graphshard train --config FILE`` (:func:`read_config_file`): random YAML and JSON documents --
real keys, near-miss spellings, wrong types, nested junk, non-mappings, tags PyYAML cannot construct,
anchors that expand exponentially, invalid bytes, huge numbers, NaN -- are read into options or refused
with an :class:`InputError` naming the file (and the key or line at fault); valid configurations read
back exactly."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st

from graphshard.errors import InputError
from graphshard.tasks.fields import Spec, coerce
from graphshard.train.config_file import build_options, option_specs, read_config_file
from tests.fuzz_helpers import FUZZ, HUGE, assert_named_error, damaged, json_values, near_misses, nested, no_writes

yaml = pytest.importorskip("yaml")

SPECS = {k: s for k, s in option_specs().items() if s.cli or s.config_only}  # the config file's keys
KEYS = sorted(SPECS)
SUFFIXES = (".yaml", ".yml", ".json")


@pytest.fixture(scope="module")
def where(tmp_path_factory):
    return tmp_path_factory.mktemp("config")


def _read(where, suffix: str, data: bytes, mentions: tuple[str, ...] = ()):
    path = where / f"run{suffix}"
    path.write_bytes(data)
    with no_writes(where):
        got, err = assert_named_error(lambda: read_config_file(path), path, mentions=mentions)
    if err is not None:
        assert isinstance(err, InputError), err
        return None
    assert isinstance(got, dict)
    for name, value in got.items():  # only real keys, each a value of its option's type
        assert name in SPECS, name
        assert coerce(SPECS[name], value) == value
    try:
        build_options(got)
    except InputError:
        pass  # options that do not fit together: named by build_options, not a reader failure
    return got


def _dump(doc, suffix: str) -> bytes:
    if suffix == ".json":
        return json.dumps(doc).encode()
    return yaml.safe_dump(doc, allow_unicode=True, sort_keys=False).encode()


# -- valid files read back exactly ------------------------------------------------------------------------------
def _valid(spec: Spec) -> st.SearchStrategy:
    if spec.choices:
        base = st.sampled_from(spec.choices)
    elif spec.kind == "int":
        lo = -(2**63) if spec.low is None else int(spec.low) + spec.open_low
        hi = 2**63 - 1 if spec.high is None or math.isinf(spec.high) else int(spec.high) - spec.open_high
        base = st.integers(lo, hi)
    elif spec.kind == "float":
        base = st.floats(
            spec.low,
            None if spec.high is None or math.isinf(spec.high) else spec.high,
            exclude_min=spec.open_low and spec.low is not None,
            exclude_max=spec.open_high and spec.high is not None and not math.isinf(spec.high),
            allow_nan=False,
            allow_infinity=spec.high is None,
        )
    elif spec.kind == "bool":
        base = st.booleans()
    elif spec.kind == "str":
        base = st.text(st.characters(codec="utf-8"), min_size=1, max_size=20)
    elif spec.kind == "ints":
        base = st.lists(
            st.integers(spec.int_items[0], 2**40) | st.just(spec.int_items[1])
            if spec.int_items
            else st.integers(-(2**40), 2**40),
            min_size=1,
            max_size=4,
        )
    elif spec.kind == "records":  # mappings of names to values (a config file's tasks)
        name = st.text(st.characters(codec="utf-8"), min_size=1, max_size=8)
        base = st.lists(st.dictionaries(name, st.integers() | name, max_size=3), min_size=1, max_size=3)
    else:
        base = st.lists(st.text(st.characters(codec="utf-8"), min_size=1, max_size=8), min_size=1, max_size=4)
    return base | st.none() if spec.optional else base


VALID = st.lists(st.sampled_from(KEYS), max_size=8, unique=True).flatmap(
    lambda names: st.fixed_dictionaries({n: _valid(SPECS[n]) for n in names})
)


@FUZZ
@given(VALID, st.sampled_from(SUFFIXES), st.booleans())
def test_valid_files_read_back_exactly(where, values, suffix, dashes):
    doc = {k.replace("_", "-") if dashes else k: v for k, v in values.items()}
    data = _dump(doc, suffix)
    # PyYAML's dumper writes a NEL (U+0085) as a raw line break, which any YAML reader folds into a space: such a
    # file does not hold the values, so it is no case of reading them back
    assume(suffix == ".json" or yaml.safe_load(data) == doc)
    assert _read(where, suffix, data) == values


# -- junk -------------------------------------------------------------------------------------------------------
KEY = (
    st.sampled_from(KEYS)
    | st.sampled_from(KEYS).flatmap(near_misses)
    | st.text(max_size=10)
    | st.integers()
    | st.none()
)


@FUZZ
@given(st.dictionaries(KEY, json_values(), max_size=6) | json_values(), st.sampled_from(SUFFIXES))
def test_random_documents(where, doc, suffix):
    try:
        data = _dump(doc, suffix)
    except (TypeError, ValueError, yaml.YAMLError):  # not representable (e.g. a null key in JSON): skip
        return
    _read(where, suffix, data)


@FUZZ
@given(st.sampled_from(KEYS).flatmap(near_misses), st.sampled_from(SUFFIXES))
@example("\x85llow_nonfinite", ".yaml")  # found by CI: PyYAML reads this key back as " llow_nonfinite"
def test_misspelt_keys_are_named(where, key, suffix):
    data = _dump({key: 1}, suffix)
    # the key as the format itself reads it back (YAML folds a NEL, U+0085, into a space: the file holds that)
    key = next(iter(json.loads(data) if suffix == ".json" else yaml.safe_load(data)))
    got = _read(where, suffix, data, mentions=() if key.replace("-", "_") in SPECS else ("unknown key", repr(key)))
    assert got is None or key.replace("-", "_") in SPECS


SCALAR_TEXT = st.sampled_from(
    [
        "!!int ",
        "!!float ",
        "!!bool ",
        "!!timestamp ",
        "!!binary ",
        "!!null ",
        "!!str ",
        "!!set ",
        "!!omap ",
        "!!python/object:os.system ",
        "&a ",
        "*a ",
        "<<: ",
        "? ",
        "- ",
        "",
    ]
).flatmap(
    lambda tag: st.text(st.sampled_from("0123456789-_:.+eExXoObB ,[]{}'\"#&*!|>%@`tTzZaf\t\\"), max_size=14).map(
        lambda s: tag + s
    )
)
DATES = st.sampled_from(
    [
        "2001-13-45",
        "2001-02-30",
        "2001-01-01 25:00:00",
        "2001-01-01t1:61:1",
        "9999-99-99",
        "2001-01-01 1:1:1 +99:99",
        "0000-00-00",
        "1:60:60",
        "!!int 0x",
        "!!float .",
        "!!int _",
        "!!int 0o9",
        "!!bool maybe",
        "!!timestamp soon",
        "!!int " + "9" * 5000,
        "9" * 5000,
    ]
)


@FUZZ
@given(
    st.lists(st.tuples(st.sampled_from(KEYS) | KEY.map(str), SCALAR_TEXT | DATES), min_size=1, max_size=4),
    st.sampled_from([".yaml", ".yml"]),
)
def test_yaml_scalars_and_tags(where, lines, suffix):
    text = "".join(f"{k}: {v}\n" for k, v in lines)
    _read(where, suffix, text.encode())


@pytest.mark.parametrize(
    "text",
    [
        "epochs: 2001-13-45\n",
        "seed: !!int 0x\n",
        "lr: !!float abc\n",
        "lr: !!bool maybe\n",
        "seed: !!timestamp soon\n",
        "seed: !!int ''\n",
        "seed: 9" + "9" * 5000 + "\n",
    ],
)
def test_yaml_values_pyyaml_cannot_construct_name_the_line(where, text):
    _read(where, ".yaml", b"epochs: 3\n" + text.encode(), mentions=("line 2",))


@FUZZ
@given(
    st.sampled_from(KEYS),
    st.one_of(HUGE, st.sampled_from([math.nan, math.inf, -math.inf])),
    st.sampled_from(SUFFIXES),
    st.booleans(),
)
def test_huge_numbers_and_nan(where, key, number, suffix, in_list):
    value = [number] if in_list else number
    got = _read(where, suffix, _dump({key: value}, suffix))
    if got is not None and isinstance(got[key], int):
        assert -(2**63) <= got[key] < 2**63  # an integer option holds a 64-bit integer


@FUZZ
@given(
    st.sampled_from(SUFFIXES),
    st.integers(1, 9),
    st.integers(1, 9),
    st.sampled_from(["fanouts", "split_masks", "epochs"]),
)
def test_aliases_expanding_exponentially_are_refused_quickly(where, suffix, width, depth, key):
    """The "billion laughs": a few lines of anchors and aliases make a list of width ** depth items. The error
    message shows a bounded part of it (the deadline catches a reader that prints it all)."""
    text = f"{key}: [&a0 [" + ",".join(["x"] * width) + "]"
    for i in range(1, depth):
        text += f", &a{i} [" + ",".join([f"*a{i - 1}"] * width) + "]"
    _read(where, ".yaml" if suffix == ".json" else suffix, (text + "]\n").encode())


@pytest.mark.parametrize("suffix", SUFFIXES[1:])
@pytest.mark.parametrize("depth", [50, 5000])
@pytest.mark.parametrize("brackets", ["[]", "{}"])
def test_deep_nesting(where, suffix, depth, brackets):
    body = nested(depth, '{"k": ', "}") if brackets == "{}" else nested(depth)
    _read(where, suffix, f'{{"fanouts": {body}}}'.encode())


VALID_DOC = st.tuples(VALID, st.sampled_from(SUFFIXES)).map(lambda a: (_dump(a[0], a[1]), a[1]))


@FUZZ
@given(VALID_DOC.flatmap(lambda d: st.tuples(damaged(d[0]), st.just(d[1]))))
def test_damaged_files(where, damaged_doc):
    data, suffix = damaged_doc
    _read(where, suffix, data)


@FUZZ
@given(st.binary(max_size=64), st.sampled_from([*SUFFIXES, ".txt", ""]))
def test_random_bytes(where, data, suffix):
    _read(where, suffix, data)


def test_a_directory_or_a_missing_file_is_named(where):
    (where / "dir.yaml").mkdir(exist_ok=True)
    for path in (where / "dir.yaml", where / "missing.yaml"):
        _, err = assert_named_error(lambda: read_config_file(path), path)
        assert isinstance(err, InputError)
