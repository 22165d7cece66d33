"""Output directories: never replace a user's directory, one graph per partition directory, full disks."""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from graphshard import InputError, load_partition, partition_graph
from graphshard.chunked.spec import read_metadata
from graphshard.chunked.writer import chunk_graph
from graphshard.cli import main
from graphshard.datasets import Dataset, community_graph, load_dataset, save_dataset
from graphshard.errors import GraphshardError, WriteError
from graphshard.format.outputs import MARKER
from graphshard.pipeline.assign import assign_chunked
from graphshard.pipeline.dispatch import DispatchOptions, run_dispatch
from graphshard.pipeline.parmetis import export_parmetis
from tests.graphs import small_hetero, small_homo
from tests.robustness.conftest import snapshot

WRITERS = ["partition_graph", "chunk_graph", "save_dataset", "assign_chunked", "export_parmetis"]


def _writers(tmp_path):
    """Each writer of a whole output, as a function of (out, overwrite), and a check that its output loads."""
    chunked = tmp_path / "src-chunked"
    chunk_graph(small_homo(), chunked, 2, "numpy", graph_name="src")
    return {
        "partition_graph": lambda out, ow: partition_graph(
            small_homo(), "g", 2, out, part_method="random", overwrite=ow
        ),
        "chunk_graph": lambda out, ow: chunk_graph(small_homo(), out, 2, "numpy", overwrite=ow),
        "save_dataset": lambda out, ow: save_dataset(Dataset("d", small_homo(), 2), out, overwrite=ow),
        "assign_chunked": lambda out, ow: assign_chunked(chunked, out, 2, overwrite=ow),
        "export_parmetis": lambda out, ow: export_parmetis(chunked, out, overwrite=ow),
    }


LOADS = {
    "partition_graph": lambda out: load_partition(out / "g.json", 1).graph.num_inner_nodes > 0,
    "chunk_graph": lambda out: read_metadata(out).num_nodes == {"_N": 240},
    "save_dataset": lambda out: load_dataset(out).graph.total_nodes == 240,
    "assign_chunked": lambda out: len((out / "_N.txt").read_text().split()) == 240,
    "export_parmetis": lambda out: (out / "src_stats.txt").read_text().split()[0] == "240",
}


@pytest.mark.parametrize("writer", WRITERS)
def test_user_directory_is_refused_and_untouched(tmp_path, user_dir, writer):
    write = _writers(tmp_path)[writer]
    around = snapshot(tmp_path)  # the user's directory two levels down, its parents and siblings
    with pytest.raises(InputError, match=str(user_dir)) as exc:
        write(user_dir, False)
    assert "--overwrite" in str(exc.value) and "thesis.tex" in str(exc.value)
    assert snapshot(tmp_path) == around


def test_dispatch_refuses_user_directory_before_starting(tmp_path, user_dir):
    chunk_graph(small_homo(), tmp_path / "c", 2, "numpy", graph_name="g")
    assign_chunked(tmp_path / "c", tmp_path / "a", 2)
    around = snapshot(tmp_path)
    with pytest.raises(InputError, match=f"{user_dir}: refusing to write partitions output"):
        run_dispatch(DispatchOptions(tmp_path / "c", tmp_path / "a", user_dir, 1), num_procs=2, timeout=30)
    assert snapshot(tmp_path) == around


@pytest.mark.parametrize("writer", WRITERS)
def test_own_output_is_rewritten_keeping_files_the_user_added(tmp_path, writer):
    write = _writers(tmp_path)[writer]
    out = tmp_path / "deep" / "er" / "out"
    write(out, False)
    (out / "my-notes.txt").write_bytes(b"\x00results I care about\n")
    write(out, False)  # its own earlier output: rewritten without --overwrite
    assert LOADS[writer](out)
    assert (out / "my-notes.txt").read_bytes() == b"\x00results I care about\n"
    assert not [p for p in tmp_path.rglob("*") if ".tmp-" in p.name or "staging" in p.name]


@pytest.mark.parametrize("writer", WRITERS)
def test_regular_file_is_refused_even_with_overwrite(tmp_path, writer):
    target = tmp_path / "a-file"
    target.write_text("not a directory")
    with pytest.raises(InputError, match="a-file: output path exists and is not a directory"):
        _writers(tmp_path)[writer](target, True)
    assert target.read_text() == "not a directory"


