"""The command line: every subcommand, JSON output, errors as exit code 2 with a message."""

from __future__ import annotations

import json

import numpy as np

from graphshard.cli import main


def test_generate_partition_inspect(tmp_path, capsys):
    assert (
        main(
            [
                "generate",
                "hetero",
                "--papers",
                "400",
                "--authors",
                "150",
                "--institutions",
                "5",
                "--fields",
                "6",
                "--out",
                str(tmp_path / "data"),
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "partition",
                "--dataset",
                str(tmp_path / "data"),
                "--num-parts",
                "2",
                "--out",
                str(tmp_path / "p"),
                "--balance-ntypes",
                "train",
                "--trainers-per-machine",
                "2",
                "--num-hops",
                "2",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "edge cut" in out and "replication factor" in out
    assert main(["inspect", str(tmp_path / "p" / "hetero.json"), "--json", "--verify"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["num_parts"] == 2 and stats["halo_hops"] == 2
    assert sum(p["inner_nodes"] for p in stats["parts"]) == stats["num_nodes"]
    assert sum(p["inner_edges"] for p in stats["parts"]) == stats["num_edges"]


def test_inspect_edge_cut_matches_assignment(tmp_path, capsys):
    from graphshard.datasets import community_graph, save_dataset

    ds = community_graph(num_nodes=1000, seed=3)
    save_dataset(ds, tmp_path / "d")
    np.save(tmp_path / "assign.npy", np.arange(1000) % 3)
    assert (
        main(
            [
                "partition",
                "--dataset",
                str(tmp_path / "d"),
                "--num-parts",
                "3",
                "--out",
                str(tmp_path / "p"),
                "--method",
                "random",
                "--graph-name",
                "c",
            ]
        )
        == 0
    )
    capsys.readouterr()
    from graphshard import load_partition_book

    book = load_partition_book(tmp_path / "p" / "c.json")
    src, dst = ds.graph.edges[("_N", "_E", "_N")]
    owner = book.nid2partid(book.from_original("_N", np.arange(1000))).numpy()
    expected = int((owner[src] != owner[dst]).sum())
    assert main(["inspect", str(tmp_path / "p" / "c.json"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["edge_cut"] == expected


def test_balance_file_and_errors(tmp_path, capsys):
    from graphshard.datasets import community_graph, save_dataset

    save_dataset(community_graph(num_nodes=500, seed=1), tmp_path / "d")
    np.save(tmp_path / "bal.npy", np.arange(500) % 2)
    assert (
        main(
            [
                "partition",
                "--dataset",
                str(tmp_path / "d"),
                "--num-parts",
                "2",
                "--out",
                str(tmp_path / "p"),
                "--balance-ntypes",
                str(tmp_path / "bal.npy"),
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert (
        main(["partition", "--dataset", str(tmp_path / "nope"), "--num-parts", "2", "--out", str(tmp_path / "q")]) == 2
    )
    assert capsys.readouterr().err == f"graphshard: error: {tmp_path / 'nope'}: no such directory\n"
    (tmp_path / "nope").mkdir()
    assert (
        main(["partition", "--dataset", str(tmp_path / "nope"), "--num-parts", "2", "--out", str(tmp_path / "q")]) == 2
    )
    assert "nope/meta.json: missing" in capsys.readouterr().err
    assert main(["partition", "--dataset", str(tmp_path / "d"), "--num-parts", "0", "--out", str(tmp_path / "q")]) == 2
    assert "argument --num-parts: expected a positive integer, got 0" in capsys.readouterr().err
    assert main(["inspect", str(tmp_path / "q" / "missing.json")]) == 2
    assert "partition config file is missing" in capsys.readouterr().err


def test_demo(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path), "--nodes", "3000"]) == 0
    out = capsys.readouterr().out
    assert "partitioned into 2 parts with METIS" in out and (tmp_path / "demo.json").is_file()


def test_pipeline_commands(tmp_path, capsys):
    from graphshard import load_partition

    assert main(["generate", "community", "--nodes", "600", "--out", str(tmp_path / "d")]) == 0
    assert (
        main(
            [
                "chunk",
                "--dataset",
                str(tmp_path / "d"),
                "--out",
                str(tmp_path / "c"),
                "--num-chunks",
                "3",
                "--format",
                "parquet",
                "--graph-name",
                "comm",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "assign",
                "--in-dir",
                str(tmp_path / "c"),
                "--out-dir",
                str(tmp_path / "a"),
                "--num-parts",
                "3",
                "--method",
                "metis",
                "--format",
                "npy",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "dispatch",
                "--in-dir",
                str(tmp_path / "c"),
                "--partitions-dir",
                str(tmp_path / "a"),
                "--out-dir",
                str(tmp_path / "o"),
                "--num-procs",
                "2",
                "--timeout",
                "60",
            ]
        )
        == 0
    )
    assert "dispatched in" in capsys.readouterr().out
    part = load_partition(tmp_path / "o" / "comm.json", 2, verify=True)
    assert set(part.node_feats) >= {"_N/feat", "_N/label"}
    assert main(["parmetis", "export", "--in-dir", str(tmp_path / "c"), "--out-dir", str(tmp_path / "pm")]) == 0
    assert (tmp_path / "pm" / "comm_stats.txt").read_text().split()[0] == "600"
    assert (
        main(["assign", "--in-dir", str(tmp_path / "nothing"), "--out-dir", str(tmp_path / "x"), "--num-parts", "2"])
        == 2
    )
    assert capsys.readouterr().err == f"graphshard: error: {tmp_path / 'nothing'}: no such directory\n"
    (tmp_path / "nothing").mkdir()
    assert (
        main(["assign", "--in-dir", str(tmp_path / "nothing"), "--out-dir", str(tmp_path / "x"), "--num-parts", "2"])
        == 2
    )
    assert "chunked graph metadata is missing" in capsys.readouterr().err


def test_launch_runs_a_script_on_every_rank(tmp_path, capsys):
    script = tmp_path / "job.py"
    script.write_text(
        "import os, sys\n"
        "from pathlib import Path\n"
        "Path(sys.argv[1], f\"rank{os.environ['RANK']}of{os.environ['WORLD_SIZE']}\").write_text(sys.argv[2])\n"
        "if sys.argv[2] == 'fail' and os.environ['RANK'] == '1':\n"
        "    raise ValueError('bad input on purpose')\n"
    )
    assert main(["launch", "--num-procs", "2", str(script), str(tmp_path), "ok"]) == 0
    assert sorted(p.name for p in tmp_path.glob("rank*")) == ["rank0of2", "rank1of2"]
    assert main(["launch", "--num-procs", "2", str(script), str(tmp_path), "fail"]) == 2
    err = capsys.readouterr().err
    assert "rank 1 failed" in err and "bad input on purpose" in err


def test_inspect_plot_and_metrics_plot(tmp_path, capsys):
    """``inspect --plot`` and ``plot`` write the images they name (PNG files that read back)."""
    import matplotlib.image

    from graphshard.datasets import community_graph, save_dataset

    save_dataset(community_graph(num_nodes=600, seed=2), tmp_path / "d")
    assert (
        main(
            [
                "partition",
                "--dataset",
                str(tmp_path / "d"),
                "--num-parts",
                "3",
                "--out",
                str(tmp_path / "p"),
                "--graph-name",
                "c",
            ]
        )
        == 0
    )
    assert main(["inspect", str(tmp_path / "p" / "c.json"), "--plot", str(tmp_path / "parts.png")]) == 0
    metrics = {
        "task": "node",
        "epochs": [
            {
                "epoch": e,
                "wall_s": 1.0 + e,
                "sample_s": 0.2,
                "fetch_s": 0.1,
                "compute_s": 0.5,
                "comm_s": 0.1,
                "fetch_bytes": 10,
                "train_loss": 1.0 / (e + 1),
                "val_acc": 0.5 + 0.1 * e,
            }
            for e in range(3)
        ],
        "test_acc": 0.7,
    }
    (tmp_path / "m.json").write_text(json.dumps(metrics))
    assert main(["plot", str(tmp_path / "m.json"), "--out", str(tmp_path / "run.png")]) == 0
    out = capsys.readouterr().out
    for name in ("parts.png", "run.png"):
        assert f"wrote {tmp_path / name}" in out
        assert matplotlib.image.imread(tmp_path / name).shape[0] > 100
    (tmp_path / "bad.json").write_text(json.dumps({"epochs": [{"epoch": 0}]}))
    assert main(["plot", str(tmp_path / "bad.json"), "--out", str(tmp_path / "bad.png")]) == 2
    assert "bad.json" in capsys.readouterr().err and not (tmp_path / "bad.png").exists()


def test_inspect_names_what_it_verified_and_the_config_inside_a_directory(tmp_path, capsys):
    """`inspect --verify` says what it checked when all is well (it printed nothing of it), and `inspect DIR`
    names the config inside the directory instead of calling the config missing."""
    assert main(["generate", "rmat", "--scale", "8", "--edge-factor", "4", "--out", str(tmp_path / "d")]) == 0
    assert main(["partition", "--dataset", str(tmp_path / "d"), "--num-parts", "2", "--out", str(tmp_path / "p")]) == 0
    capsys.readouterr()
    config = next((tmp_path / "p").glob("*.json"))
    files = json.loads(config.read_text())["checksums"]
    assert main(["inspect", str(config), "--verify"]) == 0
    assert f"verified: {len(files)} files" in capsys.readouterr().out
    assert main(["inspect", str(tmp_path / "p")]) == 2
    assert f"graphshard inspect {config}" in capsys.readouterr().err
