"""streammn in river: a Markov-network learner and an anomaly detector over dict rows.

river hands estimators one row at a time as a dict ``{feature name: value}``; streammn's
learners are built for whole batches (numba kernels over a ``uint8`` matrix). The two meet in a
row buffer: ``learn_one`` validates the dict against the learner's schema (every variable
present, a value the variable can hold) and appends it to a buffer, and a full buffer is learned
as one batch. Every streammn learner gives the same model however the stream is cut into
batches (tested by ``tests/test_conformance.py``), so the buffer size trades latency for speed
only, and :meth:`MarkovNetworkLearner.flush` may learn a partial buffer at any time without
changing what the model ends as.

Both classes are built with no argument: the learner is then ``DTSL()``, built without a schema,
and the first :data:`WARM_UP_ROWS` rows give it one (:mod:`streammn.learner`): a variable per
feature of the first row, in the order of the features' names (so the order of a dict's keys
never matters), its kind read from the values (words and booleans are named states, whole
numbers state numbers, other numbers four bins at their quartiles in those rows) and growing
after them: a word or number first met later becomes a new state. A number's bins are fixed by
those rows; declare a schema (``DTSL(schema)``) to bin on more.

Warm-up. Batches start small and double: the first is learned at row :data:`WARM_UP_ROWS`, and
each next one when the rows seen have doubled, until they are ``batch_size`` long (32, 64, 128,
... 1024, then every 1024 rows). So scores come from the model from row 33 on (the product of
the first rows' marginals at first; DTSL's trees split once a leaf has seen ``grace_period``
rows), not after a first full batch, and the model is the one whole batches give.

- :class:`MarkovNetworkLearner` is a river mini-batch transformer: ``learn_one`` /
  ``learn_many`` learn, ``transform_one`` / ``transform_many`` give each variable's
  ``log P(x_i | x_-i)`` under the current model (per-variable surprise, for a downstream
  step), and :meth:`~MarkovNetworkLearner.to_markov_network` gives the learned network.
- :class:`MarkovNetworkAnomalyDetector` follows river's ``anomaly`` API: ``score_one`` is the
  row's negative pseudo-log-likelihood ``-sum_i log P(x_i | x_-i)`` under the current model,
  calibrated as its rank among the scores of the rows most recently learned (a value in
  ``[0, 1]``; 0.99 means more surprising than 99% of recent rows). The reference scores are
  recomputed under the new model each time a batch is learned, so the calibration follows the
  model. Before the first batch is learned there is no model and every score is 0 (and every
  log conditional of ``transform_one``).

A river row is scored alone, so the numba kernels run it in the calling thread (waking a
thread pool for one row costs ~50x the work on a busy machine); batches use all threads.

Both wrap any :class:`~streammn.learner.StructureLearner` given unfitted (DTSL, EdgeGrafting,
...); it is the template that ``clone`` copies, and learning happens on a copy of it.
"""

from __future__ import annotations

import numba
import numpy as np
import pyarrow as pa
from river import base

from streammn.dtsl import DTSL
from streammn.errors import RiverRowError, SchemaError, SettingsError
from streammn.learner import StructureLearner


SERIAL_ROWS = 256  # fewer rows are scored in the calling thread
WARM_UP_ROWS = 32  # the first batch (module docstring)
#: river checks that do not apply: a row holds every variable of the schema (a feature that
#: comes or goes mid-stream is no variable), and a learner keeps samples of the stream for its
#: weights and trees (up to 25,000 and 100,000 rows), so memory grows with the first rows
NOT_APPLICABLE = frozenset(
    {
        "check_emerging_features",
        "check_disappearing_features",
        "check_radically_disappearing_features",
        "check_learn_many_matches_learn_one",
        "check_bounded_memory_growth",
    }
)