@pytest.mark.parametrize("writer", WRITERS)
def test_overwrite_writes_into_a_user_directory_and_deletes_nothing_else(tmp_path, user_dir, writer):
    write = _writers(tmp_path)[writer]
    before, sibling = snapshot(user_dir), user_dir.parent / "sibling.txt"
    sibling.write_text("outside")
    write(user_dir, True)
    assert LOADS[writer](user_dir)
    after = snapshot(user_dir)
    assert {k: after[k] for k in before} == before  # thesis.tex, notes/todo.txt: byte for byte
    assert sibling.read_text() == "outside"
    assert sorted(p.name for p in user_dir.parent.iterdir()) == ["mine", "sibling.txt"]  # no staging beside


def test_rerun_removes_what_the_previous_output_wrote_and_only_that(tmp_path):
    out = tmp_path / "d"
    save_dataset(Dataset("h", small_hetero(), 4, "paper"), out)
    assert (out / "paper_feat.npy").is_file() and (out / "edges").is_dir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(InputError, match="already holds the dataset of another graph"):
        save_dataset(Dataset("d", small_homo(), 2), out)  # another graph: only with overwrite
    save_dataset(Dataset("d", small_homo(), 2), out, overwrite=True)
    names = sorted(p.name for p in out.iterdir())
    assert "paper_feat.npy" not in names and "edges" not in names and "keep.txt" in names
    assert load_dataset(out).graph.is_homogeneous and (out / "keep.txt").read_text() == "mine"


def test_tampered_marker_cannot_delete_outside(tmp_path):
    out, sibling = tmp_path / "box" / "c", tmp_path / "box" / "sibling.txt"
    chunk_graph(small_homo(), out, 2)
    sibling.write_text("outside")
    marker = json.loads((out / MARKER).read_text())
    marker["entries"] += ["..", "../sibling.txt", "/etc", "../../box"]
    (out / MARKER).write_text(json.dumps(marker))
    chunk_graph(small_homo(), out, 2)
    assert sibling.read_text() == "outside" and read_metadata(out).num_nodes == {"_N": 240}


def test_other_kind_of_output_is_refused(tmp_path):
    save_dataset(Dataset("d", small_homo(), 2), tmp_path / "data")
    before = snapshot(tmp_path)
    with pytest.raises(InputError, match="holds graphshard dataset output, not chunked"):
        chunk_graph(small_homo(), tmp_path / "data", 2)
    assert snapshot(tmp_path) == before


