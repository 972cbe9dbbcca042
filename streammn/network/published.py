"""The weights a snapshot publishes: DN2MN's closed form, continued by pseudo-likelihood on rows
kept from the stream, published only when they score held-out rows of the stream better.

Why. DN2MN's closed form is exact for a consistent dependency network. Where the conditionals
are near-deterministic (one-hot categoricals, rare contexts) the base instance and orderings
put large, mutually inconsistent weights on rare contexts, and the Markov network scores far
worse than the trees it came from: test PLL of exact DTSL at its defaults, closed form against
its own DN, accidents -14.14 / -12.12, mushrooms -2.83 / -0.42.

What. The closed-form weights are the start and the centre of a Gaussian prior, and the weights
maximise ``PLL(w) - |w - w_closed|^2 / (2 stddev^2)`` on a training sample (L-BFGS over the
reach-list kernels of :mod:`streammn.network.reach_lists`). The prior's width is chosen on held-out
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

The rows. Every learner keeps a :class:`~streammn.network.weight_sample.WeightSample` of its stream
(its ``weights`` parameter, ``'refined'`` by default): a uniform sample, one row in
``HELD_OUT_EVERY`` held out by a hash of its index. A validation file, when the user gives one,
is the held-out set instead and every sampled row a training row. The sample is sized by
``MEMORY_MB``, the budget of the weight step (sample and reach lists). :meth:`StructureLearner.
to_markov_network <streammn.learner.StructureLearner.to_markov_network>` publishes through
:func:`publish_sample` with a full fit; the engine adds the warm start and the budget below.

The cost. At a periodic snapshot a probe first fits the narrowest prior on at most
``PROBE_ROWS`` of the training rows: where even that does not beat the closed form on
``PROBE_HELD_OUT`` held-out rows (a long stream of noisy data, where the closed form of trees
grown on millions of rows is already as good as a sample of twenty thousand can make it) the
closed form is published after a fraction of the work, and the next probe waits until the
stream has doubled. The probe's size is its cost: at 2,000 and 1,000 rows it cost a 1M-row
stream with one snapshot 12.7% of its throughput, at 1,000 and 500 rows 7.5%. A small probe
decides noisily where the gain is small (nltcs: its probe kept the closed form, -4.942 test PLL
against -4.897 refined), so the model a run leaves behind, at the end of a finite source, and
the one :meth:`~streammn.learner.StructureLearner.to_markov_network` gives, get no probe: the
full search decides. Each width's fit stops
after ``MAX_ITER`` iterations (plants and accidents lose 0.001
and 0.01 nats against 100, at 60% of the time). The first fit of a run, and the fit of the
snapshot at the end of a finite source, have no other limit; every other snapshot's fits spend
what the rows learned have earned, ``WORK_PER_ROW`` evaluations of one training row per row
(:meth:`WeightState.affordable`), so frequent snapshots of a fast stream cost the stream a
bounded share instead of a full fit each (msnbc, 60,000 rows, a snapshot every 5,000: 57 s
with a full fit at each, 8 s at half an evaluation per row). An evaluation of a sample row
costs more than learning a row does (at 100 binary variables and 1,500 features about 8 us,
where ``streammn learn`` takes about 3 us a row, reading included), so half an evaluation per
row let a snapshot every 100k rows spend more time on its fit than the stream took to learn
those rows; a tenth bounds it to about a quarter, and as the weights carry over, a fit cut
short continues at the next snapshot. Between snapshots the weights carry over
(:func:`start_weights`: features that survived keep their weights, new ones start from the
closed form): the carried-over weights are a candidate of their own, and the start of the
next fit, whose width search begins at the width chosen last. The optimum of each width does
not depend on the start, so a warm start changes the time, not the result (within L-BFGS's
tolerance). :class:`WeightState` holds what carries over; the engine checkpoints it with the
sample, so a run killed and resumed continues exactly as it would have.
"""

from __future__ import annotations

import time
from typing import Any, Callable
from dataclasses import dataclass, field

