"""Sorts for numba kernels that a first run compiles in a fraction of the time numba's own
``argsort`` takes (a second or more for each type it sorts, on the first run's critical path):
a merge sort for long arrays, an insertion sort for the few items of a short range.
"""

from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True)
def largest_first(items, sizes):
    """``items`` stably sorted by ``sizes[items]``, largest first (ties keep their order): a
    bottom-up merge sort, O(n log n)."""
    n = items.shape[0]
    a, b = items.copy(), np.empty_like(items)
    width = 1
    while width < n:
        for lo in range(0, n, 2 * width):
            mid, hi = min(lo + width, n), min(lo + 2 * width, n)
            i, j = lo, mid
            for k in range(lo, hi):
                if j >= hi or (i < mid and sizes[a[i]] >= sizes[a[j]]):  # ties: left first
                    b[k] = a[i]
                    i += 1
                else:
                    b[k] = a[j]
                    j += 1
        a, b = b, a
        width *= 2
    return a


@nb.njit(cache=True)
def smallest_first(keys, lo, hi, order):
    """The positions ``lo .. hi - 1`` into ``order``, stably sorted by ``keys``, smallest first;
    returns how many. An insertion sort: for short ranges (a conjunction's few conditions)."""
    for i in range(hi - lo):
        key = keys[lo + i]
        j = i
        while j > 0 and keys[order[j - 1]] > key:
            order[j] = order[j - 1]
            j -= 1
        order[j] = lo + i
    return hi - lo
