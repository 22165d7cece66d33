"""The in-memory partitioning planner: ``graphshard partition``'s predicted peak bounds what the graph adds
to the measured peak of private memory within 25 % (R-MAT scale 17 against a tiny graph, each method run
as the command users run), and a method predicted not to fit is refused before the dataset is read."""

from __future__ import annotations

import sys

import pytest

from graphshard.cli import main
from graphshard.datasets import rmat_graph, save_dataset
from graphshard.partition.cost import partition_estimates
from graphshard.plan.measure import peak_private

GS = [sys.executable, "-m", "graphshard.cli"]


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    root = tmp_path_factory.mktemp("part-plan")
    for scale in (10, 17):
        save_dataset(rmat_graph(scale, feat_dim=64), root / f"d{scale}")
    return root


@pytest.mark.parametrize("method", ["random", "metis"])
def test_partition_prediction_bounds_what_the_graph_adds(datasets, method):
    measured, predicted = {}, {}
    for scale in (10, 17):
        d = datasets / f"d{scale}"
        peaks = peak_private(
            [
                *GS,
                "partition",
                "--dataset",
                str(d),
                "--num-parts",
                "4",
                "--method",
                method,
                "--out",
                str(datasets / f"p{scale}-{method}"),
                "--overwrite",
            ]
        )
        measured[scale] = max(peaks.values())
        predicted[scale] = next(e.peak_bytes for e in partition_estimates(d, 4) if e.method == method)
    grows, got = predicted[17] - predicted[10], measured[17] - measured[10]
    slack = 16 << 20
    assert got - slack <= grows <= 1.25 * got + 2 * slack, (method, got / 2**20, grows / 2**20)


def test_partition_predicted_not_to_fit_is_refused(datasets, capsys):
    out = datasets / "refused"
    assert (
        main(
            [
                "partition",
                "--dataset",
                str(datasets / "d17"),
                "--num-parts",
                "4",
                "--method",
                "metis",
                "--out",
                str(out),
                "--memory",
                "200M",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "partition --method metis is predicted to need" in err and "methods that fit" in err
    assert not out.exists()
    assert main(["plan", "--dataset", str(datasets / "d17"), "--memory", "64G"]) == 0
    text = capsys.readouterr().out
    assert "graphshard partition (in memory): 131,072 nodes" in text and "recommended: kaminpar" in text
