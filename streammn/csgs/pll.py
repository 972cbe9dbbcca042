"""Pseudo-likelihood weights from distinct patterns with counts (CSGS's weight learning).

CSGS keeps the data as distinct rows with multiplicities, and its models are learned on all of
them: the planted benchmark has at most 512 distinct rows however many of 100,000 rows are
drawn, nltcs 2,671 for 16,181 rows. The weights are those of :func:`streammn.weights.fit_weights`
on the patterns with their counts as row weights: the objective on the repeated rows
(``-PLL / N + |w - 0|^2 / (2 stddev^2 N)``, ``N`` the number of rows), computed by the shared
reach-list kernels (:class:`streammn.reach_lists.ReachLists`) at the cost of the distinct rows
only, with the same L-BFGS settings and ``fit_info``. CSGS has no PLL code of its own.

Small problems run on one thread: an L-BFGS fit makes a few hundred calls of parallel kernels,
and on a few hundred patterns the cost of waking and joining threads (large on a loaded
machine) is far more than the work itself. The kernels give the same bits at any thread count.
"""

from __future__ import annotations

from contextlib import contextmanager

import numba as nb
import numpy as np

from streammn.model import MarkovNetwork
from streammn.weights import WeightLearningError, fit_weights

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


def fit_pattern_weights(
    model: MarkovNetwork,
    patterns,
    counts,
    stddev: float = 1.0,
    max_iter: int = 100,
    tol: float = 1e-10,
) -> MarkovNetwork:
    """:func:`streammn.weights.fit_weights` on ``patterns`` weighted by ``counts`` (the fit on
    the patterns repeated ``counts`` times), on one thread when the problem is small."""
    patterns = np.ascontiguousarray(patterns, dtype=np.uint8)
    counts = np.ascontiguousarray(counts, dtype=np.int64)
    if patterns.ndim != 2 or patterns.shape[0] == 0 or counts.shape != (patterns.shape[0],):
        raise WeightLearningError(
            f"need a non-empty 2-D block of patterns with one count "
            f"each, got {patterns.shape} and {counts.shape}"
        )
    if not stddev > 0:
        raise WeightLearningError(f"stddev must be positive, got {stddev}")
    work = patterns.shape[0] * model.features.n_features
    threads = 1 if work < SERIAL_WORK else nb.get_num_threads()
    with _threads(threads):
        return fit_weights(model, patterns, stddev, max_iter, tol, counts=counts)
