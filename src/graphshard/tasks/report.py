"""What a run reports while it runs: each epoch's line (printed by rank 0 when the epoch ends) and the
metrics file, rewritten atomically after every epoch so a crashed run still leaves its history."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..format.staging import atomic_file


def epoch_line(e: dict[str, Any]) -> str:
    """``epoch   3: 0.32 s  loss 0.4439  val acc 0.9705  (sampling 0.1 + fetch 0.0 + compute 0.1 + sync 0.0)``."""
    if "val_mrr" in e:
        score = f"  val MRR {e['val_mrr']:.4f}  AUC {e['val_auc']:.4f}{hits_text(e, 'val_')}"
    elif any("/" in k for k in e):  # a multi-task run's: the tasks' first figures
        firsts = dict.fromkeys(k.split("/", 1)[0] for k in e if k.startswith("val_") and "/" in k)
        shown = [next(k for k in e if k.startswith(f"{t}/")) for t in firsts]
        score = "  " + "  ".join(f"{k[4:]} {e[k]:.4f}" for k in shown if e[k] is not None)
    else:
        score = node_text(e, "val_")
    t = {k: float(e.get(k, 0.0)) for k in ("wall_s", "wait_s", "sample_s", "fetch_s", "copy_s", "compute_s", "comm_s")}
    loading = (
        f"waiting {t['wait_s']:.1f}"
        if e.get("background")
        else f"sampling {t['sample_s']:.1f} + fetch {t['fetch_s']:.1f}"
    )
    copy = f" + copy {t['copy_s']:.1f}" if e.get("copy_bytes") else ""  # batches copied to a device
    return (
        f"epoch {e['epoch']:>3}: {t['wall_s']:.2f} s  loss {e['train_loss']:.4f}{score}  ({loading}{copy} + compute "
        f"{t['compute_s']:.1f} + sync {t['comm_s']:.1f})"
    )


NODE_FIGURES = ("acc", "f1_micro", "f1_macro", "roc_auc", "pr_auc", "rmse", "mae", "r2")  # acc: accuracy's key


def node_text(m: dict[str, Any], prefix: str) -> str:
    """``  val acc 0.9705 f1_macro 0.9688`` from a node run's figures (those measured; empty if none)."""
    keys = NODE_FIGURES if prefix + "acc" in m else ("accuracy", *NODE_FIGURES[1:])  # edge tasks: no old key
    parts = [f"{k} {m[prefix + k]:.4f}" for k in keys if m.get(prefix + k) is not None]
    return f"  {prefix.rstrip('_')} {' '.join(parts)}" if parts else ""


def hits_text(m: dict[str, Any], prefix: str) -> str:
    """``  Hits@10 0.4123  filtered MRR 0.3011 Hits@10 0.5012`` from a link run's figures (what is there)."""
    hits = next((k for k in m if k.startswith(f"{prefix}hits@") and not k.endswith("_filtered")), None)
    label = f"Hits@{hits.split('@')[1]}" if hits else ""
    out = f"  {label} {m[hits]:.4f}" if hits else ""
    if f"{prefix}mrr_filtered" in m:
        out += f"  filtered MRR {m[f'{prefix}mrr_filtered']:.4f}"
        out += f" {label} {m[hits + '_filtered']:.4f}" if hits else ""
    return out


def write_json(path: str | os.PathLike, value: Any) -> None:
    """``value`` as JSON at ``path``, atomically (temp file, then rename; a failure names ``path``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path) as tmp:
        tmp.write_text(json.dumps(value, indent=1))
