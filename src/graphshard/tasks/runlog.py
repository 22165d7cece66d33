"""A run's live log for dashboards (``--log-dir``), written by rank 0 as each epoch ends: TensorBoard scalar
event files through ``torch.utils.tensorboard`` (when the ``tensorboard`` package is installed) and
``metrics.csv`` with the same figures, one row per epoch (rewritten atomically after every epoch).

Scalars: ``loss/train``, ``val/<metric>`` (e.g. ``val/acc``, ``val/mrr``), ``lr``, ``time/<phase>_s``
(epoch wall time and its split), ``data/fetched_mb`` (features fetched from other ranks), ``cache/hit_rate``
and ``cache/saved_mb`` (with a feature cache), and at the end ``test/<metric>`` at the selected epoch.
The directory must be new, empty or an earlier run log of graphshard's; a fresh run (not a resume)
replaces that run's event files, a resumed run adds its own and tells TensorBoard to drop the earlier
file's events from the epochs it redoes."""

from __future__ import annotations

import csv
import io
import logging
from pathlib import Path
from typing import Any

from ..format.outputs import check_output_dir, mark_output_dir
from ..format.staging import atomic_file

log = logging.getLogger(__name__)
notice = logging.getLogger("graphshard.notice")
KIND = "run-log"
CSV = "metrics.csv"
EVENTS = "events.out.tfevents.*"
_TIMES = ("wall_s", "wait_s", "sample_s", "fetch_s", "compute_s", "comm_s")


def tensorboard_available() -> bool:
    try:
        from torch.utils.tensorboard import SummaryWriter  # noqa: F401
    except ImportError:
        return False
    return True


def check_log_dir(path: str) -> None:
    """Refuse a directory that is not new, empty or ours (before any work); say if only the CSV can be written."""
    check_output_dir(path, KIND)
    if not tensorboard_available():
        notice.info(
            "--log-dir %s: the tensorboard package is not installed, so only %s is written there "
            "(pip install tensorboard for event files)",
            path,
            CSV,
        )


def scalars(record: dict[str, Any]) -> dict[str, float]:
    """The dashboard figures of one epoch's record (see the module docstring)."""
    out = {"loss/train": record["train_loss"], "lr": record.get("lr")}
    out |= {f"val/{k[4:]}": v for k, v in record.items() if k.startswith("val_")}
    out["time/epoch_s"] = record.get("wall_s")
    out |= {f"time/{k}": record.get(k) for k in _TIMES[1:]}
    out["data/fetched_mb"] = record.get("fetch_bytes", 0) / 1e6
    asked = record.get("cache_hits", 0) + record.get("cache_misses", 0)
    if asked:
        out["cache/hit_rate"] = record["cache_hits"] / asked
        out["cache/saved_mb"] = record.get("cache_bytes_saved", 0) / 1e6
    return {k: float(v) for k, v in out.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


class RunLog:
    """Rank 0's writer of one run's log directory (see the module docstring)."""

    def __init__(self, directory: str, start_epoch: int):
        self.dir = check_output_dir(directory, KIND)
        mark_output_dir(self.dir, KIND)
        if start_epoch == 0:  # a fresh run: the earlier run's events would mix with this one's
            for old in self.dir.glob(EVENTS):
                old.unlink()
        self.writer = None
        if tensorboard_available():
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(self.dir), purge_step=start_epoch or None)

    def epoch(self, record: dict[str, Any], history: list[dict[str, Any]]) -> None:
        """Add ``record``'s scalars at step ``record["epoch"]``; rewrite the CSV of ``history``."""
        if self.writer is not None:
            for tag, value in scalars(record).items():
                self.writer.add_scalar(tag, value, record["epoch"])
            self.writer.flush()
        rows = [{"epoch": r["epoch"], **scalars(r)} for r in history]
        columns = list(dict.fromkeys(k for r in rows for k in r))
        text = io.StringIO()
        out = csv.DictWriter(text, columns, lineterminator="\n")
        out.writeheader()
        out.writerows(rows)
        with atomic_file(self.dir / CSV) as tmp:
            Path(tmp).write_text(text.getvalue())

    def close(self, final: dict[str, float] | None = None, step: int = 0) -> None:
        """Add the final figures (e.g. ``{"test/acc": 0.81}``) at ``step`` and close the event file."""
        if self.writer is None:
            return
        for tag, value in (final or {}).items():
            self.writer.add_scalar(tag, float(value), step)
        self.writer.close()
