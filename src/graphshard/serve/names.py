"""Nodes named by the users' own IDs (``serve --id-map``): a request's IDs (``nodes``, ``pairs`` or ``edges``, a
new node's ``edges`` and ``out_edges``) become graphshard's before the request is checked, and the answer names
them by the users' IDs again. An ID the map lacks is a 404 naming the field. A new node may be given by its
raw column values (``{"columns": {"age": 31, "country": "fr"}}``): ``prepare``'s fitted transforms make its
feature row."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..prepare.apply import feature_row, read_transforms
from ..prepare.idmap import IDMap, read_id_maps
from .queries import GraphFacts, RequestError


@dataclass(frozen=True)
class NodeNames:
    """The ID map of every node type the service answers for, by the graph's type names, and their fitted
    feature transforms (``transforms.json``, by the same names)."""

    maps: dict[str, IDMap]
    transforms: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @classmethod
    def load(cls, prepared: str, counts: dict[str, int]) -> NodeNames:
        """The maps of a prepared directory, fitted to the served graph's node types and counts.

        Raises:
            InputError: a type without a map, or a map of another size (another graph's).
        """
        maps = read_id_maps(prepared)
        known = read_transforms(prepared)["nodes"] if (Path(prepared) / "transforms.json").exists() else {}
        fitted = {t: d.get("features", []) for t, d in known.items()}
        if len(counts) == 1 and len(maps) == 1:  # a one-type graph: the partitions may name its type otherwise
            only = next(iter(maps))
            maps, fitted = {next(iter(counts)): maps[only]}, {next(iter(counts)): fitted.get(only, [])}
        for ntype, n in counts.items():
            if ntype not in maps:
                raise InputError(f"{prepared}: no ID map of node type {ntype!r} (maps: {', '.join(maps)})")
            if maps[ntype].ids.size != n:
                raise InputError(
                    f"{prepared}: the ID map of {ntype!r} names {maps[ntype].ids.size} nodes, the graph has {n} "
                    "(another graph's maps?)"
                )
        return cls(maps, fitted)

    def _graph_ids(self, values: Any, ntype: str, name: str) -> Any:
        if not isinstance(values, list):
            return values  # not a list: the request's own checks say so
        ids, bad = self.maps[ntype].lookup(values)
        if bad is not None:
            raise RequestError(
                404, f"{name}[{bad}]: node {values[bad]!r} of type {ntype!r} is not in the ID map", f"{name}[{bad}]"
            )
        return ids.tolist()

    def request(self, body: Any, facts: GraphFacts) -> Any:
        """``body`` with the users' IDs replaced by graphshard's (a body of the wrong shape is left as it is)."""
        if not isinstance(body, dict):
            return body
        body = dict(body)
        ntype = body.get("type") if isinstance(body.get("type"), str) else None
        ntype = ntype if ntype in self.maps else (facts.types[0] if len(facts.types) == 1 else None)
        if ntype is not None and "nodes" in body:
            body["nodes"] = self._graph_ids(body["nodes"], ntype, "nodes")
        field = facts.pair_field
        if facts.pair_types is not None and isinstance(body.get(field), list):
            body[field] = self._pairs(body[field], field, facts.pair_types)
        if ntype is not None and isinstance(body.get("new"), list):
            body["new"] = [self._new(item, f"new[{i}]", ntype, facts) for i, item in enumerate(body["new"])]
        return body

    def _pairs(self, pairs: list[Any], field: str, types: tuple[str, str]) -> list[Any]:
        if not all(isinstance(p, list) and len(p) == 2 for p in pairs):
            return pairs  # the request's own checks name the pair at fault
        ends = []
        for end, ntype in enumerate(types):
            values = [p[end] for p in pairs]
            ids, bad = self.maps[ntype].lookup(values)
            if bad is not None:
                where = f"{field}[{bad}][{end}]"
                raise RequestError(404, f"{where}: node {values[bad]!r} of type {ntype!r} is not in the ID map", where)
            ends.append(ids.tolist())
        return [list(p) for p in zip(*ends)]

    def _new(self, item: Any, where: str, ntype: str, facts: GraphFacts) -> Any:
        if not isinstance(item, dict):
            return item
        item = dict(item)
        if "columns" in item:
            item = self._columns(item, where, ntype, facts.feat_name)
        for key, end in (("edges", 2), ("out_edges", 0)):
            fits = [et for et in facts.etypes if et[end] == ntype]
            value = item.get(key)
            if isinstance(value, list) and len(fits) == 1:
                item[key] = self._graph_ids(value, fits[0][2 - end], f"{where}.{key}")
            elif isinstance(value, dict):
                named = {}
                for k, v in value.items():
                    et = next((e for e in fits if k in (",".join(e), e[1])), None)  # None: the checks say so
                    named[k] = v if et is None else self._graph_ids(v, et[2 - end], f"{where}.{key}.{k}")
                item[key] = named
        return item

    def _columns(self, item: dict[str, Any], where: str, ntype: str, feat_name: str) -> dict[str, Any]:
        """A new node's raw column values made into its feature row (``features``), as prepare made the table's."""
        columns = item.pop("columns")
        if "features" in item:
            raise RequestError(422, f"{where}: give 'features' or 'columns', not both", f"{where}.columns")
        if not isinstance(columns, dict):
            raise RequestError(422, f"{where}.columns must be an object of column values", f"{where}.columns")
        try:
            row = feature_row(self.transforms.get(ntype, []), columns, feat_name)
        except InputError as exc:
            raise RequestError(422, f"{where}.columns: {exc}", f"{where}.columns") from None
        return item | {"features": {feat_name: row.tolist()}}

    def answer(self, answer: dict[str, Any], facts: GraphFacts) -> dict[str, Any]:
        """``answer`` naming its nodes by the users' IDs."""
        out = dict(answer)
        if "nodes" in out and out.get("type") in self.maps:
            ids = self.maps[out["type"]].ids
            out["nodes"] = [None if n is None else ids[n].item() for n in out["nodes"]]
        for key in ("pairs", "edges"):
            if key in out and facts.pair_types is not None:
                s, d = (self.maps[t].ids for t in facts.pair_types)
                out[key] = [[s[u].item(), d[v].item()] for u, v in out[key]]
        return out
