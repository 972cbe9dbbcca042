"""Logistic-regression conditionals of a stream: FTRL online, and the batch optimum when a finite
source ends within the rows kept.

What. :class:`LogisticConditionals` learns every variable's L1 logistic conditional two ways
at once. Online, from the stream (:mod:`streammn.logistic.online`: FTRL-Proximal on mini-batches
cut at fixed stream positions, the penalty chosen per variable by prequential loss), which is
what a stream uses. And from a uniform sample of the rows (a
:class:`~streammn.network.weight_sample.WeightSample` of its own, one row in five held out by a
hash of its stream index): when a finite source ends (:meth:`~LogisticConditionals.finish`) and the
sample holds every one of its rows, the batch optimum on them (:mod:`streammn.logistic.batch`: each
variable's penalty chosen on the held-out rows, then a fit on all), which then replaces FTRL's
weights until more rows arrive. Not beyond about 300 binary variables (``BATCH_FIT_COST``), where
the fit would cost minutes: there FTRL's weights stay.

Why both. One pass of FTRL over a short file is far from the optimum (jester, 9,000 rows: -55
test PLL after one pass, -49.4 after twenty, the batch fit -48.6), and on such a file "revisit
the rows kept" is exactly the batch fit: the same optimum as scikit-learn's L1 logistic
regression per variable with its penalty chosen on held-out rows, what the DN2MN paper's LR
column learned (its jester -48.81). A batch fit costs seconds at 100 variables, so a stream
cannot wait for one every few thousand rows; FTRL costs a fixed amount per row and sees every
row. Both are functions of the rows and their stream positions only, so batch cuts never change
them and a saved state resumes exactly.

Exact mode. A learner reading a finite file in passes (``exact=True``: DTSL's ``mode='exact'``)
keeps a :class:`~streammn.logistic.sample.PositionSample` instead, a uniform sample that
partitions of the file sampled apart merge into (so the passes can be made on Dask), and its
regressions are the batch fit on that sample whatever the file's length: a file longer than the
sample gets the optimum on a uniform sample of it (the penalty chosen on the sample's held-out
rows), not one pass of FTRL, which is sequential in the rows' order and could not be made from
the partitions. A file the sample holds whole gives the same rows in the same order as the
one-pass sample, so the same fit. FTRL runs there only where the batch fit is out of reach
(``cpd='lr'`` beyond ``BATCH_FIT_COST``, in one process).

Forgetting. With a halving interval (DTSL's ``half_life`` in one pass) FTRL halves its state
where the trees halve their counts (:mod:`streammn.logistic.online`), and the sample is a
:class:`~streammn.logistic.sample.PositionSample` leaning toward recent rows at the same
half-life and holding at most ``FORGETTING_WINDOW`` half-lives' worth of rows, so
``cpd='auto'`` judges trees and regressions on the stream as it is now: a sample of the usual
25,000 rows would reach back far beyond what the forgetting models still count (on a planted
stream that changed 20,000 rows before, with a half-life of 4,000, half its held-out rows were
older than 12,000 rows, from before the change, and ``auto`` chose the regressions for all 12
variables where the trees predicted the new rows better for every one). No batch fit
is made then: it would weigh every row of a finite source alike, which is what forgetting is
asked not to do; the regressions are FTRL's.

Drift. With restarts (DTSL's ``drift``) a variable whose tree's change detector alarms gets its
regression restarted (:meth:`OnlineConditionals.restart
<streammn.logistic.online.OnlineConditionals.restart>`): it relearns from the rows after the
alarm while the others go on, and no batch fit is made (a finite source's rows would again
weigh alike across the change).

Which variables use it. :meth:`~LogisticConditionals.held_out_losses` is each variable's log-loss on
the sample's held-out rows under the weights in use; a learner with ``cpd='auto'`` compares it with
its tree's on the same rows (:class:`~streammn.dtsl.DTSL`).
"""

from __future__ import annotations

import numpy as np

from streammn.logistic.batch import PATH_STEPS, fit_with_held_out
from streammn.logistic.coding import Coding
from streammn.logistic.online import OnlineConditionals
from streammn.packed_state import pack_state, unpack_state
from streammn.progress_bar import next_phase
from streammn.schema import Schema
from streammn.errors import WeightStateError
from streammn.logistic.sample import PositionSample
from streammn.network.weight_sample import MEMORY_MB, WeightSample, sample_capacity

STATE_FORMAT = "streammn-logistic-3"
# The batch fit's cost grows about as outputs x inputs^2 (each proximal step solves a quadratic
# in the inputs' Gram matrix per output column): planted files of 2,000 rows took 0.34 s at 100
# binary variables, 2.5 s at 300, 63 s at 500. Beyond this (300 binary variables) a finite
# source keeps FTRL's weights.
BATCH_FIT_COST = 300**3
SAMPLE_SEED = 0x4C52  # the sample's own random numbers (the weight sample's are seed 0)
POSITION_SAMPLE = "position"  # a state's sample kind in exact mode (absent: algorithm L's)
FORGETTING_SAMPLE = "forgetting"  # and with a halving interval (saved as "interval")
FORGETTING_WINDOW = 2  # under forgetting the sample keeps at most this many intervals' rows


