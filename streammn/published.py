"""The weights a snapshot publishes: DN2MN's closed form, continued by pseudo-likelihood on rows
kept from the stream, published only when they score held-out rows of the stream better.

Why. DN2MN's closed form is exact for a consistent dependency network. Where the conditionals
are near-deterministic (one-hot categoricals, rare contexts) the base instance and orderings
put large, mutually inconsistent weights on rare contexts, and the Markov network scores far
worse than the trees it came from: test PLL of exact DTSL at its defaults, closed form against
its own DN, accidents -14.14 / -12.12, mushrooms -2.83 / -0.42.

What. The closed-form weights are the start and the centre of a Gaussian prior, and the weights
maximise ``PLL(w) - |w - w_closed|^2 / (2 stddev^2)`` on a training sample (L-BFGS over the
reach-list kernels of :mod:`streammn.reach_lists`). The prior's width is chosen on held-out
rows along a path ``STDDEVS``, narrow to wide: each fit starts from the last one's optimum, and
the path stops at the first width that does not score the held-out rows better than the best
so far. The refined weights are published only if they score the held-out rows better than
the closed form; otherwise the closed form is, so refining never makes the published model
worse on those rows.

Measured at exact DTSL's defaults (train / valid / test splits of ``../shared/data``), test
PLL, the options tried for this choice:

============ ======== ========== ======================= ========================
dataset      DN       closed     leaf features, PLL fit  DN2MN features, centred
============ ======== ========== ======================= ========================
accidents    -12.115  -14.137    -11.81 (stddev 1)       -11.48 (stddev 0.1)
mushrooms    -0.423   -2.835     -0.122 (stddev 10)      -0.139 (stddev 1, 30 it)
plants       -9.088   -9.252     -8.74 (stddev 0.3)      -8.42 (stddev 0.05)
============ ======== ========== ======================= ========================

Fitting the DN's own leaf features (what Libra's weight learning does) from zero-mean priors is
cheaper but loses to the DN2MN features on two of three; DN2MN's feature set holds every leaf
feature anyway (a leaf's feature is its own subfeature with every other variable kept). A
zero-mean prior over DN2MN's features lost too (accidents -11.95, plants -9.36). The prior must
be centred on the closed form, and its width depends on the data by a factor of 30 (plants
overfits at stddev 1: -9.68 converged; mushrooms needs 1 or more), hence the path.

The rows. :class:`WeightSample` keeps a uniform sample of the stream for training and another
of held-out rows: row ``t`` of the stream (0-based) is held out when a hash of ``t`` says so,
one row in ``HELD_OUT_EVERY``, so the split depends on the row's place in the stream only, not
on how it was cut into batches. A validation file, when the user gives one, is the held-out
set instead and every row is a training row. The sample is sized by ``memory_mb``, the budget
of the weight step (sample and reach lists).

The cost. A probe first fits the narrowest prior on at most ``PROBE_ROWS`` of the training
rows: where even that does not beat the closed form on the held-out rows (a long stream of
noisy data, where the closed form of trees grown on millions of rows is already as good as a
sample of twenty thousand can make it) the closed form is published after a fraction of the
work. Between snapshots the fit continues from the last refined weights (:func:`start_weights`:
features that survived keep their weights, new ones start from the closed form); the optimum
of each width does not depend on the start, so a warm start changes the time, not the result
(within L-BFGS's tolerance).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from streammn import reach_lists
from streammn._merge import duplicate_groups
from streammn.errors import DataError, SettingsError
from streammn.features import FeatureSet
from streammn.learner import pack_state, unpack_state
from streammn.model import MarkovNetwork
from streammn.schema import MISSING, Schema
from streammn.stats.reservoir import RowReservoir
from streammn.stats.store import StatsFormatError

WEIGHTS = ("refined", "closed-form")
MEMORY_MB = 64.0  # the weight step's budget: the sample and the reach lists of a fit
SAMPLE_ROWS = 20_000  # training rows kept, at most (fewer when the budget says so)
HELD_OUT_EVERY = 5  # one row in five is held out (when no validation file is given)
SAMPLE_SHARE = 8  # the sample takes at most 1/8 of the budget, the reach lists the rest
PROBE_ROWS = 2_000
STDDEVS = (0.03, 0.1, 0.3, 1.0, 3.0)
MAX_ITER = 100  # L-BFGS iterations per prior width, at most
TOL = 1e-7


class WeightsError(SettingsError):
    """A bad ``weights`` choice or budget."""


class WeightStateError(DataError):
    """A saved weight sample or warm-start state that cannot be read."""


def check_weights(weights: str) -> str:
    if weights not in WEIGHTS:
        raise WeightsError(f"weights must be one of {', '.join(WEIGHTS)}, got {weights!r}")
    return weights


# ---------------------------------------------------------------------------------------------
# the rows kept
# ---------------------------------------------------------------------------------------------

def held_out_mask(first: int, n: int) -> np.ndarray:
    """Which of the stream rows ``first .. first + n - 1`` are held out: those whose index,
    hashed (splitmix64's finaliser), falls in one bucket of ``HELD_OUT_EVERY``."""
    x = np.arange(first, first + n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    return x % np.uint64(HELD_OUT_EVERY) == 0


class WeightSample:
    """The rows the published weights are fitted (``train``) and judged (``held_out``) on.

    Parameters
    ----------
    schema : Schema
        The variables (a growing schema's ceiling: the sample never grows).
    memory_mb : float
        Budget of the weight step; the sample takes at most ``1/SAMPLE_SHARE`` of it.
    hold_out : bool
        Hold every ``HELD_OUT_EVERY``-th row (by hash) out of training (default); ``False`` when
        a validation file is the held-out set.
    seed : int
        Seed of the two reservoirs.

    In missing mode only complete rows are kept: a pseudo-likelihood term reads the whole
    Markov blanket of its variable, so a row with a hole gives no exact term for its neighbours.
    """

    def __init__(self, schema: Schema, memory_mb: float = MEMORY_MB, hold_out: bool = True,
                 seed: int = 0):
        if not memory_mb > 0:
            raise WeightsError(f"memory_mb must be positive, got {memory_mb}")
        self.schema = schema
        self.memory_mb = float(memory_mb)
        self.hold_out = bool(hold_out)
        rows = sample_rows(schema.n_vars, memory_mb)
        held = max(rows // (HELD_OUT_EVERY - 1), 1) if hold_out else 1
        self._train = RowReservoir(schema, capacity=rows, seed=seed)
        self._held = RowReservoir(schema, capacity=held, seed=seed + 1)

    @property
    def train(self) -> np.ndarray:
        return self._train.rows

    @property
    def held_out(self) -> np.ndarray | None:
        """The held-out rows (``None`` when a validation file plays that part)."""
        return self._held.rows if self.hold_out else None

    @property
    def nbytes(self) -> int:
        return self._train._sample.nbytes + self._held._sample.nbytes

    def update(self, rows: np.ndarray, first: int) -> None:
        """Offer rows ``first .. first + len(rows) - 1`` of the stream."""
        if self.hold_out:
            held = held_out_mask(first, rows.shape[0])
            self._offer(self._held, rows[held])
            rows = rows[~held]
        self._offer(self._train, rows)

    def _offer(self, reservoir: RowReservoir, rows: np.ndarray) -> None:
        if self.schema.missing:
            rows = rows[(rows != MISSING).all(axis=1)]
        if rows.shape[0]:
            reservoir.update(rows)

    def to_bytes(self) -> bytes:
        return pack_state({"memory_mb": self.memory_mb, "hold_out": self.hold_out},
                          {"train": np.frombuffer(self._train.to_bytes(), np.uint8),
                           "held_out": np.frombuffer(self._held.to_bytes(), np.uint8)})

    @classmethod
    def from_bytes(cls, data: bytes) -> "WeightSample":
        try:
            meta, arrays = unpack_state(data)
            train = RowReservoir.from_bytes(arrays["train"].tobytes())
            held = RowReservoir.from_bytes(arrays["held_out"].tobytes())
            sample = cls(train.schema, meta["memory_mb"], meta["hold_out"])
        except (ValueError, OSError, KeyError, TypeError, StatsFormatError) as e:
            raise WeightStateError(f"not a weight sample: {e}") from None
        sample._train, sample._held = train, held
        return sample


def sample_rows(n_vars: int, memory_mb: float) -> int:
    """Training rows the sample keeps under a budget of ``memory_mb``."""
    share = memory_mb * 2 ** 20 / SAMPLE_SHARE
    return int(max(min(SAMPLE_ROWS, share * (HELD_OUT_EVERY - 1) / HELD_OUT_EVERY / n_vars),
                   1))


def list_bytes(sample: WeightSample) -> int:
    """The reach lists' share of the budget: what the sample leaves."""
    return max(int(sample.memory_mb * 2 ** 20) - sample.nbytes, 0)


# ---------------------------------------------------------------------------------------------
# warm start
# ---------------------------------------------------------------------------------------------

@dataclass
class Warm:
    """Where the last refinement ended: its features and weights, and the prior width the
    held-out rows chose."""

    features: FeatureSet
    stddev: float

    def to_bytes(self) -> bytes:
        fs = self.features
        return pack_state({"schema": fs.schema.to_dict(), "stddev": self.stddev},
                          {"weights": fs.weights, "ptr": fs.ptr, "var": fs.var, "val": fs.val,
                           "eq": fs.eq})


def warm_to_bytes(warm: Warm | None) -> bytes:
    """The warm-start state as bytes (an empty state for ``None``)."""
    return pack_state({}, {}) if warm is None else warm.to_bytes()


def warm_from_bytes(data: bytes) -> Warm | None:
    try:
        meta, a = unpack_state(data)
        if not meta:
            return None
        features = FeatureSet(Schema.from_dict(meta["schema"]), a["weights"], a["ptr"],
                              a["var"], a["val"], a["eq"])
        return Warm(features, float(meta["stddev"]))
    except (ValueError, OSError, KeyError, TypeError) as e:
        raise WeightStateError(f"not a warm-start state: {e}") from None


def start_weights(features: FeatureSet, warm: FeatureSet | None) -> np.ndarray:
    """``features``' weights, except that a feature ``warm`` also holds (same conditions)
    starts from ``warm``'s weight."""
    weights = features.weights.copy()
    if warm is None or warm.n_features == 0 or features.n_features == 0:
        return weights
    ptr = np.concatenate([warm.ptr, warm.ptr[-1] + features.ptr[1:]])
    group, first = duplicate_groups(ptr, np.concatenate([warm.var, features.var]),
                                    np.concatenate([warm.val, features.val]),
                                    np.concatenate([warm.eq, features.eq]))
    source = first[group[warm.n_features:]]
    seen = source < warm.n_features
    weights[seen] = warm.weights[source[seen]]
    return weights


# ---------------------------------------------------------------------------------------------
# the fit
# ---------------------------------------------------------------------------------------------

@dataclass
class Published:
    """What :func:`publish` decided: the model to publish, the manifest's record of the choice,
    and where to continue from at the next snapshot (``None``: from the closed form)."""

    model: MarkovNetwork
    record: dict = field(default_factory=dict)
    warm: Warm | None = None
    seconds: float = 0.0


def publish(model: MarkovNetwork, train: np.ndarray, held_out: np.ndarray,
            warm: Warm | None = None, budget_bytes: int | None = None,
            learner_pll: float | None = None) -> Published:
    """The weights to publish for ``model`` (DN2MN's closed form, or any learner's network):
    refined on ``train`` as the module docstring says, kept if they beat ``model``'s own on
    ``held_out``. ``learner_pll`` (the learner's own held-out PLL, e.g. its DN's) is recorded
    beside the candidates.

    From a ``warm`` start the search over prior widths begins at the width chosen last time
    and moves to a neighbour only while that scores better (wider first, then narrower); from
    the closed form it walks ``STDDEVS`` from the narrowest, after the probe."""
    t0 = time.perf_counter()
    record = {"published": "closed-form", "train_rows": int(train.shape[0]),
              "held_out_rows": int(held_out.shape[0]),
              "held_out_pll": {"closed_form": None, "refined": None, "learner": learner_pll},
              "stddev": None, "iterations": 0, "warm_start": warm is not None}
    fs = model.features

    def done(published: Published) -> Published:
        published.seconds = time.perf_counter() - t0
        return published

    if fs.n_features == 0 or train.shape[0] == 0 or held_out.shape[0] == 0:
        return done(Published(model, record))
    budget = reach_lists.LIST_BYTES if budget_bytes is None else budget_bytes
    judge = reach_lists.pll_evaluator(fs, held_out, list_bytes=budget // 4)

    def held_pll(w):
        return judge(w)[0] / held_out.shape[0]

    closed = held_pll(fs.weights)
    record["held_out_pll"]["closed_form"] = closed
    w = start_weights(fs, warm.features if warm is not None else None)
    if warm is None and train.shape[0] > PROBE_ROWS:  # a cheap look: does a sample help?
        probe = train[::-(-train.shape[0] // PROBE_ROWS)]
        w, it = _fit(fs, probe, w, STDDEVS[0], budget)
        record["iterations"] += it
        if not held_pll(w) > closed:
            record["probe"] = "no better than the closed form"
            return done(Published(model, record))
    evaluate = reach_lists.pll_evaluator(fs, train, list_bytes=budget)
    scores = {}

    def fit_at(k: int, w0: np.ndarray) -> np.ndarray:
        w, it = _fit(fs, train, w0, STDDEVS[k], budget, evaluate)
        record["iterations"] += it
        scores[k] = (held_pll(w), w)
        return w

    def climb(k: int, step: int) -> bool:
        """Fit the widths from ``k`` on in direction ``step`` while each scores better than
        the one before; whether it moved at all."""
        w = scores[k][1]
        while 0 <= k + step < len(STDDEVS):
            w = fit_at(k + step, w)
            if not scores[k + step][0] > scores[k][0]:
                break
            k += step
        return k != k0

    k0 = 0 if warm is None else int(np.argmin(np.abs(np.log(STDDEVS) - np.log(warm.stddev))))
    fit_at(k0, w)
    if not climb(k0, 1) and warm is not None:
        climb(k0, -1)
    k_best = max(scores, key=lambda k: scores[k][0])
    best, best_w = scores[k_best]
    record["held_out_pll"]["refined"] = best
    record["stddev"] = STDDEVS[k_best]
    if not best > closed:
        return done(Published(model, record))
    refined = model.with_weights(best_w)
    record["published"] = "refined"
    return done(Published(refined, record, Warm(refined.features, STDDEVS[k_best])))


def warm_up(model: MarkovNetwork) -> None:
    """Run the kernels of a refinement once on two rows (loading them into this process, so
    that forked snapshot writers inherit them; see ``StreamLearner._load_writer_kernels``)."""
    if model.n_features:
        rows = np.zeros((2, model.schema.n_vars), dtype=np.uint8)
        publish(model, rows, rows[:1])


def _fit(fs: FeatureSet, rows: np.ndarray, w0: np.ndarray, stddev: float, budget: int,
         evaluate=None) -> tuple[np.ndarray, int]:
    """L-BFGS from ``w0`` on the PLL of ``rows`` with a ``N(fs.weights, stddev^2)`` prior:
    the optimum's weights and the iterations taken."""
    from streammn.weights import minimise, penalised

    if evaluate is None:
        evaluate = reach_lists.pll_evaluator(fs, rows, list_bytes=budget)
    objective = penalised(evaluate, rows.shape[0], stddev, fs.weights)
    w, info = minimise(objective, w0, MAX_ITER, TOL)
    return w, info["iterations"]
