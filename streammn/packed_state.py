"""A saved state as one ``.npz``: JSON metadata and named numpy arrays, never a pickle.

Every checkpoint streammn writes (learner states, the weight sample and the weight state of a
snapshot) is packed this way, so a state file from anywhere is safe to load.
"""

from __future__ import annotations

import io
import json
from zipfile import BadZipFile

import numpy as np


def pack_state(meta: dict, arrays: dict[str, np.ndarray]) -> bytes:
    """A learner's state as one ``.npz``: JSON metadata under ``__meta__`` and named arrays
    (no pickles, so a state file from anywhere is safe to load)."""
    buf = io.BytesIO()
    np.savez(buf, __meta__=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8), **arrays)
    return buf.getvalue()


def unpack_state(data: bytes) -> tuple[dict, dict[str, np.ndarray]]:
    """The metadata and arrays of :func:`pack_state`'s bytes; ``ValueError`` when they are
    not such a state, whatever is wrong with them (callers name the file in their error)."""
    if bytes(data[:2]) != b"PK":  # what numpy would read as a pickle and refuse
        raise ValueError("not an .npz archive")
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
        return json.loads(arrays.pop("__meta__").tobytes().decode()), arrays
    except (OSError, EOFError, KeyError, UnicodeDecodeError, BadZipFile) as error:
        raise ValueError(f"{type(error).__name__}: {error}") from None