def batch_fit_affordable(coding: Coding) -> bool:
    """Whether a batch fit is made at all: its cost within ``BATCH_FIT_COST``."""
    return coding.n_outputs * coding.n_inputs**2 <= BATCH_FIT_COST


class LogisticConditionals:
    """The logistic conditionals of a stream: FTRL online, and the batch fit on the
    sample when a finite source ends within it (module docstring).

    Attributes
    ----------
    online : :class:`~streammn.logistic.online.OnlineConditionals`, learned from the stream.
    weights, bias : the batch fit (:class:`~streammn.logistic.coding.Coding`'s columns); None
        before the first.
    penalties : each variable's L1 penalty in the batch fit (mean log-loss units).
    held_out_loss : each variable's mean log-loss on the held-out rows at that penalty, fitted
        without them.
    fitted_rows : the rows offered when the batch fit was made (0: never).
    exact : a finite source read in passes (module docstring): a mergeable sample, and the
        batch fit on it whatever the source's length.
    interval : rows between halvings (forgetting, module docstring); None: no forgetting.
    restarts : whether variables' regressions may restart (drift, module docstring).
    """

    def __init__(
        self,
        schema: Schema,
        memory_mb: float = MEMORY_MB,
        exact: bool = False,
        interval: int | None = None,
        restarts: bool = False,
    ):
        if exact and interval is not None:
            raise ValueError("exact mode's conditionals do not forget (a finite source)")
        self.schema = schema
        self.coding = Coding(schema)
        self.exact = bool(exact)
        self.interval = None if interval is None else int(interval)
        self.restarts = bool(restarts)
        capacity = sample_capacity(schema.n_vars, memory_mb)
        if self.interval is not None:  # the rows the counts mostly reflect (module docstring)
            capacity = max(min(capacity, FORGETTING_WINDOW * self.interval), 1)
        self.sample: PositionSample | WeightSample
        if self.exact or self.interval is not None:
            self.sample = PositionSample(schema, capacity, SAMPLE_SEED, self.interval)
        else:
            self.sample = WeightSample(schema, memory_mb, seed=SAMPLE_SEED)
        self.online = OnlineConditionals(self.coding, self.interval, self.restarts)
        self.weights: np.ndarray | None = None
        self.bias: np.ndarray | None = None
        self.penalties: np.ndarray | None = None
        self.held_out_loss: np.ndarray | None = None
        self.fitted_rows = 0

    @property
    def n_seen(self) -> int:
        return self.sample.n_seen

    def update(self, rows: np.ndarray, first: int) -> None:
        """Learn from validated ``rows``, stream rows ``first ..`` (exact mode within the
        batch fit's reach: only the sample, FTRL's weights would never be used)."""
        self.sample.update(rows, first)
        if not (self.exact and batch_fit_affordable(self.coding)):
            self.online.update(rows)

    def finish(self, bar=None) -> bool:
        """A finite source has ended: when the sample holds every row (in exact mode: always),
        fit the batch optimum on it (from scratch: a function of the rows only, so a run
        resumed after an earlier end ends as one run would); a longer stream keeps FTRL's
        weights. Whether it fitted. ``bar``: a progress bar that counts the fits."""
        if self.sample.size == 0 or self.fitted_rows == self.n_seen:
            return False
        whole = self.exact or self.n_seen <= self.sample.capacity
        moving = self.interval is not None or self.restarts  # the stream's rows not alike
        if not whole or moving or not batch_fit_affordable(self.coding):
            return False
        if bar is not None:
            next_phase(bar, "fitting the regressions", "fits", total=PATH_STEPS + 1)
        self.weights, self.bias, self.penalties, self.held_out_loss = fit_with_held_out(
            self.coding,
            self.sample.rows,
            self._held_out_slots(),
            on_fit=None if bar is None else bar.update,
        )
        self.fitted_rows = self.n_seen
        return True

    @property
    def batch_current(self) -> bool:
        """Whether the batch fit is of every row learned (else FTRL's weights are current)."""
        return self.weights is not None and self.fitted_rows == self.n_seen

    def current(self) -> tuple[np.ndarray, np.ndarray]:
        """The ``(weights, bias)`` in use: the batch fit while it is current, else FTRL's."""
        # (a current batch fit has its weights and bias)
        return (self.weights, self.bias) if self.batch_current else self.online.weights()  # type: ignore[return-value]

    @property
    def fitted(self) -> bool:
        """Whether there is anything to use: a batch fit, or FTRL past its first step."""
        return self.batch_current or self.online.rows > 0

    def held_out_rows(self) -> np.ndarray:
        """The sample's held-out rows (what the batch fit's penalties were chosen on)."""
        return self.sample.rows[self._held_out_slots()]

    def held_out_weights(self) -> np.ndarray | None:
        """Under forgetting, each held-out row's weight in the trees' counts now (``2 ** -k``
        after ``k`` halvings since it was learned: :mod:`streammn.trees.decay`), so a tree can
        leave it out of its leaves as far as they still count it; None without forgetting
        (every row counts 1)."""
        if self.interval is None:
            return None
        assert isinstance(self.sample, PositionSample)  # the sample of forgetting
        index = self.sample.index[self._held_out_slots()]
        return 0.5 ** (self.n_seen // self.interval - index // self.interval)

    def held_out_losses(self) -> np.ndarray:
        """Each variable's mean log-loss on the held-out rows: the batch fit's from its path
        (fitted without them); FTRL's measured now (it learned from them too, one row among
        the stream's many)."""
        if self.batch_current:
            assert self.held_out_loss is not None  # set with the batch fit
            return self.held_out_loss
        held = self.held_out_rows()
        weights, bias = self.online.weights()
        return -self.coding.log_conditionals(held, weights, bias).mean(axis=0)

    def _held_out_slots(self) -> np.ndarray:
        held = self.sample.held_out_slots
        if held.all() or not held.any():  # too few rows for the hash to split
            held = np.arange(held.size) % 5 == 0
        return held

    def log_conditionals(self, rows: np.ndarray, variables: np.ndarray | None = None):
        """``log P(x_i | x_-i)`` of validated rows for each of ``variables`` (default: every
        variable): ``(n, len(variables))``."""
        return self.coding.log_conditionals(rows, *self.current(), variables)

    def cpds(self):
        """Every variable's conditional as log-linear features (:meth:`Coding.cpds`)."""
        return self.coding.cpds(*self.current())

    # state ----------------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        arrays = {"sample": np.frombuffer(self.sample.to_bytes(), dtype=np.uint8)}
        arrays.update(self.online.arrays())
        if self.weights is not None:
            # set with the weights, by the batch fit
            assert self.bias is not None and self.penalties is not None
            assert self.held_out_loss is not None
            arrays.update(
                weights=self.weights,
                bias=self.bias,
                penalties=self.penalties,
                held_out_loss=self.held_out_loss,
            )
        meta = {"format": STATE_FORMAT, "fitted_rows": self.fitted_rows}
        if self.exact:
            meta["sample"] = POSITION_SAMPLE
        if self.interval is not None:
            meta.update(sample=FORGETTING_SAMPLE, interval=self.interval)
        if self.restarts:
            meta["restarts"] = True
        return pack_state(meta, arrays)

    @classmethod
    def from_bytes(cls, schema: Schema, data: bytes) -> "LogisticConditionals":
        """The conditionals saved by :meth:`to_bytes` (``ValueError`` on anything else); a
        state without a sample kind (every one saved before exact mode had its own) has
        algorithm L's sample and finishes as it did."""
        meta, arrays = unpack_state(data)
        if meta.get("format") != STATE_FORMAT:
            raise ValueError(f"logistic state format {meta.get('format')!r}")
        kind = meta.get("sample")
        if kind not in (None, POSITION_SAMPLE, FORGETTING_SAMPLE):
            raise ValueError(f"logistic sample kind {kind!r}")
        interval = int(meta["interval"]) if kind == FORGETTING_SAMPLE else None
        restarts = bool(meta.get("restarts", False))
        out = cls(schema, exact=kind == POSITION_SAMPLE, interval=interval, restarts=restarts)
        sample_class = WeightSample if kind is None else PositionSample
        try:
            out.sample = sample_class.from_bytes(arrays["sample"].tobytes())
        except WeightStateError as error:
            raise ValueError(str(error)) from None
        # (a forgetting learner's sample is a PositionSample)
        if out.interval is not None and out.sample.half_life != out.interval:  # type: ignore[union-attr]
            raise ValueError("the logistic sample forgets at another half-life")
        if out.sample.schema != schema:
            raise ValueError("the logistic sample is over another schema")
        out.online.load(arrays)
        out.fitted_rows = int(meta["fitted_rows"])
        if "weights" in arrays:
            shape = (out.coding.n_inputs, out.coding.n_outputs)
            if arrays["weights"].shape != shape or arrays["bias"].shape != (shape[1],):
                raise ValueError("logistic weights of the wrong shape")
            out.weights, out.bias = arrays["weights"], arrays["bias"]
            out.penalties, out.held_out_loss = arrays["penalties"], arrays["held_out_loss"]
        return out
