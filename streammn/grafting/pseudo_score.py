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

Residuals ``P(x_v = . | x_-v) - onehot(x_v)`` (:mod:`streammn.grafting.conditionals`) are
computed per variable on demand and kept until the weights change (one :class:`PseudoScorer`
per optimum); a batch of pairs is scored by one kernel call.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from streammn.grafting.conditionals import columns, residuals, shifted_exp
from streammn.grafting.mrf import PairwiseLayout


@nb.njit(cache=True)
def _fill_residuals(wanted, cols, cards, uoff, theta, etab, edges, eoff, adj_ptr, adj_edge,
                    res):
    """Residuals of the variables ``wanted`` into their rows ``res[uoff[v]:uoff[v + 1]]``."""
    logp = np.empty(cols.shape[1])
    for v in wanted:
        residuals(v, cols, cards, uoff, theta, etab, edges, eoff, adj_ptr, adj_edge,
                  res[uoff[v]:uoff[v + 1]], logp)


@nb.njit(cache=True)
def _pair_scores(pairs, cols, cards, uoff, res):
    """``||G||_2 / (N d_e)`` of every pair (see the module docstring)."""
    n = cols.shape[1]
    out = np.empty(pairs.shape[0])
    smax = 1
    for v in range(cards.shape[0]):
        smax = max(smax, cards[v])
    g = np.empty((smax, smax))
    for p in range(pairs.shape[0]):
        i, j = pairs[p, 0], pairs[p, 1]
        ci, cj = cards[i], cards[j]
        g[:ci, :cj] = 0.0
        col_i, col_j = cols[i], cols[j]
        for x in range(ci):
            ri = res[uoff[i] + x]
            for r in range(n):
                g[x, col_j[r]] += ri[r]
        for y in range(cj):
            rj = res[uoff[j] + y]
            for r in range(n):
                g[col_i[r], y] += rj[r]
        total = 0.0
        for x in range(ci):
            for y in range(cj):
                total += g[x, y] * g[x, y]
        out[p] = np.sqrt(total) / max(n, 1) / (ci * cj)
    return out


class PseudoScorer:
    """Pseudo-likelihood activation scores ``||G||_2 / d_e`` of inactive pairs at ``theta``."""

    def __init__(self, layout: PairwiseLayout, theta, rows):
        self.layout = layout
        self.theta = np.ascontiguousarray(theta, dtype=np.float64)
        self.cols = columns(rows)
        self._etab = shifted_exp(layout, self.theta)
        self._res = np.empty((int(layout.uoff[-1]), self.cols.shape[1]))
        self._ready = np.zeros(layout.n_vars, dtype=np.bool_)

    def scores(self, pairs) -> np.ndarray:
        """Scores of ``pairs`` (k x 2, i < j)."""
        pairs = np.ascontiguousarray(pairs, dtype=np.int64).reshape(-1, 2)
        ends = np.unique(pairs)
        wanted = ends[~self._ready[ends]]
        if wanted.size:
            lay = self.layout
            _fill_residuals(wanted, self.cols, lay.cards, lay.uoff, self.theta, self._etab,
                            lay.edges, lay.eoff, lay.adj_ptr, lay.adj_edge, self._res)
            self._ready[wanted] = True
        return _pair_scores(pairs, self.cols, self.layout.cards, self.layout.uoff, self._res)
