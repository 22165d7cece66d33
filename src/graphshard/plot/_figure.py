"""Shared plumbing of the plots: matplotlib imported on demand (no pyplot, no global backend change) and
figures saved atomically."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..format.staging import atomic_file

MISSING = "plotting needs matplotlib: pip install 'graphshard[plot]'"


def new_figure(width: float, height: float) -> Any:
    """A matplotlib ``Figure`` with constrained layout, detached from pyplot (so from any display):
    saving renders it with Agg. Raises :class:`InputError` when matplotlib is not installed."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise InputError(MISSING) from None
    return Figure(figsize=(width, height), layout="constrained")


def save_figure(fig: Any, out: str | os.PathLike, dpi: int) -> Path:
    """Write ``fig`` to ``out`` in the format its suffix names (PNG without one), through a temporary file in
    the same directory; returns ``out`` as a :class:`Path`."""
    out = Path(out)
    fmt = out.suffix[1:].lower() or "png"
    supported = fig.canvas.get_supported_filetypes()
    if fmt not in supported:
        raise InputError(f"{out}: cannot write a {fmt!r} image; use one of {sorted(supported)}")
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(out) as tmp:
        fig.savefig(tmp, format=fmt, dpi=dpi)
    return out


def integer_ticks(*axes: Any) -> None:
    """Ticks only at whole numbers on each given axis (``ax.xaxis``, ...)."""
    from matplotlib.ticker import MaxNLocator

    for axis in axes:
        axis.set_major_locator(MaxNLocator(integer=True))


def hide_axis(ax: Any, message: str) -> None:
    """Replace an empty panel's content by a centred note."""
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])
