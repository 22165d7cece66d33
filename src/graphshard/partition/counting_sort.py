"""Stable counting-sort kernels (numba) used to reorder nodes and edges by partition and destination."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def stable_order(keys: np.ndarray, num_keys: int) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(order, offsets)``: ``order`` lists positions sorted stably by ``keys`` in ``[0, num_keys)``,
    ``offsets[k]:offsets[k+1]`` is the run of key ``k`` in ``order``."""
    offsets = np.zeros(num_keys + 1, dtype=np.int64)
    for i in range(keys.shape[0]):
        offsets[keys[i] + 1] += 1
    for k in range(num_keys):
        offsets[k + 1] += offsets[k]
    pos = offsets[:-1].copy()
    order = np.empty(keys.shape[0], dtype=np.int64)
    for i in range(keys.shape[0]):
        k = keys[i]
        order[pos[k]] = i
        pos[k] += 1
    return order, offsets


@numba.njit(cache=True, nogil=True)
def stable_order_gathered(index: np.ndarray, table: np.ndarray, num_keys: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`stable_order` of the keys ``table[index]`` without materialising them."""
    offsets = np.zeros(num_keys + 1, dtype=np.int64)
    for i in range(index.shape[0]):
        offsets[table[index[i]] + 1] += 1
    for k in range(num_keys):
        offsets[k + 1] += offsets[k]
    pos = offsets[:-1].copy()
    order = np.empty(index.shape[0], dtype=np.int64)
    for i in range(index.shape[0]):
        k = table[index[i]]
        order[pos[k]] = i
        pos[k] += 1
    return order, offsets


@numba.njit(cache=True, nogil=True)
def csc_by_new_dst(perm: np.ndarray, dst: np.ndarray, old2new: np.ndarray, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """In-adjacency over new node IDs: ``(indptr, eids)`` where ``eids[indptr[v]:indptr[v+1]]`` are the new
    edge IDs (positions in ``perm``) whose destination has new ID ``v``, in increasing order.

    ``perm[j]`` is the original edge ID of new edge ``j``; ``dst`` holds original destination IDs.
    """
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    for j in range(perm.shape[0]):
        indptr[old2new[dst[perm[j]]] + 1] += 1
    for v in range(num_nodes):
        indptr[v + 1] += indptr[v]
    pos = indptr[:-1].copy()
    eids = np.empty(perm.shape[0], dtype=np.int64)
    for j in range(perm.shape[0]):
        v = old2new[dst[perm[j]]]
        eids[pos[v]] = j
        pos[v] += 1
    return indptr, eids


@numba.njit(cache=True, nogil=True)
def gather_ranges(indptr: np.ndarray, nodes: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Concatenate ``values[indptr[v]:indptr[v+1]]`` for each ``v`` in ``nodes``, in order."""
    total = 0
    for i in range(nodes.shape[0]):
        total += indptr[nodes[i] + 1] - indptr[nodes[i]]
    out = np.empty(total, dtype=values.dtype)
    k = 0
    for i in range(nodes.shape[0]):
        for j in range(indptr[nodes[i]], indptr[nodes[i] + 1]):
            out[k] = values[j]
            k += 1
    return out
