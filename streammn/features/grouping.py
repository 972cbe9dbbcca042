"""Grouping equal integer keys by hashing: the numba kernels behind duplicate features
(:meth:`FeatureSet.merge_duplicates <streammn.features.FeatureSet.merge_duplicates>`), the
factor scopes of UAI files and the distinct row patterns of
:class:`~streammn.stats.patterns.PatternCounts`.

A key is a sequence of integers: a feature's encoded conditions, a sorted scope, a data row.
Keys go into an open-addressing hash table (linear probing, at most half full) under a 64-bit
hash, :func:`key_hash`; a probe that meets an equal hash compares the keys themselves
(:func:`same_key`), so different keys never share a group even when their hashes collide.
Groups are numbered in order of first occurrence, so what a kernel returns depends only on the
keys, never on the hash function.

>>> import numpy as np
>>> ptr, keys = np.array([0, 2, 3, 5, 5]), np.array([4, 2, 7, 4, 2])  # [4, 2], [7], [4, 2], []
>>> group, first = group_keys(ptr, keys)
>>> group.tolist(), first.tolist()
([0, 1, 0, 2], [0, 1, 3])
"""

from __future__ import annotations

import numba as nb
import numpy as np

_FNV_OFFSET = np.uint64(1469598103934665603)
_FNV_PRIME = np.uint64(1099511628211)


@nb.njit(cache=True)
def key_hash(key):
    """64-bit hash of a 1-D array of non-negative integers: FNV-1a over the values, then an
    xor-shift that folds the high bits (which depend on every value) into the low bits that
    pick a slot."""
    h = _FNV_OFFSET
    for x in key:
        h = (h ^ np.uint64(x)) * _FNV_PRIME
    h ^= h >> np.uint64(31)
    return h


@nb.njit(cache=True)
def same_key(a, b):
    """True when the 1-D arrays ``a`` and ``b`` hold the same values."""
    if a.shape[0] != b.shape[0]:
        return False
    for i in range(a.shape[0]):
        if a[i] != b[i]:
            return False
    return True


@nb.njit(cache=True)
def group_keys(ptr, keys):
    """``(group[n], first[G])`` for the ``n`` keys ``keys[ptr[i]:ptr[i + 1]]``: the group of
    each key (equal keys share one; groups numbered in order of first occurrence) and the
    index of each group's first key."""
    n = ptr.shape[0] - 1
    size = 1
    while size < 2 * n + 2:
        size *= 2
    mask = np.uint64(size - 1)
    slot_group = np.full(size, -1, dtype=np.int64)
    slot_hash = np.zeros(size, dtype=np.uint64)
    group = np.empty(n, dtype=np.int64)
    first = np.empty(n, dtype=np.int64)
    n_groups = 0
    for i in range(n):
        key = keys[ptr[i] : ptr[i + 1]]
        h = key_hash(key)
        s = h & mask
        while True:
            g = slot_group[s]
            if g < 0:
                slot_group[s] = n_groups
                slot_hash[s] = h
                first[n_groups] = i
                group[i] = n_groups
                n_groups += 1
                break
            f = first[g]
            if slot_hash[s] == h and same_key(keys[ptr[f] : ptr[f + 1]], key):
                group[i] = g
                break
            s = (s + np.uint64(1)) & mask
    return group, first[:n_groups].copy()