def test_killed_run_leaves_a_directory_the_next_run_takes_back(tmp_path):
    """What a killed first run leaves (marker + staging of a dead process) is neither complete nor foreign."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    out = tmp_path / "c"
    out.mkdir()
    (out / MARKER).write_text(json.dumps({"created_by": "graphshard", "kind": "chunked"}))
    stale = out / f".graphshard-staging-{int(dead.stdout)}-abc"
    (stale / "edges").mkdir(parents=True)
    with pytest.raises(GraphshardError):
        read_metadata(out)  # nothing there looks finished
    chunk_graph(small_homo(), out, 2)
    assert not stale.exists() and read_metadata(out).num_nodes == {"_N": 240}


CLI_CASES = {
    "generate": lambda t, out: ["generate", "community", "--nodes", "300", "--out", out],
    "chunk": lambda t, out: ["chunk", "--dataset", str(t / "d"), "--out", out, "--num-chunks", "2"],
    "partition": lambda t, out: [
        "partition",
        "--dataset",
        str(t / "d"),
        "--num-parts",
        "2",
        "--out",
        out,
        "--method",
        "random",
    ],
    "assign": lambda t, out: ["assign", "--in-dir", str(t / "c"), "--out-dir", out, "--num-parts", "2"],
    "parmetis export": lambda t, out: ["parmetis", "export", "--in-dir", str(t / "c"), "--out-dir", out],
    "parmetis import": lambda t, out: [
        "parmetis",
        "import",
        "--in-dir",
        str(t / "c"),
        "--parmetis-dir",
        str(t / "pm"),
        "--out-dir",
        out,
    ],
    "dispatch": lambda t, out: [
        "dispatch",
        "--in-dir",
        str(t / "c"),
        "--partitions-dir",
        str(t / "a"),
        "--out-dir",
        out,
        "--num-procs",
        "2",
        "--timeout",
        "60",
    ],
}


@pytest.fixture
def cli_inputs(tmp_path):
    """Inputs for every writing command: a dataset, its chunked form, assignment and ParMETIS outputs."""
    assert main(["generate", "community", "--nodes", "300", "--out", str(tmp_path / "d")]) == 0
    chunk_graph(load_dataset(tmp_path / "d").graph, tmp_path / "c", 2, graph_name="g")
    assign_chunked(tmp_path / "c", tmp_path / "a", 2)
    (tmp_path / "pm").mkdir()
    rows = np.column_stack([np.arange(300), np.zeros(300), np.ones(300), np.arange(300), np.arange(300) % 2])
    np.savetxt(tmp_path / "pm" / "p0-g_nodes.txt", rows, fmt="%d")
    return tmp_path


@pytest.mark.parametrize("command", list(CLI_CASES))
def test_cli_refuses_user_directory_with_one_line_and_overwrite_writes(cli_inputs, user_dir, capsys, command):
    argv = CLI_CASES[command](cli_inputs, str(user_dir))
    before = snapshot(cli_inputs)
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("graphshard: error:") and err.count("\n") == 1 and "Traceback" not in err
    assert str(user_dir) in err and "--overwrite" in err
    assert snapshot(cli_inputs) == before
    if command == "dispatch":
        return  # the multi-process dispatch run itself is covered by tests/pipeline/test_dispatch.py
    assert main(argv + ["--overwrite"]) == 0
    after = snapshot(user_dir)
    assert after["thesis.tex"] == b"years of work\n" and after["notes/todo.txt"] == b"keep me\n"
    assert (user_dir / MARKER).is_file()


def test_two_graphs_never_share_a_partition_directory(tmp_path):
    first, second = small_homo(0), community_graph(num_nodes=200, seed=4).graph
    nids, _ = partition_graph(first, "first", 2, tmp_path / "p", part_method="random", return_mapping=True)
    before = snapshot(tmp_path)
    with pytest.raises(
        InputError,
        match=f"{tmp_path / 'p'}: already holds the partitions of another graph "
        r"\(first.json\)",
    ):
        partition_graph(second, "second", 2, tmp_path / "p", part_method="random")
    assert snapshot(tmp_path) == before
    feats = np.concatenate(
        [load_partition(tmp_path / "p" / "first.json", p).node_feats["_N/feat"].numpy() for p in range(2)]
    )
    np.testing.assert_array_equal(feats, first.node_feats["_N"]["feat"][nids.numpy()])  # first's own rows
    partition_graph(second, "second", 2, tmp_path / "p", part_method="random", overwrite=True)
    assert not (tmp_path / "p" / "first.json").exists()  # stale: its files were replaced
    assert sum(load_partition(tmp_path / "p" / "second.json", p).graph.num_inner_nodes for p in range(2)) == 200


def test_two_graphs_cli_and_dispatch_name_the_other_config(cli_inputs, capsys):
    out = cli_inputs / "p"
    assert (
        main(
            [
                "partition",
                "--dataset",
                str(cli_inputs / "d"),
                "--num-parts",
                "2",
                "--out",
                str(out),
                "--graph-name",
                "first",
                "--method",
                "random",
            ]
        )
        == 0
    )
    before = snapshot(out)
    capsys.readouterr()
    assert (
        main(
            [
                "partition",
                "--dataset",
                str(cli_inputs / "d"),
                "--num-parts",
                "2",
                "--out",
                str(out),
                "--graph-name",
                "second",
                "--method",
                "random",
            ]
        )
        == 2
    )
    assert "first.json" in capsys.readouterr().err
    with pytest.raises(InputError, match=r"another graph \(first.json\)"):  # chunked graph 'g' into first's directory
        run_dispatch(DispatchOptions(cli_inputs / "c", cli_inputs / "a", out, 1), num_procs=2, timeout=30)
    assert snapshot(out) == before


def _enospc_after(monkeypatch, module, name, calls_before_failure, with_filename=True):
    """Make ``module.name`` fail like a full disk after some calls (as ``write()`` does: without a file
    name unless ``with_filename``)."""
    real, calls = getattr(module, name), []

    def flaky(path, *args, **kwargs):
        calls.append(path)
        if len(calls) > calls_before_failure:
            if with_filename:
                raise OSError(errno.ENOSPC, "No space left on device", str(path))
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(module, name, flaky)


@pytest.mark.parametrize("with_filename", [True, False])
def test_full_disk_during_partition_keeps_previous_output(tmp_path, monkeypatch, with_filename):
    import graphshard.format.write as write

    out = tmp_path / "deep" / "p"
    partition_graph(small_homo(), "g", 2, out, part_method="random")
    before = snapshot(tmp_path)
    _enospc_after(monkeypatch, write, "write_tensors", 3, with_filename)
    with pytest.raises(WriteError, match=rf"{out}/part1/\w+\.safetensors: No space left on device"):
        partition_graph(small_homo(1), "g", 2, out, part_method="random")
    assert snapshot(tmp_path) == before  # no staging directory left, the earlier output intact
    assert load_partition(out / "g.json", 1, verify=True).graph.num_inner_nodes > 0


def test_full_disk_in_a_new_partition_directory_leaves_nothing(tmp_path, monkeypatch):
    import graphshard.format.write as write

    _enospc_after(monkeypatch, write, "write_tensors", 1, with_filename=False)
    with pytest.raises(WriteError, match="No space left on device"):
        partition_graph(small_homo(), "g", 2, tmp_path / "p", part_method="random")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("writer", ["chunk_graph", "save_dataset"])
@pytest.mark.parametrize("with_filename", [True, False])
def test_full_disk_during_chunk_or_generate(tmp_path, monkeypatch, writer, with_filename):
    write = _writers(tmp_path)[writer]
    out = tmp_path / "a" / "b" / "out"
    write(tmp_path / "earlier", False)
    before = snapshot(tmp_path)
    _enospc_after(monkeypatch, np, "save", 1, with_filename)
    for target in (out, tmp_path / "earlier"):
        with pytest.raises(WriteError, match=rf"{target}/[\w/-]+\.npy: No space left on device") as exc:
            write(target, False)
        assert "staging" not in str(exc.value)
    assert snapshot(tmp_path) == before  # no new directories, nothing temporary, the earlier output intact
    monkeypatch.undo()
    assert LOADS[writer](tmp_path / "earlier")


def test_full_disk_during_assign_names_the_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    import graphshard.pipeline.assignment_files as files

    first, second = chunk_graph(small_hetero(), tmp_path / "c", 2).ntypes[:2]
    _enospc_after(monkeypatch, files, "_write_parts", 1, with_filename=False)
    with pytest.raises(WriteError, match=rf"{tmp_path / 'a' / second}.txt: No space left on device"):
        assign_chunked(tmp_path / "c", tmp_path / "a", 2)
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == [MARKER, f"{first}.txt"]  # no meta, no temporary


@pytest.mark.parametrize("command", ["generate", "chunk", "partition"])
def test_cli_full_disk_is_one_line(cli_inputs, monkeypatch, capsys, command):
    import graphshard.format.write as write

    if command == "partition":
        _enospc_after(monkeypatch, write, "write_tensors", 0, with_filename=False)
    else:
        _enospc_after(monkeypatch, np, "save", 0, with_filename=False)
    out = cli_inputs / "new" / "out"
    capsys.readouterr()
    assert main(CLI_CASES[command](cli_inputs, str(out))) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"graphshard: error: {out}/") and "No space left on device" in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (cli_inputs / "new").exists()


def test_train_refuses_to_replace_a_user_directory_with_embeddings(tmp_path, user_dir):
    from graphshard.train import TrainOptions, train

    partition_graph(small_homo(), "g", 1, tmp_path / "p", part_method="random")
    before = snapshot(tmp_path)
    with pytest.raises(InputError, match=f"{user_dir}: refusing to write embeddings output"):
        train(
            TrainOptions(part_config=str(tmp_path / "p" / "g.json"), epochs=1, save_embeddings=str(user_dir)),
            num_procs=1,
        )
    assert snapshot(tmp_path) == before


# -- a really full disk: the tools' own words for it become "No space left on device" naming the file ----------
def _numpy_short_write(monkeypatch):
    """``np.save`` as it fails on a full disk: NumPy's own ``tofile`` into a device that takes nothing, which
    raises NumPy's bare ``OSError('<n> requested and 0 written')`` (no errno, no file name)."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")

    def save(path, arr, allow_pickle=False):
        with open("/dev/full", "wb", buffering=0) as f:
            np.zeros(1 << 16, np.int64).tofile(f)  # more than stdio buffers: the write itself fails

    with pytest.raises(OSError, match=r"^65536 requested and 0 written$") as exc:
        save(None, None)  # what the real NumPy says: the case this test stands for
    assert exc.value.errno is None and exc.value.filename is None
    monkeypatch.setattr(np, "save", save)


