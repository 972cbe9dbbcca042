"""The one exception every model reader and writer raises, and the weight rule they share.

A weight is a finite float or ``-inf``. ``-inf`` is a hard zero: every state in which the
feature holds has probability 0 (in UAI it becomes the potential 0, in Libra the token
``-inf``). ``+inf`` and NaN would make the model non-normalisable or undefined, so writers refuse
them and readers reject files that contain them.
"""

from __future__ import annotations

import math
import os

import numpy as np
from streammn.errors import DataError, UnavailableError


class ModelFormatError(DataError):
    """A model file that cannot be read or a model that cannot be written in a format.

    ``path`` and ``line`` (1-based, ``None`` when not about a line) say where; ``reason`` is the
    message without them.
    """

    def __init__(
        self, message: str, *, path: str | os.PathLike | None = None, line: int | None = None
    ):
        self.reason = message
        self.path = None if path is None else str(path)
        self.line = line
        where = []
        if self.path is not None:
            where.append(self.path)
        if line is not None:
            where.append(f"line {line}")
        super().__init__(f"{', '.join(where)}: {message}" if where else message)


class ModelWriteError(UnavailableError):
    """A model file cannot be written where asked (missing directory, permissions; exit 4)."""


def check_weight(w: float, *, path=None, line=None) -> float:
    """Return ``w`` if it is a valid weight (finite or ``-inf``), else raise."""
    if math.isnan(w) or w == math.inf:
        raise ModelFormatError(
            f"weight {w!r} is not allowed (weights are finite or -inf)", path=path, line=line
        )
    return w


def check_weights(weights: np.ndarray, *, path=None) -> None:
    """Raise naming the first feature whose weight is NaN or ``+inf``."""
    bad = np.isnan(weights) | (weights == np.inf)
    if bad.any():
        f = int(np.argmax(bad))
        raise ModelFormatError(
            f"feature {f} has weight {float(weights[f])!r}; weights must be finite or -inf",
            path=path,
        )
