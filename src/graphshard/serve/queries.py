"""What a client may ask of ``graphshard serve``, checked before anything is computed: the JSON body of
``/v1/predict`` and ``/v1/embed`` becomes a :class:`Query`, or a :class:`RequestError` whose message names the
field at fault (``nodes[3]``, ``new[0].features.feat``) and whose status is the HTTP answer (400 a body that is
no JSON object, 404 an ID the graph does not have, 413 too many nodes, 422 a field of the wrong kind or size).

A request::

    {"nodes": [original IDs], "type": "<node type>"}        # existing nodes (type: optional when there is one)
    {"new": [{"features": {"feat": [...]}, "edges": [IDs], "out_edges": [IDs]}], "type": ...}   # new nodes
    {"nodes": [...], "stale": true}                          # rows of the precomputed embeddings (--embeddings)
    {"pairs": [[u, v], ...]}                                 # link scores (/v1/predict of a link checkpoint)
    {"edges": [[u, v], ...], "type": "src:rel:dst"}          # an edge task's predictions ("type" optional)

``edges`` of a new node are its in-neighbours (the nodes whose messages it receives), ``out_edges`` the nodes
that receive its own (on a graph stored with both directions of every link, give the same list to both)."""

from __future__ import annotations

import math
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

import numpy as np

FLOAT32_MAX = float(np.finfo(np.float32).max)


class RequestError(Exception):
    """A request that cannot be answered: ``status`` (4xx), ``field`` at fault (or None), ``message``."""

    def __init__(self, status: int, message: str, field: str | None = None):
        super().__init__(message)
        self.status, self.field, self.message = status, field, message

    def body(self) -> dict[str, Any]:
        """The JSON answer; text the client sent (a field name) is escaped where it is no valid Unicode."""
        field = None if self.field is None else _printable(self.field)
        return {"error": _printable(self.message), "field": field}


EType = tuple[str, str, str]


@dataclass(frozen=True)
class NewNode:
    """A node that is not in the graph: its feature row and its edges to existing nodes (original IDs), by edge
    type: ``edges[et]`` its in-neighbours over ``et`` (sources of type ``et[0]``), ``out_edges[et]`` the nodes
    of type ``et[2]`` it sends to."""

    features: np.ndarray  # float32, the model's input width
    edges: dict[EType, np.ndarray]
    out_edges: dict[EType, np.ndarray]


@dataclass(frozen=True)
class Query:
    """One request: ``ntype`` rows of existing nodes ``ids`` (original IDs, request order) or of ``new`` nodes."""

    kind: str
    ntype: str
    ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    new: tuple[NewNode, ...] = ()
    _: KW_ONLY
    stale: bool = False
    pairs: np.ndarray | None = None  # (2, n) original IDs of sources and destinations: link scores

    @property
    def size(self) -> int:
        return int(self.ids.shape[0]) + len(self.new) + (0 if self.pairs is None else int(self.pairs.size))


@dataclass(frozen=True)
class Limits:
    """What one request may ask for: nodes (existing or new), edges per new node, new nodes with out-edges."""

    max_nodes: int = 10_000
    max_edges: int = 10_000
    max_sending: int = 64  # new nodes with out-edges (each computed on a subgraph of its own)


@dataclass(frozen=True)
class GraphFacts:
    """What the checks need to know of the served graph and model: node counts per type, the types a request
    may name (those the model outputs), the input feature's name and width per type (None: the type has no
    features, so a new node of it cannot be given), whether stale rows are on hand, and why new nodes are not
    answered at all (None: they are)."""

    counts: dict[str, int]
    types: list[str]
    feat_name: str
    widths: dict[str, int | None]
    _: KW_ONLY
    stale: bool
    no_new: str | None = None  # why new nodes are not answered (None: they are)
    pair_types: tuple[str, str] | None = None  # a link model's source and destination types: it scores pairs
    pair_field: str = "pairs"  # what a request names them: pairs (link prediction) or edges (an edge task)
    pair_etype: str | None = None  # an edge task's edge type, src:rel:dst (a request's "type" must be it)
    etypes: list[EType] = field(default_factory=list)  # the graph's edge types (new nodes' edges name them)


