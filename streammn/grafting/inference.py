"""The model's marginals that grafting needs: node and active-edge marginals, log Z, and the
pairwise marginal of any *inactive* pair.

The activation score of an inactive edge (paper Eq. 5) compares the data's joint table of the
pair with the *model's* joint table ``p_w(x_i, x_j)``. Two variables joined by a path of active
edges are dependent under the model, so that table is not the product of the node marginals;
using the product (as this package first did) scores every pair by its raw marginal dependence,
and the pairs two or three hops apart on the planted graph, which the active edges already
explain, keep scores as high as the missing true edges (issue 16's diagnosis). Two ways to get
the right table:

- :class:`BPInference`: loopy BP on the active graph for the node and edge marginals; for a pair
  in one connected component, ``p(x_i = a, x_j = b) = p(x_i = a) p(x_j = b | x_i = a)`` with the
  conditional from BP run with ``x_i`` clamped to ``a`` (the endpoint already clamped, else the
  one most requested) (warm-started from the unclamped
  messages; cached per clamped variable until the weights change). Exact on forests. Pairs in
  different components are independent under the model: the product is exact there and costs
  nothing, which is most pairs early in a run.
- :class:`ExactInference`: enumeration of the joint state space, for models with at most
  ``EXACT_MAX_STATES`` joint states (exact everything; used by default when it applies).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streammn.grafting.bp import belief_propagation
from streammn.grafting.mrf import PairwiseLayout
from streammn.errors import GraftingError

EXACT_MAX_STATES = 1 << 16
INFERENCE = ("auto", "bp", "exact")
CLAMP = 1e4  # log-potential subtracted from the other states of a clamped variable


def pair_offsets(pairs, cards) -> np.ndarray:
    """Start of each pair's row-major ``card_i x card_j`` table in a flat array (length k+1)."""
    sizes = cards[pairs[:, 0]] * cards[pairs[:, 1]]
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


def use_exact(inference: str, cards) -> bool:
    """Whether ``inference`` ("auto", "bp", "exact") means enumeration for these variables."""
    if inference not in INFERENCE:
        raise GraftingError(f"inference must be one of {INFERENCE}, got {inference!r}")
    small = float(np.prod(np.asarray(cards, dtype=np.float64))) <= EXACT_MAX_STATES
    if inference == "exact" and not small:
        raise GraftingError(f"exact inference enumerates at most {EXACT_MAX_STATES} joint states")
    return inference == "exact" or (inference == "auto" and small)


class ExactInference:
    """Marginals of ``(layout, theta)`` by enumerating every joint state."""

    def __init__(self, layout: PairwiseLayout, theta):
        cards = layout.cards
        self.layout = layout
        grids = np.indices(tuple(int(c) for c in cards)).reshape(len(cards), -1)
        self.states = np.ascontiguousarray(grids.T, dtype=np.int64)
        logp = np.zeros(self.states.shape[0])
        for v in range(layout.n_vars):
            logp += theta[layout.uoff[v] + self.states[:, v]]
        cells = []
        for k, (i, j) in enumerate(layout.edges.tolist()):
            cell = self.states[:, i] * cards[j] + self.states[:, j]
            logp += theta[layout.eoff[k] + cell]
            cells.append(cell)
        self.log_z = float(np.logaddexp.reduce(logp))
        self.p = np.exp(logp - self.log_z)
        node = [
            np.bincount(self.states[:, v], weights=self.p, minlength=int(cards[v]))
            for v in range(layout.n_vars)
        ]
        edge = [
            np.bincount(c, weights=self.p, minlength=int(layout.eoff[k + 1] - layout.eoff[k]))
            for k, c in enumerate(cells)
        ]
        self.marginals = np.concatenate(node + edge) if node + edge else np.zeros(0)
        self.node_marginals = self.marginals[: layout.uoff[-1]]

    def pair_tables(self, pairs) -> np.ndarray:
        """Model joint tables of ``pairs`` (k x 2), flat at :func:`pair_offsets`."""
        cards = self.layout.cards
        out = [
            np.bincount(
                self.states[:, i] * cards[j] + self.states[:, j],
                weights=self.p,
                minlength=int(cards[i] * cards[j]),
            )
            for i, j in pairs.tolist()
        ]
        return np.concatenate(out) if out else np.zeros(0)


