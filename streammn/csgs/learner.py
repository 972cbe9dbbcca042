"""CSGS as a streammn learner: distinct-row counts follow the stream, the canonical model is
re-learned from them when a model is asked for (at snapshot time).

:meth:`CSGS.partial_fit` only counts (one hash insert per row,
:class:`~streammn.stats.PatternCounts`). :meth:`CSGS.learned_network` learns, when rows arrived
since the last time, the canonical model (:func:`~streammn.csgs.canonical.learn_canonical_model`),
generates its features and fits their weights by pseudo-likelihood on the counted rows (the
objective of :func:`streammn.network.weights.fit_weights`, computed on the distinct patterns
weighted by their counts, at most ``FIT_PATTERNS`` of them: :func:`~streammn.csgs.pll.
fit_sample`; to a tolerance scaled to the counts' sampling noise: :mod:`streammn.csgs.pll`).
Everything is a function of the counts alone, and the counts do not depend on how the stream
was cut, so neither does the model. The prequential score uses the last
learned model (learning one the first time it is needed). The canonical model is learned from
scratch each time: re-using blankets across snapshots would need every test of a context to give
the same verdict on the new counts, which only re-running the tests can tell.

A prompt stop (:meth:`~streammn.learner.StructureLearner.stop`, issue 41): after a stop
request the structure learning under way is abandoned between nodes (binary data: every
context at once) or chunks of contexts, and the weight fit after it between evaluations of
its objective; :meth:`CSGS.learned_network` then gives the last model it learned (the uniform
model before the first) without learning a new one, so the final snapshot of a stopped run is
written at once. Its state, the counts, is the stream's exactly, so a run resumed from it
learns the model an uninterrupted one does; only that snapshot's model files may be older
than its rows.
"""

from __future__ import annotations

import time
from typing import Iterable, cast

import numpy as np

from streammn.csgs.canonical import Abandoned, CanonicalModel, learn_canonical_model
from streammn.csgs.pll import fit_pattern_weights, fit_sample
from streammn.learner import WEIGHTS_PARAM, Data, StructureLearner
from streammn.progress_bar import counting_steps, next_phase, progress_bar
from streammn.params import Boolean, Interval, Param
from streammn.errors import CSGSError, CSGSStateError
from streammn.features import FeatureSet
from streammn.network.model import MarkovNetwork
from streammn.schema import Rows, Schema
from streammn.schema.encoding import table_of
from streammn.stats import PatternCounts

FORMAT = "streammn-csgs-2"  # 1: the metadata under "meta" instead of pack_state's key


