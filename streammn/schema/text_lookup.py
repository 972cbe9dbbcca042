"""Text cells to state numbers by exact match, in one numba pass over Arrow's string buffers.

Most named columns hold each cell written exactly as one of the variable's names (``US``,
``true``, ``404``): a CSV of 40 such columns spent more time in ``pyarrow.compute.index_in``,
called per column and block, than in parsing. :func:`exact_states` hashes each cell (its length
and first 8 bytes as one word) into an open-addressed table of the names' texts and compares on
a hit, so a block costs one pass over its text. It only answers when every non-null cell
matches; a cell to trim or lower-case, a new name or an error to locate goes to the general
path of :mod:`streammn.schema.encoding`, which gives the same state for every cell matched
here.
"""

from __future__ import annotations

from functools import lru_cache

import numba as nb
import numpy as np
import pyarrow as pa

from streammn.schema.vocabulary import name_text


@nb.njit(cache=True, nogil=True, inline="always")
def _head(data: np.ndarray, start: int, stop: int) -> int:
    """The first (up to) 8 bytes of ``data[start:stop]`` as one word."""
    n = stop - start
    w = np.int64(0)
    for p in range(start, start + (n if n < 8 else 8)):
        w = (w << 8) | np.int64(data[p])
    return w


@nb.njit(cache=True, nogil=True, inline="always")
def _slot(head: int, length: int, mask: int) -> int:
    """The first slot of a text of ``length`` bytes starting with the word ``head``."""
    h = head ^ length
    h ^= h >> 29
    h ^= h >> 13
    return h & mask


@nb.njit(cache=True, nogil=True)
def _same_tail(name_bytes, name_start: int, data, start: int, n: int) -> bool:
    """Whether a name and a cell of ``n`` bytes agree beyond their first 8."""
    for p in range(8, n):
        if name_bytes[name_start + p] != data[start + p]:
            return False
    return True


@nb.njit(cache=True, nogil=True)
def _match(offsets, data, valid, bit_offset, slots, heads, name_ptr, name_bytes, out) -> int:
    """Each cell's name number into ``out`` (0 for a null); the first cell matching no name,
    or -1 when all do. ``valid`` is Arrow's validity bitmap (empty: no nulls). A cell is
    hashed by its length and first 8 bytes, and those compared first: names are short."""
    mask = slots.size - 1
    for i in range(out.size):
        if valid.size:
            bit = bit_offset + i
            if not (valid[bit >> 3] >> (bit & 7)) & 1:
                out[i] = 0
                continue
        a, b = np.int64(offsets[i]), np.int64(offsets[i + 1])
        w = _head(data, a, b)
        s = _slot(w, b - a, mask)
        while True:
            k = slots[s]
            if k < 0:
                return i
            if heads[k] == w and name_ptr[k + 1] - name_ptr[k] == b - a:
                if b - a <= 8 or _same_tail(name_bytes, name_ptr[k], data, a, b - a):
                    out[i] = k
                    break
            s = (s + 1) & mask
    return -1


@lru_cache(maxsize=1024)
def _table(texts: tuple) -> tuple | None:
    """The names' ``texts`` as ``(slots, heads, name_ptr, name_bytes)`` (``slots``: an
    open-addressed table of name numbers, -1 empty, at most half full; ``heads``: each name's
    first 8 bytes as a word); None when two names share a text. Keyed by the texts, not the
    names: ``(False, True) == (0, 1)`` in Python."""
    texts = [t.encode("utf-8") for t in texts]
    if len(set(texts)) < len(texts):
        return None
    name_ptr = np.zeros(len(texts) + 1, np.int64)
    name_ptr[1:] = np.cumsum([len(t) for t in texts])
    name_bytes = np.frombuffer(b"".join(texts), np.uint8).copy()
    heads = np.array([_head(name_bytes, a, b) for a, b in zip(name_ptr[:-1], name_ptr[1:])])
    size = 1 << max(3, (2 * len(texts) - 1).bit_length())
    slots = np.full(size, -1, np.int64)
    for k, w in enumerate(heads.tolist()):
        s = _slot(w, len(texts[k]), size - 1)
        while slots[s] >= 0:
            s = (s + 1) & (size - 1)
        slots[s] = k
    return slots, heads.astype(np.int64), name_ptr, name_bytes


def exact_states(col: pa.Array, names: tuple) -> np.ndarray | None:
    """The states (``uint8``, nulls as 0) of a string column whose every non-null cell is
    written exactly as one of ``names`` (booleans as ``true``/``false``), else None."""
    if not pa.types.is_string(col.type) or len(names) > 256:
        return None
    table = _table(tuple(map(name_text, names)))
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


_NONE = np.zeros(0, np.uint8)
