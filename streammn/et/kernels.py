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
