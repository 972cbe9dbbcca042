"""streammn in river: a Markov-network learner and an anomaly detector over dict rows.

river hands estimators one row at a time as a dict ``{feature name: value}``; streammn's
learners are built for whole batches (numba kernels over a ``uint8`` matrix). The two meet in a
row buffer: ``learn_one`` validates the dict against the learner's schema (every variable
present, an integer state ``0 .. cardinality-1``) and appends it to a buffer, and a full buffer
is learned as one batch. Every streammn learner gives the same model however the stream is cut
into batches (tested by ``tests/test_conformance.py``), so the buffer size trades latency for
speed only, and :meth:`MarkovNetworkLearner.flush` may learn a partial buffer at any time
without changing what the model ends as.

- :class:`MarkovNetworkLearner` is a river mini-batch transformer: ``learn_one`` /
  ``learn_many`` learn, ``transform_one`` / ``transform_many`` give each variable's
  ``log P(x_i | x_-i)`` under the current model (per-variable surprise, for a downstream
  step), and :meth:`~MarkovNetworkLearner.to_markov_network` gives the learned network.
- :class:`MarkovNetworkAnomalyDetector` follows river's ``anomaly`` API: ``score_one`` is the
  row's negative pseudo-log-likelihood ``-sum_i log P(x_i | x_-i)`` under the current model,
  calibrated as its rank among the scores of the rows most recently learned (a value in
  ``[0, 1]``; 0.99 means more surprising than 99% of recent rows). The reference scores are
  recomputed under the new model each time a batch is learned, so the calibration follows the
  model. Before the first batch is learned there is no model and every score is 0.

A river row is scored alone, so the numba kernels run it in the calling thread (waking a
thread pool for one row costs ~50x the work on a busy machine); batches use all threads.

Both wrap any :class:`~streammn.learner.StructureLearner` given unfitted (DTSL, EdgeGrafting,
...); it is the template that ``clone`` copies, and learning happens on a copy of it.
"""

from __future__ import annotations

import numba
import numpy as np
from river import base

from streammn.errors import RiverRowError, SettingsError
from streammn.learner import StructureLearner


SERIAL_ROWS = 256  # fewer rows are scored in the calling thread