import numpy as np

from streammn.network import reach_lists
from streammn.features._merge import duplicate_groups
from streammn.errors import WeightStateError, WeightsError
from streammn.features import FeatureSet
from streammn.packed_state import pack_state, unpack_state
from streammn.network.model import MarkovNetwork
from streammn.schema import Schema, complete_rows, rows_within
from streammn.network.weight_sample import WeightSample, held_out_mask, list_bytes

WEIGHTS = ("refined", "closed-form")
PROBE_ROWS = 1_000  # training rows of the probe, at most
PROBE_HELD_OUT = 500  # held-out rows that judge the probe, at most
STDDEVS = (0.03, 0.1, 0.3, 1.0, 3.0)
MAX_ITER = 50  # L-BFGS iterations per prior width, at most (warm starts carry on from there)
TOL = 1e-7
WORK_PER_ROW = 0.1  # training-row evaluations each learned row earns the fits after the first


def check_weights(weights: str) -> str:
    """``weights`` if it is one of ``WEIGHTS``, else :class:`WeightsError`."""
    if weights not in WEIGHTS:
        raise WeightsError(f"weights must be one of {', '.join(WEIGHTS)}, got {weights!r}")
    return weights


# ---------------------------------------------------------------------------------------------
# what carries over from one snapshot to the next
# ---------------------------------------------------------------------------------------------


