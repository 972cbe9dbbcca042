"""EnsembleOfTrees: the streaming ET structure learner.

theta follows the whole stream: every row goes into a :class:`~streammn.stats.PairCounts` (all
node and pair counts, exact, mergeable). beta is learned on a bounded uniform row sample (a
:class:`~streammn.stats.RowReservoir`): every ``update_every`` rows a learning phase recomputes
theta from the counts and runs PGD on Eq. 9 over the sample, when the sample has changed enough
since the last phase (below). The first phase starts from the
convex-upper-bound solution of Eq. 14 (maximised on the first ``INIT_ROWS`` sample rows: it is
only a start point, and its PGD is the costliest part of a fit) or from the Chow-Liu tree (beta
on one tree), whichever has the higher Eq. 9 objective on the sample: the problem is
non-convex and ET contains the Chow-Liu model, so the learned ET is never below Chow-Liu on the
sample (on a planted 100-variable tree the Eq. 14 start scores 10.0 nats per row below it); later
phases warm-start from the current beta (the
projection lets zero weights come back when the data asks for them). A batch is counted up to
each ``update_every`` boundary before the phase there, so the model does not depend on how the
stream is cut. :meth:`~EnsembleOfTrees.fit` counts a finite source and runs one phase at the end.

Phases that cost what changed (issue 41). After ``n`` rows the sample is uniform over them, so
the share of it drawn from the rows since the last phase (at ``n_0`` rows) is
``(n - n_0) / n``; a phase at an ``update_every`` boundary runs only when that share is at least
``new_share`` (default one half: phases at 10k, 20k, 40k, 80k ... rows, seven up to 1M rows
instead of a hundred), since beta, fitted on the sample, moves little when most of the sample
is the one it was fitted on (theta, from the counts of every row, moves less still). Between
phases the published model (rho, graph, density, Markov network) is the last phase's beta with
the current theta, and the prequential score uses it: no phase runs for a score or a snapshot
unless one is due (at most one ``update_every`` interval after a boundary that fell short of
``new_share``), and then on a copy, so a snapshot reflects every row seen without changing the
learner's state. On the planted 1M-row stream of 100 variables a phase cost 12-30 s after the
first (PGD from the last beta, 9-25 iterations) and the first 150 s, on two loaded cores.

Cost of a phase: each objective evaluation is one Cholesky per sample row, each gradient one
inverse from that factor, O(S M^3) for S sample rows and M variables, times the PGD iterations
(plus Armijo back-tracking); rows are split over the cores by the kernel. Measured at the
defaults (2,000 sample rows): 100 variables, 10,000 rows, 32 CPU s (31 PGD iterations); 200
variables, 4,000 rows, 105-234 CPU s (``benchmarks/results/et.md``). The sample stays bounded
rather than growing to all rows: on a 200-variable network of the paper with 4,000 rows, beta on
all of them drops the Hamming distance from 87 to 79 (fewer false edges; the same true edges
missed) for 1.3x the CPU, and all 10,000 rows would take the 100-variable fit past its time
target (``benchmarks/results/et_diagnosis.md``).

With ``learn_theta`` a phase continues from the plug-in fit by learning the edge tables with
beta (Eq. 7, :mod:`streammn.et.edge_tables`); the learned tables are part of the state and of
the published density, and the next phase starts again from the smoothed tables of the counts.
Measured: 100 variables, 10,000 rows, 174 CPU s; 200 variables, 4,000 rows, 750-1,020 CPU s.

The Markov network (snapshots, PLL scoring, .mn/.uai files) has one pairwise table per graph
edge (rho above ``rho_threshold``) and one unary table per variable, started at the tree
log-potentials ``log theta_u`` and ``log theta_uv / (theta_u theta_v)`` and fitted by
pseudo-likelihood on the sample (:func:`streammn.network.weights.fit_weights`).
"""

from __future__ import annotations

from typing import Any, Iterable, cast

import numpy as np

