"""docs/format.md against the writer: the documented tensors, dtypes and JSON keys are the real ones."""

from __future__ import annotations

import json
import re
from pathlib import Path

from safetensors.numpy import load_file

from graphshard import partition_graph
from tests.graphs import small_hetero, sparse_hetero

DOC = Path(__file__).resolve().parents[2] / "docs" / "format.md"


def _table(section: str) -> list[list[str]]:
    text = DOC.read_text().split(f"## {section}", 1)[1].split("\n## ", 1)[0]
    rows = [
        [c.strip().strip("`") for c in line.strip("|").split("|")]
        for line in text.splitlines()
        if line.startswith("|") and not set(line) <= set("|- ")
    ]
    return rows[1:]


def test_graph_tensors_match_doc(tmp_path):
    partition_graph(small_hetero(), "s", 2, tmp_path, part_method="random", num_hops=2)
    tensors = load_file(tmp_path / "part0" / "graph.safetensors")
    documented = {row[0]: row[1] for row in _table("`graph.safetensors`")}
    assert set(documented) == set(tensors)
    for name, dtype in documented.items():
        allowed = re.findall(r"bool|int\d+", dtype.split(":")[0])
        assert str(tensors[name].dtype) == allowed[0], name  # a small graph: the smallest listed type


def test_json_keys_match_doc(tmp_path):
    partition_graph(
        sparse_hetero(),
        "s",
        2,
        tmp_path,
        part_method="random",
        num_trainers_per_machine=2,
        save_orig_ids=True,
        num_classes=3,
        feat_dtype="float16",
    )  # with a CSR feature and 16-bit features: every documented key is written
    meta = json.loads((tmp_path / "s.json").read_text())
    documented = {row[0] for row in _table("`<graph_name>.json`")}
    actual = {re.sub(r"^part-\d+$", "part-<i>", k) for k in meta}
    assert documented == actual
    assert set(meta["part-0"]) == {"part_graph", "node_feats", "edge_feats", "orig_nids", "orig_eids"}
    assert set(meta["checksums"]) == {v for i in range(2) for v in meta[f"part-{i}"].values()}
    orig = load_file(tmp_path / meta["part-1"]["orig_nids"])
    assert set(orig) == {"paper", "author", "venue", "ghost"}


def test_file_identity_matches_doc(tmp_path):
    """Every part file records the documented identity, and the fingerprint is the documented hash."""
    import hashlib

    from graphshard.format.tensorfile import read_header

    partition_graph(small_hetero(), "s", 2, tmp_path, part_method="random", save_orig_ids=True)
    meta = json.loads((tmp_path / "s.json").read_text())
    fields = (
        "graph_name",
        "num_parts",
        "halo_hops",
        "num_nodes",
        "num_edges",
        "ntypes",
        "etypes",
        "node_map",
        "edge_map",
        "feature_schema",
    )
    canonical = json.dumps({k: meta[k] for k in fields}, sort_keys=True, separators=(",", ":"))
    assert meta["run_fingerprint"] == hashlib.sha256(canonical.encode()).hexdigest()
    documented = {row[0] for row in _table("File identity")}
    for p in range(2):
        for kind, rel in meta[f"part-{p}"].items():
            header = read_header(tmp_path / rel)
            assert set(header["__metadata__"]) == documented
            assert header["__metadata__"] == {
                "graph_name": "s",
                "part_id": str(p),
                "kind": kind,
                "run_fingerprint": meta["run_fingerprint"],
            }
            if kind in meta["feature_schema"]:
                declared = {k: (v["dtype"], v["shape"]) for k, v in meta["feature_schema"][kind].items()}
                stored = {k: (v["dtype"], v["shape"][1:]) for k, v in header.items() if k != "__metadata__"}
                assert declared == stored, rel
    assert meta["feature_schema"]["node_feats"]["paper/feat"] == {"dtype": "F32", "shape": [5]}
