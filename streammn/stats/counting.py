"""Numba kernels that turn a batch of rows into counts (the hot loops of the stores).

Each kernel makes one pass over a C-contiguous ``uint8`` row block; the Python side only
orchestrates (chunking, accumulation, bookkeeping).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from streammn.schema import MISSING


@nb.njit(cache=True)
def count_values(rows, offsets, out):
    """``out[offsets[i] + x_i] += 1`` for every row ``x`` and variable ``i``; a missing value
    (:data:`~streammn.schema.MISSING`, missing mode) is not counted.

    ``offsets[i]`` is where variable ``i``'s ``cardinality`` counters start in ``out``.
    """
    n, m = rows.shape
    for r in range(n):
        for i in range(m):
            x = rows[r, i]
            if x != MISSING:
                out[offsets[i] + x] += 1


@nb.njit(cache=True)
def encode_nonzero_states(rows, columns, cards, out):
    """Write the non-zero-state indicator encoding of ``rows`` into ``out`` (float32).

    Variable ``i`` owns ``cards[i] - 1`` columns starting at ``columns[i]``, one per state
    ``1 .. card-1``; state 0 is all zeros (it is recovered from the marginals). A binary variable
    is thus its own value, so for binary data ``out`` is simply ``rows`` as float32. Every cell
    of ``out[:len(rows)]`` is written.
    """
    n, m = rows.shape
    for r in range(n):
        for i in range(m):
            x = rows[r, i]
            c = columns[i]
            if cards[i] == 2:
                out[r, c] = x
            else:  # branch-free: a data-dependent branch here mispredicts on most rows
                for k in range(cards[i] - 1):
                    out[r, c + k] = np.float32(x == k + 1)


@nb.njit(cache=True)
def count_pairs(rows, pi, pj, cj, offsets, out):
    """Joint counts for the listed variable pairs.

    Pair ``p`` = ``(pi[p], pj[p])`` owns the row-major ``card_i x card_j`` table
    ``out[offsets[p]: offsets[p] + card_i * card_j]``; ``cj[p]`` is ``card_j``.
    """
    n = rows.shape[0]
    n_pairs = pi.shape[0]
    for r in range(n):
        for p in range(n_pairs):
            out[offsets[p] + rows[r, pi[p]] * cj[p] + rows[r, pj[p]]] += 1


def state_offsets(cardinalities) -> np.ndarray:
    """``[0, c0, c0+c1, ...]``: where each variable's states start in a flat one-hot layout."""
    cards = np.asarray(cardinalities, dtype=np.int64)
    return np.concatenate([[0], np.cumsum(cards)]).astype(np.int64)
