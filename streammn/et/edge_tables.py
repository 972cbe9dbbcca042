"""Edge distributions learned with beta: the full ET model of Eq. 7 (MAP), an option of ET.

Why. The simplified model of Section 2.2 plugs the smoothed pair tables of the whole stream in
and learns only beta. On the paper's dense binary networks its optimum leaves the weak couplings
out (50 nodes, 6 neighbours, 1,000 rows: 59 and 55 of 150 true edges missed), whatever the PGD
tolerance, start point, sample or threshold (``benchmarks/results/et_diagnosis.md``). Eq. 7,
the model of Meila & Jaakkola, learns the edge distributions theta_uv with beta. In a mixture
of trees an edge is used by only a fraction rho of the trees, so its maximum-likelihood table is
more dependent than the pair's marginal table, which makes weak edges worth their share of the
``sum rho = M - 1`` budget. By plain maximum likelihood the same fits then miss only 15 and 7
edges but over-fit the tables (log odds ratios of 3-4 for couplings of 0.1-0.3) and add 42 and
55 false edges, mostly pairs two steps apart in the true graph (Hamming 57 and 62). The MAP fit
under the learner's own Dirichlet prior (below) keeps the tables moderate: 17 and 11 missed, 18
and 21 false, Hamming 35 and 32 against 59 and 56 for the plug-in model and 44 and 39 for
L1-regularised logistic regression (OR) (``benchmarks/results/et_diagnosis.md``, "The full
model", fitted by the benchmark's own log-odds implementation; the held-out likelihood rises
from 1.86 and 1.60 to 2.75 and 2.36 nats per row above the node term). This module's fit of the
same model (below: a budget of 30 rounds) gives 33 (19 missed, 14 false) and 40 (11, 29), mean
36.5 against L1-LR OR's 41.5 (``benchmarks/results/et.md``). The objective is not concave and
where the fit stops changes the graph: the first version of this module, which ran both blocks to
convergence every round, reached a higher objective on the first network and gave 42 and 32;
the closer the fit to a MAP optimum, the more second-neighbour pairs it takes in. On the
200-node, 4-neighbour network (2,000 sample rows) it finds all but 1 of the 400 true edges but
adds 176 false ones (Hamming 177 against L1-LR OR's 14): at that size the learned tables
make far more pairs worth a share of the trees than the true graph has.

Parametrisation. Node distributions stay at the smoothed estimates (they are the node term's
own maximiser). Each pair table is ``theta_uv = diag(r) (theta_u theta_v^T * exp(phi_uv))
diag(c)`` with ``r, c`` the Sinkhorn scalings that give it the margins ``theta_u, theta_v``, so
every table meets Eq. 7's constraints ``sum_b theta_uv(a, b) = theta_u(a)`` (to 1e-12) and is
positive; ``phi = log(theta_uv / (theta_u theta_v))`` of the smoothed table reproduces it, so
the fit starts from the plug-in model.

Objective, per sample row (S rows): Eq. 7's ``mean log det Q(beta * w(x)) - log det Q(beta)``
(the node term is constant) plus the log prior ``alpha / (k_u k_v S) sum_ab log theta_uv(a, b)``
over the pairs: the Dirichlet whose posterior mean is the learner's smoothed table
(``alpha / (k_u k_v)`` pseudo-counts per cell, ``alpha`` the learner's ``pseudo_count``), so a
table on its own is estimated as before.

Gradient. With ``S_uv(a, b)`` the summed effective resistances of the rows in cell ``(a, b)``
(:func:`~streammn.et.kernels.cell_resistance_sums`), the derivative in a table cell is
``G(a, b) = beta_uv S_uv(a, b) / (S theta_u(a) theta_v(b)) + alpha / (k_u k_v S theta_uv(a, b))``.
A change ``dphi`` moves the table by ``theta_uv * P(dphi)``, ``P`` the projection (in the inner
product weighted by ``theta_uv``) onto changes that keep the margins, so the gradient in ``phi`` is
``theta_uv * P(G)``; ``P`` subtracts row and column terms found by alternating updates, as
Sinkhorn's. Cost: one kernel pass per gradient, as beta's, O(S M^3).

Fit. Rounds of up to 3 Armijo steps in phi at fixed beta and up to 3 projected steps in beta
at fixed tables (the learner's PGD step), at most 30 rounds or until a round gains less than
``tol``: every accepted step increases the MAP objective, so it increases monotonically. One
pass over the rows after each accepted step gives the gradient in both blocks (the cell
resistance sums give beta's too), so the other block starts from it, and each block's step size
carries over between rounds. Cost: a pass with the gradient is one Cholesky and one inverse per
sample row, O(S M^3); each step takes one such pass and about two value-only passes (Cholesky
only) for its trials, so a phase costs at most 180 gradient passes. The first version ran each
block to convergence every round (up to 20 table steps and 100 PGD steps): on a 200-node
network that was about 146 passes a round, and a fit on 2,000 sample rows ran over 82 CPU
minutes without finishing; with the budget (which every benchmark fit reached) it takes 750-1,020
CPU s there, and 23-27 CPU s on the 50-node networks against 38-62 (``benchmarks/results/et.md``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from streammn.et.kernels import (
    armijo_step,
    full_weights,
    objective_and_cell_sums,
    ratio_table,
    structure_objective,
)

SINKHORN_TOL = 1e-13
SINKHORN_ITER = 10000


class EdgeTables:
    """The learnable pair tables of one schema: masks for the valid cells of every pair u < v."""

    def __init__(self, node_probs, cards, pseudo_count: float):
        self.node = np.asarray(node_probs, dtype=np.float64)
        self.cards = np.asarray(cards, dtype=np.int64)
        m, k = self.node.shape
        self.upper = np.triu_indices(m, 1)
        u, v = self.upper
        states = np.arange(k)
        valid = (states[None, :] < self.cards[:, None]).astype(np.float64)  # (M, K)
        self.row_valid, self.col_valid = valid[u], valid[v]
        self.row_target = self.node[u] * valid[u]  # (P, K): theta_u on its states, 0 beyond
        self.col_target = self.node[v] * valid[v]
        self.mask = valid[u][:, :, None] * valid[v][:, None, :]  # (P, K, K)
        self.independent = self.row_target[:, :, None] * self.col_target[:, None, :]
        self.pseudo = pseudo_count / (self.cards[u] * self.cards[v]).astype(np.float64)  # per cell
        self.binary = (self.cards[u] == 2) & (self.cards[v] == 2)

    def phi_of(self, pair):
        """phi (P, K, K) that reproduces ``pair`` (which must have the node margins)."""
        valid = self.mask > 0
        ratio = np.where(valid, pair[self.upper], 1.0) / np.where(valid, self.independent, 1.0)
        return np.where(valid, np.log(ratio), 0.0)

    def tables(self, phi):
        """The pair tables (P, K, K) with the node margins: Sinkhorn scaling of
        ``theta_u theta_v^T exp(phi)``; for 2x2 tables its fixed point in closed form (the table
        with those margins and the odds ratio of ``exp(phi)``, which scaling keeps)."""
        t = np.zeros(phi.shape)
        b = self.binary
        if b.any():
            t[b, :2, :2] = _binary_tables(
                phi[b, :2, :2], self.row_target[b, 1], self.col_target[b, 1]
            )
        if (~b).any():
            t[~b] = _sinkhorn(
                self.independent[~b] * np.exp(phi[~b]), self.row_target[~b], self.col_target[~b]
            )
        return t

    def full(self, tables, base):
        """``base`` (M, M, K, K) with its u < v entries (and their transposes) replaced."""
        pair = np.array(base, dtype=np.float64, copy=True)
        u, v = self.upper
        cells = np.where(self.mask > 0, tables, 1.0)
        pair[u, v] = cells
        pair[v, u] = cells.transpose(0, 2, 1)
        return pair

    def log_prior(self, tables, n_rows):
        logs = np.log(np.where(self.mask > 0, tables, 1.0))
        return float((self.pseudo[:, None, None] * logs).sum()) / n_rows

    def phi_gradient(self, beta, tables, sums, n_rows):
        """Gradient of the MAP objective in phi (P, K, K) from the cell resistance sums."""
        u, v = self.upper
        safe = np.where(self.mask > 0, tables, 1.0)
        g = (
            (
                beta[u, v][:, None, None]
                * sums[u, v]
                / np.where(self.mask > 0, self.independent, 1.0)
                + self.pseudo[:, None, None] / safe
            )
            / n_rows
            * self.mask
        )
        return tables * self._project_margins(tables, g)

    def _project_margins(self, t, g):
        """``g - a - b`` with row terms ``a`` and column terms ``b`` such that ``t * (g - a - b)``
        has zero margins: per pair the symmetric system ``[[diag r, t], [t^T, diag c]] (a, b) =
        (t g 1, t^T g 1)``, singular along ``(1, -1)`` (made regular by adding that direction's
        outer product, which the right side is orthogonal to); unused states get a unit pivot."""
        p, k, _ = t.shape
        tg = t * g
        system = np.zeros((p, 2 * k, 2 * k))
        idx = np.arange(k)
        system[:, idx, idx] = np.where(self.row_valid > 0, self.row_target, 1.0)
        system[:, k + idx, k + idx] = np.where(self.col_valid > 0, self.col_target, 1.0)
        system[:, :k, k:] = t
        system[:, k:, :k] = t.transpose(0, 2, 1)
        null = np.concatenate([self.row_valid, -self.col_valid], axis=1)
        system += null[:, :, None] * null[:, None, :]
        rhs = np.concatenate([tg.sum(axis=2), tg.sum(axis=1)], axis=1)
        ab = np.linalg.solve(system, rhs[:, :, None])[:, :, 0]
        return (g - ab[:, :k, None] - ab[:, None, k:]) * self.mask


def _binary_tables(phi, a, b):
    """2x2 tables (P, 2, 2) with ``P(x_u = 1) = a``, ``P(x_v = 1) = b`` and the odds ratio of
    ``exp(phi)``: ``p11`` is the root in ``[max(0, a + b - 1), min(a, b)]`` of
    ``(q - 1) p^2 - (1 + (q - 1)(a + b)) p + q a b = 0``, ``q`` the odds ratio."""
    q = np.exp(phi[:, 1, 1] + phi[:, 0, 0] - phi[:, 1, 0] - phi[:, 0, 1])
    d = q - 1.0
    lin = 1.0 + d * (a + b)
    root = np.sqrt(np.maximum(lin * lin - 4.0 * d * q * a * b, 0.0))
    # the two forms of the same root: no cancellation for d > 0 and d < 0 respectively
    p11 = np.where(
        d > 0,
        (lin - root) / (2.0 * np.where(d > 0, d, 1.0)),
        2.0 * q * a * b / np.where(d > 0, 1.0, lin + root),
    )
    p11 = np.clip(
        p11, np.maximum(0.0, a + b - 1.0) * (1 + 1e-15) + 1e-300, np.minimum(a, b) * (1 - 1e-15)
    )
    t = np.empty(phi.shape)
    t[:, 1, 1], t[:, 1, 0], t[:, 0, 1] = p11, a - p11, b - p11
    t[:, 0, 0] = 1.0 - a - b + p11
    return t


def _sinkhorn(t, row_target, col_target):
    for _ in range(SINKHORN_ITER):
        t *= _ratio(row_target, t.sum(axis=2))[:, :, None]
        t *= _ratio(col_target, t.sum(axis=1))[:, None, :]
        if np.abs(t.sum(axis=2) - row_target).max() < SINKHORN_TOL:
            break
    return t


def _ratio(target, current):
    return np.where(current > 0, target / np.where(current > 0, current, 1.0), 0.0)


def map_objective(beta, rows, edge_tables, tables, base):
    """Mean per-row Eq. 7 objective (without the constant node term) plus the log prior."""
    pair = edge_tables.full(tables, base)
    return structure_objective(
        beta, rows, ratio_table(edge_tables.node, pair)
    ) + edge_tables.log_prior(tables, rows.shape[0])


def learn_jointly(
    beta,
    rows,
    node_probs,
    pair_probs,
    cards,
    pseudo_count,
    max_rounds=30,
    steps=3,
    tol=1e-4,
    gamma=0.5,
    eta=0.01,
):
    """Alternate Armijo steps in the tables (phi, at fixed beta) and projected steps in beta (at
    fixed tables), up to ``steps`` of each per round, from ``beta`` and the smoothed tables,
    until a round gains less than ``tol`` nats per row; returns ``(beta, pair_probs, MAP
    objective per round)``.

    Every accepted step is followed by one pass over the rows (:func:`_evaluate`) that gives the
    gradient in both blocks, so the other block starts from it; the trial steps are value-only
    passes, and each block's step size carries over from round to round (the next trial at twice
    the last accepted step)."""
    edge_tables = EdgeTables(node_probs, cards, pseudo_count)
    n, m = rows.shape[0], len(cards)
    upper = edge_tables.upper
    phi = edge_tables.phi_of(pair_probs)
    point = _evaluate(beta, edge_tables.tables(phi), rows, edge_tables, pair_probs)
    history = [point.value]
    phi_step = beta_step = 1.0
    for _ in range(max_rounds):
        round_start = point.value
        for _ in range(steps):  # tables at fixed beta
            slope = (point.phi_grad * point.phi_grad).sum()
            while phi_step > 1e-12:
                candidate = phi + phi_step * point.phi_grad
                tables = edge_tables.tables(candidate)
                new_value = map_objective(beta, rows, edge_tables, tables, pair_probs)
                if new_value - point.value >= eta * phi_step * slope:
                    break
                phi_step *= gamma
            else:
                break
            gain, phi, phi_step = new_value - point.value, candidate, phi_step / gamma
            point = _evaluate(beta, tables, rows, edge_tables, pair_probs)
            if gain < tol / steps:
                break
        prior = edge_tables.log_prior(point.tables, n)
        for _ in range(steps):  # beta at fixed tables
            trial = armijo_step(
                beta[upper],
                point.beta_grad[upper],
                m,
                point.value,
                beta_step,
                gamma,
                eta,
                lambda w: structure_objective(w, rows, point.table) + prior,
            )
            if trial is None:
                break
            gain, beta, beta_step = (
                trial[1] - point.value,
                full_weights(trial[0], m),
                min(1.0, trial[2] / gamma),
            )
            point = _evaluate(beta, point.tables, rows, edge_tables, pair_probs)
            if gain < tol / steps:
                break
        history.append(point.value)
        if point.value - round_start < tol:
            break
    return beta, edge_tables.full(point.tables, pair_probs), np.array(history)


class _Point(NamedTuple):
    value: float  # MAP objective per row
    beta_grad: np.ndarray  # (M, M)
    phi_grad: np.ndarray  # (P, K, K)
    tables: np.ndarray  # (P, K, K)
    table: np.ndarray  # the ratio table (M, M, K, K) of the row weights


def _evaluate(beta, tables, rows, edge_tables, base):
    """The MAP objective and its gradients in beta and phi at the pair ``tables`` (those of the
    current phi) from one pass over the rows."""
    table = ratio_table(edge_tables.node, edge_tables.full(tables, base))
    value, beta_grad, sums = objective_and_cell_sums(beta, rows, table)
    n = rows.shape[0]
    return _Point(
        value + edge_tables.log_prior(tables, n),
        beta_grad,
        edge_tables.phi_gradient(beta, tables, sums, n),
        tables,
        table,
    )
