"""Link evaluation with nothing of the whole graph on a rank (issue 28) gives the figures a single process
computes the naive way: one launch of 2 ranks evaluates three partitionings (4 partitions served 2 per
rank, a heterogeneous relation over 2 partitions with ``orig_nids`` files, and 1 partition served by both
ranks) in blocks of 64 held-out edges (the known edges sharded 300 at a time), and saves the outputs it
ranked with in original order; the test ranks the same edges against the same negatives from those outputs
with whole tables of original IDs and known edges, as the code did before (equal within float32 sums:
rank_sums adds in float32, and one candidate ranked otherwise would move a figure by 1e-6 or more). The
sharded original-ID map is checked in the same launch: every original ID of every partition, from both
ranks, IDs outside the type refused, and stored original IDs that are not a permutation refused."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.numpy import save_file

from graphshard import partition_graph
from graphshard.datasets import community_graph, hetero_graph
from graphshard.distributed.ranks.launcher import launch
from graphshard.format.load import load_partition_book
from graphshard.graph import with_reverse_edges
from graphshard.models import DotDecoder
from graphshard.tasks.link_split import LinkSplit, save_link_split, split_edges

CHUNK, NEGATIVES, HITS, SEED = 64, 40, 5, 3


def _cases(root: Path) -> dict[str, dict]:
    homo = community_graph(num_nodes=300, avg_degree=8, feat_dim=8, seed=2).graph
    rest, held = split_edges(homo, val_frac=0.1, test_frac=0.15, seed=1)
    save_link_split(held, root / "homo.safetensors")
    bad = held.test.copy()
    bad[1, -1] = homo.num_nodes["_N"]  # in the last block, which rank 1 reads
    save_link_split(LinkSplit(held.etype, held.val, bad), root / "bad.safetensors")
    hetero = hetero_graph(num_papers=300, num_authors=150, num_institutions=10, num_fields=8, seed=4).graph
    et = ("author", "writes", "paper")
    h_rest, h_held = split_edges(hetero, et, val_frac=0.1, test_frac=0.15, seed=1)
    save_link_split(h_held, root / "hetero.safetensors")
    partition_graph(rest, "four", 4, root / "four", part_method="random")
    partition_graph(rest, "one", 1, root / "one", part_method="random")
    partition_graph(with_reverse_edges(h_rest), "het", 2, root / "het", part_method="random", save_orig_ids=True)
    shutil.copytree(root / "one", root / "dup")  # its node 1 given node 0's original ID: one ID missing, one twice
    path = root / "dup" / "part0" / "graph.safetensors"
    with safe_open(str(path), framework="np") as f:
        tensors, meta = {k: f.get_tensor(k) for k in f.keys()}, f.metadata()
    tensors["node/orig_id"][1] = tensors["node/orig_id"][0]
    save_file(tensors, str(path), metadata=meta)
    (homo_et,) = homo.canonical_etypes
    return {
        "four": {"rest": rest, "held": held, "split": "homo.safetensors", "et": homo_et},
        "one": {"rest": rest, "held": held, "split": "homo.safetensors", "et": homo_et},
        "het": {"rest": h_rest, "held": h_held, "split": "hetero.safetensors", "et": et},
    }


def _worker(root: str, names: list[str]) -> None:
    import graphshard.tasks.link as link
    import graphshard.tasks.link_metrics as link_metrics
    from graphshard.distributed.runtime.original import OriginalIds
    from graphshard.distributed.runtime.session import session
    from graphshard.errors import FormatError
    from graphshard.tasks.embeddings import save_tables
    from graphshard.tasks.inputs import ModelInputs
    from graphshard.tasks.link_split import open_link_split
    from graphshard.tasks.loop import open_graph
    from graphshard.tasks.options import TrainOptions

    link._CHUNK = CHUNK  # several blocks per list, and ranks with different numbers of them
    link_metrics.BUILD_EDGES = 300  # the known edges are sharded in several rounds, of different sizes per rank
    out = Path(root)
    with session(timeout=60) as s:
        g = open_graph(TrainOptions(part_config=str(out / "dup" / "one.json"), verify=False))  # no checksum check
        try:
            OriginalIds(g, "_N")
        except FormatError as exc:
            (out / f"dup-rank{s.rank}.txt").write_text(str(exc))
        for name in names:
            split = str(out / ("hetero.safetensors" if name == "het" else "homo.safetensors"))
            opts = TrainOptions(
                part_config=str(out / name / f"{name}.json"),
                task="link",
                link_split=split,
                filtered=True,
                eval_negatives=NEGATIVES,
                hits_k=HITS,
                hidden=8,
                seed=SEED,
                progress=False,
            )
            torch.manual_seed(SEED)
            g = open_graph(opts)
            held = open_link_split(split)
            et = g.canonical_etype(held.etype)
            inputs = ModelInputs(g, opts)
            evaluate = link.LinkEvaluator(s, g, link.link_model(opts, inputs, et), inputs, et=et, opts=opts, held=held)
            figures = {"val": evaluate("val", 1), "test": evaluate("test", 2)}
            save_tables(s, g, evaluate.outputs.get(), str(out / f"{name}-emb" / ("" if name == "het" else "x.npy")))
            maps = {}
            for t in g.ntypes:
                to_new = OriginalIds(g, t)
                refused = []
                for bad in (-1, g.num_nodes(t)):
                    try:
                        to_new([0, bad])
                    except Exception as exc:  # the test reads its type and message
                        refused.append(f"{type(exc).__name__}: {exc}")
                np.save(out / f"{name}-map-{t}-rank{s.rank}.npy", to_new(np.arange(g.num_nodes(t))))
                maps[t] = refused
                to_new.free()
            evaluate.close()
            if s.rank == 0:
                (out / f"{name}.json").write_text(json.dumps({"figures": figures, "refused": maps}))
            if name == "four":  # a held-out ID outside the graph, read by rank 1 alone: every rank says so
                try:
                    link.LinkEvaluator(
                        s, g, evaluate.model, inputs, et=et, opts=opts, held=open_link_split(out / "bad.safetensors")
                    )
                except FormatError as exc:
                    (out / f"bad-rank{s.rank}.txt").write_text(str(exc))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("sharded")
    cases = _cases(root)
    launch(_worker, 2, (str(root), list(cases)), timeout=240)
    return root, cases


def _naive_figures(case: dict, emb: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    """The figures from whole tables: every known edge's key in original IDs, every list's every block."""
    et, rest, held = case["et"], case["rest"], case["held"]
    n_dst = rest.num_nodes[et[2]]
    src, dst = (np.asarray(a, dtype=np.int64) for a in rest.edges[et])
    known = [src * n_dst + dst, held.val[0] * n_dst + held.val[1], held.test[0] * n_dst + held.test[1]]
    keys = np.concatenate(known)
    if et[0] == et[2]:
        keys = np.concatenate([keys, (keys % n_dst) * n_dst + keys // n_dst])
    keys = np.unique(keys)
    decoder, out = DotDecoder(), {}
    for key, tag in (("val", 1), ("test", 2)):
        pairs = getattr(held, key)
        sums = {kind: np.zeros(5) for kind in ("raw", "filtered")}  # rr, count, wins, pairs, hits
        for c in range(math.ceil(pairs.shape[1] / CHUNK)):
            block = pairs[:, c * CHUNK : (c + 1) * CHUNK]
            neg = np.random.default_rng([SEED, tag, c]).integers(0, n_dst, (block.shape[1], NEGATIVES))
            h_src = torch.from_numpy(emb[et[0]][block[0]])
            pos = decoder(h_src, torch.from_numpy(emb[et[2]][block[1]])).numpy()
            h_neg = torch.from_numpy(emb[et[2]][neg])
            negs = decoder(h_src.unsqueeze(1).expand_as(h_neg), h_neg).numpy()
            is_known = np.isin(block[0][:, None] * n_dst + neg, keys)
            for kind, keep in (("raw", np.ones_like(is_known)), ("filtered", ~is_known)):
                above = ((negs > pos[:, None]) & keep).sum(1) + 0.5 * ((negs == pos[:, None]) & keep).sum(1)
                rank = 1 + above
                sums[kind] += [
                    (1 / rank).sum(),
                    len(pos),
                    keep.sum() - above.sum(),
                    keep.sum(),
                    (rank <= HITS).sum(),
                ]
        out[key] = {}
        for kind, suffix in (("raw", ""), ("filtered", "_filtered")):
            rr, count, wins, total, hits = sums[kind]
            out[key] |= {f"mrr{suffix}": rr / count, f"auc{suffix}": wins / total, f"hits@{HITS}{suffix}": hits / count}
    return out


@pytest.mark.parametrize("name", ["four", "one", "het"])
def test_sharded_evaluation_gives_the_naive_figures(run, name):
    root, cases = run
    case = cases[name]
    if name == "het":
        emb = {t: np.load(root / f"{name}-emb" / f"{t}.npy") for t in (case["et"][0], case["et"][2])}
    else:
        emb = {case["et"][0]: np.load(root / f"{name}-emb" / "x.npy")}
    got = json.loads((root / f"{name}.json").read_text())["figures"]
    want = _naive_figures(case, emb)
    assert got.keys() == want.keys()
    for key in want:
        assert got[key].keys() == want[key].keys()
        for figure, value in want[key].items():
            assert got[key][figure] == pytest.approx(value, abs=1e-7), (name, key, figure)
    assert want["test"]["mrr_filtered"] > want["test"]["mrr"]  # filtering took candidates away, so it was tested


@pytest.mark.parametrize("name", ["four", "het"])
def test_the_original_id_map_finds_every_node_from_every_rank(run, name):
    root, _ = run
    config = root / name / f"{name}.json"
    book = load_partition_book(config)
    for t in book.ntypes:
        want = book.from_original(t, np.arange(book.num_nodes(t))).numpy()  # the whole table, as before
        for rank in (0, 1):
            assert np.array_equal(np.load(root / f"{name}-map-{t}-rank{rank}.npy"), want), (t, rank)


def test_a_held_out_id_outside_the_graph_is_the_same_error_on_every_rank(run):
    root, cases = run
    said = [(root / f"bad-rank{r}.txt").read_text() for r in (0, 1)]
    n = cases["four"]["rest"].num_nodes["_N"]
    assert said[0] == said[1]
    assert said[0].startswith(f"{root / 'bad.safetensors'}: tensor 'test' gives edge ")
    assert f"the destination node ID {n}, outside [0, {n})" in said[0]


def test_original_ids_that_are_not_a_permutation_are_the_same_error_on_every_rank(run):
    root, _ = run
    said = [(root / f"dup-rank{r}.txt").read_text() for r in (0, 1)]
    config = root / "dup" / "one.json"
    missing = int(load_partition_book(root / "one" / "one.json").to_original("_N", [1])[0])
    assert (
        said[0]
        == said[1]
        == (
            f"{config}: the original node IDs of type '_N' stored with its partitions are not a permutation: "
            f"original ID {missing} is missing (another one repeats)"
        )
    )


def test_the_original_id_map_refuses_ids_outside_the_type(run):
    root, _ = run
    refused = json.loads((root / "het.json").read_text())["refused"]
    for t, messages in refused.items():
        n = load_partition_book(root / "het" / "het.json").num_nodes(t)
        assert messages == [
            f"IDRangeError: original node ID -1 of type {t!r} is out of range [0, {n}) (1 such IDs)",
            f"IDRangeError: original node ID {n} of type {t!r} is out of range [0, {n}) (1 such IDs)",
        ]
