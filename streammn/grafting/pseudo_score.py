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

Standardised scores (used by the learner's default C2 next to the raw score, issue 16): the
gradient norm's own sampling spread differs from pair to pair. A variable nearly fixed by its
neighbours (a hub of a strongly coupled scale-free graph) has small residuals, so both the
gradient of a true edge at it and the noise of its non-edges are small, and one threshold for
all pairs (the data-scaled lambda, set by the noisiest pairs) keeps such true edges out: on the
Ising scale-free graph (n = 50) the four missed hub-to-hub edges score 0.5-0.9 lambda at the end
of the run, below the largest non-edge, yet 7.4-11.6 of their own standard deviations. The
standardised score is

    z = ||G||_2 / sqrt(tr Cov(G)),  tr Cov(G) = (mean_r ||g_r||^2 - ||G||^2) / N

with ``g_r`` row ``r``'s term of ``G``: ``||g_r||^2 = sum_a res_i[a]^2 + sum_b res_j[b]^2
+ 2 res_i[x_ri] res_j[x_rj]`` (the two terms share one cell), so it costs one more pass over
the rows per pair. Under "no edge" ``z^2`` has mean 1 whatever the pair (the spread of the
weights fitted for the rest is ignored, which makes it slightly conservative).

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
def _fill_residuals(wanted, cols, cards, uoff, theta, etab, edges, eoff, adj_ptr, adj_edge, res):
    """Residuals of the variables ``wanted`` into their rows ``res[uoff[v]:uoff[v + 1]]``."""
    logp = np.empty(cols.shape[1])
    for v in wanted:
        residuals(
            v,
            cols,
            cards,
            uoff,
            theta,
            etab,
            edges,
            eoff,
            adj_ptr,
            adj_edge,
            res[uoff[v] : uoff[v + 1]],
            logp,
        )


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


@nb.njit(cache=True)
def _fill_spread(wanted, cols, uoff, res, sq, own):
    """Per variable: the sum over rows of its squared residuals, and each row's residual at
    its observed state (the terms of ``||g_r||^2``, see the module docstring)."""
    for v in wanted:
        col = cols[v]
        total = 0.0
        for a in range(uoff[v + 1] - uoff[v]):
            ra = res[uoff[v] + a]
            for r in range(col.shape[0]):
                total += ra[r] * ra[r]
        sq[v] = total
        for r in range(col.shape[0]):
            own[v, r] = res[uoff[v] + col[r], r]


@nb.njit(cache=True)
def _standardise(pairs, cards, raw, sq, own):
    """``z = ||G|| / sqrt(tr Cov(G))`` of every pair from its raw score ``||G|| / (N d_e)``."""
    n = own.shape[1]
    out = np.empty(pairs.shape[0])
    for p in range(pairs.shape[0]):
        i, j = pairs[p, 0], pairs[p, 1]
        g = raw[p] * cards[i] * cards[j]  # ||G|| / N: the mean gradient's norm
        cross = 0.0
        for r in range(n):
            cross += own[i, r] * own[j, r]
        spread = ((sq[i] + sq[j] + 2.0 * cross) / n - g * g) / n
        out[p] = g / np.sqrt(spread) if spread > 0.0 else 0.0
    return out


class PseudoScorer:
    """Pseudo-likelihood activation scores ``||G||_2 / d_e`` of inactive pairs at ``theta``
    (``standardise``: ``z``, see the module docstring)."""

    def __init__(self, layout: PairwiseLayout, theta, rows, standardise: bool = False):
        self.layout = layout
        self.theta = np.ascontiguousarray(theta, dtype=np.float64)
        self.cols = columns(rows)
        self.standardise = standardise
        self._etab = shifted_exp(layout, self.theta)
        self._res = np.empty((int(layout.uoff[-1]), self.cols.shape[1]))
        self._ready = np.zeros(layout.n_vars, dtype=np.bool_)
        if standardise:
            self._sq = np.zeros(layout.n_vars)
            self._own = np.zeros((layout.n_vars, self.cols.shape[1]))

    def scores(self, pairs) -> np.ndarray:
        """Scores of ``pairs`` (k x 2, i < j): ``z`` with ``standardise``, else the raw
        ``||G||_2 / d_e``."""
        pairs = np.ascontiguousarray(pairs, dtype=np.int64).reshape(-1, 2)
        raw = self.raw_scores(pairs)
        return self.z_scores(pairs, raw) if self.standardise else raw

    def raw_scores(self, pairs) -> np.ndarray:
        """``||G||_2 / d_e`` of ``pairs`` (k x 2 int64, i < j)."""
        ends = np.unique(pairs)
        wanted = ends[~self._ready[ends]]
        lay = self.layout
        if wanted.size:
            _fill_residuals(
                wanted,
                self.cols,
                lay.cards,
                lay.uoff,
                self.theta,
                self._etab,
                lay.edges,
                lay.eoff,
                lay.adj_ptr,
                lay.adj_edge,
                self._res,
            )
            if self.standardise:
                _fill_spread(wanted, self.cols, lay.uoff, self._res, self._sq, self._own)
            self._ready[wanted] = True
        return _pair_scores(pairs, self.cols, lay.cards, lay.uoff, self._res)

    def z_scores(self, pairs, raw) -> np.ndarray:
        """``z`` of ``pairs`` from their :meth:`raw_scores` (needs ``standardise``)."""
        return _standardise(pairs, self.layout.cards, raw, self._sq, self._own)