@pytest.mark.parametrize("command", ["chunk", "generate"])
def test_numpy_short_write_on_a_full_disk_says_so(cli_inputs, monkeypatch, capsys, command):
    import graphshard.format.staging as staging

    _numpy_short_write(monkeypatch)
    out = cli_inputs / "new" / "out"
    before = snapshot(cli_inputs)
    monkeypatch.setattr(staging, "free_bytes", lambda path: 0)  # the file system that short write filled
    capsys.readouterr()
    assert main(CLI_CASES[command](cli_inputs, str(out))) == 2
    err = capsys.readouterr().err
    first = "edges/_N___E___N/chunk-0.npy" if command == "chunk" else "src.npy"
    assert (
        err == f"graphshard: error: {out}/{first}: No space left on device while writing {out}; nothing was "
        "published there\n"
    )
    assert snapshot(cli_inputs) == before
    monkeypatch.setattr(staging, "free_bytes", lambda path: 10 << 30)  # room left: a quota, not a full disk
    assert main(CLI_CASES[command](cli_inputs, str(out))) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"graphshard: error: {out}/{first}: short write (0 of ") and "items written" in err


def test_pyarrow_full_disk_says_so(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    def full(table, where, **kwargs):  # pyarrow's words for ENOSPC, as it raises them
        raise OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28] No space left on device")

    monkeypatch.setattr(pq, "write_table", full)
    out = tmp_path / "out"
    with pytest.raises(WriteError) as exc:
        chunk_graph(small_homo(), out, 2, "parquet")
    assert str(exc.value) == (
        f"{out}/edges/_N___E___N/chunk-0.parquet: No space left on device while writing {out}; "
        "nothing was published there"
    )
    assert not out.exists()


