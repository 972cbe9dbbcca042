"""Matrix-tree kernels for the ensemble-of-trees model, batched over rows.

The ET density (Lin et al. 2009, Eq. 6) needs, for every row x, the sum over all spanning trees
of products of edge weights w_uv(x). By the (weighted) matrix-tree theorem that sum is the
determinant of the Laplacian L(w) = diag(W 1) - W with one row and column deleted. For positive
weights on a connected graph the reduced Laplacian is symmetric positive definite, so the
log-determinant comes from a Cholesky factorisation (2 * sum log diag), which is stable and needs
no inverse. Cost: O(N M^3) for N rows of M variables (one (M-1)x(M-1) factorisation per row).

The per-row terms of the structural objective run in one numba kernel over chunks of rows in
parallel: each row's weights are looked up in the (M, M, K, K) ratio table, its Laplacian is
factorised (LAPACK Cholesky), and for the gradient the inverse comes from LAPACK's blocked LU
inverse (dgetri) applied to the Cholesky factor written as an LU factorisation: 4/3 r^3 flops
after the factorisation, against 2 r^3 for np.linalg.inv (its own LU and dgetri), and 3x faster
at M = 200 than substitution from the factor with plain loops. dgetri is scipy's public Cython
LAPACK (``scipy.linalg.cython_lapack``, the library numba's own np.linalg calls), declared to
numba by a symbol name rather than an address so that the kernels stay cacheable; numba's
private binding (``numba.np.linalg._LAPACK``) is not used, a numba release may drop it.
BLAS is held to one thread around the kernel:
the row chunks are the parallelism, and OpenBLAS starting its own threads inside every chunk's
factorisation made one 500-row evaluation at M = 200 take 98 s instead of 0.2 s on 2 shared
cores. Memory is O(M^2) per
thread, not O(N M^2). The few single matrices (the normaliser L(beta), rho) use numpy, also
with one BLAS thread: with OpenBLAS's threads on a loaded machine a single 199 x 199 Cholesky
took 0.17 s, 30% of a joint fit's time at M = 200 (profile in
``benchmarks/results/et_diagnosis.md``).
"""

import llvmlite.binding as llvm
import numba as nb
import numpy as np
from numba.extending import get_cython_function_address

from streammn.blas import blas_threads

MIN_STEP = 1e-12  # the smallest step armijo_step tries


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
    with blas_threads(1):  # see the module docstring
        chol = np.linalg.cholesky(lap)
    return 2.0 * np.log(np.diagonal(chol, axis1=-2, axis2=-1)).sum(axis=-1)


def ratio_table(node_probs, pair_probs):
    """theta_uv(a, b) / (theta_u(a) theta_v(b)) for every pair and pair of states, (M, M, K, K).

    A row's edge weights are ``w_uv(x) = beta_uv * table[u, v, x_u, x_v]``; the table is looked
    up row by row inside the kernels, so no (N, M, M) array is ever stored.
    """
    return pair_probs / (node_probs[:, None, :, None] * node_probs[None, :, None, :])


VALUES, BETA_GRADIENT, CELL_SUMS = 0, 1, 2

# LAPACK dgetri(n, a, lda, ipiv, work, lwork, info), every argument by pointer, ints 32-bit. The
# symbol is resolved by name when a kernel is linked (also one loaded from numba's cache).
_DGETRI = "streammn_et_dgetri"
llvm.add_symbol(_DGETRI, get_cython_function_address("scipy.linalg.cython_lapack", "dgetri"))
_dgetri = nb.types.ExternalFunction(_DGETRI, nb.types.void(*[nb.types.voidptr] * 7))
_N, _LWORK, _INFO = 0, 1, 2  # dgetri's int arguments in the array ``ints`` (n is also lda)


