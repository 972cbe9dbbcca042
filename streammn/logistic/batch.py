"""L1-regularised logistic conditionals fitted on rows in memory, penalties chosen on held-out rows.

The objective of variable ``i`` is its mean log-loss plus ``lam_i`` times the L1 norm of its
weights (intercepts unpenalised): scikit-learn's ``LogisticRegression(penalty='l1', C)`` on the
same indicator matrix with ``lam = 1 / (C n)``, so the optimum is the same.

The penalty. ``lam`` is chosen per variable on held-out rows: a path from the smallest penalty
that zeroes every weight of the variable down to ``PATH_RATIO`` of it in ``PATH_STEPS``
geometric steps, each fit warm-started from the last, and each variable keeps the penalty whose
fit scores its held-out rows best. The final fit is on every row, the penalty scaled by
``sqrt(n_fit / n_all)`` (the usual ``1/sqrt(n)`` rate of a lasso penalty). Measured on jester
(100 binary variables, 9,000 rows) one penalty for all variables reached -48.60 test PLL per
row for the DN at its best, scikit-learn's L1 DN -48.63.

The solver. The variables' problems share the design matrix (:mod:`streammn.logistic.coding`)
but are separable: each variable runs its own method and stops on its own, and only the two
products with the design are batched over the variables still running, ``X @ dW`` for the
logits and ``X.T @ R`` for the gradients, in float32 on the 0/1 indicators of the distinct rows
(exact in float32; a repeated row weighs its count; the logits are accumulated in float64 and
the inputs centred through the intercepts). The fit it replaces stepped every variable by one
over a single bound on the curvature (1/4 of the Gram matrix's largest eigenvalue) and ran them
all until the total objective settled; that bound was 2 to 500 times a variable's curvature and
the slowest variable set the pace: 350 (jester) to 4,100 (mushrooms) iterations over all
variables. Now:

- *First-order steps in a metric.* A variable's step is a proximal step in Böhning's bound
  ``s [Xc 1]'[Xc 1] / n`` (``s`` 1/4 for a sigmoid, 1/2 a softmax column; ``Xc`` centred, so the
  intercept's block is apart) rather than over its largest eigenvalue, FISTA's momentum on top
  (restarted when the objective rises, O'Donoghue & Candès): an L1-penalised quadratic in the
  small Gram matrix, solved by coordinate descent (:func:`_l1_quadratic`, no pass over the
  rows). The indicators' correlation no longer slows the steps; the bound holds, so no step is
  tested. Jester's variables stop after mostly 6 to 9 iterations a path point instead of 40.
- *Newton steps after a few.* A variable still running after ``newton_after`` first-order steps
  (3 plus twice what a Hessian costs in them: 5 to 8 on plants, mushrooms and accidents, 24 on
  jester, whose rows are dense) takes its steps in its own Hessian ``[Xc 1]' D [Xc 1] / n``
  (summed over each row's nonzero indicators, :func:`_weighted_pairs`; kept ``NEWTON_REFRESH``
  steps), damped until the sufficient-decrease test holds. The Gram bound fits a variable worse
  the better it is predicted (``D`` far from 1/4, and uneven): mushrooms' nearly separable
  variables crawled under first-order steps, their held-out losses off by 1e-2 while the
  objective moved by 1e-6. A softmax variable's Hessian is taken by blocks (within a factor 2
  of the coupled one, which the damping takes up) and keeps its momentum.
- *A stop per variable.* A variable stops when its objective changed by at most ``tol``
  relative over ``WINDOW`` iterations (a Newton step's: over ``NEWTON_WINDOW``; a softmax's
  tolerance is ``SOFTMAX_TOLERANCE`` times smaller, its logits shifting together make it
  flatter), and its columns leave the products.
- *The path.* Its first fit starts from the optimum with no weights, where about half the
  variables stop after one step (a step that moves nothing is the optimum); each later fit half
  a step beyond the last one along the path's last move (``EXTRAPOLATE``), its logits carried
  over rather than recomputed.

Accuracy. The penalty is chosen on held-out losses, which are first order in the weights where
the objective is second order, so the tolerances (a variable's objective changing by at most
``PATH_TOLERANCE = 3e-7`` relative over ``WINDOW = 3`` iterations on the path, ``TOLERANCE =
3e-8`` in the final fit) are tighter than the old fit's (``1e-5`` and ``1e-7`` on the total over
10 iterations). Against the same path solved to the last digits (float64, to a relative change
of 1e-13), the old fit's held-out losses were off by 2e-4 (jester, plants), 7e-4 (accidents)
and 2e-3 (mushrooms), and it chose another penalty than the exact path for 1 of plants' 69
variables and 3 of accidents' 111 (so its DN's test PLL, -9.3253 and -12.3630, is not the exact
path's, -9.3259 and -12.3567); this fit's are off by under 1e-5, it chooses the exact path's
penalty for every variable of the four datasets, and its final objectives are within 1e-7 of
the exact ones (summed over the variables; the old fit's up to 2e-4 above), so its test PLL is
the exact path's to the fourth decimal. Two cases have no single optimum. A variable constant in
the rows (two of mushrooms') has no minimising intercept: any fit stops somewhere on the way to
infinity, so :func:`fit_l1` does not fit it and gives it the smoothed frequencies, as a tree's
leaf. Indicator columns that are copies of one another (several of mushrooms') make the L1
optimum's weights non-unique: two float64 fits of mushrooms, both to KKT violations under 3e-9,
differed by 0.008 in test PLL before the constant variables were fixed.

Cost (``benchmarks/logistic_fit.py``: the rows DTSL passes, one BLAS thread, best of three on a
shared 2-core machine; ``benchmarks/results/logistic_fit.md``), seconds before -> after:
plants 28.0 -> 1.67 (17x), jester 6.8 -> 1.04 (6.5x), accidents 66.4 -> 6.0 (11x), mushrooms
15.7 -> 1.12 (14x); a 25-variable schema of 2 to 5 values (softmax conditionals), 8,000 rows:
20 -> 6.4 s. Jester is short of 10x: its rows are dense (61% ones), so Newton steps cost too much
there, and each of its 60 first-order iterations costs two float32 products over all 100
columns (about 5 ms) and the passes over the logits for the residuals and the objective (about
7 ms): about what the old fit's iterations cost, of which it took 350.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from streammn.logistic.coding import Coding

PATH_STEPS = 8
PATH_RATIO = 1e-3
PATH_TOLERANCE = 3e-7  # relative objective change of a variable over WINDOW iterations: path
TOLERANCE = 3e-8  # and final fit
WINDOW = 3
SOFTMAX_TOLERANCE = 1e-2  # times tol for a softmax: its logits can shift together, flatter
SMALLEST = 1e-3  # objectives under SMALLEST / n_vars count as that (a constant variable's -> 0)
MAX_ITER = 5000
SHRINK = 0.95  # a Newton step's damping is tried this much lower after an accepted step,
SAFETY = 1.5  # but not under this times the curvature measured along it,
GROW = 2.0  # and raised this much (at least to the measured) after a failed one
PROX_TOLERANCE = 0.1  # a first-order step: until a sweep moves under this share of the step
PROX_SWEEPS = 100
NEWTON_AFTER = 3  # first-order steps before a variable takes Newton steps: at least this,
NEWTON_COST = 2.0  # and this times what a Hessian costs in first-order steps
NEWTON_REFRESH = 8  # iterations a Hessian is used for
NEWTON_WINDOW = 2  # Newton steps converge fast: the stop looks back this many
NEWTON_TOLERANCE = 1e-3  # a Newton step's quadratic is solved closer
NEWTON_SWEEPS = 1000
MAX_DAMPING = 1e6  # a Newton step still failing damped this much: first-order steps again
EXTRAPOLATE = 0.5  # a path fit starts this far beyond the last one, along the last move
HESSIAN_MB = 256.0  # Newton steps for at most the columns whose Hessians fit in this
RIDGE = 1e-6  # times the Gram bound, added to a Hessian: no direction is flat (see hessians)

# No kernel here (nor in coding.py, online.py) is compiled with fastmath: it let LLVM take a
# vectorised path with its sums in another order, or not, by a run-time check of how close the
# arrays lie in memory, so a fit's last bits depended on where numpy put them (the same rows
# twice over fitted apart in 4 processes of 40). Measured without it: no slower.


@nb.njit(cache=True, nogil=True)
def _cd_sweep(h, g, start, pen, k, x, u, coords, count, everywhere):
    """One coordinate-descent sweep over ``coords[:count]`` of :func:`_l1_quadratic`'s
    problem, keeping ``u = h (x - start)`` current everywhere (a contiguous, vectorised
    update) or, if not ``everywhere``, on the swept coordinates only. Returns the largest move
    and the extent of ``x - start``, both in the metric's units."""
    moved, extent = 0.0, 0.0
    for q in range(count):
        j = coords[q]
        a = k * h[j, j]
        v = x[j] - (g[j] + k * u[j]) / a
        t = v
        if pen[j] > 0.0:
            t = 0.0
            if v > pen[j] / a:
                t = v - pen[j] / a
            elif v < -pen[j] / a:
                t = v + pen[j] / a
        d = t - x[j]
        root = math.sqrt(h[j, j])
        if d != 0.0:
            x[j] = t
            if everywhere:
                for i in range(u.size):
                    u[i] += h[j, i] * d
            else:
                for r in range(count):
                    u[coords[r]] += h[j, coords[r]] * d
            moved = max(moved, abs(d) * root)
        extent = max(extent, abs(t - start[j]) * root)
    return moved, extent


