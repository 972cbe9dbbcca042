"""EdgeGrafting: structure learning of a pairwise MRF by (best-choice) edge grafting.

The learner alternates two operations (paper Sections 2-3): minimise the group-sparse objective
(Eq. 2, :mod:`streammn.grafting.objective`) over the active set (all node tables plus the active
edges), and activate edges that violate the optimality condition (test C2 on the score of
Eq. 5, :mod:`streammn.grafting.activation`). Statistics live in an
:class:`~streammn.stats.OnDemandPairCounts`: exact node marginals, joint tables only for the
pairs a strategy actually tests under the likelihood (for the past they are answered from the
row reservoir), and the row reservoir that the default pseudo-likelihood objective and its
scores (:mod:`streammn.grafting.pseudo_score`) are computed on. Why the defaults are what they
are (pseudo-likelihood scores at unpenalised weights, climbing best-choice, data-scaled lambda,
refit weights) is issue 16's diagnosis, summarised in docs/learners.md (grafting).

Streaming: :meth:`~EdgeGrafting.partial_fit` counts each batch; every ``update_every`` rows it
checks whether a structure update is due, and if so re-optimises on the current statistics and runs
activation steps, so edges are added as data arrives. :meth:`~EdgeGrafting.fit` counts a finite
source, then grafts to the end. The model is a :class:`~streammn.network.model.MarkovNetwork` with
pairwise features, so snapshots, scoring and file formats work unchanged.

Updates that cost what changed (issue 41). Counting a row is cheap (millions of rows a second);
an update is not (a few passes of the pseudo-likelihood over the row sample per weight fit), and
re-running one every ``update_every`` rows whatever had changed held a 30-variable stream to
about a thousand rows a second. So:

- *Warm starts.* Every weight fit starts where the same fit last ended (new edges at zero): the
  penalised fit from ``theta``, the unpenalised refit, which the scores are taken at and the
  model publishes, from ``refit_theta``; both are saved with the state.
- *Tolerances in noise units* (:func:`~streammn.grafting.objective.noise_tolerances`): a fit
  stops once the gradient is a small fraction (``tol``) of its sampling noise on the rows the
  fit sees, not after a fixed number of iterations; from a warm start on statistics that moved
  little that is a few iterations. The data-scaled lambda uses the same row count
  (:attr:`~EdgeGrafting.n_sample`): the pseudo-likelihood sees the statistics' reservoir however
  long the stream, and a lambda scaled to every row counted fell below the reservoir's noise on long
  streams (false edges past a few hundred thousand rows).
- *Skipped updates.* An update runs only when the statistics moved by at least ``min_change``
  of their own noise since the last one (:meth:`~EdgeGrafting.change`): the fits' row sample, as it
  grows (by ``sqrt((a - b) / b)`` from ``b`` to ``a`` rows) and once full as Algorithm R replaces
  rows (``sqrt(2 ln(n / n0))``), and the node marginals, measured (a drift test, so a
  stream that changes is not left to the geometric cadence). On a stationary stream updates
  come at a geometric sequence of rows (x2 while the sample fills, then x1.65): a 1M-row
  stream makes about ten, each costing about as much as the statistics changed, and the share
  of time spent on structure falls as the stream grows.

Why the cadence is in rows, not seconds. The model must be a function of the rows (and of where
batches were cut), so that a run resumed from a snapshot ends with the bytes an uninterrupted
run ends with. A cadence driven by measured time would make the updates fall at rows that
depend on the machine's load: two runs over the same rows, or a run and its resumption, would
learn different models, and checkpointing the measurements would not help, since the resumed
run measures its own. Every decision here reads only counts (rows, marginal counts, the rows
of the last update), so it is repeated exactly on resume; ``structure_seconds`` records the
time spent, for the benchmark, and decides nothing.

A prompt stop. :meth:`~streammn.learner.StructureLearner.stop` (the engine calls it from its
SIGINT/SIGTERM handler) makes the weight fit in flight raise at its next evaluation
(:class:`~streammn.grafting.objective.Abandoned`); the update is abandoned, everything it
changed is put back (:meth:`~EdgeGrafting._search_state`), and it is left *pending*: the state is
the one after the rows up to the update and before it, which is what the final snapshot holds, and
the first thing learning does next (after ``clear_stop``, or in a resumed run) is that update, so
the model is the uninterrupted run's. Only an update at the end of a batch can be abandoned
(rows after it cannot be counted before it has run): :meth:`~EdgeGrafting.rows_to_pause` tells the
engine where the next one is planned, and it cuts batches there when the source can name the
position (as it does at snapshot rows); an update inside a batch that could not be cut (message
logs), or one a drift brings forward, is awaited.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable, Iterable, cast
import time

import numpy as np

from streammn.grafting.activation import BestChoice, Exhaustive, activation_scores
from streammn.grafting.inference import (
    INFERENCE,
    BPInference,
    ExactInference,
    infer,
    pair_offsets,
    use_exact,
)
from streammn.grafting.mrf import PairwiseLayout, to_markov_network
from streammn.grafting.objective import (
    OBJECTIVES,
    Abandoned,
    GraftingObjective,
    minimise,
    noise_tolerances,
    pseudo_loglik,
)
from streammn.grafting.pseudo_score import PseudoScorer
from streammn.schema.encoding import table_of
from streammn.schema import Rows, Schema, Validated
from streammn.stats import OnDemandPairCounts
from streammn.errors import GraftingError, GraftingStateError
from streammn.learner import WEIGHTS_PARAM, Data, StructureLearner
from streammn.progress_bar import progress_bar
from streammn.params import NONE, Boolean, Interval, OneOf, Param

if TYPE_CHECKING:
    from streammn.network.model import MarkovNetwork

STRATEGIES = ("best_choice", "first_hit", "exhaustive")
STANDARDISE = (False, True, "either")
Z_C = 1.5  # standardised C2: margin over the expected largest null z (see ``standardise``)
FORMAT = "streammn-grafting-2"  # 2: cadence, pending update, warm refit (issue 41)


def default_lambda(cards, n_rows: int, c: float = 2.0) -> float:
    """The data-scaled default group-L1 strength ``c * sqrt(log(n) / N) / mean(card)^2``.

    Test C2 must let every true edge in and keep the rest out. What it has to keep out, once the
    scores are taken at the active set's unpenalised weights (``score_refit``, the default), is
    sampling noise: the largest score among the ``~n^2 / 2`` pairs that are independent given
    the true graph. A pair's gradient (``k x k`` cells of probability about ``1 / k^2``) has
    per-cell standard deviation about ``1 / (k sqrt(N))``, its norm about ``1 / sqrt(N)``; the
    maximum over the pairs grows like ``sqrt(log n)`` times that (sparse-recovery theory,
    Ravikumar et al. 2010), and C2 divides the norm by ``d_e = k^2``: hence
    ``sqrt(log(n) / N) / k^2``. Measured on planted Potts models with the true graph active at
    its unpenalised weights (benchmarks/grafting_lambda.py ``--ref-c 0``,
    results/grafting_lambda_unpenalised.md), the noise in these units is 0.99-1.20 on trees,
    grids, random and scale-free graphs with 2-5 states, 2k-20k rows (in ``/ k^3`` units it
    spread x2.7 with ``k``), and the weakest true edge of strong couplings (0.8-1.5), with the
    rest of its graph active, scores 5.6 or more at 20k rows on trees, grids and random graphs,
    2.7 at 2k rows, 2.1 and 1.7 on 3- and 2-state scale-free graphs (hub-to-hub edges: their
    endpoints are nearly fixed by their other neighbours). ``c = 2`` clears the noise by 1.7x
    and stays below all but the weakest hub edges. With mixed cardinalities ``k`` is the mean.

    (Scored at the *penalised* optimum, ``score_refit=False``, the noise is larger and is not
    sampling noise: the group L1 leaves every active edge's gradient at norm ``lambda d_e``,
    and pairs two hops apart inherit that unexplained dependence, worst around hubs and with 2
    states. ``lambda_c = 9 / k`` there gives the previous default, ``9 sqrt(log n / N) / k^3``.)
    """
    n = max(len(cards), 2)
    k2 = float(np.mean(np.asarray(cards, dtype=np.float64))) ** 2
    return c * math.sqrt(math.log(n) / max(int(n_rows), 1)) / k2


class EdgeGrafting(StructureLearner):
    """Edge grafting of a pairwise Markov random field.

    Parameters
    ----------
    schema : Schema or None, default None
        The variables (any cardinalities); None: taken from the data, then fixed, as
        :mod:`streammn.learner` says of a learner that cannot add values.
    lambda_ : float or None, default None
        Group-L1 strength (per-row scale); also the activation threshold of test C2. None: the
        data-scaled default ``lambda_c * sqrt(log(n_vars) / n_rows) / mean(card)^2`` (see
        :func:`default_lambda`), recomputed from the rows seen at every optimisation.
    lambda_c : float, default 2.0
        The constant of the data-scaled default lambda (ignored when ``lambda_`` is given),
        chosen on planted Potts models (:func:`default_lambda`, docs/learners.md).
    lambda2 : float, default 0.001
        Squared-L2 strength (per-row scale).
    strategy : {"best_choice", "first_hit", "exhaustive"}, default "best_choice"
        Edge search (see :mod:`streammn.grafting.activation`).
    threshold : float, default 0.5
        Best-choice activation threshold between the reservoir's mean (0) and max (1) (the
        paper's ``alpha``; ``alpha=`` is still accepted, deprecated).
    reservoir_size : int or None, default None
        Best-choice reservoir capacity |R| (None: n_vars).
    t_max : int or None, default None
        Best-choice edge tests per round (None: ``int(sqrt(n_vars))``).
    rho0 : float, default 0.0
        Default priority of unseen edges.
    hubs : bool, default True
        Best-choice hub heuristic.
    c_hat : float, default 0.1
        Degree-centrality threshold of the hub heuristic (the paper gives no value).
    climb : bool, default True
        Best-choice: before activating a reservoir edge, move to the best-scoring pair sharing
        an endpoint until none scores higher (False: the paper's Algorithm 3 as written).
    max_edges : int or None, default None
        Stop after this many active edges (None: no budget; the test C2 ends the run).
    objective : {"pseudo", "likelihood"}, default "pseudo"
        Data term: pseudo-likelihood on the row sample, with activation scores its exact
        gradient (:mod:`streammn.grafting.pseudo_score`); or likelihood with the model
        marginals of ``inference`` and the scores of Eq. 5 from its pair tables.
    max_iter : int, default 20
        Cap on the L-BFGS iterations of the penalised fit of a step (five times this for the
        unpenalised refit); the fits stop earlier on ``tol``.
    tol : float, default 0.1
        Weight fits stop once the gradient's largest cell, or the last decrease of the
        objective, is below ``tol`` times its sampling noise on the rows the fit sees
        (:func:`~streammn.grafting.objective.noise_tolerances`).
    warm_start : bool, default True
        Every weight fit starts from the previous solution of the same fit (new edges at zero);
        False: from zero (the reference the warm starts are tested against).
    inference : {"auto", "bp", "exact"}, default "auto"
        Model marginals: loopy BP (pair tables of inactive pairs by clamped BP) or enumeration
        of the joint states; "auto" enumerates when there are at most 2^16 joint states.
    bp_damping, bp_tol, bp_max_iter : float, float, int
        Loopy BP settings: damping (default 0.5), tolerance (1e-3) and most iterations (60).
    update_every : int, default 10000
        Streaming: rows between two checks for a structure update in :meth:`partial_fit` (the
        first check always updates).
    min_change : float, default 1.0
        Streaming: a check runs a structure update only when the statistics the fits see moved
        by at least this many standard deviations of their own sampling noise since the last
        update (module docstring); 0: every check updates (the cadence before issue 41).
    steps_per_update : int or None, default None
        Streaming: activation steps per learning phase (None: until max_edges or no edge passes).
    stats_reservoir : int, default 50000
        Rows kept by the statistics' row reservoir (answers for pairs requested late, and is the
        sample of the pseudo-likelihood objective): n bytes a row. At 20,000 the planted grid
        (n = 30, 3 states) on 50k rows was found exactly, but its weights, fit on 20k of the
        rows, scored 0.006 +- 0.003 below L1-LR's on all 50k in test PLL; at 50,000 they match
        (-21.358 both). Runs on fewer rows than this are unaffected.
    refit : bool, default True
        Publish the active set's weights re-optimised without the group L1 (see
        :attr:`model_theta`).
    score_refit : bool, default True
        Score inactive pairs against the active set's weights re-optimised without the group
        L1 (one more optimisation per step) instead of the penalised optimum. At the penalised
        optimum every active edge's gradient keeps norm ``lambda d_e`` (the L1's shrinkage),
        and pairs two hops apart inherit that unexplained dependence: with strong couplings,
        around hubs and with 2 states it passes C2 (Ising scale-free n = 50: 188 edges for 96,
        the false ones entering at 1.0-1.2 lambda one after another; issue 16, docs/learners.md).
        Unpenalised, the non-edges' scores are sampling noise (see :func:`default_lambda`).
        False: the paper's test at the penalised optimum (raise ``lambda_c``, see there).
    standardise : {"either", True, False}, default "either"
        Pseudo-likelihood objective only: which form of test C2. ``False``: the paper's, the
        raw gradient norm over ``d_e`` against lambda. ``True``: each pair's gradient norm
        over its own standard deviation, ``z > z_c sqrt(2 log(n (n - 1) / 2))`` (``z_c`` =
        ``Z_C``; the largest of that many standard normals is about ``sqrt(2 log M)``;
        :mod:`streammn.grafting.pseudo_score`), lambda then only setting the penalty.
        ``"either"``: a pair passes when it passes either test (its score is the larger of
        the raw score and ``z`` put on lambda's scale). Each test alone misses edges the other
        finds (issue 16's suite): lambda's single threshold, set by the noisiest pairs, keeps
        out hub-to-hub edges of a strongly coupled scale-free graph (a hub nearly fixed by its
        neighbours has small residuals, so its true edges' gradients are small, yet 7-12 of
        their own standard deviations; Ising scale-free n = 50: 3-4 of 96 missed, test PLL
        below L1-LR's), while the ``z`` threshold does not fall with the rows and misses a
        weak edge on small samples (2k-row grid, 5k-row random graph at n = 200: one edge
        each). Either: every edge of both, 96 of 96 on the Ising scale-free graph with one
        false; both thresholds sit well above their noise, so the union adds few false edges.
        The likelihood objective has only the raw test (``"either"`` is then ``False``).
    seed : int, default 0
        Randomness (edge sampling, row reservoir).
    weights : {'refined', 'closed-form'}, default 'refined'
        What :meth:`to_markov_network` publishes (``StructureLearner.publish``).

    Examples
    --------
    >>> from streammn.demo import planted_network
    >>> from streammn.grafting import EdgeGrafting
    >>> from streammn.inference import sample
    >>> planted, planted_edges = planted_network(8, seed=0)
    >>> rows = sample(planted, 2000, seed=1)
    >>> learner = EdgeGrafting(planted.schema).fit(rows)
    >>> len(learner.edges), len(set(learner.edges) & planted_edges), len(planted_edges)
    (9, 9, 9)
    >>> round(learner.to_markov_network().pll(rows), 3)
    -4.059
    """

    param_error = GraftingError
    state_format, state_error = FORMAT, GraftingStateError
    renamed = {"alpha": "threshold"}  # old name -> new, still accepted (deprecated)
    parameters = {
        "lambda_": Param(
            NONE | Interval(float, 0, None, "neither"),
            "group-L1 strength and "
            "activation threshold (default: scaled to the data, "
            "c*sqrt(log n / N) / mean(card)^2)",
            flag="--lambda",
        ),
        "lambda_c": Param(
            Interval(float, 0, None, "neither"), "constant of the data-scaled lambda"
        ),
        "lambda2": Param(Interval(float, 0), "squared-L2 strength"),
        "strategy": Param(OneOf(*STRATEGIES), "edge search", flag="--strategy"),
        "threshold": Param(
            Interval(float, 0, 1),
            "best-choice activation threshold between the reservoir's mean (0) and max (1)",
            flag="--threshold",
            old_flags=("--alpha",),
        ),
        "reservoir_size": Param(NONE | Interval(int, 1), "best-choice reservoir capacity"),
        "t_max": Param(NONE | Interval(int, 1), "best-choice edge tests per round"),
        "rho0": Param(Interval(float), "default priority of unseen edges"),
        "hubs": Param(Boolean(), "best-choice hub heuristic"),
        "c_hat": Param(Interval(float, 0), "degree-centrality threshold of the hub heuristic"),
        "climb": Param(Boolean(), "best-choice: climb to the best pair sharing an endpoint"),
        "max_edges": Param(
            NONE | Interval(int, 0),
            "edge budget (default: none, test C2 ends the run)",
            flag="--max-edges",
        ),
        "objective": Param(OneOf(*OBJECTIVES), "data term of the weight fits"),
        "max_iter": Param(Interval(int, 1), "cap on the L-BFGS iterations of a step's fit"),
        "tol": Param(
            Interval(float, 0, None, "neither"), "fit tolerance in units of the sampling noise"
        ),
        "warm_start": Param(Boolean(), "weight fits start from the previous solution"),
        "inference": Param(OneOf(*INFERENCE), "model marginals of the likelihood objective"),
        "bp_damping": Param(Interval(float, 0, 1, "left"), "loopy BP damping"),
        "bp_tol": Param(Interval(float, 0, None, "neither"), "loopy BP tolerance"),
        "bp_max_iter": Param(Interval(int, 1), "loopy BP iterations"),
        "update_every": Param(
            Interval(int, 1), "rows between two structure updates", flag="--update-every"
        ),
        "min_change": Param(
            Interval(float, 0), "change, in noise units, that makes a check update the structure"
        ),
        "steps_per_update": Param(NONE | Interval(int, 1), "activation steps per update"),
        "stats_reservoir": Param(Interval(int, 1), "rows kept by the statistics' reservoir"),
        "refit": Param(Boolean(), "publish the active set's weights refit without the L1"),
        "score_refit": Param(Boolean(), "score pairs against the unpenalised refit"),
        "standardise": Param(OneOf(*STANDARDISE), "form of test C2"),
        "seed": Param(Interval(int, 0), "randomness (edge sampling, row reservoir)", flag="--seed"),
        "weights": WEIGHTS_PARAM,
    }

    def __init__(
        self,
        schema: Schema | None = None,
        lambda_: float | None = None,
        lambda_c: float = 2.0,
        lambda2: float = 0.001,
        strategy: str = "best_choice",
        threshold: float = 0.5,
        reservoir_size: int | None = None,
        t_max: int | None = None,
        rho0: float = 0.0,
        hubs: bool = True,
        c_hat: float = 0.1,
        climb: bool = True,
        max_edges: int | None = None,
        objective: str = "pseudo",
        max_iter: int = 20,
        tol: float = 0.1,
        warm_start: bool = True,
        inference: str = "auto",
        bp_damping: float = 0.5,
        bp_tol: float = 1e-3,
        bp_max_iter: int = 60,
        update_every: int = 10000,
        min_change: float = 1.0,
        steps_per_update: int | None = None,
        stats_reservoir: int = 50000,
        refit: bool = True,
        score_refit: bool = True,
        standardise: bool | str = "either",
        seed: int = 0,
        weights: str = "refined",
    ):
        self._check_params(locals())
        if standardise is True and objective != "pseudo":
            raise GraftingError("standardise=True needs the pseudo-likelihood objective")
        self.lambda_ = None if lambda_ is None else float(lambda_)
        self.lambda_c, self.lambda2 = float(lambda_c), float(lambda2)
        self.inference = inference
        self.strategy, self.threshold = strategy, float(threshold)
        self.reservoir_size, self.t_max, self.rho0 = reservoir_size, t_max, float(rho0)
        self.hubs, self.c_hat, self.max_edges = hubs, float(c_hat), max_edges
        self.climb = bool(climb)
        self.objective, self.max_iter = objective, int(max_iter)
        self.tol, self.warm_start = float(tol), bool(warm_start)
        self.min_change = float(min_change)
        self.bp_damping, self.bp_tol, self.bp_max_iter = bp_damping, bp_tol, int(bp_max_iter)
        self.update_every, self.steps_per_update = int(update_every), steps_per_update
        self.stats_reservoir, self.seed = int(stats_reservoir), seed
        self.refit, self.score_refit = bool(refit), bool(score_refit)
        self.standardise = standardise if standardise == "either" else bool(standardise)
        self.weights = weights
        self._init_schema(schema)

    def _check_schema(self, schema: Schema) -> None:
        use_exact(self.inference, schema.cardinalities)  # refuses 'exact' beyond its reach
        schema.require_complete("grafting")

    # parameters ---------------------------------------------------------------------------
    @property
    def n_vars(self) -> int:
        return self.schema.n_vars

    @property
    def edge_limit(self) -> int:
        n = self.n_vars
        return n * (n - 1) // 2 if self.max_edges is None else int(self.max_edges)

    @property
    def strength(self) -> float:
        """The group-L1 strength in use: as given, or the data-scaled default for the rows seen."""
        if self.lambda_ is not None:
            return self.lambda_
        return default_lambda(self.cards, self.n_sample, self.lambda_c)

    @property
    def n_sample(self) -> int:
        """Rows the weight fits and the activation scores see, which set their sampling noise:
        the statistics' row reservoir under the pseudo-likelihood (at most ``stats_reservoir``
        rows however long the stream), every row counted under the likelihood."""
        if self.objective == "pseudo":
            return self.stats.reservoir.size
        return self.stats.n_rows

    def _make_strategy(self):
        n = self.n_vars
        if self.strategy == "exhaustive":
            return Exhaustive()
        if self.strategy == "first_hit":
            return BestChoice(
                n,
                self.rng,
                capacity=1,
                t_max=1,
                threshold=1.0,
                rho0=self.rho0,
                hubs=False,
                climb=False,
            )
        return BestChoice(
            n,
            self.rng,
            capacity=self.reservoir_size if self.reservoir_size else max(n, 1),
            t_max=self.t_max if self.t_max else max(int(math.sqrt(n)), 1),
            threshold=self.threshold,
            rho0=self.rho0,
            hubs=self.hubs,
            c_hat=self.c_hat,
            climb=self.climb,
        )

    def _reset(self) -> None:
        self._exact = use_exact(self.inference, self.schema.cardinalities)
        self.rng = np.random.default_rng(self.seed)
        self.stats = OnDemandPairCounts(
            self.schema, reservoir_capacity=self.stats_reservoir, seed=self.seed
        )
        self.cards = np.ascontiguousarray(self.schema.cardinalities, dtype=np.int64)
        self.edges: list[tuple[int, int]] = []
        self.active: set[tuple[int, int]] = set()
        self.layout = PairwiseLayout(self.cards, np.empty((0, 2), np.int64))
        self.theta = np.zeros(self.layout.size)
        self.score_theta = self.refit_theta = self.theta
        # model marginals at the current weights (inference module), or scores (pseudo)
        self._inference: ExactInference | BPInference | PseudoScorer | None = None
        self._messages: np.ndarray | None = None
        self._infer_from: np.ndarray | None = None
        self._scored = np.zeros((self.n_vars, self.n_vars), dtype=np.bool_)
        self.objective_value = float("nan")
        self.converged = False
        self.steps = 0
        self.rows_since_update = 0
        self.updates = self.skipped = 0  # structure updates run, checks skipped
        self.last_update_rows = 0  # rows counted at the last structure update
        self._last_counts = np.zeros(int(self.layout.uoff[-1]), dtype=np.int64)
        self.pending_update = False  # an update abandoned by a stop, to run first
        self._planned: tuple[tuple[int, int], int | None] | None = None  # rows_to_pause's cache
        self._abandonable = False  # inside an update that a stop may abandon
        self.structure_seconds = 0.0  # time in structure updates (measured, not state)
        self.history: list[dict] = []
        self._strategy = self._make_strategy()
        self._model: MarkovNetwork | None = None
        self._model_theta: np.ndarray | None = None
        self._new_weight_sample()

    # context offered to the strategies -----------------------------------------------------
    def degrees(self) -> np.ndarray:
        return np.diff(self.layout.adj_ptr)

    def score_pairs(self, pairs):
        """Activation scores (Eq. 5) of inactive ``pairs`` (k x 2, i < j), counting their
        statistics if needed; ``None``: every pair counted so far. Returns ``(pairs, scores)``."""
        if isinstance(self._inference, PseudoScorer):
            pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
            self._scored[pairs[:, 0], pairs[:, 1]] = True
            scores = self._inference.raw_scores(pairs)
            if self.standardise:  # z on lambda's scale: "score > lambda" reads "z > z_threshold"
                z = self._inference.z_scores(pairs, scores) * (self.strength / self.z_threshold)
                scores = z if self.standardise is True else np.maximum(scores, z)
            return pairs, scores
        got, counts, offsets, n_rows = self.stats.flat_tables(pairs)
        model = self._inference.pair_tables(got)
        return got, activation_scores(
            got, self.cards, model, pair_offsets(got, self.cards), counts, offsets, n_rows
        )

    @property
    def z_threshold(self) -> float:
        """The standardised C2 threshold ``Z_C sqrt(2 log M)`` over the ``M`` pairs."""
        n = max(self.n_vars, 3)
        return Z_C * math.sqrt(2.0 * math.log(n * (n - 1) / 2))

    @property
    def fraction_pairs_counted(self) -> float:
        """Pairs whose joint statistics were ever computed (pseudo-likelihood: pairs ever
        scored), over all n (n - 1) / 2 pairs."""
        if self.objective == "pseudo":
            n = self.n_vars
            return float(self._scored.sum()) / max(n * (n - 1) // 2, 1)
        return self.stats.fraction_counted

    # learning -----------------------------------------------------------------------------
    def _data_marginals(self) -> np.ndarray:
        m = self.stats.marginals
        node = np.asarray(m.flat, dtype=np.float64) / max(m.n_rows, 1)
        if not self.edges:
            return node
        _, counts, offsets, n_rows = self.stats.flat_tables(np.array(self.edges, np.int64))
        per_cell = np.repeat(np.maximum(n_rows, 1), np.diff(offsets))
        return np.concatenate([node, counts / per_cell])

    def optimise(self) -> float:
        """Minimise Eq. 2 over the active set on the current statistics; returns its value."""
        if self.stats.n_rows == 0:
            raise GraftingError("EdgeGrafting has seen no rows: call partial_fit or fit first")
        obj = self._objective(self.strength)
        self.theta, self.objective_value, _ = self._fit(obj, self.theta, self.max_iter, False)
        self._infer(obj.messages)
        self._model = self._model_theta = None
        return self.objective_value

    def _fit(
        self, objective: GraftingObjective, start: np.ndarray, max_iter: int, smooth: bool = True
    ):
        """One weight fit: from ``start`` (zero without ``warm_start``), to the noise-scaled
        tolerance (``smooth``: no group L1 in ``objective``), abandoned on a stop inside an
        abandonable update."""
        if not self.warm_start:
            start = np.zeros_like(start)
        value = self.objective_value
        if not math.isfinite(value):  # the first fit: the objective's scale at zero weights
            value = float(np.log(self.cards.astype(np.float64)).sum())
        gtol, ftol = noise_tolerances(self.n_sample, self.n_vars, value, self.tol, smooth)
        return minimise(objective, start, max_iter, gtol, ftol, should_stop=self._should_stop)

    def _should_stop(self) -> bool:
        return self._abandonable and self._stop_requested

    def _objective(self, lambda_: float) -> GraftingObjective:
        rows = self.stats.reservoir.rows if self.objective == "pseudo" else None
        return GraftingObjective(
            self.layout,
            self._data_marginals(),
            lambda_,
            self.lambda2,
            kind=self.objective,
            rows=rows,
            damping=self.bp_damping,
            tol=self.bp_tol,
            max_iter=self.bp_max_iter,
            messages=self._messages,
            exact=self._exact,
        )

    @property
    def model_theta(self) -> np.ndarray:
        """Weights of the published model. With ``refit``: the active set re-optimised without
        the group L1 (L2 only). The group L1 selects the edges; its shrinkage of the kept edges
        only biases the model (a test PLL below that of the same structure with unpenalised
        weights, issue 16). With ``score_refit`` too that is the refit every optimisation
        makes for the scores (``refit_theta``, warm-started from the previous one and
        saved with the state), so the published weights are a function of the updates alone;
        otherwise (or before the first optimisation) a fit from the grafting optimum."""
        if self._model_theta is None:
            if not (self.refit and self.stats.n_rows):
                self._model_theta = self.theta
            elif self.score_refit and self._inference is not None:
                self._model_theta = self.refit_theta
            else:
                obj = self._objective(0.0)
                gtol, ftol = noise_tolerances(self.n_sample, self.n_vars, 1.0, self.tol)
                self._model_theta = minimise(obj, self.theta, 5 * self.max_iter, gtol, ftol)[0]
        return self._model_theta

    def _infer(self, messages, refit: np.ndarray | None = None) -> None:
        """Scores at the current weights: with ``score_refit`` the unpenalised refit (``refit``
        when restoring a state: the saved one, so no fit runs), else the penalised optimum."""
        weights = self.theta
        if self.score_refit:
            if refit is None:
                refit = self._fit(self._objective(0.0), self.refit_theta, 5 * self.max_iter)[0]
            self.refit_theta = weights = refit
        self.score_theta = weights  # the weights the activation scores are taken at
        if self.objective == "pseudo":
            self._inference = PseudoScorer(
                self.layout, weights, self.stats.reservoir.rows, bool(self.standardise)
            )
            return
        self._infer_from = messages  # kept so that a restored state infers identically
        self._inference = infer(
            self.layout,
            weights,
            self._exact,
            self.bp_damping,
            self.bp_tol,
            self.bp_max_iter,
            messages,
        )
        self._messages = getattr(self._inference, "messages", None)

    def _activate(self, chosen) -> None:
        old = self.layout
        self.edges.extend(chosen)
        self.active.update(chosen)
        self.layout = PairwiseLayout(self.cards, np.array(self.edges, dtype=np.int64))
        self.theta = self._grown(self.theta, old.size)
        self.refit_theta = self._grown(self.refit_theta, old.size)

    def _grown(self, weights: np.ndarray, old_size: int) -> np.ndarray:
        """``weights`` of the previous active set with the new edges' tables at zero."""
        out = np.zeros(self.layout.size)
        out[:old_size] = weights
        return out

    def step(self) -> bool:
        """One activation step (choose edges, activate, re-optimise, update the search).
        Returns False, changing nothing, when max_edges is reached or no edge passes C2."""
        limit = self.edge_limit - len(self.edges)
        if limit <= 0 or self.converged:
            return False
        if self._inference is None:
            self.optimise()
        started = time.perf_counter()
        chosen = self._strategy.propose(self, limit)
        if not chosen:
            self.converged = True
            return False
        self._activate(chosen)
        self.optimise()
        self._strategy.after_optimisation(self)
        self.steps += 1
        self.history.append(
            {
                "step": self.steps,
                "added": [list(e) for e in chosen],
                "n_edges": len(self.edges),
                "objective": self.objective_value,
                "fraction_pairs_counted": self.fraction_pairs_counted,
                "seconds": time.perf_counter() - started,
            }
        )
        return True

    def graft(self, max_steps: int | None = None, callback=None) -> int:
        """Run activation steps until none is possible (or ``max_steps``); ``callback(self)``
        after each. Returns the number of steps taken."""
        if self._inference is None:
            self.optimise()
        done = 0
        while (max_steps is None or done < max_steps) and self.step():
            done += 1
            if callback is not None:
                callback(self)
        return done

    def partial_fit(self, batch: Rows, y: object = None) -> "EdgeGrafting":
        """Count a batch (a :class:`~streammn.stream.source.Batch` or a row matrix, validated
        first); every ``update_every`` rows check whether the statistics moved enough for a
        structure update (:meth:`change`) and if so re-optimise and run up to ``steps_per_update``
        activation steps. A batch is counted up to each ``update_every`` boundary before the
        check there, so the model does not depend on how the stream was cut into batches.

        After :meth:`stop`, an update due at the end of the batch is abandoned (or not begun)
        and left pending (module docstring); learning more rows before it has run raises
        :class:`GraftingError` until :meth:`clear_stop`."""
        self._schema_for_batch(batch)
        rows = self._validate(batch)
        if self.pending_update:
            if self._stop_requested:
                raise GraftingError(
                    "EdgeGrafting was stopped with a structure update pending: call "
                    "clear_stop() before learning more rows"
                )
            self._boundary(abandonable=False)
        self._sample(rows, self.stats.n_rows)
        start = 0
        while start < rows.shape[0]:
            take = min(rows.shape[0] - start, self.update_every - self.rows_since_update)
            self.stats.update(Validated(rows[start : start + take], self.schema))
            self.rows_since_update += take
            start += take
            if self.rows_since_update >= self.update_every:
                self.rows_since_update = 0
                self.pending_update = True
                # only an update at the end of the batch may be abandoned: rows after it
                # cannot be counted before it has run
                self._boundary(abandonable=start == rows.shape[0])
        return self

    def _boundary(self, abandonable: bool) -> None:
        """The check at an ``update_every`` boundary: update when the statistics moved enough
        (:meth:`change`), else skip; a stop inside an ``abandonable`` update abandons it and
        leaves it pending."""
        if abandonable and self._stop_requested:
            return  # stopped before it began: pending
        if self.updates and self.change() < self.min_change:
            self.skipped += 1
            self.pending_update = False
            return
        started = time.perf_counter()
        saved = self._search_state()
        self._abandonable = abandonable
        try:
            self._learning_phase()
        except Abandoned:
            self._restore_search_state(saved)
            return
        finally:
            self._abandonable = False
            self.structure_seconds += time.perf_counter() - started
        self.updates += 1
        self.last_update_rows = self.stats.n_rows
        self._last_counts = np.asarray(self.stats.marginals.flat, dtype=np.int64).copy()
        self.pending_update = False

    def change(self) -> float:
        """How far the statistics the structure depends on moved since the last update, in
        standard deviations of their own sampling noise (module docstring): the larger of the
        turnover of the fits' row sample and the drift of the node marginals."""
        return math.sqrt(max(self._turnover2(self.stats.n_rows), self._drift2()))

    def _turnover2(self, n_rows: int) -> float:
        """Squared move of the fits' row sample from ``last_update_rows`` to ``n_rows`` rows,
        in noise units: a sample growing from ``b`` to ``a`` rows moves a mean statistic by
        ``sqrt((a - b) / b)`` of its noise at ``a``; a full reservoir whose fraction ``f`` is
        replaced by rows of the same distribution moves it by ``sqrt(2 f)``, and Algorithm R
        replaces ``f = ln(n / n0)`` of it (in expectation; tightly concentrated) between
        ``n0`` and ``n`` rows."""
        n0 = self.last_update_rows
        if n0 <= 0:
            return math.inf
        cap = self.stats.reservoir.capacity if self.objective == "pseudo" else math.inf
        a, b = min(n_rows, cap), min(n0, cap)
        moved = (a - b) / b
        if n_rows > cap:
            moved += 2.0 * math.log(n_rows / max(n0, cap))
        return moved

    def _drift2(self) -> float:
        """Squared drift of the node marginals since the last update, over its null level: the
        largest ``z^2`` of a cell's frequency in the rows since the update against its
        frequency before it, over ``Z_C^2 * 2 log(cells)`` (the largest ``z^2`` of that many
        cells without drift is about ``2 log(cells)``; ``Z_C`` as in the standardised C2)."""
        n0, n = self.last_update_rows, self.stats.n_rows
        m = n - n0
        if n0 <= 0 or m <= 0:
            return 0.0
        counts = np.asarray(self.stats.marginals.flat, dtype=np.float64)
        before = self._last_counts / n0
        since = (counts - self._last_counts) / m
        p = np.clip(before, 0.5 / n0, 1.0 - 0.5 / n0)
        z2 = (since - before) ** 2 / (p * (1.0 - p) * (1.0 / m + 1.0 / n0))
        null = Z_C**2 * 2.0 * math.log(max(counts.shape[0], 3))
        return float(z2.max()) / null

    def rows_to_pause(self) -> int | None:
        """Rows until the next ``update_every`` boundary at which the turnover alone makes a
        structure update (a drift may make one at an earlier boundary); None when no update is
        planned within a million boundaries. Where it falls at the end of a batch a stop can
        abandon the update (the engine cuts batches there)."""
        if self.pending_update:
            return None
        first = self.update_every - self.rows_since_update
        if not self.updates or self.min_change <= 0:
            return first
        key = (self.updates, self.last_update_rows)  # the boundaries' grid is fixed
        if self._planned is None or self._planned[0] != key:
            n, target, planned = self.stats.n_rows + first, self.min_change**2, None
            for k in range(1_000_000):  # once per update: each call after it reads the cache
                if self._turnover2(n + k * self.update_every) >= target:
                    planned = n + k * self.update_every
                    break
            self._planned = (key, planned)
        planned = self._planned[1]
        return None if planned is None else planned - self.stats.n_rows

    def _search_state(self) -> dict:
        """What a structure update changes, to put back when a stop abandons it."""
        return {
            "edges": list(self.edges),
            "layout": self.layout,
            "theta": self.theta,
            "refit_theta": self.refit_theta,
            "score_theta": self.score_theta,
            "inference": self._inference,
            "messages": self._messages,
            "infer_from": self._infer_from,
            "scored": self._scored.copy(),
            "objective_value": self.objective_value,
            "converged": self.converged,
            "steps": self.steps,
            "history": len(self.history),
            "strategy": self._strategy.get_state(),
            "rng": self.rng.bit_generator.state,
            "model": (self._model, self._model_theta),
        }

    def _restore_search_state(self, saved: dict) -> None:
        self.edges = saved["edges"]
        self.active = set(self.edges)
        self.layout, self.theta = saved["layout"], saved["theta"]
        self.refit_theta, self.score_theta = saved["refit_theta"], saved["score_theta"]
        self._inference, self._messages = saved["inference"], saved["messages"]
        self._infer_from, self._scored = saved["infer_from"], saved["scored"]
        self.objective_value, self.converged = saved["objective_value"], saved["converged"]
        self.steps = saved["steps"]
        del self.history[saved["history"] :]
        self._strategy.set_state(saved["strategy"])
        self.rng.bit_generator.state = saved["rng"]
        self._model, self._model_theta = saved["model"]

    def _learning_phase(self) -> None:
        self.converged = False
        self.optimise()
        if self.steps_per_update is None or self.steps_per_update > 0:
            self._strategy.after_optimisation(self)
            self.graft(self.steps_per_update)

    def _validate(self, batch) -> np.ndarray:
        return self.schema.rows_of(batch, row_offset=self.stats.n_rows)

    def fit(
        self,
        source: Data,
        y: object = None,
        *,
        callback: Callable[["EdgeGrafting"], object] | None = None,
        progress: bool = False,
    ) -> "EdgeGrafting":
        """Learn from scratch on a finite source (batches, or rows in memory: a matrix, table or
        data frame): count, then graft until max_edges or no edge passes (``y`` is ignored).
        ``progress``: a progress bar on stderr of the rows counted, then of the edges grafted
        (:mod:`streammn.progress_bar`)."""
        self._schema_for_fit(source)
        self._reset()
        in_memory = isinstance(source, np.ndarray) or table_of(source) is not None
        with progress_bar(progress, "counting pairs (grafting)") as bar:
            # (Data: rows in memory, or an iterable of batches)
            for batch in [cast(Rows, source)] if in_memory else cast("Iterable[Rows]", source):
                rows = self._validate(batch)
                self._sample(rows, self.stats.n_rows)
                self.stats.update(Validated(rows, self.schema))
                bar.update(len(rows))
        with progress_bar(progress, "grafting edges", unit="steps") as bar:

            def step(learner):
                bar.update(1)
                bar.set_postfix_str(f"{len(learner.edges):,} edges")
                if callback is not None:
                    callback(learner)

            self.optimise()
            self.graft(callback=step)
        self.updates += 1
        self.last_update_rows = self.stats.n_rows
        self._last_counts = np.asarray(self.stats.marginals.flat, dtype=np.int64).copy()
        return self

    # the model ----------------------------------------------------------------------------
    def learned_network(self):
        """The current MRF as a :class:`~streammn.network.model.MarkovNetwork` (pairwise
        features)."""
        if self._model is None:
            self._model = to_markov_network(self.schema, self.layout, self.model_theta)
        return self._model

    def pll_terms(self, rows: Rows) -> np.ndarray:
        """``log P(x_i | x_-i)`` of the current model for every row and variable."""
        return pseudo_loglik(self.layout, self.model_theta, self.schema.rows_of(rows))

    # serialisation ------------------------------------------------------------------------
    def _state(self) -> tuple[dict, dict[str, np.ndarray]]:
        """Parameters, statistics, active set, weights, search state, RNG."""
        meta = {
            "format": FORMAT,
            "schema": self.schema.to_dict(),
            "params": self.settings(),
            "edges": [list(e) for e in self.edges],
            "strategy": self._strategy.get_state(),
            "rng": self.rng.bit_generator.state,
            "objective_value": self.objective_value,
            "converged": self.converged,
            "steps": self.steps,
            "rows_since_update": self.rows_since_update,
            "has_marginals": self._inference is not None,
            "updates": self.updates,
            "skipped": self.skipped,
            "last_update_rows": self.last_update_rows,
            "pending_update": self.pending_update,
        }
        arrays: dict[str, np.ndarray] = {
            "theta": self.theta,
            "refit_theta": self.refit_theta,
            "last_counts": self._last_counts,
            "stats": np.frombuffer(self.stats.to_bytes(), dtype=np.uint8),
        }
        if self._inference is not None and self._infer_from is not None:
            arrays["messages"] = self._infer_from
        return meta, arrays

    def _restore(self, meta: dict, arrays: dict) -> None:
        self.stats = OnDemandPairCounts.from_bytes(arrays["stats"].tobytes())
        self.rng.bit_generator.state = meta["rng"]
        edges = [(int(i), int(j)) for i, j in meta["edges"]]
        self.edges, self.active = edges, set(edges)
        self.layout = PairwiseLayout(self.cards, np.array(edges, np.int64).reshape(-1, 2))
        self.theta = arrays["theta"]
        if self.theta.shape != (self.layout.size,):
            raise GraftingStateError("weights do not match the active set")
        self._strategy.set_state(meta["strategy"])
        self.objective_value = float(meta["objective_value"])
        self.converged, self.steps = bool(meta["converged"]), int(meta["steps"])
        self.rows_since_update = int(meta["rows_since_update"])
        self.updates, self.skipped = int(meta["updates"]), int(meta["skipped"])
        self.last_update_rows = int(meta["last_update_rows"])
        self.pending_update = bool(meta["pending_update"])
        self._last_counts = np.asarray(arrays["last_counts"], dtype=np.int64)
        self.refit_theta = arrays["refit_theta"]
        if self.refit_theta.shape != self.theta.shape:
            raise GraftingStateError("refit weights do not match the active set")
        if meta["has_marginals"]:
            self._infer(arrays.get("messages"), self.refit_theta if self.score_refit else None)
