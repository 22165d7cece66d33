"""Output directories: never replace a user's directory, one graph per partition directory, full disks."""

from __future__ import annotations

import errno

import numpy as np
import pytest

from graphshard import InputError, load_partition, partition_graph
from graphshard.chunked.writer import chunk_graph
from graphshard.cli import main
from graphshard.datasets import Dataset, community_graph, save_dataset
from graphshard.errors import WriteError
from graphshard.pipeline.assign import assign_chunked
from graphshard.pipeline.parmetis import export_parmetis
from tests.graphs import small_hetero, small_homo
from tests.robustness.conftest import snapshot


def _writers(tmp_path):
    """Each writer of a whole output, as a function of (out, overwrite)."""
    chunked = tmp_path / "src-chunked"
    chunk_graph(small_homo(), chunked, 2, "numpy", graph_name="src")
    return {
        "partition_graph": lambda out, ow: partition_graph(small_homo(), "g", 2, out, part_method="random", overwrite=ow),
        "chunk_graph": lambda out, ow: chunk_graph(small_homo(), out, 2, "numpy", overwrite=ow),
        "save_dataset": lambda out, ow: save_dataset(Dataset("d", small_homo(), 2), out, overwrite=ow),
        "assign_chunked": lambda out, ow: assign_chunked(chunked, out, 2, overwrite=ow),
        "export_parmetis": lambda out, ow: export_parmetis(chunked, out, overwrite=ow),
    }


@pytest.mark.parametrize("writer", ["partition_graph", "chunk_graph", "save_dataset", "assign_chunked", "export_parmetis"])
def test_user_directory_is_refused_and_untouched(tmp_path, user_dir, writer):
    write = _writers(tmp_path)[writer]
    before, around = snapshot(user_dir), snapshot(user_dir.parent)
    with pytest.raises(InputError, match=str(user_dir)) as exc:
        write(user_dir, False)
    assert "--overwrite" in str(exc.value) and "thesis.tex" in str(exc.value)
    assert snapshot(user_dir) == before and snapshot(user_dir.parent) == around


@pytest.mark.parametrize("writer", ["partition_graph", "chunk_graph", "save_dataset", "assign_chunked", "export_parmetis"])
def test_own_output_is_rewritten_and_regular_file_refused(tmp_path, writer):
    write = _writers(tmp_path)[writer]
    out = tmp_path / "out"
    write(out, False)
    write(out, False)  # its own earlier output: replaced without --overwrite
    target = tmp_path / "a-file"
    target.write_text("not a directory")
    with pytest.raises(InputError, match="a-file: output path exists and is not a directory"):
        write(target, True)
    assert target.read_text() == "not a directory"


@pytest.mark.parametrize("writer", ["chunk_graph", "save_dataset"])
def test_overwrite_replaces_only_the_target(tmp_path, user_dir, writer):
    sibling = user_dir.parent / "sibling.txt"
    sibling.write_text("outside")
    _writers(tmp_path)[writer](user_dir, True)
    assert not (user_dir / "thesis.tex").exists() and sibling.read_text() == "outside"
    assert sorted(p.name for p in user_dir.parent.iterdir()) == ["mine", "sibling.txt"]  # no staging left


def test_other_kind_of_output_is_refused(tmp_path):
    save_dataset(Dataset("d", small_homo(), 2), tmp_path / "data")
    with pytest.raises(InputError, match="holds graphshard dataset output, not chunked"):
        chunk_graph(small_homo(), tmp_path / "data", 2)
    assert (tmp_path / "data" / "meta.json").is_file()


def test_cli_refuses_user_directory_with_one_line(tmp_path, user_dir, capsys):
    before = snapshot(user_dir)
    assert main(["generate", "community", "--nodes", "300", "--out", str(user_dir)]) == 2
    assert main(["generate", "community", "--nodes", "300", "--out", str(tmp_path / "d")]) == 0
    for argv in (["chunk", "--dataset", str(tmp_path / "d"), "--out", str(user_dir), "--num-chunks", "2"],
                 ["partition", "--dataset", str(tmp_path / "d"), "--num-parts", "2", "--out", str(user_dir)]):
        capsys.readouterr()
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("graphshard: error:") and str(user_dir) in err and "Traceback" not in err
    assert snapshot(user_dir) == before
    assert main(["chunk", "--dataset", str(tmp_path / "d"), "--out", str(user_dir), "--num-chunks", "2",
                 "--overwrite"]) == 0
    assert (user_dir / "metadata.json").is_file()


def test_two_graphs_never_share_a_partition_directory(tmp_path):
    first, second = small_homo(0), community_graph(num_nodes=200, seed=4).graph
    partition_graph(first, "first", 2, tmp_path / "p", part_method="random")
    with pytest.raises(InputError, match="first.json"):
        partition_graph(second, "second", 2, tmp_path / "p", part_method="random")
    assert sum(load_partition(tmp_path / "p" / "first.json", p).graph.num_inner_nodes for p in range(2)) == first.total_nodes
    partition_graph(second, "second", 2, tmp_path / "p", part_method="random", overwrite=True)
    assert not (tmp_path / "p" / "first.json").exists()  # stale: its files were replaced
    assert sum(load_partition(tmp_path / "p" / "second.json", p).graph.num_inner_nodes for p in range(2)) == 200


def _enospc_after(monkeypatch, module, name, calls_before_failure):
    real, calls = getattr(module, name), []

    def flaky(path, *args, **kwargs):
        calls.append(path)
        if len(calls) > calls_before_failure:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, *args, **kwargs)
    monkeypatch.setattr(module, name, flaky)


def test_full_disk_during_partition_keeps_previous_output(tmp_path, monkeypatch):
    import graphshard.format.write as write
    out = tmp_path / "p"
    partition_graph(small_homo(), "g", 2, out, part_method="random")
    before = snapshot(out)
    _enospc_after(monkeypatch, write, "write_tensors", 3)
    with pytest.raises(WriteError, match="No space left on device") as exc:
        partition_graph(small_homo(1), "g", 2, out, part_method="random")
    assert ".staging-g-" in str(exc.value)  # names the file it was writing
    assert snapshot(out) == before  # no staging directory left, the earlier output intact


@pytest.mark.parametrize("writer", ["chunk_graph", "save_dataset"])
def test_full_disk_during_chunk_or_generate_leaves_nothing(tmp_path, monkeypatch, writer):
    write = _writers(tmp_path)[writer]
    _enospc_after(monkeypatch, np, "save", 1)
    with pytest.raises(WriteError, match="No space left on device") as exc:
        write(tmp_path / "out", False)
    assert ".npy" in str(exc.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src-chunked"]  # no temporary directory left


def test_cli_full_disk_is_one_line(tmp_path, monkeypatch, capsys):
    import graphshard.format.write as write
    main(["generate", "community", "--nodes", "300", "--out", str(tmp_path / "d")])
    _enospc_after(monkeypatch, write, "write_tensors", 0)
    capsys.readouterr()
    assert main(["partition", "--dataset", str(tmp_path / "d"), "--num-parts", "2", "--out", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err
    assert "No space left on device" in err and "Traceback" not in err
    assert not any(p.name.endswith(".json") and not p.name.startswith(".") for p in (tmp_path / "p").iterdir())
