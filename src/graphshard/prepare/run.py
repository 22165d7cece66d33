"""``graphshard prepare``: the users' tables into a chunked graph, in three phases.

1. **Check** (nothing written): the tables are read as the config says, their columns fit their uses, node
   IDs are present and unique, edges name existing nodes (``on_dangling``), features fit and labels read.
2. **Number**: each node type's IDs are ranked (ascending) into graphshard's IDs 0..N-1.
3. **Write**, into a staging directory inside ``out`` published whole at the end: ``id_maps/<type>/`` (the
   user's ID and graphshard's, Parquet, in ID order), ``nodes/<type>/`` (features, in ID order),
   ``edges/<src>__<rel>__<dst>/`` (graphshard's source and destination IDs, features, label), labels and
   masks as NumPy chunks, ``transforms.json`` (every fitted transform) and ``metadata.json`` last.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..chunked.spec import ChunkedMeta, FileSpec, read_metadata, write_metadata
from ..errors import InputError
from ..format.outputs import check_output_dir
from ..format.staging import atomic_file, staged_dir
from ..graph import EType, etype_str
from ..names import inside
from . import checks
from .config import EdgeSpec, NodeSpec, PrepareConfig, read_prepare_config
from .edges import BROADCAST, EdgeWriter, broadcast
from .engines import open_engine, require_engine
from .expressions import Builder, feature_select
from .fit import Fitter, check_finite_fit, numeric_columns
from .labels import label_arrays, node_splits
from .write import NID, npy_chunks, write_sorted

log = logging.getLogger("graphshard.prepare")
FORMAT_VERSION = 1


@dataclass
class Prepared:
    """What a prepare run wrote: where, how many nodes and edges of each type, edges dropped, seconds."""

    out: Path
    num_nodes: dict[str, int]
    num_edges: dict[EType, int]
    dropped: dict[EType, int] = field(default_factory=dict)
    _: KW_ONLY
    seconds: float = 0.0


def prepare(
    config: str | Path,
    out: str | Path,
    *,
    engine: str = "local",
    master: str | None = None,
    on_dangling: str = "error",
    memory: str | None = None,
    spark_conf: dict[str, str] | None = None,
    overwrite: bool = False,
) -> Prepared:
    """Prepare the graph a config describes (see :mod:`graphshard.prepare.config`) into ``out``.

    Args:
        config: the YAML or JSON config.
        out: the output directory (new, empty, or an earlier prepared or chunked output of the same graph).
        engine: ``local`` (DuckDB) or ``spark`` (PySpark).
        master: Spark's master URL (``local[*]`` by default).
        on_dangling: ``error`` or ``drop``: what becomes of edges naming a node their node table lacks.
        memory: the engine's memory (DuckDB's limit; Spark's driver and executor memory), e.g. ``3GB``.
        spark_conf: more Spark settings (the spark engine only).
        overwrite: write into ``out`` even if it holds something else (keeping files of other names).

    Returns:
        What was written.

    Raises:
        InputError: bad config or tables, named (nothing is written then).
        GraphshardError: the engine is not installed, or a write failed (nothing left that looks complete).
    """
    start = time.perf_counter()
    cfg = read_prepare_config(config)
    require_engine(engine, master=master, conf=spark_conf)
    final = check_output_dir(out, "chunked", overwrite, graph=cfg.graph_name)
    with staged_dir(final, "chunked") as tmp:  # a directory it creates is removed again on failure
        spill = tmp / ".spill"
        spill.mkdir()
        eng = open_engine(engine, spill=spill, master=master, memory=memory, conf=spark_conf)
        try:
            result = _Run(cfg, eng, tmp, on_dangling).run()
        finally:
            eng.close()
            shutil.rmtree(spill, ignore_errors=True)
    result.out, result.seconds = final, time.perf_counter() - start
    return result


class _Run:
    def __init__(self, cfg: PrepareConfig, engine: Any, tmp: Path, on_dangling: str):
        self.cfg, self.engine, self.tmp, self.on_dangling = cfg, engine, tmp, on_dangling
        self.q = engine.dialect.ident
        self.nodes: dict[str, checks.Source] = {}
        self.edges: list[checks.Source] = []
        self.maps = {t: f"__gs_map_{i}" for i, t in enumerate(cfg.ntypes)}
        self.counts: dict[str, int] = {}
        self.transforms: dict[str, Any] = {
            "version": FORMAT_VERSION,
            "graph_name": cfg.graph_name,
            "engine": engine.name,
        }

    def run(self) -> Prepared:
        self._register()
        kinds = checks.check_id_kinds(self.cfg, self.nodes, self.edges)
        for spec in self.cfg.nodes:
            checks.check_node_ids(self.engine, spec, self.nodes[spec.type])
        self._number()
        # --on-dangling drop: counted now, so that features are fitted to the edges kept; error: the edges
        # written are counted instead (a join fewer), and a shortfall is named before anything is published
        dropped = {
            spec.type: checks.dangling(self.engine, spec, src, self.maps, policy="drop")
            if self.on_dangling == "drop"
            else 0
            for spec, src in zip(self.cfg.edges, self.edges)
        }
        node_plans = {spec.type: self._fit_nodes(spec, kinds[spec.type]) for spec in self.cfg.nodes}
        edge_writers = [
            EdgeWriter(self.engine, spec, src, self.maps, dropped=dropped[spec.type], counts=self.counts)
            for spec, src in zip(self.cfg.edges, self.edges)
        ]
        for w in edge_writers:
            w.fit()
        # every check has passed: write (into the staging directory: nothing is published before the end)
        edges: dict[EType, FileSpec] = {}
        edge_data: dict[EType, dict[str, FileSpec]] = {}
        num_edges: dict[EType, int] = {}
        self.transforms["edges"] = {}
        for w in edge_writers:
            written = w.write(self.tmp, strict=self.on_dangling == "error")
            edges.update(written.edges)
            edge_data.update(written.data)
            num_edges.update(written.counts)
            self.transforms["edges"][etype_str(w.spec.type)] = written.fitted
        node_data = {t: self._write_nodes(self.nodes_spec(t), plan) for t, plan in node_plans.items()}
        self._write_id_maps(kinds)
        meta = ChunkedMeta(
            self.tmp / "metadata.json",
            self.cfg.graph_name,
            {t: self.counts[t] for t in self.cfg.ntypes},
            {et: num_edges[et] for et in self.cfg.etypes},
            edges={et: edges[et] for et in self.cfg.etypes},
            node_data={t: d for t, d in node_data.items() if d},
            edge_data={et: d for et, d in edge_data.items() if d},
        )
        with atomic_file(self.tmp / "transforms.json") as path:
            path.write_text(json.dumps(self.transforms, indent=1) + "\n")
        write_metadata(meta)
        read_metadata(meta.path)  # what was written reads back as a chunked graph
        return Prepared(self.tmp, dict(meta.num_nodes), dict(meta.num_edges), dropped)

    def nodes_spec(self, ntype: str) -> NodeSpec:
        return next(n for n in self.cfg.nodes if n.type == ntype)

    def _register(self) -> None:
        tables = [(f"__gs_nodes_{i}", n.table) for i, n in enumerate(self.cfg.nodes)]
        tables += [(f"__gs_edges_{i}", e.table) for i, e in enumerate(self.cfg.edges)]
        sources = []
        for name, table in tables:
            self.engine.register(name, table)
            source = checks.Source(name, table, self.engine.columns(name))
            taken = [c for c in source.columns if c.startswith("__gs_")]
            if taken:
                raise InputError(
                    f"{table.describe()} ({table.where}): column {taken[0]!r}: names starting with __gs_ are "
                    "graphshard's own; rename it"
                )
            sources.append(source)
        self.nodes = {spec.type: src for spec, src in zip(self.cfg.nodes, sources)}
        self.edges = sources[len(self.cfg.nodes) :]

    def _number(self) -> None:
        """Each node type's IDs ranked: from its node table, or from the edges that name it."""
        q = self.q
        for t in self.cfg.ntypes:
            if t in self.nodes:
                spec = self.nodes_spec(t)
                keys = f"SELECT {q(spec.id)} AS key FROM {q(self.nodes[t].relation)}"
            else:
                keys = " UNION ALL ".join(
                    f"SELECT {q(col)} AS key FROM {q(src.relation)}"
                    for e, src in zip(self.cfg.edges, self.edges)
                    for col, nt in ((e.source, e.type[0]), (e.destination, e.type[2]))
                    if nt == t
                )
            self.engine.number(self.maps[t], keys)
            self.counts[t] = int(self.engine.rows(f"SELECT COUNT(*) FROM {q(self.maps[t])}")[0][0])
            log.info("%s: %d nodes", t, self.counts[t])

    def _fit_nodes(self, spec: NodeSpec, id_kind: str) -> dict[str, Any]:
        src = self.nodes[spec.type]
        fitter = Fitter(self.engine, src, (spec.id,))
        cols = [checks.check_feature(src, f) for f in spec.features]
        fitter.scan(numeric_columns(spec.features, cols))
        fitted = [fitter.fit(f, c) for f, c in zip(spec.features, cols)]
        for f in fitted:
            check_finite_fit(f, src)
        entry: dict[str, Any] = {"id": {"column": spec.id, "kind": id_kind}, "features": fitted}
        labels = self._node_labels(spec, src, entry) if spec.label else None
        self.transforms.setdefault("nodes", {})[spec.type] = entry
        return {"fitter": fitter, "fitted": fitted, "labels": labels}

    def _node_labels(self, spec: NodeSpec, src: checks.Source, entry: dict[str, Any]) -> dict[str, np.ndarray]:
        label = spec.label
        assert label is not None
        checks.check_label(src, label)
        q = self.q
        extra = "".join(
            f", t.{q(c)} AS __gs_{k}" for k, c in (("split", label.split.column), ("time", label.split.time)) if c
        )
        table = self.engine.arrow(
            f"SELECT m.__gs_id AS nid, t.{q(label.column)} AS value, t.{q(spec.id)} AS key{extra} "
            f"FROM {q(src.relation)} AS t JOIN {q(self.maps[spec.type])} AS m ON t.{q(spec.id)} = m.__gs_key"
        )
        nids = table.column("nid").to_numpy()
        n = self.counts[spec.type]
        rows, has, fitted = label_arrays(
            label, nids, table.column("value"), table.column("key"), count=n, where=src.table.describe()
        )
        order = None
        if label.split.time:
            order = _time_values(table.column("__gs_time"))[has]
        column = table.column("__gs_split").filter(has) if label.split.column else None
        labelled = nids[has]
        sort = np.argsort(labelled, kind="stable")
        masks = node_splits(
            label.split,
            labelled[sort],
            order[sort] if order is not None else None,
            column.take(sort) if column is not None else None,
            count=n,
        )
        entry["label"] = fitted | {"split": _split_json(label.split), "labelled": int(has.sum())}
        return {"label": rows, **masks}

    def _write_nodes(self, spec: NodeSpec, plan: dict[str, Any]) -> dict[str, FileSpec]:
        out: dict[str, FileSpec] = {}
        fitted = plan["fitted"]
        if fitted:
            out.update(self._node_features(spec, plan["fitter"], fitted))
        for name, rows in (plan["labels"] or {}).items():
            out[name] = npy_chunks(
                inside(self.tmp, "node_labels", spec.type), name, rows, f"node_labels/{spec.type}/{name}"
            )
        return out

    def _node_features(self, spec: NodeSpec, fitter: Fitter, fitted: list[dict[str, Any]]) -> dict[str, FileSpec]:
        q = self.q
        plan = feature_select(Builder(self.engine.dialect, fitter), fitted)
        hint = broadcast(["m"] if self.counts[spec.type] <= BROADCAST else [])
        inner = (
            f"SELECT {hint}t.*, m.__gs_id AS {q(NID)}{plan.extra} FROM {q(self.nodes[spec.type].relation)} AS t "
            f"JOIN {q(self.maps[spec.type])} AS m ON t.{q(spec.id)} = m.__gs_key{plan.joins}"
        )
        files = write_sorted(
            self.engine,
            f"SELECT {', '.join([q(NID), *plan.select(q)])} FROM ({inner}) AS s",
            inside(self.tmp, "nodes", spec.type),
            self.counts[spec.type],
            what=f"{spec.type} node rows",
        )
        return plan.specs(files, f"nodes/{spec.type}")

    def _write_id_maps(self, kinds: dict[str, str]) -> None:
        q = self.q
        for t in self.cfg.ntypes:
            folder = inside(self.tmp, "id_maps", t)
            sql = f"SELECT __gs_key AS id, __gs_id AS {q(NID)} FROM {q(self.maps[t])}"
            write_sorted(self.engine, sql, folder, self.counts[t], what=f"{t} ID map")
            self.transforms.setdefault("nodes", {}).setdefault(t, {}).setdefault(
                "id", {"column": None, "kind": kinds[t]}
            )


def _time_values(column: Any) -> np.ndarray:
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_timestamp(column.type) or pa.types.is_date(column.type):
        column = pc.cast(pc.cast(column, pa.timestamp("us")), pa.int64())
    return column.to_numpy(zero_copy_only=False).astype(np.float64)


def _split_json(split: Any) -> dict[str, Any]:
    return {
        "fractions": list(split.fractions) if split.fractions else None,
        "column": split.column,
        "time": split.time,
        "seed": split.seed,
    }


__all__ = ["Prepared", "prepare", "EdgeSpec"]
