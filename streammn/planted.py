"""Planted models with known truth for tests, demos and benchmarks: sparse logistic BNs, and
Markov networks with communities to draw (:func:`planted_communities`).

A :class:`LogisticBN` draws rows in topological order and gives every row's exact
pseudo-log-likelihood terms ``log P(x_i | x_-i)`` in closed form: for a Bayesian network,
``P(x_i | x_-i)`` is proportional to ``P(x_i | pa_i) * prod_{c in ch(i)} P(x_c | pa_c)`` over
the values of ``x_i``, so the true PLL of a test set is a sum of a few logistic terms per
variable. That is the figure a learner's test PLL is measured against.
"""

from __future__ import annotations

import numpy as np


def _log_sigmoid(z: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -z)


class LogisticBN:
    """A random sparse Bayesian network over binary variables.

    Variable ``j`` has up to ``max_parents`` parents among ``0..j-1`` (chosen uniformly) and
    ``P(X_j = 1 | pa) = sigmoid(bias_j + sum_p w_jp x_p)`` with ``|w| ~ U[weight_low,
    weight_high]`` of random sign and ``bias ~ N(-0.5, 0.5)``. ``noise_vars`` extra variables
    at the end are independent fair coins: no learner should split on them.
    """

    def __init__(
        self,
        n_vars: int,
        seed: int = 0,
        max_parents: int = 3,
        weight_low: float = 0.5,
        weight_high: float = 2.0,
        noise_vars: int = 0,
    ):
        rng = np.random.default_rng(seed)
        self.n_vars = int(n_vars) + int(noise_vars)
        self.n_signal = int(n_vars)
        self.parents: list[np.ndarray] = []
        self.weights: list[np.ndarray] = []
        self.bias = np.zeros(self.n_vars)
        for j in range(self.n_vars):
            k = 0 if j >= self.n_signal else min(j, int(rng.integers(0, max_parents + 1)))
            pa = np.sort(rng.choice(j, size=k, replace=False)) if k else np.zeros(0, np.int64)
            self.parents.append(pa.astype(np.int64))
            self.weights.append(
                rng.uniform(weight_low, weight_high, size=k) * rng.choice([-1.0, 1.0], size=k)
            )
            self.bias[j] = 0.0 if j >= self.n_signal else rng.normal(-0.5, 0.5)
        self.children = [
            [c for c in range(self.n_vars) if j in self.parents[c]] for j in range(self.n_vars)
        ]

    def edges(self) -> set[tuple[int, int]]:
        """The moral graph's edges (parent-child and co-parents), as sorted pairs."""
        out = set()
        for c, pa in enumerate(self.parents):
            group = [*map(int, pa), c]
            out |= {(min(a, b), max(a, b)) for a in group for b in group if a != b}
        return out

    def sample(self, n_rows: int, rng: np.random.Generator) -> np.ndarray:
        X = np.empty((n_rows, self.n_vars), dtype=np.uint8)
        for j in range(self.n_vars):
            logit = self.bias[j] + X[:, self.parents[j]].astype(np.float64) @ self.weights[j]
            X[:, j] = rng.random(n_rows) < 1.0 / (1.0 + np.exp(-logit))
        return X

    def _cond_log(self, X: np.ndarray, c: int, xc: np.ndarray) -> np.ndarray:
        """log P(X_c = xc | pa_c) for every row (X's parent columns as given)."""
        z = self.bias[c] + X[:, self.parents[c]].astype(np.float64) @ self.weights[c]
        return np.where(xc == 1, _log_sigmoid(z), _log_sigmoid(-z))

    def pll_terms(self, rows: np.ndarray) -> np.ndarray:
        """Exact ``log P(x_i | x_-i)`` for every row and variable."""
        out = np.empty(rows.shape, dtype=np.float64)
        for i in range(self.n_vars):
            score = []
            for v in (0, 1):
                X = rows.copy()
                X[:, i] = v
                s = self._cond_log(X, i, X[:, i])
                for c in self.children[i]:
                    s = s + self._cond_log(X, c, X[:, c])
                score.append(s)
            norm = np.logaddexp(score[0], score[1])
            out[:, i] = np.where(rows[:, i] == 1, score[1], score[0]) - norm
        return out

    def pll(self, rows: np.ndarray) -> float:
        return float(self.pll_terms(rows).sum(axis=1).mean())


def planted_communities(n_vars: int, seed: int = 0):
    """A binary pairwise Markov network with communities, to draw and to test pictures by:
    blocks of 5-30 strongly coupled variables (weights 0.5-3), weak links across blocks
    (0.05-0.4), and the last 3 variables independent of everything. Every third variable has a
    long name (``sensor_temperature_12``), so label placement is tested too."""
    from streammn.features import FeatureSet
    from streammn.network.model import MarkovNetwork
    from streammn.schema import Schema

    rng = np.random.default_rng(seed)
    names = [f"sensor_temperature_{v}" if v % 3 == 0 else f"v{v}" for v in range(n_vars)]
    schema = Schema.from_cardinalities([2] * n_vars, names=names)
    feats, start, body = [], 0, n_vars - 3
    while start < body:
        block = list(range(start, min(body, start + int(rng.integers(5, 30)))))
        start = block[-1] + 1
        for i in block:
            for j in rng.choice(block, size=min(3, len(block)), replace=False):
                if i != j:
                    feats.append((float(rng.uniform(0.5, 3)), [(i, 1, True), (int(j), 1, True)]))
    for _ in range(n_vars // 2):
        i, j = rng.choice(body, 2, replace=False)
        feats.append((float(rng.uniform(0.05, 0.4)), [(int(i), 1, True), (int(j), 0, True)]))
    return MarkovNetwork(schema, FeatureSet.from_features(schema, feats))
