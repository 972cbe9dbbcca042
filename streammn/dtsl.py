"""DTSL: a probabilistic decision tree per variable, learned from batches: a dependency network.

Lowd & Davis's DTSL (paper 000, Section III) learns for every variable ``X_i`` a decision tree
predicting it from all the others; the trees form a dependency network and their paths become
conjunctive features. :class:`DTSL` grows all trees at once, either

- ``mode='exact'``: greedy LEARNTREE, level by level, one pass over a re-iterable source per
  level (:mod:`streammn.trees.exact`); equals in-memory greedy DTSL on the same rows; or
- ``mode='hoeffding'``: one pass over a stream, splits decided by the Hoeffding bound
  (:mod:`streammn.trees.hoeffding`); ``partial_fit`` takes one batch at a time.

Split rule (both modes): the gain is the increase in the training log-likelihood of the target
at the leaf, leaves smoothed as ``(count + prior/d) / (total + prior)`` (Libra's DTSL); a test
needs ``min_count`` rows on each side. Whether the gain is enough is decided by
:mod:`streammn.trees.criterion`: by default (``kappa='auto'``) a likelihood-ratio test corrected
for the candidates tried and, on a stream, for the looks already taken at the leaf, so the rule
needs no tuning to the data size and trees stop growing on noise; with a number, Libra's fixed
structure prior ``P(S) ∝ kappa^parameters`` (gain above ``(d - 1) * -ln(kappa)``).
"""

from __future__ import annotations

import math
from typing import cast

import numba
import numpy as np

from streammn.stream.source import Source, as_source
from streammn.dn import DependencyNetwork
from streammn.dn.conversion import dn2mn
from streammn.features import FeatureSet
from streammn.schema import Rows, Schema, SchemaError
from streammn.trees.criterion import AUTO, DEFAULT_ALPHA, DEFAULT_MIN_GAIN_PER_ROW
from streammn.trees.exact import CountPass, SamplingPasses, SourcePasses, grow_level_wise
from streammn.trees.to_features import forest_features
from streammn.trees.forest import Forest
from streammn.trees.adaptive import DETECTORS, EVENTS, DriftAdapter
from streammn.trees.decay import ForgettingGrower, halving_interval
from streammn.trees.missing import recount_observed
from streammn.trees.growth import cardinalities_of, extend_state, first_new_value
from streammn.trees.hoeffding import HoeffdingGrower
from streammn.trees.settings import TreeSettings
from streammn.trees.budget import MemoryPlan
from streammn.trees.leaf_stats import LeafStats
from streammn.errors import DTSLError, DTSLStateError
from streammn.learner import WEIGHTS_PARAM, Data, StructureLearner
from streammn.logistic.choice import Choice, choice_rows, forgetting_period, regressions_win
from streammn.logistic.coding import Coding
from streammn.logistic.conditionals import LogisticConditionals, batch_fit_affordable
from streammn.network.model import MarkovNetwork
from streammn.params import AUTOMATIC, NONE, Interval, OneOf, Param
from streammn.progress_bar import progress_bar

MODES = ("hoeffding", "exact")
CPDS = ("tree", "lr", "auto")
LOGISTIC_KEY = "logistic"  # the logistic conditionals' bytes in a saved state
CHOICE_KEY = "logistic_choice"  # cpd='auto': which variables use their regression
STATE_FORMAT = 1


