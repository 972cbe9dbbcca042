"""Numba kernels that find duplicate features in a flat feature array (for merge_duplicates).

Features go into an open-addressing hash table keyed by a 64-bit hash of their condition list;
a probe that meets an equal hash compares the conditions themselves, so two different features
are never merged even if their hashes collide. Groups are numbered in order of first occurrence.
"""

from __future__ import annotations

import numba as nb
import numpy as np

_M1 = np.uint64(0x9E3779B97F4A7C15)


@nb.njit(cache=True)
def _hash(f, ptr, var, val, eq):
    h = np.uint64(1469598103934665603)
    for c in range(ptr[f], ptr[f + 1]):
        code = np.uint64((np.int64(var[c]) * 256 + np.int64(val[c])) * 2 + np.int64(eq[c]) + 1)
        h = (h ^ code) * _M1
        h ^= h >> np.uint64(29)
    return h


@nb.njit(cache=True)
def _same(f, g, ptr, var, val, eq):
    if ptr[f + 1] - ptr[f] != ptr[g + 1] - ptr[g]:
        return False
    d = ptr[g] - ptr[f]
    for c in range(ptr[f], ptr[f + 1]):
        if var[c] != var[c + d] or val[c] != val[c + d] or eq[c] != eq[c + d]:
            return False
    return True


@nb.njit(cache=True)
def _group(ptr, var, val, eq):
    F = ptr.shape[0] - 1
    size = 1
    while size < 2 * F + 2:
        size *= 2
    mask = np.uint64(size - 1)
    slot_group = np.full(size, -1, dtype=np.int64)
    slot_hash = np.zeros(size, dtype=np.uint64)
    group = np.empty(F, dtype=np.int64)
    first = np.empty(F, dtype=np.int64)
    n_groups = 0
    for f in range(F):
        h = _hash(f, ptr, var, val, eq)
        s = h & mask
        while True:
            g = slot_group[s]
            if g < 0:
                slot_group[s] = n_groups
                slot_hash[s] = h
                first[n_groups] = f
                group[f] = n_groups
                n_groups += 1
                break
            if slot_hash[s] == h and _same(first[g], f, ptr, var, val, eq):
                group[f] = g
                break
            s = (s + np.uint64(1)) & mask
    return group, first[:n_groups].copy()


def duplicate_groups(ptr, var, val, eq):
    """``(group[F], first[G])``: group id of each feature (groups numbered in order of first
    occurrence) and the index of each group's first feature."""
    return _group(ptr, var, val, eq)