@nb.njit(cache=True, nogil=True)
def _l1_quadratic(h, g, start, pen, free, k, x, u, tolerance, sweeps, cycling, every, active):
    """``x`` minimising ``g.(x - start) + k/2 (x - start)' h (x - start) + sum pen |x|`` over
    the ``free`` coordinates (the others held at ``start``), by coordinate descent from
    ``start``: sweeps over all until one moves less than ``tolerance`` of the step, at most
    ``sweeps``; with ``cycling`` (for a tolerance so small that many sweeps are needed),
    glmnet's active-set cycling: sweeps over the nonzero coordinates until one moves that
    little, then one over all, until that one does too. ``u`` gets ``h (x - start)``;
    ``every`` and ``active`` are scratch."""
    x[:] = start
    u[:] = 0.0
    n_every = 0
    for j in range(start.size):
        if free[j]:
            every[n_every] = j
            n_every += 1
    done = 0
    while done < sweeps:
        moved, extent = _cd_sweep(h, g, start, pen, k, x, u, every, n_every, True)
        done += 1
        if moved <= tolerance * extent:
            break
        if not cycling:
            continue
        n_active = 0
        for q in range(n_every):
            j = every[q]
            if x[j] != 0.0 or pen[j] == 0.0:
                active[n_active] = j
                n_active += 1
        if n_active == n_every:
            continue
        while done < sweeps:
            moved, extent = _cd_sweep(h, g, start, pen, k, x, u, active, n_active, False)
            done += 1
            if moved <= tolerance * extent:
                break
        u[:] = 0.0  # u was kept on the active coordinates only: the full sweep needs it all
        for q in range(n_every):
            j = every[q]
            d = x[j] - start[j]
            if d != 0.0:
                for i in range(u.size):
                    u[i] += h[j, i] * d


