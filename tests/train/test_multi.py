"""Several tasks in one run (``--task multi``): the tasks' specs and their errors, the summed and alternating
schedules, and node classification + link prediction on DBLP on 2 ranks x 2 partitions: every task's metrics, the
main task selecting the epoch, the node task's figures equal to scikit-learn's on the saved encoder outputs through the
checkpoint's head, ``embed`` writing the encoder outputs, and ``serve`` answering with the main task's head
(or the one ``--head`` names) on them."""

from __future__ import annotations

import httpx
import numpy as np
import pytest
import torch
from sklearn import metrics as sk

from graphshard.cli import main
from graphshard.distributed.loaders.batch import BatchRequest, stretched
from graphshard.errors import InputError
from graphshard.tasks.checkpoint import read_weights
from graphshard.tasks.multi_model import MultiLoader
from graphshard.train import TrainOptions, train
from graphshard.train.config_file import build_options, dump_config, read_config_file
from tests.graphs import shared_dataset
from tests.serve.service import running

NODE = {"name": "venue", "task": "node", "metric": ["accuracy", "f1_macro"]}
LINK = {"name": "authorship", "task": "link", "edge_type": "paper:written_by:author", "weight": 0.5}


class _Batches:
    """A loader's batches ``<tag><epoch>:<index>``, keeping pace with a longer loader as the real ones do."""

    def __init__(self, n: int, tag: str):
        self.n, self.tag, self.epoch, self.steps = n, tag, 0, None

    def __len__(self) -> int:
        return self.n if self.steps is None else self.steps

    def requests(self, epoch: int) -> list[BatchRequest]:
        order = np.random.default_rng(epoch).permutation(self.n)  # each epoch's own shuffle
        return [BatchRequest(b, epoch, np.array([i])) for b, i in enumerate(order)]

    def __iter__(self):
        self.epoch += 1
        reqs = stretched(self.requests, self.epoch, self.n, len(self))
        return iter([f"{self.tag}{r.key}:{int(r.seeds[0])}" for r in reqs])


def test_alternating_tasks_take_turns_each_once_an_epoch_spread_evenly():
    loader = MultiLoader([_Batches(2, "a"), _Batches(6, "b")], "alternate")
    steps = [(b.parts[0].task, b.parts[0].batch) for b in loader]
    assert len(steps) == len(loader) == 8
    assert [t for t, _ in steps] == [1, 0, 1, 1, 1, 0, 1, 1]  # a at 1/4 and 3/4 of the epoch, b at (k + .5) / 6
    assert sorted(b for t, b in steps if t == 0) == ["a1:0", "a1:1"] and len({b for _, b in steps}) == 8
    assert sorted(b.parts[0].batch for b in loader if b.parts[0].task == 0) == ["a2:0", "a2:1"]  # the next epoch


def test_summed_tasks_step_together_the_short_one_starting_again_reshuffled():
    a, b = _Batches(2, "a"), _Batches(5, "b")
    loader = MultiLoader([a, b])
    epochs = [[[(p.task, p.batch) for p in step.parts] for step in loader] for _ in range(2)]
    assert len(loader) == 5 and all(len(e) == 5 for e in epochs)
    assert all([t for t, _ in step] == [0, 1] for e in epochs for step in e)  # every task every step
    for epoch in epochs:
        got = [batch for step in epoch for t, batch in step if t == 0]
        passes = [got[0:2], got[2:4], got[4:]]  # three passes over a's 2 batches, the last cut short
        assert [len({x.split(":")[0] for x in p}) for p in passes] == [1, 1, 1]  # a pass is one shuffle
        assert len({p[0].split(":")[0] for p in passes}) == 3  # each pass its own
        assert all(sorted(x.split(":")[1] for x in p) == ["0", "1"] for p in passes[:2])
        assert sorted(batch.split(":")[1] for step in epoch for t, batch in step if t == 1) == list("01234")
    # the next epoch's passes are new ones (b, the longest, as alone: its loader's next epoch)
    assert not {x for s in epochs[0] for t, x in s if t == 0} & {x for s in epochs[1] for t, x in s if t == 0}
    assert b.steps is None and a.steps == 5
    assert [r.index for r in stretched(a.requests, 1, 2, 5)] == [0, 1, 2, 3, 4]  # numbered on


