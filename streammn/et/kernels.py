"""Matrix-tree kernels for the ensemble-of-trees model, batched over rows.

The ET density (Lin et al. 2009, Eq. 6) needs, for every row x, the sum over all spanning trees
of products of edge weights w_uv(x). By the (weighted) matrix-tree theorem that sum is the
determinant of the Laplacian L(w) = diag(W 1) - W with one row and column deleted. For positive
weights on a connected graph the reduced Laplacian is symmetric positive definite, so the
log-determinant comes from a Cholesky factorisation (2 * sum log diag), which is stable and needs
no inverse. Cost: O(N M^3) for N rows of M variables (one (M-1)x(M-1) factorisation per row),
done by numpy's batched LAPACK calls over a (N, M-1, M-1) stack.
"""

import numpy as np


def reduced_laplacians(weights):
    """Stack of reduced Laplacians, shape (N, M-1, M-1), from symmetric weights (N, M, M).

    The diagonal of ``weights`` is ignored; the last variable's row and column are deleted.
    """
    w = np.array(weights, dtype=np.float64, copy=True)
    m = w.shape[-1]
    idx = np.arange(m)
    w[..., idx, idx] = 0.0
    lap = -w
    lap[..., idx, idx] = w.sum(axis=-1)
    return lap[..., : m - 1, : m - 1]


def log_spanning_tree_sums(weights):
    """log of the sum over spanning trees of the product of edge weights, per row, shape (N,).

    ``weights`` is (N, M, M) symmetric with strictly positive off-diagonal entries.
    """
    lap = reduced_laplacians(weights)
    if lap.shape[-1] == 0:
        return np.zeros(lap.shape[0])
    chol = np.linalg.cholesky(lap)
    return 2.0 * np.log(np.diagonal(chol, axis1=-2, axis2=-1)).sum(axis=-1)


def edge_ratios(rows, node_probs, pair_probs):
    """w_uv(x) / beta_uv = theta_uv(x_u, x_v) / (theta_u(x_u) theta_v(x_v)) per row, (N, M, M).

    ``node_probs`` is (M, K), ``pair_probs`` is (M, M, K, K) with strictly positive entries
    (smoothed estimates), ``rows`` is (N, M) integer states.
    """
    n, m = rows.shape
    u = np.arange(m)[:, None]
    v = np.arange(m)[None, :]
    xu = rows[:, :, None]
    xv = rows[:, None, :]
    joint = pair_probs[u, v, xu, xv]
    marg = node_probs[np.arange(m), rows]
    return joint / (marg[:, :, None] * marg[:, None, :])


def et_log_likelihood(rows, beta, node_probs, pair_probs):
    """Exact per-row log P(x) of the ET model (Eq. 6), shape (N,).

    log P(x) = sum_u log theta_u(x_u) + log det L(beta * ratio(x)) - log det L(beta).
    """
    m = rows.shape[1]
    beta = np.asarray(beta, dtype=np.float64)
    node_term = np.log(node_probs[np.arange(m), rows]).sum(axis=1)
    log_z = log_spanning_tree_sums(beta[None])[0]
    return node_term + log_spanning_tree_sums(beta[None] * edge_ratios(rows, node_probs, pair_probs)) - log_z


def effective_resistances(weights):
    """(e_u - e_v)^T L^-1 (e_u - e_v) for every pair, shape (N, M, M): d log det / d w_uv.

    Uses one batched solve against the identity of the reduced Laplacian (the deleted variable's
    indicator vector is zero). Cost O(N M^3).
    """
    lap = reduced_laplacians(weights)
    n, r = lap.shape[0], lap.shape[-1]
    g = np.zeros((n, r + 1, r + 1))
    g[:, :r, :r] = np.linalg.solve(lap, np.broadcast_to(np.eye(r), lap.shape))
    d = np.diagonal(g, axis1=-2, axis2=-1)
    return d[:, :, None] + d[:, None, :] - g - g.transpose(0, 2, 1)


