"""MarkovNetwork: a log-linear model over weighted conjunctive features.

``log P(x) = sum of the weights of the features x satisfies - log Z``. The features are a
:class:`~streammn.features.FeatureSet` (flat arrays feature -> conditions) plus the index
variable -> features that mention it, so that scoring, conditionals, pseudo-likelihood and Gibbs
sweeps are numba kernels (:mod:`streammn.network.loglinear`, :mod:`streammn.inference.gibbs`). Exact
normalisation by enumeration is offered for small models (tests, toy problems) and refused
clearly above a configurable number of joint states.
"""

from __future__ import annotations

import itertools

from typing import TYPE_CHECKING, Iterable

import numpy as np
import numpy.typing as npt

from streammn.network import loglinear
from streammn.features import FeatureSet
from streammn.schema import Rows, Schema, require_observed
from streammn.errors import EnumerationTooLarge, ModelError, NoRowsError

if TYPE_CHECKING:
    from pgmpy.models import DiscreteMarkovNetwork

DEFAULT_MAX_STATES = 2**20  # 20 binary variables


class MarkovNetwork:
    """A Markov network ``P(x) ∝ exp(sum_f w_f f(x))`` over conjunctive features.

    Parameters
    ----------
    schema:
        The variables.
    features:
        A :class:`FeatureSet` over ``schema``; a feature contributes its weight when all its
        conditions hold. Features need not be merged; constant (empty) features are allowed.
    max_states:
        Largest number of joint states that :meth:`log_partition`, :meth:`joint` and
        :meth:`marginals` will enumerate (default ``2**20``).

    Examples
    --------
    Rain makes the grass wet: a feature rewarding both, and one penalising rain:

    >>> import numpy as np
    >>> from streammn import FeatureSet, MarkovNetwork, Schema
    >>> schema = Schema.from_cardinalities([2, 2], names=["rain", "wet"])
    >>> features = FeatureSet.from_features(schema, [
    ...     (2.0, [(0, 1, True), (1, 1, True)]),  # weight 2 when rain = 1 and wet = 1
    ...     (-1.0, [(0, 1, True)])])              # weight -1 when rain = 1
    >>> model = MarkovNetwork(schema, features)
    >>> model.log_score(np.array([[1, 1], [1, 0]], dtype=np.uint8))
    array([ 1., -1.])
    >>> model.conditional(np.array([[1, 0]], dtype=np.uint8), 1).round(3)  # P(wet | rain)
    array([[0.119, 0.881]])
    >>> np.exp(model.log_probability(model.all_states())).round(3)  # 00, 01, 10, 11
    array([0.197, 0.197, 0.072, 0.534])
    >>> model.edges()
    {(0, 1)}
    """

    def __init__(self, schema: Schema, features: FeatureSet, max_states: int = DEFAULT_MAX_STATES):
        if features.schema != schema:
            raise ModelError("features are over a different schema than the model")
        self.schema = schema
        self.features = features
        self.max_states = int(max_states)
        self._index: tuple[np.ndarray, np.ndarray] | None = None
        self._log_z: float | None = None
        self.fit_info: dict | None = None  # set by streammn.network.weights.fit_weights

    # structure ----------------------------------------------------------------------------
    @property
    def n_features(self) -> int:
        return self.features.n_features

    @property
    def weights(self) -> np.ndarray:
        return self.features.weights

    def with_weights(self, weights: npt.ArrayLike) -> "MarkovNetwork":
        """The same features with new weights."""
        return MarkovNetwork(self.schema, self.features.with_weights(weights), self.max_states)

    @property
    def index(self) -> tuple[np.ndarray, np.ndarray]:
        """CSR index variable -> features that mention it (computed once)."""
        if self._index is None:
            self._index = self.features.features_by_variable()
        return self._index

    def edges(self) -> set[tuple[int, int]]:
        """Pairs ``(i, j)``, ``i < j``, of variables that appear together in some feature."""
        i, j, _ = self.features.variable_pairs()
        return {(int(a), int(b)) for a, b in zip(i.tolist(), j.tolist())}

    def pair_strengths(self) -> list[tuple[float, int, int]]:
        """``(strength, i, j)`` for every edge, strongest first; strength is the summed
        absolute weight of the features that test both variables."""
        i, j, f = self.features.variable_pairs()
        n = self.schema.n_vars
        codes, inverse = np.unique(i * n + j, return_inverse=True)
        total = np.bincount(inverse, weights=np.abs(self.features.weights[f]), minlength=codes.size)
        order = np.argsort(-total, kind="stable")
        return [(float(total[k]), int(codes[k] // n), int(codes[k] % n)) for k in order]

    def strongest_features(self, pairs: Iterable[tuple[int, int]]) -> list[int]:
        """For each edge ``(i, j)``, ``i < j``, of ``pairs``, the feature testing both whose
        weight is largest in absolute value (the first such feature on a tie)."""
        pairs = list(pairs)  # read twice: a generator is welcome
        i, j, f = self.features.variable_pairs()
        n = self.schema.n_vars
        codes = i * n + j
        order = np.lexsort((f, -np.abs(self.features.weights[f]), codes))  # strongest first
        codes, f = codes[order], f[order]
        wanted = np.array([a * n + b for a, b in pairs], dtype=np.int64)
        at = np.searchsorted(codes, wanted)  # the first of each code: its strongest
        found = at < codes.size
        found[found] = codes[at[found]] == wanted[found]
        if not found.all():
            a, b = pairs[int(np.flatnonzero(~found)[0])]
            raise ModelError(f"no feature tests variables {a} and {b} together")
        return f[at].tolist()

    def markov_blanket(self, i: int) -> set[int]:
        """Variables sharing a feature with ``X_i``."""
        var_ptr, var_feats = self.index
        fs = self.features
        out = set()
        for f in var_feats[var_ptr[i] : var_ptr[i + 1]]:
            out.update(fs.var[fs.ptr[f] : fs.ptr[f + 1]].tolist())
        out.discard(i)
        return out

    # scoring ------------------------------------------------------------------------------
    # Every method taking rows validates them against the schema (a SchemaError naming the row
    # and column), except a Batch its source already validated: the kernels index tables by
    # value and would read out of bounds on a value beyond a cardinality.
    def log_score(self, rows: Rows) -> np.ndarray:
        """Unnormalised log probability of each row."""
        return loglinear.log_scores(self.features, self.schema.rows_of(rows))

    def log_conditional(self, rows: Rows, i: int | str) -> np.ndarray:
        """``log P(X_i = a | x_-i)`` for each row and value: shape (n, card_i)."""
        i = self.schema.variable_index(i)
        var_ptr, var_feats = self.index
        logits = loglinear.conditional_logits(
            self.features,
            self.schema.rows_of(rows),
            i,
            features=var_feats[var_ptr[i] : var_ptr[i + 1]],
        )
        m = logits.max(axis=1, keepdims=True)
        return logits - m - np.log(np.exp(logits - m).sum(axis=1, keepdims=True))

    def conditional(self, rows: Rows, i: int | str) -> np.ndarray:
        """``P(X_i = a | x_-i)`` for each row and value: shape (n, card_i)."""
        return np.exp(self.log_conditional(rows, i))

    def pll_terms(self, rows: Rows) -> np.ndarray:
        """``log P(x_i | x_-i)`` for every row and variable: shape (n_rows, n_vars).

        Uses the row-bitset kernel of :func:`streammn.network.loglinear.all_conditionals`. A model
        learned in missing mode scores complete rows only (a missing value would need the
        variable summed out of every conditional it enters): the dependency network of the
        trees scores incomplete rows (:mod:`streammn.trees.missing`).
        """
        rows = self.schema.rows_of(rows)
        if self.schema.missing:
            require_observed(rows, "a Markov network's pseudo-likelihood")
        return loglinear.all_conditionals(self.features, rows)[1]

    def pll(self, rows: Rows) -> float:
        """Pseudo-log-likelihood per example: mean over rows of ``sum_i log P(x_i | x_-i)``."""
        terms = self.pll_terms(rows)
        if not terms.shape[0]:
            raise NoRowsError("no rows to score: the pseudo-log-likelihood is a mean over rows")
        return float(terms.sum(axis=1).mean())

    def conditional_log_likelihoods(self, rows: Rows) -> np.ndarray:
        """Mean over rows of ``log P(x_i | x_-i)`` for each variable i: shape (n_vars,)."""
        return self.pll_terms(rows).mean(axis=0)

    # exact inference by enumeration ---------------------------------------------------------
    @property
    def n_states(self) -> int:
        return int(np.prod(self.schema.cardinalities.astype(object)))

    def all_states(self) -> np.ndarray:
        """Every joint state, in lexicographic order (last variable fastest)."""
        if self.n_states > self.max_states:
            raise EnumerationTooLarge(
                f"the model has {self.n_states} joint states, more than max_states="
                f"{self.max_states}; exact enumeration is for small models (raise max_states "
                "if you really mean it, or use streammn.inference Gibbs sampling)"
            )
        return np.array(
            list(itertools.product(*[range(c) for c in self.schema.cardinalities])), dtype=np.uint8
        ).reshape(-1, self.schema.n_vars)

    def log_partition(self) -> float:
        """``log Z`` by enumerating every joint state."""
        if self._log_z is None:
            scores = self.log_score(self.all_states())
            self._log_z = float(np.logaddexp.reduce(scores))
        return self._log_z

    def log_probability(self, rows: Rows) -> np.ndarray:
        """Exact ``log P(x)`` of each row (enumerates the state space once for ``log Z``)."""
        return self.log_score(rows) - self.log_partition()

    def joint(self) -> tuple[np.ndarray, np.ndarray]:
        """``(states, probabilities)`` of the whole joint distribution."""
        states = self.all_states()
        scores = self.log_score(states)
        log_z = float(np.logaddexp.reduce(scores))
        return states, np.exp(scores - log_z)

    def marginals(self) -> list[np.ndarray]:
        """Exact single-variable marginals ``[P(X_i = a) for a]`` for every variable i."""
        states, p = self.joint()
        return [
            np.bincount(states[:, i], weights=p, minlength=int(c))
            for i, c in enumerate(self.schema.cardinalities)
        ]

    # other toolkits ------------------------------------------------------------------------
    def to_pgmpy(self) -> "DiscreteMarkovNetwork":
        """The model as a ``pgmpy.models.DiscreteMarkovNetwork`` with equal factors (needs the
        ``pgmpy`` extra; see :mod:`streammn.pgmpy_bridge`)."""
        from streammn.pgmpy_bridge import to_pgmpy

        return to_pgmpy(self)

    @classmethod
    def from_pgmpy(cls, net: "DiscreteMarkovNetwork") -> "MarkovNetwork":
        """A pgmpy ``DiscreteMarkovNetwork`` as a MarkovNetwork (same distribution)."""
        from streammn.pgmpy_bridge import from_pgmpy

        return cls(*from_pgmpy(net))

    def __repr__(self) -> str:
        return (
            f"MarkovNetwork({self.schema.n_vars} variables, {self.n_features} features, "
            f"max_states={self.max_states})"
        )
