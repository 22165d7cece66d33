"""The config: its template from the renumbering, and the final file lists and checksums from the markers."""

from __future__ import annotations

import json

import numpy as np

from graphshard.partition.relabel import Relabelling, edge_bounds_from_counts
from graphshard.pipeline.dispatch.publish import config_template, final_config, part_method
from graphshard.pipeline.dispatch.state import DispatchState
from tests.pipeline.dispatch.conftest import EDGE_COUNTS, one_rank


def _template(tiny):
    state = DispatchState.load(tiny, one_rank())
    rl = Relabelling(
        2,
        state.new2old,
        state.old2new,
        np.zeros(0, np.int64),
        node_bounds=state.node_bounds,
        edge_bounds=edge_bounds_from_counts(np.array(EDGE_COUNTS)),
    )
    return config_template(state, rl, state.out / "t.json")


def test_template_describes_the_id_space_before_any_file_exists(tiny):
    cfg = _template(tiny)
    assert (cfg.graph_name, cfg.num_parts, cfg.halo_hops, cfg.num_nodes, cfg.num_edges) == ("t", 2, 2, 5, 7)
    assert (cfg.part_method, cfg.parts, cfg.checksums) == ("explicit", [], {})
    assert cfg.ntypes == {"a": 0, "b": 1} and cfg.etypes == {"a:x:b": 0, "b:y:a": 1}
    assert {t: m.tolist() for t, m in cfg.node_map.items()} == {"a": [[0, 1], [2, 4]], "b": [[1, 2], [4, 5]]}
    assert {t: m.tolist() for t, m in cfg.edge_map.items()} == {"a:x:b": [[0, 2], [3, 5]], "b:y:a": [[2, 3], [5, 7]]}
    assert cfg.feature_schema["node_feats"] == {"a/f": ("F32", (2,))}
    assert cfg.feature_schema["edge_feats"] == {"a:x:b/w": ("F64", ())}
    assert cfg.run_fingerprint and cfg.identity(1, "node_feats")["part_id"] == "1"


def test_final_config_lists_files_in_canonical_order_and_sorts_checksums(tiny):
    markers = {
        1: {
            "files": ["orig_nids", "part_graph", "edge_feats"],
            "checksums": {
                "part1/orig_nids.safetensors": "c",
                "part1/graph.safetensors": "b",
                "part1/edge_feats.safetensors": "a",
            },
        },
        0: {
            "files": ["node_feats", "part_graph"],
            "checksums": {"part0/node_feats.safetensors": "e", "part0/graph.safetensors": "d"},
        },
    }
    cfg = final_config(_template(tiny), markers)
    assert [list(entry.items()) for entry in cfg.parts] == [
        [("part_graph", "part0/graph.safetensors"), ("node_feats", "part0/node_feats.safetensors")],
        [
            ("part_graph", "part1/graph.safetensors"),
            ("edge_feats", "part1/edge_feats.safetensors"),
            ("orig_nids", "part1/orig_nids.safetensors"),
        ],
    ]
    assert list(cfg.checksums.items()) == [
        ("part0/graph.safetensors", "d"),
        ("part0/node_feats.safetensors", "e"),
        ("part1/edge_feats.safetensors", "a"),
        ("part1/graph.safetensors", "b"),
        ("part1/orig_nids.safetensors", "c"),
    ]


def test_part_method_comes_from_the_assignment_meta(tmp_path, tiny):
    assert part_method(tiny.partitions_dir) == "explicit"
    meta = tiny.partitions_dir / "partition_meta.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "method": "metis"}))
    assert part_method(tiny.partitions_dir) == "metis"
    assert part_method(tmp_path / "no-assignment-here") == "explicit"