def structure_objective(beta, ratios, bound=False):
    """The value of :func:`structure_objective_and_gradient` alone (Cholesky only, no solve)."""
    beta = np.asarray(beta, dtype=np.float64)
    value = log_spanning_tree_sums(beta[None] * ratios).mean()
    return value if bound else value - log_spanning_tree_sums(beta[None])[0]


def structure_objective_and_gradient(beta, ratios, bound=False):
    """Mean over rows of log det L(beta * r(x)) - log det L(beta), and its gradient in beta.

    ``ratios`` is (N, M, M) from :func:`edge_ratios`; the gradient (M, M) is symmetric with a
    zero diagonal (entry uv is the derivative along the symmetric pair beta_uv = beta_vu).
    With ``bound=True`` the normaliser term is dropped: the concave data term of Eq. 14, whose
    maximiser over the simplex is the paper's convex-upper-bound initialisation.
    """
    beta = np.asarray(beta, dtype=np.float64)
    weighted = beta[None] * ratios
    value = log_spanning_tree_sums(weighted).mean()
    grad = (ratios * effective_resistances(weighted)).mean(axis=0)
    if not bound:
        value -= log_spanning_tree_sums(beta[None])[0]
        grad -= effective_resistances(beta[None])[0]
    np.fill_diagonal(grad, 0.0)
    return value, grad


def project_to_simplex(values):
    """Euclidean projection of a vector onto {b >= 0, sum b = 1} (sort-based, O(E log E))."""
    s = np.sort(values)[::-1]
    cumulative = np.cumsum(s) - 1.0
    k = np.arange(1, len(s) + 1)
    rho = np.nonzero(s - cumulative / k > 0)[0][-1]
    return np.maximum(values - cumulative[rho] / (rho + 1), 0.0)


def projected_gradient_ascent(beta, ratios, max_iter=100, gamma=0.5, eta=0.01, step=1.0, tol=1e-9,
                              bound=False):
    """Maximise the structural objective (``bound``: the Eq. 14 data term) over the simplex of
    edge weights with Armijo steps.

    Each iteration tries beta' = P(beta + s g) for s = step, step*gamma, ... and accepts the first
    s with f(beta') - f(beta) >= eta * g . (beta' - beta) (Armijo along the projection arc).
    The trial steps need the objective only; the gradient is computed at the accepted point.
    After the first iteration the trial steps start at twice the last accepted one (capped at
    ``step``), so a well-scaled step is not rediscovered from ``step`` every time.
    Returns (beta, objective values per accepted iteration).
    """
    m = beta.shape[0]
    iu = np.triu_indices(m, 1)
    b = np.asarray(beta, dtype=np.float64)[iu]

    def full(vec):
        out = np.zeros((m, m))
        out[iu] = vec
        return out + out.T

    value, grad = structure_objective_and_gradient(full(b), ratios, bound)
    history = [value]
    s = step * gamma
    for _ in range(max_iter):
        g = grad[iu]
        s = min(step, s / gamma)
        while s > 1e-12:
            candidate = project_to_simplex(b + s * g)
            if not _connected(full(candidate)):
                s *= gamma
                continue
            new_value = structure_objective(full(candidate), ratios, bound)
            if new_value - value >= eta * g @ (candidate - b):
                break
            s *= gamma
        else:
            break
        improvement = new_value - value
        b, value = candidate, new_value
        grad = structure_objective_and_gradient(full(b), ratios, bound)[1]
        history.append(value)
        if improvement < tol:
            break
    return full(b), np.array(history)


def _connected(weights):
    """Whether the positive-weight graph spans all variables (the reduced Laplacian is then SPD)."""
    m = weights.shape[0]
    seen = np.zeros(m, dtype=bool)
    stack = [0]
    seen[0] = True
    while stack:
        u = stack.pop()
        for v in np.nonzero((weights[u] > 0) & ~seen)[0]:
            seen[v] = True
            stack.append(v)
    return bool(seen.all())
