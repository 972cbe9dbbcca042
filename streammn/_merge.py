"""Numba kernels that find duplicate features in a flat feature array (for merge_duplicates).

Each feature's condition list is hashed twice; features are sorted by (hash, hash, length) and
every run of equal keys is split into groups by comparing the conditions themselves, so the
grouping is exact even if two different features collide.
"""

from __future__ import annotations

import numba as nb
import numpy as np

_M1 = np.uint64(0x9E3779B97F4A7C15)
_M2 = np.uint64(0xC2B2AE3D27D4EB4F)


@nb.njit(cache=True)
def _hashes(ptr, var, val, eq):
    F = ptr.shape[0] - 1
    h1 = np.empty(F, dtype=np.uint64)
    h2 = np.empty(F, dtype=np.uint64)
    for f in range(F):
        a = np.uint64(1469598103934665603)
        b = np.uint64(7)
        for c in range(ptr[f], ptr[f + 1]):
            code = np.uint64((np.int64(var[c]) * 256 + np.int64(val[c])) * 2 + np.int64(eq[c]) + 1)
            a = (a ^ code) * _M1
            a ^= a >> np.uint64(29)
            b = (b + code) * _M2
            b ^= b >> np.uint64(31)
        h1[f] = a
        h2[f] = b
    return h1, h2


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
def _groups(order, h1, h2, ptr, var, val, eq):
    F = order.shape[0]
    group = np.empty(F, dtype=np.int64)
    first = np.empty(F, dtype=np.int64)
    n_groups = 0
    s = 0
    while s < F:
        e = s + 1
        while e < F and h1[order[e]] == h1[order[s]] and h2[order[e]] == h2[order[s]]:
            e += 1
        g0 = n_groups
        for k in range(s, e):
            f = order[k]
            found = -1
            for g in range(g0, n_groups):
                if _same(first[g], f, ptr, var, val, eq):
                    found = g
                    break
            if found < 0:
                found = n_groups
                first[found] = f
                n_groups += 1
            elif f < first[found]:
                first[found] = f
            group[f] = found
        s = e
    return group, first[:n_groups].copy()


def duplicate_groups(ptr, var, val, eq):
    """``(group[F], first[G])``: group id of each feature, first feature index of each group."""
    h1, h2 = _hashes(ptr, var, val, eq)
    order = np.lexsort((h2, h1))
    return _groups(order, h1, h2, ptr, var, val, eq)
