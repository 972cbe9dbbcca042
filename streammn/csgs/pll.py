"""Pseudo-likelihood weights from distinct patterns with counts (CSGS's weight learning).

CSGS keeps the data as distinct rows with multiplicities, and its models are learned on all of
them: the planted benchmark has at most 512 distinct rows however many of 100,000 rows are
drawn, nltcs 2,671 for 16,181 rows. Weighting each pattern's pseudo-log-likelihood by its count
gives exactly the objective of :func:`streammn.weights.fit_weights` on the repeated rows
(``-PLL / N + |w - 0|^2 / (2 stddev^2 N)``, ``N`` the number of rows) at the cost of the
distinct rows only.

PLL and gradient come from :class:`streammn.reach_lists.ReachLists` on the patterns with their
counts as row weights, built once per fit: the same kernels, lists and memory budget as
:func:`streammn.weights.fit_weights`, for any conditions.

Small problems run on one thread: an L-BFGS fit makes a few hundred calls of parallel kernels,
and on a few hundred patterns the cost of waking and joining threads (large on a loaded
machine) is far more than the work itself.
"""

from __future__ import annotations

from contextlib import contextmanager

import numba as nb
import numpy as np

from streammn import reach_lists
from streammn.model import MarkovNetwork
from streammn.weights import WeightLearningError, lbfgs

SERIAL_WORK = 2_000_000
"""Below this many (pattern, feature) pairs weight learning runs on one thread."""


@contextmanager
def _threads(n: int):
    before = nb.get_num_threads()
    nb.set_num_threads(max(1, min(n, before)))
    try:
        yield
    finally:
        nb.set_num_threads(before)


def pattern_pll_and_gradient(features, patterns: np.ndarray, counts: np.ndarray):
    """Count-weighted summed PLL of ``patterns`` and its gradient in ``features.weights``."""
    return reach_lists.pll_evaluator(features, patterns, list_bytes=0, counts=counts)(
        features.weights
    )


def fit_pattern_weights(
    model: MarkovNetwork,
    patterns,
    counts,
    stddev: float = 1.0,
    max_iter: int = 100,
    tol: float = 1e-10,
) -> MarkovNetwork:
    """:func:`streammn.weights.fit_weights` on ``patterns`` repeated ``counts`` times, computed
    on the distinct patterns (same objective, L-BFGS-B settings and ``fit_info``)."""
    patterns = np.ascontiguousarray(patterns, dtype=np.uint8)
    counts = np.ascontiguousarray(counts, dtype=np.int64)
    if patterns.ndim != 2 or patterns.shape[0] == 0 or counts.shape != (patterns.shape[0],):
        raise WeightLearningError(
            f"need a non-empty 2-D block of patterns with one count "
            f"each, got {patterns.shape} and {counts.shape}"
        )
    if not stddev > 0:
        raise WeightLearningError(f"stddev must be positive, got {stddev}")
    model.schema.validate(patterns)
    fs = model.features
    n = float(counts.sum())
    w0 = fs.weights.copy()
    if fs.n_features == 0:
        return model.with_weights(w0)

    def fun(w):
        value, grad = pll_and_gradient(w)
        return (-value + 0.5 * float(w @ w) / stddev**2) / n, (-grad + w / stddev**2) / n

    threads = 1 if patterns.shape[0] * fs.n_features < SERIAL_WORK else nb.get_num_threads()
    with _threads(threads):
        pll_and_gradient = reach_lists.pll_evaluator(fs, patterns, counts=counts)
        return lbfgs(model, fun, w0, max_iter, tol)
