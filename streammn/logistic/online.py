"""Logistic conditionals learned from every row of a stream, in one pass: FTRL-Proximal on
mini-batches, three penalties side by side, each variable using the one that predicts it best.

What. Every ``MINI_BATCH`` rows of the stream (by stream index: the rows of a batch that do not
fill one wait in the state, so batch cuts never matter) take one step of FTRL-Proximal (McMahan
et al., "Ad click prediction: a view from the trenches", KDD 2013) on the mini-batch's mean
gradient, for every conditional at once, over the indicator columns of
:mod:`streammn.logistic.coding` (an intercept column appended, unpenalised). The indicators are
0/1, so a row's logits are the sum of the weight rows of its active indicators and the gradient
adds its residuals into the same rows: contiguous, vectorised loops in numba kernels, without
the threads BLAS would start for such small products. Per coordinate FTRL keeps ``z`` (the
gradients summed, less the proximal terms) and ``n`` (the squared gradients summed); its weight
is zero while ``|z|`` is under the L1 threshold and
``-(z - sign(z) l1) / ((BETA + sqrt(n)) / ALPHA)`` otherwise, so the weights are sparse at every
moment and the state is two numbers a coordinate.

Why FTRL. It is built for this: one pass, per-coordinate adaptive steps that need no schedule,
exact zeros from L1 and a state that restores exactly. A batch fit (:mod:`streammn.logistic.
batch`) gets the optimum of the rows it holds but costs seconds per refit at 100 variables; a
stream cannot wait for it at every few thousand rows, so the learner uses the batch fit only when
a finite source has ended with every row in its sample (:mod:`streammn.logistic.conditionals`).
On jester (9,000 rows) one pass of FTRL reaches -51.8 test PLL for the DN (the trees: -52.4),
twenty passes about -49, the batch fit -48.6: on short sources the batch fit matters, on long
streams FTRL sees every row. Mini-batches of 128 rows converge markedly faster per row than of
512 (more steps); ``ALPHA`` 1 did best of 0.5, 1 and 2 on jester and a planted 4-variable MRF.

The penalty. The lasso penalty that predicts best shrinks as ``sqrt(log(inputs) / rows)``; FTRL's
L1 threshold is on a sum over mini-batches, so penalty ``m`` on that scale is the threshold
``m * sqrt(T log(inputs) / MINI_BATCH)`` after ``T`` steps. Three models run side by side, at the
multipliers ``PENALTIES``, and each keeps every variable's prequential log-loss (every
``SCORE_EVERY``-th mini-batch is scored before it is learned from: progressive validation, its
forward pass is the gradient's), decayed with a half-life of ``LOSS_HALF_LIFE`` rows. Each
variable uses the model with the lowest: the penalty is chosen on the stream itself. The race
lasts ``RACE_ROWS`` rows; then each variable keeps its winner's columns and state only, and the
rest of the stream costs one model instead of three. A scalar ``exp`` per output and the sums
over the active indicators still keep the online conditionals far below the trees (tens of
thousands of rows/s at 100 binary variables on a loaded 2-core machine against a million: the
reason ``cpd='tree'`` stays DTSL's default for now).
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from streammn.logistic.coding import Coding

MINI_BATCH = 128
PENALTIES = (0.1, 0.4, 1.6)
ALPHA, BETA = 1.0, 1.0
LOSS_HALF_LIFE = 50_000  # rows
SCORE_EVERY = 4  # mini-batches: every fourth is scored before it is learned
RACE_ROWS = 256 * MINI_BATCH  # rows the penalties race on, then each variable keeps its winner


@nb.njit(cache=True, nogil=True)
def _ftrl_step(z, n, w, grad, threshold, free, alpha, beta):
    """One FTRL-Proximal step for every coordinate: ``grad`` the mean gradient, ``threshold``
    the L1 threshold of each column (rows: inputs, the last the intercept, never penalised),
    ``free`` False where an input is the column's own variable."""
    inputs, outputs = z.shape
    for r in range(inputs):
        for c in range(outputs):
            if r < inputs - 1 and not free[r, c]:
                continue
            g = grad[r, c]
            n_old = n[r, c]
            n_new = n_old + g * g
            sigma = (math.sqrt(n_new) - math.sqrt(n_old)) / alpha
            zz = z[r, c] + g - sigma * w[r, c]
            z[r, c] = zz
            n[r, c] = n_new
            l1 = threshold[c] if r < inputs - 1 else 0.0
            if abs(zz) <= l1:
                w[r, c] = 0.0
            else:
                shrunk = zz - l1 if zz > 0 else zz + l1
                w[r, c] = -shrunk / ((beta + math.sqrt(n_new)) / alpha)