@pytest.mark.parametrize(
    ("tasks", "main_task", "message"),
    [
        ([{**NODE, "colour": 1}], None, r"tasks\[0\]: unknown key 'colour'"),
        ([{**NODE, "name": "1st"}], None, r"tasks\[0\]: 'name' must be a name"),
        ([NODE, {**LINK, "task": "graph"}], None, r"tasks\[1\] \(authorship\): 'task' must be one of node, edge, link"),
        ([NODE, {**NODE, "weight": 0}], None, r"tasks\[1\] \(venue\): 'weight' must be a number > 0"),
        ([NODE, NODE], None, r"tasks: names must differ"),
        ([NODE, LINK, {**LINK, "name": "again"}], None, "one link prediction task a run"),
        ([NODE], "other", "main_task 'other' is not among the tasks"),
        ([{**NODE, "metric": ["mrr"]}], None, r"tasks\[0\] \(venue\): metric 'mrr' is not a metric"),
        ([{**NODE, "loss": "huber"}], None, r"tasks\[0\] \(venue\): key 'loss': expected one of auto"),
    ],
)
def test_bad_tasks_are_named(tasks, main_task, message):
    with pytest.raises(InputError, match=message):
        TrainOptions(task="multi", tasks=tasks, main_task=main_task).check()


def test_tasks_come_from_the_config_file_and_back(tmp_path):
    (tmp_path / "run.yaml").write_text(
        "task: multi\nmain_task: authorship\ntasks:\n"
        "  - {name: venue, task: node, metric: [accuracy, f1_macro]}\n"
        "  - {name: authorship, task: link, edge_type: 'paper:written_by:author', weight: 0.5}\n"
    )
    opts, launch = build_options(read_config_file(tmp_path / "run.yaml"))
    assert opts.tasks == [NODE, LINK] and opts.main_task == "authorship"
    (tmp_path / "again.yaml").write_text(dump_config(opts, launch))
    assert build_options(read_config_file(tmp_path / "again.yaml"))[0] == opts
    with pytest.raises(InputError, match="--task multi and a config file's tasks: go together"):
        TrainOptions(task="multi").check()
    with pytest.raises(InputError, match="--task multi reads no feature cache"):
        TrainOptions(task="multi", tasks=[NODE], cache_mb=10).check()


