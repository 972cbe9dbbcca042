"""L1-regularised logistic conditionals fitted on rows in memory, penalties chosen on held-out rows.

The objective of variable ``i`` is its mean log-loss plus ``lam_i`` times the L1 norm of its
weights (intercepts unpenalised): scikit-learn's ``LogisticRegression(penalty='l1', C)`` on the
same indicator matrix with ``lam = 1 / (C n)``, so the optimum is the same. Every variable's
problem shares the design matrix (:mod:`streammn.logistic.coding`) and the objectives are
separable, so they are solved together: one proximal-gradient (FISTA) iteration is two matrix
products over all conditionals, the step is one over a bound on the curvature
(``softmax_bound`` times the largest eigenvalue of the indicators' Gram matrix), and the
momentum restarts when it stops helping (O'Donoghue & Candès' gradient restart), which makes
FISTA converge linearly on these strongly convex-in-practice problems.

The penalty. ``lam`` is chosen per variable on held-out rows: a path from the smallest penalty
that zeroes every weight of the variable down to ``PATH_RATIO`` of it in ``PATH_STEPS``
geometric steps, each fit warm-started from the last, and each variable keeps the penalty whose
fit scores its held-out rows best. The final fit is on every row, the penalty scaled by
``sqrt(n_fit / n_all)`` (the usual ``1/sqrt(n)`` rate of a lasso penalty). Measured on jester
(100 binary variables, 9,000 rows) one penalty for all variables reached -48.60 test PLL per
row for the DN at its best, scikit-learn's L1 DN -48.63.
"""

from __future__ import annotations

import numpy as np

from streammn.logistic.coding import Coding

PATH_STEPS = 8
PATH_RATIO = 1e-3
TOLERANCE = 1e-7  # relative objective change over CHECK_EVERY iterations
CHECK_EVERY = 10
MAX_ITER = 2000


def soft_threshold(values: np.ndarray, threshold) -> np.ndarray:
    return np.sign(values) * np.maximum(np.abs(values) - threshold, 0.0)


class Problem:
    """The design of ``rows`` under ``coding``: indicators, targets and the step bound."""

    def __init__(self, coding: Coding, rows: np.ndarray):
        self.coding = coding
        self.n = rows.shape[0]
        indicators = coding.indicators(rows)
        self.mean = indicators.mean(axis=0) if self.n else np.zeros(coding.n_inputs)
        self.inputs = indicators - self.mean
        self.targets = coding.targets(rows)
        self._lipschitz = None

    def centred(self, weights, bias):
        """The intercepts of ``(weights, bias)`` for the centred inputs (the same logits)."""
        return bias + self.mean @ weights

    def uncentred(self, weights, centred_bias):
        return centred_bias - self.mean @ weights

    @property
    def lipschitz(self) -> float:
        """A bound on the curvature of the mean log-loss in ``(W, b)``."""
        if self._lipschitz is None:  # centred inputs: the intercept's direction is apart
            gram = self.inputs.T @ self.inputs / max(self.n, 1)
            self._lipschitz = self.coding.softmax_bound * float(np.linalg.eigvalsh(gram)[-1])
        return max(self._lipschitz, self.coding.softmax_bound)

    def gradient(self, weights, centred_bias, scoring: bool = True):
        """The gradient of the mean log-loss in the weights and the intercepts (for the
        centred inputs), and the ``(n, n_vars)`` log probabilities of the rows (set only
        with ``scoring``)."""
        logits = self.inputs @ weights + centred_bias
        residual, log_probs = self.coding.residuals_and_log_probs(logits, self.targets, scoring)
        residual /= self.n
        grad_w = self.inputs.T @ residual
        grad_w[~self.coding.free] = 0.0
        return grad_w, residual.sum(axis=0), log_probs

    def losses(self, weights, bias) -> np.ndarray:
        """Mean log-loss of each variable: ``(n_vars,)``."""
        logits = self.inputs @ weights + self.centred(weights, bias)
        return -self.coding.residuals_and_log_probs(logits, self.targets)[1].mean(axis=0)


