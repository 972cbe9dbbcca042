"""The one exception every model reader and writer raises, and the weight rule they share.

The exceptions are defined in :mod:`streammn.errors` and imported here under their old names.

A weight is a finite float or ``-inf``. ``-inf`` is a hard zero: every state in which the
feature holds has probability 0 (in UAI it becomes the potential 0, in Libra the token
``-inf``). ``+inf`` and NaN would make the model non-normalisable or undefined, so writers refuse
them and readers reject files that contain them.

The finite weights of a model may sum, in absolute value, to :data:`MAX_WEIGHT_TOTAL` at most.
Every log score of a state lies within that sum of 0, so no score, difference of two scores (a
conditional) or sum of them over the rows of any data set overflows float64, which would turn a
pseudo-likelihood into ``-inf`` or NaN: a weight of ``1e308`` in a file did. The bound is far
beyond any model of data: a weight of 750 is already a probability ratio past float64's range.
"""

from __future__ import annotations

import math

import numpy as np
from streammn.errors import ModelFormatError
from streammn.errors import ModelWriteError  # noqa: F401 (re-exported)


MAX_WEIGHT_TOTAL = 1e200


def check_weight(w: float, *, path=None, line=None) -> float:
    """Return ``w`` if it is a valid weight (finite or ``-inf``), else raise."""
    if math.isnan(w) or w == math.inf:
        raise ModelFormatError(
            f"weight {w!r} is not allowed (weights are finite or -inf)", path=path, line=line
        )
    return w


def check_weights(weights: np.ndarray, *, path=None) -> None:
    """Raise naming the first feature whose weight is NaN or ``+inf``, or when the finite
    weights sum past :data:`MAX_WEIGHT_TOTAL` in absolute value."""
    bad = np.isnan(weights) | (weights == np.inf)
    if bad.any():
        f = int(np.argmax(bad))
        raise ModelFormatError(
            f"feature {f} has weight {float(weights[f])!r}; weights must be finite or -inf",
            path=path,
        )
    with np.errstate(over="ignore"):
        total = float(np.abs(weights[np.isfinite(weights)]).sum())
    if not total <= MAX_WEIGHT_TOTAL:
        f = int(np.argmax(np.where(np.isfinite(weights), np.abs(weights), 0)))
        raise ModelFormatError(
            f"the weights sum to {total:.3g} in absolute value (feature {f} has weight "
            f"{float(weights[f])!r}); at most {MAX_WEIGHT_TOTAL:g} can be scored in float64",
            path=path,
        )
