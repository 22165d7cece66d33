"""Resume: finished partitions wait in ``<out>/.dispatch-<graph>/`` with a marker recording their
checksums and a fingerprint of the inputs and options; a re-run reuses a partition only if both match."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

from ...chunked.spec import ChunkedMeta
from ...fingerprint import files_fingerprint
from ...format.tensorfile import sha256_file
from ...format.write import FILE_NAMES
from ..assignment_files import META_NAME
from .state import DispatchOptions

log = logging.getLogger(__name__)


def input_fingerprint(opts: DispatchOptions, meta: ChunkedMeta) -> str:
    """Of every input file (metadata, chunks, assignment files: name, size, mtime, sampled content; see
    :mod:`graphshard.fingerprint`) and the options: a changed input is never answered by a stale partition."""
    d = Path(opts.partitions_dir)
    specs = [
        *meta.edges.values(),
        *(s for t in meta.node_data.values() for s in t.values()),
        *(s for t in meta.edge_data.values() for s in t.values()),
    ]
    assignment = sorted(
        f for f in [d / META_NAME] + [d / f"{t}.{e}" for t in meta.ntypes for e in ("txt", "npy")] if f.is_file()
    )
    chosen = [opts.num_hops, opts.save_orig_nids, opts.save_orig_eids]
    options = json.dumps(chosen + ([opts.feat_dtype] if opts.feat_dtype else []))
    return files_fingerprint([meta.path, *(p for spec in specs for p in spec.paths), *assignment], options)


class ResumeArea:
    """The directory ``root`` holding finished partitions ``part<p>/`` and their markers, staging
    directories ``part<p>.tmp-<pid>/`` and, while publishing, replaced outputs ``replaced-part<p>/``."""

    def __init__(self, root: Path, fingerprint: str) -> None:
        self.root, self.fingerprint = root, fingerprint

    def marker(self, p: int) -> Path:
        return self.root / f"part{p}.done.json"

    def part_dir(self, p: int) -> Path:
        return self.root / f"part{p}"

    def staging_dir(self, p: int) -> Path:
        return self.root / f"part{p}.tmp-{os.getpid()}"

    def trash_dir(self, p: int) -> Path:
        return self.root / f"replaced-part{p}"

    def clear_stale_staging(self, owned: list[int]) -> None:
        """Remove staging left by a killed run of the owner of each partition in ``owned``."""
        for p in owned:
            for stale in self.root.glob(f"part{p}.tmp-*"):
                shutil.rmtree(stale, ignore_errors=True)

    def reusable(self, p: int, rank: int) -> bool:
        """Whether partition ``p`` was finished by a run with the same fingerprint and its files are intact."""
        marker = self.marker(p)
        if not marker.is_file():
            return False
        try:
            info = json.loads(marker.read_text())
            ok = info["fingerprint"] == self.fingerprint and all(
                sha256_file(self.root / rel) == digest for rel, digest in info["checksums"].items()
            )
        except (OSError, ValueError, KeyError):
            ok = False
        if ok:
            log.info("rank %d: reusing finished partition %d from an earlier run", rank, p)
        return ok

    def finish(self, p: int, staged: Path, sums: dict[str, str]) -> None:
        """Move the staged files of partition ``p`` (checksums ``sums``, keyed ``part<p>/<file>``) into
        place, then record them in its marker."""
        shutil.rmtree(self.part_dir(p), ignore_errors=True)
        staged.rename(self.part_dir(p))
        files = sorted(k for k in FILE_NAMES if f"part{p}/{FILE_NAMES[k]}" in sums)
        self.marker(p).write_text(json.dumps({"fingerprint": self.fingerprint, "checksums": sums, "files": files}))

    def read_marker(self, p: int) -> dict:
        """``{"fingerprint", "checksums", "files"}`` of finished partition ``p``."""
        return json.loads(self.marker(p).read_text())
