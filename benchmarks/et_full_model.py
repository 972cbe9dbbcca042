"""Experiment (issue 14): the full ET model of Eq. 7 and random PGD restarts on binary networks.

Why. At the paper's sample sizes the simplified ET (Section 2.2: plug-in theta, beta on the
simplex) misses the weak couplings of the dense networks, and et_diagnosis.md shows that the
Eq. 9 optimum itself leaves them out. Two things the paper names could change that optimum:

- The full model of Meila & Jaakkola (Eq. 7), where the edge distributions theta_uv are learned
  by maximum likelihood with beta instead of plugged in. Here for binary variables with the
  node distributions held at their estimates (the learner's smoothed theta_u), so each edge
  table has one free parameter under the marginal-consistency constraints of Eq. 7: its log odds
  ratio ``psi_uv``. The table with margins ``a = theta_u(1)``, ``b = theta_v(1)`` and odds ratio
  ``e^psi`` has ``p11`` the root in ``[max(0, a + b - 1), min(a, b)]`` of
  ``(e^psi - 1) p^2 - (1 + (e^psi - 1)(a + b)) p + e^psi a b = 0``, and
  ``dp11 / dpsi = 1 / (1/p11 + 1/p10 + 1/p01 + 1/p00)``. The objective's derivative in
  ``p11`` is ``beta_uv / N sum_ab s(a, b) S[u, v, a, b] / (theta_u(a) theta_v(b))`` with
  ``s = +1`` on the diagonal cells and -1 off it and ``S`` the per-cell resistance sums of
  :func:`streammn.et.kernels.cell_resistance_sums`. The fit alternates rounds of gradient
  ascent in ``psi`` (Armijo steps, all pairs at once) and the learner's beta PGD, from the
  learner's fitted beta and theta, until a round gains less than ``tol`` nats per row. Each round
  is scored on the training rows, on held-out rows of the same Gibbs chain and by Hamming
  distance at the learner's threshold (rho > 2 / M). Besides the maximum likelihood of Eq. 7,
  the MAP fit under the learner's own Dirichlet prior (``alpha / 4`` pseudo-counts per cell, the
  prior whose posterior mean is the learner's smoothed table; :func:`log_prior`).
- Random restarts of PGD (the alternative the paper gives to its Eq. 14 start): beta drawn from a
  Dirichlet over all pairs, PGD to convergence, objective and Hamming of each.

This is the benchmark's own implementation (binary, log odds ratios), independent of
:mod:`streammn.et.edge_tables` (any cardinality, Sinkhorn scaling), which fits the MAP model as
the learner's ``learn_theta`` option. Results: et_diagnosis.md, "The full model".
"""

from __future__ import annotations

import time

import numpy as np

from streammn.et.density import edge_appearance, graph_edges, refine_beta
from streammn.et.kernels import (
    cell_resistance_sums,
    log_spanning_tree_sums,
    ratio_table,
    structure_objective,
)

DIAGONAL = np.array([[1.0, -1.0], [-1.0, 1.0]])  # d table / d p11 at fixed margins


def log_odds(pair):
    """Log odds ratio of every binary pair table, (M, M)."""
    return np.log(pair[..., 1, 1] * pair[..., 0, 0] / (pair[..., 1, 0] * pair[..., 0, 1]))


def pair_from_log_odds(psi, node):
    """Binary pair tables (M, M, 2, 2) with margins ``node[u]``, ``node[v]`` and log odds
    ratio ``psi`` (symmetric, diagonal ignored)."""
    a, b = node[:, 1][:, None] + 0 * psi, node[:, 1][None, :] + 0 * psi
    odds = np.exp(psi)
    d = odds - 1.0
    lin = 1.0 + d * (a + b)
    root = np.sqrt(np.maximum(lin * lin - 4.0 * d * odds * a * b, 0.0))
    near_one = np.abs(d) < 1e-9
    p11 = np.where(near_one, a * b, (lin - root) / (2.0 * np.where(near_one, 1.0, d)))
    p11 = np.clip(p11, np.maximum(0.0, a + b - 1.0) + 1e-15, np.minimum(a, b) - 1e-15)
    pair = np.empty(psi.shape + (2, 2))
    pair[..., 1, 1], pair[..., 1, 0], pair[..., 0, 1] = p11, a - p11, b - p11
    pair[..., 0, 0] = 1.0 - a - b + p11
    return pair


def objective(beta, rows, node, psi):
    """Mean per-row Eq. 7 objective without the node term (constant here): Eq. 9's form."""
    return structure_objective(beta, rows, ratio_table(node, pair_from_log_odds(psi, node)))


def log_prior(psi, node, prior, n_rows):
    """Dirichlet log prior of the edge tables per row: ``prior / N sum_{u<v} sum_ab log
    theta_uv(a, b)``. With ``prior = alpha / 4`` a lone table's maximum is the learner's smoothed
    estimate ``(n_ab + alpha / 4) / (N + alpha)``, so the MAP fit carries the learner's prior."""
    if prior == 0.0:
        return 0.0
    upper = np.triu_indices(psi.shape[0], 1)
    return prior / n_rows * np.log(pair_from_log_odds(psi, node)[upper]).sum()