@nb.njit(cache=True, nogil=True, parallel=True)
def _residuals(logits, targets, block_start, residual, loss, scoring):
    """Predicted minus observed probability of every column and, when ``scoring``, each
    block's log-loss summed over the rows into ``loss``: a block of one column is a sigmoid
    (binary), a longer one a softmax. Blocks in parallel (each writes its own columns)."""
    for b in nb.prange(block_start.size - 1):
        lo, hi = block_start[b], block_start[b + 1]
        total_loss = 0.0
        for r in range(logits.shape[0]):
            if hi - lo == 1:
                x = logits[r, lo]
                e = math.exp(-abs(x))
                p = 1.0 / (1.0 + e) if x >= 0 else e / (1.0 + e)
                y = targets[r, lo]
                residual[r, lo] = p - y
                if scoring:
                    signed = -x if y > 0 else x
                    total_loss += max(signed, 0.0) + math.log1p(e)
            else:
                top = logits[r, lo]
                for c in range(lo + 1, hi):
                    top = max(top, logits[r, c])
                norm = 0.0
                for c in range(lo, hi):
                    norm += math.exp(logits[r, c] - top)
                log_norm = top + math.log(norm)
                for c in range(lo, hi):
                    residual[r, c] = math.exp(logits[r, c] - log_norm) - targets[r, c]
                    if scoring and targets[r, c] > 0:
                        total_loss += log_norm - logits[r, c]
        loss[b] += total_loss


@nb.njit(cache=True, nogil=True, fastmath=True, inline="always")
def _add(into, values):
    for c in range(into.size):
        into[c] += values[c]


@nb.njit(cache=True, nogil=True, parallel=True)
def _forward(active_ptr, active, start, w, logits):
    """Logits of rows ``start ..``: the intercept row of ``w`` plus its active inputs' rows."""
    bias = w.shape[0] - 1
    for r in nb.prange(logits.shape[0]):
        logits[r] = w[bias]
        for k in range(active_ptr[start + r], active_ptr[start + r + 1]):
            _add(logits[r], w[active[k]])


@nb.njit(cache=True, nogil=True, parallel=True)
def _backward(active_ptr, active, start, residual, grad, chunks):
    """``grad`` = the design's transpose times ``residual``, in ``chunks`` column ranges run
    in parallel (each adds into its own columns, in row order: the sums never depend on the
    number of threads)."""
    m_cols = grad.shape[1]
    bias = grad.shape[0] - 1
    for chunk in nb.prange(chunks):
        lo, hi = chunk * m_cols // chunks, (chunk + 1) * m_cols // chunks
        for j in range(grad.shape[0]):
            grad[j, lo:hi] = 0.0
        for r in range(residual.shape[0]):
            _add(grad[bias, lo:hi], residual[r, lo:hi])
            for k in range(active_ptr[start + r], active_ptr[start + r + 1]):
                _add(grad[active[k], lo:hi], residual[r, lo:hi])


