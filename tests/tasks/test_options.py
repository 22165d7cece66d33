"""The options model: one description per option drives the flags, the config file and the checks, and
every check runs before any process starts (the launcher is never reached)."""

from __future__ import annotations

import json
import sys

import pytest

from graphshard import InputError, partition_graph
from graphshard.cli import build_parser, main
from graphshard.datasets import community_graph
from graphshard.train import TrainOptions
from graphshard.train.config_file import build_options, dump_config, read_config_file


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    """A 2-partition graph with the default data names (feat, label, train/val/test_mask)."""
    out = tmp_path_factory.mktemp("opts")
    partition_graph(community_graph(num_nodes=400, seed=1).graph, "c", 2, out, part_method="random")
    return str(out / "c.json")


@pytest.fixture
def no_spawn(monkeypatch):
    """Fail the test if any rank process were started."""
    import graphshard.distributed.ranks.launcher as launcher

    def refuse(*a, **k):
        raise AssertionError("a process was started before the options were checked")

    monkeypatch.setattr(launcher, "launch", refuse)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--dropout", "1.5"], "argument --dropout: expected a number in [0, 1), got '1.5'"),
        (["--batch-size", "0"], "argument --batch-size: expected an integer in [1, inf), got '0'"),
        (["--num-workers", "-2"], "argument --num-workers: expected an integer in [0, inf), got '-2'"),
        (
            ["--fanouts", "5,0"],
            "argument --fanouts: expected a list of integers (or comma-separated text such as "
            "10,10), each >= 1 or -1, got '5,0'",
        ),
        (["--task", "graph"], "argument --task: expected one of node, link, edge, multi, got 'graph'"),
    ],
)
def test_bad_flags_are_usage_errors(parts, argv, message, capsys, no_spawn):
    assert main(["train", "--part-config", parts, "--num-procs", "2", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize(
    "argv, message",
    [
        ([], "give exactly one of --part-config or --dataset"),
        (
            ["--part-config", "{parts}", "--num-procs", "3"],
            "3 processes cannot serve the 2 partitions of {parts} evenly: start a multiple or a divisor of 2",
        ),
        (
            ["--part-config", "{parts}", "--split-masks", "train_mask,valid_mask,test_mask"],
            "{parts}: node type '_N' has no 'valid_mask' (it holds feat (F32 x 32), label (I64), test_mask (BOOL), "
            "train_mask (BOOL), val_mask (BOOL)); name its data with --label and --split-masks",
        ),
        (
            ["--part-config", "{parts}", "--feat", "x"],
            "{parts}: no node type has feature 'x'; the partitions hold _N: feat (F32 x 32), label (I64)",
        ),
        (
            ["--part-config", "{parts}", "--label", "train_mask"],
            "{parts}: label 'train_mask' of '_N' (BOOL of row shape []): one boolean per node is a mask, not "
            "labels (classes are integers)",
        ),
        (
            ["--part-config", "{parts}", "--label-kind", "classification", "--label", "feat"],
            "{parts}: label 'feat' of '_N' (F32 of row shape [32]): label kind classification needs one class per "
            "item; its rows are (32,)",
        ),
        (["--part-config", "{parts}", "--metric", "rmse"], "--metric: 'rmse' is not a metric of classification"),
        (["--part-config", "{parts}", "--metric", "nope"], "metric 'nope' is not a metric (choose from"),
        (["--part-config", "{parts}", "--loss", "bce"], "--loss bce does not fit classification labels"),
        (["--part-config", "{parts}", "--task", "link", "--metric", "mrr"], "metric 'mrr' is not a metric"),
        (["--part-config", "{parts}", "--fanouts", "5,5", "--eval-fanouts", "5"], "1 evaluation fanouts for 2 layers"),
        (
            ["--part-config", "{parts}", "--cache-ratio", "0.1", "--cache-mb", "3"],
            "give cache_ratio (--cache-ratio) or cache_mb (--cache-mb), not both",
        ),
        (
            ["--part-config", "{parts}", "--task", "link"],
            "link prediction on a partition config needs its held-out edges",
        ),
    ],
)
def test_the_run_and_its_data_are_checked_before_spawning(parts, argv, message, capsys, no_spawn):
    argv = [a.format(parts=parts) for a in argv]
    assert main(["train", "--num-procs", "2", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("graphshard: error:") and message.format(parts=parts) in err, err


def test_config_file_round_trip_and_flags_override_it(tmp_path, capsys):
    argv = [
        "train",
        "--part-config",
        "p.json",
        "--num-procs",
        "2",
        "--dropout",
        "0.25",
        "--fanouts",
        "7,3,-1",
        "--lr",
        "1e-05",
        "--split-masks",
        "a,b,c",
        "--allow-nonfinite",
        "--print-config",
    ]
    assert main(argv) == 0
    text = capsys.readouterr().out
    (tmp_path / "run.yaml").write_text(text)
    opts, launch = build_options(read_config_file(tmp_path / "run.yaml"))
    assert (
        opts.dropout,
        opts.fanouts,
        opts.lr,
        opts.split_masks,
        opts.allow_nonfinite,
        opts.part_config,
        launch.num_procs,
    ) == (0.25, [7, 3, -1], 1e-05, ["a", "b", "c"], True, "p.json", 2)
    assert opts.num_layers == 3 and opts.epochs == TrainOptions().epochs  # the rest at the defaults
    assert dump_config(opts, launch) == text  # written back identically
    # the file read by the command, a flag given on the command line winning over it
    assert (
        main(
            [
                "train",
                "--config",
                str(tmp_path / "run.yaml"),
                "--dropout",
                "0.5",
                "--no-allow-nonfinite",
                "--print-config",
            ]
        )
        == 0
    )
    again = capsys.readouterr().out
    assert "dropout: 0.5\n" in again and "allow_nonfinite: false\n" in again and "fanouts: [7, 3, -1]\n" in again
    # JSON too, with - or _ in keys
    (tmp_path / "run.json").write_text(json.dumps({"batch-size": 64, "fanouts": "4,4"}))
    opts, _ = build_options(read_config_file(tmp_path / "run.json"))
    assert (opts.batch_size, opts.fanouts) == (64, [4, 4])


def test_a_hand_written_yaml_file(tmp_path):
    pytest.importorskip("yaml")
    (tmp_path / "run.yml").write_text(
        "# my run\ntask: link\nfanouts:\n  - 5\n  - 5\nlr: 1e-3  # PyYAML reads this as text\nneg_ratio: 2\n"
    )
    opts, _ = build_options(read_config_file(tmp_path / "run.yml"))
    assert (opts.task, opts.fanouts, opts.lr, opts.neg_ratio) == ("link", [5, 5], 0.001, 2.0)


@pytest.mark.parametrize(
    "content, message",
    [
        ("dropuot: 0.3\n", "run.yaml: unknown key 'dropuot' (did you mean 'dropout'?)"),
        ("dropout: 1.5\n", "run.yaml: key 'dropout': expected a number in [0, 1), got 1.5"),
        ("fanouts: [5, x]\n", "run.yaml: key 'fanouts': expected a list of integers"),
        ("- 1\n- 2\n", "run.yaml: a config file is a mapping of option names to values, not list"),
        ("progress: false\n", "run.yaml: unknown key 'progress'"),
    ],
)
def test_config_file_errors_name_the_file_and_key(tmp_path, content, message, capsys, no_spawn):
    pytest.importorskip("yaml")
    (tmp_path / "run.yaml").write_text(content)
    assert main(["train", "--config", str(tmp_path / "run.yaml")]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err


def test_yaml_without_pyyaml_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "yaml", None)  # import yaml now fails
    (tmp_path / "run.yaml").write_text("epochs: 3\n")
    with pytest.raises(InputError, match=r"run.yaml: reading YAML needs PyYAML \(pip install pyyaml"):
        read_config_file(tmp_path / "run.yaml")


def test_every_option_is_a_flag_and_a_key():
    """The flags of ``train`` are exactly the config keys (plus --config/--print-config/-v/-h, and the job's
    secret and --insecure, which are the command line's or the environment's: never in a shared config file)."""
    parser = next(a for a in build_parser()._actions if hasattr(a, "choices") and a.choices and "train" in a.choices)
    flags = {s for a in parser.choices["train"]._actions for s in a.option_strings if s.startswith("--")}
    text = dump_config(TrainOptions(), build_options({})[1])
    keys = {line.split(":")[0] for line in text.splitlines() if not line.startswith("#")}
    own = {"--config", "--print-config", "--verbose", "--help", "--in-dir", "--secret-file", "--insecure"}
    own |= {"--tls-cert", "--tls-key", "--tls-ca"}
    assert flags - own == {f"--{k.replace('_', '-')}" for k in keys} | {
        "--no-allow-nonfinite",
        "--no-filtered",
        "--no-verify",
        "--no-colocated",
    }


def test_pyg_names_are_found_and_featureless_types_announced(tmp_path, caplog):
    """Partitions of ``Graph.from_pyg`` hold x/y: the defaults find them. Types without features are
    announced with the width of the embeddings they get."""
    import logging

    import torch
    from torch_geometric.data import Data, HeteroData

    from graphshard.graph import Graph
    from graphshard.train.contract import resolve_data

    ds = community_graph(num_nodes=300, seed=2)
    f = ds.graph.node_feats["_N"]
    src, dst = ds.graph.edges[("_N", "_E", "_N")]
    data = Data(
        x=torch.from_numpy(f["feat"]),
        y=torch.from_numpy(f["label"]),
        edge_index=torch.from_numpy(__import__("numpy").stack([src, dst])),
        **{k: torch.from_numpy(f[k]) for k in ("train_mask", "val_mask", "test_mask")},
    )
    partition_graph(Graph.from_pyg(data), "pyg", 2, tmp_path / "pyg", part_method="random")
    opts = resolve_data(TrainOptions(part_config=str(tmp_path / "pyg" / "pyg.json")), 2)
    assert (opts.feat, opts.label) == ("x", "y")

    h = HeteroData()
    h["paper"].x = torch.randn(50, 4)
    h["paper"].label = torch.randint(0, 3, (50,))
    for m in ("train_mask", "val_mask", "test_mask"):
        h["paper"][m] = torch.rand(50) < 0.3
    h["author"].num_nodes = 20
    h["author", "writes", "paper"].edge_index = torch.stack([torch.randint(0, 20, (80,)), torch.randint(0, 50, (80,))])
    partition_graph(Graph.from_pyg(h), "het", 2, tmp_path / "het", part_method="random")
    with caplog.at_level(logging.INFO, logger="graphshard.notice"):
        opts = resolve_data(TrainOptions(part_config=str(tmp_path / "het" / "het.json"), hidden=32), 2)
    assert (opts.feat, opts.label, opts.target) == ("x", "label", "paper")
    assert (
        "node types without feature 'x' get learnt 32-d input embeddings (sparse Adagrad, lr 0.05): author"
        in caplog.text
    )


def test_a_graph_without_labels_points_to_link_prediction(tmp_path, capsys, no_spawn):
    """A graph with no labels can still be learnt from: the error names --label and --task link."""
    g = community_graph(num_nodes=400, seed=1).graph
    g.node_feats = {t: {k: v for k, v in f.items() if k != "label"} for t, f in g.node_feats.items()}
    partition_graph(g, "n", 2, tmp_path, part_method="random")
    assert main(["train", "--part-config", str(tmp_path / "n.json"), "--num-procs", "2"]) == 2
    err = capsys.readouterr().err
    assert "has no 'label'" in err and "--label" in err and "--task link" in err, err
