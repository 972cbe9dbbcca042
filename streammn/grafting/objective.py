"""The group-sparse objective of edge grafting (paper Eq. 2) and its minimisation by L-BFGS.

``obj(w) = L(w) + sum_g lambda * d_g * ||w_g||_2 + lambda2 * ||w||_2^2`` over the active groups
(every node table and every active edge table; ``d_g`` is the number of cells of the group).
``L`` is on the per-row scale, so ``lambda`` means the same at any data size:

- ``"likelihood"``: ``L(w) = -w . E_data[f] + log Z(w)``, the mean negative log-likelihood; its
  gradient ``E_model[f] - E_data[f]`` takes the model marginals from loopy BP and ``log Z`` is
  the Bethe estimate (exact on trees), or both from enumeration when the model is small enough
  (``exact=True``). ``E_data`` comes from the sufficient statistics only.
- ``"pseudo"``: the mean negative log pseudo-likelihood over a row sample (faster: no inference,
  one pass over the rows per evaluation).

The group norm is not differentiable at zero. We smooth it, ``||w_g|| ~ sqrt(||w_g||^2 +
eps^2) - eps``, and keep scipy's L-BFGS-B, rather than take proximal steps: grafting only
optimises groups that are active, i.e. whose gradient at zero violated the optimality condition
(node groups are essentially never zero), so their optimum lies away from zero where the
smoothing error is below ``lambda * d_g * eps``; L-BFGS's curvature model then gives far fewer
BP runs than a first-order proximal method. Sparsity of the structure comes from the activation
test, not from exact zeros inside the active set.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
from threadpoolctl import threadpool_limits

from streammn.grafting.bp import BPResult, belief_propagation
from streammn.grafting.conditionals import columns, pseudo_loglik_pass, shifted_exp
from streammn.grafting.inference import ExactInference
from streammn.grafting.mrf import PairwiseLayout
from streammn.errors import GraftingError

OBJECTIVES = ("likelihood", "pseudo")


def pseudo_loglik(layout: PairwiseLayout, theta, rows, grad: np.ndarray | None = None):
    """``log P(x_v | x_-v)`` terms, shape (n_rows, n_vars); adds the gradient of their
    negative sum to ``grad`` when given."""
    cols = columns(rows)
    terms = np.empty((cols.shape[1], cols.shape[0]))
    _pseudo_pass(layout, theta, cols, grad, terms)
    return terms


def _pseudo_pass(layout: PairwiseLayout, theta, cols, grad, terms) -> float:
    theta = np.ascontiguousarray(theta, dtype=np.float64)
    want = grad is not None
    return pseudo_loglik_pass(
        cols,
        layout.cards,
        layout.uoff,
        theta,
        shifted_exp(layout, theta),
        layout.edges,
        layout.eoff,
        layout.adj_ptr,
        layout.adj_edge,
        want,
        grad if want else np.zeros(0),
        terms,
    )


class GraftingObjective:
    """Value and gradient of Eq. 2 over the active set described by ``layout``.

    Parameters
    ----------
    layout : PairwiseLayout
        Active structure.
    data_marginals : array
        ``E_data[f]`` in the flat layout: node marginals then active-edge pairwise marginals
        (used by the likelihood objective).
    lambda_, lambda2 : float
        Group-L1 and squared-L2 strengths (per-row scale).
    kind : {"likelihood", "pseudo"}
        Data term; ``"pseudo"`` needs ``rows``.
    rows : uint8 array or None
        Rows for the pseudo-likelihood.
    eps : float, default 1e-4
        Smoothing of the group norm at zero.
    damping, tol, max_iter : BP settings.
    messages : array or None
        BP messages to warm-start from; every evaluation starts from the previous one's
        messages (nearby parameters, so BP needs few sweeps).
    exact : bool, default False
        Likelihood: marginals and ``log Z`` by enumerating the joint states instead of BP.
    """

    def __init__(
        self,
        layout: PairwiseLayout,
        data_marginals,
        lambda_: float,
        lambda2: float,
        kind: str = "likelihood",
        rows=None,
        eps: float = 1e-4,
        damping: float = 0.5,
        tol: float = 1e-6,
        max_iter: int = 200,
        messages: np.ndarray | None = None,
        exact: bool = False,
    ):
        if kind not in OBJECTIVES:
            raise GraftingError(f"objective must be one of {OBJECTIVES}, got {kind!r}")
        if kind == "pseudo" and (rows is None or len(rows) == 0):
            raise GraftingError("the pseudo-likelihood objective needs rows")
        self.layout = layout
        self.data = np.ascontiguousarray(data_marginals, dtype=np.float64)
        self.lambda_, self.lambda2, self.kind, self.eps = lambda_, lambda2, kind, eps
        self.exact = exact
        self.rows = None if rows is None else np.ascontiguousarray(rows, dtype=np.uint8)
        self._cols = None if rows is None else columns(self.rows)
        self.bp: dict[str, Any] = dict(damping=damping, tol=tol, max_iter=max_iter)
        starts, sizes = layout.group_bounds()
        self._starts = starts
        self._scale = lambda_ * sizes.astype(np.float64)  # lambda * d_g
        self._group_of = np.repeat(np.arange(sizes.shape[0]), sizes)
        self.messages = messages  # BP messages, carried from one evaluation to the next

    def penalty(self, theta) -> tuple[float, np.ndarray]:
        """Smoothed group-L1 plus squared L2: value and gradient."""
        sq = np.add.reduceat(theta * theta, self._starts) if theta.size else np.zeros(0)
        norm = np.sqrt(sq + self.eps**2)
        value = float((self._scale * (norm - self.eps)).sum() + self.lambda2 * (theta @ theta))
        grad = (self._scale / norm)[self._group_of] * theta + 2.0 * self.lambda2 * theta
        return value, grad

    def data_term(self, theta) -> tuple[float, np.ndarray, BPResult | None]:
        """``L(w)`` and its gradient (and the BP result for the likelihood)."""
        if self.kind == "likelihood" and self.exact:
            ex = ExactInference(self.layout, theta)
            return ex.log_z - float(theta @ self.data), ex.marginals - self.data, None
        if self.kind == "likelihood":
            res = belief_propagation(self.layout, theta, messages=self.messages, **self.bp)
            self.messages = res.messages
            return res.log_z - float(theta @ self.data), res.marginals - self.data, res
        grad = np.zeros(self.layout.size)
        total = _pseudo_pass(self.layout, theta, self._cols, grad, np.empty((0, 0)))
        assert self.rows is not None  # the pseudo-likelihood's rows
        n = self.rows.shape[0]
        return -total / n, grad / n, None

    def __call__(self, theta) -> tuple[float, np.ndarray]:
        value, grad, _ = self.data_term(theta)
        pv, pg = self.penalty(theta)
        return value + pv, grad + pg


class Abandoned(Exception):
    """Raised out of :func:`minimise` when its ``should_stop`` says so (a stop request): the
    optimisation in flight is abandoned, not finished."""


def noise_tolerances(
    n_rows: int, n_vars: int, value: float, tol: float, smooth: bool = True
) -> tuple[float, float]:
    """L-BFGS-B's ``(gtol, ftol)`` for an objective that is a mean over ``n_rows`` rows, scaled
    to its sampling noise (``ftol`` is relative to ``|value|``, L-BFGS-B's convention).

    A gradient cell is a mean of residuals in ``[-1, 1]``, with sampling standard deviation at
    most about ``0.5 / sqrt(n_rows)``: a ``smooth`` objective (no group L1) is fitted until the
    gradient's largest cell is below ``tol`` times that (``gtol``); going further fits the
    sample's noise, not the stream, and on a stream the next update starts from here. Its
    decrease test is set where it cannot stop the fit first: below what a gradient of ``gtol``
    in every cell of ``n_vars`` tables would still give at unit curvature.

    The group-L1 objective is not smooth at zero (a group held there keeps a gradient of norm
    up to ``lambda d_g``, and the smoothed norm's curvature there is ``1 / eps``), so its
    gradient test is never met; it stops when one iteration lowers it by less than ``tol``
    times its own sampling noise, ``0.5 sqrt(n_vars / n_rows)`` (a row's summed log
    conditionals spread by about ``0.5 sqrt(n_vars)``): from a warm start on statistics that
    moved little, after a few iterations."""
    root = math.sqrt(max(int(n_rows), 1))
    gtol = tol * 0.5 / root
    if smooth:
        ftol = 0.5 * gtol * gtol * max(n_vars, 1) / max(abs(value), 1.0)
    else:
        ftol = tol * 0.5 * math.sqrt(max(n_vars, 1)) / root / max(abs(value), 1.0)
    return gtol, ftol


def minimise(
    objective: GraftingObjective,
    theta0,
    max_iter: int = 100,
    gtol: float = 1e-5,
    ftol: float = 1e-7,
    should_stop=None,
) -> tuple[np.ndarray, float, int]:
    """Minimise ``objective`` from ``theta0`` with L-BFGS-B; returns ``(theta, value, iters)``.
    ``ftol`` is the relative decrease below which it stops (each grafting step starts from the
    previous optimum, so a loose tolerance loses little; :func:`noise_tolerances`).
    ``should_stop``: a function called before every evaluation; when it returns True the fit
    raises :class:`Abandoned` (a stop request must not wait for the fit to end).

    BLAS runs single-threaded here: L-BFGS-B's vector operations are far too small to gain from
    threads, and a threaded BLAS on a busy machine made them 20x slower than the BP runs.
    """
    from scipy.optimize import minimize  # 0.27 s to import: not at `streammn learn` start-up

    function: Callable[[Any], Any] = objective
    if should_stop is not None:

        def function(theta):
            if should_stop():
                raise Abandoned
            return objective(theta)

    with threadpool_limits(limits=1, user_api="blas"):
        res = minimize(
            function,
            np.asarray(theta0, dtype=np.float64),
            jac=True,
            method="L-BFGS-B",
            options={"maxiter": int(max_iter), "gtol": gtol, "ftol": ftol},
        )
    return res.x, float(res.fun), int(res.nit)