class MarkovNetworkLearner(base.MiniBatchTransformer):
    """Learn a Markov network from river rows, in batches.

    Parameters
    ----------
    learner
        An unfitted streammn structure learner; its schema, if it has one, names the features
        a row must hold. None: ``DTSL()``, which takes its schema from the first rows (module
        docstring).
    batch_size
        Rows buffered before they are learned as one batch, once the warm-up's shorter
        batches are done (module docstring).

    Attributes
    ----------
    learner_
        The learner being trained (a copy of ``learner``).
    names
        The features a row must hold, in the schema's order (None until the schema is known).
    n_rows_learned_
        Rows learned so far (not counting the buffer).
    last_batch_
        The last rows learned (at most ``batch_size``), or None.

    Examples
    --------
    >>> from streammn.river import MarkovNetworkLearner
    >>> import random
    >>> rng = random.Random(0)
    >>> def row():
    ...     a = rng.random() < 0.5
    ...     b = a if rng.random() < 0.9 else not a  # b mostly copies a
    ...     return {"c": int(rng.random() < 0.3), "a": a, "b": b}
    >>> model = MarkovNetworkLearner()  # DTSL(), its schema from the first rows
    >>> for _ in range(2000):
    ...     model.learn_one(row())
    >>> model.learner_.schema
    Schema(a:2, b:2, c:2, grows (version 0))
    >>> sorted(model.to_markov_network().edges())
    [(0, 1)]
    >>> surprise = model.transform_one({"a": True, "b": False, "c": 0})
    >>> {name: round(v, 2) for name, v in surprise.items()}
    {'a': -2.29, 'b': -2.3, 'c': -0.32}
    """

    def __init__(self, learner: StructureLearner | None = None, batch_size: int = 1024):
        if learner is not None and not isinstance(learner, StructureLearner):
            raise SettingsError(
                f"learner must be a streammn structure learner (e.g. DTSL), "
                f"got {type(learner).__name__}"
            )
        if batch_size < 1:
            raise SettingsError(f"batch_size must be >= 1, got {batch_size!r}")
        self.learner = learner
        self.batch_size = batch_size
        self.learner_ = DTSL() if learner is None else learner.clone()
        self.names: list | None = None
        self._first_rows: list[dict] = []  # rows before the schema is known (copies)
        self._n_buffered = 0
        self.n_rows_learned_ = 0
        self.last_batch_: np.ndarray | None = None
        declared = self.learner_.get_params()["schema"]
        if declared is not None:
            self._schema_known(declared.names)

    @classmethod
    def _unit_test_params(cls):
        yield {}
        yield {"learner": DTSL(kappa=0.01, cpd="tree"), "batch_size": 100}

    def _unit_test_skips(self) -> set[str]:
        return set(NOT_APPLICABLE)

    @property
    def _is_stochastic(self) -> bool:
        return False

    # rows -----------------------------------------------------------------------------------
    def _schema_known(self, names: list) -> None:
        """The learner has a schema over the features ``names``: rows are validated and
        buffered as state numbers from now on."""
        self.names = list(names)
        self._buffer = np.empty((self.batch_size, len(self.names)), dtype=np.uint8)

    @property
    def _batch_rows(self) -> int:
        """Rows the next batch holds: :data:`WARM_UP_ROWS` first, then as many as were
        learned (the rows double), until ``batch_size``."""
        return min(self.batch_size, max(WARM_UP_ROWS, self.n_rows_learned_))

    def _row(self, x: dict) -> np.ndarray:
        """The dict as a validated ``(1, n_vars)`` matrix; errors name the row and feature."""
        position = self.n_rows_learned_ + self._n_buffered
        assert self.names is not None  # called once the schema is known
        try:
            values = [x[name] for name in self.names]
        except KeyError as e:
            raise RiverRowError(
                f"row {position}: feature {e.args[0]!r} of the schema is "
                f"missing (the row has {sorted(map(str, x))})"
            ) from None
        row = np.array(values)
        cards = self.learner_.schema.cardinalities
        if row.dtype.kind in "iub" and ((row >= 0) & (row < cards)).all():
            return row.astype(np.uint8).reshape(1, -1)  # the common case, without a copy loop
        return self.learner_.schema.validate(
            np.array([values], dtype=object), row_offset=position, source="river row"
        )

    def _frame(self, X) -> np.ndarray:
        """A pandas DataFrame (columns by name) or a row matrix, validated."""
        columns = getattr(X, "columns", None)
        if columns is not None:
            assert self.names is not None  # called once the schema is known
            missing = [n for n in self.names if n not in columns]
            if missing:
                raise RiverRowError(f"the frame lacks the schema's columns {missing}")
            X = X[self.names]
        return self.learner_.schema.validate(
            X, row_offset=self.n_rows_learned_ + self._n_buffered, source="river frame"
        )

    # learning -------------------------------------------------------------------------------
    def learn_one(self, x: dict) -> None:
        """Buffer one row; a full buffer is learned as a batch."""
        if self.names is None:
            self._first_rows.append(dict(x))
            if len(self._first_rows) == self._batch_rows:
                self.flush()
            return
        self._buffer[self._n_buffered] = self._row(x)[0]
        self._n_buffered += 1
        if self._n_buffered == self._batch_rows:
            self.flush()

    def learn_many(self, X) -> None:
        """Learn a DataFrame (or row matrix) at once, after what is buffered."""
        self.flush()
        if self.names is None:
            self._learn_first(X[sorted(X.columns, key=str)] if hasattr(X, "columns") else X)
        else:
            self._learn(self._frame(X))

    def flush(self) -> None:
        """Learn the buffered rows now (the final model does not depend on when)."""
        if self.names is None:
            if self._first_rows:
                self._learn_first(_table(self._first_rows))
                self._first_rows = []
        elif self._n_buffered:
            rows = self._buffer[: self._n_buffered].copy()
            self._n_buffered = 0
            self._learn(rows)

    def _learn_first(self, frame) -> None:
        """Learn the first rows (a table or data frame, columns in the order of their names),
        from which the learner takes its schema."""
        self.learner_.partial_fit(frame)
        self._schema_known(self.learner_.schema.names)
        self._learned(self.learner_.schema.validate(frame, source="river rows"))

    def _learn(self, rows: np.ndarray) -> None:
        if rows.shape[0]:
            self.learner_.partial_fit(rows)
            self._learned(rows)

    def _learned(self, rows: np.ndarray) -> None:
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
        """``{feature: log P(x_feature | the other features)}`` under the current model (0 for
        every feature of ``x`` before the first batch is learned)."""
        if self.names is None:
            return dict.fromkeys(x, 0.0)
        terms = self.log_conditionals(self._row(x))[0]
        return dict(zip(self.names, terms.tolist()))

    def transform_many(self, X):
        """The same for a DataFrame: one column of log conditionals per feature."""
        import pandas as pd

        if self.names is None:
            return pd.DataFrame(0.0, columns=list(X.columns), index=X.index)
        terms = self.log_conditionals(self._frame(X))
        return pd.DataFrame(terms, columns=self.names, index=getattr(X, "index", None))