def parse_query(body: Any, kind: str, facts: GraphFacts, limits: Limits) -> Query:
    """The :class:`Query` in ``body`` (parsed JSON), or a :class:`RequestError` naming the field at fault."""
    if not isinstance(body, dict):
        raise RequestError(400, f"the request body must be a JSON object, got {_kind(body)}")
    fields = {"nodes", "type", "new", "stale", "pairs", "edges"}
    unknown = sorted(set(body) - fields)
    if unknown:
        raise RequestError(422, f"unknown field {unknown[0]!r} (fields: {', '.join(sorted(fields))})", unknown[0])
    stale = body.get("stale", False)
    if not isinstance(stale, bool):
        raise RequestError(422, f"'stale' must be true or false, got {_kind(stale)}", "stale")
    if stale and not facts.stale:
        raise RequestError(
            422, "no precomputed embeddings are served (start graphshard serve with --embeddings)", "stale"
        )
    if kind == "predict" and facts.pair_types is not None:
        return _pairs_query(body, stale, facts, limits)
    if body.get("pairs") is not None:
        raise RequestError(422, "'pairs' are scored by /v1/predict of a link prediction model", "pairs")
    if body.get("edges") is not None:
        raise RequestError(422, "'edges' are predicted by /v1/predict of an edge task's model", "edges")
    ntype = _type(body.get("type"), facts)
    has_nodes, has_new = body.get("nodes") is not None, body.get("new") is not None
    if has_nodes == has_new:
        raise RequestError(422, "give either 'nodes' (existing nodes) or 'new' (new nodes)", "nodes")
    if has_nodes:
        ids = ids_of(body["nodes"], "nodes", ntype, facts, most=limits.max_nodes)
        return Query(kind, ntype, ids, stale=stale)
    if stale:
        raise RequestError(422, "new nodes have no precomputed embeddings: leave out 'stale'", "stale")
    items = body["new"] if isinstance(body["new"], list) else [body["new"]]
    if not items:
        raise RequestError(422, "'new' lists no node", "new")
    if len(items) > limits.max_nodes:
        raise RequestError(413, f"'new' has {len(items)} nodes, more than the {limits.max_nodes} served", "new")
    new = tuple(_new(item, f"new[{i}]", ntype, facts, limits=limits) for i, item in enumerate(items))
    sending = sum(1 for n in new if n.out_edges)
    if sending > limits.max_sending:
        raise RequestError(
            413,
            f"'new' has {sending} nodes with out_edges, more than the {limits.max_sending} served a request "
            "(each is computed on a subgraph of its own)",
            "new",
        )
    return Query(kind, ntype, new=new)


