"""The indicator coding of logistic-regression conditionals, and their dependency-network CPDs.

Every variable ``X_i`` is predicted from the indicators of the other variables' values, one
logistic regression per variable, all of them sharing one design matrix:

- **inputs**: a column per variable ``j`` and value ``v = 1 .. d_j - 1`` holding ``[x_j = v]``
  (reference coding: value 0 is the intercept's, so no column is redundant with the bias and
  an L1 fit has one optimum to find, as scikit-learn's has on the same matrix);
- **outputs**: a binary variable has one logit, of value 1 against value 0 (binary logistic
  regression, scikit-learn's parametrisation); a variable with ``d > 2`` values has ``d`` logits
  (softmax, scikit-learn's multinomial).

So the logits of every conditional at once are ``Z @ W + b`` with ``Z`` the ``(n, n_inputs)``
indicators, ``W`` an ``(n_inputs, n_outputs)`` matrix whose blocks on the diagonal (a variable's
own inputs for its own outputs) are held at zero, and ``b`` the intercepts. One matrix product
scores every conditional, and one more gives every gradient.

As a dependency-network CPD (:mod:`streammn.dn`) the regression of ``X_i`` is log-linear in
conjunctive features: the intercept of output ``a`` is the feature ``X_i = a``, the weight
``W[(j, v), a]`` the feature ``X_i = a ∧ X_j = v``. DN2MN (:mod:`streammn.dn.conversion`) converts
them with the same closed form as tree leaves (the normaliser cancels).
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from streammn.features import FeatureSet
from streammn.schema import Schema


@nb.njit(cache=True, nogil=True)
def _binary_outputs(logits, targets, columns, variables, residual, log_probs, scoring):
    """Sigmoid residuals and, when ``scoring``, log probabilities of the binary outputs
    ``columns`` (variables ``variables``), row by row: one pass where numpy takes five
    temporaries (the logarithm is a third of the work, so it is skipped when not asked for)."""
    for r in range(logits.shape[0]):
        for k in range(columns.size):
            c = columns[k]
            z = logits[r, c]
            e = math.exp(-abs(z))
            p = 1.0 / (1.0 + e) if z >= 0 else e / (1.0 + e)  # sigmoid(z)
            residual[r, c] = p - targets[r, c]
            if scoring:
                signed = -z if targets[r, c] > 0 else z  # the loss is softplus(signed)
                log_probs[r, variables[k]] = -(max(signed, 0.0) + math.log1p(e))


@nb.njit(cache=True, nogil=True)
def _log_probs(logits, rows, variables, block_start, out_val, log_probs):
    """``log P(x_i | x_-i)`` of ``rows`` for each variable ``variables[k]`` from its block of
    logits ``block_start[k] .. block_start[k + 1]`` (columns of ``logits``, values
    ``out_val``) into ``log_probs[:, k]``: minus a softplus for a block of one column
    (binary: the logit of value 1), the log softmax of the observed value for a longer one."""
    for k in range(variables.size):
        lo, hi, i = block_start[k], block_start[k + 1], variables[k]
        for r in range(logits.shape[0]):
            if hi - lo == 1:
                z = logits[r, lo]
                signed = -z if rows[r, i] == 1 else z
                log_probs[r, k] = -(max(signed, 0.0) + math.log1p(math.exp(-abs(signed))))
            else:
                top = logits[r, lo]
                for c in range(lo + 1, hi):
                    top = max(top, logits[r, c])
                norm, observed = 0.0, 0.0
                for c in range(lo, hi):
                    norm += math.exp(logits[r, c] - top)
                    if out_val[c] == rows[r, i]:
                        observed = logits[r, c]
                log_probs[r, k] = observed - top - math.log(norm)


class Coding:
    """Input and output columns of the logistic conditionals of ``schema``'s variables.

    Attributes
    ----------
    in_var, in_val : arrays over input columns: the variable and value each indicates.
    in_start : ``in_start[j] .. in_start[j + 1]`` are variable ``j``'s input columns.
    out_var, out_val : arrays over output columns: the variable and the value each is the
        logit of.
    out_start : ``out_start[i] .. out_start[i + 1]`` are variable ``i``'s output columns.
    free : ``(n_inputs, n_outputs)`` bool, False where an input is the output's own variable.
    """

    def __init__(self, schema: Schema):
        self.schema = schema
        cards = schema.cardinalities.astype(np.int64)
        self.in_var = np.repeat(np.arange(cards.size), cards - 1)
        self.in_val = np.concatenate([np.arange(1, d) for d in cards]).astype(np.int64)
        self.in_start = np.concatenate([[0], np.cumsum(cards - 1)]).astype(np.int64)
        outs = np.where(cards == 2, 1, cards)
        self.out_var = np.repeat(np.arange(cards.size), outs)
        self.out_val = np.concatenate([[1] if d == 2 else np.arange(d) for d in cards]).astype(
            np.int64
        )
        self.out_start = np.concatenate([[0], np.cumsum(outs)]).astype(np.int64)
        self.free = self.in_var[:, None] != self.out_var[None, :]
        self.binary = cards == 2
        self.binary_vars = np.flatnonzero(self.binary)
        self.binary_columns = self.out_start[self.binary_vars]

    @property
    def n_inputs(self) -> int:
        return self.in_var.size

    @property
    def n_outputs(self) -> int:
        return self.out_var.size

    @property
    def softmax_bound(self) -> float:
        """A bound on the curvature of one conditional's log-loss in its logits: 1/4 for a
        binary (sigmoid) output, 1/2 for a softmax block."""
        return 0.25 if self.binary.all() else 0.5

    def indicators(self, rows: np.ndarray) -> np.ndarray:
        """The ``(n, n_inputs)`` input indicators of validated ``rows``."""
        return (rows[:, self.in_var] == self.in_val).astype(np.float64)

    def targets(self, rows: np.ndarray) -> np.ndarray:
        """The ``(n, n_outputs)`` 0/1 targets: output ``(i, a)`` is ``[x_i = a]``."""
        return (rows[:, self.out_var] == self.out_val).astype(np.float64)

    def residuals_and_log_probs(
        self, logits: np.ndarray, targets: np.ndarray, scoring: bool = True
    ):
        """For the ``(n, n_outputs)`` logits of rows with 0/1 ``targets``: the derivative of each
        row's log-loss in each logit (predicted minus observed) and the ``(n, n_vars)`` log
        probabilities of the observed values (with ``scoring``; else left unset: a fit
        scores only now and then)."""
        residual = np.empty_like(logits)
        log_probs = np.empty((logits.shape[0], self.schema.n_vars))
        _binary_outputs(
            logits, targets, self.binary_columns, self.binary_vars, residual, log_probs, scoring
        )
        for i in np.flatnonzero(~self.binary):
            lo, hi = self.out_start[i], self.out_start[i + 1]
            z, y = logits[:, lo:hi], targets[:, lo:hi]
            shifted = z - z.max(axis=1, keepdims=True)
            log_p = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
            residual[:, lo:hi] = np.exp(log_p) - y
            log_probs[:, i] = (log_p * y).sum(axis=1)
        return residual, log_probs

    def log_conditionals(
        self,
        rows: np.ndarray,
        weights: np.ndarray,
        bias: np.ndarray,
        variables: np.ndarray | None = None,
    ) -> np.ndarray:
        """``log P(x_i | x_-i)`` of validated ``rows`` for each of ``variables`` (default:
        every variable): ``(n, len(variables))``. Only those variables' logits are computed
        (a prequential score asks for the few whose conditional is a regression)."""
        variables = np.arange(self.schema.n_vars) if variables is None else variables
        variables = np.asarray(variables, dtype=np.int64)
        starts, stops = self.out_start[variables], self.out_start[variables + 1]
        columns = np.concatenate([np.arange(a, b) for a, b in zip(starts, stops)] or [[]])  # type: ignore[list-item]
        columns = columns.astype(np.int64)
        logits = self.indicators(rows) @ weights[:, columns] + bias[columns]
        block_start = np.concatenate([[0], np.cumsum(stops - starts)]).astype(np.int64)
        log_probs = np.empty((rows.shape[0], variables.size))
        _log_probs(logits, rows, variables, block_start, self.out_val[columns], log_probs)
        return log_probs

    def cpds(self, weights: np.ndarray, bias: np.ndarray) -> list[FeatureSet]:
        """Variable ``i``'s regression as log-linear conjunctive features (module doc): the
        intercepts, then a pairwise feature per nonzero weight."""
        out = []
        for i in range(self.schema.n_vars):
            lo, hi = self.out_start[i], self.out_start[i + 1]
            inputs, outputs = np.nonzero(weights[:, lo:hi])
            n_bias, n_pair = hi - lo, inputs.size
            w = np.concatenate([bias[lo:hi], weights[inputs, lo + outputs]])
            ptr = np.concatenate([np.arange(n_bias + 1), n_bias + 2 * np.arange(1, n_pair + 1)])
            var = np.empty(n_bias + 2 * n_pair, dtype=np.int32)
            val = np.empty_like(var)
            var[:n_bias], val[:n_bias] = i, self.out_val[lo:hi]
            target = self.out_val[lo + outputs]
            other_var, other_val = self.in_var[inputs], self.in_val[inputs]
            first = i < other_var  # conditions in variable order
            var[n_bias::2] = np.where(first, i, other_var)
            val[n_bias::2] = np.where(first, target, other_val)
            var[n_bias + 1 :: 2] = np.where(first, other_var, i)
            val[n_bias + 1 :: 2] = np.where(first, other_val, target)
            eq = np.ones(var.size, dtype=np.bool_)
            out.append(FeatureSet(self.schema, w, ptr, var, val, eq, validate=False))
        return out
