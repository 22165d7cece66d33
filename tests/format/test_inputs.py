"""A --dataset directory that is not there is named as such (with close names beside it), by every
command and function that takes one."""

from __future__ import annotations

import pytest

from graphshard.chunked.spec import read_metadata
from graphshard.cli import main
from graphshard.datasets import load_dataset
from graphshard.datasets.ogb import load_ogb
from graphshard.errors import InputError

COMMANDS = {
    "partition": ["partition", "--num-parts", "2", "--out", "OUT/p"],
    "chunk": ["chunk", "--num-chunks", "2", "--out", "OUT/c"],
    "assign": ["assign", "--num-parts", "2", "--out", "OUT/a"],
    "plan": ["plan", "--num-parts", "2"],
    "parmetis export": ["parmetis", "export", "--out", "OUT/pm"],
    "train": ["train", "--num-procs", "1", "--work-dir", "OUT/w"],
}


@pytest.fixture
def shared(tmp_path, monkeypatch):
    """``../shared/data`` as the README has it, with three datasets; the tests run from beside it."""
    for name in ("cora", "citeseer", "coauthor"):
        (tmp_path / "shared" / "data" / name).mkdir(parents=True)
    (tmp_path / "main").mkdir()
    monkeypatch.chdir(tmp_path / "main")
    return tmp_path


@pytest.mark.parametrize("command", list(COMMANDS))
def test_typo_in_dataset_is_no_such_directory(shared, capsys, command):
    argv = [a.replace("OUT", str(shared / "out")) for a in COMMANDS[command]]
    capsys.readouterr()
    assert main(argv + ["--dataset", "../shared/data/coar"]) == 2
    assert capsys.readouterr().err == (
        "graphshard: error: ../shared/data/coar: no such directory (did you mean "
        "../shared/data/cora or ../shared/data/coauthor?)\n"
    )
    assert not (shared / "out").exists()


def test_missing_parent_and_no_close_name(shared):
    for read in (load_dataset, read_metadata, load_ogb):
        with pytest.raises(
            InputError,
            match=r"^\.\./shared/dta/cora: no such directory \(\.\./shared/dta does not "
            r"exist either; did you mean \.\./shared/data\?\)$",
        ):
            read("../shared/dta/cora")
        with pytest.raises(InputError, match=r"^\.\./shared/data/zzz: no such directory$"):
            read("../shared/data/zzz")
    with pytest.raises(
        InputError,
        match=r"^\.\./shared/data/cora2: no such directory \(did you mean "
        r"\.\./shared/data/cora\?\)$",
    ):
        read_metadata("../shared/data/cora2/metadata.json")  # a metadata file named in a missing directory


def test_a_file_is_not_a_directory(shared):
    (shared / "shared" / "data" / "notes.txt").write_text("x\n")
    with pytest.raises(InputError, match=r"^\.\./shared/data/notes.txt: not a directory$"):
        load_dataset("../shared/data/notes.txt")


def test_an_existing_directory_still_says_what_it_lacks(shared):
    with pytest.raises(InputError, match=r"cora/meta.json: missing \(not a dataset directory"):
        load_dataset("../shared/data/cora")