@nb.njit(cache=True, nogil=True)
def _proximal_steps(
    metrics, metric_of, grad, grad_b, look, look_b, kappa, lam, own_lo, own_hi, columns,
    tolerance, sweeps, cycling, out, out_b, terms,
):  # fmt: skip
    """The proximal step of each of ``columns`` (``o = columns[q]``): ``(out[:, o], out_b[o])``
    minimises ``g.d + kappa[o]/2 d' M d + lam[o] |w|_1`` over the weights ``w`` (those of
    inputs ``own_lo[o] .. own_hi[o]``, the column's own variable, held at zero) and the
    intercept, ``d`` the step from ``(look[:, o], look_b[o])`` and ``M = metrics[metric_of[q]]``
    over the weights then the intercept. ``terms[o]`` gets ``(g.d, d' M d)``: what the
    sufficient-decrease test needs."""
    p = grad.shape[0]
    g, start, pen = np.empty(p + 1), np.empty(p + 1), np.empty(p + 1)
    x, u = np.empty(p + 1), np.empty(p + 1)
    free = np.empty(p + 1, dtype=np.bool_)
    every, active = np.empty(p + 1, dtype=np.int64), np.empty(p + 1, dtype=np.int64)
    for q in range(columns.size):
        o, h = columns[q], metrics[metric_of[q]]
        for j in range(p):
            g[j], start[j], pen[j] = grad[j, o], look[j, o], lam[o]
            free[j] = h[j, j] > 0.0 and not own_lo[o] <= j < own_hi[o]
        g[p], start[p], pen[p], free[p] = grad_b[o], look_b[o], 0.0, h[p, p] > 0.0
        _l1_quadratic(
            h, g, start, pen, free, kappa[o], x, u, tolerance, sweeps, cycling, every, active
        )
        linear, quadratic = 0.0, 0.0
        for j in range(p + 1):
            d = x[j] - start[j]
            linear += g[j] * d
            quadratic += d * u[j]
        out[:, o] = x[:p]
        out_b[o] = x[p]
        terms[o, 0], terms[o, 1] = linear, quadratic


@nb.njit(cache=True, nogil=True)
def _weighted_pairs(row_ptr, row_inputs, weight, pairs, singles):
    """``pairs[a, b, q] += weight[r, q]`` for every row ``r`` and pair ``a <= b`` of its
    nonzero indicators ``row_inputs[row_ptr[r]:row_ptr[r + 1]]`` (ascending), and
    ``singles[a, q] += weight[r, q]``: the Hessians' sums over 0/1 rows, each row costing the
    square of its ones rather than of all inputs, contiguous over the columns ``q`` (measured
    faster than a BLAS product per column, and than a column at a time)."""
    for r in range(weight.shape[0]):
        lo, hi = row_ptr[r], row_ptr[r + 1]
        for s in range(lo, hi):
            a = row_inputs[s]
            for q in range(weight.shape[1]):
                singles[a, q] += weight[r, q]
            for t in range(s, hi):
                b = row_inputs[t]
                for q in range(weight.shape[1]):
                    pairs[a, b, q] += weight[r, q]


@nb.njit(cache=True, nogil=True)
def _centred_hessians(pairs, singles, total, mean, scale, out):
    """``out[q]``: ``scale`` times the weighted sums of :func:`_weighted_pairs` (upper
    triangle) for the centred indicators and the intercept's column,
    ``sum_r d (x - m)(x - m)' = S - m v' - v m' + s m m'``, ``sum_r d (x - m) = v - s m``."""
    p = mean.size
    for q in range(out.shape[0]):
        s = total[q]
        for a in range(p):
            va = singles[a, q]
            for b in range(a, p):
                value = pairs[a, b, q] - mean[a] * singles[b, q] - va * mean[b]
                value = (value + s * mean[a] * mean[b]) * scale
                out[q, a, b] = value
                out[q, b, a] = value
            out[q, a, p] = out[q, p, a] = (va - s * mean[a]) * scale
        out[q, p, p] = s * scale


@nb.njit(cache=True, nogil=True)
def _momentum_point(new, old, beta, look, negative):
    """``look = new + beta (new - old)``, columnwise ``beta``, and ``negative = -|look|`` (for
    numpy's vectorised ``exp``: its AVX-512 loops are ten times numba's scalar one)."""
    for r in range(new.shape[0]):
        for c in range(new.shape[1]):
            v = new[r, c] + beta[c] * (new[r, c] - old[r, c])
            look[r, c] = v
            negative[r, c] = -abs(v)


@nb.njit(cache=True, nogil=True)
def _sigmoid_residuals(look, e, targets, weight, residual, residual_sum):
    """Every column taken as a sigmoid output, at the logits ``look`` (``e = exp(-|look|)``
    given) with 0/1 ``targets``: the residuals (predicted minus observed) times the row's
    ``weight`` into ``residual``, and their column sums added to ``residual_sum``."""
    for r in range(look.shape[0]):
        for c in range(look.shape[1]):
            p = (1.0 if look[r, c] >= 0 else e[r, c]) / (1.0 + e[r, c])
            value = (p - targets[r, c]) * weight[r]
            residual[r, c] = value
            residual_sum[c] += value


@nb.njit(cache=True, nogil=True)
def _softmax_terms(look, targets, blocks, weight, residual, residual_sum, loss):
    """:func:`_sigmoid_residuals` redone for the softmax blocks ``blocks[b, 0] .. blocks[b, 1]``
    (columns of ``look``): their residuals, column sums, and each block's weighted log-loss
    into ``loss`` at its first column (zero at the others)."""
    shifted = np.empty(look.shape[1])
    for b in range(blocks.shape[0]):
        lo, hi = blocks[b, 0], blocks[b, 1]
        for c in range(lo, hi):
            residual_sum[c] = 0.0  # (the sigmoid's pass wrote its own there)
            loss[c] = 0.0
        for r in range(look.shape[0]):
            top = look[r, lo]
            for c in range(lo + 1, hi):
                top = max(top, look[r, c])
            norm = 0.0
            for c in range(lo, hi):
                shifted[c] = math.exp(look[r, c] - top)
                norm += shifted[c]
            observed = 0.0
            for c in range(lo, hi):
                value = (shifted[c] / norm - targets[r, c]) * weight[r]
                residual[r, c] = value
                residual_sum[c] += value
                observed += targets[r, c] * look[r, c]
            loss[lo] += (top + math.log(norm) - observed) * weight[r]


@nb.njit(cache=True, nogil=True)
def _step_logits(look, step, step_b, sub, out, negative):
    """``out[:, sub[s]] = look[:, sub[s]] + step[:, s] + step_b[s]`` (``step`` the float32
    product of the weights' step) and ``negative[:, s]`` minus its absolute value."""
    for r in range(look.shape[0]):
        for s in range(sub.size):
            v = look[r, sub[s]] + step[r, s] + step_b[s]
            out[r, sub[s]] = v
            negative[r, s] = -abs(v)


