"""Each variable's conditional distribution given the others, over a whole row sample.

Both the pseudo-likelihood objective (value and gradient, evaluated 20-odd times per grafting
step) and the pseudo-likelihood activation scores need ``P(x_v = a | x_-v)`` for every row: it
is the hot loop of grafting at its defaults, so it is arranged for speed:

- rows are held column-major (one contiguous ``uint8`` column per variable, :func:`columns`)
  and a variable's conditionals are computed for all rows at once, state by state
  (``probs[a, r]``), streaming through the neighbours' columns;
- the unnormalised conditional is a *product* of exponentiated tables,
  ``exp(theta_v[a]) * prod_k exp(theta_k[a, x_k])``, every table shifted by its maximum so its
  entries lie in (0, 1] (:func:`shifted_exp`, once per evaluation): no ``exp`` per row and
  state, one ``log`` per row. A row whose product underflows (a table spread over hundreds of
  nats, which only far-off line-search trials produce) is redone by log-sum-exp, so results
  equal the plain log-domain computation up to rounding.

The gradient of the negative log pseudo-likelihood with respect to a table is the sum over rows
of the residuals ``P(x_v = a | x_-v) - [x_v = a]`` placed at the cells the rows select; the same
residuals give the activation scores of inactive pairs (:mod:`streammn.grafting.pseudo_score`).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from streammn.grafting.mrf import PairwiseLayout

UNDERFLOW = 1e-250  # a row's normaliser (or its observed state's mass) below this: log domain
PASS_BLOCKS = 8  # row blocks of a pseudo-likelihood pass, run in parallel
PASS_BLOCK_ROWS = 2048  # rows a block has at least (fewer rows: fewer blocks, down to one)


def columns(rows) -> np.ndarray:
    """The rows as contiguous columns (n_vars x n_rows, uint8)."""
    return np.ascontiguousarray(np.asarray(rows, dtype=np.uint8).T)


def shifted_exp(layout: PairwiseLayout, theta) -> np.ndarray:
    """``exp(theta - max)`` of every table (node and edge) of the flat parameter vector."""
    starts, sizes = layout.group_bounds()
    return _shifted_exp(np.ascontiguousarray(theta, dtype=np.float64), starts, starts + sizes)


@nb.njit(cache=True)
def _shifted_exp(theta, starts, ends):
    out = np.empty(theta.shape[0])
    for g in range(starts.shape[0]):
        s, e = starts[g], ends[g]
        if e <= s:
            continue
        mx = theta[s]
        for c in range(s + 1, e):
            mx = max(mx, theta[c])
        for c in range(s, e):
            out[c] = np.exp(theta[c] - mx)
    return out


@nb.njit(cache=True, inline="always")
def _across(k, v, edges, cards):
    """Edge ``k`` seen from ``v``: the neighbour, and the strides of ``v``'s value and of the
    neighbour's value in the edge's row-major table."""
    i, j = edges[k, 0], edges[k, 1]
    if i == v:
        return j, cards[j], 1
    return i, 1, cards[j]


@nb.njit(cache=True, inline="always")
def _edge_cells(v, cols, cards, edges, eoff, adj_ptr, adj_edge, flat, probs, gather):
    """Walk ``v``'s edge tables at the cells every row selects (``v``'s state ``a``, the
    neighbour's value in the row). ``gather``: multiply ``probs[a, r]`` by the cell of ``flat``
    (the conditionals' product); else add ``probs[a, r]`` into it (the gradient's scatter)."""
    n = cols.shape[1]
    for q in range(adj_ptr[v], adj_ptr[v + 1]):
        k = adj_edge[q]
        u, sa, sb = _across(k, v, edges, cards)
        col = cols[u]
        for a in range(cards[v]):
            base = eoff[k] + a * sa
            if gather:
                for r in range(n):
                    probs[a, r] *= flat[base + col[r] * sb]
            else:
                for r in range(n):
                    flat[base + col[r] * sb] += probs[a, r]


@nb.njit(cache=True)
def _log_domain_row(r, v, cols, cards, uoff, theta, edges, eoff, adj_ptr, adj_edge, probs):
    """Row ``r``'s conditional of ``v`` by log-sum-exp into ``probs[:, r]`` (the underflow
    fallback); returns ``log P(x_v | x_-v)`` of the row's value."""
    c = cards[v]
    for a in range(c):
        probs[a, r] = theta[uoff[v] + a]
    for q in range(adj_ptr[v], adj_ptr[v + 1]):
        k = adj_edge[q]
        u, sa, sb = _across(k, v, edges, cards)
        base = eoff[k] + cols[u, r] * sb
        for a in range(c):
            probs[a, r] += theta[base + a * sa]
    mx = probs[0, r]
    for a in range(1, c):
        mx = max(mx, probs[a, r])
    total = 0.0
    for a in range(c):
        total += np.exp(probs[a, r] - mx)
    z = mx + np.log(total)
    logp = probs[cols[v, r], r] - z
    for a in range(c):
        probs[a, r] = np.exp(probs[a, r] - z)
    return logp


