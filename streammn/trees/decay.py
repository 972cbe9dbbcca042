"""Forgetting for one-pass DTSL: counts that halve every ``half_life`` rows.

A Hoeffding grower counts every row forever with the same weight, so after ten million rows a
change in the stream moves the leaf distributions by a hair. With a half-life the weight of a
row falls by half every ``half_life`` rows, so the model has a memory horizon of a few
half-lives and follows a moving stream at the price of noisier estimates.

Design: deterministic periodic halving rather than float weights. Every ``half_life`` rows
(rounded up to a multiple of ``grace_period``, so halvings fall on the grace-period
boundaries where the grower looks at its leaves, and the model still does not depend on how the
stream was cut into batches) every integer count is halved, rounding down: the leaf target
counts of the forest and the split statistics of the active leaves (``tot``, ``stats`` and the
slot row counts with their look schedule). A row of age ``a`` then weighs
``2**-floor(a / half_life)``, a step version of exponential decay with the stated half-life;
the counts stay integers, so LeafStats and every kernel run unchanged and the counts stay
exact, and the memory is the same as without forgetting. Rounding down drops at most one row
per count per halving, which is below the noise of a count that small.

What follows from it: the significance test sees the decayed counts, so a split needs evidence
from the last few half-lives; the relevance floor measures a split's share against the decayed
total (:attr:`ForgettingGrower.stream_weight`) instead of every row ever seen; the exact rebuilds
of the first rows run only while no halving has happened (they recount the buffer at full
weight). The replay buffer is emptied at every halving: its rows would be replayed into new
leaves at full weight, more than the halved counts of the leaves they came through (a child's
statistics must never exceed its counts); it refills from the rows that follow. The split
attempts a leaf has had are not halved: the test's correction for repeated looks stays honest.

With no half-life (the default) DTSL uses the plain :class:`HoeffdingGrower`, so the default
model is bit-identical to one learned without this module; a half-life longer than the stream
gives the same model too (no halving ever happens), which the tests check.
"""

from __future__ import annotations

import math

from streammn.trees.hoeffding import HoeffdingGrower


def halving_interval(half_life: float, grace_period: int) -> int:
    """Rows between halvings: ``half_life`` rounded up to a multiple of ``grace_period``."""
    return int(math.ceil(half_life / grace_period)) * grace_period


class ForgettingGrower(HoeffdingGrower):
    """A :class:`HoeffdingGrower` whose counts halve every ``half_life`` rows (see the module
    docstring). The halvings are a function of ``rows_seen``, so the state needs nothing more."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.interval = halving_interval(self.settings.half_life, self.settings.grace_period)

    def learn(self, rows) -> None:
        start, n, h = 0, rows.shape[0], self.interval
        while start < n:
            stop = min(n, start + h - self.rows_seen % h)
            super().learn(rows[start:stop])
            start = stop
            if self.rows_seen % h == 0:
                self.halve()

    def halve(self) -> None:
        """Halve every count, rounding down (leaf targets, split statistics, look schedule)."""
        f, st = self.forest, self.stats
        f.counts[: f.n_nodes] >>= 1
        for counts in (st.tot, st.stats, st.n, st.last_attempt):
            counts >>= 1
        self._buf_len = self._buf_pos = 0  # its rows would be replayed at full weight

    @property
    def stream_weight(self) -> float:
        """The decayed number of rows seen: ``h (1 - 2**-k) + r`` after ``k`` halvings and
        ``r`` rows since the last."""
        k, r = divmod(self.rows_seen, self.interval)
        return self.interval * (1.0 - 0.5**k) + r

    def _rebuild_due(self) -> bool:
        return self.rows_seen <= self.interval and super()._rebuild_due()
