"""Which variables use their logistic regression rather than their tree (``cpd='auto'``), and
when that choice is made.

What. Variable ``i`` uses its regression when the regression's mean log-loss on the held-out
rows of the regressions' sample is below its tree's on the same rows, the tree's leaves
leaving those rows out (:meth:`~streammn.trees.forest.Forest.left_out_log_prob`).

When. Scoring the held-out rows under every tree and every regression costs about as much as
learning a batch (0.06 s at 100 variables), so the choice is state, not a question asked at
every look: it is made at stream rows ``CHOICE_FROM * 2**k`` (4,096, 8,192, ... 524,288,
1,048,576, ...), each doubling of the stream as often as the one before, so its cost vanishes
on a long stream while it follows the regressions through their early rows; and when a finite
source ends (:meth:`Choice.finish`), so a file's model uses the choice of all its rows. A
choice at fixed rows is a function of the rows only: the learner cuts its batches there, batch
cuts never change it, and a resumed run makes the same choices as one run. The end's choice
holds only until more rows arrive (a run resumed after an end then continues as one run would).

Under forgetting (DTSL's ``half_life``) the stream's model moves with it, so the choice is made
again at every multiple of :func:`forgetting_period` (the halving interval rounded up to a
multiple of ``CHOICE_FROM``: at most one choice per half-life, never more often than every 4,096
rows), on the sample that leans toward recent rows (:mod:`streammn.logistic.sample`), each tree
leaving a held-out row out of its leaves by what it still counts for.
"""

from __future__ import annotations

import numpy as np

CHOICE_FROM = 4096  # the first row where a choice is made; then at every doubling


def forgetting_period(interval: int) -> int:
    """Rows between choices under forgetting with halvings every ``interval`` rows."""
    return -(-interval // CHOICE_FROM) * CHOICE_FROM


def choice_rows(first: int, last: int, every: int | None = None) -> list[int]:
    """The rows ``CHOICE_FROM * 2**k`` in ``(first, last]``, in order; with ``every`` (under
    forgetting) the multiples of ``every`` there instead."""
    if every is not None:
        return list(range((first // every + 1) * every, last + 1, every))
    out, at = [], CHOICE_FROM
    while at <= last:
        if at > first:
            out.append(at)
        at *= 2
    return out


def regressions_win(forest, logistic) -> np.ndarray:
    """The variables whose regression scores the held-out rows of ``logistic``'s sample
    better than its tree in ``forest`` does (a boolean mask; none before there are any)."""
    n = logistic.schema.n_vars
    held = logistic.held_out_rows()
    if not logistic.fitted or held.shape[0] == 0:
        return np.zeros(n, dtype=bool)
    tree_loss = -forest.left_out_log_prob(held, logistic.held_out_weights()).mean(axis=0)
    return logistic.held_out_losses() < tree_loss


class Choice:
    """The last choice made at a fixed row (``at_rows``), and the end's (``at_end``, made at
    ``end_rows``, in force while the learner has seen exactly that many rows)."""

    def __init__(self, n_vars: int):
        self.at_rows = np.zeros(n_vars, dtype=bool)
        self.at_end = np.zeros(n_vars, dtype=bool)
        self.end_rows = -1

    def current(self, rows_seen: int) -> np.ndarray:
        """The mask in force after ``rows_seen`` rows."""
        return self.at_end if rows_seen == self.end_rows else self.at_rows

    def finish(self, mask: np.ndarray, rows_seen: int) -> bool:
        """Record the end's choice; whether the mask in force changed."""
        before = self.current(rows_seen).copy()
        self.at_end, self.end_rows = mask, rows_seen
        return not np.array_equal(before, mask)

    def to_array(self) -> np.ndarray:
        """``[at_rows..., at_end..., end_rows]`` as int64 (a learner state array)."""
        return np.concatenate([self.at_rows, self.at_end, [self.end_rows]]).astype(np.int64)

    @classmethod
    def from_array(cls, array: np.ndarray, n_vars: int) -> "Choice":
        """The choice :meth:`to_array` saved; ``ValueError`` on the wrong shape or values."""
        if array.shape != (2 * n_vars + 1,) or not np.isin(array[:-1], (0, 1)).all():
            raise ValueError(f"a choice of conditionals of shape {array.shape}")
        choice = cls(n_vars)
        choice.at_rows = array[:n_vars].astype(bool)
        choice.at_end = array[n_vars:-1].astype(bool)
        choice.end_rows = int(array[-1])
        return choice
