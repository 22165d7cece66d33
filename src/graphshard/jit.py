"""Compiled kernels: one decorator for every numba kernel of graphshard.

numba compiles a kernel the first time it is called with new argument types and caches the machine code
on disk — in ``__pycache__`` beside the source when that is writable (an editable or a site-packages
install alike), else in numba's per-user cache directory, or in ``NUMBA_CACHE_DIR`` when set — so later
runs, and every rank of a run, load it instead of compiling again. Each kernel compiles on its own first
use, so a command that needs kernels no earlier command used (``generate``, ``partition``, ``assign`` and
``train`` need different ones) compiles those, once. Compiling takes seconds, so a process that really
compiles (numba raises no compile event for a kernel loaded from the cache) says so once on the
``graphshard.notice`` logger (shown by the command line at its default level); one that loads everything
from the cache says nothing. Editing a kernel's source file (an editable install) makes its kernels compile
again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numba
from llvmlite import ir
from numba.core import cgutils, event, types
from numba.extending import intrinsic

NOTICE = "compiling numba kernels not compiled before (a few seconds; cached on disk, so later runs load them)"
_log = logging.getLogger("graphshard.notice")
_announced: list[bool] = []  # this process has shown the notice
_LISTENING: list[bool] = []  # the compile listener is registered


class _FirstCompile(event.Listener):
    """Logs :data:`NOTICE` when a graphshard kernel is first really compiled in this process (numba raises no
    event for cache hits)."""

    def on_start(self, ev: event.Event) -> None:
        dispatcher = ev.data.get("dispatcher") if isinstance(ev.data, dict) else None
        module = getattr(getattr(dispatcher, "py_func", None), "__module__", "") or ""
        if not _announced and module.startswith("graphshard."):
            _announced.append(True)
            _log.info(NOTICE)

    def on_end(self, ev: event.Event) -> None:
        pass


def kernel(**options: Any) -> Callable[[Callable], Any]:
    """``numba.njit(cache=True, nogil=True, **options)``, with the first real compilation announced. Kernels
    release the GIL, so a long one does not silence the process's other threads (its heartbeat among
    them: see :mod:`graphshard.distributed.transport.liveness`)."""
    if not _LISTENING:
        event.register("numba:compile", _FirstCompile())
        _LISTENING.append(True)
    return numba.njit(cache=True, **{"nogil": True, **options})


def compiled(fn: Any) -> dict[str, int]:
    """Cache statistics of a kernel in this process: signatures loaded from the cache and compiled."""
    stats = fn.stats
    return {"cache_hits": sum(stats.cache_hits.values()), "cache_misses": sum(stats.cache_misses.values())}


@intrinsic
def prefetch(typingctx: Any, array: Any, index: Any) -> Any:
    """``prefetch(array, i)`` inside a kernel: ask the CPU to bring the cache line of the 1-D ``array[i]`` in for
    reading (LLVM's ``prefetch`` hint; no effect on results, no fault on any address). A loop reading rows at
    random issues it a few rows ahead, so the reads overlap instead of each waiting for memory."""
    sig = types.void(array, index)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        array_type = signature.args[0]
        view = context.make_array(array_type)(context, builder, args[0])
        at = cgutils.get_item_pointer(context, builder, array_type, view, [args[1]], wraparound=False)
        byte_ptr = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        hint = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [byte_ptr, i32, i32, i32]), "llvm.prefetch.p0i8"
        )
        read, every_level, data = (ir.Constant(i32, v) for v in (0, 3, 1))
        builder.call(hint, [builder.bitcast(at, byte_ptr), read, every_level, data])
        return context.get_dummy_value()

    return sig, codegen