def fit_l1(problem: Problem, lam_out: np.ndarray, weights=None, bias=None, tol=TOLERANCE):
    """The L1 optimum of every conditional, ``lam_out`` the penalty of each output column (its
    variable's); FISTA with gradient restart from ``(weights, bias)`` (default zero). Returns
    ``(weights, bias, iterations)``."""
    coding = problem.coding
    if weights is None:
        weights = np.zeros((coding.n_inputs, coding.n_outputs))
        bias = np.zeros(coding.n_outputs)
    bias = problem.centred(weights, bias)
    step = 1.0 / problem.lipschitz
    threshold = step * np.asarray(lam_out, dtype=np.float64)[None, :]
    look_w, look_b, momentum = weights.copy(), bias.copy(), 1.0
    previous = np.inf
    for iteration in range(1, MAX_ITER + 1):
        checks = iteration % CHECK_EVERY == 0
        grad_w, grad_b, log_probs = problem.gradient(look_w, look_b, scoring=checks)
        new_w = soft_threshold(look_w - step * grad_w, threshold)
        new_b = look_b - step * grad_b
        if checks:
            objective = -log_probs.sum() / problem.n + float((np.abs(look_w) * lam_out).sum())
            if abs(previous - objective) <= tol * max(abs(objective), 1.0):
                return new_w, problem.uncentred(new_w, new_b), iteration
            previous = objective
        next_momentum = (1.0 + np.sqrt(1.0 + 4.0 * momentum * momentum)) / 2.0
        if ((look_w - new_w) * (new_w - weights)).sum() + (
            (look_b - new_b) * (new_b - bias)
        ).sum() > 0:
            next_momentum, look_w, look_b = 1.0, new_w, new_b  # restart: momentum went uphill
        else:
            beta = (momentum - 1.0) / next_momentum
            look_w = new_w + beta * (new_w - weights)
            look_b = new_b + beta * (new_b - bias)
        weights, bias, momentum = new_w, new_b, next_momentum
    return weights, problem.uncentred(weights, bias), MAX_ITER


def intercepts_only(problem: Problem) -> np.ndarray:
    """The intercepts of each conditional with no other input: log odds (binary) or log
    probabilities (softmax) of the smoothed marginal frequencies."""
    coding = problem.coding
    freq = (problem.targets.sum(axis=0) + 0.5) / (problem.n + 1.0)
    return np.where(coding.binary[coding.out_var], np.log(freq / (1.0 - freq)), np.log(freq))


def largest_penalties(problem: Problem) -> np.ndarray:
    """Per variable, the smallest penalty under which all its weights are zero: the largest
    gradient of its loss in any weight at the intercept-only fit."""
    coding = problem.coding
    bias = intercepts_only(problem)
    grad_w, _, _ = problem.gradient(
        np.zeros((coding.n_inputs, coding.n_outputs)), bias, scoring=False
    )
    per_output = np.abs(grad_w).max(axis=0)
    return np.maximum.reduceat(per_output, coding.out_start[:-1])


def fit_with_held_out(coding: Coding, rows: np.ndarray, held_out: np.ndarray):
    """Each variable's L1 conditional on all ``rows``, its penalty chosen on the ``held_out``
    rows (a boolean mask) along the path of the module docstring, from zero weights (so the
    fit is a function of the rows alone). Returns ``(weights, bias, lam, held_out_loss)``:
    ``lam`` per variable, and ``held_out_loss`` each variable's mean log-loss on the held-out
    rows at its chosen penalty (fitted without them).
    """
    fit, judge = Problem(coding, rows[~held_out]), Problem(coding, rows[held_out])
    top = np.maximum(largest_penalties(fit), 1e-8)
    weights, bias = np.zeros((coding.n_inputs, coding.n_outputs)), intercepts_only(fit)
    best_loss = np.full(coding.schema.n_vars, np.inf)
    best_lam = top.copy()
    best_w, best_b = weights.copy(), bias.copy()
    for ratio in np.geomspace(1.0, PATH_RATIO, PATH_STEPS):
        lam = top * ratio
        weights, bias, _ = fit_l1(fit, lam[coding.out_var], weights, bias, tol=1e-5)
        loss = judge.losses(weights, bias)
        better = loss < best_loss
        best_loss[better], best_lam[better] = loss[better], lam[better]
        columns = better[coding.out_var]
        best_w[:, columns], best_b[columns] = weights[:, columns], bias[columns]
    everything = Problem(coding, rows)
    lam = best_lam * np.sqrt(fit.n / max(everything.n, 1))
    weights, bias, _ = fit_l1(everything, lam[coding.out_var], best_w, best_b)
    return weights, bias, lam, best_loss
