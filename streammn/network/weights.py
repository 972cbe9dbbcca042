"""Weight learning for Markov networks: maximum pseudo-likelihood with a Gaussian prior.

The objective per example is ``-PLL(w) / N + sum_f (w_f - mu_f)^2 / (2 stddev^2 N)``: the negative
log posterior of the weights under a ``N(mu, stddev^2)`` prior on each weight, divided by the number
of rows ``N`` so that step sizes and tolerances do not depend on the data size. PLL and its
gradient come from the numba kernels of :mod:`streammn.network.reach_lists`: a fit scans its
distinct rows once into reach lists (per row and value, the features that hold and those that fail
through that variable's conditions only; :class:`streammn.network.reach_lists.ReachLists`), and
every L-BFGS evaluation is then one sparse pass over them; past a memory budget (256 MiB) the rows
are scanned chunk by chunk into per-word lists instead, those that fit in the budget kept across
evaluations. Row chunks run on all cores, with the same bits at any thread count.

* :func:`fit_weights` — L-BFGS (:mod:`streammn.network.lbfgs`) on rows in memory (an array, a
  ``Batch`` or a ``RowReservoir``'s sample), warm-started from any weights (e.g. DN2MN's).
* :class:`StochasticPLL` — mini-batch AdaGrad steps for streams (``partial_fit``), where the
  prior is scaled by the number of rows seen so far.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from threadpoolctl import threadpool_limits

from streammn.network import reach_lists
from streammn.network.lbfgs import minimise as lbfgs_minimise
from streammn.features import FeatureSet
from streammn.network.model import MarkovNetwork
from streammn.errors import WeightLearningError, WeightLearningTypeError
from streammn.schema import Rows, require_observed


def _as_rows(data, schema) -> np.ndarray:
    """Rows from an array, a ``streammn.connectors.Batch`` or a row reservoir (anything with
    ``.rows``), validated against ``schema``. Pseudo-likelihood needs every value of a row, so a
    missing
    value (missing mode) is refused with its row and column named."""
    rows = schema.rows_of(data)
    if rows.shape[0] == 0:
        raise WeightLearningError(
            f"weight learning needs a non-empty 2-D block of rows, got shape {rows.shape}"
        )
    if schema.missing:
        require_observed(rows, "pseudo-likelihood weight learning")
    return rows


def _as_model(model) -> MarkovNetwork:
    if isinstance(model, FeatureSet):
        return MarkovNetwork(model.schema, model)
    if isinstance(model, MarkovNetwork):
        return model
    raise WeightLearningTypeError(
        f"expected a MarkovNetwork or FeatureSet, got {type(model).__name__}"
    )


def _vector(x, size: int, name: str, default: float) -> np.ndarray:
    if x is None:
        return np.full(size, default)
    x = np.asarray(x, dtype=np.float64)
    if x.shape != (size,):
        raise WeightLearningError(f"{name} must have one entry per feature ({size}), got {x.shape}")
    if not np.isfinite(x).all():
        bad = int(np.flatnonzero(~np.isfinite(x))[0])
        raise WeightLearningError(f"{name} must be finite, got {x[bad]} for feature {bad}")
    return x.copy()


def pll_objective(
    features: FeatureSet, rows, stddev: float = 1.0, prior_mean=None, counts=None
) -> tuple[float, np.ndarray]:
    """Objective and gradient at ``features.weights`` (see module docstring; ``counts`` as in
    :func:`fit_weights`)."""
    return _objective(features, rows, stddev, prior_mean, counts)(features.weights)


def _objective(features: FeatureSet, rows, stddev: float, prior_mean, counts=None):
    """The objective as a function ``weights -> (value, gradient)``, reading the rows through
    reach lists built once (:func:`streammn.network.reach_lists.pll_evaluator`)."""
    rows = _as_rows(rows, features.schema)
    if not stddev > 0:
        raise WeightLearningError(f"stddev must be positive, got {stddev}")
    mu = _vector(prior_mean, features.n_features, "prior_mean", 0.0)
    n_rows, counts = _row_counts(counts, rows)
    evaluate = reach_lists.pll_evaluator(features, rows, counts=counts)
    return penalised(evaluate, n_rows, stddev, mu)


def _row_counts(counts, rows: np.ndarray):
    """``(N, counts)``: the number of rows ``N`` that divides the objective (the rows, or their
    summed counts) and the row weights as floats (None: one each)."""
    if counts is None:
        return rows.shape[0], None
    counts = np.ascontiguousarray(counts, dtype=np.float64)
    if counts.shape != (rows.shape[0],):
        raise WeightLearningError(
            f"counts must have one entry per row ({rows.shape[0]}), got {counts.shape}"
        )
    if not (np.isfinite(counts).all() and (counts >= 0).all() and counts.sum() > 0):
        raise WeightLearningError("counts must be finite, non-negative and not all zero")
    return float(counts.sum()), counts


def penalised(pll_and_gradient, n_rows: float, stddev: float, prior_mean: np.ndarray):
    """``weights -> (value, gradient)`` of the module's objective, from a function giving the
    summed PLL of ``n_rows`` rows and its gradient."""

    def objective(w):
        value, grad = pll_and_gradient(w)
        d = w - prior_mean
        return (
            (-value + 0.5 * float(d @ d) / stddev**2) / n_rows,
            (-grad + d / stddev**2) / n_rows,
        )

    return objective


def fit_weights(
    model: MarkovNetwork | FeatureSet,
    rows: Rows,
    stddev: float = 1.0,
    max_iter: int = 100,
    tol: float = 1e-10,
    init: npt.ArrayLike | None = None,
    prior_mean: npt.ArrayLike | None = None,
    counts: npt.ArrayLike | None = None,
) -> MarkovNetwork:
    """Maximise pseudo-likelihood with a Gaussian prior by L-BFGS.

    Parameters
    ----------
    model:
        A :class:`MarkovNetwork` or :class:`FeatureSet`; its features are kept, its weights are
        the starting point unless ``init`` is given.
    rows:
        Training rows (array, ``Batch``, or a ``RowReservoir`` whose ``rows`` are used).
    stddev:
        Standard deviation of the zero-mean (or ``prior_mean``) Gaussian prior on each weight.
    max_iter:
        L-BFGS iterations at most (default 100, as in the DN2MN paper).
    tol:
        Relative objective change at which L-BFGS stops.
    counts:
        Optional weight of each row (e.g. distinct rows with their multiplicities): the fit is
        that of each row repeated ``counts`` times, ``N`` their sum, at the cost of the given
        rows only (same reach lists and bits as the repeated rows).
    """
    model = _as_model(model)
    rows = _as_rows(rows, model.schema)
    fs = model.features
    w0 = _vector(init, fs.n_features, "init", 0.0) if init is not None else fs.weights.copy()
    if max_iter < 1 or fs.n_features == 0:
        return model.with_weights(w0)

    return lbfgs(model, _objective(fs, rows, stddev, prior_mean, counts), w0, max_iter, tol)


def lbfgs(model: MarkovNetwork, fun, w0: np.ndarray, max_iter: int, tol: float) -> MarkovNetwork:
    """``model`` with the weights that minimise ``fun`` (value and gradient) by L-BFGS from
    ``w0``, and a ``fit_info`` dict saying how the optimisation ended."""
    w, info = minimise(fun, w0, max_iter, tol)
    out = model.with_weights(w)
    out.fit_info = info
    return out


def minimise(
    fun, w0: np.ndarray, max_iter: int, tol: float, max_evaluations: int | None = None
) -> tuple[np.ndarray, dict]:
    """The weights that minimise ``fun`` (value and gradient) by L-BFGS
    (:mod:`streammn.network.lbfgs`) from ``w0`` in at most ``max_iter`` iterations (and
    ``max_evaluations`` calls of ``fun``), and how the optimisation ended (``iterations``,
    ``evaluations``, ``objective``, ``converged``, ``message``)."""
    # the search's own vector work is a few level-1 BLAS calls per step: threaded BLAS only
    # spins against numba's threads (it cost a third of a plants fit), so it runs on one thread
    with threadpool_limits(limits=1, user_api="blas"):
        return lbfgs_minimise(
            fun, w0, max_iter, tol, gtol=1e-10, memory=10, max_evaluations=max_evaluations
        )


class StochasticPLL:
    """Mini-batch AdaGrad on the pseudo-likelihood, for weights that follow a stream.

    Parameters
    ----------
    model:
        The :class:`MarkovNetwork` (or :class:`FeatureSet`) whose weights are learned; its
        current weights are the warm start.
    stddev:
        Gaussian prior standard deviation; the prior counts once for all rows seen so far.
    learning_rate:
        AdaGrad step size (default 0.5).
    eps:
        AdaGrad's denominator guard.

    Notes
    -----
    ``partial_fit(rows)`` takes one step on the batch's mean gradient; ``model`` holds the
    current weights.
    """

    def __init__(
        self,
        model: MarkovNetwork | FeatureSet,
        stddev: float = 1.0,
        learning_rate: float = 0.5,
        eps: float = 1e-8,
    ):
        if not stddev > 0 or not learning_rate > 0:
            raise WeightLearningError("stddev and learning_rate must be positive")
        self.model = _as_model(model)
        self.stddev = float(stddev)
        self.learning_rate = float(learning_rate)
        self.eps = float(eps)
        self.n_seen = 0
        self._g2 = np.zeros(self.model.n_features)

    def partial_fit(self, rows: Rows) -> "StochasticPLL":
        rows = _as_rows(rows, self.model.schema)
        self.n_seen += rows.shape[0]
        fs = self.model.features
        value, grad = reach_lists.pll_and_gradient(fs, rows)
        g = -grad / rows.shape[0] + fs.weights / (self.stddev**2 * self.n_seen)
        self._g2 += g * g
        w = fs.weights - self.learning_rate * g / (np.sqrt(self._g2) + self.eps)
        self.model = self.model.with_weights(w)
        return self

    def __repr__(self) -> str:
        return (
            f"StochasticPLL(stddev={self.stddev}, learning_rate={self.learning_rate}, "
            f"eps={self.eps}, n_features={self.model.n_features}, n_seen={self.n_seen})"
        )
