"""Work derived from inputs is never reused for other inputs: work-dir partitions, dispatch resume,
checkpoints; dispatch only reports success for output that loads."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from graphshard import InputError, load_partition, load_partition_book, partition_graph
from graphshard.chunked.writer import chunk_graph
from graphshard.cli import main
from graphshard.datasets import community_graph, load_dataset, save_dataset
from graphshard.distributed.ranks.context import DistError
from graphshard.distributed.ranks.launcher import launch
from graphshard.pipeline.assign import assign_chunked
from graphshard.pipeline.assignment_files import read_assignment
from graphshard.pipeline.dispatch import DispatchOptions, run_dispatch
from graphshard.train import TrainOptions, train
from graphshard.train.run import partition_dataset
from tests.graphs import small_hetero
from tests.pipeline.test_dispatch_failures import _faulty


def _feat_of_original_node(config, node):
    """The features the partitions hold for original node ``node`` (read back through the book)."""
    book = load_partition_book(config)
    new = int(book.from_original("_N", np.array([node]))[0])
    p = int(book.nid2partid(np.array([new]))[0])
    part = load_partition(config, p)
    return part.node_feats["_N/feat"][new - int(book.partid2nids(p)[0])].numpy()


def test_same_dataset_name_different_content_is_not_reused(tmp_path):
    a, b = tmp_path / "A" / "cora", tmp_path / "B" / "cora"
    save_dataset(community_graph(num_nodes=400, seed=1), a)
    save_dataset(community_graph(num_nodes=500, seed=2), b)
    work = str(tmp_path / "work")
    config_a, _ = partition_dataset(str(a), work, 2, "random")
    config_b, _ = partition_dataset(str(b), work, 2, "random")
    assert config_a != config_b
    for config, path in ((config_a, a), (config_b, b)):
        g = load_dataset(path).graph
        assert sum(load_partition(config, p).graph.num_inner_nodes for p in range(2)) == g.total_nodes
        np.testing.assert_array_equal(_feat_of_original_node(config, 7), g.node_feats["_N"]["feat"][7])
    # the same directory, changed in place (same size, same mtime): partitioned again, not reused
    feat = a / "feat.npy"
    st = os.stat(feat)
    arr = np.load(feat)
    arr[7] += 1.0
    np.save(feat, arr)
    os.utime(feat, ns=(st.st_atime_ns, st.st_mtime_ns))
    config_a2, _ = partition_dataset(str(a), work, 2, "random")
    assert config_a2 != config_a
    np.testing.assert_array_equal(_feat_of_original_node(config_a2, 7), arr[7])
    # other partitioning options into the same work dir: their own partitions, not the 2-part ones
    config_a3, _ = partition_dataset(str(a), work, 3, "random")
    assert config_a3 not in (config_a, config_a2) and load_partition_book(config_a3).num_partitions() == 3
    assert partition_dataset(str(a), work, 3, "random")[0] == config_a3  # the unchanged input: reused


def test_dispatch_resume_notices_changed_chunk_content(tmp_path):
    g = small_hetero()
    chunk_graph(g, tmp_path / "c", 4, "numpy", graph_name="g")
    assign_chunked(tmp_path / "c", tmp_path / "a", 4, "random")
    opts = DispatchOptions(
        tmp_path / "c", tmp_path / "a", tmp_path / "out", 2, save_orig_nids=True, save_orig_eids=True
    )
    with pytest.raises(DistError, match="rank 1 failed"):
        launch(_faulty, 2, (opts, "raise", 1, 3), timeout=30)  # interrupted: some partitions finished
    done = {int(p.name[4 : -len(".done.json")]) for p in (tmp_path / "out" / ".dispatch-g").glob("part*.done.json")}
    # change one edge chunk's content, keeping its size and mtime: redirect the source of an edge whose
    # destination lies in a finished partition (one that a resume without the chunks' content would reuse)
    chunk = tmp_path / "c" / "edges" / "paper__cites__paper" / "chunk-0.npy"
    st = os.stat(chunk)
    edges = np.load(chunk)
    per_type, _ = read_assignment(tmp_path / "a", g.num_nodes)
    in_done = np.flatnonzero(np.isin(per_type["paper"][edges[:, 1]], list(done)))
    assert in_done.size, (done, edges)
    i = int(in_done[0])
    edges[i, 0] = (edges[i, 0] + 1) % g.num_nodes["paper"]
    np.save(chunk, edges)
    os.utime(chunk, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(chunk).st_size == st.st_size
    run_dispatch(opts, num_procs=2, timeout=60)
    # the reference: the changed graph partitioned in memory with the same assignment
    from graphshard.chunked.load import load_chunked_graph
    from graphshard.chunked.spec import read_metadata

    changed = load_chunked_graph(read_metadata(tmp_path / "c"))
    per_type, _ = read_assignment(tmp_path / "a", changed.num_nodes)
    partition_graph(
        changed,
        "g",
        4,
        tmp_path / "ref",
        num_hops=2,
        save_orig_ids=True,
        part_method=np.concatenate([per_type[t] for t in changed.ntypes]),
    )
    for f in (tmp_path / "ref").rglob("*.safetensors"):
        assert f.read_bytes() == (tmp_path / "out" / f.relative_to(tmp_path / "ref")).read_bytes(), f


def test_dispatch_refuses_csv_chunk_with_blank_line_and_publishes_nothing(tmp_path, capsys):
    g = small_hetero()
    chunk_graph(g, tmp_path / "c", 2, "csv", graph_name="g")
    chunk = tmp_path / "c" / "edges" / "paper__cites__paper" / "chunk-0.csv"
    lines = chunk.read_text().splitlines(keepends=True)
    chunk.write_text("".join(lines[:3]) + "\n" + "".join(lines[4:]))  # one row replaced by a blank line
    assert chunk.read_text().count("\n") == len(lines)  # the declared count still matches the newlines
    assign_chunked(tmp_path / "c", tmp_path / "a", 2, "random")
    opts = DispatchOptions(tmp_path / "c", tmp_path / "a", tmp_path / "out", 1)
    with pytest.raises(DistError, match=r"InputError: \S*chunk-0.csv, line 4: blank line"):
        run_dispatch(opts, num_procs=2, timeout=60)
    assert not (tmp_path / "out" / "g.json").exists()
    # the command line: one clean line naming the file and line, and still no config
    capsys.readouterr()
    assert (
        main(
            [
                "dispatch",
                "--in-dir",
                str(tmp_path / "c"),
                "--partitions-dir",
                str(tmp_path / "a"),
                "--out-dir",
                str(tmp_path / "out"),
                "--num-procs",
                "2",
                "--timeout",
                "60",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.startswith("graphshard: error:") and "Traceback" not in err and err.count("\n") == 1, err
    assert "chunk-0.csv, line 4: blank line" in err
    assert not (tmp_path / "out" / "g.json").exists()


def _corrupting_dispatch(opts):
    """Runs in a spawned rank: dispatch whose structure writer claims a HALO node for the wrong owner."""
    import graphshard.pipeline.dispatch as dispatch_module
    import graphshard.pipeline.dispatch.write as write_module
    from graphshard.distributed.ranks.context import DistContext

    real = write_module.structure_arrays

    def corrupt(*args, **kwargs):
        arrays = real(*args, **kwargs)
        lazy = arrays["node/part_id"]
        part_id = lazy.make(0, lazy.shape[0])
        part_id[-1] = (part_id[-1] + 1) % 2
        arrays["node/part_id"] = part_id
        return arrays

    write_module.structure_arrays = corrupt
    with DistContext.from_env(timeout=30) as ctx:
        dispatch_module.dispatch(opts, ctx)


def test_dispatch_never_publishes_output_that_does_not_load(tmp_path):
    """Whatever slips past the readers, the written partitions are loaded before the config is published."""
    g = small_hetero()
    chunk_graph(g, tmp_path / "c", 2, "numpy", graph_name="g")
    assign_chunked(tmp_path / "c", tmp_path / "a", 2, "random")
    opts = DispatchOptions(tmp_path / "c", tmp_path / "a", tmp_path / "out", 1)
    with pytest.raises(DistError, match=r"rank 0 failed[\s\S]*part\d/graph.safetensors: node/part_id differs"):
        launch(_corrupting_dispatch, 1, (opts,), timeout=30)
    assert not (tmp_path / "out" / "g.json").exists()
    assert [p.name for p in (tmp_path / "out").glob("*.json*")] == [".graphshard-output.json"]  # no private copy left


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ckpt")
    save_dataset(community_graph(num_nodes=600, seed=3), tmp / "data")
    config, _ = partition_dataset(str(tmp / "data"), str(tmp / "work"), 2, "random")
    opts = TrainOptions(
        part_config=config,
        epochs=1,
        fanouts=[3, 3],
        batch_size=128,
        hidden=16,
        progress=False,
        checkpoint=str(tmp / "ckpt"),
        timeout=60,
    )
    train(opts, num_procs=2)
    return tmp, opts


def test_checkpoint_of_other_options_is_refused_before_spawning(trained, capsys):
    from dataclasses import replace

    tmp, opts = trained
    with pytest.raises(InputError, match=r"hidden: checkpoint 16, this run 32.*lr: checkpoint 0.01, this run 0.02"):
        train(replace(opts, hidden=32, lr=0.02, epochs=2), num_procs=2)
    with pytest.raises(InputError, match=r"world_size: checkpoint 2, this run 4"):  # refused, not resharded
        train(replace(opts, epochs=2), num_procs=4)
    with pytest.raises(InputError, match=r"world_size: checkpoint 2, this run 1"):
        train(replace(opts, epochs=2), num_procs=1)
    before = sorted(p.name for p in (tmp / "ckpt").rglob("*"))
    capsys.readouterr()
    assert (
        main(
            [
                "train",
                "--part-config",
                opts.part_config,
                "--num-procs",
                "2",
                "--checkpoint",
                opts.checkpoint,
                "--hidden",
                "32",
                "--epochs",
                "2",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.startswith("graphshard: error:") and "Traceback" not in err and err.count("\n") == 1, err
    assert "hidden: checkpoint 16, this run 32" in err
    assert sorted(p.name for p in (tmp / "ckpt").rglob("*")) == before  # the checkpoint is left as it was


def test_checkpoint_of_another_graph_is_refused(trained):
    from dataclasses import replace

    tmp, opts = trained
    save_dataset(community_graph(num_nodes=650, seed=4), tmp / "other")
    config, _ = partition_dataset(str(tmp / "other"), str(tmp / "work"), 2, "random")
    with pytest.raises(InputError, match=r"graph: checkpoint 'data \(\w+, files \w+\)', this run 'other \("):
        train(replace(opts, part_config=config, epochs=2), num_procs=2)


def test_ranks_at_different_epochs_fail_at_once(trained):
    import shutil
    from dataclasses import replace

    tmp, opts = trained
    ckpt = tmp / "ckpt-mixed"
    shutil.copytree(tmp / "ckpt", ckpt)
    state = ckpt / "rank1" / "checkpoint.json"
    meta = json.loads(state.read_text())
    meta["epoch"] = 3
    state.write_text(json.dumps(meta))
    with pytest.raises(InputError, match=r"rank 0 after epoch 0, rank 1 after epoch 3"):
        train(replace(opts, checkpoint=str(ckpt), epochs=5), num_procs=2)
    shutil.rmtree(ckpt / "rank1")
    with pytest.raises(InputError, match=r"rank 0 after epoch 0, rank 1 has none"):
        train(replace(opts, checkpoint=str(ckpt), epochs=5), num_procs=2)


def _agree(ckpt, identity):
    """Runs in a spawned rank: the in-rank resume check (what a torchrun rank does before loading)."""
    from types import SimpleNamespace

    from graphshard.distributed.ranks.context import DistContext
    from graphshard.tasks.loop import _agree_on_resume

    with DistContext.from_env(timeout=30) as ctx:
        _agree_on_resume(SimpleNamespace(ctx=ctx), f"{ckpt}/rank{ctx.rank}", identity)


def _edit_state(path, change):
    meta = json.loads(path.read_text())
    change(meta)
    path.write_text(json.dumps(meta))


def test_ranks_check_each_other_before_loading(trained):
    """Under torchrun there is no parent to check first: the ranks gather every rank's epoch and identity
    and all fail at once (well within the timeout) with one message naming the rank at fault."""
    import shutil
    import time

    from graphshard.tasks.checkpoint import run_identity
    from graphshard.train.contract import resolve_data

    tmp, opts = trained
    identity = run_identity(opts.part_config, resolve_data(opts, 2), 2)  # as train() records it
    ckpt = tmp / "ckpt-rank"
    shutil.copytree(tmp / "ckpt", ckpt)
    launch(_agree, 2, (str(ckpt), identity), timeout=30)  # a consistent set: agreed, nothing raised
    _edit_state(ckpt / "rank1" / "checkpoint.json", lambda m: m.update(epoch=3))
    start = time.monotonic()
    with pytest.raises(DistError, match=r"rank 0 after epoch 0, rank 1 after epoch 3") as err:
        launch(_agree, 2, (str(ckpt), identity), timeout=30)
    assert "InputError" in str(err.value) and time.monotonic() - start < 20
    _edit_state(ckpt / "rank1" / "checkpoint.json", lambda m: (m.update(epoch=0), m["identity"].update(hidden=64)))
    with pytest.raises(
        DistError, match=r"rank1: checkpoint belongs to another run.*hidden: checkpoint 64, this run 16"
    ):
        launch(_agree, 2, (str(ckpt), identity), timeout=30)