@nb.njit(cache=True, nogil=True)
def _sigmoid_losses(out, softplus, targets, weight, sub, loss):
    """The weighted log-loss of each column ``sub[s]`` taken as a sigmoid at the logits
    ``out`` added to ``loss[s]`` (``softplus[:, s] = log1p(exp(-|out[:, sub[s]]|))``)."""
    for r in range(out.shape[0]):
        for s in range(sub.size):
            z = out[r, sub[s]]
            loss[s] += (max(z, 0.0) + softplus[r, s] - targets[r, sub[s]] * z) * weight[r]


@nb.njit(cache=True, nogil=True)
def _softmax_losses(out, targets, blocks, weight, loss):
    """Each softmax block's weighted log-loss at the logits ``out`` into ``loss`` at its first
    column (zero at the others), as :func:`_softmax_terms` lays it."""
    for b in range(blocks.shape[0]):
        lo, hi = blocks[b, 0], blocks[b, 1]
        for c in range(lo, hi):
            loss[c] = 0.0
        for r in range(out.shape[0]):
            top = out[r, lo]
            for c in range(lo + 1, hi):
                top = max(top, out[r, c])
            norm, observed = 0.0, 0.0
            for c in range(lo, hi):
                norm += math.exp(out[r, c] - top)
                observed += targets[r, c] * out[r, c]
            loss[lo] += (top + math.log(norm) - observed) * weight[r]


def distinct_rows(rows: np.ndarray):
    """The distinct rows of ``rows`` (uint8 states), in byte order, and their counts: a sort
    of each row's bytes as one value (eight times faster than ``np.unique(axis=0)``)."""
    rows = np.ascontiguousarray(rows)
    if not rows.shape[0]:
        return rows, np.zeros(0, dtype=np.int64)
    keys = rows.view(np.dtype((np.void, rows.shape[1] * rows.itemsize)))[:, 0]
    _, first, counts = np.unique(keys, return_index=True, return_counts=True)
    return rows[first], counts


class Problem:
    """The design of ``rows`` under ``coding``, its distinct rows once each with their counts
    (a row repeated ``k`` times weighs ``k``: the same objective, and every pass over the rows
    that much shorter: plants' 13,838 fitting rows are 6,809 distinct ones, nltcs's 12,880 are
    2,325): the 0/1 indicators (float32 by default: exact, and half the cost of float64
    products), their means, the Gram metric ``[Xc 1]'[Xc 1] / n`` (centred indicators, then
    the intercept's column) and, for the Hessians, each row's nonzero indicators.

    Attributes
    ----------
    n : the number of rows (with repeats).
    rows, weight : the distinct rows (sorted) and each one's count over ``n``.
    constant : per variable, whether it takes one value in every row.
    unseen : per output column, a value no row takes of a variable taking several.
    """

    def __init__(self, coding: Coding, rows: np.ndarray, dtype=np.float32):
        self.coding = coding
        self.n = rows.shape[0]
        n, p = max(self.n, 1), coding.n_inputs
        rows, counts = distinct_rows(rows)
        self.rows = rows
        self.weight = counts / n
        self.indicators = coding.indicators(self.rows).astype(dtype)
        self.targets = coding.targets(self.rows).astype(np.uint8)
        exact = self.indicators.astype(np.float64)
        self.mean = self.weight @ exact
        self.gram = np.zeros((p + 1, p + 1))
        self.gram[:p, :p] = (exact * self.weight[:, None]).T @ exact
        self.gram[:p, :p] -= np.outer(self.mean, self.mean)
        self.gram[p, p] = 1.0
        self.scale = np.where(coding.binary[coding.out_var], 0.25, 0.5)  # Böhning's bound
        # a Hessian costs about (a row's pairs of ones) / (twice its inputs) first-order steps
        ones = exact.sum(axis=1)
        cost = float((ones * (ones + 1) / 2).mean()) / (2 * max(p, 1)) if self.n else 0.0
        self.newton_after = NEWTON_AFTER + int(round(NEWTON_COST * cost))
        same = (self.targets == self.targets[:1]).all(axis=0)
        self.constant = np.logical_and.reduceat(same, coding.out_start[:-1])
        softmax = ~coding.binary[coding.out_var] & ~self.constant[coding.out_var]
        self.unseen = softmax & ~self.targets.any(axis=0)
        self._nonzero: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def nonzero(self) -> tuple[np.ndarray, np.ndarray]:
        """``(row_ptr, row_inputs)``: row ``r``'s nonzero indicators are
        ``row_inputs[row_ptr[r]:row_ptr[r + 1]]``, ascending (made when first asked for)."""
        if self._nonzero is None:
            row, inputs = np.nonzero(self.indicators)  # row-major
            ptr = np.searchsorted(row, np.arange(self.rows.shape[0] + 1)).astype(np.int64)
            self._nonzero = ptr, inputs
        return self._nonzero

    def logits(self, weights, bias) -> np.ndarray:
        return self.indicators.astype(np.float64) @ weights + bias

    def centred(self, weights, bias):
        """The intercepts of ``(weights, bias)`` for the centred inputs (the same logits)."""
        return bias + self.mean @ weights

    def uncentred(self, weights, centred_bias):
        return centred_bias - self.mean @ weights

    def losses(self, weights, bias) -> np.ndarray:
        """Mean log-loss of each variable: ``(n_vars,)``."""
        return -(self.weight @ self.coding.log_conditionals(self.rows, weights, bias))

    def gradient(self, weights, bias):
        """The gradient of each variable's mean log-loss at ``(weights, bias)``, in float64:
        in the weights (the intercepts for the centred inputs held) and in the intercepts."""
        coding = self.coding
        residual, _ = coding.residuals_and_log_probs(
            self.logits(weights, bias), self.targets, scoring=False
        )
        residual *= self.weight[:, None]
        grad_b = residual.sum(axis=0)
        grad_w = self.indicators.astype(np.float64).T @ residual - np.outer(self.mean, grad_b)
        grad_w[~coding.free] = 0.0
        return grad_w, grad_b