class CSGS(StructureLearner):
    """Context-specific Grow-Shrink structure learning with pseudo-likelihood weights.

    Parameters
    ----------
    schema : Schema or None, default None
        The variables (any cardinalities); None: taken from the data, then fixed, as
        :mod:`streammn.learner` says of a learner that cannot add values.
    significance : float, default 0.05
        Significance level of Pearson's chi-square tests (the paper's ``alpha``; ``alpha=`` is
        still accepted, deprecated).
    min_rows_per_cell : float, default 5.0
        A test with fewer rows than this per non-empty cell is unreliable and taken as
        independence (see :mod:`streammn.csgs.kernels`).
    max_contexts : int, default 5000
        Canonical assignments: the distinct rows, or this many of the most frequent.
    context_specific : bool, default True
        False runs the single-graph ablation (conditional tests, one shared graph).
    repeat_grow : bool, default False
        Repeat each grow pass until it adds nothing (original Grow-Shrink) instead of the one
        pass of the paper's Algorithm 2; finds neighbours that look independent under a small
        blanket, at the cost of more tests.
    max_patterns : int, default 200000
        Distinct rows counted exactly before the counts fall back to a uniform row sample.
    stddev : float, default 1.0
        Gaussian prior of the pseudo-likelihood weights.
    max_iter : int, default 100
        L-BFGS iterations of weight learning at most (it stops earlier on a tolerance scaled
        to the counts' sampling noise, :func:`streammn.csgs.pll.noise_tolerance`).
    seed : int, default 0
        Randomness of the counts' fallback to a row sample.
    weights : {'refined', 'closed-form'}, default 'refined'
        What :meth:`to_markov_network` publishes (``StructureLearner.publish``).

    Attributes
    ----------
    canonical_ : CanonicalModel or None
        The last learned canonical model (contexts, graphs, test counts).
    model_ : MarkovNetwork or None
        The last learned Markov network.
    timings_ : dict
        Seconds spent on structure, features and weights the last time.

    Examples
    --------
    >>> from streammn.csgs.synthetic import context_specific_network, sample_rows
    >>> true = context_specific_network(4, seed=0)
    >>> rows = sample_rows(true, 2000, seed=1)
    >>> learner = CSGS(true.schema).fit(rows)
    >>> model = learner.to_markov_network()
    >>> learner.canonical_.n_tests > 0, model.n_features > 0
    (True, True)
    """

    param_error = CSGSError
    state_format, state_error = FORMAT, CSGSStateError
    renamed = {"alpha": "significance"}  # old name -> new, still accepted (deprecated)
    parameters = {
        "significance": Param(
            Interval(float, 0, 1, "neither"),
            "significance level of the chi-square tests",
            flag="--significance",
        ),
        "min_rows_per_cell": Param(Interval(float, 0), "rows per cell a test needs"),
        "max_contexts": Param(
            Interval(int, 1),
            "canonical assignments, the most frequent distinct rows",
            flag="--max-contexts",
        ),
        "context_specific": Param(Boolean(), "context-specific tests (False: plain GS)"),
        "repeat_grow": Param(Boolean(), "repeat each grow pass until it adds nothing"),
        "max_patterns": Param(Interval(int, 1), "distinct rows counted exactly"),
        "stddev": Param(Interval(float, 0, None, "neither"), "Gaussian prior of the weights"),
        "max_iter": Param(Interval(int, 1), "L-BFGS iterations of weight learning"),
        "seed": Param(
            Interval(int, 0), "randomness of the counts' row-sample fallback", flag="--seed"
        ),
        "weights": WEIGHTS_PARAM,
    }

    def __init__(
        self,
        schema: Schema | None = None,
        significance: float = 0.05,
        min_rows_per_cell: float = 5.0,
        max_contexts: int = 5000,
        context_specific: bool = True,
        repeat_grow: bool = False,
        max_patterns: int = 200_000,
        stddev: float = 1.0,
        max_iter: int = 100,
        seed: int = 0,
        weights: str = "refined",
    ):
        self._check_params(locals())
        self.significance, self.min_rows_per_cell = float(significance), float(min_rows_per_cell)
        self.max_contexts, self.context_specific = int(max_contexts), bool(context_specific)
        self.repeat_grow = bool(repeat_grow)
        self.max_patterns, self.stddev = int(max_patterns), float(stddev)
        self.max_iter, self.seed = int(max_iter), int(seed)
        self.weights = weights
        self._init_schema(schema)

    def _check_schema(self, schema: Schema) -> None:
        schema.require_complete("csgs")

    def _reset(self) -> None:
        self.counts = PatternCounts(self.schema, max_patterns=self.max_patterns, seed=self.seed)
        self.canonical_: CanonicalModel | None = None
        self.model_: MarkovNetwork | None = None
        self.timings_: dict = {}
        self._model_rows = -1  # n_seen the model was learned at
        self._new_weight_sample()

    @property
    def n_rows(self) -> int:
        return self.counts.n_seen

    # learning -----------------------------------------------------------------------------
    def partial_fit(self, batch: Rows, y: object = None) -> "CSGS":
        """Count one batch (a :class:`~streammn.stream.source.Batch` or a row matrix). Rows are
        validated first; a bad batch leaves the state untouched."""
        self._schema_for_batch(batch)
        rows = getattr(batch, "rows", batch)
        start = getattr(batch, "start", None)
        # (a batch's rows, or the rows given)
        rows = self.schema.validate(rows, row_offset=self.n_rows if start is None else start)  # type: ignore[arg-type]
        self._sample(rows, self.n_rows)
        self.counts.update(rows)
        return self

    learn_many = partial_fit

    def fit(
        self, source: Data, y: object = None, *, count_pass: None = None, progress: bool = False
    ) -> "CSGS":
        """Learn from scratch from rows in memory or a finite source of batches; returns self.
        (``y`` is ignored; ``count_pass`` is DTSL's multi-pass hook: CSGS reads its source
        once.) ``progress``: a progress bar on stderr of the rows counted, then of the steps
        of the graphs' and the weights' learning (:mod:`streammn.progress_bar`)."""
        if count_pass is not None:
            raise CSGSError("CSGS counts its source in one pass; it takes no count_pass")
        self._schema_for_fit(source)
        self._reset()
        in_memory = isinstance(source, (np.ndarray, list)) or table_of(source) is not None
        if not in_memory:
            rewind = getattr(source, "rewind", None)
            if rewind is not None and getattr(source, "rewindable", True):
                rewind()
        with progress_bar(progress, "counting patterns (CSGS)") as bar:
            # (Data: rows in memory, or an iterable of batches)
            for batch in [cast(Rows, source)] if in_memory else cast("Iterable[Rows]", source):
                self.partial_fit(batch)
                bar.update(self.n_rows - bar.n)
            self._network(bar)
        return self

    def learn_structure(self, should_stop=None) -> CanonicalModel:
        """The canonical model of the rows counted so far (no weights); ``should_stop`` as in
        :func:`~streammn.csgs.canonical.learn_canonical_model`."""
        if self.n_rows == 0:
            raise CSGSError("CSGS has seen no rows: call partial_fit or fit first")
        return learn_canonical_model(
            self.schema,
            self.counts.patterns,
            self.counts.counts,
            significance=self.significance,
            min_rows_per_cell=self.min_rows_per_cell,
            max_contexts=self.max_contexts,
            context_specific=self.context_specific,
            repeat_grow=self.repeat_grow,
            should_stop=should_stop,
        )

    def learned_network(self) -> MarkovNetwork:
        """The Markov network of the current counts: CSGS structure, features, PLL weights
        (re-learned only when rows arrived since the last call)."""
        return self._network()

    def _network(self, bar=None) -> MarkovNetwork:
        """:meth:`learned_network`; ``bar``: a progress bar that counts the steps of the
        graphs' learning (a node over every context, or a block of contexts), then the
        evaluations of the weights' objective."""
        if self.model_ is not None and self._model_rows == self.n_rows:
            return self.model_
        if self.n_rows == 0 or (self._stop_requested and self.model_ is None):
            # nothing counted yet (or stopped before any model): the uniform model, as other
            # learners give
            return MarkovNetwork(self.schema, FeatureSet.empty(self.schema))
        if self._stop_requested:  # a prompt stop: the last model learned (module docstring)
            assert self.model_ is not None  # (else the uniform model above)
            return self.model_

        def should_stop() -> bool:
            return self._stop_requested

        if bar is not None:
            next_phase(bar, "learning the context-specific graphs (CSGS)", "steps")
        t0 = time.perf_counter()
        try:
            canonical = self.learn_structure(
                should_stop if bar is None else counting_steps(bar, should_stop)
            )
            t1 = time.perf_counter()
            features = canonical.features()
            t2 = time.perf_counter()
            if bar is not None:
                next_phase(bar, "fitting the weights (CSGS)", "evaluations")
            model = fit_pattern_weights(
                MarkovNetwork(self.schema, features),
                *fit_sample(self.counts.patterns, self.counts.counts),
                stddev=self.stddev,
                max_iter=self.max_iter,
                should_stop=should_stop if bar is None else counting_steps(bar, should_stop),
            )
        except Abandoned:  # stopped while learning: as above, nothing is kept of it
            return self.learned_network()
        t3 = time.perf_counter()
        self.canonical_, self.model_, self._model_rows = canonical, model, self.n_rows
        self.timings_ = {
            "structure_seconds": t1 - t0,
            "features_seconds": t2 - t1,
            "weights_seconds": t3 - t2,
        }
        return model

    def pll_terms(self, rows: Rows) -> np.ndarray:
        """``log P(x_i | x_-i)`` of the last learned model for every row and variable."""
        rows = self.schema.rows_of(rows)
        model = self.model_ if self.model_ is not None else self.learned_network()
        return model.pll_terms(rows)

    # serialisation ------------------------------------------------------------------------
    def _state(self) -> tuple[dict, dict[str, np.ndarray]]:
        """Settings and the counts (the model is a function of them)."""
        meta = {"format": FORMAT, "schema": self.schema.to_dict(), "params": self.settings()}
        return meta, {"counts": np.frombuffer(self.counts.to_bytes(), dtype=np.uint8)}

    def _restore(self, meta: dict, arrays: dict) -> None:
        self.counts = PatternCounts.from_bytes(arrays["counts"].tobytes())
        if self.counts.schema != self.schema:
            raise CSGSStateError("the counts' schema differs from the learner's")