from streammn.errors import ETError, ETStateError
from streammn.et.density import (
    DEFAULT_PSEUDO_COUNT,
    ETDensity,
    chow_liu_beta,
    edge_appearance,
    graph_edges,
    initial_beta,
    refine_beta,
    smoothed_theta,
)
from streammn.et.edge_tables import learn_jointly
from streammn.et.kernels import Abandoned, ratio_table, structure_objective
from streammn.grafting.mrf import PairwiseLayout, to_markov_network
from streammn.learner import WEIGHTS_PARAM, Data, StructureLearner
from streammn.progress_bar import counting_steps, next_phase, progress_bar
from streammn.params import NONE, Boolean, Interval, Param
from streammn.schema import Rows, Schema, Validated
from streammn.schema.encoding import table_of
from streammn.stats import PairCounts, RowReservoir
from streammn.network.weights import fit_weights

FORMAT = "streammn-et-1"
ET_FILE = "model.et"
INIT_ROWS = 500


class EnsembleOfTrees(StructureLearner):
    """Ensemble-of-trees structure learning (Lin, Zhu, Lee & Taskar 2009), streaming.

    Parameters
    ----------
    schema : Schema or None, default None
        The variables (any cardinalities); None: taken from the data, then fixed, as
        :mod:`streammn.learner` says of a learner that cannot add values.
    pseudo_count : float, default 1.0
        Dirichlet pseudo-count of every node and pair table (see :mod:`streammn.et.density`;
        ``alpha=`` is still accepted, deprecated).
    shrink : bool, default True
        Shrink each pair table toward the independence of its margins by the James-Stein
        intensity (see :mod:`streammn.et.density`); False gives the paper's plug-in tables.
    learn_theta : bool, default False
        Learn the edge distributions with beta (the full model of Eq. 7, MAP under the
        smoothing prior; :mod:`streammn.et.edge_tables`), starting from the smoothed tables and
        the plug-in beta: recovers the weak edges of dense networks and fits a much better
        density, at 4-8x the CPU of a phase; on the 200-node networks of the paper it adds
        many false edges (``benchmarks/results/et.md``).
    rho_threshold : float, optional
        An edge is in the graph when its appearance probability rho (Eq. 8) exceeds this
        (default ``2 / M``, every pair's rho under the uniform ensemble of all spanning trees;
        0 gives the support of beta; see :mod:`streammn.et.density`).
    sample_rows : int, default 2000
        Rows kept in the reservoir on which beta is learned (cost is linear in it).
    update_every : int, default 10000
        Streaming: rows between two chances of a learning phase in :meth:`partial_fit`.
    new_share : float, default 0.5
        A phase runs at an ``update_every`` boundary when at least this share of the sample
        is new since the last phase (see the module notes; 0 runs one at every boundary).
    max_iter : int, default 100
        PGD iterations per phase (Eq. 14 initialisation and Eq. 9 each).
    tol : float, default 1e-4
        PGD stops when an accepted step improves the mean per-row objective by less (in nats
        per row: far below the differences between models that matter, and PGD's steps
        zig-zag, so a tighter test mostly buys iterations that gain nothing).
    seed : int, default 0
        Seed of the row reservoir.
    weights : {'refined', 'closed-form'}, default 'refined'
        What :meth:`to_markov_network` publishes: the mixture's own weights, or refined ones
        where they score better (``StructureLearner.publish``).

    Examples
    --------
    >>> from streammn.demo import planted_network
    >>> from streammn.et import EnsembleOfTrees
    >>> from streammn.inference import sample
    >>> planted, planted_edges = planted_network(8, seed=0)
    >>> learner = EnsembleOfTrees(planted.schema).fit(sample(planted, 2000, seed=1))
    >>> set(learner.edges) == planted_edges, round(float(learner.rho.sum()), 6)
    (True, 14.0)
    """

    param_error = ETError
    state_format, state_error = FORMAT, ETStateError
    renamed = {"alpha": "pseudo_count"}  # old name -> new, still accepted (deprecated)
    parameters = {
        "pseudo_count": Param(
            Interval(float, 0, None, "neither"),
            "Dirichlet pseudo-count of every node and pair table",
        ),
        "shrink": Param(Boolean(), "shrink pair tables toward independence (James-Stein)"),
        "learn_theta": Param(
            Boolean(),
            "learn the edge distributions with beta (full model "
            "of Eq. 7, MAP): finds the weak edges of dense networks, about "
            "10x the CPU",
            flag="--et-learn-theta",
        ),
        "rho_threshold": Param(
            NONE | Interval(float, 0, 1, "left"),
            "edge appearance probability an edge must exceed (default: 2 / M)",
        ),
        "sample_rows": Param(
            Interval(int, 1), "rows of the sample beta is learned on", flag="--et-sample-rows"
        ),
        "update_every": Param(
            Interval(int, 1), "rows between two structure updates", flag="--update-every"
        ),
        "new_share": Param(
            Interval(float, 0, 1), "share of the sample new since the last phase for a phase"
        ),
        "max_iter": Param(Interval(int, 1), "PGD iterations per phase"),
        "tol": Param(Interval(float, 0), "PGD tolerance, nats per row"),
        "seed": Param(Interval(int, 0), "seed of the row reservoir", flag="--seed"),
        "weights": WEIGHTS_PARAM,
    }

    def __init__(
        self,
        schema: Schema | None = None,
        pseudo_count: float = DEFAULT_PSEUDO_COUNT,
        shrink: bool = True,
        learn_theta: bool = False,
        rho_threshold: float | None = None,
        sample_rows: int = 2000,
        update_every: int = 10000,
        new_share: float = 0.5,
        max_iter: int = 100,
        tol: float = 1e-4,
        seed: int = 0,
        weights: str = "refined",
    ):
        self._check_params(locals())
        self.pseudo_count = float(pseudo_count)
        self.shrink = bool(shrink)
        self.learn_theta = bool(learn_theta)
        self.rho_threshold = None if rho_threshold is None else float(rho_threshold)
        self.sample_rows, self.update_every = int(sample_rows), int(update_every)
        self.new_share = float(new_share)
        self.max_iter, self.tol, self.seed = int(max_iter), float(tol), seed
        self.weights = weights
        self._init_schema(schema)

    def _check_schema(self, schema: Schema) -> None:
        if schema.n_vars < 2:
            raise ETError("ET needs at least 2 variables")
        schema.require_complete("et")

    def _reset(self) -> None:
        self.counts = PairCounts(self.schema)
        self.sample = RowReservoir(self.schema, capacity=self.sample_rows, seed=self.seed)
        self.beta = None
        self.learned_pair_probs = None
        self.rows_since_update = 0
        self.phase_rows = 0  # rows seen at the last phase
        self.phases = 0
        self.history: list[float] = []
        self._cache: dict[tuple, Any] = {}
        self._new_weight_sample()

    @property
    def rows_seen(self) -> int:
        return self.counts.n_rows

    # learning -----------------------------------------------------------------------------
    def _validate(self, batch) -> np.ndarray:
        return self.schema.rows_of(batch, row_offset=self.counts.n_rows)

    def _count(self, rows) -> None:
        batch = Validated(rows, self.schema)
        self._sample(rows, self.counts.n_rows)
        self.counts.update(batch)
        self.sample.update(batch)

    def partial_fit(self, batch: Rows, y: object = None) -> "EnsembleOfTrees":
        """Count a batch (validated first); every ``update_every`` rows run a learning phase
        when one is due (:meth:`phase_due`)."""
        self._schema_for_batch(batch)
        rows = self._validate(batch)
        start, n = 0, rows.shape[0]
        if self.rows_since_update >= self.update_every:  # a phase a stop abandoned runs first
            self._learn_beta(abandonable=n == 0)
        while start < n:
            take = min(n - start, self.update_every - self.rows_since_update)
            self._count(rows[start : start + take])
            self.rows_since_update += take
            start += take
            if self.rows_since_update >= self.update_every:
                if self.phase_due():
                    self._learn_beta(abandonable=start == n)
                else:
                    self.rows_since_update = 0
        return self

    def phase_due(self) -> bool:
        """Whether the sample has changed enough for a phase: none ran yet, or at least
        ``new_share`` of it is new since the last one (see the module notes)."""
        n = self.counts.n_rows
        return self.beta is None or n - self.phase_rows >= self.new_share * n

    def rows_to_pause(self) -> int | None:
        """Rows until the next learning phase: the engine ends a batch there when it can, so
        that a stop request finds the phase at the end of a batch and may abandon it."""
        return max(self.update_every - self.rows_since_update, 0)

    def fit(self, source: Data, y: object = None, *, progress: bool = False) -> "EnsembleOfTrees":
        """Learn from scratch on a finite source (batches, or rows in memory: a matrix, table
        or data frame); ``y`` is ignored. ``progress``: a progress bar on stderr of the rows
        counted, then of the mixture weights' iterations (:mod:`streammn.progress_bar`)."""
        self._schema_for_fit(source)
        self._reset()
        in_memory = isinstance(source, np.ndarray) or table_of(source) is not None
        with progress_bar(progress, "counting pairs (ET)") as bar:
            # (Data: rows in memory, or an iterable of batches)
            for batch in [cast(Rows, source)] if in_memory else cast("Iterable[Rows]", source):
                rows = self.schema.rows_of(batch) if in_memory else self._validate(batch)
                self._count(rows)
                bar.update(len(rows))
            next_phase(bar, "learning the mixture weights (ET)", "iterations")
            self._learn_beta(abandonable=False, bar=bar)
        return self

    def theta(self):
        """Smoothed ``(node_probs, pair_probs)`` from the counts of the whole stream."""
        return smoothed_theta(self.counts, self.pseudo_count, self.shrink)

    def _phase(self, should_stop=None):
        """``(beta, learned pair tables or None, objective history)`` of one learning phase
        (:class:`~streammn.et.kernels.Abandoned` when ``should_stop()`` turns true)."""
        node, pair = self.theta()
        table = ratio_table(node, pair)
        rows = self.sample.rows
        start = self.beta
        if start is None:
            start = initial_beta(
                rows[:INIT_ROWS], table, self.max_iter, self.tol, should_stop=should_stop
            )
            tree = chow_liu_beta(node, pair, self.schema.cardinalities)
            if structure_objective(tree, rows, table) > structure_objective(start, rows, table):
                start = tree
        beta, history = refine_beta(
            start, rows, table, self.max_iter, self.tol, should_stop=should_stop
        )
        if not self.learn_theta:
            return beta, None, history
        return learn_jointly(
            beta, rows, node, pair, self.schema.cardinalities, self.pseudo_count, tol=self.tol
        )

    def learn_beta(self) -> "EnsembleOfTrees":
        """One learning phase: theta from the counts, then PGD on the sample (Eq. 14 start the
        first time, warm start after); with ``learn_theta``, then the joint fit of the edge
        tables and beta (history: its objective per round)."""
        self._learn_beta(abandonable=False)
        return self

    def _learn_beta(self, abandonable: bool, bar=None) -> None:
        """A learning phase; when ``abandonable`` (it falls at the end of a batch) a stop
        request abandons it between PGD iterations: the state stays as before it, with the
        phase pending, so it runs first when learning continues (here or in a run resumed
        from a snapshot of this state) and the model is the one an uninterrupted run makes.
        ``bar``: a progress bar that counts the PGD iterations."""
        if self.counts.n_rows == 0:
            raise ETError("EnsembleOfTrees has seen no rows: call partial_fit or fit first")
        should_stop = (lambda: self._stop_requested) if abandonable else None
        if bar is not None:
            should_stop = counting_steps(bar, should_stop)
        try:
            self.beta, self.learned_pair_probs, history = self._phase(should_stop)
        except Abandoned:
            self.rows_since_update = self.update_every  # pending
            return
        self.rows_since_update = 0
        self.phase_rows = self.counts.n_rows
        self.history = [float(h) for h in history]
        self.phases += 1
        self._cache = {}

    def _current(self):
        """``(beta, learned pair tables or None)`` for all rows seen: the last phase's while
        no phase is due (:meth:`phase_due`); else the result of a phase run on a copy (cached,
        the learner's state is not changed, so a snapshot taken then publishes an up-to-date
        model and resumes identically). None before any row."""
        if self.counts.n_rows == 0:
            return None
        if self.beta is not None and not self.phase_due():
            return self.beta, self.learned_pair_probs
        if self._stop_requested:  # a prompt stop publishes the last phase's model
            if self.beta is not None:
                return self.beta, self.learned_pair_probs
            node, pair = self.theta()  # no phase finished yet: the Chow-Liu tree
            return chow_liu_beta(node, pair, self.schema.cardinalities), None
        return self._cached("phase", lambda: self._phase()[:2])

    def current_beta(self):
        """beta for all rows seen (see :meth:`_current`); None before any row."""
        current = self._current()
        return None if current is None else current[0]

    def current_theta(self):
        """``(node_probs, pair_probs)`` of the current model: the smoothed tables of the
        counts, or with ``learn_theta`` the tables learned with beta."""
        node, pair = self.theta()
        current = self._current()
        if current is not None and current[1] is not None:
            pair = current[1]
        return node, pair

    def _cached(self, name, compute):
        key = (name, self.counts.n_rows, self.phases, self._stop_requested)
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    # results ------------------------------------------------------------------------------
    @property
    def rho(self) -> np.ndarray:
        """Edge appearance probabilities (Eq. 8), (M, M); zero before any row."""
        beta = self.current_beta()
        if beta is None:
            return np.zeros((self.schema.n_vars,) * 2)
        return edge_appearance(beta)

    @property
    def edges(self) -> list[tuple[int, int]]:
        """The learned graph: pairs with rho above ``rho_threshold``."""
        return graph_edges(self.rho, self.rho_threshold)

    def density(self) -> ETDensity:
        """The ET distribution at the current theta and beta (exact LL by Eq. 6)."""
        beta = self.current_beta()
        if beta is None:
            raise ETError("EnsembleOfTrees has seen no rows: call partial_fit or fit first")
        node, pair = self.current_theta()
        return ETDensity(self.schema, beta, node, pair)

    def snapshot_files(self) -> dict:
        """Extra snapshot files: the ET density (``model.et``) once rows have been seen."""
        return {} if self.counts.n_rows == 0 else {ET_FILE: self.density().to_bytes()}

    def learned_network(self):
        """Pairwise MRF on the graph edges, weights by pseudo-likelihood on the sample."""
        return self._cached("model", self._markov_network)

    def _markov_network(self):
        cards = self.schema.cardinalities.astype(np.int64)
        edges = np.array(self.edges, dtype=np.int64).reshape(-1, 2)
        layout = PairwiseLayout(cards, edges)
        node, pair = self.current_theta()
        start = [np.log(node[u, : cards[u]]) for u in range(len(cards))]
        for u, v in edges:
            p = pair[u, v, : cards[u], : cards[v]]
            start.append(
                np.log(p / (node[u, : cards[u], None] * node[v, None, : cards[v]])).ravel()
            )
        model = to_markov_network(self.schema, layout, np.concatenate(start))
        return fit_weights(model, self.sample.rows) if self.sample.size else model

    def pll_terms(self, rows: Rows) -> np.ndarray:
        """``log P(x_i | x_-i)`` of the current Markov network for every row and variable."""
        return self.learned_network().pll_terms(self.schema.rows_of(rows))

    # serialisation ------------------------------------------------------------------------
    def _state(self) -> tuple[dict, dict[str, np.ndarray]]:
        """Parameters, counts, sample (with its RNG), beta, learned tables."""
        meta = {
            "format": FORMAT,
            "schema": self.schema.to_dict(),
            "params": self.settings(),
            "rows_since_update": self.rows_since_update,
            "phase_rows": self.phase_rows,
            "phases": self.phases,
            "history": self.history,
            "has_beta": self.beta is not None,
            "has_learned_tables": self.learned_pair_probs is not None,
        }
        arrays = {
            "counts": np.frombuffer(self.counts.to_bytes(), dtype=np.uint8),
            "sample": np.frombuffer(self.sample.to_bytes(), dtype=np.uint8),
        }
        if self.beta is not None:
            arrays["beta"] = self.beta
        if self.learned_pair_probs is not None:
            arrays["learned_pair_probs"] = self.learned_pair_probs
        return meta, arrays

    def _restore(self, meta: dict, arrays: dict) -> None:
        self.counts = PairCounts.from_bytes(arrays["counts"].tobytes())
        self.sample = RowReservoir.from_bytes(arrays["sample"].tobytes())
        self.beta = arrays["beta"] if meta["has_beta"] else None
        if meta.get("has_learned_tables"):
            self.learned_pair_probs = arrays["learned_pair_probs"]
        self.rows_since_update = int(meta["rows_since_update"])
        # (a state from before new_share: a phase ran at every boundary)
        self.phase_rows = int(meta.get("phase_rows", self.counts.n_rows - self.rows_since_update))
        self.phases = int(meta["phases"])
        self.history = [float(h) for h in meta["history"]]
