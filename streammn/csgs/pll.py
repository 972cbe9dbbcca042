"""Pseudo-likelihood weights from distinct patterns with counts (CSGS's weight learning).

CSGS keeps the data as distinct rows with multiplicities, and its models are learned on all of
them: the planted benchmark has at most 512 distinct rows however many of 100,000 rows are
drawn, nltcs 2,671 for 16,181 rows. The weights are those of
:func:`streammn.network.weights.fit_weights` on the patterns with their counts as row weights: the
objective on the repeated rows (``-PLL / N + |w - 0|^2 / (2 stddev^2 N)``, ``N`` the number of
rows), computed by the shared reach-list kernels (:class:`streammn.network.reach_lists.ReachLists`)
at the cost of the distinct rows only, with the same L-BFGS settings and ``fit_info``. CSGS has no
PLL code of its own. Beyond ``FIT_PATTERNS`` distinct rows (wide data: nearly every row is
distinct) the weights are fit on a uniform sample of that many (:func:`fit_sample`).

The fit stops on a tolerance scaled to the data's sampling noise rather than on an iteration
count (issue 41): the objective is a mean over ``N`` rows, whose noise shrinks as
``1 / sqrt(N)``, and an L-BFGS iteration that lowers it by less than ``NOISE_FRACTION /
sqrt(N)`` (relative) moves the model less than another sample of the same size would. On the
1M-row planted stream of 30 variables (``benchmarks/learners_stream.py``) at 100k rows that is
21 iterations instead of the 100 of ``tol=1e-10``, and the held-out PLL is -10.8039 against
-10.8011 at 42 iterations and -10.8048 at 72 (later iterations fit the noise).

Small problems run on one thread: an L-BFGS fit makes a few hundred calls of parallel kernels,
and on a few hundred patterns the cost of waking and joining threads (large on a loaded
machine) is far more than the work itself. The kernels give the same bits at any thread count.
"""

from __future__ import annotations

import math
from contextlib import contextmanager

import numba as nb
import numpy as np

from streammn.network import reach_lists
from streammn.csgs.canonical import Abandoned
from streammn.kernel_mode import serial_kernels_only
from streammn.network.model import MarkovNetwork
from streammn.network.weights import WeightLearningError, lbfgs, penalised

NOISE_FRACTION = 0.03
"""Share of the objective's sampling noise (``1 / sqrt(N)``) below which an iteration's gain
ends the fit."""

SERIAL_WORK = 2_000_000
"""Below this many (pattern, feature) pairs weight learning runs on one thread."""

FIT_PATTERNS = 25_000
"""The distinct patterns the weights are fit on, at most (:func:`fit_sample`). Wide data has
nearly as many distinct rows as rows (100 binary variables: 100,000 of 100,000), and one
evaluation of the objective on 100,000 patterns and the 142,082 features of 5,000 contexts'
graphs took 5.3 s, tens of them a fit; the published weights of every other learner are fit
on a sample of this size too (:mod:`streammn.network.weight_sample`)."""


@contextmanager
def _threads(n: int):
    """At most ``n`` of numba's threads for the block; nothing in a forked snapshot writer,
    whose kernels are serial and which must not start numba's pool
    (:mod:`streammn.kernel_mode`)."""
    if serial_kernels_only():
        yield
        return
    before = nb.get_num_threads()
    nb.set_num_threads(max(1, min(n, before)))
    try:
        yield
    finally:
        nb.set_num_threads(before)


def noise_tolerance(n_rows: int) -> float:
    """The relative tolerance of a fit on ``n_rows`` rows (see the module notes)."""
    return NOISE_FRACTION / math.sqrt(max(n_rows, 1))


@nb.njit(cache=True)
def _row_hashes(patterns):
    """A 64-bit hash of every row (FNV-1a over its bytes, then a SplitMix64 finaliser)."""
    out = np.empty(patterns.shape[0], dtype=np.uint64)
    for r in range(patterns.shape[0]):
        h = np.uint64(0xCBF29CE484222325)
        for j in range(patterns.shape[1]):
            h = (h ^ np.uint64(patterns[r, j])) * np.uint64(0x100000001B3)
        h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        out[r] = h ^ (h >> np.uint64(31))
    return out


def fit_sample(patterns, counts, size: int = FIT_PATTERNS) -> tuple[np.ndarray, np.ndarray]:
    """The patterns (with their counts) the weights are fit on: all of them up to ``size``,
    else the ``size`` whose hashes are smallest, a uniform sample of the distinct patterns that
    depends on the patterns alone (not on their order, nor on how the stream was cut), so the
    model stays a function of the counts. With repeated patterns the sample is uniform over
    patterns, not rows; each keeps its count as its weight."""
    if patterns.shape[0] <= size:
        return patterns, counts
    hashes = _row_hashes(np.ascontiguousarray(patterns, dtype=np.uint8))
    keep = np.argsort(hashes, kind="stable")[:size]
    keep.sort()
    return patterns[keep], counts[keep]


def fit_pattern_weights(
    model: MarkovNetwork,
    patterns,
    counts,
    stddev: float = 1.0,
    max_iter: int = 100,
    tol: float | None = None,
    should_stop=None,
) -> MarkovNetwork:
    """:func:`streammn.network.weights.fit_weights` on ``patterns`` weighted by ``counts`` (the fit
    on the patterns repeated ``counts`` times: the same objective, L-BFGS run and bits), on one
    thread when the problem is small; ``tol`` defaults to :func:`noise_tolerance` of the rows
    counted. ``should_stop``: asked before every evaluation of the objective; when it returns
    True the fit is abandoned (:class:`~streammn.csgs.canonical.Abandoned`)."""
    patterns = np.ascontiguousarray(patterns, dtype=np.uint8)
    counts = np.ascontiguousarray(counts, dtype=np.int64)
    if patterns.ndim != 2 or patterns.shape[0] == 0 or counts.shape != (patterns.shape[0],):
        raise WeightLearningError(
            f"need a non-empty 2-D block of patterns with one count "
            f"each, got {patterns.shape} and {counts.shape}"
        )
    if not stddev > 0:
        raise WeightLearningError(f"stddev must be positive, got {stddev}")
    if tol is None:
        tol = noise_tolerance(int(counts.sum()))
    fs = model.features
    if max_iter < 1 or fs.n_features == 0:
        return model.with_weights(fs.weights.copy())
    threads = 1 if patterns.shape[0] * fs.n_features < SERIAL_WORK else nb.get_num_threads()
    with _threads(threads):
        evaluate = reach_lists.pll_evaluator(fs, patterns, counts=counts.astype(np.float64))
        objective = penalised(evaluate, float(counts.sum()), stddev, np.zeros(fs.n_features))
        if should_stop is not None:
            objective = _watched(objective, should_stop)
        return lbfgs(model, objective, fs.weights.copy(), max_iter, tol)


def _watched(objective, should_stop):
    """``objective`` that raises :class:`Abandoned` when ``should_stop()`` says so."""

    def watched(weights):
        if should_stop():
            raise Abandoned
        return objective(weights)

    return watched
