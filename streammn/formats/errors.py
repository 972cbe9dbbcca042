"""The one exception every model reader and writer raises, and the weight rule they share.

The exceptions are defined in :mod:`streammn.errors` and imported here under their old names.

A weight is a finite float or ``-inf``. ``-inf`` is a hard zero: every state in which the
feature holds has probability 0 (in UAI it becomes the potential 0, in Libra the token
``-inf``). ``+inf`` and NaN would make the model non-normalisable or undefined, so writers refuse
them and readers reject files that contain them.
"""

from __future__ import annotations

import math

import numpy as np
from streammn.errors import ModelFormatError
from streammn.errors import ModelWriteError  # noqa: F401 (re-exported)


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
