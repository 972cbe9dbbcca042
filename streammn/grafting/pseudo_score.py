"""Activation scores under the pseudo-likelihood objective: the gradient of the negative log
pseudo-likelihood with respect to an inactive edge's table, at zero weight.

With the pseudo-likelihood data term ``L(w) = -(1/N) sum_r sum_v log P_w(x_rv | x_r,-v)``, the
optimality test C2 of an inactive edge ``(i, j)`` is the same as for the likelihood (the group's
gradient norm over ``d_e`` against lambda), and that gradient has a closed form:

    G[a, b] = (1/N) sum_r (P(x_i = a | x_r,-i) - [x_ri = a]) [x_rj = b]
                        + [x_ri = a] (P(x_j = b | x_r,-j) - [x_rj = b])

It needs only each variable's conditional distribution given the rest on the row sample, which
is exact and cheap (no inference over the graph). This is why it is the default: loopy BP on a
dense, strongly coupled active graph (random sparse or scale-free graphs with couplings near 1)
gives pair tables of inactive pairs that miss the data by more than lambda everywhere, so under
the likelihood score every pair passes C2 once the true edges are in and the run adds false edges
until it has scored every pair (issue 16's diagnosis). The pseudo-likelihood is consistent for
structure recovery (Ravikumar et al. 2010 use its per-node version) and exact at any size.

Residuals ``P(x_v = . | x_-v) - onehot(x_v)`` are computed per variable on demand and cached
until the weights change (one :class:`PseudoScorer` per optimum).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from streammn.grafting.mrf import PairwiseLayout
from streammn.grafting.objective import conditional_logits


@nb.njit(cache=True)
def _residual(rows, v, cards, uoff, theta, edges, eoff, adj_ptr, adj_edge):
    """``P(x_v = a | x_-v) - [x_v = a]`` for every row (n_rows x card_v)."""
    n = rows.shape[0]
    c = cards[v]
    out = np.empty((n, c))
    logits = np.empty(c)
    for r in range(n):
        conditional_logits(rows[r], v, cards, uoff, theta, edges, eoff, adj_ptr, adj_edge, logits)
        mx = logits.max()
        total = 0.0
        for a in range(c):
            logits[a] = np.exp(logits[a] - mx)
            total += logits[a]
        for a in range(c):
            out[r, a] = logits[a] / total
        out[r, rows[r, v]] -= 1.0
    return out


@nb.njit(cache=True)
def _pair_gradient_norm(rows, i, j, res_i, res_j, ci, cj):
    """``||G||_2`` of the pair ``(i, j)`` (see the module docstring), unnormalised by N."""
    g = np.zeros((ci, cj))
    for r in range(rows.shape[0]):
        a, b = rows[r, i], rows[r, j]
        for x in range(ci):
            g[x, b] += res_i[r, x]
        for y in range(cj):
            g[a, y] += res_j[r, y]
    return np.sqrt((g * g).sum())


class PseudoScorer:
    """Pseudo-likelihood activation scores ``||G||_2 / d_e`` of inactive pairs at ``theta``."""

    def __init__(self, layout: PairwiseLayout, theta, rows):
        self.layout = layout
        self.theta = np.ascontiguousarray(theta, dtype=np.float64)
        self.rows = np.ascontiguousarray(rows, dtype=np.uint8)
        self._residuals: dict[int, np.ndarray] = {}

    def residual(self, v: int) -> np.ndarray:
        got = self._residuals.get(v)
        if got is None:
            lay = self.layout
            got = _residual(self.rows, v, lay.cards, lay.uoff, self.theta, lay.edges, lay.eoff,
                            lay.adj_ptr, lay.adj_edge)
            self._residuals[v] = got
        return got

    def scores(self, pairs) -> np.ndarray:
        """Scores of ``pairs`` (k x 2, i < j)."""
        cards = self.layout.cards
        n = max(self.rows.shape[0], 1)
        out = np.empty(len(pairs))
        for p, (i, j) in enumerate(np.asarray(pairs).tolist()):
            ci, cj = int(cards[i]), int(cards[j])
            norm = _pair_gradient_norm(self.rows, i, j, self.residual(i), self.residual(j),
                                       ci, cj)
            out[p] = norm / n / (ci * cj)
        return out
