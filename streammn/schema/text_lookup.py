"""Text cells to state numbers by exact match, in one numba pass over Arrow's string buffers.

Most named columns hold each cell written exactly as one of the variable's names (``US``,
``true``, ``404``): a CSV of 40 such columns spent more time in ``pyarrow.compute.index_in``,
called per column and block, than in parsing. :func:`exact_states` hashes each cell (its length
and first 8 bytes as one word) into an open-addressed table of the names' texts and compares on
a hit, so a block costs one pass over its text. It only answers when every non-null cell
matches; a cell to trim or lower-case, a new name or an error to locate goes to the general
path of :mod:`streammn.schema.encoding`, which gives the same state for every cell matched
here. The table (:func:`text_table`, :func:`find_text`) also finds the keys of JSON messages
(:mod:`streammn.connectors.flatjson`).
"""

from __future__ import annotations

from functools import lru_cache

import numba as nb
import numpy as np
import pyarrow as pa

from streammn.schema.vocabulary import name_text

_NONE = np.zeros(0, np.uint8)  # no validity bitmap: no nulls


@nb.njit(cache=True, nogil=True, inline="always")
def _head(data: np.ndarray, start: int, stop: int) -> int:
    """The first (up to) 8 bytes of ``data[start:stop]`` as one word."""
    n = stop - start
    w = np.int64(0)
    for p in range(start, start + (n if n < 8 else 8)):
        w = (w << 8) | np.int64(data[p])
    return w  # type: ignore[return-value]  # numba's int is int64


@nb.njit(cache=True, nogil=True, inline="always")
def _slot(head: int, length: int, mask: int) -> int:
    """The first slot of a text of ``length`` bytes starting with the word ``head``."""
    h = head ^ length
    h ^= h >> 29
    h ^= h >> 13
    return h & mask


@nb.njit(cache=True, nogil=True)
def _same_tail(text_bytes, text_start: int, data, start: int, n: int) -> bool:
    """Whether a text and a cell of ``n`` bytes agree beyond their first 8."""
    for p in range(8, n):
        if text_bytes[text_start + p] != data[start + p]:
            return False
    return True


@nb.njit(cache=True, nogil=True)
def find_text(data, start: int, stop: int, text_bytes, text_ptr, slots) -> int:
    """The number of the text ``data[start:stop]`` in a :func:`text_table`, or -1."""
    n = stop - start
    w = _head(data, start, stop)
    mask = (slots.shape[0] >> 1) - 1
    s = _slot(w, n, mask)
    while True:
        k = slots[2 * s]
        if k < 0:
            return -1
        if slots[2 * s + 1] == w and text_ptr[k + 1] - text_ptr[k] == n:
            if n <= 8 or _same_tail(text_bytes, text_ptr[k], data, start, n):
                return k
        s = (s + 1) & mask


@nb.njit(cache=True, nogil=True)
def _match(offsets, data, valid, bit_offset, text_bytes, text_ptr, slots, out) -> int:
    """Each cell's name number into ``out`` (0 for a null); the first cell matching no name,
    or -1 when all do. ``valid`` is Arrow's validity bitmap (empty: no nulls). The probe of
    :func:`find_text` is written out here: called per cell, it cost this loop 1.7x."""
    mask = (slots.shape[0] >> 1) - 1
    for i in range(out.size):
        if valid.size:
            bit = bit_offset + i
            if not (valid[bit >> 3] >> (bit & 7)) & 1:
                out[i] = 0
                continue
        # numba's int is int64, which the annotations of the kernels called here mean
        a, b = np.int64(offsets[i]), np.int64(offsets[i + 1])
        w = _head(data, a, b)  # type: ignore[arg-type]
        s = _slot(w, b - a, mask)  # type: ignore[arg-type]
        while True:
            k = slots[2 * s]
            if k < 0:
                return i
            if slots[2 * s + 1] == w and text_ptr[k + 1] - text_ptr[k] == b - a:
                if b - a <= 8 or _same_tail(text_bytes, text_ptr[k], data, a, b - a):  # type: ignore[arg-type]
                    out[i] = k
                    break
            s = (s + 1) & mask
    return -1


def text_table(texts) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """A hash table of distinct byte strings, for :func:`find_text`: ``(text_bytes,
    text_ptr, slots)``: the texts joined, where each starts, and an open-addressed table at
    most half full, two entries a slot: a text's number (-1: empty) and its first 8 bytes as
    a word, compared before the bytes. None when two texts are equal."""
    if len(set(texts)) < len(texts):
        return None
    text_ptr = np.zeros(len(texts) + 1, np.int64)
    text_ptr[1:] = np.cumsum([len(t) for t in texts])
    text_bytes = np.frombuffer(b"".join(texts), np.uint8).copy()
    size = 1 << max(3, (2 * len(texts) - 1).bit_length())
    slots = np.full(2 * size, -1, np.int64)
    for k in range(len(texts)):
        w = _head(text_bytes, text_ptr[k], text_ptr[k + 1])
        s = _slot(w, len(texts[k]), size - 1)
        while slots[2 * s] >= 0:
            s = (s + 1) & (size - 1)
        slots[2 * s : 2 * s + 2] = k, w
    return text_bytes, text_ptr, slots


@lru_cache(maxsize=1024)
def _names_table(texts: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """:func:`text_table` of names' texts (keyed by the texts, not the names:
    ``(False, True) == (0, 1)`` in Python)."""
    return text_table([t.encode("utf-8") for t in texts])


def exact_states(col: pa.Array, names: tuple) -> np.ndarray | None:
    """The states (``uint8``, nulls as 0) of a string column whose every non-null cell is
    written exactly as one of ``names`` (booleans as ``true``/``false``), else None."""
    if not pa.types.is_string(col.type) or len(names) > 256:
        return None
    table = _names_table(tuple(map(name_text, names)))
    if table is None:
        return None
    validity, offsets, data = col.buffers()
    n = len(col)
    offsets = np.frombuffer(offsets, np.int32, n + 1, col.offset * 4)
    data = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
    valid = np.frombuffer(validity, np.uint8) if validity is not None and col.null_count else _NONE
    out = np.empty(n, np.uint8)
    if _match(offsets, data, valid, col.offset, *table, out) >= 0:
        return None
    return out
