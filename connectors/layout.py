"""Column-major to row-major conversion of state columns (the cost centre of reading Arrow).

Arrow hands over one array per column; learners want one C-contiguous row per example. Moving
bytes one at a time through a strided copy is slow, so the transpose works on 8x8 blocks of
bytes held in eight 64-bit words: eight words of eight rows of one column each become, after
three rounds of masked swaps (bytes, then byte pairs, then halves), eight words of eight columns
of one row each. Columns are padded to a multiple of 8 and rows beyond a multiple of 8 are copied
directly.
"""

from __future__ import annotations

import numba as nb
import numpy as np

_BYTES = np.uint64(0x00FF00FF00FF00FF)
_PAIRS = np.uint64(0x0000FFFF0000FFFF)
_HALVES = np.uint64(0x00000000FFFFFFFF)
_S8, _S16, _S32 = np.uint64(8), np.uint64(16), np.uint64(32)


@nb.njit(cache=True, inline="always")
def _swap(x, y, shift, mask):
    t = ((x >> shift) ^ y) & mask
    return x ^ (t << shift), y ^ t


@nb.njit(cache=True, boundscheck=False)
def _transpose_8x8_words(src64, out64):
    """``src64``: (8*kb, w) words of 8 rows per column; ``out64``: (8*w, kb) words of 8 columns."""
    kb = out64.shape[1]
    for w in range(src64.shape[1]):
        r = w * 8
        for cb in range(kb):
            c = cb * 8
            a0, a1 = _swap(src64[c, w], src64[c + 1, w], _S8, _BYTES)
            a2, a3 = _swap(src64[c + 2, w], src64[c + 3, w], _S8, _BYTES)
            a4, a5 = _swap(src64[c + 4, w], src64[c + 5, w], _S8, _BYTES)
            a6, a7 = _swap(src64[c + 6, w], src64[c + 7, w], _S8, _BYTES)
            a0, a2 = _swap(a0, a2, _S16, _PAIRS)
            a1, a3 = _swap(a1, a3, _S16, _PAIRS)
            a4, a6 = _swap(a4, a6, _S16, _PAIRS)
            a5, a7 = _swap(a5, a7, _S16, _PAIRS)
            a0, a4 = _swap(a0, a4, _S32, _HALVES)
            a1, a5 = _swap(a1, a5, _S32, _HALVES)
            a2, a6 = _swap(a2, a6, _S32, _HALVES)
            a3, a7 = _swap(a3, a7, _S32, _HALVES)
            out64[r, cb] = a0
            out64[r + 1, cb] = a1
            out64[r + 2, cb] = a2
            out64[r + 3, cb] = a3
            out64[r + 4, cb] = a4
            out64[r + 5, cb] = a5
            out64[r + 6, cb] = a6
            out64[r + 7, cb] = a7


def columns_to_rows(columns: list[np.ndarray]) -> np.ndarray:
    """Equal-length ``uint8`` columns as a C-contiguous ``(n_rows, n_columns)`` matrix."""
    k = len(columns)
    n = len(columns[0]) if k else 0
    k_pad = -(-k // 8) * 8
    n_body = n - n % 8
    stacked = np.zeros((k_pad, n_body), dtype=np.uint8)
    for j, col in enumerate(columns):
        stacked[j] = col[:n_body]
    padded = np.empty((n_body, k_pad), dtype=np.uint8)
    if n_body and k:
        _transpose_8x8_words(stacked.view(np.uint64), padded.view(np.uint64))
    out = np.empty((n, k), dtype=np.uint8)
    out[:n_body] = padded[:, :k]
    for j, col in enumerate(columns):
        out[n_body:, j] = col[n_body:]
    return out