def map_objective(beta, rows, node, psi, prior):
    return objective(beta, rows, node, psi) + log_prior(psi, node, prior, rows.shape[0])


def map_objective_and_log_odds_gradient(beta, rows, node, psi, prior):
    pair = pair_from_log_odds(psi, node)
    log_dets, sums = cell_resistance_sums(rows, beta, ratio_table(node, pair))
    n = rows.shape[0]
    margins = node[:, None, :, None] * node[None, :, None, :]
    d_p11 = beta * (DIAGONAL * sums / margins).sum(axis=(2, 3)) / n
    d_p11 += prior / n * (DIAGONAL / pair).sum(axis=(2, 3))
    grad = np.triu(d_p11, 1) / (
        1 / pair[..., 1, 1] + 1 / pair[..., 0, 0] + 1 / pair[..., 1, 0] + 1 / pair[..., 0, 1]
    )
    value = log_dets.mean() - log_spanning_tree_sums(beta[None])[0]
    return value + log_prior(psi, node, prior, n), grad + grad.T


def ascend_log_odds(beta, rows, node, psi, prior=0.0, max_iter=20, tol=1e-5, gamma=0.5, eta=0.01):
    """Gradient ascent in psi at fixed beta with Armijo steps (without a prior, pairs with
    beta = 0 have zero gradient and stay put); returns ``(psi, MAP objective)``."""
    value, grad = map_objective_and_log_odds_gradient(beta, rows, node, psi, prior)
    step = 1.0
    for _ in range(max_iter):
        while step > 1e-10:
            candidate = psi + step * grad
            new_value = map_objective(beta, rows, node, candidate, prior)
            if new_value - value >= eta * step * (grad * grad).sum() / 2:  # each pair counted twice
                break
            step *= gamma
        else:
            break
        gain = new_value - value
        psi = candidate
        value, grad = map_objective_and_log_odds_gradient(beta, rows, node, psi, prior)
        step /= gamma
        if gain < tol:
            break
    return psi, value


def score(beta, truth):
    found = set(graph_edges(edge_appearance(beta)))
    return {
        "hamming": len(found ^ truth),
        "missed": len(truth - found),
        "added": len(found - truth),
        "edges": len(found),
        "support": int((np.triu(beta, 1) > 0).sum()),
    }


def full_model(learner, truth, test_rows, prior=0.0, tol=1e-4, max_rounds=40, theta_iter=20):
    """Alternate psi ascent and beta PGD on the (MAP with ``prior``) Eq. 7 objective from the
    learner's fit; one record per round (round 0 is the learner's own fit; objectives are the
    likelihood part). Returns ``(records, beta, psi)``."""
    rows = learner.sample.rows
    node, pair = learner.theta()
    node = node[:, :2]
    psi = log_odds(pair)
    np.fill_diagonal(psi, 0.0)
    beta = learner.beta
    value = map_objective(beta, rows, node, psi, prior)
    t0 = time.process_time()

    def record(k, likelihood):
        return {
            "round": k,
            "objective": float(likelihood),
            "test_objective": float(objective(beta, test_rows, node, psi)),
            "cpu_seconds": round(time.process_time() - t0, 1),
            **score(beta, truth),
        }

    records = [record(0, objective(beta, rows, node, psi))]
    for k in range(1, max_rounds + 1):
        psi, _ = ascend_log_odds(beta, rows, node, psi, prior, max_iter=theta_iter)
        table = ratio_table(node, pair_from_log_odds(psi, node))
        beta, history = refine_beta(beta, rows, table, learner.max_iter, learner.tol)
        records.append(record(k, history[-1]))
        print(records[-1], flush=True)
        new_value = history[-1] + log_prior(psi, node, prior, rows.shape[0])
        if new_value - value < tol:
            break
        value = new_value
    return records, beta, psi


def random_restarts(learner, truth, test_rows, n_starts, seed=0):
    """PGD on Eq. 9 (the learner's theta) from ``n_starts`` Dirichlet draws of beta over all
    pairs (concentration 1 and 0.1 alternately), run to 1e-5 or 300 iterations."""
    rows = learner.sample.rows
    node, pair = learner.theta()
    table = ratio_table(node, pair)
    m = rows.shape[1]
    upper = np.triu_indices(m, 1)
    rng = np.random.default_rng(seed)
    records = []
    for start in range(n_starts):
        t0 = time.process_time()
        beta = np.zeros((m, m))
        beta[upper] = rng.dirichlet(np.full(len(upper[0]), 0.1 if start % 2 else 1.0))
        beta, history = refine_beta(beta + beta.T, rows, table, 300, 1e-5)
        records.append(
            {
                "start": start,
                "objective": float(history[-1]),
                "test_objective": float(structure_objective(beta, test_rows, table)),
                "iterations": len(history) - 1,
                "cpu_seconds": round(time.process_time() - t0, 1),
                **score(beta, truth),
            }
        )
        print(records[-1], flush=True)
    return records
