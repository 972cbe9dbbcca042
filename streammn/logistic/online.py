"""Logistic conditionals learned from a stream in one pass: FTRL-Proximal on mini-batches, three
penalties racing at first, each variable keeping the one that predicts it best.

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
streams FTRL sees the stream. Mini-batches of 128 rows converge markedly faster per row than of
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

Thinning. FTRL's steps shrink as one over the square root of their number, so late mini-batches
move the weights little while costing as much as early ones. The first ``2 * THIN_FROM``
mini-batches (131,072 rows) are all learned from; then one in ``2 ** k`` while the stream is
``2 ** k`` to ``2 ** (k + 1)`` times ``THIN_FROM`` mini-batches long (:func:`learned`, by
stream index, so cuts never matter), and every doubling of the stream adds the same number of
steps. On the 1M-row, 100-variable planted stream the regressions learned this way score
-30.351 test PLL for the DN against -30.339 from every mini-batch (7,812 steps against 2,513),
at 506k rows/s against 213k.

Forgetting. With a halving interval (DTSL's ``half_life``, rounded as the trees' is:
:mod:`streammn.trees.decay`) FTRL forgets as the trees' counts do. Its state is two sums over the
mini-batches learned, ``z`` of the gradients (less the proximal terms) and ``n`` of their
squares; at every multiple of the interval (at the end of the mini-batch that reaches it, a
function of the stream position) ``n`` is halved, so a mini-batch's squared gradient weighs
``2 ** -k`` after ``k`` halvings, the trees' step decay, and every coordinate gets the larger
steps of a younger stream back: the weights follow the recent gradients at the pace of the
last few half-lives, and an input that stopped mattering is pulled to the L1 threshold and out.
The threshold follows the decayed number of steps (``column_steps``: the penalty's
``sqrt(T)``, ``T`` the steps' total weight, halved too). ``z`` is rewritten so that the weights
stay where they are at a halving (:func:`_rebase`): halving it as well measured worse (a
12-variable planted stream whose structure changes, test PLL after the change -6.46 against
-6.42 for no forgetting: every halving shrank the weights by about a square root of two, which
the next steps had to win back). No mini-batch is thinned (a changing stream must keep its late
steps). With no interval, nothing of this runs and the state is as before.

Restarts (DTSL's ``drift``). :meth:`OnlineConditionals.restart` starts some variables'
regressions afresh: their columns' state zeroed and their steps' weight (``column_steps``, one
per column, so the penalty threshold restarts with them) set to zero, then FTRL steps on the
recent rows given (the replay buffer's since the change point: the whole mini-batches of its
latest rows) for those columns only; every other column goes on, not learning those rows
twice. With restarts possible no mini-batch is thinned either: a regression restarted late in a
long stream must learn from every mini-batch after it.
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
THIN_FROM = 512  # mini-batches (65,536 rows) learned from in full; then fewer (learned())


def learned(index: np.ndarray) -> np.ndarray:
    """Which mini-batches (by stream index) FTRL learns from: all of the first ``THIN_FROM``,
    then one in ``2 ** k`` while the stream is between ``2 ** k`` and ``2 ** (k + 1)`` times
    that long, so every doubling of the stream adds the same number of steps (module doc)."""
    stride = np.ones(index.shape, dtype=np.int64)
    late = index >= THIN_FROM
    stride[late] = 2 ** np.floor(np.log2(index[late] // THIN_FROM)).astype(np.int64)
    return index % stride == 0


@nb.njit(cache=True, nogil=True)
def _ftrl_step(z, n, w, grad, threshold, free, alpha, beta):
    """One FTRL-Proximal step for every coordinate: ``grad`` the mean gradient, ``threshold``
    the L1 threshold of each column (rows: inputs, the last the intercept, never penalised),
    ``free`` False where an input is the column's own variable (its gradient is taken as zero,
    so its weight stays zero). Branch-free inner loops, so they run on SIMD lanes."""
    inputs, outputs = z.shape
    for r in range(inputs):
        intercept = r == inputs - 1
        for c in range(outputs):
            g = grad[r, c] * (1.0 if intercept or free[r, c] else 0.0)
            n_old = n[r, c]
            n_new = n_old + g * g
            root = math.sqrt(n_new)
            zz = z[r, c] + g - (root - math.sqrt(n_old)) / alpha * w[r, c]
            z[r, c] = zz
            n[r, c] = n_new
            l1 = 0.0 if intercept else threshold[c]
            shrunk = max(abs(zz) - l1, 0.0)
            w[r, c] = -math.copysign(shrunk, zz) / ((beta + root) / alpha)


@nb.njit(cache=True, nogil=True)
def _rebase(z, n, w, old_threshold, new_threshold, free, alpha, beta):
    """Forget: ``n`` already halved, the L1 threshold of each column moved from
    ``old_threshold`` to ``new_threshold``; rewrite ``z`` so that every weight stays ``w``
    (a zero weight's ``z`` keeps its place relative to the threshold)."""
    inputs, outputs = z.shape
    for r in range(inputs):
        intercept = r == inputs - 1
        for c in range(outputs):
            if not (intercept or free[r, c]):
                continue
            if w[r, c] != 0.0 or intercept:
                l1 = 0.0 if intercept else new_threshold[c]
                scale = (beta + math.sqrt(n[r, c])) / alpha
                z[r, c] = -math.copysign(l1 + abs(w[r, c]) * scale, w[r, c])
            elif old_threshold[c] > 0.0:
                z[r, c] *= new_threshold[c] / old_threshold[c]


@nb.njit(cache=True, nogil=True)
def _residuals(logits, rows, start, column_var, column_val, block_start, residual, loss, scoring):
    """Predicted minus observed probability of every column (column ``c`` predicts
    ``x[column_var[c]] == column_val[c]`` of rows ``start ..``) and, when ``scoring``, each
    block's log-loss summed over the rows into ``loss``: a block of one column is a sigmoid
    (binary), a longer one a softmax."""
    for b in range(block_start.size - 1):
        lo, hi = block_start[b], block_start[b + 1]
        total_loss = 0.0
        for r in range(logits.shape[0]):
            if hi - lo == 1:
                x = logits[r, lo]
                e = math.exp(-abs(x))
                p = 1.0 / (1.0 + e) if x >= 0 else e / (1.0 + e)
                y = 1.0 if rows[start + r, column_var[lo]] == column_val[lo] else 0.0
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
                    y = 1.0 if rows[start + r, column_var[c]] == column_val[c] else 0.0
                    residual[r, c] = math.exp(logits[r, c] - log_norm) - y
                    if scoring and y > 0:
                        total_loss += log_norm - logits[r, c]
        loss[b] += total_loss


@nb.njit(cache=True, nogil=True)
def _active_inputs(rows, in_start):
    """Each row's active input columns (value ``v > 0`` of variable ``j`` is column
    ``in_start[j] + v - 1``, reference coding) as ``(active_ptr, active)``."""
    n, n_vars = rows.shape
    active_ptr = np.empty(n + 1, dtype=np.int64)
    active_ptr[0] = 0
    for r in range(n):
        count = 0
        for j in range(n_vars):
            if rows[r, j] > 0:
                count += 1
        active_ptr[r + 1] = active_ptr[r] + count
    active = np.empty(active_ptr[n], dtype=np.int64)
    k = 0
    for r in range(n):
        for j in range(n_vars):
            v = rows[r, j]
            if v > 0:
                active[k] = in_start[j] + v - 1
                k += 1
    return active_ptr, active


@nb.njit(cache=True, nogil=True, inline="always")
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


@nb.njit(cache=True, nogil=True)
def _backward(active_ptr, active, start, residual, grad):
    """``grad`` = the design's transpose times ``residual``: each row's residuals added into
    the rows of its active inputs and the intercept, in row order."""
    bias = grad.shape[0] - 1
    grad[:] = 0.0
    for r in range(residual.shape[0]):
        _add(grad[bias], residual[r])
        for k in range(active_ptr[start + r], active_ptr[start + r + 1]):
            _add(grad[active[k]], residual[r])


@nb.njit(cache=True, nogil=True)
def _learn(
    active_ptr,
    active,
    rows,
    column_var,
    column_val,
    z,
    n,
    w,
    losses,
    block_start,
    free,
    column_penalty,
    steps,
    column_steps,
    size,
    scale,
    decay,
    alpha,
    beta,
):
    """FTRL steps on every whole mini-batch of ``size`` rows, row ``r`` given by its active
    input columns ``active[active_ptr[r]:active_ptr[r + 1]]`` (the intercept, the last row of
    ``w``, always on) and its values in ``rows`` (column ``c`` of ``w`` predicts
    ``x[column_var[c]] == column_val[c]``); ``steps`` taken before (``column_steps``: their
    total weight for each column, ``steps`` without forgetting or restarts),
    ``scale`` the penalty scale per ``sqrt`` of that weight. ``losses`` (per
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
    taken = 0
    for start in range(0, active_ptr.size - size, size):
        _forward(active_ptr, active, start, w, logits)
        scoring = (steps + taken) % SCORE_EVERY == 0
        if scoring:
            losses *= decay
        _residuals(
            logits, rows, start, column_var, column_val, block_start, residual, losses, scoring
        )
        _backward(active_ptr, active, start, residual, grad)
        grad /= size
        taken += 1
        for c in range(m_cols):
            threshold[c] = column_penalty[c] * (scale * math.sqrt(column_steps[c] + taken))
        _ftrl_step(z, n, w, grad, threshold, free, alpha, beta)


class OnlineConditionals:
    """FTRL-Proximal logistic conditionals of a stream (module docstring).

    Attributes
    ----------
    rows : rows offered (whole mini-batches; ``pending`` more wait for the next).
    steps : FTRL steps taken: the mini-batches learned from (:func:`learned`).
    losses : decayed prequential log-loss of each model (``(len(PENALTIES), n_vars)``
        during the race, ``(1, n_vars)`` after it).
    choice : after the race, each variable's penalty (an index into ``PENALTIES``); None
        before.
    interval : rows between halvings of the state (forgetting); None: none.
    restarts : whether :meth:`restart` may be called (drift).
    column_steps : with forgetting or restarts, each column's steps' total weight (each step
        halved at every halving after it, none before the column's last restart); else None
        (every column's is ``steps``).
    """

    def __init__(self, coding: Coding, interval: int | None = None, restarts: bool = False):
        self.coding = coding
        self.interval = None if interval is None else int(interval)
        self.restarts = bool(restarts)
        self.choice: np.ndarray | None = None
        self._layout()
        tracked = self.interval is not None or self.restarts
        self.column_steps: np.ndarray | None = np.zeros(self._columns.size) if tracked else None
        shape = (coding.n_inputs + 1, self._columns.size)  # the models side by side
        self.z = np.zeros(shape)
        self.n = np.zeros(shape)
        self.w = np.zeros(shape)
        self.losses = np.zeros((len(PENALTIES), coding.schema.n_vars))
        self.pending = np.zeros((0, coding.schema.n_vars), dtype=np.uint8)
        self.rows = 0
        self.steps = 0

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
            if self.interval is not None:  # up to the mini-batch that reaches a halving
                due = (self.rows // self.interval + 1) * self.interval
                take = min(take, -(-due // MINI_BATCH) * MINI_BATCH - self.rows)
            before = self.rows
            self._learn(rows[done : done + take])
            done += take
            if self.interval is not None:
                self._halve(self.rows // self.interval - before // self.interval)
            if self.choice is None and self.rows >= RACE_ROWS:
                self._end_race()
        # a copy, never a view: the caller may refill its batch's buffer for the next batch
        self.pending = rows[whole:].copy()

    def _learn(self, rows: np.ndarray) -> None:
        """FTRL steps on the mini-batches of ``rows`` (whole ones) that :func:`learned` keeps."""
        coding, count = self.coding, rows.shape[0] // MINI_BATCH
        keep = learned(np.arange(self.rows // MINI_BATCH, self.rows // MINI_BATCH + count))
        if self.column_steps is not None:  # forgetting or restarts: every mini-batch
            keep[:] = True
        self.rows += rows.shape[0]
        if not keep.all():
            rows = rows.reshape(count, MINI_BATCH, -1)[keep].reshape(-1, rows.shape[1])
        if not rows.shape[0]:
            return
        rows = np.ascontiguousarray(rows)
        active_ptr, active = _active_inputs(rows, coding.in_start)
        _learn(
            active_ptr,
            active,
            rows,
            coding.out_var[self._columns],
            coding.out_val[self._columns],
            self.z,
            self.n,
            self.w,
            self.losses.reshape(-1),  # a view: the blocks are model by model
            self._block_start,
            self._free,
            self._column_penalty,
            self.steps,
            self._column_steps(),
            MINI_BATCH,
            math.sqrt(math.log(coding.n_inputs + 2) / MINI_BATCH),  # as _thresholds()
            0.5 ** (SCORE_EVERY * MINI_BATCH / LOSS_HALF_LIFE),
            ALPHA,
            BETA,
        )
        self.steps += rows.shape[0] // MINI_BATCH
        if self.column_steps is not None:
            self.column_steps += rows.shape[0] // MINI_BATCH

    def _column_steps(self) -> np.ndarray:
        """Each column's steps' weight (:attr:`column_steps`, or ``steps`` for all)."""
        if self.column_steps is None:
            return np.full(self._columns.size, float(self.steps))
        return self.column_steps

    def restart(self, variables: np.ndarray, recent: np.ndarray) -> None:
        """Start the regressions of ``variables`` afresh and learn them from the ``recent``
        rows (module docstring): their columns' ``z``, ``n`` and weights zeroed, their steps'
        weight too, then FTRL steps on the whole mini-batches of ``recent``'s latest rows for
        those columns alone (``steps`` and the other columns unchanged)."""
        if not self.restarts:
            raise ValueError("restart needs OnlineConditionals(..., restarts=True)")
        assert self.column_steps is not None  # tracked with restarts
        columns = np.flatnonzero(np.isin(self.coding.out_var[self._columns], variables))
        for array in (self.z, self.n, self.w):
            array[:, columns] = 0.0
        self.column_steps[columns] = 0.0
        count = recent.shape[0] // MINI_BATCH
        if count == 0 or columns.size == 0:
            return
        rows = np.ascontiguousarray(recent[recent.shape[0] - count * MINI_BATCH :])
        coding, outputs = self.coding, self._columns[columns]
        # the blocks (a softmax's columns, per model during the race) of the columns kept
        model = columns // coding.n_outputs
        key = model * coding.schema.n_vars + coding.out_var[outputs]
        starts = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]]))
        block_start = np.concatenate([starts, [columns.size]]).astype(np.int64)
        z, n, w = (np.ascontiguousarray(a[:, columns]) for a in (self.z, self.n, self.w))
        steps = np.zeros(columns.size)
        active_ptr, active = _active_inputs(rows, coding.in_start)
        _learn(
            active_ptr,
            active,
            rows,
            coding.out_var[outputs],
            coding.out_val[outputs],
            z,
            n,
            w,
            np.zeros(starts.size),  # their prequential losses stay the stream's
            block_start,
            np.ascontiguousarray(self._free[:, columns]),
            self._column_penalty[columns],
            0,
            steps,
            MINI_BATCH,
            math.sqrt(math.log(coding.n_inputs + 2) / MINI_BATCH),  # as _thresholds()
            1.0,
            ALPHA,
            BETA,
        )
        self.z[:, columns], self.n[:, columns], self.w[:, columns] = z, n, w
        self.column_steps[columns] = count

    def _halve(self, times: int) -> None:
        """Forget: ``times`` halvings of ``n`` and the steps' weight, ``z`` rewritten to keep
        the weights (module docstring)."""
        if times <= 0:
            return
        factor = 0.5**times
        old = self._thresholds()
        self.n *= factor
        assert self.column_steps is not None  # tracked with forgetting
        self.column_steps *= factor
        _rebase(self.z, self.n, self.w, old, self._thresholds(), self._free, ALPHA, BETA)

    def _thresholds(self) -> np.ndarray:
        """Each column's L1 threshold at the steps' weight now (as :func:`_learn` sets it)."""
        scale = math.sqrt(math.log(self.coding.n_inputs + 2) / MINI_BATCH)
        return self._column_penalty * (scale * np.sqrt(self._column_steps()))

    def _end_race(self) -> None:
        """Keep each variable's winning model only (its columns, state and losses)."""
        columns = self._chosen_columns()
        self.choice = self.chosen()
        self.z, self.n, self.w = (
            np.ascontiguousarray(a[:, columns]) for a in (self.z, self.n, self.w)
        )
        self.losses = self.losses[self.choice, np.arange(self.losses.shape[1])][None, :].copy()
        if self.column_steps is not None:
            self.column_steps = self.column_steps[columns]
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
        arrays: dict[str, np.ndarray] = {
            "ftrl_z": self.z,
            "ftrl_n": self.n,
            "ftrl_w": self.w,
            "ftrl_losses": self.losses,
            "ftrl_pending": self.pending,
            "ftrl_rows": np.array([self.rows, self.steps], dtype=np.int64),
            "ftrl_choice": np.array([] if self.choice is None else self.choice, dtype=np.int64),
        }
        return arrays | (
            {} if self.column_steps is None else {"ftrl_column_steps": self.column_steps}
        )

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
        counts = arrays["ftrl_rows"]
        if counts.shape != (2,):
            raise ValueError(f"FTRL row and step counts of shape {counts.shape}")
        self.rows, self.steps = int(counts[0]), int(counts[1])
        if self.column_steps is not None:
            weights = arrays["ftrl_column_steps"]
            if (
                weights.shape != (self._columns.size,)
                or not ((weights >= 0) & (weights <= self.steps)).all()
            ):
                raise ValueError(f"FTRL column steps of shape {weights.shape} or out of range")
            self.column_steps = np.array(weights, dtype=np.float64)
