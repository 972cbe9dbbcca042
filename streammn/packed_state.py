"""A saved state as one ``.npz``: JSON metadata and named numpy arrays, never a pickle.

Every checkpoint streammn writes (learner states, the weight sample and the weight state of a
snapshot) is packed this way, so a state file from anywhere is safe to load.

Rows of binary variables dominate most checkpoints (DTSL's replay buffer of the last rows, the
row samples), one byte per 0/1 value. A ``uint8`` array of at least ``BITS_FROM`` bytes that
holds only 0 and 1 is stored as its bits (``np.packbits``, eight times smaller) under
``<name>.bits``, with its shape under ``<name>.shape``; unpacking restores it exactly, so a
state is the same however it is stored. States written before this are read as they are.
"""

from __future__ import annotations

import io
import json
import math
from zipfile import BadZipFile

import numpy as np


BITS_FROM = 4096  # uint8 0/1 arrays of this many bytes or more are stored as bits
BITS, SHAPE = ".bits", ".shape"


def pack_state(meta: dict, arrays: dict[str, np.ndarray]) -> bytes:
    """A learner's state as one ``.npz``: JSON metadata under ``__meta__`` and named arrays
    (no pickles, so a state file from anywhere is safe to load); 0/1 byte arrays as bits."""
    stored = {}
    for name, array in arrays.items():
        if _binary_bytes(array):
            stored[name + BITS] = np.packbits(array.ravel())
            stored[name + SHAPE] = np.array(array.shape, dtype=np.int64)
        else:
            stored[name] = array
    buf = io.BytesIO()
    # (numpy's stub takes the named arrays for its allow_pickle flag)
    np.savez(buf, __meta__=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8), **stored)  # type: ignore[arg-type]
    return buf.getvalue()


def _binary_bytes(array) -> bool:
    """Whether ``array`` is a large enough ``uint8`` array of zeros and ones to store as bits."""
    return (
        isinstance(array, np.ndarray)
        and array.dtype == np.uint8
        and array.size >= BITS_FROM
        and not (array > 1).any()
    )


def _unpacked(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The arrays :func:`pack_state` was given, from those it stored."""
    out = {}
    for name, array in arrays.items():
        if name.endswith(BITS):
            base = name[: -len(BITS)]
            shape = tuple(int(d) for d in arrays[base + SHAPE])
            out[base] = np.unpackbits(array, count=math.prod(shape)).reshape(shape)
        elif not (name.endswith(SHAPE) and name[: -len(SHAPE)] + BITS in arrays):
            out[name] = array
    return out


def unpack_state(data: bytes) -> tuple[dict, dict[str, np.ndarray]]:
    """The metadata and arrays of :func:`pack_state`'s bytes; ``ValueError`` when they are
    not such a state, whatever is wrong with them (callers name the file in their error)."""
    if bytes(data[:2]) != b"PK":  # what numpy would read as a pickle and refuse
        raise ValueError("not an .npz archive")
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
        return json.loads(arrays.pop("__meta__").tobytes().decode()), _unpacked(arrays)
    except (OSError, EOFError, KeyError, UnicodeDecodeError, BadZipFile) as error:
        raise ValueError(f"{type(error).__name__}: {error}") from None