class DTSL(StructureLearner):
    """Decision-tree structure learner producing a dependency network.

    Parameters
    ----------
    schema : Schema or None, default None
        The variables; one tree is learned per variable. A growing schema
        (:meth:`Schema.with_growth <streammn.schema.Schema.with_growth>`, Hoeffding mode)
        adds a new value at the row it first appears (:mod:`streammn.trees.growth`); the
        learner's ``schema`` is then the grown one. None: taken from the data
        (:mod:`streammn.learner`): ``fit`` infers it from all of its rows, ``partial_fit``
        from the first batch, growing after it (every variable of named or numbered states up
        to 255 states) unless ``cpd='lr'``; while it grows ``cpd='auto'`` keeps the trees.
    kappa : 'auto' or float, default 'auto'
        Split criterion. ``'auto'``: a split must pass a likelihood-ratio test at level
        ``split_alpha``, corrected for the candidates tried (and on a stream for the earlier
        looks at the leaf), so the penalty grows with the evidence needed and nothing has to be
        tuned to the data size (:mod:`streammn.trees.criterion`). A number in (0, 1]: Libra's
        fixed structure prior, a split must gain more than ``(d-1) * -ln(kappa)`` nats of
        training log-likelihood (smaller means smaller trees; Libra: 1e-4 .. 1).
    split_alpha : float, default 0.05
        With ``kappa='auto'``: the chance that a leaf whose target depends on none of the
        candidates ever splits (over the whole stream in Hoeffding mode).
    min_gain_per_row : float, default 1e-5
        With ``kappa='auto'``: the least a split must add to the average log-likelihood per row
        of the data seen so far (nats): its gain per row at the leaf times the share of rows
        reaching the leaf. Never binding on small data; on a long stream it lets trees converge
        instead of adding ever smaller significant splits.
    mode : {'hoeffding', 'exact'}, default 'hoeffding'
        One-pass streaming trees, or exact multi-pass level-wise trees (``fit`` only).
    grace_period : int, default 200
        Hoeffding: rows an active leaf must see between split attempts (river's default).
    delta : float, default 1e-7
        Hoeffding: allowed probability of choosing the wrong split (river's default).
    tau : float, default 0.05
        Hoeffding: tie threshold; split anyway once the bound is below it (river's default).
    max_depth : int or None, default None
        Depth limit of every tree; None for none (Libra).
    max_tree_leaves : int or None, default None
        Hoeffding: optional cap on the leaves of every tree (a tree at the cap stops collecting
        split statistics). Not needed to keep a model sane with ``kappa='auto'``; with a fixed
        ``kappa`` on a long stream it is, since that rule keeps finding small gains. Exact mode
        ignores it.
    max_leaves : int or None, default None
        Most leaves collecting split statistics at a time (Hoeffding: the least promising are
        deactivated; exact: a level with a larger frontier takes several passes). None derives
        it from ``memory_mb``.
    memory_mb : float, default 1024
        Memory budget. Hoeffding: the whole run above a fixed floor (interpreter, libraries,
        compiled kernels; ``benchmarks/results/memory_budget.md``), split by
        :class:`~streammn.trees.budget.MemoryPlan`: the rows in flight (batches are read and
        learned in pieces of at most :attr:`batch_rows` rows), the published weights' sample
        and its refinement, the regressions' sample and FTRL state, a snapshot cut in this
        process, the replay buffer, and the forest with its split statistics, which get what
        the others leave: as the trees grow fewer leaves (the most promising) keep collecting,
        and a forest that fills its share stops growing. A smaller budget gives fewer rows per
        batch, smaller samples, a shorter replay buffer and fewer collecting leaves, always as
        a function of the settings and schema (the progress line says what it holds back).
        Exact: the split statistics of a pass, and the memory for
        remembering each row's node between passes (4 bytes per row and variable, in this
        process or in each Dask worker; beyond it every pass routes rows from the roots).
    min_count : 'auto' or int, default 'auto'
        Rows a test needs on each side. ``'auto'``: 1 with ``kappa='auto'``, whose test already
        refuses splits the rows do not support (a larger floor only keeps small, pure groups
        of near-deterministic data unsplit: mushrooms' exact test PLL is -0.71 at 10, -0.42 at
        1); 10 with a fixed ``kappa`` (Libra's default).
    prior : float, default 1.0
        Total Dirichlet pseudo-count of a leaf, spread evenly over the target's ``d`` values:
        1.0 is Libra's ``(count + 1/d) / (total + 1)``; ``d`` gives the paper's alpha = 1.
    replay_rows : 'auto' or int, default 'auto'
        Hoeffding: keep the last ``replay_rows`` rows and seed every new leaf's statistics
        with those that reach it, so children do not start blind (0 = off, pure one-pass
        Hoeffding trees). ``'auto'``: up to 100,000 rows within a quarter of ``memory_mb``
        (sized at 5 bytes per row and variable, more than the rows, their value bitmaps and
        packed rows take; the budget counts what they take). Much better trees on short
        streams, at a CPU cost that
        grows with the buffer and the number of splits.
    n_threads : int or 'auto', default 'auto'
        Blocks of trees (or leaves) whose statistics are counted, replayed and scored in
        parallel (numba threads); ``'auto'``: numba's thread count (every core, or
        ``NUMBA_NUM_THREADS``). The result does not depend on it. A step runs in parallel only
        when it is big enough to gain (:data:`streammn.trees.leaf_stats.PARALLEL_NS`). On an idle
        2-core machine two threads run a one-pass 1M-row stream 26-30% faster than one at 100
        binary variables, more with more variables and values; with other jobs on the cores
        they measured about as fast as one thread, with more variable times
        (``benchmarks/results/dtsl_threads.md``). 1 leaves the other cores to other work.
    seed : int or None, default None
        Accepted for uniformity with streammn's other learners; DTSL is deterministic (ties
        go to the first candidate in variable order), so it does not change the result.
    drift : None or 'page-hinkley', default None
        Hoeffding: watch every tree's prequential log-loss with a one-sided change detector
        and, when a tree's loss rises, grow an alternate tree from the estimated change point
        and swap it in once it is better on the rows since (the Hoeffding Adaptive Tree
        scheme, :mod:`streammn.trees.adaptive`); other trees keep their statistics. A
        variable whose tree alarms restarts its logistic regression from the buffered rows
        since the change (``cpd``). Events:
        :meth:`drift_summary`.
    half_life : float or None, default None
        Hoeffding: forget old rows, halving every count every ``half_life`` rows (rounded up
        to a multiple of ``grace_period``; :mod:`streammn.trees.decay`); the logistic
        regressions' state halves with them (``cpd``). None or ``inf``: no forgetting.
    weights : {'refined', 'closed-form'}, default 'refined'
        The weights :meth:`to_markov_network` gives: ``'refined'`` keeps a uniform sample of
        the rows learned (:mod:`streammn.network.weight_sample`, at most 25,000 rows in an
        eighth of ``memory_mb``, up to 64 MB, with its fits' reach lists) and continues
        DN2MN's closed-form weights by pseudo-likelihood on it, kept only where they score the
        sample's held-out rows better (:mod:`streammn.network.published`: on near-
        deterministic data the closed form loses nats to the trees it came from);
        ``'closed-form'``: DN2MN's weights as they are (:meth:`learned_network`), no sample.
    cpd : {'tree', 'lr', 'auto'}, default 'auto'
        Each variable's conditional. ``'tree'``: its decision tree. ``'lr'``: an
        L1-regularised logistic regression on the indicators of the other variables, learned
        online (FTRL-Proximal, the penalty chosen per variable by prequential loss, late
        mini-batches thinned) and, when a finite source ends within the 25,000 rows a sample
        keeps, fitted to the batch optimum on them (up to about 300 binary variables, where
        the fit costs seconds; :mod:`streammn.logistic`). Exact mode fits the batch optimum
        on a uniform sample of up to 25,000 rows of the file (all of a shorter one), a sample
        the passes on Dask take as well (``count_pass``: the same model). ``'auto'``: the
        trees and the regressions both, each variable using whichever scores the sample's
        held-out rows better, chosen at rows 4,096 * 2**k and at the end of a finite source
        (:mod:`streammn.logistic.choice`). Regressions win on many weak pairwise effects
        (jester: published MN -48.63 test PLL against -49.88 with trees), trees on
        context-specific ones; ``'auto'`` is within 0.3% of the better of the two on every
        shared dataset (``benchmarks/results/cpds.md``). With ``half_life`` the regressions
        forget as the trees do (FTRL's squared-gradient sums halved at the trees' halvings, no
        batch fit) and ``'auto'`` chooses again every half-life or so on a sample leaning toward
        recent rows (:mod:`streammn.logistic.conditionals`). With ``drift`` a variable whose
        tree alarms restarts its regression, which relearns from the replay buffer's rows
        since the change and the rows after the alarm (no batch fit); ``'auto'`` keeps the
        trees under drift without a half-life (its sample would be of the whole stream).
        Regressions do not learn yet with a growing schema, missing values or a
        ``count_pass`` that cannot sample its rows: ``'auto'`` keeps the trees there and
        ``'lr'`` is refused; nor with ``'auto'`` beyond about 300 binary variables, where the
        batch fit is not made. ``'tree'`` is Libra's DTSL exactly.

    Examples
    --------
    Rows of a planted network with 9 edges, streamed in batches (Hoeffding), then learned
    exactly in passes; both give a Markov network through DN2MN:

    >>> from streammn.demo import planted_network
    >>> from streammn.dtsl import DTSL
    >>> from streammn.inference import sample
    >>> planted, planted_edges = planted_network(8, seed=0)
    >>> rows = sample(planted, 2000, seed=1)
    >>> learner = DTSL(planted.schema, kappa=0.01, grace_period=50)
    >>> for start in range(0, 2000, 500):
    ...     learner = learner.partial_fit(rows[start:start + 500])
    >>> learner.rows_seen
    2000
    >>> model = learner.to_markov_network()
    >>> len(model.edges() & planted_edges), round(model.pll(rows), 3)
    (5, -4.493)
    >>> exact = DTSL(planted.schema, mode="exact", kappa=0.01).fit(rows)
    >>> exact.n_passes, exact.tree_stats()["n_leaves"].tolist()
    (6, [4, 16, 4, 4, 4, 4, 2, 4])
    >>> round(exact.to_markov_network().pll(rows), 3), round(planted.pll(rows), 3)
    (-4.065, -4.065)

    Built without a schema, a learner takes it from the data (``fit``: from all of it):

    >>> DTSL(mode="exact", kappa=0.01).fit(rows).schema == planted.schema
    True
    """

    converts_in_writer = True  # DN2MN runs on serial kernels in a forked snapshot writer
    param_error = DTSLError
    state_format, state_error = STATE_FORMAT, DTSLStateError
    parameters = {
        "kappa": Param(
            AUTOMATIC | Interval(float, 0, 1, "right"),
            "split criterion: 'auto' tests each split for significance, corrected "
            "for the candidates and the looks at a leaf, so trees grow with the "
            "evidence and stop on noise at any data size; a number in (0, 1] is "
            "Libra's fixed structure prior per added parameter (smaller gives "
            "smaller trees)",
            flag="--kappa",
        ),
        "mode": Param(
            OneOf(*MODES),
            "hoeffding: one pass, streaming; exact: level-wise passes over a finite source",
            flag="--mode",
        ),
        "grace_period": Param(
            Interval(int, 1),
            "hoeffding: rows reaching a leaf between split attempts",
            flag="--grace-period",
        ),
        "delta": Param(
            Interval(float, 0, 1, "neither"), "hoeffding: bound confidence", flag="--delta"
        ),
        "tau": Param(Interval(float, 0), "hoeffding: tie threshold", flag="--tau"),
        "max_depth": Param(NONE | Interval(int, 0), "depth limit of every tree (default: none)"),
        "max_tree_leaves": Param(
            NONE | Interval(int, 1),
            "hoeffding: optional cap on the "
            "leaves of every tree; not needed with kappa 'auto' "
            "(default: no cap)",
            flag="--max-tree-leaves",
        ),
        "max_leaves": Param(
            NONE | Interval(int, 1),
            "most leaves collecting split statistics "
            "at once, over all trees (default: from the memory budget)",
            flag="--max-leaves",
        ),
        "memory_mb": Param(
            Interval(float, 0, None, "neither"),
            "memory budget of the run above a fixed floor (interpreter, libraries, "
            "kernels), in MB: batches, samples, replay buffer, trees and split statistics; "
            "when it binds, smaller batches, samples and replay buffer and fewer (the most "
            "promising) leaves collecting statistics",
            flag="--memory-mb",
        ),
        "min_count": Param(AUTOMATIC | Interval(int, 1), "rows a test needs on each side"),
        "prior": Param(Interval(float, 0, None, "neither"), "Dirichlet pseudo-count of a leaf"),
        "replay_rows": Param(
            AUTOMATIC | Interval(int, 0), "hoeffding: recent rows replayed into new leaves (0: off)"
        ),
        "n_threads": Param(
            AUTOMATIC | Interval(int, 1),
            "parallel blocks of trees; does not change the result",
            resume=True,
        ),
        "seed": Param(
            NONE | Interval(int, 0),
            "accepted for uniformity; DTSL is deterministic",
            flag="--seed",
            resume=True,
        ),
        "split_alpha": Param(
            Interval(float, 0, 0.5, "neither"),
            "with kappa 'auto': chance that a leaf with nothing to learn ever splits",
            flag="--split-alpha",
        ),
        "min_gain_per_row": Param(
            Interval(float, 0), "with kappa 'auto': least gain per row of the data seen for a split"
        ),
        "drift": Param(
            NONE | OneOf(*DETECTORS),
            "hoeffding: detect drift per tree "
            "(prequential log-loss, one-sided CUSUM) and swap in alternate trees "
            "grown since the change; an alarmed variable's regression restarts "
            "(default: off)",
            flag="--drift",
        ),
        "half_life": Param(
            NONE | Interval(float, 1),
            "hoeffding: forget old rows, halving all counts (and the regressions' FTRL "
            "state) every this many rows (default: never)",
            flag="--half-life",
        ),
        "weights": WEIGHTS_PARAM,
        "cpd": Param(
            OneOf(*CPDS),
            "each variable's conditional: tree (a decision tree), lr (L1 logistic "
            "regression on the other variables, learned online, the batch optimum when "
            "a file ends within the rows kept) or "
            "auto (per variable, whichever scores the sample's held-out rows better)",
            flag="--cpd",
        ),
    }

    def __init__(
        self,
        schema: Schema | None = None,
        kappa: float | str = AUTO,
        mode: str = "hoeffding",
        grace_period: int = 200,
        delta: float = 1e-7,
        tau: float = 0.05,
        max_depth: int | None = None,
        max_tree_leaves: int | None = None,
        max_leaves: int | None = None,
        memory_mb: float = 1024.0,
        min_count: int | str = AUTO,
        prior: float = 1.0,
        replay_rows: int | str = AUTO,
        n_threads: int | str = AUTO,
        seed: int | None = None,
        split_alpha: float = DEFAULT_ALPHA,
        min_gain_per_row: float = DEFAULT_MIN_GAIN_PER_ROW,
        drift: str | None = None,
        half_life: float | None = None,
        weights: str = "refined",
        cpd: str = "auto",
    ):
        self._check_params(locals())
        if mode == "exact" and (
            drift is not None or half_life is not None and not math.isinf(half_life)
        ):
            raise DTSLError(
                "drift and half_life apply to mode='hoeffding' (exact mode learns "
                "a fixed, finite source)"
            )
        self.drift = drift
        self.half_life = None if half_life is None or math.isinf(half_life) else float(half_life)
        self.kappa = AUTO if kappa == AUTO else float(kappa)
        self.split_alpha = float(split_alpha)
        self.min_gain_per_row = float(min_gain_per_row)
        self.mode = mode
        self.grace_period = int(grace_period)
        self.delta = float(delta)
        self.tau = float(tau)
        self.max_depth = None if max_depth is None else int(max_depth)
        self.max_leaves = None if max_leaves is None else int(max_leaves)
        self.max_tree_leaves = None if max_tree_leaves is None else int(max_tree_leaves)
        self.memory_mb = float(memory_mb)
        self.min_count = min_count if min_count == AUTO else int(min_count)
        self.prior = float(prior)
        self.replay_rows = replay_rows if replay_rows == AUTO else int(replay_rows)
        self.n_threads = n_threads if n_threads == AUTO else int(n_threads)
        self.seed = seed
        self.weights = weights
        self.cpd = cpd
        self._init_schema(schema)

    def _check_schema(self, schema: Schema) -> None:
        if self.cpd == "lr" and not _regressions_apply(schema):
            raise DTSLError(
                "cpd='lr' learns with a fixed schema and no missing values for now; use "
                "cpd='tree' or 'auto' (trees, there) for those"
            )
        if self.mode == "exact" and schema.grows:
            raise DTSLError(
                "a growing schema (new values mid-stream) applies to "
                "mode='hoeffding'; exact mode learns a finite source whose "
                "cardinalities can be declared"
            )

    @property
    def adds_values(self) -> bool:
        """A schema inferred by ``partial_fit`` grows, except under ``cpd='lr'``, whose
        regressions learn over a fixed schema (``'auto'`` keeps the trees while it grows)."""
        return self.cpd != "lr"

    @property
    def threads(self) -> int:
        """The parallel blocks ``n_threads`` stands for on this machine."""
        return numba.get_num_threads() if self.n_threads == AUTO else cast(int, self.n_threads)

    @property
    def leaf_budget(self) -> int:
        """Leaves that may collect split statistics at once (``max_leaves`` or from memory_mb)."""
        if self._grower is not None:
            return self._grower.leaf_budget
        if self.max_leaves is not None:
            return self.max_leaves
        slot = LeafStats.slot_bytes(self.forest, np.int64)
        return max(1, int(self.memory_mb * 2**20 // slot))

    @property
    def rows_per_side(self) -> int:
        """Rows a test needs on each side: ``min_count``, or for ``'auto'`` 1 with the
        significance test and 10 (Libra's) with a fixed ``kappa``."""
        if self.min_count != AUTO:
            return cast(int, self.min_count)
        return 1 if self.kappa == AUTO else 10

    @property
    def replay_size(self) -> int:
        """Rows the replay buffer holds: ``replay_rows``, or for ``'auto'`` up to 100,000 rows
        within a quarter of the memory budget, counting 5 bytes per variable and row (the sizing
        rule; a row and its value bitmaps take ``1 + max_card / 8``)."""
        return self.memory_plan.replay_rows

    def _make_grower(
        self, forest: Forest | None = None, state: dict | None = None
    ) -> HoeffdingGrower:
        """A grower of ``forest`` (default: the learner's) with the learner's settings; a
        forgetting one when a half-life is set."""
        grower = HoeffdingGrower if self.half_life is None else ForgettingGrower
        forest = self.forest if forest is None else forest
        return grower(forest, self.tree_settings, self.threads, state=state)

    @property
    def tree_settings(self) -> TreeSettings:
        """The settings every grower reads, automatic values resolved."""
        return TreeSettings(
            kappa=self.kappa,
            split_alpha=self.split_alpha,
            min_gain_per_row=self.min_gain_per_row,
            min_count=self.rows_per_side,
            max_depth=self.max_depth,
            max_leaves=self.max_leaves,
            max_tree_leaves=self.max_tree_leaves,
            grace_period=self.grace_period,
            delta=self.delta,
            tau=self.tau,
            replay_rows=self.replay_size,
            # one pass: the trees' share (streammn.trees.budget); exact: all of it, per pass
            memory_mb=self.memory_plan.trees_mb if self.mode == "hoeffding" else self.memory_mb,
            half_life=self.half_life,
        )

    def _make_adapter(self, state: dict | None = None) -> DriftAdapter | None:
        if self.drift is None:
            return None
        return DriftAdapter(
            self._grower, lambda forest, st: self._make_grower(forest, st), state=state
        )

    @property
    def forest_schema(self) -> Schema:
        """The trees' schema: the learner's at its current cardinalities (a growing schema's
        trees, features and models are over the values added so far)."""
        return self.schema.fixed()

    def _reset(self) -> None:
        self.forest = Forest(self.forest_schema, prior=self.prior)
        self.rows_seen = 0
        self.n_passes = 0
        self._grower = None
        self._drift = None
        regressions = self.cpd != "tree" and _regressions_apply(self.schema)
        # drift alone: 'auto' would choose on a sample of the whole stream, mostly from before
        # a change; with a half-life the sample is the recent rows' (streammn.logistic.choice)
        if self.cpd == "auto" and self.drift is not None and self.half_life is None:
            regressions = False
        # beyond the batch fit's reach the regressions would be FTRL's, judged on held-out rows
        # they learned from: 'auto' keeps the trees there
        if self.cpd == "auto" and not batch_fit_affordable(Coding(self.schema)):
            regressions = False
        self.memory_plan = MemoryPlan.of(
            self.schema.ceiling(),
            self.memory_mb,
            self.replay_rows,
            weights=self.weights == "refined",
            regressions=regressions,
        )
        self._new_weight_sample()
        self._logistic = (
            LogisticConditionals(
                self.schema,
                self.memory_plan.logistic_mb,
                exact=self.mode == "exact",
                interval=self._halving_interval,
                restarts=self.drift is not None,
            )
            if regressions
            else None
        )
        self._choice = Choice(self.schema.n_vars) if regressions and self.cpd == "auto" else None
        if self.mode == "hoeffding":
            self._grower = self._make_grower()
            self._drift = self._make_adapter()

    # learning -------------------------------------------------------------------------------
    def _validate(self, batch) -> np.ndarray:
        return self.schema.rows_of(batch, row_offset=self.rows_seen)

    def partial_fit(self, batch: Rows, y: object = None) -> "DTSL":
        """Learn from one batch (Hoeffding mode): a :class:`~streammn.stream.source.Batch` or a
        matrix.

        The batch is validated first; a :class:`~streammn.schema.SchemaError` leaves the model
        untouched.
        """
        if self.mode != "hoeffding":
            raise DTSLError(
                "partial_fit needs mode='hoeffding'; exact mode learns with "
                "fit(source) over a re-iterable source"
            )
        self._schema_for_batch(batch)
        rows = self._validate(batch)
        step = self.memory_plan.batch_rows  # pieces within the budget: the model is the same
        for start in range(0, rows.shape[0], step):
            self._learn_piece(rows[start : start + step])
        return self

    @property
    def weight_sample_mb(self) -> float:
        """The published weights' sample is sized by its share of ``memory_mb``."""
        return self.memory_plan.weight_mb

    @property
    def _halving_interval(self) -> int | None:
        """Rows between halvings under forgetting (:mod:`streammn.trees.decay`), else None."""
        if self.half_life is None:
            return None
        return halving_interval(self.half_life, self.grace_period)

    def _learn_piece(self, rows: np.ndarray) -> None:
        """Learn validated ``rows``, making the choices of conditionals due among them."""
        if self._choice is not None:  # choose at fixed rows (streammn.logistic.choice)
            interval = self._halving_interval
            every = None if interval is None else forgetting_period(interval)
            for at in choice_rows(self.rows_seen, self.rows_seen + rows.shape[0], every):
                head, rows = np.split(rows, [at - self.rows_seen])
                self._learn_rows(head)
                self._choice.at_rows = regressions_win(self.forest, self._logistic)
        self._learn_rows(rows)

    @property
    def batch_rows(self) -> int:
        """Rows a batch should hold at most to stay within ``memory_mb`` (the engine reads
        batches of at most this many; longer ones are learned in pieces of it)."""
        return self.memory_plan.batch_rows

    def memory_binding(self) -> list[str]:
        """What the memory budget holds back now (:meth:`MemoryPlan.binding
        <streammn.trees.budget.MemoryPlan.binding>`, and the leaves denied statistics):
        empty while it binds nothing."""
        if self.mode != "hoeffding":
            return []
        out = self.memory_plan.binding()
        if self.max_leaves is None and self._grower is not None and self._grower.budget_binds:
            out.append(f"leaves collecting {self._grower.stats.n_active:,}")
        return out

    def _learn_rows(self, rows: np.ndarray) -> None:
        """Learn validated ``rows``: the samples, the regressions, the trees."""
        self._sample(rows, self.rows_seen)
        if self._logistic is not None and self._drift is not None:
            self._learn_restarting(rows)
            return
        if self._logistic is not None:
            self._logistic.update(rows, self.rows_seen)
        while self.schema.grows:  # a new value: grow at its row (streammn.trees.growth)
            row, cards = first_new_value(self.schema, rows)
            if row is None:
                break
            self._learn(rows[:row])
            self._grow_schema(self.schema.grown_to(cards))
            rows = rows[row:]
        self._learn(rows)

    def _learn_restarting(self, rows: np.ndarray) -> None:
        """Under drift, ``rows`` a monitoring period at a time, the regressions first: a
        variable whose tree alarmed at the period's end restarts its regression there,
        relearning it from the replay buffer's rows since the estimated change point
        (:mod:`streammn.logistic.online`), at a stream position, so batch cuts do not
        matter. (No growing schema here: regressions need a fixed one.)"""
        assert self._drift is not None and self._logistic is not None  # see _learn_rows
        period, start = self._drift.period, 0
        while start < rows.shape[0]:
            stop = min(rows.shape[0], start + period - self.rows_seen % period)
            piece = rows[start:stop]
            self._logistic.update(piece, self.rows_seen)
            seen = self._drift.events.shape[0]
            self._learn(piece)
            events = self._drift.events[seen:]
            alarmed = events[events[:, 2] == EVENTS.index("alarm"), 1]
            if alarmed.size:  # relearned from the buffered rows since the change
                self._logistic.online.restart(alarmed, self._drift.rows_since_change(alarmed))
            start = stop

    def _learn(self, rows: np.ndarray) -> None:
        assert self._grower is not None  # built with the schema
        (self._drift or self._grower).learn(rows)
        self.rows_seen = self._grower.rows_seen

    def _grow_schema(self, schema: Schema) -> None:
        """Continue under the grown ``schema``: the state rewritten with zero counts for the
        new values and loaded as on resume (streammn.trees.growth)."""
        _, arrays = self.get_state()
        self._schema = schema
        self._load(extend_state(arrays, self.forest.schema, schema))

    def fit(
        self,
        source: Data,
        y: object = None,
        *,
        count_pass: CountPass | None = None,
        progress: bool = False,
    ) -> "DTSL":
        """Learn from scratch from ``source`` and return self (``y`` is ignored: a Markov
        network has no target; the name is scikit-learn's).

        ``source`` is a :class:`~streammn.stream.source.Source`, or a matrix, table or data frame
        (in an :class:`~streammn.connectors.array.ArraySource`); Hoeffding mode also takes any
        iterable of batches. Exact mode rewinds the source once per tree level, unless
        ``count_pass`` makes the passes elsewhere
        (:class:`streammn.connectors.distributed.DaskPasses`: on a Dask cluster, over the partitions
        of ``source``'s files); the trees are the same, and so are the logistic conditionals
        when ``count_pass`` is a :class:`~streammn.trees.exact.SamplingPasses` (DaskPasses is):
        their sample is taken there and merges into the one a local pass takes
        (:mod:`streammn.logistic.sample`), and the batch fit on it is made here; another
        ``count_pass`` gets trees only (``cpd='auto'``). ``progress``: a progress bar on stderr
        (:mod:`streammn.progress_bar`), of the rows learned (Hoeffding mode) or the levels grown
        (exact mode), then of the regressions' batch fits where they are made.
        """
        if count_pass is not None and self.mode != "exact":
            raise DTSLError("count_pass applies to mode='exact' only")
        if (
            count_pass is not None
            and self.cpd == "lr"
            and not isinstance(count_pass, SamplingPasses)
        ):
            raise DTSLError(
                "cpd='lr' fits its regressions on a sample of the rows; this count_pass "
                f"({type(count_pass).__name__}) cannot sample them (a SamplingPasses, "
                "e.g. DaskPasses, can): learn with cpd='tree' or 'auto' (trees)"
            )
        if count_pass is not None and self.weights == "refined":
            raise DTSLError(
                "weights='refined' samples the rows in this process; with passes made "
                "elsewhere (count_pass, e.g. Dask) learn with weights='closed-form'"
            )
        self._schema_for_fit(source)
        if (
            count_pass is not None
            and self.cpd == "lr"
            and not batch_fit_affordable(Coding(self.schema))
        ):
            raise DTSLError(
                "cpd='lr' beyond the batch fit's reach (about 300 binary variables) "
                "learns FTRL in one pass over the rows in this process; with passes made "
                "elsewhere (count_pass, e.g. Dask) learn with cpd='tree' or 'auto' (trees)"
            )
        source = as_source(source, self.schema)
        if isinstance(source, Source) and not self.schema.same_stream(source.schema):
            raise SchemaError(
                f"source schema {source.schema!r} differs from the learner's {self.schema!r}",
                source=source.describe(),
            )
        self._reset()
        if count_pass is not None and not isinstance(count_pass, SamplingPasses):
            self._logistic = self._choice = None  # the rows cannot be sampled: trees
        elif count_pass is not None and self._logistic is not None:
            count_pass.offer_rows(self._logistic.sample)  # the first pass's sample, elsewhere
        if self.mode == "hoeffding":
            if isinstance(source, Source):
                source.rewind()
            with progress_bar(progress, "learning DTSL") as bar:
                for batch in source:
                    self.partial_fit(batch)
                    bar.update(len(batch))  # type: ignore[arg-type]  # (a batch of a source)
                self.n_passes = 1
                self._finish(bar)
            return self
        if not isinstance(source, Source) or not source.rewindable:
            raise DTSLError(
                "exact mode needs a re-iterable connectors Source (one pass per "
                "tree level), e.g. ArraySource or a file source"
            )
        with progress_bar(progress, "growing exact DTSL", unit="levels") as bar:

            def level_done(level: int, leaves: int) -> None:
                bar.update(1)
                bar.set_postfix_str(f"level {level}: {leaves:,} leaves counted")

            self.n_passes = grow_level_wise(
                self.forest,
                source,
                self.tree_settings,
                self.leaf_budget,
                self.threads,
                count_pass=count_pass
                or SourcePasses(
                    source, int(self.memory_mb * 2**20), on_first_pass=self._first_pass
                ),
                on_pass=level_done,
            )
            self.rows_seen = int(self.forest.counts[self.forest.roots].sum(axis=1).max())
            if self.forest.observed is not None:  # missing mode: one more pass (trees.missing)
                source.rewind()
                recount_observed(self.forest, (batch.rows for batch in source))
                self.n_passes += 1
            self._finish(bar)
        return self

    def _first_pass(self, rows: np.ndarray, first: int) -> None:
        """Exact mode's first pass: the rows into the samples and the online logistic
        conditionals (the batch fit comes at the end: :meth:`finish`)."""
        self._sample(rows, first)
        if self._logistic is not None:
            self._logistic.update(rows, first)

    def finish(self) -> bool:
        """Bring every conditional up to the rows learned: a finite source has ended (``fit``
        calls it; the engine at the end of a finite source). Trees are always up to date; the
        logistic conditionals get the batch optimum when their sample holds every row
        (:mod:`streammn.logistic.conditionals`), and with ``cpd='auto'`` each variable
        chooses again between them (:mod:`streammn.logistic.choice`). Whether the model
        changed."""
        return self._finish()

    def _finish(self, bar=None) -> bool:
        """:meth:`finish`; ``bar``: a progress bar that counts the regressions' batch fits."""
        if self._logistic is None:
            return False
        fitted = self._logistic.finish(bar)
        if self._choice is None:
            return fitted
        mask = regressions_win(self.forest, self._logistic)
        return self._choice.finish(mask, self.rows_seen) or fitted

    def learn_many(self, rows: Rows) -> "DTSL":
        """river-style alias of :meth:`partial_fit`."""
        return self.partial_fit(rows)

    # results --------------------------------------------------------------------------------
    def features(self, method: str = "default") -> list[FeatureSet]:
        """One :class:`~streammn.features.FeatureSet` per tree (paper Section III.B
        methods)."""
        return forest_features(self.forest, method)

    def to_dependency_network(self, features: str = "default") -> DependencyNetwork:
        """The current trees as a :class:`~streammn.dn.DependencyNetwork`.

        With ``features='default'`` each CPD is its tree's DEFAULT features and the DN keeps a
        frozen copy of the trees for fast scoring; other methods give the structure only (their
        weights, node log-probabilities, are starting values for weight learning).
        """
        cpds = self.features(features)
        trees = None
        if features.lower() == "default":
            trees = Forest.from_state(self.forest.schema, self.prior, self.forest.get_state())
        logistic = self.logistic_variables()
        if features.lower() != "default" or not logistic.any():
            return DependencyNetwork(self.forest.schema, cpds, trees=trees)
        counts = DependencyNetwork(self.forest.schema, cpds, trees=trees).marginal_counts()
        assert self._logistic is not None  # some variables are logistic
        regressions = self._logistic.cpds()
        for i in np.flatnonzero(logistic):
            cpds[i] = regressions[i]
        return DependencyNetwork(self.forest.schema, cpds, counts=counts)

    def logistic_variables(self) -> np.ndarray:
        """Which variables' conditionals are logistic regressions (a boolean mask): none with
        ``cpd='tree'`` or before the first fit, all with ``'lr'``; with ``'auto'`` those whose
        regression scored the held-out rows of its sample better than the tree did, at the
        last choice (:mod:`streammn.logistic.choice`: at rows 4,096 * 2**k and at the end of
        a finite source)."""
        n = self.schema.n_vars
        if self._logistic is None or not self._logistic.fitted:
            return np.zeros(n, dtype=bool)
        if self._choice is None:  # 'lr'
            return np.ones(n, dtype=bool)
        return self._choice.current(self.rows_seen).copy()

    def learned_network(self) -> MarkovNetwork:
        """DN2MN of the current trees with the default base and orderings (product of the
        marginals counted in the trees, all rotations of two opposite orders): the closed
        form that :meth:`to_markov_network` refines."""
        return dn2mn(self.to_dependency_network())

    def pll_terms(self, rows: Rows) -> np.ndarray:
        """``log P(x_i | x_-i)`` of the current trees for every row and variable, straight from
        the leaves (no feature generation): what the engine's prequential score uses. With a
        growing schema, a value not added yet gets the leaf's prior share (trees.growth)."""
        rows = self.schema.rows_of(rows)
        if self.schema.grows:
            return self.forest.leaf_log_prob(rows, cardinalities_of(self.schema, rows))
        terms = self.forest.leaf_log_prob(rows)
        logistic = np.flatnonzero(self.logistic_variables())
        if logistic.size:
            assert self._logistic is not None  # some variables are logistic
            terms[:, logistic] = self._logistic.log_conditionals(rows, logistic)
        return terms

    def tree_stats(self) -> dict:
        """Per-tree sizes: ``n_leaves``, ``depth``, ``n_nodes`` (arrays over variables)."""
        f = self.forest
        return {
            "n_leaves": f.n_leaves(),
            "depth": f.depths(),
            "n_nodes": 2 * f.n_leaves() - 1,
            "active_leaves": 0 if self._grower is None else self._grower.stats.n_active,
        }

    def conditionals(self) -> dict | None:
        """With ``cpd`` 'lr' or 'auto': the variables whose conditional is a logistic
        regression (``lr``) and a tree (``tree``), by name."""
        if self.cpd == "tree":
            return None
        names = np.array(self.schema.names)
        logistic = self.logistic_variables()
        return {"lr": names[logistic].tolist(), "tree": names[~logistic].tolist()}

    def drift_summary(self) -> dict | None:
        """Drift events so far (alarms, swaps, drops, the trees under alternation, the last
        events) when drift adaptation is on, else None."""
        return None if self._drift is None else self._drift.summary()

    def leaf_rows(self, i: int) -> np.ndarray:
        """Rows counted at each leaf of tree ``i``."""
        return self.forest.leaf_rows(i)

    # state ----------------------------------------------------------------------------------
    def get_state(self) -> tuple[dict, dict[str, np.ndarray]]:
        """Full learner state as (JSON-able metadata, plain numpy arrays)."""
        meta = {
            "format": STATE_FORMAT,
            "schema": self.schema.to_dict(),
            "params": self.settings(),
            "rows_seen": self.rows_seen,
            "n_passes": self.n_passes,
        }
        arrays = self.forest.get_state()
        if self._grower is not None:
            arrays.update(self._grower.get_state())
        if self._drift is not None:
            arrays.update(self._drift.get_state())
        if self._logistic is not None:
            arrays[LOGISTIC_KEY] = np.frombuffer(self._logistic.to_bytes(), dtype=np.uint8)
        if self._choice is not None:
            arrays[CHOICE_KEY] = self._choice.to_array()
        return meta, arrays

    def _restore(self, meta: dict, arrays: dict) -> None:
        if self._logistic is not None:
            self._logistic = LogisticConditionals.from_bytes(
                self.schema, arrays.pop(LOGISTIC_KEY).tobytes()
            )
        if self._choice is not None:
            self._choice = Choice.from_array(arrays.pop(CHOICE_KEY), self.schema.n_vars)
        self._load(arrays)
        self.rows_seen = int(meta["rows_seen"])
        self.n_passes = int(meta["n_passes"])

    def _load(self, arrays: dict) -> None:
        """Trees and growth state from state ``arrays`` over the learner's schema."""
        self.forest = Forest.from_state(self.forest_schema, self.prior, arrays)
        if self.mode == "hoeffding":
            self._grower = self._make_grower(state=arrays)
            self._drift = self._make_adapter(state=arrays)

    def _state(self) -> tuple[dict, dict[str, np.ndarray]]:
        return self.get_state()

    def equals(self, other: "DTSL") -> bool:
        """Same parameters and identical state (trees, counts, statistics, weight sample)."""
        (ma, a), (mb, b) = self.get_state(), other.get_state()
        samples = [
            None if s is None else s.to_bytes() for s in (self._weight_sample, other._weight_sample)
        ]
        return (
            ma == mb
            and a.keys() == b.keys()
            and all(np.array_equal(a[k], b[k]) for k in a)
            and samples[0] == samples[1]
        )


def _regressions_apply(schema: Schema) -> bool:
    """Whether logistic conditionals learn over ``schema``: not yet with a growing schema or
    missing values (``cpd='auto'`` keeps the trees there)."""
    return not schema.grows and not schema.missing
