"""Synthetic graph generators: R-MAT (Graph500), a planted-community graph with label signal, and a
MAG-like heterogeneous graph. All are seeded and deterministic; all return symmetric edge sets
without self-loops or duplicates (heterogeneous relations are stored in one direction)."""

from __future__ import annotations

import numba
import numpy as np

from ..errors import InputError
from ..graph import DEFAULT_ETYPE, DEFAULT_NTYPE, Graph
from ..jit import kernel
from ..mixing import GOLDEN, mix64
from ..partition.assign.adjacency import undirected_csr
from .dataset import Dataset

GRAPH500 = (0.57, 0.19, 0.19)  # a, b, c (d = 1 - a - b - c)


@kernel(parallel=True)
def rmat_edges(scale: int, num_edges: int, a: float, b: float, c: float, seed: int, first: int = 0):
    """Sampled edges ``first .. first + num_edges - 1`` of the seed's stream (each a function of its index)."""
    src = np.empty(num_edges, dtype=np.int64)
    dst = np.empty(num_edges, dtype=np.int64)
    ab, abc = a + b, a + b + c
    base = np.uint64(seed) * np.uint64(GOLDEN)
    for i in numba.prange(num_edges):
        u, v = 0, 0
        for level in range(scale):
            r = mix64(base + np.uint64((first + i) * scale + level) + np.uint64(1))
            x = (r >> np.uint64(11)) * (1.0 / 9007199254740992.0)
            bit = 1 << (scale - 1 - level)
            if x >= a:
                if x < ab:
                    v |= bit
                elif x < abc:
                    u |= bit
                else:
                    u |= bit
                    v |= bit
        src[i], dst[i] = u, v
    return src, dst