@nb.njit(cache=True)
def _getri_buffers(r):
    """``(pivots, work, ints)`` for :func:`_inverse_from_cholesky` on r x r matrices, made once
    per chunk of rows: LAPACK's 1-based identity permutation, a workspace of the size dgetri
    asks for (the size numba's np.linalg.inv uses, so the same blocked algorithm runs) and the
    int arguments."""
    pivots = np.arange(1, r + 1).astype(np.int32)
    ints = np.array([r, 1, 0], dtype=np.int32)
    if r > 0:  # (LAPACK refuses lda = 0)
        ints[_LWORK] = -1  # a query: the size comes back in the workspace's first entry
        size = np.zeros(1)
        _call_getri(size, pivots, size, ints)
        ints[_LWORK] = max(1, int(size[0]))
    return pivots, np.empty(ints[_LWORK]), ints


@nb.njit(cache=True)
def _call_getri(a, pivots, work, ints):
    """dgetri on the Fortran-order buffer ``a``; returns its ``info`` (0: done)."""
    n, lwork, info = ints[_N:], ints[_LWORK:], ints[_INFO:]
    _dgetri(n.ctypes, a.ctypes, n.ctypes, pivots.ctypes, work.ctypes, lwork.ctypes, info.ctypes)
    return ints[_INFO]


@nb.njit(cache=True)
def _inverse_from_cholesky(chol, out, pivots, work, ints):
    """``out`` = the inverse of ``chol chol^T`` (``chol`` lower triangular, C order) by dgetri
    from the Cholesky factor written as an LU factorisation without pivoting, ``(L D^-1)(D L^T)``
    with ``D = diag(L)``: saves np.linalg.inv's own LU factorisation (2/3 r^3 of its 2 r^3
    flops) since the Cholesky factor is there already. The buffer is read by LAPACK in Fortran
    order (the transpose), and the inverse is symmetric. ``pivots, work, ints``: from
    :func:`_getri_buffers`."""
    r = chol.shape[0]
    for i in range(r):
        for j in range(r):  # Fortran entry (i, j) at out[j, i]
            out[j, i] = chol[i, j] / chol[j, j] if i > j else chol[i, i] * chol[j, i]
    if r > 0 and _call_getri(out, pivots, work, ints) != 0:
        raise np.linalg.LinAlgError("singular reduced Laplacian")


