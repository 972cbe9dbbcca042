"""DTSL: one probabilistic decision tree per variable, learned from batches, as a dependency network.

Lowd & Davis's DTSL (paper 000, Section III) learns for every variable ``X_i`` a decision tree
predicting it from all the others; the trees form a dependency network and their paths become
conjunctive features. :class:`DTSL` grows all trees at once, either

- ``mode='exact'``: greedy LEARNTREE, level by level, one pass over a re-iterable source per
  level (:mod:`streammn.trees.exact`); equals in-memory greedy DTSL on the same rows; or
- ``mode='hoeffding'``: one pass over a stream, splits decided by the Hoeffding bound
  (:mod:`streammn.trees.hoeffding`); ``partial_fit`` takes one batch at a time.

Split rule (both modes, Libra's DTSL defaults): the gain is the increase in the training
log-likelihood of the target at the leaf, leaves smoothed as ``(count + prior/d) / (total +
prior)``; a test needs ``min_count`` rows on each side; a split is taken when the gain exceeds
``(d - 1) * -ln(kappa)``, the structure prior ``P(S) ∝ kappa^parameters``.
"""

from __future__ import annotations

import io
import json
import numpy as np

from connectors.array import ArraySource
from connectors.base import Batch, Source
from streammn.dn import DependencyNetwork
from streammn.schema import Schema, SchemaError
from streammn.trees.exact import grow_level_wise
from streammn.trees.features import forest_features
from streammn.trees.forest import Forest
from streammn.trees.hoeffding import STATS_DTYPE, HoeffdingGrower
from streammn.trees.stats import LeafStats
from streammn.errors import SettingsError

MODES = ("hoeffding", "exact")
STATE_FORMAT = 1


class DTSLError(SettingsError):
    """A DTSL setting or call that cannot work (bad parameter, wrong mode, unusable source)."""