class BPInference:
    """Marginals of ``(layout, theta)`` by loopy BP, pair tables by clamped BP (see module)."""

    def __init__(
        self,
        layout: PairwiseLayout,
        theta,
        damping: float,
        tol: float,
        max_iter: int,
        messages: np.ndarray | None = None,
    ):
        self.layout, self.theta = layout, np.asarray(theta, dtype=np.float64)
        self.bp: dict[str, Any] = dict(damping=damping, tol=tol, max_iter=max_iter)
        res = belief_propagation(layout, self.theta, messages=messages, **self.bp)
        self.result = res
        self.marginals, self.log_z, self.messages = res.marginals, res.log_z, res.messages
        self.node_marginals = res.marginals[: layout.uoff[-1]]
        self.component = _components(layout)
        self._conditionals: dict[int, np.ndarray] = {}

    def conditionals(self, v: int) -> np.ndarray:
        """``P(X_u = b | X_v = a)`` as a ``card_v x n_cells`` array (node cells of every u)."""
        got = self._conditionals.get(v)
        if got is None:
            lay = self.layout
            got = np.empty((int(lay.cards[v]), int(lay.uoff[-1])))
            for a in range(int(lay.cards[v])):
                theta = self.theta.copy()
                theta[lay.uoff[v] : lay.uoff[v + 1]] -= CLAMP
                theta[lay.uoff[v] + a] += CLAMP
                res = belief_propagation(lay, theta, messages=self.messages.copy(), **self.bp)
                got[a] = res.marginals[: lay.uoff[-1]]
            self._conditionals[v] = got
        return got

    def pair_tables(self, pairs) -> np.ndarray:
        """Model joint tables of ``pairs`` (k x 2), flat at :func:`pair_offsets`."""
        lay, node = self.layout, self.node_marginals
        # clamp the hubs of the request
        uses = np.bincount(np.asarray(pairs).ravel(), minlength=lay.n_vars)
        out = []
        for i, j in pairs.tolist():
            pi = node[lay.uoff[i] : lay.uoff[i + 1]]
            pj = node[lay.uoff[j] : lay.uoff[j + 1]]
            if self.component[i] != self.component[j]:
                table = np.outer(pi, pj)
            elif i not in self._conditionals and (j in self._conditionals or uses[j] > uses[i]):
                table = (pj[:, None] * self.conditionals(j)[:, lay.uoff[i] : lay.uoff[i + 1]]).T
            else:
                table = pi[:, None] * self.conditionals(i)[:, lay.uoff[j] : lay.uoff[j + 1]]
            out.append(table.ravel())
        return np.concatenate(out) if out else np.zeros(0)


def _components(layout: PairwiseLayout) -> np.ndarray:
    """Connected-component label of every variable in the active graph."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    n, e = layout.n_vars, layout.edges
    graph = coo_matrix((np.ones(e.shape[0]), (e[:, 0], e[:, 1])), shape=(n, n))
    return connected_components(graph, directed=False)[1]


def infer(
    layout: PairwiseLayout,
    theta,
    exact: bool,
    damping: float,
    tol: float,
    max_iter: int,
    messages: np.ndarray | None = None,
) -> ExactInference | BPInference:
    """:class:`ExactInference` or :class:`BPInference` of ``(layout, theta)``."""
    if exact:
        return ExactInference(layout, np.asarray(theta, dtype=np.float64))
    return BPInference(layout, theta, damping, tol, max_iter, messages)
