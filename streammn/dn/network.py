"""Dependency networks: one conditional distribution P(X_i | x_-i) per variable.

Each CPD is a :class:`~streammn.features.FeatureSet` whose features are read as a log-linear
conditional: ``P(X_i = a | x_-i) ∝ exp(sum of the weights of the CPD's features that hold with
x_i = a)``. A decision-tree CPD written as DEFAULT features (one per leaf and target value,
weight = log leaf probability) is already normalised, so the sum is the log probability itself.
DN2MN (:mod:`streammn.dn.conversion`) consumes exactly this representation.

A DN learned by DTSL also keeps its trees (``trees``, a :class:`~streammn.trees.forest.Forest`
whose tree ``i`` the DEFAULT features of ``cpds[i]`` were generated from); scoring then routes rows
through the trees instead of evaluating features, with the same result. The trees also carry the
marginals: the leaves of tree ``i`` partition every row it counted, so their target counts summed
are the counts of ``X_i`` (:meth:`DependencyNetwork.marginal_counts`), which is what DN2MN's
product-of-marginals base distribution needs when no training rows are at hand (a stream).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np
import numpy.typing as npt

from streammn.network import loglinear
from streammn.features import FeatureSet
from streammn.schema import Schema
from streammn.errors import ModelError, NoRowsError

if TYPE_CHECKING:
    from streammn.trees.forest import Forest


class DependencyNetwork:
    """A schema and one feature-set CPD per variable (optionally with the trees behind them,
    or with ``counts``, each variable's value counts, for a DN whose conditionals are not all
    trees)."""

    def __init__(
        self,
        schema: Schema,
        cpds: Sequence[FeatureSet],
        trees: Forest | None = None,
        counts: Sequence[npt.ArrayLike] | None = None,
    ):
        if len(cpds) != schema.n_vars:
            raise ModelError(f"expected {schema.n_vars} CPDs, got {len(cpds)}")
        for i, cpd in enumerate(cpds):
            if cpd.schema != schema:
                raise ModelError(f"CPD {i} is over a different schema")
        if trees is not None and trees.schema != schema:
            raise ModelError("trees are over a different schema")
        self.schema = schema
        self.cpds = list(cpds)
        self.trees = trees
        self._counts = None if counts is None else [np.asarray(c, dtype=np.float64) for c in counts]
        self._all = FeatureSet.concat(schema, self.cpds)
        sizes = np.array([c.n_features for c in self.cpds], dtype=np.int64)
        self._index = (
            np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
            np.arange(self._all.n_features, dtype=np.int64),
        )

    @property
    def n_features(self) -> int:
        return self._all.n_features

    def marginal_counts(self) -> list[np.ndarray] | None:
        """Counts of each variable's values summed over its tree's leaves, or the ``counts``
        given (``None`` with neither, e.g. a DN read from a Libra ``.dn`` file)."""
        if self.trees is None:
            return self._counts
        counts = self.trees.counts
        return [
            counts[self.trees.leaves(i), :d].sum(axis=0)
            for i, d in enumerate(self.schema.cardinalities)
        ]

    def log_conditional(self, rows: np.ndarray, i: int) -> np.ndarray:
        """Normalised ``log P(X_i = a | x_-i)`` for each row and value: shape (n, card_i)."""
        i = self.schema.variable_index(i)
        cpd = self.cpds[i]
        logits = loglinear.conditional_logits(
            cpd, self.schema.rows_of(rows), i, features=np.arange(cpd.n_features)
        )
        m = logits.max(axis=1, keepdims=True)
        return logits - m - np.log(np.exp(logits - m).sum(axis=1, keepdims=True))

    def pll_terms(self, rows: np.ndarray) -> np.ndarray:
        """``log P(x_i | x_-i)`` for every row and variable: shape (n_rows, n_vars)."""
        rows = self.schema.rows_of(rows)
        if self.trees is not None:
            return self.trees.leaf_log_prob(rows)
        return loglinear.pll_terms(self._all, rows, index=self._index)

    def pll(self, rows: np.ndarray) -> float:
        """Pseudo-log-likelihood per example (mean over rows of the sum over variables)."""
        terms = self.pll_terms(rows)
        if not terms.shape[0]:
            raise NoRowsError("no rows to score: the pseudo-log-likelihood is a mean over rows")
        return float(terms.sum(axis=1).mean())

    def __repr__(self) -> str:
        return f"DependencyNetwork({self.schema.n_vars} variables, {self.n_features} features)"
