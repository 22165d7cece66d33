"""METIS 5 k-way partitioning through a small ctypes binding to the METIS library shipped in pymetis.

pymetis's own wrapper passes a single balance constraint, so multi-constraint balancing
(``balance_ntypes`` / ``balance_edges``) calls ``METIS_PartGraphKway`` directly. The arrays are
handed over without copies (METIS's ``idx_t`` in pymetis's build is 64-bit; checked at load time).
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os

import numpy as np

from ...errors import GraphshardError, InputError
from .adjacency import UndirectedCSR

_NOPTIONS = 40
_OPT = {"objtype": 1, "seed": 8, "numbering": 17, "contig": 11}
_OBJTYPES = {"cut": 0, "vol": 1}
_STATUS = {-2: "METIS_ERROR_INPUT", -3: "METIS_ERROR_MEMORY", -4: "METIS_ERROR"}


class MetisError(GraphshardError):
    """METIS returned an error status."""


@functools.lru_cache(maxsize=1)
def _library() -> ctypes.CDLL:
    import pymetis

    paths = glob.glob(os.path.join(os.path.dirname(pymetis.__file__), "_internal*.so"))
    if not paths:
        raise MetisError("could not find the METIS library inside the installed pymetis package")
    lib = ctypes.CDLL(paths[0])
    for name in ("METIS_SetDefaultOptions", "METIS_PartGraphKway"):
        if not hasattr(lib, name):
            raise MetisError(f"{paths[0]} does not export {name}")
    _check_idx_width(lib)
    return lib


def _check_idx_width(lib: ctypes.CDLL) -> None:
    probe = np.zeros(2 * _NOPTIONS, dtype=np.int64)
    lib.METIS_SetDefaultOptions(probe.ctypes.data_as(ctypes.c_void_p))
    if int((probe == -1).sum()) != _NOPTIONS:
        raise MetisError("the METIS library in pymetis is not built with 64-bit idx_t; cannot bind to it")


def _ptr(arr: np.ndarray | None) -> ctypes.c_void_p | None:
    return None if arr is None else arr.ctypes.data_as(ctypes.c_void_p)


def metis_kway(
    csr: UndirectedCSR,
    num_parts: int,
    vwgt: np.ndarray | None = None,
    objtype: str = "cut",
    *,
    seed: int = 0,
) -> np.ndarray:
    """Partition ``csr`` into ``num_parts`` with METIS k-way; ``vwgt`` is (N, ncon) int64 or None.

    Returns the partition of each node (int64). Deterministic for a given seed.
    """
    if objtype not in _OBJTYPES:
        raise InputError(f"objtype must be one of {sorted(_OBJTYPES)}, got {objtype!r}")
    n = csr.num_nodes
    if num_parts == 1 or n == 0:
        return np.zeros(n, dtype=np.int64)
    lib = _library()
    xadj = np.ascontiguousarray(csr.xadj, dtype=np.int64)
    adjncy = np.ascontiguousarray(csr.adjncy, dtype=np.int64)
    if vwgt is not None:
        vwgt = np.ascontiguousarray(vwgt, dtype=np.int64).reshape(n, -1)
    ncon = np.array([1 if vwgt is None else vwgt.shape[1]], dtype=np.int64)
    options = np.zeros(_NOPTIONS, dtype=np.int64)
    lib.METIS_SetDefaultOptions(_ptr(options))
    options[_OPT["objtype"]] = _OBJTYPES[objtype]
    options[_OPT["seed"]] = seed
    options[_OPT["numbering"]] = 0
    nvtxs, nparts, objval = (np.array([v], dtype=np.int64) for v in (n, num_parts, 0))
    part = np.zeros(n, dtype=np.int64)
    status = lib.METIS_PartGraphKway(
        _ptr(nvtxs),
        _ptr(ncon),
        _ptr(xadj),
        _ptr(adjncy),
        _ptr(vwgt),
        None,
        None,
        _ptr(nparts),
        None,
        None,
        _ptr(options),
        _ptr(objval),
        _ptr(part),
    )
    if status != 1:
        raise MetisError(
            f"METIS_PartGraphKway failed with {_STATUS.get(status, status)} "
            f"({n} nodes, {num_parts} parts, {int(ncon[0])} constraints)"
        )
    return part