@pytest.fixture
def tiny_tmpfs(tmp_path):
    """A 1 MiB tmpfs (needs root and mount rights; skipped elsewhere)."""
    where = tmp_path / "tiny"
    where.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)], capture_output=True
        ).returncode
        != 0
    ):
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)


@pytest.mark.parametrize("fmt", ["numpy", "csv", "parquet"])
def test_chunk_into_a_really_full_tmpfs(cli_inputs, tiny_tmpfs, capsys, fmt):
    big = community_graph(num_nodes=3000, feat_dim=64, seed=1)  # about 1 MiB of features alone
    save_dataset(big, cli_inputs / "big")
    out = tiny_tmpfs / "c"
    capsys.readouterr()
    assert (
        main(["chunk", "--dataset", str(cli_inputs / "big"), "--out", str(out), "--num-chunks", "2", "--format", fmt])
        == 2
    )
    err = capsys.readouterr().err
    assert re.fullmatch(
        rf"graphshard: error: {out}/[\w/]+/chunk-\d\.(npy|csv|parquet): No space left on device "
        rf"while writing {out}; nothing was published there\n",
        err,
    ), err
    assert list(tiny_tmpfs.iterdir()) == []  # nothing left behind


# -- one rule for every writer: a directory holds one graph's output; another graph needs --overwrite ----------
def _rule(out, what, held, graph, replaced="it"):
    """The message of the one rule (format/outputs.check_same_graph), as partition has always worded it."""
    return (
        f"{out}: already holds the {what} of another graph ({held}); writing {graph!r} here would replace "
        f"{replaced}. Use another directory, or pass --overwrite to replace {'it' if replaced == 'it' else 'them'}"
    )


