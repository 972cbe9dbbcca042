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

Many pairs at one optimum (issue 41). Concluding that no edge passes C2 means re-testing every
pair against the current weights, which on a stream is what most structure updates do, and pair
by pair that is ``4 N`` row visits per binary pair (2.5 s of a 5.6 s update at n = 100 on a
50k-row sample). Once a scorer has been asked for more than ``FULL_AFTER * n`` pairs it
computes every pair's gradient at once: with ``R`` the residuals (cells x rows) and ``H`` the
rows' one-hot indicators (rows x cells), ``M = R H`` holds ``sum_r res_i[a, r] [x_rj = b]`` at
``(i a, j b)``, so ``G_ij = M[i, j] + M[j, i]^T``, and the cross terms of ``z`` are one more
product of the observed-state residuals. Both are single-threaded BLAS products over blocks of
rows (the same bits whatever the machine's thread count, so a resumed run scores as an
uninterrupted one), then every later pair is a look-up. The sums run in another order than the
pair kernel's, so a score may differ from it in the last bits; which path scores a pair is a
function of the calls made, so the learner stays a function of its rows.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from streammn.blas import blas_threads
from streammn.grafting.conditionals import columns, residuals, shifted_exp
from streammn.grafting.mrf import PairwiseLayout

FULL_AFTER = 4  # pairs asked, per variable, after which a scorer computes every pair at once
BLOCK_ROWS = 4096  # rows per block of the all-pairs products


@nb.njit(cache=True)
def _fill_residuals(wanted, cols, cards, uoff, theta, etab, edges, eoff, adj_ptr, adj_edge, res):
    """Residuals of the variables ``wanted`` into their rows ``res[uoff[v]:uoff[v + 1]]``."""
    logp = np.empty(cols.shape[1])
    for v in wanted:
        out = res[uoff[v] : uoff[v + 1]]
        residuals(v, cols, cards, uoff, theta, etab, edges, eoff, adj_ptr, adj_edge, out, logp)


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


@nb.njit(cache=True)
def _one_hot(cols, uoff, start, stop, out):
    """Rows ``start:stop`` as one-hot indicators: ``out[r - start, uoff[v] + x_rv] = 1``."""
    out[: stop - start] = 0.0
    for v in range(cols.shape[0]):
        col = cols[v]
        for r in range(start, stop):
            out[r - start, uoff[v] + col[r]] = 1.0


@nb.njit(cache=True)
def _pair_scores_from(pairs, cards, uoff, cross, n):
    """``||G||_2 / (N d_e)`` of every pair from ``cross = R H`` (module docstring)."""
    out = np.empty(pairs.shape[0])
    for p in range(pairs.shape[0]):
        i, j = pairs[p, 0], pairs[p, 1]
        ci, cj = cards[i], cards[j]
        total = 0.0
        for x in range(ci):
            for y in range(cj):
                g = cross[uoff[i] + x, uoff[j] + y] + cross[uoff[j] + y, uoff[i] + x]
                total += g * g
        out[p] = np.sqrt(total) / max(n, 1) / (ci * cj)
    return out


@nb.njit(cache=True)
def _standardise_from(pairs, cards, raw, sq, own_cross, n):
    """:func:`_standardise` with the cross terms read from ``own_cross = own own^T``."""
    out = np.empty(pairs.shape[0])
    for p in range(pairs.shape[0]):
        i, j = pairs[p, 0], pairs[p, 1]
        g = raw[p] * cards[i] * cards[j]
        spread = ((sq[i] + sq[j] + 2.0 * own_cross[i, j]) / n - g * g) / n
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
        self._asked = 0  # pairs scored so far
        self._cross: np.ndarray | None = None  # R H once every pair is computed
        self._own_cross: np.ndarray | None = None

    def scores(self, pairs) -> np.ndarray:
        """Scores of ``pairs`` (k x 2, i < j): ``z`` with ``standardise``, else the raw
        ``||G||_2 / d_e``."""
        pairs = np.ascontiguousarray(pairs, dtype=np.int64).reshape(-1, 2)
        raw = self.raw_scores(pairs)
        return self.z_scores(pairs, raw) if self.standardise else raw

    def raw_scores(self, pairs) -> np.ndarray:
        """``||G||_2 / d_e`` of ``pairs`` (k x 2 int64, i < j)."""
        lay = self.layout
        self._asked += pairs.shape[0]
        if self._cross is None and self._asked > FULL_AFTER * lay.n_vars:
            self._all_pairs()
        if self._cross is not None:
            return _pair_scores_from(pairs, lay.cards, lay.uoff, self._cross, self.cols.shape[1])
        ends = np.unique(pairs)
        self._fill(ends[~self._ready[ends]])
        return _pair_scores(pairs, self.cols, lay.cards, lay.uoff, self._res)

    def _fill(self, wanted) -> None:
        """Residuals (and spreads) of the variables ``wanted``."""
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

    def _all_pairs(self) -> None:
        """``R H`` and ``own own^T`` over every variable (module docstring)."""
        lay = self.layout
        self._fill(np.flatnonzero(~self._ready))
        n, cells = self.cols.shape[1], int(lay.uoff[-1])
        cross = np.zeros((cells, cells))
        hot = np.empty((min(BLOCK_ROWS, max(n, 1)), cells))
        with blas_threads(1):
            for start in range(0, n, BLOCK_ROWS):
                stop = min(start + BLOCK_ROWS, n)
                _one_hot(self.cols, lay.uoff, start, stop, hot)
                cross += self._res[:, start:stop] @ hot[: stop - start]
            if self.standardise:
                self._own_cross = self._own @ self._own.T
        self._cross = cross

    def z_scores(self, pairs, raw) -> np.ndarray:
        """``z`` of ``pairs`` from their :meth:`raw_scores` (needs ``standardise``)."""
        if self._own_cross is not None:
            n = self.cols.shape[1]
            return _standardise_from(pairs, self.layout.cards, raw, self._sq, self._own_cross, n)
        return _standardise(pairs, self.layout.cards, raw, self._sq, self._own)