def _pairs_query(body: dict, stale: bool, facts: GraphFacts, limits: Limits) -> Query:
    """A link model's ``/v1/predict``: ``pairs`` of (source, destination) original IDs of its edge type; or an edge
    task's: ``edges`` so given (and, optionally, their ``type``)."""
    assert facts.pair_types is not None
    f = facts.pair_field
    allowed = {f, "stale"} | ({"type"} if facts.pair_etype else set())
    extra = sorted(set(body) - allowed)
    if extra:
        what = "a link prediction model scores 'pairs'" if f == "pairs" else "an edge task's model predicts 'edges'"
        raise RequestError(422, f"{what} only: leave out {extra[0]!r}", extra[0])
    if body.get("type") is not None and body["type"] != facts.pair_etype:
        raise RequestError(
            422, f"'type' {body['type']!r} is not the edge type the model predicts ({facts.pair_etype!r})", "type"
        )
    value = body.get(f)
    if not isinstance(value, list) or not value:
        raise RequestError(422, f"'{f}' must be a non-empty list of [source, destination] node IDs", f)
    if len(value) > limits.max_nodes:
        raise RequestError(413, f"'{f}' has {len(value)} pairs, more than the {limits.max_nodes} served", f)
    try:
        arr = np.array(value, dtype=object)
    except ValueError:  # ragged
        arr = np.zeros((0,), dtype=object)
    if arr.ndim != 2 or arr.shape[1] != 2:
        i = next((i for i, p in enumerate(value) if not (isinstance(p, list) and len(p) == 2)), 0)  # the culprit
        raise RequestError(422, f"{f}[{i}] must be [source, destination], got {_kind(value[i])}", f"{f}[{i}]")
    flat = arr.ravel().tolist()
    try:
        ids = _integers(flat, f).reshape(-1, 2)
    except RequestError as exc:
        assert exc.field is not None
        k = int(exc.field[len(f) + 1 : -1])
        raise RequestError(
            422, f"{f}[{k // 2}][{k % 2}] must be an integer node ID", f"{f}[{k // 2}][{k % 2}]"
        ) from None
    for end, t in enumerate(facts.pair_types):
        count = facts.counts[t]
        bad = (ids[:, end] < 0) | (ids[:, end] >= count)
        if bad.any():
            i = int(np.argmax(bad))
            where = f"{f}[{i}][{end}]"
            raise RequestError(404, f"{where}: node {ids[i, end]} of type {t!r} is not in the graph", where)
    s_type = facts.pair_types[0]
    return Query("predict", s_type, stale=stale, pairs=np.ascontiguousarray(ids.T))


def _type(value: Any, facts: GraphFacts) -> str:
    if value is None:
        if len(facts.types) == 1:
            return facts.types[0]
        raise RequestError(422, f"'type' is required: the model answers for node types {facts.types}", "type")
    if not isinstance(value, str) or value not in facts.types:
        raise RequestError(
            422, f"'type' {value!r} is not a node type the model answers for (types: {facts.types})", "type"
        )
    return value


def ids_of(value: Any, name: str, ntype: str, facts: GraphFacts, *, most: int) -> np.ndarray:
    """The original node IDs listed in ``value`` (field ``name``), each checked to be an integer in range."""
    if not isinstance(value, list):
        raise RequestError(422, f"'{name}' must be a list of node IDs, got {_kind(value)}", name)
    if len(value) > most:
        raise RequestError(413, f"'{name}' has {len(value)} IDs, more than the {most} served", name)
    ids = _integers(value, name)
    count = facts.counts[ntype]
    bad = (ids < 0) | (ids >= count)
    if bad.any():
        i = int(np.argmax(bad))
        raise RequestError(
            404,
            f"{name}[{i}]: node {value[i]} of type {ntype!r} is not in the graph (IDs 0..{count - 1})",
            f"{name}[{i}]",
        )
    return ids


def _new(item: Any, where: str, ntype: str, facts: GraphFacts, *, limits: Limits) -> NewNode:
    if not isinstance(item, dict):
        raise RequestError(422, f"{where} must be an object with 'features' and 'edges', got {_kind(item)}", where)
    unknown = sorted(set(item) - {"features", "edges", "out_edges"})
    if unknown:
        raise RequestError(422, f"{where}: unknown field {unknown[0]!r} (fields: features, edges, out_edges)", where)
    if facts.no_new is not None:
        raise RequestError(422, facts.no_new, "new")
    width = facts.widths.get(ntype)
    if width is None:
        raise RequestError(
            422,
            f"nodes of type {ntype!r} have no input features (the model learnt one row per node): a new node "
            "of it cannot be computed",
            f"{where}.features",
        )
    feats = item.get("features")
    if not isinstance(feats, dict) or facts.feat_name not in feats:
        raise RequestError(
            422, f"{where}.features must be an object with the node's {facts.feat_name!r} row", f"{where}.features"
        )
    row = _row(feats[facts.feat_name], f"{where}.features.{facts.feat_name}", width)
    ins = _edge_lists(item.get("edges", []), f"{where}.edges", ntype, 2, facts=facts, limits=limits)
    outs = _edge_lists(item.get("out_edges", []), f"{where}.out_edges", ntype, 0, facts=facts, limits=limits)
    return NewNode(row, ins, outs)


