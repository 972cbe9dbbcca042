"""Logistic-regression conditionals of a stream: a uniform sample of its rows, and the L1 fit on it.

What. :class:`LogisticConditionals` keeps a uniform sample of the rows it is offered (a
:class:`~streammn.weight_sample.WeightSample` of its own, one row in five held out by a hash of
its stream index) and the L1-regularised logistic conditional of every variable fitted on that
sample (:mod:`streammn.logistic.batch`: the penalty of each variable chosen on the held-out rows,
then a fit on all of them). The fit is the learner's state, refreshed at fixed points of the
stream: every time the rows offered double, from ``FIRST_FIT`` rows on, and when the learner
says a finite source has ended (:meth:`refit`). The points are stream positions, so the
conditionals never depend on how the stream was cut into batches, and a saved state resumes
exactly.

Why a sample and a batch fit. On a finite source that fits the sample (every shared benchmark
file: up to 20,000 training rows at the default budget) the fit is the batch optimum on every row,
the same optimum as scikit-learn's L1 logistic regression per variable with its penalty chosen
on held-out rows, which is what the DN2MN paper's LR column learned (jester: DN -48.64 test PLL,
the paper's LR DN2MN -48.81). On a longer stream it is the optimum on a uniform sample of it,
whose error shrinks as one over the sample size. An online optimiser (FTRL-Proximal, truncated
gradient) would learn from every row at a cost per row; its learning rates and a penalty on a
cumulative loss need tuning to land where the batch fit does, and a finite file would need
several passes over it. The price of the batch fit is its time at each refresh (seconds per
refresh at 100 variables); refreshes double apart, so a long stream pays a logarithmic number.

Which variables use it. ``held_out_loss`` is each variable's log-loss on the held-out rows at
its chosen penalty; a learner with ``cpd='auto'`` compares it with its tree's on the same rows
(:class:`~streammn.dtsl.DTSL`).
"""

from __future__ import annotations

import numpy as np

from streammn.logistic.batch import fit_with_held_out
from streammn.logistic.coding import Coding
from streammn.packed_state import pack_state, unpack_state
from streammn.schema import Schema
from streammn.errors import WeightStateError
from streammn.weight_sample import MEMORY_MB, WeightSample

FIRST_FIT = 1_000  # rows offered before the first fit; later fits each time they double
STATE_FORMAT = "streammn-logistic-1"
SAMPLE_SEED = 0x4C52  # the sample's own random numbers (the weight sample's are seed 0)


class LogisticConditionals:
    """A sample of the stream and the L1 logistic conditionals fitted on it (module doc).

    Attributes
    ----------
    weights, bias : the fitted conditionals (:class:`~streammn.logistic.coding.Coding`'s
        columns); None before the first fit.
    penalties : each variable's chosen L1 penalty (mean log-loss units).
    held_out_loss : each variable's mean log-loss on the held-out rows at that penalty, fitted
        without them.
    fitted_rows : the rows offered when the conditionals were last fitted (0: never).
    scheduled_rows : the rows offered at the last scheduled refresh.
    """

    def __init__(self, schema: Schema, memory_mb: float = MEMORY_MB):
        self.schema = schema
        self.coding = Coding(schema)
        self.sample = WeightSample(schema, memory_mb, seed=SAMPLE_SEED)
        self.weights = self.bias = self.penalties = self.held_out_loss = None
        self.fitted_rows = self.scheduled_rows = 0

    @property
    def n_seen(self) -> int:
        return self.sample.n_seen

    @property
    def next_fit(self) -> int:
        """The row count at which the next scheduled refresh falls (a :meth:`refit` at the
        end of a source does not move the schedule)."""
        return max(FIRST_FIT, 2 * self.scheduled_rows)

    def update(self, rows: np.ndarray, first: int) -> None:
        """Offer validated ``rows`` (stream rows ``first ..``), refitting at every refresh point
        they pass (the rows up to the point first, so batch cuts do not matter)."""
        while rows.shape[0]:
            take = min(rows.shape[0], self.next_fit - self.n_seen)
            self.sample.update(rows[:take], first)
            rows, first = rows[take:], first + take
            if self.n_seen >= self.next_fit:
                self.scheduled_rows = self.n_seen
                self.refit()

    def refit(self) -> None:
        """Fit the conditionals on the sample now (warm-started from the last fit)."""
        if self.sample.size == 0 or self.fitted_rows == self.n_seen:
            return
        rows, held = self.sample.rows, self._held_out_slots()
        start = None if self.weights is None else (self.weights, self.bias)
        self.weights, self.bias, self.penalties, self.held_out_loss = fit_with_held_out(
            self.coding, rows, held, start, self.penalties
        )
        self.fitted_rows = self.n_seen

    @property
    def fitted(self) -> bool:
        return self.weights is not None

    def held_out_rows(self) -> np.ndarray:
        """The sample's held-out rows (what the penalties were chosen on and
        ``held_out_loss`` measured on)."""
        return self.sample.rows[self._held_out_slots()]

    def _held_out_slots(self) -> np.ndarray:
        held = self.sample.held_out_slots
        if held.all() or not held.any():  # too few rows for the hash to split
            held = np.arange(held.size) % 5 == 0
        return held

    def log_conditionals(self, rows: np.ndarray) -> np.ndarray:
        """``log P(x_i | x_-i)`` of validated rows for every variable: ``(n, n_vars)``."""
        return self.coding.log_conditionals(rows, self.weights, self.bias)

    def cpds(self):
        """Every variable's conditional as log-linear features (:meth:`Coding.cpds`)."""
        return self.coding.cpds(self.weights, self.bias)

    # state ----------------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        arrays = {"sample": np.frombuffer(self.sample.to_bytes(), dtype=np.uint8)}
        if self.fitted:
            arrays.update(
                weights=self.weights,
                bias=self.bias,
                penalties=self.penalties,
                held_out_loss=self.held_out_loss,
            )
        meta = {
            "format": STATE_FORMAT,
            "fitted_rows": self.fitted_rows,
            "scheduled_rows": self.scheduled_rows,
        }
        return pack_state(meta, arrays)

    @classmethod
    def from_bytes(cls, schema: Schema, data: bytes) -> "LogisticConditionals":
        """The conditionals saved by :meth:`to_bytes` (``ValueError`` on anything else)."""
        meta, arrays = unpack_state(data)
        if meta.get("format") != STATE_FORMAT:
            raise ValueError(f"logistic state format {meta.get('format')!r}")
        out = cls(schema)
        try:
            out.sample = WeightSample.from_bytes(arrays["sample"].tobytes())
        except WeightStateError as error:
            raise ValueError(str(error)) from None
        if out.sample.schema != schema:
            raise ValueError("the logistic sample is over another schema")
        out.fitted_rows = int(meta["fitted_rows"])
        out.scheduled_rows = int(meta["scheduled_rows"])
        if "weights" in arrays:
            shape = (out.coding.n_inputs, out.coding.n_outputs)
            if arrays["weights"].shape != shape or arrays["bias"].shape != (shape[1],):
                raise ValueError("logistic weights of the wrong shape")
            out.weights, out.bias = arrays["weights"], arrays["bias"]
            out.penalties, out.held_out_loss = arrays["penalties"], arrays["held_out_loss"]
        return out
