"""Writing: stage one partition's part files in the resume area (features and original IDs first, then
``graph.safetensors``), each carrying the run's identity, and finish the partition with its marker."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from ...format.config import PartitionConfig
from ...format.feat_dtype import check_in_range, narrow_feats
from ...format.outputs import write_failure
from ...format.tensorfile import write_tensors
from ...format.write import FILE_NAMES
from ...graph import etype_str
from ...partition.build import structure_arrays
from ...partition.halo import local_structure
from ...partition.homogenize import HomoView
from ...partition.relabel import Relabelling
from .edge_exchange import PartEdges
from .halo import Halo, Own
from .resume import ResumeArea
from .state import DispatchState


class PartWriter:
    """Writes this rank's partitions; files carry ``identity``'s identity (the config without file lists)."""

    def __init__(self, state: DispatchState, resume: ResumeArea, identity: PartitionConfig) -> None:
        self.state, self.resume, self.identity = state, resume, identity

    def write_features(
        self, p: int, e: PartEdges, rl: Relabelling, node_feats: dict[str, np.ndarray]
    ) -> dict[str, str]:
        """Stage partition ``p``'s feature (and original-ID) files, releasing ``e``'s features; returns their
        checksums keyed ``part<p>/<file>``."""
        fd = self.state.opts.feat_dtype
        check_in_range(node_feats | e.feats, fd)  # refused before this partition's files are written
        files = {
            "node_feats": narrow_feats(node_feats, fd),
            "edge_feats": narrow_feats(e.feats, fd),
            **self._orig_ids(p, e, rl),
        }
        tmp = self.resume.staging_dir(p)
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        sums = {f"part{p}/{FILE_NAMES[k]}": self._write(p, tmp / FILE_NAMES[k], v, k) for k, v in files.items()}
        e.feats = {}
        return sums

    def write_structure(
        self, p: int, e: PartEdges, rl: Relabelling, view: HomoView, *, own: Own, halo: Halo, sums: dict[str, str]
    ) -> None:
        """Stage ``graph.safetensors`` of partition ``p``, then finish it in the resume area with its marker."""
        lo, hi = self.state.part_nodes(p)
        local = local_structure(lo, hi, own[0], halo[0], scratch=np.empty(self.state.num_nodes, dtype=np.int64))
        if own[1] is None:  # compact: local.eids are positions into the received (sorted) arrays

            def orig(a: int, b: int) -> np.ndarray:
                return e.orig[local.eids[a:b]].astype(np.int64)
        else:
            full = np.concatenate([own[1], halo[1]]) if halo[1].size else own[1]

            def orig(a: int, b: int) -> np.ndarray:
                return full[a:b]

        tmp = self.resume.staging_dir(p)
        sums[f"part{p}/{FILE_NAMES['part_graph']}"] = self._write(
            p, tmp / FILE_NAMES["part_graph"], structure_arrays(local, view, rl, orig_eids=orig), "part_graph"
        )
        self.resume.finish(p, tmp, sums)

    def _orig_ids(self, p: int, e: PartEdges, rl: Relabelling) -> dict[str, dict[str, np.ndarray]]:
        """The original per-type node / edge IDs of partition ``p``, as far as the options ask for them."""
        s, files = self.state, {}
        if s.opts.save_orig_nids:
            files["orig_nids"] = {
                t: s.new2old[s.node_bounds[p, i] : s.node_bounds[p, i + 1]] - s.node_off[i]
                for i, t in enumerate(s.meta.ntypes)
            }
        if s.opts.save_orig_eids:
            base = int(rl.edge_bounds[p, 0])
            files["orig_eids"] = {
                etype_str(et): e.orig[rl.edge_bounds[p, r] - base : rl.edge_bounds[p, r + 1] - base] - s.edge_off[r]
                for r, et in enumerate(s.meta.etypes)
            }
        return files

    def _write(self, p: int, path: Path, tensors: dict, kind: str) -> str:
        """Write one part file with its identity; a failed write (a full disk) removes the partition's
        staging directory and names the file."""
        try:
            return write_tensors(path, tensors, self.identity.identity(p, kind))
        except OSError as exc:
            shutil.rmtree(self.resume.staging_dir(p), ignore_errors=True)
            raise write_failure(exc, path) from exc