def kkt_violation(problem: Problem, lam_out, weights, bias) -> np.ndarray:
    """Per variable, the largest violation of the optimality conditions of its L1 problem at
    ``(weights, bias)``: ``|g + lam sign(w)|`` at a nonzero weight, ``|g| - lam`` beyond the
    penalty at a zero one, ``|g_b|`` at an intercept (all zero at the optimum)."""
    coding = problem.coding
    grad_w, grad_b = problem.gradient(weights, bias)
    lam = np.broadcast_to(np.asarray(lam_out, dtype=np.float64)[None, :], weights.shape)
    off = np.where(
        weights != 0, np.abs(grad_w + lam * np.sign(weights)), np.maximum(np.abs(grad_w) - lam, 0)
    )
    off[~coding.free] = 0.0
    per_output = np.maximum(off.max(axis=0, initial=0.0), np.abs(grad_b))
    return np.maximum.reduceat(per_output, coding.out_start[:-1])


def fit_l1(
    problem: Problem, lam_out: np.ndarray, weights=None, bias=None, tol=TOLERANCE, logits=None
):
    """The L1 optimum of every conditional, ``lam_out`` the penalty of each output column (its
    variable's), from ``(weights, bias)`` (default zero) by the method of the module docstring.
    Returns ``(weights, bias, iterations)``, ``iterations`` the most any variable took.
    ``logits``: those of ``problem.rows`` at ``(weights, bias)``, if known (default: computed),
    updated in place to the result's (a path need not redo the product at each penalty)."""
    coding = problem.coding
    if weights is None:
        weights, bias = np.zeros((coding.n_inputs, coding.n_outputs)), np.zeros(coding.n_outputs)
    weights, bias = weights.copy(), np.array(bias, dtype=np.float64)
    if problem.n == 0:
        return weights, bias, 0
    # A variable with one value in every row has no optimum: its intercept would fall towards
    # infinity for ever, and where a fit stopped on the way would decide its test loss. It gets
    # what it has with no weights and the smoothed frequencies (as a tree's single leaf).
    # Likewise a value no row takes, of a variable taking several: its intercept has no
    # optimum either. It leaves the fit (its probability zero) and has its smoothed frequency
    # after it (_unseen_values).
    fixed = problem.constant[coding.out_var]
    weights[:, fixed | problem.unseen] = 0.0
    bias[fixed] = intercepts_only(problem)[fixed]
    if logits is None:
        logits = problem.logits(weights, bias)
    logits[:, fixed] = bias[fixed]
    run = _Running(problem, np.asarray(lam_out, dtype=np.float64), weights, bias, logits)
    run.stop(problem.constant, weights, bias)
    iterations = 0
    if run.live.any():
        run.drop(problem.unseen[run.columns])
        iterations = _iterate(run, problem, tol, weights, bias)
    if problem.unseen.any():
        _unseen_values(problem, bias, logits)
    return weights, bias, iterations


def _unseen_values(problem: Problem, bias, logits) -> None:
    """The intercept of each value no row takes (weights zero), of a variable taking several:
    its probability the smoothed frequency ``0.5 / (n + 1)`` on the rows' mean, that is the
    log of it plus the mean over the rows of the log-normaliser of the values taken."""
    coding = problem.coding
    unseen = problem.unseen
    for i in np.unique(coding.out_var[unseen]):
        lo, hi = coding.out_start[i], coding.out_start[i + 1]
        taken = ~unseen[lo:hi]
        top = logits[:, lo:hi][:, taken].max(axis=1)
        norm = top + np.log(np.exp(logits[:, lo:hi][:, taken] - top[:, None]).sum(axis=1))
        level = math.log(0.5 / (problem.n + 1.0)) + float(problem.weight @ norm)
        columns = lo + np.flatnonzero(~taken)
        bias[columns] = level
        logits[:, columns] = level


def _iterate(run, problem: Problem, tol: float, weights, bias) -> int:
    """:func:`fit_l1`'s iterations, until every variable laid out in ``run`` has stopped
    (written into ``(weights, bias)``). Returns the most any variable took."""
    n_vars = problem.coding.schema.n_vars
    damping = np.ones(n_vars)  # the Newton steps' scale
    switched = np.full(n_vars, MAX_ITER + 1)  # the iteration a variable took Newton steps from
    momentum, previous = np.ones(n_vars), np.full(n_vars, np.inf)
    history = np.full((n_vars, WINDOW + 1), np.inf)  # objectives, a ring over iterations
    for iteration in range(1, MAX_ITER + 1):
        if iteration == problem.newton_after:
            slow = run.newton_allowed(run.live)
            run.newton |= slow
            switched[run.variables[slow]] = iteration
        live = run.live.copy()
        variables = run.variables[live]
        f_y, grad = run.look()
        scales = damping[run.variables]
        # y is x and the step moves no weight and the intercept by a rounding error: a fixed
        # point of the steps, the optimum (the first penalty's, from the weightless optimum)
        still = np.all(run.y_w == run.x_w, axis=0) & (run.y_b == run.x_b)
        new_w, new_b, f_new = run.proximal_steps(grad, f_y, scales)
        still &= np.all(new_w == run.y_w, axis=0) & (np.abs(new_b - run.y_b) <= 1e-9)
        still = np.logical_and.reduceat(still, run.start)[live]
        damping[run.variables] = scales
        l1 = np.add.reduceat(np.abs(new_w).sum(axis=0), run.start)
        objective = (f_new + run.lam_var * l1)[live]
        following = (1.0 + np.sqrt(1.0 + 4.0 * momentum[variables] ** 2)) / 2.0
        beta = np.zeros(live.size)
        beta[live] = (momentum[variables] - 1.0) / following
        # restart when the objective rose, and always for a binary variable's Newton steps (its
        # exact Hessian needs no momentum; a softmax's blocks apart are a metric, which does)
        restart = (objective > previous[variables]) | (run.newton & (run.width == 1))[live]
        beta[np.flatnonzero(live)[restart]], following[restart] = 0.0, 1.0
        momentum[variables], previous[variables] = following, objective
        history[variables, iteration % (WINDOW + 1)] = objective
        run.advance(new_w, new_b, beta)
        fast = run.newton[live] & (iteration - switched[variables] >= NEWTON_WINDOW)
        back = np.where(fast, NEWTON_WINDOW, WINDOW)
        change = np.abs(history[variables, (iteration - back) % (WINDOW + 1)] - objective)
        done = np.zeros(live.size, dtype=bool)
        stricter = np.where(run.width[live] > 1, SOFTMAX_TOLERANCE, 1.0)
        done[live] = change <= tol * stricter * np.maximum(np.abs(objective), SMALLEST / n_vars)
        done[live] |= still
        if iteration == MAX_ITER:
            done = live
        if done.any():
            run.stop(done, weights, bias)
            if not run.live.any():
                return iteration
    raise AssertionError("unreachable: every variable stops at MAX_ITER")