class MarkovNetworkLearner(base.MiniBatchTransformer):
    """Learn a Markov network from river rows, in batches.

    Parameters
    ----------
    learner
        An unfitted streammn structure learner (e.g. ``DTSL(schema)``); its schema names the
        features a row must hold.
    batch_size
        Rows buffered before they are learned as one batch.

    Attributes
    ----------
    learner_
        The learner being trained (a copy of ``learner``).
    n_rows_learned_
        Rows learned so far (not counting the buffer).
    last_batch_
        The last rows learned (at most ``batch_size``), or None.

    Examples
    --------
    >>> from streammn import Schema
    >>> from streammn.dtsl import DTSL
    >>> from streammn.river import MarkovNetworkLearner
    >>> import random
    >>> rng = random.Random(0)
    >>> def row():
    ...     a = rng.random() < 0.5
    ...     b = a if rng.random() < 0.9 else not a  # b mostly copies a
    ...     return {"a": int(a), "b": int(b), "c": int(rng.random() < 0.3)}
    >>> schema = Schema.from_cardinalities([2, 2, 2], names=["a", "b", "c"])
    >>> model = MarkovNetworkLearner(DTSL(schema, kappa=0.01), batch_size=256)
    >>> for _ in range(2000):
    ...     model.learn_one(row())
    >>> sorted(model.to_markov_network().edges())
    [(0, 1)]
    >>> surprise = model.transform_one({"a": 1, "b": 0, "c": 0})
    >>> {name: round(v, 2) for name, v in surprise.items()}
    {'a': -2.29, 'b': -2.3, 'c': -0.32}
    """

    def __init__(self, learner: StructureLearner, batch_size: int = 1024):
        if not isinstance(learner, StructureLearner):
            raise SettingsError(
                f"learner must be a streammn structure learner (e.g. DTSL), "
                f"got {type(learner).__name__}"
            )
        if batch_size < 1:
            raise SettingsError(f"batch_size must be >= 1, got {batch_size!r}")
        self.learner = learner
        self.batch_size = batch_size
        self.learner_ = learner.clone()
        self.names = learner.schema.names
        self._cards = learner.schema.cardinalities
        self._buffer = np.empty((batch_size, len(self.names)), dtype=np.uint8)
        self._n_buffered = 0
        self.n_rows_learned_ = 0
        self.last_batch_ = None

    @classmethod
    def _unit_test_params(cls):
        from streammn.dtsl import DTSL
        from streammn.schema import Schema

        yield {"learner": DTSL(Schema.binary(3))}

    @property
    def _is_stochastic(self) -> bool:
        return False

    # rows -----------------------------------------------------------------------------------
    def _row(self, x: dict) -> np.ndarray:
        """The dict as a validated ``(1, n_vars)`` matrix; errors name the row and feature."""
        position = self.n_rows_learned_ + self._n_buffered
        try:
            values = [x[name] for name in self.names]
        except KeyError as e:
            raise RiverRowError(
                f"row {position}: feature {e.args[0]!r} of the schema is "
                f"missing (the row has {sorted(map(str, x))})"
            ) from None
        row = np.array(values)
        if row.dtype.kind in "iub" and ((row >= 0) & (row < self._cards)).all():
            return row.astype(np.uint8).reshape(1, -1)  # the common case, without a copy loop
        return self.learner_.schema.validate(
            np.array([values], dtype=object), row_offset=position, source="river row"
        )

    def _frame(self, X) -> np.ndarray:
        """A pandas DataFrame (columns by name) or a row matrix, validated."""
        columns = getattr(X, "columns", None)
        if columns is not None:
            missing = [n for n in self.names if n not in columns]
            if missing:
                raise RiverRowError(f"the frame lacks the schema's columns {missing}")
            X = X[self.names].to_numpy()
        return self.learner_.schema.validate(
            X, row_offset=self.n_rows_learned_ + self._n_buffered, source="river frame"
        )

    # learning -------------------------------------------------------------------------------
    def learn_one(self, x: dict) -> None:
        """Buffer one row; a full buffer is learned as a batch."""
        self._buffer[self._n_buffered] = self._row(x)[0]
        self._n_buffered += 1
        if self._n_buffered == self.batch_size:
            self.flush()

    def learn_many(self, X) -> None:
        """Learn a DataFrame (or row matrix) at once, after what is buffered."""
        rows = self._frame(X)
        self.flush()
        self._learn(rows)

    def flush(self) -> None:
        """Learn the buffered rows now (the final model does not depend on when)."""
        if self._n_buffered:
            rows = self._buffer[: self._n_buffered].copy()
            self._n_buffered = 0
            self._learn(rows)

    def _learn(self, rows: np.ndarray) -> None:
        if rows.shape[0]:
            self.learner_.partial_fit(rows)
            self.n_rows_learned_ += rows.shape[0]
            self.last_batch_ = rows[-self.batch_size :]

    # the model ------------------------------------------------------------------------------
    def to_markov_network(self):
        """The Markov network learned from every row given so far (the buffer is learned
        first)."""
        self.flush()
        return self.learner_.to_markov_network()

    def log_conditionals(self, rows: np.ndarray) -> np.ndarray:
        """``log P(x_i | x_-i)`` of validated rows under the learned batches (0 before any)."""
        if self.n_rows_learned_ == 0:
            return np.zeros(rows.shape, dtype=np.float64)
        if rows.shape[0] >= SERIAL_ROWS:
            return self.learner_.pll_terms(rows)
        threads = numba.get_num_threads()
        numba.set_num_threads(1)  # waking the thread pool costs more than a row's work
        try:
            return self.learner_.pll_terms(rows)
        finally:
            numba.set_num_threads(threads)

    def transform_one(self, x: dict) -> dict:
        """``{feature: log P(x_feature | the other features)}`` under the current model."""
        terms = self.log_conditionals(self._row(x))[0]
        return dict(zip(self.names, terms.tolist()))

    def transform_many(self, X):
        """The same for a DataFrame: one column of log conditionals per feature."""
        import pandas as pd

        terms = self.log_conditionals(self._frame(X))
        return pd.DataFrame(terms, columns=self.names, index=getattr(X, "index", None))