def test_node_classification_and_link_prediction_on_dblp(tmp_path, capsys):
    data = shared_dataset("dblp_hetero")
    opts = TrainOptions(
        task="multi",
        tasks=[NODE, LINK],
        epochs=3,
        progress=False,
        checkpoint=str(tmp_path / "ckpt"),
        save_embeddings=str(tmp_path / "out"),
    )
    m = train(opts, num_procs=2, dataset=str(data), work_dir=str(tmp_path / "work"))
    assert m["tasks"] == ["venue", "authorship"] and m["main_task"] == "venue"
    assert set(m["test_metrics"]) == {"venue", "authorship"}
    assert set(m["test_metrics"]["authorship"]) == {"mrr", "auc", "hits@10"}
    assert m["test_metrics"]["authorship"]["mrr"] > 2 * 0.0515  # random scores' MRR of 100 candidates
    history = [e["val_venue/accuracy"] for e in m["epochs"]]
    assert m["best_epoch"] == int(np.argmax(history))  # the main task's first metric selects
    # the node task's test figures from the saved encoder outputs and the checkpoint's head
    weights = read_weights(tmp_path / "ckpt" / "best" / "rank0") or read_weights(tmp_path / "ckpt" / "rank0")
    assert weights is not None and weights[0] == m["best_epoch"]
    w, b = weights[1]["heads.venue.linear.weight"], weights[1]["heads.venue.linear.bias"]
    h = torch.from_numpy(np.load(tmp_path / "out" / "author.npy"))
    pred = (h @ w.T + b).argmax(1).numpy()
    test, labels = np.load(data / "author_test_idx.npy"), np.load(data / "author_label.npy")
    assert m["test_metrics"]["venue"]["accuracy"] == pytest.approx(
        sk.accuracy_score(labels[test], pred[test]), abs=1e-6
    )
    assert m["test_metrics"]["venue"]["f1_macro"] == pytest.approx(
        sk.f1_score(labels[test], pred[test], average="macro"), abs=1e-6
    )
    # embed writes the encoder's outputs of the checkpoint (its last epoch's), which serve's heads read
    args = ["--part-config", m["part_config"], "--checkpoint", str(tmp_path / "ckpt")]
    assert main(["embed", *args, "--out", str(tmp_path / "emb"), "--num-procs", "2"]) == 0
    last = read_weights(tmp_path / "ckpt" / "rank0")
    assert last is not None
    author, paper = (torch.from_numpy(np.load(tmp_path / "emb" / f"{t}.npy")) for t in ("author", "paper"))
    assert author.shape == h.shape
    w, b = last[1]["heads.venue.linear.weight"], last[1]["heads.venue.linear.bias"]
    nodes, pairs = [0, 17, 4056], [[3, 0], [100, 17]]
    with running([*args, "--num-procs", "2"], tmp_path) as (url, _):  # the main task's head
        venue = httpx.post(f"{url}/v1/predict", json={"type": "author", "nodes": nodes}, timeout=60).json()
    np.testing.assert_allclose(venue["scores"], (author[nodes] @ w.T + b).numpy(), atol=1e-4)
    assert venue["predictions"] == (author[nodes] @ w.T + b).argmax(1).tolist()
    with running([*args, "--num-procs", "2", "--head", "authorship"], tmp_path) as (url, _):
        links = httpx.post(f"{url}/v1/predict", json={"pairs": pairs}, timeout=60).json()
    want = [float(paper[u] @ author[v]) for u, v in pairs]  # the dot decoder on both ends' rows
    np.testing.assert_allclose(links["scores"], want, rtol=1e-4, atol=1e-4)
    capsys.readouterr()
    assert main(["serve", *args, "--num-procs", "2", "--head", "nope"]) == 2
    assert "--head nope: " in capsys.readouterr().err


def test_a_resumed_multi_task_run_trains_as_an_uninterrupted_one(tmp_path):
    """Node regression + edge classification on a planted graph: 2 epochs, then resumed to 4, give the losses
    and figures of 4 epochs in one go (each task's batches are the same after the resume)."""
    from graphshard.datasets import community_graph, save_dataset

    save_dataset(
        community_graph(num_nodes=800, avg_degree=6, seed=3, targets="regression", edge_targets="classes"),
        tmp_path / "data",
    )
    tasks = [{"name": "value", "task": "node"}, {"name": "flow", "task": "edge", "weight": 0.5}]
    kw = dict(task="multi", tasks=tasks, fanouts=[4, 4], batch_size=128, progress=False)
    run = dict(num_procs=2, dataset=str(tmp_path / "data"), work_dir=str(tmp_path / "work"))
    whole = train(TrainOptions(epochs=4, **kw), **run)
    ckpt = str(tmp_path / "ckpt")
    train(TrainOptions(epochs=2, checkpoint=ckpt, **kw), **run)
    resumed = train(TrainOptions(epochs=4, checkpoint=ckpt, **kw), **run)
    assert resumed["start_epoch"] == 2
    assert [e["train_loss"] for e in resumed["epochs"]] == [e["train_loss"] for e in whole["epochs"]]
    assert resumed["test_metrics"] == whole["test_metrics"]
    assert set(whole["test_metrics"]) == {"value", "flow"} and set(whole["test_metrics"]["value"]) == {
        "rmse",
        "mae",
        "r2",
    }