def _symmetric(src: np.ndarray, dst: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    csr = undirected_csr(src, dst, n)
    return np.repeat(np.arange(n, dtype=np.int64), np.diff(csr.xadj)), csr.adjncy


def rmat_graph(
    scale: int,
    edge_factor: int = 16,
    feat_dim: int = 0,
    seed: int = 0,
    *,
    abc: tuple[float, float, float] = GRAPH500,
    num_classes: int = 0,
    fractions: tuple[float, float, float] = (0.1, 0.05, 0.05),
) -> Dataset:
    """R-MAT graph with ``2**scale`` nodes from ``edge_factor * 2**scale`` sampled edges (Graph500
    parameters), vertex IDs scrambled, symmetrised, self-loops and duplicates dropped.
    ``feat_dim > 0`` adds standard-normal float32 node features ``feat``; ``num_classes > 0`` (at most
    ``feat_dim``) a node classification task as ``generate rmat --chunked`` makes it: ``label`` (the argmax
    of the first ``num_classes`` feature columns) and random ``train_mask``/``val_mask``/``test_mask``
    (``fractions`` of the nodes)."""
    if num_classes < 0 or (num_classes and num_classes > feat_dim):
        raise InputError(
            f"num_classes ({num_classes}) must be >= 0 and at most feat_dim ({feat_dim}): labels are "
            "read off the features"
        )
    n = 1 << scale
    src, dst = rmat_edges(scale, edge_factor * n, *abc, seed)
    scramble = np.random.default_rng([seed, 1]).permutation(n)
    src, dst = _symmetric(scramble[src], scramble[dst], n)
    feats = {}
    if feat_dim:
        feats["feat"] = np.random.default_rng([seed, 2]).standard_normal((n, feat_dim), dtype=np.float32)
    if num_classes:
        feats["label"] = np.argmax(feats["feat"][:, :num_classes], axis=1).astype(np.int64)
        r, edges = np.random.default_rng([seed, 3]).random(n), np.cumsum((0.0, *fractions))
        splits = ("train_mask", "val_mask", "test_mask")
        feats |= {m: (r >= edges[j]) & (r < edges[j + 1]) for j, m in enumerate(splits)}
    g = Graph({DEFAULT_NTYPE: n}, {DEFAULT_ETYPE: (src, dst)}, {DEFAULT_NTYPE: feats} if feats else {})
    return Dataset(f"rmat{scale}", g, num_classes or None)


def _split_masks(n: int, rng: np.random.Generator, fractions=(0.3, 0.2, 0.5)) -> dict[str, np.ndarray]:
    order = rng.permutation(n)
    cuts = np.cumsum([int(round(f * n)) for f in fractions])
    masks, lo = {}, 0
    for name, hi in zip(("train_mask", "val_mask", "test_mask"), cuts):
        m = np.zeros(n, dtype=bool)
        m[order[lo : min(hi, n)]] = True
        masks[name], lo = m, hi
    return masks


def _pick_within(labels: np.ndarray, wanted: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """For each entry of ``wanted`` (a class), a uniformly random node of that class (of any class
    when that class has no node)."""
    order = np.argsort(labels, kind="stable")
    counts = np.bincount(labels, minlength=int(wanted.max(initial=0)) + 1)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    empty = counts[wanted] == 0
    starts, sizes = np.where(empty, 0, starts[wanted]), np.where(empty, labels.shape[0], counts[wanted])
    return order[starts + (rng.random(wanted.shape[0]) * sizes).astype(np.int64)]


def _class_features(
    labels: np.ndarray, num_classes: int, dim: int, noise: float, *, rng: np.random.Generator
) -> np.ndarray:
    centres = rng.standard_normal((num_classes, dim), dtype=np.float32)
    return centres[labels] + noise * rng.standard_normal((labels.shape[0], dim), dtype=np.float32)


TARGETS = ("classes", "regression", "multilabel")
EDGE_TARGETS = ("classes", "regression")


def community_graph(
    num_nodes: int = 20000,
    num_classes: int = 8,
    avg_degree: int = 16,
    intra: float = 0.85,
    *,
    feat_dim: int = 32,
    noise: float = 2.0,
    seed: int = 0,
    targets: str = "classes",
    edge_targets: str | None = None,
) -> Dataset:
    """Planted-community graph: node ``v`` belongs to community ``c[v]``; a fraction ``intra`` of its
    edges stay within its community. Features are the community's centre plus Gaussian noise (``noise`` sets
    how hard the task is from features alone), so both structure and features carry the community.

    ``targets``: what ``label`` holds. ``classes``: the community (int64). ``regression``: a float per node,
    its community's value (drawn from N(0, 1)) plus a quarter of its first feature plus N(0, 0.05) noise.
    ``multilabel``: ``num_classes`` 0/1 labels per node (int64 matrix): its community's label set (each label
    in it with probability 0.3), each entry flipped with probability 0.05.

    ``edge_targets``: edge labels and splits (30/20/50 %) of every edge (edge data ``label``, ``*_mask``).
    ``classes``: 0 within a community, 1 from a lower community to a higher one, 2 from a higher to a lower
    (so the direction matters); ``regression``: the product of the two communities' values plus N(0, 0.1)."""
    if targets not in TARGETS or edge_targets not in (None, *EDGE_TARGETS):
        raise ValueError(f"targets must be one of {TARGETS}, edge targets None or one of {EDGE_TARGETS}")
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, num_classes, num_nodes)
    m = num_nodes * avg_degree // 2
    src = rng.integers(0, num_nodes, m)
    inside = rng.random(m) < intra
    dst = rng.integers(0, num_nodes, m)
    dst[inside] = _pick_within(labels, labels[src[inside]], rng)
    src, dst = _symmetric(src, dst, num_nodes)
    x = _class_features(labels, num_classes, feat_dim, noise, rng=rng)
    planted = _planted(targets, labels, num_classes, x, rng=rng)
    feats = {"feat": x, "label": planted, **_split_masks(num_nodes, rng)}
    edge = {} if edge_targets is None else {DEFAULT_ETYPE: _edge_labels(edge_targets, labels, src, dst, rng=rng)}
    graph = Graph({DEFAULT_NTYPE: num_nodes}, {DEFAULT_ETYPE: (src, dst)}, {DEFAULT_NTYPE: feats}, edge)
    return Dataset("community", graph, num_classes if targets == "classes" else None)


def _edge_labels(
    kind: str, c: np.ndarray, src: np.ndarray, dst: np.ndarray, *, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    """The edge data of :func:`community_graph`'s ``edge_targets``."""
    cs, cd = c[src], c[dst]
    if kind == "classes":
        label = np.where(cs == cd, 0, np.where(cs < cd, 1, 2)).astype(np.int64)
    else:
        value = rng.standard_normal(int(c.max(initial=0)) + 1)
        label = (value[cs] * value[cd] + 0.1 * rng.standard_normal(src.shape[0])).astype(np.float32)
    return {"label": label, **_split_masks(src.shape[0], rng)}


def _planted(targets: str, c: np.ndarray, num_classes: int, x: np.ndarray, *, rng: np.random.Generator) -> np.ndarray:
    """The ``label`` of :func:`community_graph` for communities ``c`` and features ``x``."""
    if targets == "classes":
        return c
    if targets == "regression":
        value = rng.standard_normal(num_classes)
        return (value[c] + 0.25 * x[:, 0] + 0.05 * rng.standard_normal(c.shape[0])).astype(np.float32)
    sets = rng.random((num_classes, num_classes)) < 0.3
    flips = rng.random((c.shape[0], num_classes)) < 0.05
    return (sets[c] ^ flips).astype(np.int64)


def hetero_graph(
    num_papers: int = 20000,
    num_authors: int = 8000,
    num_institutions: int = 200,
    num_fields: int = 50,
    *,
    num_classes: int = 8,
    feat_dim: int = 32,
    noise: float = 2.0,
    seed: int = 0,
    targets: str = "classes",
    edge_targets: str | None = None,
) -> Dataset:
    """MAG-like heterogeneous graph: ``paper`` (features, label, splits), ``author``, ``institution`` and
    ``field`` (featureless), with relations ``author:writes:paper``, ``paper:cites:paper``,
    ``author:affiliated_with:institution`` and ``paper:has_topic:field``. Papers cite, authors write
    and topics attach mostly within a paper's class. ``targets``: what a paper's ``label`` holds, as in
    :func:`community_graph` (the paper's class standing for its community); ``edge_targets``: labels of the
    ``paper:cites:paper`` edges, as :func:`community_graph`'s of its edges."""
    if targets not in TARGETS or edge_targets not in (None, *EDGE_TARGETS):
        raise ValueError(f"targets must be one of {TARGETS}, edge targets None or one of {EDGE_TARGETS}")
    rng = np.random.default_rng(seed)
    label = rng.integers(0, num_classes, num_papers)
    author_class = rng.integers(0, num_classes, num_authors)
    field_class = np.arange(num_fields) % num_classes

    def within(classes: np.ndarray, targets: np.ndarray, count: int, p: float) -> np.ndarray:
        pick = rng.integers(0, len(targets), count)
        same = rng.random(count) < p
        pick[same] = _pick_within(targets, classes[same], rng)
        return pick

    w_src = rng.integers(0, num_authors, 3 * num_authors)
    w_dst = within(author_class[w_src], label, w_src.shape[0], 0.8)
    c_src = rng.integers(0, num_papers, 5 * num_papers)
    c_dst = within(label[c_src], label, c_src.shape[0], 0.8)
    keep = c_src != c_dst
    t_src = rng.integers(0, num_papers, 2 * num_papers)
    t_dst = within(label[t_src], field_class, t_src.shape[0], 0.7)
    edges = {
        ("author", "writes", "paper"): _unique_pairs(w_src, w_dst, num_papers),
        ("paper", "cites", "paper"): _unique_pairs(c_src[keep], c_dst[keep], num_papers),
        ("author", "affiliated_with", "institution"): (
            np.arange(num_authors),
            rng.integers(0, num_institutions, num_authors),
        ),
        ("paper", "has_topic", "field"): _unique_pairs(t_src, t_dst, num_fields),
    }
    x = _class_features(label, num_classes, feat_dim, noise, rng=rng)
    paper = {"feat": x, "label": _planted(targets, label, num_classes, x, rng=rng), **_split_masks(num_papers, rng)}
    num_nodes = {"paper": num_papers, "author": num_authors, "institution": num_institutions, "field": num_fields}
    classes = num_classes if targets == "classes" else None
    cites = ("paper", "cites", "paper")
    edge = {} if edge_targets is None else {cites: _edge_labels(edge_targets, label, *edges[cites], rng=rng)}
    return Dataset("hetero", Graph(num_nodes, edges, {"paper": paper}, edge), classes, "paper")


def _unique_pairs(src: np.ndarray, dst: np.ndarray, num_dst: int) -> tuple[np.ndarray, np.ndarray]:
    key = np.unique(src.astype(np.int64) * num_dst + dst)
    return key // num_dst, key % num_dst
