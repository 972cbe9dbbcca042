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
from streammn.errors import GraftingError


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
    messages: np.ndarray


@nb.njit(cache=True)
def _lse(x):
    m = x.max()
    return m + np.log(np.exp(x - m).sum())


@nb.njit(cache=True)
def _lse_n(x, n):
    """log-sum-exp of ``x[:n]`` without temporaries."""
    m = x[0]
    for a in range(1, n):
        m = max(m, x[a])
    t = 0.0
    for a in range(n):
        t += np.exp(x[a] - m)
    return m + np.log(t)


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
def _send(h, nh, ex, base, stride_in, stride_out, nout, shift, damping, msgs, off, tmp, out):
    """One log-space message: ``out[b] = logsumexp_a(h[a] + theta(a, b))``, computed as
    ``max h + shift[b] + log sum_a exp(h[a] - max h) * ex[a, b]`` with ``ex`` the potentials
    exponentiated once per BP call relative to ``shift`` (their max over a); then normalised,
    damped against the old message ``msgs[off:off + nout]`` and normalised again. Returns the
    largest change."""
    hm = h[0]
    for a in range(1, nh):
        hm = max(hm, h[a])
    for a in range(nh):
        tmp[a] = np.exp(h[a] - hm)
    for b in range(nout):
        t = 0.0
        for a in range(nh):
            t += tmp[a] * ex[base + a * stride_in + b * stride_out]
        out[b] = hm + shift[b] + np.log(max(t, 1e-300))
    z = _lse_n(out, nout)
    for b in range(nout):
        out[b] = (1.0 - damping) * (out[b] - z) + damping * msgs[off + b]
    z = _lse_n(out, nout)
    delta = 0.0
    for b in range(nout):
        out[b] -= z
        delta = max(delta, abs(out[b] - msgs[off + b]))
    return delta


@nb.njit(cache=True)
def _run_bp(cards, uoff, theta, edges, eoff, adj_ptr, adj_edge, damping, tol, max_iter, msgs):
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
    # exponentiated potentials: ecol relative to each column's max (messages i -> j), erow
    # relative to each row's max (messages j -> i); cmax / rmax laid out like the messages
    ecol = np.empty(eoff[m])
    erow = np.empty(eoff[m])
    shift = np.empty(total)
    for k in range(m):
        ci, cj = cards[edges[k, 0]], cards[edges[k, 1]]
        base = eoff[k]
        for b in range(cj):
            mx = theta[base + b]
            for a in range(1, ci):
                mx = max(mx, theta[base + a * cj + b])
            shift[moff_j[k] + b] = mx
            for a in range(ci):
                ecol[base + a * cj + b] = np.exp(theta[base + a * cj + b] - mx)
        for a in range(ci):
            mx = theta[base + a * cj]
            for b in range(1, cj):
                mx = max(mx, theta[base + a * cj + b])
            shift[moff_i[k] + a] = mx
            for b in range(cj):
                erow[base + a * cj + b] = np.exp(theta[base + a * cj + b] - mx)
    new = np.zeros(total)
    logb = np.empty(uoff[n])
    smax = 1
    for v in range(n):
        smax = max(smax, cards[v])
    h = np.empty(smax)
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
            for to_i in range(2):  # i -> j, then j -> i: from u to w
                u, w = (j, i) if to_i else (i, j)
                into, off = (moff_j[k], moff_i[k]) if to_i else (moff_i[k], moff_j[k])
                ex = erow if to_i else ecol
                cu, cw = cards[u], cards[w]
                # the edge's entry for (u = a, w = b) sits at a * stride_in + b * stride_out
                stride_in, stride_out = (1, cu) if to_i else (cw, 1)
                for a in range(cu):  # h = belief_u - message w -> u
                    h[a] = logb[uoff[u] + a] - msgs[into + a]
                shift_w = shift[off : off + cw]
                d = _send(
                    h,
                    cu,
                    ex,
                    eoff[k],
                    stride_in,
                    stride_out,
                    cw,
                    shift_w,
                    damping,
                    msgs,
                    off,
                    tmp,
                    out,
                )
                for b in range(cw):
                    new[off + b] = out[b]
                delta = max(delta, d)
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
                marg[base + a * cj + b] = (
                    logb[uoff[i] + a]
                    - msgs[moff_i[k] + a]
                    + logb[uoff[j] + b]
                    - msgs[moff_j[k] + b]
                    + theta[base + a * cj + b]
                )
        z = _lse(marg[base : base + ci * cj])
        for c in range(ci * cj):
            lp = marg[base + c] - z
            p = np.exp(lp)
            marg[base + c] = p
            log_z += p * theta[base + c] - p * lp  # E[theta_ij] + H(b_ij)
    return marg, log_z, it, converged


def message_size(layout: PairwiseLayout) -> int:
    """Length of the message vector: for every edge in order, its two directed messages.
    Edges appended to a layout keep the earlier edges' messages as a prefix (warm starts)."""
    e = layout.edges
    return int((layout.cards[e[:, 0]] + layout.cards[e[:, 1]]).sum())


def belief_propagation(
    layout: PairwiseLayout,
    theta,
    damping: float = 0.5,
    tol: float = 1e-6,
    max_iter: int = 200,
    messages: np.ndarray | None = None,
) -> BPResult:
    """Node and edge marginals of the MRF ``(layout, theta)`` by loopy BP.

    ``damping`` in [0, 1) mixes each new message with the old one (0: plain BP); ``tol`` is the
    convergence threshold on the largest log-message change; ``max_iter`` caps the sweeps (the
    result then carries ``converged=False``). ``messages`` (log messages of an earlier run,
    see :func:`message_size`) warm-starts the iteration and is updated in place; a prefix
    shorter than needed is extended with uniform messages.
    """
    if not 0.0 <= damping < 1.0:
        raise GraftingError(f"damping must be in [0, 1), got {damping}")
    theta = np.ascontiguousarray(theta, dtype=np.float64)
    if theta.shape != (layout.size,):
        raise GraftingError(f"theta has {theta.shape} entries, layout needs {layout.size}")
    size = message_size(layout)
    msgs = np.zeros(size)
    if messages is not None:
        k = min(size, messages.shape[0])
        msgs[:k] = messages[:k]
    marg, log_z, it, conv = _run_bp(
        layout.cards,
        layout.uoff,
        theta,
        layout.edges,
        layout.eoff,
        layout.adj_ptr,
        layout.adj_edge,
        float(damping),
        float(tol),
        int(max_iter),
        msgs,
    )
    return BPResult(marg, float(log_z), int(it), bool(conv), msgs)
