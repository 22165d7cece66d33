"""The remote-feature cache: batches are the same with any cache size (in-process and in sampler workers),
hits + misses = lookups of remote rows, the bytes it saves are the bytes no longer fetched, the access
estimate equals a dense computation on the original graph, and training gives the same result."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphshard import partition_graph
from graphshard.cli import main
from graphshard.datasets import community_graph, save_dataset
from graphshard.distributed.ranks.launcher import launch
from graphshard.distributed.remote.cache import FeatureCache, cache_budget
from graphshard.errors import InputError
from graphshard.train import TrainOptions, train
from tests.graphs import small_hetero, small_homo


@pytest.mark.parametrize("dense", [True, False])
def test_split_serves_remote_hits_and_counts(dense, monkeypatch):
    """With a slot per node of the type, and on a type beyond ``DENSE_SLOT_NODES`` by searching the cached IDs
    (no table of every node on a rank): the same rows."""
    monkeypatch.setattr("graphshard.distributed.remote.cache.DENSE_SLOT_NODES", 10 if dense else 9)
    rows = torch.arange(30, dtype=torch.float32).view(3, 10)
    cache = FeatureCache({"_N": np.array([2, 5, 7])}, {("_N", "feat"): rows}, {"_N": 10})
    ids = np.array([5, 1, 7, 7, 9, 2])
    remote = np.array([True, True, False, True, True, True])  # the first 7 is local: never served here
    hit, got, todo = cache.split("_N", "feat", ids, remote)
    assert hit.tolist() == [0, 3, 5] and todo.tolist() == [1, 2, 4]
    assert torch.equal(got, rows[[1, 2, 0]])
    assert cache.stats == {"lookups": 5, "hits": 3, "misses": 2, "bytes_saved": 3 * 10 * 4}
    assert (cache._slots != {}) == dense


def test_budget_by_ratio_or_megabytes():
    assert cache_budget(0.2, 0, 1000, 128) == 200
    assert cache_budget(0, 1.0, 1000, 128) == 7812
    with pytest.raises(InputError, match="not both"):
        cache_budget(0.2, 1.0, 1000, 128)
    with pytest.raises(InputError, match=">= 0"):
        cache_budget(-0.1, 0, 1000, 128)


def _batches(dg, seeds, ntype, workers=0):
    from graphshard.distributed.loaders.loader import DistNeighborLoader

    with DistNeighborLoader(
        dg,
        [3, 2],
        seeds,
        batch_size=16,
        input_type=ntype,
        shuffle=True,
        seed=3,
        num_workers=workers,
        prefetch=0,
        node_attrs=(),
    ) as loader:  # x and y only
        return list(loader)


def _stores(batch):
    return [batch[t] for t in batch.node_types] if hasattr(batch, "node_types") else [batch]


def _same(a, b):
    for x, y in zip(_stores(a), _stores(b)):
        for key in ("n_id", "x", "y"):
            if key in x:
                assert torch.equal(x[key], y[key]), key
    for ea, eb in zip(a.edge_stores, b.edge_stores):
        assert torch.equal(ea.edge_index, eb.edge_index) and torch.equal(ea.e_id, eb.e_id)


def _remote_rows(dg, batch):
    """Rows of other partitions a batch asks for, over its feature names (an independent count)."""
    book, hetero, total = dg.get_partition_book(), len(dg.ntypes) > 1, 0
    for t in batch.node_types if hetero else dg.ntypes:
        store = batch[t] if hetero else batch
        names = [n for n in ("feat", "label") if dg.features.has(t, n)]
        owner = book.nid2partid(store.n_id.numpy(), t).numpy()
        total += int((owner != dg.part_id).sum()) * len(names)
    return total


def _cache_worker(homo_config, hetero_config):
    from graphshard.distributed.remote.cache import build_cache
    from graphshard.distributed.runtime.graph import DistGraph
    from graphshard.distributed.runtime.session import session

    with session(timeout=90) as s:
        for name, config, ntype in (("s", homo_config, None), ("h", hetero_config, "paper")):
            dg = DistGraph(name, config, colocated=False)  # the cache holds rows that come over RPC
            t = ntype or dg.ntypes[0]
            seeds = dg.get_partition_book().partid2nids(s.rank, ntype).numpy()
            before = dg.features.stats["bytes_received"]
            plain = _batches(dg, seeds, ntype)
            plain_bytes = dg.features.stats["bytes_received"] - before
            for ratio in (0.2, 1.0):
                cache = build_cache(dg, {t: seeds}, [3, 2], ["feat", "label"], ratio=ratio)
                assert cache.num_rows <= round(ratio * dg.sampling_graph.count)
                dg.features.attach_cache(cache)
                before = dg.features.stats["bytes_received"]
                cached = _batches(dg, seeds, ntype)
                fetched = dg.features.stats["bytes_received"] - before
                for a, b in zip(plain, cached):
                    _same(a, b)
                st = cache.stats
                assert st["hits"] + st["misses"] == st["lookups"] == sum(_remote_rows(dg, b) for b in cached)
                assert st["hits"] > 0 and fetched == plain_bytes - st["bytes_saved"]
                assert sum(b.cache_hits for b in cached) == st["hits"]
                if ratio == 0.2 and name == "s":  # sampler workers get the cache too, in shared memory
                    in_workers = _batches(dg, seeds, ntype, workers=1)
                    for a, b in zip(plain, in_workers):
                        _same(a, b)
                    assert sum(b.cache_hits for b in in_workers) == st["hits"]
                dg.features.attach_cache(None)


def test_batches_do_not_depend_on_the_cache(tmp_path):
    partition_graph(small_homo(), "s", 2, tmp_path / "s", part_method="random", num_hops=1)
    partition_graph(small_hetero(), "h", 2, tmp_path / "h", part_method="metis", num_hops=1)
    launch(_cache_worker, 2, (str(tmp_path / "s" / "s.json"), str(tmp_path / "h" / "h.json")), timeout=240)


def _dense_reads(src, dst, n, seeds, fanouts):
    """Expected reads by the definition, on the original edge list (independent of partitions)."""
    deg = np.bincount(dst, minlength=n)
    w = np.zeros(n)
    w[seeds] = 1.0
    total = w.copy()
    for f in fanouts:
        take = np.minimum(1.0, f / np.maximum(deg, 1)) if f >= 0 else np.ones(n)
        w = np.bincount(src, weights=(w * take)[dst], minlength=n)
        total += w
    return total


def _reads_worker(config, out):
    from graphshard.distributed.remote.access import expected_reads
    from graphshard.distributed.runtime.graph import DistGraph
    from graphshard.distributed.runtime.session import session

    with session(timeout=60) as s:
        dg = DistGraph("s", config)
        book = dg.get_partition_book()
        seeds = book.partid2nids(s.rank).numpy()[::3]
        ids, reads = expected_reads(dg.group, dg.sampling_graph, book, seeds, fanouts=np.array([[3], [2]]))
        np.save(f"{out}/reads{s.rank}.npy", np.stack([book.to_original("_N", ids).numpy(), reads]))
        np.save(f"{out}/seeds{s.rank}.npy", book.to_original("_N", seeds).numpy())


def test_access_estimate_equals_the_dense_definition(tmp_path):
    g = small_homo()
    partition_graph(g, "s", 2, tmp_path / "p", part_method="random", num_hops=1)
    launch(_reads_worker, 2, (str(tmp_path / "p" / "s.json"), str(tmp_path)), timeout=120)
    src, dst = g.edges[("_N", "_E", "_N")]
    for r in range(2):
        ids, reads = np.load(tmp_path / f"reads{r}.npy")
        want = _dense_reads(src, dst, g.num_nodes["_N"], np.load(tmp_path / f"seeds{r}.npy"), [3, 2])
        assert set(ids.astype(int)) == set(np.flatnonzero(want))
        np.testing.assert_allclose(reads, want[ids.astype(int)], rtol=1e-9)


def test_training_with_a_cache_gives_the_same_result(tmp_path):
    save_dataset(community_graph(num_nodes=3000, noise=8.0, seed=4), tmp_path / "data")
    kw = dict(fanouts=[5, 5], batch_size=256, epochs=2, progress=False, colocated=False)  # rows over RPC
    runs = [
        train(
            TrainOptions(cache_ratio=ratio, **kw), num_procs=2, dataset=str(tmp_path / "data"), work_dir=str(tmp_path)
        )
        for ratio in (0.0, 0.5)
    ]
    assert runs[0]["test_acc"] == runs[1]["test_acc"]
    assert [e["train_loss"] for e in runs[0]["epochs"]] == [e["train_loss"] for e in runs[1]["epochs"]]
    plain, cached = runs[0]["epochs"][-1], runs[1]["epochs"][-1]
    assert cached["cache_hits"] > 0 and cached["fetch_bytes"] == plain["fetch_bytes"] - cached["cache_bytes_saved"]
    assert runs[1]["cache_rows"] > 0 and runs[1]["cache_build_s"] > 0 and "cache_rows" not in runs[0]


def test_cli_takes_one_cache_size(capsys):
    assert main(["train", "--part-config", "x.json", "--cache-ratio", "0.2", "--cache-mb", "5"]) == 2
    assert "give cache_ratio (--cache-ratio) or cache_mb (--cache-mb), not both" in capsys.readouterr().err
    assert main(["train", "--part-config", "x.json", "--cache-ratio", "-1"]) == 2
    assert "argument --cache-ratio: expected a number in [0, inf), got '-1'" in capsys.readouterr().err