@nb.njit(cache=True, nogil=True)
def _learn(
    active_ptr,
    active,
    targets,
    z,
    n,
    w,
    losses,
    block_start,
    free,
    column_penalty,
    steps,
    size,
    scale,
    decay,
    alpha,
    beta,
):
    """FTRL steps on every whole mini-batch of ``size`` rows, row ``r`` given by its active
    input columns ``active[active_ptr[r]:active_ptr[r + 1]]`` (the intercept, the last row of
    ``w``, always on) and its ``targets`` (every model's columns); ``steps`` taken before,
    ``scale`` the penalty scale per ``sqrt(step)``. ``losses`` (per
    block) is decayed by ``decay`` per scored step and gets the log-loss of every
    ``SCORE_EVERY``-th mini-batch before it is learned (progressive validation);
    ``column_penalty`` is each column's penalty multiplier. The products
    with the 0/1 design are sums of rows of ``w``: contiguous, vectorised, and free of BLAS's
    threads, which on these small products cost more than they give."""
    inputs, m_cols = w.shape
    threshold = np.empty(m_cols)
    logits = np.empty((size, m_cols))
    residual = np.empty((size, m_cols))
    grad = np.empty((inputs, m_cols))
    chunks = 8
    taken = 0
    for start in range(0, active_ptr.size - size, size):
        _forward(active_ptr, active, start, w, logits)
        scoring = (steps + taken) % SCORE_EVERY == 0
        if scoring:
            losses *= decay
        _residuals(logits, targets[start : start + size], block_start, residual, losses, scoring)
        _backward(active_ptr, active, start, residual, grad, chunks)
        grad /= size
        taken += 1
        level = scale * math.sqrt(steps + taken)
        for c in range(m_cols):
            threshold[c] = column_penalty[c] * level
        _ftrl_step(z, n, w, grad, threshold, free, alpha, beta)


