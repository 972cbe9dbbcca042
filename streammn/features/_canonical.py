"""A numba kernel that puts many conjunctions into canonical form at once.

The same rules as :func:`streammn.features.canonical_conditions`, over flat arrays
(conjunction ``k`` holds conditions ``ptr[k]:ptr[k + 1]``), for callers that build thousands of
features at a time (tree paths at every snapshot): per variable the conditions leave a set of
allowed values; all values allowed drops the variable, one value gives ``X_v = a``, otherwise the
``!=`` conditions of the excluded values in increasing order; no value allowed drops the
conjunction. Variables come out in increasing order. A canonical conjunction is never longer than
its input.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from streammn.kernel_sorts import smallest_first


@nb.njit(cache=True)
def canonical_flat(ptr, var, val, eq, cards):
    """``(keep, out_ptr, out_var, out_val, out_eq)``: ``keep[k]`` is False for a conjunction
    that can never hold (it has no entry in the output); values must be in range."""
    n = ptr.shape[0] - 1
    keep = np.ones(n, dtype=np.bool_)
    out_ptr = np.zeros(n + 1, dtype=np.int64)
    out_var = np.empty(var.shape[0], dtype=np.int32)
    out_val = np.empty(var.shape[0], dtype=np.uint8)
    out_eq = np.empty(var.shape[0], dtype=np.bool_)
    allowed = np.empty(256, dtype=np.bool_)
    longest = 0
    for k in range(n):
        longest = max(longest, ptr[k + 1] - ptr[k])
    order = np.empty(longest, dtype=np.int64)  # one conjunction's conditions, sorted
    m = 0  # conjunctions kept
    c = 0  # conditions written
    for k in range(n):
        start = c
        length = smallest_first(var, ptr[k], ptr[k + 1], order)
        i = 0
        while i < length:
            v = var[order[i]]
            card = cards[v]
            allowed[:card] = True
            j = i
            while j < length and var[order[j]] == v:
                a = val[order[j]]
                if eq[order[j]]:
                    for b in range(card):
                        if b != a:
                            allowed[b] = False
                else:
                    allowed[a] = False
                j += 1
            n_allowed = 0
            only = 0
            for b in range(card):
                if allowed[b]:
                    n_allowed += 1
                    only = b
            if n_allowed == 0:
                keep[k] = False
                break
            if n_allowed == 1:
                out_var[c], out_val[c], out_eq[c] = v, only, True
                c += 1
            elif n_allowed < card:
                for b in range(card):
                    if not allowed[b]:
                        out_var[c], out_val[c], out_eq[c] = v, b, False
                        c += 1
            i = j
        if keep[k]:
            m += 1
            out_ptr[m] = c
        else:
            c = start
    return keep, out_ptr[: m + 1], out_var[:c], out_val[:c], out_eq[:c]
