"""Link prediction's negatives: each mode's pairs against its definition, the loss against binary
cross-entropy written out, and every mode (and edge weights) trained end to end on 2 ranks x 2 partitions."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphshard.datasets import community_graph, save_dataset
from graphshard.errors import InputError
from graphshard.tasks.negatives import link_loss, negative_pairs
from graphshard.train import TrainOptions, train
from tests.graphs import shared_dataset


def test_in_batch_negatives_are_other_positives_destinations():
    pairs = torch.tensor([[0, 1, 2, 3], [10, 11, 12, 13]])
    neg = negative_pairs("in-batch", pairs, 2)
    assert neg[0].tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert neg[1].tolist() == [11, 12, 12, 13, 13, 10, 10, 11]  # never the positive's own destination


def test_joint_negatives_are_shared_by_the_batch():
    pairs = torch.tensor([[0, 1, 2], [10, 11, 12]])
    neg = negative_pairs("joint", pairs, 1, dst_neg=torch.tensor([20, 21]))
    assert neg.T.tolist() == [[0, 20], [0, 21], [1, 20], [1, 21], [2, 20], [2, 21]]


def _hard_batch(config: str, out: str, given: list | None = None) -> None:
    """One rank: the hard negatives of positives (0, 1), (0, 2), (0, 3), 3 each (or ``given``), as node IDs,
    into ``out``."""
    from graphshard.distributed.loaders.loader import DistLinkNeighborLoader
    from graphshard.distributed.runtime.graph import DistGraph
    from graphshard.distributed.runtime.session import session
    from graphshard.format.config import read_config

    with session(timeout=60):
        g = DistGraph("h", read_config(config))
        pairs = np.array([[0, 0, 0], [1, 2, 3]])
        loader = DistLinkNeighborLoader(
            g, [2], pairs, 3, neg_sampling="hard", neg_amount=3, feat_name="none", hard_negatives=given
        )
        batch = next(iter(loader))
        np.save(out, batch.n_id[batch.dst_neg_index].numpy())


def test_hard_negatives_are_in_neighbours_of_the_destination(tmp_path):
    """The loader's hard negatives of a positive (u, v): v's in-neighbours (all of them, when they are fewer
    than k, then random nodes), and as many uniform ones, read against the graph as built."""
    from graphshard import Graph, partition_graph
    from graphshard.distributed.ranks.launcher import launch

    src = np.array([5, 6, 7, 5, 8, 0, 1, 2])
    dst = np.array([1, 1, 1, 2, 4, 9, 9, 9])  # into 1: 5, 6, 7; into 2: 5; into 3: none
    partition_graph(Graph.from_arrays(src, dst, num_nodes=10), "h", 1, tmp_path / "p", part_method="random")
    launch(_hard_batch, 1, (str(tmp_path / "p" / "h.json"), str(tmp_path / "neg.npy")), timeout=60)
    neg = np.load(tmp_path / "neg.npy")
    assert neg.shape == (3, 6)  # 3 hard, then 3 uniform
    assert sorted(neg[0, :3].tolist()) == [5, 6, 7]
    assert neg[1, 0] == 5  # its one in-neighbour, then random nodes
    assert neg.min() >= 0 and neg.max() < 10
    given = [[8, 9, 4], [-1, 4, 4], [6, 7, 5]]  # per positive; -1: none given
    launch(_hard_batch, 1, (str(tmp_path / "p" / "h.json"), str(tmp_path / "given.npy"), given), timeout=60)
    neg = np.load(tmp_path / "given.npy")
    assert neg.shape == (3, 6) and neg[0, :3].tolist() == [8, 9, 4] and neg[2, :3].tolist() == [6, 7, 5]
    assert neg[1, 1:3].tolist() == [4, 4] and 0 <= neg[1, 0] < 10


def test_link_loss_weighs_positives():
    scores, w = torch.tensor([2.0, -1.0, 0.5, -0.3, 1.5]), torch.tensor([1.0, 3.0])
    bce = lambda x, y: -(y * torch.log(torch.sigmoid(x)) + (1 - y) * torch.log(1 - torch.sigmoid(x)))  # noqa: E731
    pos = (bce(scores[:2], torch.ones(2)) * w).mean()
    neg = bce(scores[2:], torch.zeros(3)).mean()
    assert float(link_loss(scores, 2, w)) == pytest.approx(float(0.5 * (pos + neg)), rel=1e-6)
    label = torch.tensor([1.0, 1.0, 0.0, 0.0, 0.0])
    weights = torch.tensor([1.0, 3.0, 1.0, 1.0, 1.0])
    assert float(link_loss(scores, 2, w, label)) == pytest.approx(
        float((bce(scores, label) * weights).mean()), rel=1e-6
    )


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    root = tmp_path_factory.mktemp("negatives")
    ds = community_graph(num_nodes=1500, avg_degree=8, noise=4.0, seed=3, edge_targets="regression")
    weight = np.abs(ds.graph.edge_feats[("_N", "_E", "_N")]["label"]).astype(np.float32)
    ds.graph.edge_feats[("_N", "_E", "_N")]["weight"] = weight  # a number >= 0 per edge
    save_dataset(ds, root / "data")
    return root


@pytest.mark.parametrize("negatives", ["in-batch", "joint", "hard"])
def test_every_mode_learns_links(graph, tmp_path, negatives):
    """On the planted communities (links random within a community); hard negatives on Cora, where a
    destination's neighbours are not the source's own (in the planted graph they are as good as positives)."""
    data = shared_dataset("cora") if negatives == "hard" else graph / "data"
    opts = TrainOptions(
        task="link", negatives=negatives, neg_ratio=4, epochs=10, fanouts=[5, 5], batch_size=512, progress=False
    )
    m = train(opts, num_procs=2, dataset=str(data), work_dir=str(tmp_path))
    assert m["test_mrr"] > 2 * m["random_mrr"], (m["test_mrr"], m["random_mrr"])


def test_given_hard_negatives_from_the_dataset(graph, tmp_path):
    """Hard negatives given per edge (the dataset's edges/..._hard_negatives.npy, original destination IDs) go
    through the held-out split and the partitions with their edges, train, and a bad one is named."""
    from graphshard.datasets import load_dataset

    ds = load_dataset(graph / "data")
    et = ("_N", "_E", "_N")
    src, dst = ds.graph.edges[et]
    rng = np.random.default_rng(0)
    hard = rng.integers(0, 1500, (src.shape[0], 3))
    hard[::7, 0] = -1
    ds.graph.edge_feats[et]["hard_negatives"] = hard
    save_dataset(ds, tmp_path / "data")
    assert np.array_equal(np.load(tmp_path / "data" / "edge_hard_negatives.npy"), hard)
    kw = dict(task="link", negatives="hard", neg_ratio=3, epochs=8, fanouts=[5, 5], batch_size=512, progress=False)
    run = dict(num_procs=2, dataset=str(tmp_path / "data"), work_dir=str(tmp_path / "work"))
    m = train(TrainOptions(**kw, hard_negatives="hard_negatives"), **run)
    assert m["test_mrr"] > 1.5 * m["random_mrr"], (m["test_mrr"], m["random_mrr"])
    hard[:, 1] = 1500  # no such node (in every row: some are held out)
    ds.graph.edge_feats[et]["hard_negatives"] = hard
    save_dataset(ds, tmp_path / "bad")
    run["dataset"] = str(tmp_path / "bad")
    with pytest.raises(Exception, match=r"names node 1500, outside the 1500 '_N' nodes"):
        train(TrainOptions(**kw, hard_negatives="hard_negatives"), **run)
    with pytest.raises(InputError, match="no such edge data of integer node IDs"):
        train(TrainOptions(**kw, hard_negatives="nope"), **run)


def test_edge_weights_and_their_checks(graph, tmp_path):
    """A weight of 1 on every edge trains exactly as no weights; other weights change the loss; a negative
    weight, or a name the edges lack, is refused naming it."""
    # save_dataset keeps only an edge type's label and splits: the weights go in through the partitions
    from graphshard import partition_graph
    from graphshard.datasets import load_dataset
    from graphshard.tasks.link_split import save_link_split, split_edges

    g = load_dataset(graph / "data").graph
    w = np.abs(g.edge_feats[("_N", "_E", "_N")]["label"]).astype(np.float32)
    g.edge_feats[("_N", "_E", "_N")]["weight"] = w
    g.edge_feats[("_N", "_E", "_N")]["signed"] = g.edge_feats[("_N", "_E", "_N")]["label"]
    g.edge_feats[("_N", "_E", "_N")]["ones"] = np.ones_like(w)
    kept, held = split_edges(g, None, seed=0)
    partition_graph(kept, "w", 2, tmp_path / "p")
    save_link_split(held, str(tmp_path / "p" / "held.safetensors"))
    run = dict(part_config=str(tmp_path / "p" / "w.json"), link_split=str(tmp_path / "p" / "held.safetensors"))
    kw = dict(task="link", epochs=2, fanouts=[5, 5], batch_size=512, progress=False, **run)
    losses = {
        name: [e["train_loss"] for e in train(TrainOptions(**kw, edge_weight=name), num_procs=2)["epochs"]]
        for name in (None, "ones", "weight")
    }
    assert losses["ones"] == pytest.approx(losses[None], rel=1e-6)  # weights of 1: the unweighted loss
    assert losses["weight"][0] != pytest.approx(losses[None][0], rel=1e-3)  # other weights take effect
    with pytest.raises(
        Exception, match=r"edge \(\d+, \d+\) of _N:_E:_N \(original node IDs\) has weight -[0-9.e-]+, not a"
    ):
        train(TrainOptions(**kw, edge_weight="signed"), num_procs=2)
    with pytest.raises(InputError, match="--edge-weight 'nope': edge type '_N:_E:_N' has no such edge data"):
        train(TrainOptions(**kw, edge_weight="nope"), num_procs=2)
    with pytest.raises(InputError, match="negatives is an option of --task link, not node"):
        TrainOptions(negatives="joint").check()