class _Running:
    """:func:`fit_l1`'s iterates on the columns of the variables laid out: ``x`` the iterate,
    ``y`` the momentum point, their weights, centred intercepts and logits (compact: column
    ``c`` here is output ``columns[c]``). ``live`` marks the variables still running (a stopped
    one stays laid out until a quarter of the columns have stopped), ``newton`` those taking
    Newton steps."""

    def __init__(self, problem: Problem, lam_out, weights, bias, logits):
        coding = self.coding = problem.coding
        self.problem = problem
        self.lam_out = lam_out
        self.variables = np.arange(coding.schema.n_vars)
        self.columns = np.arange(coding.n_outputs)
        self.x_w, self.x_b = weights.copy(), problem.centred(weights, bias)
        self.y_w, self.y_b = self.x_w.copy(), self.x_b.copy()
        self.logits = logits  # where a stopped variable's logits go
        self.z_new = logits.copy()  # x's, after the swap in look()
        self.z_x, self.z_y = self.z_new.copy(), np.empty_like(self.z_new)
        self.beta = np.zeros(coding.n_outputs)
        self.live = np.ones(self.variables.size, dtype=bool)
        self.newton = np.zeros(self.variables.size, dtype=bool)
        self._hessians, self._hessian_columns, self._age = None, None, 0
        self._buffers: dict[str, np.ndarray] = {}
        self._layout(problem.targets)

    def _layout(self, targets):
        coding, variables = self.coding, self.variables
        position = np.searchsorted(variables, coding.out_var[self.columns])
        width = np.bincount(position, minlength=variables.size)
        self.block = np.concatenate([[0], np.cumsum(width)]).astype(np.int64)
        self.width = width
        self.start = self.block[:-1]
        self.col_var = np.repeat(np.arange(variables.size), width)
        self.targets = np.ascontiguousarray(targets)
        self.softmax_var = np.flatnonzero(width > 1)
        self.softmax = np.column_stack(
            [self.block[self.softmax_var], self.block[self.softmax_var + 1]]
        )
        self.lam_var = self.lam_out[coding.out_start[variables]]
        self.scale_var = self.problem.scale[coding.out_start[variables]]
        self.own_lo = coding.in_start[coding.out_var[self.columns]]
        self.own_hi = coding.in_start[coding.out_var[self.columns] + 1]

    def newton_allowed(self, wanted):
        """Of the variables ``wanted`` (a mask), those whose Hessians fit in ``HESSIAN_MB``
        (with their sums, two ``(p + 1)^2`` arrays a column), first come first served."""
        size = self.coding.n_inputs + 1
        budget = int(HESSIAN_MB * 2**20 // (16 * size * size))
        return wanted & (np.cumsum(np.where(wanted, self.width, 0)) <= budget)

    def look(self):
        """Move to the momentum point; the gradient there (in the weights; the intercepts' in
        ``self.grad_b``) and the loss of each variable taking Newton steps (their test needs
        it; first-order steps take the bound, which needs no test)."""
        problem, n = self.problem, self.problem.rows.shape[0]
        m = self.columns.size
        e = self._buffer("e", (n, m))
        self.residual = self._buffer("residual", (n, m), problem.indicators.dtype)
        self.grad_b, loss = np.zeros(m), np.zeros(m)
        _momentum_point(self.z_new, self.z_x, self.beta, self.z_y, e)
        self.z_x, self.z_new = self.z_new, self.z_x
        np.exp(e, out=e)
        _sigmoid_residuals(self.z_y, e, self.targets, problem.weight, self.residual, self.grad_b)
        softmax = self.softmax[self.live[self.softmax_var]]
        if softmax.size:
            _softmax_terms(
                self.z_y, self.targets, softmax, problem.weight, self.residual, self.grad_b, loss
            )
        tested = np.flatnonzero((self.live & self.newton & (self.width == 1))[self.col_var])
        if tested.size:
            softplus = np.log1p(e[:, tested])
            part = np.zeros(tested.size)
            _sigmoid_losses(self.z_y, softplus, self.targets, problem.weight, tested, part)
            loss[tested] = part
        grad = (problem.indicators.T @ self.residual).astype(np.float64)
        grad -= np.outer(problem.mean, self.grad_b)  # the centred inputs'
        self.loss = loss
        return np.add.reduceat(loss, self.start), grad

    def _buffer(self, name, shape, dtype=np.float64):
        """A work array kept from one iteration to the next (fresh pages cost as much as
        the passes over them): ``shape`` of the flat buffer ``name``, grown when short."""
        size = shape[0] * shape[1]
        buffer = self._buffers.get(name)
        if buffer is None or buffer.size < size or buffer.dtype != dtype:
            buffer = self._buffers[name] = np.empty(size, dtype=dtype)
        return buffer[:size].reshape(shape)

    def hessians(self, columns) -> np.ndarray:
        """The Hessians of the log-loss of ``columns`` at the momentum point, over the centred
        weights then the intercept: ``(len(columns), p + 1, p + 1)``. A row weighs ``p (1 - p)``:
        a sigmoid's exactly; a softmax column's diagonal block (the blocks apart are within a
        factor 2 of the coupled Hessian, ``diag(p) - p p' <= 2 diag(p (1 - p))``, which the
        damping takes up). The sums run over each row's nonzero indicators
        (:func:`_weighted_pairs`)."""
        problem = self.problem
        row_weight = problem.weight[:, None]
        prob = self.residual[:, columns] / row_weight + self.targets[:, columns]
        weight = np.ascontiguousarray(prob * (1.0 - prob) * row_weight)
        p = self.coding.n_inputs
        pairs, singles = np.zeros((p, p, columns.size)), np.zeros((p, columns.size))
        _weighted_pairs(*problem.nonzero, weight, pairs, singles)
        out = np.empty((columns.size, p + 1, p + 1))
        _centred_hessians(pairs, singles, weight.sum(axis=0), problem.mean, 1.0, out)
        # A value its rows (nearly) never take has a Hessian of rounding errors, some
        # negative, in its directions: a Newton step there would be without bound. A
        # millionth of the Gram bound keeps every step finite and changes no optimum.
        bound = problem.scale[self.columns[columns]]
        out += (RIDGE * bound)[:, None, None] * problem.gram
        return out

    def proximal_steps(self, grad, f_y, damping):
        """Each running variable's step from ``y``: a proximal step in its metric, the Gram
        bound, or ``damping`` times its Hessian for a Newton step, the damping raised until the
        sufficient-decrease test holds and adapted in place (``damping`` over the variables
        laid out). Returns the new weights, centred intercepts and losses (a stopped
        variable's: as they are)."""
        problem, n = self.problem, self.problem.rows.shape[0]
        m = self.columns.size
        new_w, new_b = self.x_w.copy(), self.x_b.copy()
        terms, loss = np.empty((m, 2)), self.loss
        f_new = np.zeros(self.variables.size)
        newton_columns = np.flatnonzero((self.live & self.newton)[self.col_var])
        if newton_columns.size and (self._hessians is None or self._age >= NEWTON_REFRESH):
            self._hessians = self.hessians(newton_columns)
            self._hessian_columns, self._age = newton_columns, 0
        self._age += 1
        lam = self.lam_out[self.columns]
        which = np.flatnonzero(self.live)
        while which.size:
            sub = np.flatnonzero(np.isin(self.col_var, which))
            newton = self.newton[which]
            kappa = np.zeros(m)
            kappa[sub] = np.repeat(np.where(newton, damping[which], 1.0), self.width[which])
            kappa[sub] *= np.where(self.newton, 1.0, self.scale_var)[self.col_var[sub]]
            args = (grad, self.grad_b, self.y_w, self.y_b, kappa, lam, self.own_lo, self.own_hi)
            first = sub[~self.newton[self.col_var[sub]]]
            if first.size:
                metrics, metric_of = problem.gram[None], np.zeros(first.size, dtype=np.int64)
                _proximal_steps(
                    metrics, metric_of, *args, first, PROX_TOLERANCE, PROX_SWEEPS, False,
                    new_w, new_b, terms,
                )  # fmt: skip
            second = sub[self.newton[self.col_var[sub]]]
            if second.size:
                metric_of = np.searchsorted(self._hessian_columns, second)
                _proximal_steps(
                    self._hessians, metric_of, *args, second, NEWTON_TOLERANCE, NEWTON_SWEEPS,
                    True, new_w, new_b, terms,
                )  # fmt: skip
            step = new_w[:, sub] - self.y_w[:, sub]
            step_b = new_b[sub] - self.y_b[sub] - problem.mean @ step
            z_step = self._buffer("z_step", (n, sub.size), problem.indicators.dtype)
            np.matmul(problem.indicators, step.astype(problem.indicators.dtype), out=z_step)
            softplus = self._buffer("softplus", (n, sub.size))
            _step_logits(self.z_y, z_step, step_b, sub, self.z_new, softplus)
            np.log1p(np.exp(softplus, out=softplus), out=softplus)
            sub_loss = np.zeros(sub.size)
            _sigmoid_losses(self.z_new, softplus, self.targets, problem.weight, sub, sub_loss)
            loss[sub] = sub_loss
            softmax = self.softmax[np.isin(self.softmax_var, which)]
            if softmax.size:
                _softmax_losses(self.z_new, self.targets, softmax, problem.weight, loss)
            f_new[which] = np.add.reduceat(loss, self.start)[which]
            # the Newton steps' sufficient-decrease test (a first-order step, in the bound,
            # always passes it)
            offsets = np.concatenate([[0], np.cumsum(self.width[which])[:-1]])
            linear = np.add.reduceat(terms[sub, 0], offsets)
            quadratic = np.add.reduceat(terms[sub, 1], offsets)
            c = damping[which]
            rise = f_new[which] - f_y[which] - linear  # half the curvature along the step
            slack = 1e-7 * np.abs(linear) + 1e-12 * np.abs(f_y[which])  # rounding
            failed = (rise > 0.5 * c * quadratic + slack) & (quadratic > 0) & newton
            measured = 2.0 * rise / np.where(quadratic > 0, quadratic, np.inf)
            adapted = np.maximum(np.where(failed, GROW * c, SHRINK * c), SAFETY * measured)
            damping[which] = np.where(newton, np.clip(adapted, 1.0, MAX_DAMPING), c)
            # a Newton step damped this much and still failing (its Hessian is off, say
            # indefinite by rounding): first-order steps again
            back = failed & (c >= MAX_DAMPING)
            self.newton[which[back]] = False
            which = which[failed]
        return new_w, new_b, f_new

    def advance(self, new_w, new_b, beta):
        """Take the steps: ``x`` moves to them, ``y`` beyond by ``beta`` per variable."""
        beta = self.beta = beta[self.col_var]
        self.y_w = new_w + beta * (new_w - self.x_w)
        self.y_b = new_b + beta * (new_b - self.x_b)
        self.x_w, self.x_b = new_w, new_b

    def stop(self, done, weights, bias):
        """Write the variables ``done`` (a mask over the ones laid out) into ``(weights,
        bias)`` (uncentred) and stop them; once a quarter of the columns are stopped, drop
        them (a copy of the logits: not at every stop)."""
        leaving = done[self.col_var]
        out = self.columns[leaving]
        weights[:, out] = self.x_w[:, leaving]
        bias[out] = self.problem.uncentred(self.x_w[:, leaving], self.x_b[leaving])
        self.logits[:, out] = self.z_new[:, leaving]  # x's since advance()
        self.live &= ~done
        keep = self.live[self.col_var]
        if not self.live.any() or keep.mean() > 0.75:
            return
        self._compact(self.live.copy(), keep)

    def drop(self, columns) -> None:
        """Take the ``columns`` (a mask over those laid out) out of the fit: values of a
        softmax that no row takes (their probability zero meanwhile)."""
        if columns.any():
            self._compact(np.ones(self.variables.size, dtype=bool), ~columns)

    def _compact(self, variables, keep) -> None:
        """Keep the ``variables`` and ``keep`` columns (masks over those laid out)."""
        self.live, self.newton = self.live[variables], self.newton[variables]
        self.variables, self.columns = self.variables[variables], self.columns[keep]
        # C order as laid out (numpy gives a column selection in F order): one specialisation
        # of the kernels that take them, not a second to compile on a first run
        self.x_w, self.x_b = np.ascontiguousarray(self.x_w[:, keep]), self.x_b[keep]
        self.y_w, self.y_b = np.ascontiguousarray(self.y_w[:, keep]), self.y_b[keep]
        self.z_x = np.ascontiguousarray(self.z_x[:, keep])
        self.z_new = np.ascontiguousarray(self.z_new[:, keep])
        self.z_y, self.beta = np.empty_like(self.z_x), self.beta[keep]
        if self._hessians is not None:  # the kept columns' Hessians stay good
            kept = keep[self._hessian_columns]
            renumber = np.cumsum(keep) - 1
            self._hessians = self._hessians[kept]
            self._hessian_columns = renumber[self._hessian_columns[kept]]
        self._layout(self.targets[:, keep])


def intercepts_only(problem: Problem, smoothed: bool = True) -> np.ndarray:
    """The intercepts of each conditional with no other input: log odds (binary) or log
    probabilities (softmax) of the smoothed marginal frequencies; if not ``smoothed``, of the
    frequencies themselves (the optimum with no weights) where they are all positive."""
    coding = problem.coding
    counts = problem.weight @ problem.targets * problem.n
    freq = (counts + 0.5) / (problem.n + 1.0)
    if not smoothed:
        exact = counts / max(problem.n, 1)
        other = np.where(coding.binary[coding.out_var], 1.0 - exact, exact)
        inside = np.minimum.reduceat(np.minimum(exact, other), coding.out_start[:-1]) > 0
        freq = np.where(inside[coding.out_var], exact, freq)
    binary = coding.binary[coding.out_var]
    out = np.log(freq)
    # log odds of the binary outputs only: a one-state variable's frequency is 1
    out[binary] = np.log(freq[binary] / (1.0 - freq[binary]))
    return out


def largest_penalties(problem: Problem) -> np.ndarray:
    """Per variable, the smallest penalty under which all its weights are zero: the largest
    gradient of its loss in any weight at the intercept-only fit."""
    coding = problem.coding
    grad_w, _ = problem.gradient(
        np.zeros((coding.n_inputs, coding.n_outputs)), intercepts_only(problem)
    )
    per_output = np.abs(grad_w).max(axis=0, initial=0.0)  # no inputs: nothing to penalise
    return np.maximum.reduceat(per_output, coding.out_start[:-1])


def fit_with_held_out(coding: Coding, rows: np.ndarray, held_out: np.ndarray, on_fit=None):
    """Each variable's L1 conditional on all ``rows``, its penalty chosen on the ``held_out``
    rows (a boolean mask) along the path of the module docstring, from zero weights (so the
    fit is a function of the rows alone). Returns ``(weights, bias, lam, held_out_loss)``:
    ``lam`` per variable, and ``held_out_loss`` each variable's mean log-loss on the held-out
    rows at its chosen penalty (fitted without them). ``on_fit``: called after each of the
    ``PATH_STEPS + 1`` fits (the path's, then the one on all rows), e.g. a progress bar's
    count.
    """
    fit, judge = Problem(coding, rows[~held_out]), Problem(coding, rows[held_out])
    top = np.maximum(largest_penalties(fit), 1e-8)
    # from the optimum with no weights: where it is the first penalty's, a variable stops there
    weights = np.zeros((coding.n_inputs, coding.n_outputs))
    bias = intercepts_only(fit, smoothed=False)
    best_loss = np.full(coding.schema.n_vars, np.inf)
    best_lam = top.copy()
    best_w, best_b = weights.copy(), bias.copy()
    logits, before = fit.logits(weights, bias), None
    for ratio in np.geomspace(1.0, PATH_RATIO, PATH_STEPS):
        lam = top * ratio
        start = weights, bias, logits
        if before is not None:  # a step along the path's last move: a closer start
            start = tuple(a + EXTRAPOLATE * (a - b) for a, b in zip(start, before))
        before = weights, bias, logits.copy()
        logits = start[2]
        weights, bias, _ = fit_l1(
            fit, lam[coding.out_var], start[0], start[1], PATH_TOLERANCE, logits
        )
        loss = judge.losses(weights, bias)
        better = loss < best_loss
        best_loss[better], best_lam[better] = loss[better], lam[better]
        columns = better[coding.out_var]
        best_w[:, columns], best_b[columns] = weights[:, columns], bias[columns]
        if on_fit is not None:
            on_fit()
    everything = Problem(coding, rows)
    lam = best_lam * np.sqrt(fit.n / max(everything.n, 1))
    # a variable no weight moves on the fitting rows (constant there, or its inputs are) had
    # no path to choose from: it keeps no weights, rather than the floor's near-zero penalty
    # (on all the rows, a few of them may separate it: weights without bound)
    silent = top <= 1e-8
    if silent.any():
        lam[silent] = np.maximum(largest_penalties(everything)[silent], 1e-8)
        best_w[:, silent[coding.out_var]] = 0.0
    weights, bias, _ = fit_l1(everything, lam[coding.out_var], best_w, best_b, tol=TOLERANCE)
    if on_fit is not None:
        on_fit()
    return weights, bias, lam, best_loss