@dataclass
class WeightState:
    """Where the refinements so far left off: the last refined features and weights (``None``
    when the closed form was published), the prior width the held-out rows chose, the work
    spent by budgeted fits (``spent``, in training-row evaluations), the number of fits
    made without a budget (``full_fits``), and the row before which no probe is made again
    (``probe_after``: twice the rows seen at the last probe that found nothing to gain)."""

    features: FeatureSet | None = None
    stddev: float | None = None
    spent: float = 0.0
    full_fits: int = 0
    probe_after: int = 0

    def to_bytes(self) -> bytes:
        meta = {
            "stddev": self.stddev,
            "spent": self.spent,
            "full_fits": self.full_fits,
            "probe_after": self.probe_after,
        }
        if self.features is None:
            return pack_state(meta, {})
        fs = self.features
        return pack_state(
            {**meta, "schema": fs.schema.to_dict()},
            {"weights": fs.weights, "ptr": fs.ptr, "var": fs.var, "val": fs.val, "eq": fs.eq},
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> "WeightState":
        try:
            meta, a = unpack_state(data)
            features = None
            if "schema" in meta:
                features = FeatureSet(
                    Schema.from_dict(meta["schema"]),
                    a["weights"],
                    a["ptr"],
                    a["var"],
                    a["val"],
                    a["eq"],
                )
            return cls(
                features,
                meta["stddev"],
                float(meta["spent"]),
                int(meta["full_fits"]),
                int(meta["probe_after"]),
            )
        except (ValueError, OSError, KeyError, TypeError) as e:
            raise WeightStateError(f"not a weight state: {e}") from None

    def affordable(self, rows_seen: int, train_rows: int) -> float | None:
        """Evaluations of the whole training sample the next fit may make: no limit
        (``None``) for the first fit, else what ``WORK_PER_ROW`` per row learned has earned
        beyond the work spent already."""
        if self.full_fits == 0:
            return None
        return max(WORK_PER_ROW * rows_seen - self.spent, 0.0) / max(train_rows, 1)


def start_weights(features: FeatureSet, warm: FeatureSet | None) -> np.ndarray:
    """``features``' weights, except that a feature ``warm`` also holds (same conditions)
    starts from ``warm``'s weight."""
    weights = features.weights.copy()
    if warm is None or warm.n_features == 0 or features.n_features == 0:
        return weights
    ptr = np.concatenate([warm.ptr, warm.ptr[-1] + features.ptr[1:]])
    group, first = duplicate_groups(
        ptr,
        np.concatenate([warm.var, features.var]),
        np.concatenate([warm.val, features.val]),
        np.concatenate([warm.eq, features.eq]),
    )
    source = first[group[warm.n_features :]]
    seen = source < warm.n_features
    weights[seen] = warm.weights[source[seen]]
    return weights


# ---------------------------------------------------------------------------------------------
# the fit
# ---------------------------------------------------------------------------------------------


@dataclass
class Published:
    """What :func:`publish` decided: the model to publish, the manifest's record of the choice,
    the state to continue from at the next snapshot, and the seconds it took."""

    model: MarkovNetwork
    record: dict = field(default_factory=dict)
    state: WeightState = field(default_factory=WeightState)
    seconds: float = 0.0


class _Search:
    """One snapshot's fits, scored on the held-out rows, and the work they cost (in
    evaluations of the whole training sample)."""

    def __init__(
        self,
        fs: FeatureSet,
        train: np.ndarray,
        held_out: np.ndarray,
        budget_bytes: int,
        max_evaluations: float | None,
    ):
        self.fs, self.train, self.budget_bytes = fs, train, budget_bytes
        self.left = np.inf if max_evaluations is None else max_evaluations
        self.evaluations = 0.0
        self.iterations = 0
        self.held_out = held_out
        self._judge: Callable[[np.ndarray], float] | None = None
        self._evaluate = None
        self.scores: dict[int, tuple[float, np.ndarray]] = {}

    def held_pll(self, w: np.ndarray) -> float:
        """The mean held-out PLL at weights ``w`` (the reach lists built at the first call)."""
        if self._judge is None:
            self._judge = held_out_pll(self.fs, self.held_out, self.budget_bytes)
        return self._judge(w)

    def fit(self, rows: np.ndarray, w0: np.ndarray, stddev: float) -> np.ndarray | None:
        """L-BFGS from ``w0`` with a ``N(closed form, stddev^2)`` prior on ``rows`` (the whole
        sample or a probe's share of it), within the work left; ``None`` when none is."""
        from streammn.network.weights import minimise, penalised

        share = rows.shape[0] / self.train.shape[0]  # one evaluation's work
        if self.left < share:
            return None
        if rows is self.train:  # its reach lists serve every width
            if self._evaluate is None:
                self._evaluate = reach_lists.pll_evaluator(
                    self.fs, rows, list_bytes=self.budget_bytes
                )
            evaluate = self._evaluate
        else:
            evaluate = reach_lists.pll_evaluator(self.fs, rows, list_bytes=self.budget_bytes)
        objective = penalised(evaluate, rows.shape[0], stddev, self.fs.weights)
        w, info = minimise(
            objective, w0, MAX_ITER, TOL, max_evaluations=int(min(self.left / share, 10 * MAX_ITER))
        )
        self.iterations += info["iterations"]
        self.evaluations += info["evaluations"] * share
        self.left -= info["evaluations"] * share
        return w

    def fit_at(self, k: int, w0: np.ndarray) -> bool:
        """Fit the ``k``-th prior width on the whole sample; whether there was work left."""
        w = self.fit(self.train, w0, STDDEVS[k])
        if w is not None:
            self.scores[k] = (self.held_pll(w), w)
        return w is not None

    def climb(self, k0: int, step: int) -> bool:
        """Fit the widths from ``k0`` on in direction ``step`` while each scores better than
        the one before; whether it moved at all."""
        k = k0
        while 0 <= k + step < len(STDDEVS) and self.fit_at(k + step, self.scores[k][1]):
            if not self.scores[k + step][0] > self.scores[k][0]:
                break
            k += step
        return k != k0


def publish(
    model: MarkovNetwork,
    train: np.ndarray,
    held_out: np.ndarray,
    state: WeightState | None = None,
    budget_bytes: int | None = None,
    learner_pll: float | None = None,
    max_evaluations: float | None = None,
    rows_seen: int | None = None,
    probe: bool = True,
) -> Published:
    """The weights to publish for ``model`` (DN2MN's closed form, or any learner's network):
    refined on ``train`` as the module docstring says, kept if they beat ``model``'s own on
    ``held_out``. ``learner_pll`` (the learner's own held-out PLL, e.g. its DN's) is recorded
    beside the candidates.

    ``state`` is where the last snapshot's refinement left off: its weights carried over to
    the features that survived are a candidate of their own and the start of the fit, whose
    search over prior widths then begins at the width chosen last time and moves to a
    neighbour only while that scores better (wider first, then narrower). From the closed
    form the search walks ``STDDEVS`` from the narrowest, after the probe. ``max_evaluations``
    limits the fits' work, in evaluations of the whole training sample (``None``: no limit;
    a line search stops at it). ``rows_seen`` (of a stream)
    lets a probe that found nothing to gain wait until the stream has doubled: until then the
    closed form is published as it is, unscored. ``probe=False`` skips the probe (the model a
    run leaves behind, or one asked for: the full search decides)."""
    t0 = time.perf_counter()
    state = state or WeightState()
    warm = state.features is not None
    record: dict[str, Any] = {
        "published": "closed-form",
        "train_rows": int(train.shape[0]),
        "held_out_rows": int(held_out.shape[0]),
        "held_out_pll": {
            "published": None,
            "closed_form": None,
            "carried_over": None,
            "refined": None,
            "learner": learner_pll,
        },
        "stddev": None,
        "iterations": 0,
        "evaluations": 0.0,
        "warm_start": warm,
        "budget_evaluations": max_evaluations,
    }
    fs = model.features

    def done(published: Published) -> Published:
        published.seconds = time.perf_counter() - t0
        return published

    if fs.n_features == 0 or train.shape[0] == 0 or held_out.shape[0] == 0:
        return done(Published(model, record, state))
    if not warm and rows_seen is not None and rows_seen < state.probe_after:
        record["probe"] = f"not before row {state.probe_after:,}"
        return done(Published(model, record, state))
    search = _Search(
        fs,
        train,
        held_out,
        reach_lists.LIST_BYTES if budget_bytes is None else budget_bytes,
        max_evaluations,
    )
    w = start_weights(fs, state.features)
    if probe and not warm and train.shape[0] > PROBE_ROWS:  # a cheap look: does a sample help?
        rows = held_out[:: -(-held_out.shape[0] // PROBE_HELD_OUT)]
        look = held_out_pll(fs, rows, search.budget_bytes)
        probed = search.fit(train[:: -(-train.shape[0] // PROBE_ROWS)], w, STDDEVS[0])
        scores = (look(fs.weights), None if probed is None else look(probed))
        if probed is None or not scores[1] > scores[0]:
            record["probe"] = {
                "result": "no work left" if probed is None else "no better than the closed form",
                "held_out_rows": int(rows.shape[0]),
                "held_out_pll": {"closed_form": scores[0], "probe": scores[1]},
            }
            after = _decide(model, (None, None, None), record, state, search, max_evaluations)
            if probed is not None and rows_seen is not None:
                after.state.probe_after = 2 * rows_seen
            return done(after)
        w = probed
    pll = record["held_out_pll"]
    pll["closed_form"] = search.held_pll(fs.weights)
    # (held-out PLL, weights, prior width)
    best: tuple[float, np.ndarray | None, float | None] = (pll["closed_form"], None, None)
    if warm:
        pll["carried_over"] = search.held_pll(w)
        best = max(best, (pll["carried_over"], w, state.stddev), key=lambda b: b[0])
    # (a warm state has the prior width chosen last time)
    k0 = int(np.argmin(np.abs(np.log(STDDEVS) - np.log(state.stddev)))) if warm else 0  # type: ignore[arg-type]
    if search.fit_at(k0, w) and not search.climb(k0, 1) and warm:
        search.climb(k0, -1)
    if search.scores:
        k = max(search.scores, key=lambda k: search.scores[k][0])
        pll["refined"] = search.scores[k][0]
        best = max(best, (*search.scores[k], STDDEVS[k]), key=lambda b: b[0])
    return done(_decide(model, best, record, state, search, max_evaluations))


def held_out_pll(fs: FeatureSet, rows: np.ndarray, budget_bytes: int):
    """``weights -> mean PLL of rows`` for the features of ``fs`` (reach lists built once, in a
    quarter of ``budget_bytes``)."""
    evaluate = reach_lists.pll_evaluator(fs, rows, list_bytes=budget_bytes // 4)
    return lambda w: evaluate(w)[0] / rows.shape[0]


def _decide(
    model: MarkovNetwork,
    best: tuple,
    record: dict,
    state: WeightState,
    search: _Search,
    max_evaluations: float | None,
) -> Published:
    """The best candidate published, and the state after it: a budgeted search's work is
    spent, an unbudgeted one counted."""
    score, weights, stddev = best
    record["held_out_pll"]["published"] = score
    record["iterations"] = search.iterations
    record["evaluations"] = round(search.evaluations, 3)
    if weights is not None:
        model = model.with_weights(weights)
        record["published"], record["stddev"] = "refined", stddev
    features = model.features if weights is not None else None
    if max_evaluations is None:
        after = WeightState(features, stddev, state.spent, state.full_fits + 1, state.probe_after)
    else:
        after = WeightState(
            features,
            stddev,
            state.spent + search.evaluations * search.train.shape[0],
            state.full_fits,
            state.probe_after,
        )
    return Published(model, record, after)


def publish_sample(
    model: MarkovNetwork,
    sample: WeightSample,
    validation: np.ndarray | None = None,
    state: WeightState | None = None,
    learner_pll: float | None = None,
    max_evaluations: float | None = None,
    rows_seen: int | None = None,
    probe: bool = True,
) -> Published:
    """:func:`publish` on a learner's sample (the rows of :func:`sample_split`)."""
    train, held = sample_split(model.schema, sample, validation)
    return publish(
        model,
        train,
        held,
        state,
        list_bytes(sample),
        learner_pll,
        max_evaluations,
        rows_seen,
        probe,
    )


def sample_split(
    schema: Schema, sample: WeightSample, validation: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The rows a refinement on ``sample`` fits and is judged on: its training rows and its
    held-out rows, or every sampled row and ``validation`` when given; of each, the rows a
    network over ``schema`` can score (:func:`scorable_rows`)."""
    train = sample.rows if validation is not None else sample.train
    held = sample.held_out if validation is None else validation
    # (scorable_rows gives None for None rows only)
    return scorable_rows(schema, train), scorable_rows(schema, held)  # type: ignore[return-value]


def scorable_rows(schema: Schema, rows: np.ndarray | None) -> np.ndarray | None:
    """The rows a Markov network over ``schema`` scores by pseudo-likelihood: those within the
    values a growing schema has added so far (:func:`~streammn.schema.rows_within`)
    and, in missing mode, without a missing value."""
    rows = rows_within(schema, rows)
    return complete_rows(rows) if schema.missing and rows is not None else rows


def refine_on_rows(
    model: MarkovNetwork, rows: np.ndarray, held_out: np.ndarray | None = None
) -> Published:
    """:func:`publish` on rows in memory: ``held_out``, or else one row of ``rows`` in
    ``HELD_OUT_EVERY`` (by :func:`held_out_mask`), judges the weights refined on the others."""
    rows = model.schema.rows_of(rows)
    if held_out is None:
        held = held_out_mask(0, rows.shape[0])
        rows, held_out = rows[~held], rows[held]
    else:
        held_out = model.schema.rows_of(held_out)
    return publish(model, rows, held_out)


def warm_up(model: MarkovNetwork) -> None:
    """Run the kernels of a refinement once on two rows (loading them into this process, so
    that forked snapshot writers inherit them; see ``StreamLearner._load_writer_kernels``)."""
    if model.n_features:
        rows = np.zeros((2, model.schema.n_vars), dtype=np.uint8)
        publish(model, rows, rows[:1])