SECOND_GRAPH = {  # command -> (first writes graph A into OUT, second writes graph B there, what the rule says)
    "generate": (
        ["generate", "rmat", "--scale", "7", "--out", "OUT"],
        ["generate", "community", "--nodes", "300", "--out", "OUT"],
        lambda out: _rule(out, "dataset", "'rmat7', says meta.json", "community"),
    ),
    "generate --chunked": (
        ["generate", "rmat", "--scale", "7", "--chunked", "--out", "OUT"],
        ["generate", "rmat", "--scale", "8", "--chunked", "--out", "OUT"],
        lambda out: _rule(out, "chunks", "'rmat7', says metadata.json", "rmat8"),
    ),
    "chunk": (
        ["chunk", "--dataset", "IN/d", "--out", "OUT", "--num-chunks", "2", "--graph-name", "first"],
        ["chunk", "--dataset", "IN/d", "--out", "OUT", "--num-chunks", "2", "--graph-name", "second"],
        lambda out: _rule(out, "chunks", "'first', says metadata.json", "second"),
    ),
    "assign": (
        ["assign", "--dataset", "IN/c", "--out", "OUT", "--num-parts", "2"],
        ["assign", "--dataset", "IN/c2", "--out", "OUT", "--num-parts", "2"],
        lambda out: _rule(out, "partition assignment", "'g', says partition_meta.json", "g2"),
    ),
    "parmetis import": (
        ["assign", "--dataset", "IN/c2", "--out", "OUT", "--num-parts", "2"],
        ["parmetis", "import", "--dataset", "IN/c", "--parmetis-dir", "IN/pm", "--out", "OUT"],
        lambda out: _rule(out, "partition assignment", "'g2', says partition_meta.json", "g"),
    ),
    "partition": (
        [
            "partition",
            "--dataset",
            "IN/d",
            "--num-parts",
            "2",
            "--out",
            "OUT",
            "--graph-name",
            "first",
            "--method",
            "random",
        ],
        [
            "partition",
            "--dataset",
            "IN/d",
            "--num-parts",
            "2",
            "--out",
            "OUT",
            "--graph-name",
            "second",
            "--method",
            "random",
        ],
        lambda out: (
            _rule(out, "partitions", "first.json", "second", "the files first.json describes")
            + " (the other config is removed)"
        ),
    ),
}


@pytest.mark.parametrize("command", list(SECOND_GRAPH))
def test_every_writer_refuses_another_graphs_output(cli_inputs, capsys, command):
    chunk_graph(community_graph(num_nodes=200, seed=4).graph, cli_inputs / "c2", 2, graph_name="g2")
    first, second, rule = SECOND_GRAPH[command]
    out = cli_inputs / "out"
    argv = lambda a: [x.replace("IN", str(cli_inputs)).replace("OUT", str(out)) for x in a]  # noqa: E731
    assert main(argv(first)) == 0
    assert main(argv(first)) == 0  # its own graph again: rewritten without --overwrite
    before = snapshot(out)
    capsys.readouterr()
    assert main(argv(second)) == 2
    assert capsys.readouterr().err == f"graphshard: error: {rule(out)}\n"
    assert snapshot(out) == before  # refused before anything was written
    (out / "my-notes.txt").write_text("mine\n")
    assert main(argv(second) + ["--overwrite"]) == 0
    assert (out / "my-notes.txt").read_text() == "mine\n"  # --overwrite replaces the output, nothing else
    assert main(argv(second)) == 0  # the directory is now the second graph's


def test_generate_checks_the_name_its_generator_gives(tmp_path):
    """``generate`` refuses before generating, by the name the generator is about to give its graph."""
    for argv, name in (
        (["rmat", "--scale", "6"], "rmat6"),
        (["community", "--nodes", "100"], "community"),
        (["hetero", "--papers", "50", "--authors", "20"], "hetero"),
    ):
        assert main(["generate", *argv, "--out", str(tmp_path / name)]) == 0
        assert load_dataset(tmp_path / name).name == name


def test_library_writers_follow_the_same_rule(tmp_path):
    save_dataset(Dataset("a", small_homo(), 2), tmp_path / "d")
    with pytest.raises(InputError) as exc:
        save_dataset(Dataset("b", small_homo(), 2), tmp_path / "d")
    assert str(exc.value) == _rule(tmp_path / "d", "dataset", "'a', says meta.json", "b")
    chunk_graph(small_homo(), tmp_path / "c", 2, graph_name="a")
    with pytest.raises(InputError) as exc:
        chunk_graph(small_homo(), tmp_path / "c", 2, graph_name="b")
    assert str(exc.value) == _rule(tmp_path / "c", "chunks", "'a', says metadata.json", "b")
    save_dataset(Dataset("b", small_homo(), 2), tmp_path / "d", overwrite=True)
    assert load_dataset(tmp_path / "d").name == "b"