def _edge_lists(value: Any, name: str, ntype: str, end: int, *, facts: GraphFacts, limits: Limits) -> dict:
    """A new node's edges of one direction (``end``: 2 in-edges, the node is the destination; 0 out-edges):
    a list of IDs where one edge type fits, else an object ``{edge type: [IDs]}`` (``"src,rel,dst"`` or the
    relation's name), each list's IDs checked against the other end's type."""
    fits = [et for et in facts.etypes if et[end] == ntype]
    if isinstance(value, list):  # one list: the one edge type that fits
        if not value:
            return {}
        if len(fits) != 1:
            raise RequestError(
                422,
                f"{name}: {len(fits)} edge types {'end' if end == 2 else 'start'} at node type {ntype!r}: give an "
                "object {edge type: [IDs]}",
                name,
            )
        return {fits[0]: ids_of(value, name, fits[0][2 - end], facts, most=limits.max_edges)}
    if not isinstance(value, dict):
        raise RequestError(422, f"{name} must be a list of node IDs or an object {{edge type: [IDs]}}", name)
    out: dict[EType, np.ndarray] = {}
    for key, ids in value.items():
        et = _edge_type(key, fits, f"{name}.{key}")
        out[et] = ids_of(ids, f"{name}.{key}", et[2 - end], facts, most=limits.max_edges)
    return out


def _edge_type(key: str, fits: list[EType], where: str) -> EType:
    found = [et for et in fits if key in (",".join(et), et[1])]
    if len(found) != 1:
        names = [",".join(et) for et in fits]
        raise RequestError(422, f"{where}: not one edge type of this end of the node (these are: {names})", where)
    return found[0]


def _row(value: Any, name: str, width: int) -> np.ndarray:
    if not isinstance(value, list):
        raise RequestError(422, f"{name} must be a list of {width} numbers, got {_kind(value)}", name)
    if len(value) != width:
        raise RequestError(422, f"{name} has {len(value)} values; the model reads {width}", name)
    try:
        row = np.asarray(value, dtype=np.float64) if set(map(type, value)) <= {int, float} else None
    except OverflowError:  # an integer beyond any float
        row = None
    if row is None or not (np.abs(row) <= FLOAT32_MAX).all():  # NaN, infinities, beyond float32 too
        i = next(i for i, v in enumerate(value) if not _finite(v))  # on error only: find the first culprit
        raise RequestError(
            422, f"{name}[{i}] must be a finite number within float32's range, got {_kind(value[i])}", f"{name}[{i}]"
        )
    return row.astype(np.float32)


def _integers(value: list, name: str) -> np.ndarray:
    """``value`` as int64, or a :class:`RequestError` naming the first entry that is no integer of int64."""
    if not value:
        return np.zeros(0, dtype=np.int64)
    if set(map(type, value)) == {int}:  # looked at in C, not by a Python loop
        try:
            return np.asarray(value, dtype=np.int64)
        except OverflowError:
            pass
    for i, v in enumerate(value):  # on error only: find the first culprit
        if type(v) is not int or not -(2**63) <= v < 2**63:
            raise RequestError(422, f"{name}[{i}] must be an integer node ID, got {_kind(v)}", f"{name}[{i}]")
    raise AssertionError("unreachable: some entry was not an int64")


def _finite(v: Any) -> bool:
    try:
        return type(v) in (int, float) and math.isfinite(v) and abs(v) <= FLOAT32_MAX
    except OverflowError:  # an integer beyond any float
        return False


def _printable(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    if type(value) in names:
        return names[type(value)]
    if isinstance(value, int) and abs(value) >= 10**30:
        return f"an integer of {value.bit_length()} bits"
    return repr(value) if isinstance(value, (int, float)) else type(value).__name__
