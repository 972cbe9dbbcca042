"""Loopy belief propagation on a pairwise MRF (log space, damped, synchronous updates).

Grafting needs the model's node and edge marginals twice: for the likelihood gradient of the
active parameters (``E_model[f] - E_data[f]``) and for the activation score of an inactive edge
(the product of its two node marginals). Exact inference is out of reach for hundreds of
5-state variables, so, as in the paper, marginals come from loopy BP on the active graph. On a
tree BP is exact; on a loopy graph it is the Bethe approximation, and the Bethe free energy
gives ``log Z`` consistently with those marginals (its gradient at a fixed point is the BP
marginals), which keeps L-BFGS's function values and gradients in agreement.

Messages are normalised log vectors. Each sweep recomputes every node's log belief from the
current messages, then every directed message ``i -> j``:
``m(b) = logsumexp_a(belief_i(a) - m_{j->i}(a) + theta_ij(a, b))``, mixed with the old one as
``(1 - damping) * new + damping * old``. Iteration stops when no message moves more than
``tol`` (max absolute change in log space) or after ``max_iter`` sweeps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from streammn.grafting.mrf import PairwiseLayout


@dataclass(frozen=True)
class BPResult:
    """Marginals of a BP run, in the flat layout of the parameters.

    ``marginals[uoff[i]:uoff[i+1]]`` is ``P(X_i)``, ``marginals[eoff[k]:eoff[k+1]]`` is the
    row-major pairwise marginal of edge k. ``log_z`` is the Bethe estimate of ``log Z`` (exact
    on trees).
    """

    marginals: np.ndarray
    log_z: float
    iterations: int
    converged: bool


@nb.njit(cache=True)
def _lse(x):
    m = x.max()
    return m + np.log(np.exp(x - m).sum())


@nb.njit(cache=True)
def _beliefs(cards, uoff, theta, edges, adj_ptr, adj_edge, moff_j, moff_i, msgs, logb):
    n = cards.shape[0]
    for v in range(n):
        for a in range(cards[v]):
            logb[uoff[v] + a] = theta[uoff[v] + a]
        for q in range(adj_ptr[v], adj_ptr[v + 1]):
            k = adj_edge[q]
            off = moff_j[k] if edges[k, 1] == v else moff_i[k]
            for a in range(cards[v]):
                logb[uoff[v] + a] += msgs[off + a]


@nb.njit(cache=True)
def _run_bp(cards, uoff, theta, edges, eoff, adj_ptr, adj_edge, damping, tol, max_iter):
    n = cards.shape[0]
    m = edges.shape[0]
    moff_j = np.empty(m, np.int64)  # message i -> j (length card_j)
    moff_i = np.empty(m, np.int64)  # message j -> i (length card_i)
    total = 0
    for k in range(m):
        moff_j[k] = total
        total += cards[edges[k, 1]]
        moff_i[k] = total
        total += cards[edges[k, 0]]
    msgs = np.zeros(total)
    new = np.zeros(total)
    logb = np.empty(uoff[n])
    smax = 1
    for v in range(n):
        smax = max(smax, cards[v])
    tmp = np.empty(smax)
    out = np.empty(smax)
    it = 0
    converged = m == 0
    while it < max_iter and not converged:
        it += 1
        _beliefs(cards, uoff, theta, edges, adj_ptr, adj_edge, moff_j, moff_i, msgs, logb)
        delta = 0.0
        for k in range(m):
            i, j = edges[k, 0], edges[k, 1]
            ci, cj = cards[i], cards[j]
            base = eoff[k]
            # i -> j
            for b in range(cj):
                for a in range(ci):
                    tmp[a] = logb[uoff[i] + a] - msgs[moff_i[k] + a] + theta[base + a * cj + b]
                out[b] = _lse(tmp[:ci])
            z = _lse(out[:cj])
            for b in range(cj):
                val = (1.0 - damping) * (out[b] - z) + damping * msgs[moff_j[k] + b]
                new[moff_j[k] + b] = val
            z = _lse(new[moff_j[k]:moff_j[k] + cj])
            for b in range(cj):
                new[moff_j[k] + b] -= z
                delta = max(delta, abs(new[moff_j[k] + b] - msgs[moff_j[k] + b]))
            # j -> i
            for a in range(ci):
                for b in range(cj):
                    tmp[b] = logb[uoff[j] + b] - msgs[moff_j[k] + b] + theta[base + a * cj + b]
                out[a] = _lse(tmp[:cj])
            z = _lse(out[:ci])
            for a in range(ci):
                new[moff_i[k] + a] = (1.0 - damping) * (out[a] - z) + damping * msgs[moff_i[k] + a]
            z = _lse(new[moff_i[k]:moff_i[k] + ci])
            for a in range(ci):
                new[moff_i[k] + a] -= z
                delta = max(delta, abs(new[moff_i[k] + a] - msgs[moff_i[k] + a]))
        msgs[:] = new
        converged = delta < tol
    # marginals and the Bethe log partition function
    _beliefs(cards, uoff, theta, edges, adj_ptr, adj_edge, moff_j, moff_i, msgs, logb)
    marg = np.empty(eoff[m])
    log_z = 0.0
    for v in range(n):
        s, e = uoff[v], uoff[v + 1]
        z = _lse(logb[s:e])
        deg = adj_ptr[v + 1] - adj_ptr[v]
        for a in range(e - s):
            p = np.exp(logb[s + a] - z)
            marg[s + a] = p
            log_z += p * theta[s + a]
            if p > 0.0:
                log_z += (deg - 1) * p * np.log(p)  # - (deg - 1) * H(b_i)
    for k in range(m):
        i, j = edges[k, 0], edges[k, 1]
        ci, cj = cards[i], cards[j]
        base = eoff[k]
        for a in range(ci):
            for b in range(cj):
                marg[base + a * cj + b] = (logb[uoff[i] + a] - msgs[moff_i[k] + a]
                                           + logb[uoff[j] + b] - msgs[moff_j[k] + b]
                                           + theta[base + a * cj + b])
        z = _lse(marg[base:base + ci * cj])
        for c in range(ci * cj):
            lp = marg[base + c] - z
            p = np.exp(lp)
            marg[base + c] = p
            log_z += p * theta[base + c] - p * lp  # E[theta_ij] + H(b_ij)
    return marg, log_z, it, converged


def belief_propagation(layout: PairwiseLayout, theta, damping: float = 0.5, tol: float = 1e-6,
                       max_iter: int = 200) -> BPResult:
    """Node and edge marginals of the MRF ``(layout, theta)`` by loopy BP.

    ``damping`` in [0, 1) mixes each new message with the old one (0: plain BP); ``tol`` is the
    convergence threshold on the largest log-message change; ``max_iter`` caps the sweeps (the
    result then carries ``converged=False``).
    """
    if not 0.0 <= damping < 1.0:
        raise ValueError(f"damping must be in [0, 1), got {damping}")
    theta = np.ascontiguousarray(theta, dtype=np.float64)
    if theta.shape != (layout.size,):
        raise ValueError(f"theta has {theta.shape} entries, layout needs {layout.size}")
    marg, log_z, it, conv = _run_bp(layout.cards, layout.uoff, theta, layout.edges, layout.eoff,
                                    layout.adj_ptr, layout.adj_edge, float(damping), float(tol),
                                    int(max_iter))
    return BPResult(marg, float(log_z), int(it), bool(conv))
