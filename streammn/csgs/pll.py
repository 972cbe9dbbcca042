"""Pseudo-likelihood weights from distinct patterns with counts (CSGS's weight learning).

CSGS keeps the data as distinct rows with multiplicities, and its models are learned on all of
them: the planted benchmark has at most 512 distinct rows however many of 100,000 rows are
drawn, nltcs 2,671 for 16,181 rows. Weighting each pattern's pseudo-log-likelihood by its count
gives exactly the objective of :func:`streammn.weights.fit_weights` on the repeated rows
(``-PLL / N + |w - 0|^2 / (2 stddev^2 N)``, ``N`` the number of rows) at the cost of the
distinct rows only.

The conditionals come from :func:`streammn.loglinear.all_conditionals` on the patterns. The
gradient kernel below handles features whose conditions are all equalities on distinct
variables (what CSGS's feature generation and the planted networks produce): for feature ``f``
and one of its variables ``j``, ``d/dw_f log P(x_j | x_-j) = [the other conditions of f hold] *
([x_j = v_j] - P(X_j = v_j | x_-j))``, so a pattern contributes when it misses at most one
condition of ``f``.

Small problems run on one thread: an L-BFGS fit makes a few hundred calls of parallel kernels,
and on a few hundred patterns the cost of waking and joining threads (large on a loaded
machine) is far more than the work itself.
"""

from __future__ import annotations

from contextlib import contextmanager

import numba as nb
import numpy as np

from streammn import loglinear
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


@nb.njit(cache=True, parallel=True)
def _gradient(patterns, counts, probs, offs, ptr, var, val):
    n_features = ptr.shape[0] - 1
    grad = np.zeros(n_features)
    for f in nb.prange(n_features):
        g = 0.0
        for p in range(patterns.shape[0]):
            missed = 0
            where = -1
            for k in range(ptr[f], ptr[f + 1]):
                if patterns[p, var[k]] != val[k]:
                    missed += 1
                    where = k
                    if missed > 1:
                        break
            if missed == 0:
                for k in range(ptr[f], ptr[f + 1]):
                    g += counts[p] * (1.0 - probs[p, offs[var[k]] + val[k]])
            elif missed == 1:
                g -= counts[p] * probs[p, offs[var[where]] + val[where]]
        grad[f] = g
    return grad


def pattern_pll_and_gradient(features, patterns: np.ndarray, counts: np.ndarray):
    """Count-weighted summed PLL of ``patterns`` and its gradient in ``features.weights``."""
    fs = features
    if fs.var.size and not fs.eq.all():
        raise WeightLearningError("pattern-weighted PLL needs equality conditions only")
    probs, terms = loglinear.all_conditionals(fs, patterns)
    offs = loglinear.value_offsets(fs.schema.cardinalities)
    grad = _gradient(patterns, counts.astype(np.float64), probs, offs, fs.ptr, fs.var, fs.val)
    return float(terms.sum(axis=1) @ counts), grad


def fit_pattern_weights(model: MarkovNetwork, patterns, counts, stddev: float = 1.0,
                        max_iter: int = 100, tol: float = 1e-10) -> MarkovNetwork:
    """:func:`streammn.weights.fit_weights` on ``patterns`` repeated ``counts`` times, computed
    on the distinct patterns (same objective, L-BFGS-B settings and ``fit_info``)."""
    patterns = np.ascontiguousarray(patterns, dtype=np.uint8)
    counts = np.ascontiguousarray(counts, dtype=np.int64)
    if patterns.ndim != 2 or patterns.shape[0] == 0 or counts.shape != (patterns.shape[0],):
        raise WeightLearningError(f"need a non-empty 2-D block of patterns with one count "
                                  f"each, got {patterns.shape} and {counts.shape}")
    if not stddev > 0:
        raise WeightLearningError(f"stddev must be positive, got {stddev}")
    model.schema.validate(patterns)
    fs = model.features
    n = float(counts.sum())
    w0 = fs.weights.copy()
    if fs.n_features == 0:
        return model.with_weights(w0)

    def fun(w):
        value, grad = pattern_pll_and_gradient(fs.with_weights(w), patterns, counts)
        return (-value + 0.5 * float(w @ w) / stddev ** 2) / n, (-grad + w / stddev ** 2) / n

    threads = 1 if patterns.shape[0] * fs.n_features < SERIAL_WORK else nb.get_num_threads()
    with _threads(threads):
        return lbfgs(model, fun, w0, max_iter, tol)