def _table(rows: list[dict]) -> pa.Table:
    """River rows as a table: a column per feature of the first row, in the order of their
    names; a row without one of them, or a feature of mixed kinds, is a located error."""
    features = sorted(rows[0], key=str)
    for i, x in enumerate(rows):
        absent = [f for f in features if f not in x]
        if absent:
            raise RiverRowError(
                f"row {i}: feature {absent[0]!r} of the first row is missing (the row has "
                f"{sorted(map(str, x))})"
            )
    columns = {}
    for j, f in enumerate(features):
        try:
            columns[str(f)] = pa.array([x[f] for x in rows], from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            raise SchemaError(
                f"the values of feature {f!r} are of mixed kinds ({e})",
                column=j,
                source="river rows",
            ) from None
    return pa.table(columns)


class MarkovNetworkAnomalyDetector(base.AnomalyDetector):
    """Outlier scores from a Markov network learned online: how surprising is the row?

    Parameters
    ----------
    learner
        An unfitted streammn structure learner (e.g. ``DTSL(schema)``). None: ``DTSL()``, which
        takes its schema from the first rows (module docstring).
    batch_size
        Rows buffered before they are learned as one batch, once the warm-up's shorter
        batches are done; the scores follow the model as of the last learned batch.
    calibrate
        Score as the rank among recent rows' scores in ``[0, 1]`` (default); ``False`` gives
        the raw negative pseudo-log-likelihood in nats.

    Examples
    --------
    Rows from a planted network, 5% of them replaced by random bits (the anomalies), scored
    before they are learned (river's progressive validation; the 32 rows of the warm-up score
    0), by a detector that takes its schema from the first rows:

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
    >>> detector = MarkovNetworkAnomalyDetector(DTSL(kappa=0.01), batch_size=250)
    >>> evaluate.progressive_val_score(stream, detector, metrics.ROCAUC())
    ROCAUC: 79.91%

    Scores are ranks among recent rows: a typical row scores low, a random one high.

    >>> typical, odd = stream[0][0], {n: 1 for n in names}
    >>> round(detector.score_one(typical), 2), round(detector.score_one(odd), 2)
    (0.09, 0.94)
    """

    def __init__(
        self,
        learner: StructureLearner | None = None,
        batch_size: int = 1024,
        calibrate: bool = True,
    ):
        self.learner = learner
        self.batch_size = batch_size
        self.calibrate = calibrate
        self.rows_ = MarkovNetworkLearner(learner, batch_size)
        self._reference = np.empty(0)

    @classmethod
    def _unit_test_params(cls):
        yield from MarkovNetworkLearner._unit_test_params()

    def _unit_test_skips(self) -> set[str]:
        return set(NOT_APPLICABLE)

    @property
    def _is_stochastic(self) -> bool:
        return False

    def learn_one(self, x: dict) -> None:
        """Buffer one row; when a batch is learned, recompute the reference scores."""
        learned = self.rows_.n_rows_learned_
        self.rows_.learn_one(x)
        if self.rows_.n_rows_learned_ != learned:
            assert self.rows_.last_batch_ is not None  # a batch was learned
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