class OnlineConditionals:
    """FTRL-Proximal logistic conditionals of a stream (module docstring).

    Attributes
    ----------
    rows : rows learned from (whole mini-batches; ``pending`` more wait for the next).
    losses : decayed prequential log-loss of each model (``(len(PENALTIES), n_vars)``
        during the race, ``(1, n_vars)`` after it).
    choice : after the race, each variable's penalty (an index into ``PENALTIES``); None
        before.
    """

    def __init__(self, coding: Coding):
        self.coding = coding
        self.choice = None
        self._layout()
        shape = (coding.n_inputs + 1, self._columns.size)  # the models side by side
        self.z = np.zeros(shape)
        self.n = np.zeros(shape)
        self.w = np.zeros(shape)
        self.losses = np.zeros((len(PENALTIES), coding.schema.n_vars))
        self.pending = np.zeros((0, coding.schema.n_vars), dtype=np.uint8)
        self.rows = 0

    def _layout(self) -> None:
        """The columns of the models learned now: every penalty's during the race, each
        variable's chosen one after (``_columns``: the output each column predicts)."""
        coding, outputs = self.coding, self.coding.n_outputs
        if self.choice is None:
            k = len(PENALTIES)
            self._columns = np.tile(np.arange(outputs), k)
            self._column_penalty = np.repeat(np.array(PENALTIES), outputs)
            starts = [coding.out_start[:-1] + j * outputs for j in range(k)]
            self._block_start = np.concatenate(starts + [[k * outputs]]).astype(np.int64)
        else:
            self._columns = np.arange(outputs)
            self._column_penalty = np.array(PENALTIES)[self.choice[coding.out_var]]
            self._block_start = coding.out_start.astype(np.int64)
        self._free = coding.free[:, self._columns]

    def update(self, rows: np.ndarray) -> None:
        """Learn from validated ``rows`` (the next rows of the stream)."""
        if self.pending.shape[0]:
            rows = np.concatenate([self.pending, rows])
        whole = rows.shape[0] - rows.shape[0] % MINI_BATCH
        done = 0
        while done < whole:
            take = whole - done
            if self.choice is None:  # the race ends at RACE_ROWS, a multiple of MINI_BATCH
                take = min(take, RACE_ROWS - self.rows)
            self._learn(rows[done : done + take])
            done += take
            if self.choice is None and self.rows >= RACE_ROWS:
                self._end_race()
        self.pending = np.ascontiguousarray(rows[whole:])

    def _learn(self, rows: np.ndarray) -> None:
        """FTRL steps on ``rows``, whole mini-batches."""
        coding = self.coding
        active_rows, active = np.nonzero(coding.indicators(rows, dtype=np.bool_))
        active_ptr = np.searchsorted(active_rows, np.arange(rows.shape[0] + 1)).astype(np.int64)
        _learn(
            active_ptr,
            active.astype(np.int64),
            coding.targets(rows)[:, self._columns],
            self.z,
            self.n,
            self.w,
            self.losses.reshape(-1),  # a view: the blocks are model by model
            self._block_start,
            self._free,
            self._column_penalty,
            self.rows // MINI_BATCH,
            MINI_BATCH,
            math.sqrt(math.log(coding.n_inputs + 2) / MINI_BATCH),
            0.5 ** (SCORE_EVERY * MINI_BATCH / LOSS_HALF_LIFE),
            ALPHA,
            BETA,
        )
        self.rows += rows.shape[0]

    def _end_race(self) -> None:
        """Keep each variable's winning model only (its columns, state and losses)."""
        columns = self._chosen_columns()
        self.choice = self.chosen()
        self.z, self.n, self.w = (
            np.ascontiguousarray(a[:, columns]) for a in (self.z, self.n, self.w)
        )
        self.losses = self.losses[self.choice, np.arange(self.losses.shape[1])][None, :].copy()
        self._layout()

    def chosen(self) -> np.ndarray:
        """Each variable's penalty (an index into ``PENALTIES``): the one with the lowest
        prequential loss during the race, fixed after it."""
        return self.losses.argmin(axis=0) if self.choice is None else self.choice

    def _chosen_columns(self) -> np.ndarray:
        outputs = self.coding.n_outputs
        if self.choice is not None:
            return np.arange(outputs)
        return self.chosen()[self.coding.out_var] * outputs + np.arange(outputs)

    def weights(self) -> tuple[np.ndarray, np.ndarray]:
        """The ``(weights, bias)`` of every conditional, each variable's from its model."""
        both = self.w[:, self._chosen_columns()]
        return np.ascontiguousarray(both[:-1]), both[-1].copy()

    # state ----------------------------------------------------------------------------------
    def arrays(self) -> dict[str, np.ndarray]:
        return {
            "ftrl_z": self.z,
            "ftrl_n": self.n,
            "ftrl_w": self.w,
            "ftrl_losses": self.losses,
            "ftrl_pending": self.pending,
            "ftrl_rows": np.array([self.rows], dtype=np.int64),
            "ftrl_choice": np.array([] if self.choice is None else self.choice, dtype=np.int64),
        }

    def load(self, arrays: dict[str, np.ndarray]) -> None:
        """The state of :meth:`arrays` (``ValueError`` on arrays of the wrong shape)."""
        choice = arrays["ftrl_choice"]
        if choice.size:
            if (
                choice.shape != (self.coding.schema.n_vars,)
                or not ((choice >= 0) & (choice < len(PENALTIES))).all()
            ):
                raise ValueError("FTRL penalty choice of the wrong shape or range")
            self.choice = choice.astype(np.int64)
            self._layout()
            self.z = self.n = self.w = np.zeros((self.coding.n_inputs + 1, self._columns.size))
            self.losses = np.zeros((1, self.coding.schema.n_vars))
        for name in ("z", "n", "w", "losses"):
            value = arrays[f"ftrl_{name}"]
            if value.shape != getattr(self, name).shape:
                raise ValueError(f"FTRL {name} of shape {value.shape}")
            setattr(self, name, np.array(value, dtype=np.float64))
        pending = arrays["ftrl_pending"]
        if pending.ndim != 2 or pending.shape[1] != self.coding.schema.n_vars:
            raise ValueError(f"FTRL pending rows of shape {pending.shape}")
        self.pending = np.ascontiguousarray(pending, dtype=np.uint8)
        self.rows = int(arrays["ftrl_rows"][0])