class DTSL:
    """Decision-tree structure learner producing a dependency network.

    Parameters
    ----------
    schema : Schema
        The variables; one tree is learned per variable.
    kappa : float, default 0.1
        Structure prior in (0, 1]: a split must gain more than ``(d-1) * -ln(kappa)`` nats of
        training log-likelihood. Smaller means smaller trees (Libra: 1e-4 .. 1).
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
    max_tree_leaves : int or None, default 64
        Hoeffding: most leaves a tree grows. On a long stream the split test keeps finding
        small gains (once the bound drops below ``tau`` any gain above the prior splits), so
        without a cap trees, the converted model and snapshots grow with the stream. A tree at
        the cap stops collecting split statistics; its leaves keep updating their
        distributions. None for no cap. Exact mode (a finite dataset) ignores it.
    max_leaves : int or None, default None
        Memory budget: most leaves collecting split statistics at a time (Hoeffding: the least
        promising are deactivated; exact: a level with a larger frontier takes several passes).
        None derives it from ``memory_mb``.
    memory_mb : float, default 256
        Budget for the split statistics when ``max_leaves`` is None; in exact mode also for
        remembering each row's node between passes (4 bytes per row and variable, in this
        process or in each Dask worker; beyond it every pass routes rows from the roots).
    min_count : int, default 10
        Rows a test needs on each side (Libra's default).
    prior : float, default 1.0
        Total Dirichlet pseudo-count of a leaf, spread evenly over the target's ``d`` values:
        1.0 is Libra's ``(count + 1/d) / (total + 1)``; ``d`` gives the paper's alpha = 1.
    replay_rows : int, default 0
        Hoeffding: keep the last ``replay_rows`` rows and seed every new leaf's statistics
        with those that reach it (0 = off, pure one-pass Hoeffding trees). Bounded memory
        (``replay_rows * n_vars`` bytes); much better trees on short streams, at a CPU cost
        that grows with the buffer and the number of splits.
    n_threads : int, default 1
        Blocks of trees whose statistics are counted in parallel (numba threads). The result
        does not depend on it. 1 uses the least CPU time and suits a shared machine; raise it
        on an idle multi-core machine to cut wall time, mostly in exact mode.
    seed : int or None, default None
        Accepted for uniformity with streammn's other learners; DTSL is deterministic (ties
        go to the first candidate in variable order), so it does not change the result.
    """

    resume_may_change = ("n_threads", "seed")  # settings that do not change the model

    def __init__(self, schema: Schema, kappa: float = 0.1, mode: str = "hoeffding",
                 grace_period: int = 200, delta: float = 1e-7, tau: float = 0.05,
                 max_depth: int | None = None, max_tree_leaves: int | None = 64,
                 max_leaves: int | None = None, memory_mb: float = 256.0, min_count: int = 10, prior: float = 1.0,
                 replay_rows: int = 0, n_threads: int = 1, seed: int | None = None):
        if not isinstance(schema, Schema):
            raise DTSLError(f"schema must be a streammn Schema, got {type(schema).__name__}")
        if not 0.0 < kappa <= 1.0:
            raise DTSLError(f"kappa must be in (0, 1], got {kappa!r}")
        if mode not in MODES:
            raise DTSLError(f"mode must be one of {MODES}, got {mode!r}")
        if grace_period < 1:
            raise DTSLError(f"grace_period must be >= 1, got {grace_period!r}")
        if not 0.0 < delta < 1.0:
            raise DTSLError(f"delta must be in (0, 1), got {delta!r}")
        if tau < 0:
            raise DTSLError(f"tau must be >= 0, got {tau!r}")
        if max_depth is not None and max_depth < 0:
            raise DTSLError(f"max_depth must be None or >= 0, got {max_depth!r}")
        if max_leaves is not None and max_leaves < 1:
            raise DTSLError(f"max_leaves must be None or >= 1, got {max_leaves!r}")
        if max_tree_leaves is not None and max_tree_leaves < 1:
            raise DTSLError(f"max_tree_leaves must be None or >= 1, got {max_tree_leaves!r}")
        if memory_mb <= 0:
            raise DTSLError(f"memory_mb must be positive, got {memory_mb!r}")
        if min_count < 1:
            raise DTSLError(f"min_count must be >= 1, got {min_count!r}")
        if prior <= 0:
            raise DTSLError(f"prior must be positive, got {prior!r}")
        if n_threads < 1:
            raise DTSLError(f"n_threads must be >= 1, got {n_threads!r}")
        if replay_rows < 0:
            raise DTSLError(f"replay_rows must be >= 0, got {replay_rows!r}")
        self.schema = schema
        self.kappa = float(kappa)
        self.mode = mode
        self.grace_period = int(grace_period)
        self.delta = float(delta)
        self.tau = float(tau)
        self.max_depth = None if max_depth is None else int(max_depth)
        self.max_leaves = None if max_leaves is None else int(max_leaves)
        self.max_tree_leaves = None if max_tree_leaves is None else int(max_tree_leaves)
        self.memory_mb = float(memory_mb)
        self.min_count = int(min_count)
        self.prior = float(prior)
        self.replay_rows = int(replay_rows)
        self.n_threads = int(n_threads)
        self.seed = seed
        self._reset()

    # parameters -----------------------------------------------------------------------------
    def get_params(self) -> dict:
        return {"kappa": self.kappa, "mode": self.mode, "grace_period": self.grace_period,
                "delta": self.delta, "tau": self.tau, "max_depth": self.max_depth,
                "max_tree_leaves": self.max_tree_leaves,
                "max_leaves": self.max_leaves, "memory_mb": self.memory_mb,
                "min_count": self.min_count, "prior": self.prior,
                "replay_rows": self.replay_rows, "n_threads": self.n_threads,
                "seed": self.seed}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"DTSL({self.schema!r}, {args})"

    @property
    def leaf_budget(self) -> int:
        """Leaves that may collect split statistics at once (``max_leaves`` or from memory_mb)."""
        if self.max_leaves is not None:
            return self.max_leaves
        dtype = STATS_DTYPE if self.mode == "hoeffding" else np.int64
        slot = LeafStats.slot_bytes(self.forest, dtype)
        return max(1, int(self.memory_mb * 2 ** 20 // slot))

    def _reset(self) -> None:
        self.forest = Forest(self.schema, prior=self.prior)
        self.rows_seen = 0
        self.n_passes = 0
        self._grower = None
        if self.mode == "hoeffding":
            self._grower = HoeffdingGrower(self.forest, self.kappa, self.grace_period,
                                           self.delta, self.tau, self.min_count, self.max_depth,
                                           self.leaf_budget, self.replay_rows, self.n_threads,
                                           max_tree_leaves=self.max_tree_leaves)

    # learning -------------------------------------------------------------------------------
    def _validate(self, batch) -> np.ndarray:
        if isinstance(batch, Batch):
            return self.schema.validate(batch.rows, row_offset=batch.start)
        return self.schema.validate(batch, row_offset=self.rows_seen)

    def partial_fit(self, batch) -> "DTSL":
        """Learn from one batch (Hoeffding mode): a :class:`~connectors.base.Batch` or a matrix.

        The batch is validated first; a :class:`~streammn.schema.SchemaError` leaves the model
        untouched.
        """
        if self.mode != "hoeffding":
            raise DTSLError("partial_fit needs mode='hoeffding'; exact mode learns with "
                            "fit(source) over a re-iterable source")
        rows = self._validate(batch)
        self._grower.learn(rows)
        self.rows_seen = self._grower.rows_seen
        return self

    def fit(self, source, count_pass=None) -> "DTSL":
        """Learn from scratch from ``source`` and return self.

        ``source`` is a :class:`~connectors.base.Source`, or a row matrix (wrapped in an
        :class:`~connectors.array.ArraySource`); Hoeffding mode also takes any iterable of
        batches. Exact mode rewinds the source once per tree level, unless ``count_pass``
        makes the passes elsewhere (:class:`streammn.distributed.DaskPasses`: on a Dask
        cluster, over the partitions of ``source``'s files); the trees are the same.
        """
        if count_pass is not None and self.mode != "exact":
            raise DTSLError("count_pass applies to mode='exact' only")
        if isinstance(source, np.ndarray):
            source = ArraySource(source, schema=self.schema)
        if isinstance(source, Source) and source.schema != self.schema:
            raise SchemaError(f"source schema {source.schema!r} differs from the learner's "
                              f"{self.schema!r}", source=source.describe())
        self._reset()
        if self.mode == "hoeffding":
            if isinstance(source, Source):
                source.rewind()
            for batch in source:
                self.partial_fit(batch)
            self.n_passes = 1
            return self
        if not isinstance(source, Source) or not source.rewindable:
            raise DTSLError("exact mode needs a re-iterable connectors Source (one pass per "
                            "tree level), e.g. ArraySource or a file source")
        self.n_passes = grow_level_wise(self.forest, source, self.kappa, self.min_count,
                                        self.max_depth, self.leaf_budget, self.n_threads,
                                        cache_bytes=int(self.memory_mb * 2 ** 20),
                                        count_pass=count_pass)
        self.rows_seen = int(self.forest.counts[self.forest.roots[0]].sum())
        return self

    def learn_many(self, rows) -> "DTSL":
        """river-style alias of :meth:`partial_fit`."""
        return self.partial_fit(rows)

    # results --------------------------------------------------------------------------------
    def features(self, method: str = "default"):
        """One :class:`~streammn.features.FeatureSet` per tree (paper Section III.B methods)."""
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
            trees = Forest.from_state(self.schema, self.prior, self.forest.get_state())
        return DependencyNetwork(self.schema, cpds, trees=trees)

    def pll_terms(self, rows) -> np.ndarray:
        """``log P(x_i | x_-i)`` of the current trees for every row and variable, straight from
        the leaves (no feature generation): what the engine's prequential score uses."""
        rows = self.schema.validate(rows)
        return self.forest.leaf_log_prob(rows)

    def tree_stats(self) -> dict:
        """Per-tree sizes: ``n_leaves``, ``depth``, ``n_nodes`` (arrays over variables)."""
        f = self.forest
        return {"n_leaves": f.n_leaves(), "depth": f.depths(),
                "n_nodes": 2 * f.n_leaves() - 1,
                "active_leaves": 0 if self._grower is None else self._grower.stats.n_active}

    def leaf_rows(self, i: int) -> np.ndarray:
        """Rows counted at each leaf of tree ``i``."""
        return self.forest.leaf_rows(i)

    # state ----------------------------------------------------------------------------------
    def get_state(self) -> tuple[dict, dict[str, np.ndarray]]:
        """Full learner state as (JSON-able metadata, plain numpy arrays)."""
        meta = {"format": STATE_FORMAT, "schema": self.schema.to_dict(),
                "params": self.get_params(), "rows_seen": self.rows_seen,
                "n_passes": self.n_passes}
        arrays = self.forest.get_state()
        if self._grower is not None:
            arrays.update(self._grower.get_state())
        return meta, arrays

    @classmethod
    def from_state(cls, meta: dict, arrays: dict) -> "DTSL":
        if meta.get("format") != STATE_FORMAT:
            raise DTSLError(f"unsupported DTSL state format {meta.get('format')!r}")
        model = cls(Schema.from_dict(meta["schema"]), **meta["params"])
        model.forest = Forest.from_state(model.schema, model.prior, arrays)
        model.rows_seen = int(meta["rows_seen"])
        model.n_passes = int(meta["n_passes"])
        if model.mode == "hoeffding":
            model._grower = HoeffdingGrower(model.forest, model.kappa, model.grace_period,
                                            model.delta, model.tau, model.min_count,
                                            model.max_depth, model.leaf_budget,
                                            model.replay_rows, model.n_threads, state=arrays,
                                            max_tree_leaves=model.max_tree_leaves)
        return model

    def to_bytes(self) -> bytes:
        """Serialise the full state (``.npz`` with the metadata as JSON)."""
        meta, arrays = self.get_state()
        buf = io.BytesIO()
        np.savez(buf, __meta__=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8),
                 **arrays)
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> "DTSL":
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
        meta = json.loads(arrays.pop("__meta__").tobytes().decode())
        return cls.from_state(meta, arrays)

    def equals(self, other: "DTSL") -> bool:
        """Same parameters and identical state (trees, counts, statistics)."""
        (ma, a), (mb, b) = self.get_state(), other.get_state()
        return ma == mb and a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)