@nb.njit(cache=True, parallel=True)
def _row_terms(rows, beta, table, mode, n_chunks):
    """Per row: log det of the reduced Laplacian of ``beta * table[x]`` (Cholesky) and, unless
    ``mode`` is VALUES, sums over rows of the effective resistances R_uv(x) (from the inverse),
    accumulated per chunk of rows so that the chunks run in parallel: weighted by
    ``table[u, v, x_u, x_v]`` into cell (0, 0) (BETA_GRADIENT), or unweighted into cell
    ``(x_u, x_v)`` (CELL_SUMS, the derivative of the log-determinant in every table cell)."""
    n, m = rows.shape
    r = m - 1
    k = table.shape[-1] if mode == CELL_SUMS else 1
    log_dets = np.empty(n)
    sums = np.zeros((n_chunks, m, m, k, k))
    for c in nb.prange(n_chunks):
        w = np.zeros((m, m))
        lap = np.empty((r, r))
        g = np.empty((r, r))
        pivots, work, ints = _getri_buffers(r)
        for i in range(c * n // n_chunks, (c + 1) * n // n_chunks):
            x = rows[i]
            for u in range(m):
                for v in range(u + 1, m):
                    w[u, v] = w[v, u] = beta[u, v] * table[u, v, x[u], x[v]]
            for u in range(r):
                total = 0.0
                for v in range(m):
                    total += w[u, v]
                for v in range(r):
                    lap[u, v] = -w[u, v]
                lap[u, u] = total
            chol = np.linalg.cholesky(lap)
            log_det = 0.0
            for u in range(r):
                log_det += np.log(chol[u, u])
            log_dets[i] = 2.0 * log_det
            if mode == VALUES:
                continue
            _inverse_from_cholesky(chol, g, pivots, work, ints)
            for u in range(m):
                for v in range(u + 1, m):
                    resistance = g[u, u] if v == r else g[u, u] + g[v, v] - 2.0 * g[u, v]
                    if mode == CELL_SUMS:
                        sums[c, u, v, x[u], x[v]] += resistance
                    else:
                        sums[c, u, v, 0, 0] += table[u, v, x[u], x[v]] * resistance
    return log_dets, sums


def _run_rows(rows, beta, table, mode):
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    beta = np.ascontiguousarray(beta, dtype=np.float64)
    n_chunks = max(1, min(rows.shape[0], 4 * nb.get_num_threads()))
    with blas_threads(1):  # the row chunks are the parallelism
        log_dets, sums = _row_terms(rows, beta, np.ascontiguousarray(table), mode, n_chunks)
    return log_dets, sums.sum(axis=0)


def row_log_dets(rows, beta, table, with_grad=False):
    """``(log det L(beta * table[x]) per row (N,), summed gradient (M, M) or None)``.

    One Cholesky per row for the values, plus one inverse per row for the gradient: O(N M^3),
    spread over the available threads by row chunks.
    """
    log_dets, sums = _run_rows(rows, beta, table, BETA_GRADIENT if with_grad else VALUES)
    if not with_grad:
        return log_dets, None
    grad = sums[:, :, 0, 0]
    return log_dets, grad + grad.T


def cell_resistance_sums(rows, beta, table):
    """``(log dets (N,), S (M, M, K, K))`` with ``S[u, v, a, b]`` (``u < v``; zero below the
    diagonal) the sum of R_uv(x) over the rows with ``x_u = a, x_v = b``: the derivative of the
    summed log-determinants in the row weight ``w_uv(a, b)`` is ``beta_uv S[u, v, a, b]``, so
    this gives the gradient in the edge distributions theta_uv (Eq. 7) as well as in beta
    (``sum_ab table S``). Same cost as :func:`row_log_dets` with the gradient."""
    return _run_rows(rows, beta, table, CELL_SUMS)


def et_log_likelihood(rows, beta, node_probs, pair_probs):
    """Exact per-row log P(x) of the ET model (Eq. 6), shape (N,).

    log P(x) = sum_u log theta_u(x_u) + log det L(beta * ratio(x)) - log det L(beta).
    """
    m = rows.shape[1]
    beta = np.asarray(beta, dtype=np.float64)
    node_term = np.log(node_probs[np.arange(m), rows]).sum(axis=1)
    log_z = log_spanning_tree_sums(beta[None])[0]
    return node_term + row_log_dets(rows, beta, ratio_table(node_probs, pair_probs))[0] - log_z


def effective_resistances(weights):
    """(e_u - e_v)^T L^-1 (e_u - e_v) for every pair, shape (N, M, M): d log det / d w_uv.

    Uses one batched solve against the identity of the reduced Laplacian (the deleted variable's
    indicator vector is zero). Cost O(N M^3).
    """
    lap = reduced_laplacians(weights)
    n, r = lap.shape[0], lap.shape[-1]
    g = np.zeros((n, r + 1, r + 1))
    with blas_threads(1):
        g[:, :r, :r] = np.linalg.solve(lap, np.broadcast_to(np.eye(r), lap.shape))
    d = np.diagonal(g, axis1=-2, axis2=-1)
    return d[:, :, None] + d[:, None, :] - g - g.transpose(0, 2, 1)


def structure_objective(beta, rows, table, bound=False):
    """The value of :func:`structure_objective_and_gradient` alone (Cholesky only, no inverse)."""
    value = row_log_dets(rows, beta, table)[0].mean()
    return value if bound else value - log_spanning_tree_sums(beta[None])[0]


def objective_and_cell_sums(beta, rows, table):
    """``(value, gradient, S)``: :func:`structure_objective_and_gradient`'s value and gradient
    in beta and the cell resistance sums ``S`` of :func:`cell_resistance_sums`, from one pass
    over the rows (the beta gradient is ``sum_ab table S`` per pair)."""
    beta = np.asarray(beta, dtype=np.float64)
    log_dets, sums = cell_resistance_sums(rows, beta, table)
    upper = (table * sums).sum(axis=(2, 3))
    value, grad = _objective(beta, log_dets, upper + upper.T, bound=False)
    return value, grad, sums


def structure_objective_and_gradient(beta, rows, table, bound=False):
    """Mean over rows of log det L(beta * r(x)) - log det L(beta), and its gradient in beta.

    ``r(x)`` is the row's entry of ``table`` (:func:`ratio_table`); the gradient (M, M) is
    symmetric with a zero diagonal (entry uv is the derivative along the symmetric pair
    beta_uv = beta_vu). With ``bound=True`` the normaliser term is dropped: the concave data term
    of Eq. 14, whose maximiser over the simplex is the paper's convex-upper-bound initialisation.
    """
    beta = np.asarray(beta, dtype=np.float64)
    log_dets, grad = row_log_dets(rows, beta, table, with_grad=True)
    return _objective(beta, log_dets, grad, bound)


def _objective(beta, log_dets, row_grad, bound):
    """The structural objective and its gradient from the rows' log-determinants and the
    summed gradient of those in beta (symmetric), minus the normaliser's unless ``bound``."""
    value, grad = log_dets.mean(), row_grad / len(log_dets)
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


class Abandoned(Exception):
    """A stop request ended an ascent before it converged (its result is not used)."""


def projected_gradient_ascent(
    beta,
    rows,
    table,
    max_iter=100,
    gamma=0.5,
    eta=0.01,
    step=1.0,
    tol=1e-9,
    bound=False,
    should_stop=None,
):
    """Maximise the structural objective (``bound``: the Eq. 14 data term) over the simplex of
    edge weights with Armijo steps (:func:`armijo_step`).

    The trial steps need the objective only; the gradient is computed at the accepted point
    (unless the ascent stops there). After the first iteration the trial steps start at twice the
    last accepted one (capped at ``step``), so a well-scaled step is not rediscovered from
    ``step`` every time. Returns (beta, objective values per accepted iteration). When
    ``should_stop()`` turns true (checked at every iteration) it raises :class:`Abandoned`.
    """
    m = beta.shape[0]
    iu = np.triu_indices(m, 1)
    b = np.asarray(beta, dtype=np.float64)[iu]

    value, grad = structure_objective_and_gradient(full_weights(b, m), rows, table, bound)
    history = [value]
    s = step
    for iteration in range(max_iter):
        if should_stop is not None and should_stop():
            raise Abandoned
        trial = armijo_step(
            b,
            grad[iu],
            m,
            value,
            s,
            gamma,
            eta,
            lambda w: structure_objective(w, rows, table, bound),
        )
        if trial is None:
            break
        improvement = trial[1] - value
        b, value, s = trial[0], trial[1], min(step, trial[2] / gamma)
        history.append(value)
        if improvement < tol or iteration == max_iter - 1:
            break
        grad = structure_objective_and_gradient(full_weights(b, m), rows, table, bound)[1]
    return full_weights(b, m), np.array(history)


def full_weights(upper, m):
    """The symmetric (M, M) matrix with ``upper`` on its strict upper triangle."""
    out = np.zeros((m, m))
    out[np.triu_indices(m, 1)] = upper
    return out + out.T


def armijo_step(b, g, m, value, s, gamma, eta, objective):
    """One projected step from the upper-triangle weights ``b`` of ``m`` variables along the
    gradient ``g``: tries ``b' = P(b + s g)`` for ``s``, ``s gamma``, ... (down to
    ``MIN_STEP``) and accepts the first with ``f(b') - value >= eta g . (b' - b)`` (Armijo
    along the projection arc). Returns ``(b', f(b'), s)`` or None. ``objective`` maps a full
    (M, M) beta to its value."""
    while s >= MIN_STEP:
        candidate = project_to_simplex(b + s * g)
        weights = full_weights(candidate, m)
        if _connected(weights):
            new_value = objective(weights)
            if new_value - value >= eta * g @ (candidate - b):
                return candidate, new_value, s
        s *= gamma
    return None


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