class MarkovNetworkAnomalyDetector(base.AnomalyDetector):
    """Outlier scores from a Markov network learned online: how surprising is the row?

    Parameters
    ----------
    learner
        An unfitted streammn structure learner (e.g. ``DTSL(schema)``).
    batch_size
        Rows buffered before they are learned as one batch; the scores follow the model as of
        the last learned batch.
    calibrate
        Score as the rank among recent rows' scores in ``[0, 1]`` (default); ``False`` gives
        the raw negative pseudo-log-likelihood in nats.

    Examples
    --------
    Rows from a planted network, 5% of them replaced by random bits (the anomalies), scored
    before they are learned (river's progressive validation; the first batch scores 0):

    >>> from river import evaluate, metrics
    >>> from streammn.demo import planted_network
    >>> from streammn.dtsl import DTSL
    >>> from streammn.inference import sample
    >>> from streammn.river import MarkovNetworkAnomalyDetector
    >>> import numpy as np
    >>> planted, _ = planted_network(12, seed=0, coupling=2.0)
    >>> rows = sample(planted, 2000, seed=1)
    >>> rng = np.random.default_rng(2)
    >>> is_anomaly = rng.random(len(rows)) < 0.05
    >>> rows[is_anomaly] = rng.integers(0, 2, (is_anomaly.sum(), 12))
    >>> names = planted.schema.names
    >>> stream = [(dict(zip(names, r.tolist())), bool(y)) for r, y in zip(rows, is_anomaly)]
    >>> detector = MarkovNetworkAnomalyDetector(DTSL(planted.schema, kappa=0.01),
    ...                                         batch_size=250)
    >>> evaluate.progressive_val_score(stream, detector, metrics.ROCAUC())
    ROCAUC: 74.59%

    Scores are ranks among recent rows: a typical row scores low, a random one high.

    >>> typical, odd = stream[0][0], {n: 1 for n in names}
    >>> round(detector.score_one(typical), 2), round(detector.score_one(odd), 2)
    (0.07, 0.95)
    """

    def __init__(self, learner: StructureLearner, batch_size: int = 1024, calibrate: bool = True):
        self.learner = learner
        self.batch_size = batch_size
        self.calibrate = calibrate
        self.rows_ = MarkovNetworkLearner(learner, batch_size)
        self._reference = np.empty(0)

    @classmethod
    def _unit_test_params(cls):
        yield from MarkovNetworkLearner._unit_test_params()

    @property
    def _is_stochastic(self) -> bool:
        return False

    def learn_one(self, x: dict) -> None:
        """Buffer one row; when a batch is learned, recompute the reference scores."""
        learned = self.rows_.n_rows_learned_
        self.rows_.learn_one(x)
        if self.rows_.n_rows_learned_ != learned:
            self._reference = np.sort(self._npll(self.rows_.last_batch_))

    def _npll(self, rows: np.ndarray) -> np.ndarray:
        return -self.rows_.log_conditionals(rows).sum(axis=1)

    def score_one(self, x: dict) -> float:
        """Outlier score of one row (higher is more anomalous)."""
        if self.rows_.n_rows_learned_ == 0:
            return 0.0
        score = float(self._npll(self.rows_._row(x))[0])
        if not self.calibrate:
            return score
        ref = self._reference
        below = np.searchsorted(ref, score, side="left")
        ties = np.searchsorted(ref, score, side="right") - below
        return float((below + 0.5 * ties) / ref.size)

    def to_markov_network(self):
        """The Markov network learned from every row so far (the buffer is learned first)."""
        return self.rows_.to_markov_network()