@nb.njit(cache=True)
def conditionals(v, cols, cards, uoff, theta, etab, edges, eoff, adj_ptr, adj_edge, probs, logp):
    """``probs[a, r] = P(x_v = a | x_-v)`` for every row ``r`` and ``logp[r]`` the log of it at
    the row's own value (``etab``: :func:`shifted_exp` of ``theta``)."""
    n = cols.shape[1]
    c = cards[v]
    for a in range(c):
        e = etab[uoff[v] + a]
        for r in range(n):
            probs[a, r] = e
    _edge_cells(v, cols, cards, edges, eoff, adj_ptr, adj_edge, etab, probs, True)
    own = cols[v]
    for r in range(n):
        total = 0.0
        for a in range(c):
            total += probs[a, r]
        px = probs[own[r], r]
        if total < UNDERFLOW or px < UNDERFLOW * total:
            logp[r] = _log_domain_row(
                r, v, cols, cards, uoff, theta, edges, eoff, adj_ptr, adj_edge, probs
            )
            continue
        inv = 1.0 / total
        for a in range(c):
            probs[a, r] *= inv
        logp[r] = np.log(px * inv)


@nb.njit(cache=True)
def residuals(v, cols, cards, uoff, theta, etab, edges, eoff, adj_ptr, adj_edge, out, logp):
    """``out[a, r] = P(x_v = a | x_-v) - [x_rv = a]`` (card_v x n_rows), and ``logp`` as in
    :func:`conditionals`."""
    conditionals(v, cols, cards, uoff, theta, etab, edges, eoff, adj_ptr, adj_edge, out, logp)
    own = cols[v]
    for r in range(cols.shape[1]):
        out[own[r], r] -= 1.0


@nb.njit(cache=True, parallel=True)
def pseudo_loglik_pass(
    cols, cards, uoff, theta, etab, edges, eoff, adj_ptr, adj_edge, want_grad, grad, terms
):
    """The summed ``log P(x_v | x_-v)`` over rows and variables. With ``want_grad``, adds the
    gradient of the *negative* sum to ``grad``; writes each term to ``terms[r, v]`` unless
    ``terms`` is empty.

    The rows are cut into a number of blocks that depends on the row count only (at most
    ``PASS_BLOCKS``, each of at least ``PASS_BLOCK_ROWS`` rows), the blocks run in parallel,
    each into its own gradient, and the blocks' sums are added in block order: the same bits
    at any thread count (issue 41: a stream's structure updates are mostly these passes)."""
    n = cols.shape[1]
    k = max(min(PASS_BLOCKS, n // PASS_BLOCK_ROWS), 1)
    totals = np.zeros(k)
    grads = np.zeros((k, grad.shape[0] if want_grad else 0))
    for b in nb.prange(k):
        lo, hi = b * n // k, (b + 1) * n // k
        totals[b] = _pass_block(
            cols[:, lo:hi],
            cards,
            uoff,
            theta,
            etab,
            edges,
            eoff,
            adj_ptr,
            adj_edge,
            want_grad,
            grads[b],
            terms[lo:hi],
        )
    total = 0.0
    for b in range(k):
        total += totals[b]
        if want_grad:
            grad += grads[b]
    return total


@nb.njit(cache=True)
def _pass_block(
    cols, cards, uoff, theta, etab, edges, eoff, adj_ptr, adj_edge, want_grad, grad, terms
):
    """:func:`pseudo_loglik_pass` over one block of rows, on one thread."""
    nv, n = cols.shape
    smax = 1
    for v in range(nv):
        smax = max(smax, cards[v])
    probs = np.empty((smax, n))
    logp = np.empty(n)
    total = 0.0
    for v in range(nv):
        c = cards[v]
        if want_grad:  # probs become the residuals the gradient sums
            residuals(
                v, cols, cards, uoff, theta, etab, edges, eoff, adj_ptr, adj_edge, probs, logp
            )
        else:
            conditionals(
                v, cols, cards, uoff, theta, etab, edges, eoff, adj_ptr, adj_edge, probs, logp
            )
        for r in range(n):
            total += logp[r]
        if terms.shape[0]:
            for r in range(n):
                terms[r, v] = logp[r]
        if not want_grad:
            continue
        for a in range(c):
            g = 0.0
            for r in range(n):
                g += probs[a, r]
            grad[uoff[v] + a] += g
        _edge_cells(v, cols, cards, edges, eoff, adj_ptr, adj_edge, grad, probs, False)
    return total
